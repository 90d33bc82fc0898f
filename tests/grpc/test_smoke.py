"""The gRPC front end (docs/grpc.md) through Google's own Python SDK, google-cloud-firestore,
pointed at the sidecar with FIRESTORE_EMULATOR_HOST as at the Firebase emulator: the SDK
connects (HTTP/2 without TLS, `Bearer owner`) and gets the front end's answer. No RPC is served
yet, so a document read is UNIMPLEMENTED naming its RPC; without --dev-mode the SDK's
`Bearer owner` is refused."""

import pytest
from conftest import grpc_sidecar
from google.api_core import exceptions
from google.cloud import firestore


def sdk_client(monkeypatch, address: str) -> firestore.Client:
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", address)
    return firestore.Client(project="demo")


def test_a_document_read_reaches_the_front_end(monkeypatch, firestore_emulator_host):
    client = sdk_client(monkeypatch, firestore_emulator_host)
    with pytest.raises(exceptions.MethodNotImplemented) as raised:
        client.collection("x").document("y").get()
    # The SDK reads a document with BatchGetDocuments; the answer names it.
    assert "google.firestore.v1.Firestore/BatchGetDocuments" in str(raised.value)


def test_owner_is_refused_without_dev_mode(monkeypatch, stack):
    with grpc_sidecar(stack) as address:
        client = sdk_client(monkeypatch, address)
        with pytest.raises(exceptions.Unauthenticated) as raised:
            client.collection("x").document("y").get()
        assert "invalid credentials" in str(raised.value)
