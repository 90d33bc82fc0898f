"""TLS on the sidecar's own listeners (docs/http.md, "TLS"; docs/grpc.md, "TLS"): with
--tls-cert and --tls-key (PEM files of a server certificate signed by a CA made here with the
openssl CLI) the HTTP listener speaks HTTPS (ALPN http/1.1): a client trusting that CA gets
/healthz and a live SSE event, plain HTTP on that port gets no answer; the gRPC front end
speaks TLS (ALPN h2) to Google's Firestore client over a secure grpcio channel. Only one of the
two flags, or a file that is not PEM, ends start-up with a message naming the flag."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
import uuid
from pathlib import Path

import grpc
import httpx
import pytest
from conftest import free_port, sidecar_binary, sidecar_env
from google.cloud.firestore_v1.services.firestore import FirestoreClient
from google.cloud.firestore_v1.services.firestore.transports import FirestoreGrpcTransport
from google.cloud.firestore_v1.types import Document, Value, Write
from test_tls_pg import make_ca, make_server_cert

LISTEN = "/v1/databases/(default):listen"


@pytest.fixture(scope="module")
def certs(stack) -> Path:
    """A CA and a server certificate for 127.0.0.1 signed by it."""
    directory = Path(stack.cluster.dir) / "listener-tls"
    directory.mkdir(exist_ok=True)
    make_ca(directory, "ca")
    make_server_cert(directory)
    return directory


def start(stack, *flags: str) -> tuple[subprocess.Popen, int, Path]:
    port = free_port()
    log = Path(stack.cluster.dir) / f"sidecar-tls-{port}.log"
    env = sidecar_env(stack, port)
    binary = str(sidecar_binary())
    proc = subprocess.Popen(
        [binary, *flags], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    return proc, port, log


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def tls_sidecar(stack, certs):
    """A sidecar with TLS on both listeners and live queries (a slot of its own): (https
    base URL, gRPC address)."""
    slot = "tls_listener_" + uuid.uuid4().hex[:8]
    grpc_address = f"127.0.0.1:{free_port()}"
    proc, port, log = start(
        stack,
        "--tls-cert", str(certs / "server.crt"), "--tls-key", str(certs / "server.key"),
        "--slot", slot, "--grpc-listen", grpc_address,
    )  # fmt: skip
    base = f"https://127.0.0.1:{port}"
    try:
        for _ in range(600):
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(base + "/healthz", verify=str(certs / "ca.crt")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        else:
            raise AssertionError(log.read_text())
        yield base, grpc_address
    finally:
        stop(proc)
        stack.sql(
            "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
            "where slot_name = %s and not active",
            slot,
        )


def test_https_healthz_and_a_live_event(stack, certs, tls_sidecar, coll):
    base, _ = tls_sidecar
    with httpx.Client(base_url=base, verify=str(certs / "ca.crt"), timeout=60) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        params = {"sql": f"select * from /{coll}"}
        with client.stream("GET", LISTEN, params=params, headers=stack.admin) as r:
            assert r.status_code == 200, r.read()
            event = None
            written = False
            for line in r.iter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event == "snapshot" and not written:
                    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
                    written = True
                elif line.startswith("data: ") and event == "change":
                    data = json.loads(line.removeprefix("data: "))
                    docs = [c["document"] for c in data["targets"][0]["changes"]]
                    assert docs[0]["path"] == f"{coll}/a" and docs[0]["data"] == {"n": 1}
                    break


def test_the_http_listener_offers_http_1_1_and_refuses_plain_http(certs, tls_sidecar):
    base, _ = tls_sidecar
    port = int(base.rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    context.set_alpn_protocols(["h2", "http/1.1"])
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.selected_alpn_protocol() == "http/1.1"
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
    # A client that does not trust the CA is refused by its own verification.
    with pytest.raises(httpx.ConnectError):
        httpx.get(base + "/healthz", timeout=10)


def test_grpc_over_tls_with_the_firestore_client(stack, certs, tls_sidecar, coll):
    _, address = tls_sidecar
    credentials = grpc.ssl_channel_credentials((certs / "ca.crt").read_bytes())
    channel = grpc.secure_channel(address, credentials)
    try:
        client = FirestoreClient(transport=FirestoreGrpcTransport(channel=channel))
        database = "projects/demo/databases/(default)"
        name = f"{database}/documents/{coll}/a"
        update = Document(name=name, fields={"n": Value(integer_value=7)})
        client.commit(database=database, writes=[Write(update=update)])
        got = client.get_document(request={"name": name})
        assert got.fields["n"].integer_value == 7
    finally:
        channel.close()
    # Cleartext HTTP/2 (what an emulator channel speaks) gets no answer from a TLS port.
    plain = grpc.insecure_channel(address)
    try:
        client = FirestoreClient(transport=FirestoreGrpcTransport(channel=plain))
        with pytest.raises(Exception) as raised:
            client.get_document(request={"name": name}, timeout=10)
        assert "UNAVAILABLE" in str(raised.value) or "Deadline" in str(raised.value)
    finally:
        plain.close()


@pytest.mark.parametrize(
    "which, message",
    [
        ("cert", "--tls-cert needs --tls-key"),
        ("key", "--tls-key needs --tls-cert"),
        ("bad-key", "--tls-key "),
        ("bad-cert", "--tls-cert "),
    ],
)
def test_refused_at_start(stack, certs, which, message):
    garbage = certs / "garbage.pem"
    garbage.write_text("not a PEM file\n")
    cert, key = str(certs / "server.crt"), str(certs / "server.key")
    flags = {
        "cert": ["--tls-cert", cert],
        "key": ["--tls-key", key],
        "bad-key": ["--tls-cert", cert, "--tls-key", str(garbage)],
        "bad-cert": ["--tls-cert", str(garbage), "--tls-key", key],
    }[which]
    proc, _, log = start(stack, "--live", "false", *flags)
    try:
        assert proc.wait(60) != 0, log.read_text()
    finally:
        if proc.poll() is None:
            stop(proc)
    text = log.read_text()
    assert message in text, text
