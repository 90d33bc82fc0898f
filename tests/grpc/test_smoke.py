"""The gRPC front end (docs/grpc.md) through Google's own Python SDK, google-cloud-firestore,
pointed at the sidecar with FIRESTORE_EMULATOR_HOST as at the Firebase emulator: the SDK
connects (HTTP/2 without TLS, `Bearer owner`), reads what the HTTP API wrote with every value
type intact, sees a missing document as missing, writes what the HTTP API reads, and gets
UNIMPLEMENTED naming the RPC for what is not served. Without --dev-mode the SDK's `Bearer owner` is refused."""

import datetime
import math

import pytest
from conftest import grpc_sidecar
from google.api_core import exceptions
from google.cloud import firestore
from google.cloud.firestore_v1.vector import Vector


def sdk_client(monkeypatch, address: str) -> firestore.Client:
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", address)
    return firestore.Client(project="demo")


def test_the_sdk_reads_what_http_wrote(monkeypatch, stack, client, coll, firestore_emulator_host):
    data = {
        "int": 9223372036854775807,
        "min": -9223372036854775808,
        "neg_zero": {"$double": "-0.0"},
        "nan": {"$double": "NaN"},
        "when": {"$timestamp": "2024-01-02T03:04:05.123456Z"},
        "bytes": {"$bytes": "AAH/"},
        "where": {"$geo": [48.85, 2.35]},
        "ref": {"$ref": f"{coll}/other"},
        "vec": {"$vector": [1.0, 2.5]},
        "map": {"a.b": 2, "`": 3, "ключ": [True, None, "s"]},
    }
    r = client.put(stack.doc(f"{coll}/a"), json=data, headers=stack.admin)
    assert r.status_code == 200, r.text

    db = sdk_client(monkeypatch, firestore_emulator_host)
    snap = db.collection(coll).document("a").get()
    assert snap.exists
    got = snap.to_dict()
    assert got["int"] == 2**63 - 1 and got["min"] == -(2**63)
    assert got["neg_zero"] == 0.0 and math.copysign(1.0, got["neg_zero"]) == -1.0
    assert math.isnan(got["nan"])
    assert got["when"] == datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=datetime.UTC)
    assert got["bytes"] == b"\x00\x01\xff"
    assert (got["where"].latitude, got["where"].longitude) == (48.85, 2.35)
    assert got["ref"].path == f"{coll}/other"
    assert got["vec"] == Vector([1.0, 2.5])
    assert got["map"] == {"a.b": 2, "`": 3, "ключ": [True, None, "s"]}
    assert snap.create_time is not None and snap.update_time is not None

    missing = db.collection(coll).document("nope").get()
    assert not missing.exists


def test_http_reads_what_the_sdk_wrote(monkeypatch, stack, client, coll, firestore_emulator_host):
    db = sdk_client(monkeypatch, firestore_emulator_host)
    db.collection(coll).document("w").set({"n": 1, "tags": ["a"]})
    db.collection(coll).document("w").update({"n": firestore.Increment(2)})
    r = client.get(stack.doc(f"{coll}/w"), headers=stack.admin)
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"n": 3, "tags": ["a"]}


def test_what_is_not_served_is_unimplemented(monkeypatch, coll, firestore_emulator_host):
    # PartitionQuery splits a collection group for parallel reads: not served (docs/grpc.md).
    db = sdk_client(monkeypatch, firestore_emulator_host)
    with pytest.raises(exceptions.MethodNotImplemented) as raised:
        list(db.collection_group(coll).get_partitions(2))
    assert "PartitionQuery" in str(raised.value)


def test_owner_is_refused_without_dev_mode(monkeypatch, stack):
    with grpc_sidecar(stack) as address:
        db = sdk_client(monkeypatch, address)
        with pytest.raises(exceptions.Unauthenticated) as raised:
            db.collection("x").document("y").get()
        assert "invalid credentials" in str(raised.value)
