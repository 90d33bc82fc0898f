"""Time limits and caps of the HTTP server (docs/http.md "Limits", docs/listen.md "Limits"),
each tested on a sidecar of the test's own started with a small limit: a silent socket, slow
headers, a slow body and a stalled connection are closed; connections over the total and
per-client caps, streams over the total and per-caller caps and targets over the per-stream
cap are refused with 429 RESOURCE_EXHAUSTED, and each refusal is counted in /metrics.

The limits are of 1-2 s and a close is only required within a generous bound (CLOSED_WITHIN),
never faster than anything: the tests do not depend on the machine's speed. Each fails on a
sidecar without the limit (the connection stays open past the bound, or the request is
served).
"""

from __future__ import annotations

import json
import socket
import time
import uuid

import httpx
import pytest
from conftest import own_sidecar

CLOSED_WITHIN = 30
DB = "limits"


def connect(url: str, source: str = "127.0.0.1") -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect((host, int(port)))
    return sock


def closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> bytes:
    """Read until the server closes the connection (sending a byte of `trickle` every 0.2 s
    meanwhile); the bytes read. Fails when it stays open for `seconds`."""
    deadline = time.monotonic() + seconds
    data = b""
    sock.settimeout(0.2)
    sent = 0
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            if sent < len(trickle) and not data:
                try:
                    sock.sendall(trickle[sent : sent + 1])
                    sent += 1
                except OSError:
                    return data
            continue
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk
    raise AssertionError(f"the connection is still open after {seconds} s: {data!r}")


def status_and_json(data: bytes) -> tuple[int, dict]:
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    if b"transfer-encoding: chunked" in head.lower():
        size, _, rest = body.partition(b"\r\n")
        body = rest[: int(size, 16)]
    return status, json.loads(body)


def request(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def limited(url: str, limit: str) -> float:
    text = httpx.get(url + "/metrics", timeout=30).text
    for line in text.splitlines():
        if line.startswith(f'docstore_http_limited_total{{limit="{limit}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_a_silent_socket_and_an_idle_keep_alive_connection_are_closed(stack):
    with own_sidecar(stack, "--header-timeout-ms", "1000") as url:
        with connect(url) as sock:
            assert closed_within(sock, CLOSED_WITHIN) == b""
        with connect(url) as sock:
            sock.sendall(request("/healthz"))
            data = closed_within(sock, CLOSED_WITHIN)
            # The request is answered, then the silent keep-alive connection is closed.
            assert data.startswith(b"HTTP/1.1 200"), data
        assert limited(url, "header_timeout") >= 2


def test_headers_sent_slowly_are_closed(stack):
    with own_sidecar(stack, "--header-timeout-ms", "1000") as url:
        with connect(url) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            # A header that never ends, a byte every 0.2 s.
            data = closed_within(sock, CLOSED_WITHIN, trickle=b"X-Slow: " + b"a" * 1000)
            assert b"200" not in data, data
        assert limited(url, "header_timeout") >= 1


def test_a_body_sent_slowly_is_answered_408_and_closed(stack):
    with own_sidecar(stack, "--body-timeout-ms", "1000") as url:
        with connect(url) as sock:
            sock.sendall(
                b"POST /v1/databases/(default):commit HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            )
            data = closed_within(sock, CLOSED_WITHIN, trickle=b" " * 1000)
        status, body = status_and_json(data)
        assert status == 408 and body["code"] == "DEADLINE_EXCEEDED", data
        assert "--body-timeout-ms" in body["message"]
        assert limited(url, "body_timeout") >= 1


def test_a_stalled_connection_is_closed_by_the_idle_timeout(stack):
    # Headers and body timeouts at their defaults (10 s, 60 s): the body never comes, and
    # only the idle timeout closes the connection before the bound.
    with own_sidecar(stack, "--idle-timeout-ms", "1000", "--body-timeout-ms", "600000") as url:
        with connect(url) as sock:
            sock.sendall(
                b"POST /v1/databases/(default):commit HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            )
            closed_within(sock, CLOSED_WITHIN)
        assert limited(url, "idle_timeout") >= 1


def refused(url: str, source: str = "127.0.0.1") -> tuple[int, dict]:
    with connect(url, source) as sock:
        sock.sendall(request("/healthz"))
        return status_and_json(closed_within(sock, CLOSED_WITHIN))


def served_again(url: str) -> None:
    """A new connection is served once a place is free (the server sees the close soon)."""
    deadline = time.monotonic() + CLOSED_WITHIN
    while time.monotonic() < deadline:
        if httpx.get(url + "/healthz", timeout=30).status_code == 200:
            return
        time.sleep(0.1)
    raise AssertionError("no connection is served after one closed")


def released_and_served_again(url: str, held: list[socket.socket]) -> None:
    """Close the last held connection, see a new one served, then close the others."""
    held.pop().close()
    try:
        served_again(url)
    finally:
        for sock in held:
            sock.close()


def test_connections_per_client_address_are_capped(stack):
    flags = ("--max-connections-per-client", "2", "--header-timeout-ms", "600000")
    with own_sidecar(stack, *flags) as url:
        held = [connect(url), connect(url)]
        try:
            status, body = refused(url)
            assert status == 429 and body["code"] == "RESOURCE_EXHAUSTED", body
            assert "--max-connections-per-client" in body["message"]
            # Another client address has places of its own.
            with connect(url, "127.0.0.2") as sock:
                sock.sendall(request("/healthz", "Connection: close"))
                assert closed_within(sock, CLOSED_WITHIN).startswith(b"HTTP/1.1 200")
        finally:
            released_and_served_again(url, held)
        assert limited(url, "connections_per_client") >= 1


def test_connections_in_total_are_capped(stack):
    flags = ("--max-connections", "2", "--header-timeout-ms", "600000")
    with own_sidecar(stack, *flags) as url:
        held = [connect(url), connect(url, "127.0.0.2")]
        try:
            status, body = refused(url, "127.0.0.3")
            assert status == 429 and body["code"] == "RESOURCE_EXHAUSTED", body
            assert "(--max-connections)" in body["message"]
        finally:
            released_and_served_again(url, held)
        assert limited(url, "connections") >= 1


@pytest.fixture
def open_db(stack):
    stack.open_database(DB)
    yield
    stack.sql("select docstore.drop_rules(%s)", DB)


def open_stream(
    url: str, headers: dict, *, targets: int = 1, source: str = "127.0.0.1"
) -> tuple[int, str | None, dict | None]:
    """Open a stream and disconnect at once (the stream waits for a resume): status, stream id,
    error body."""
    body = {"targets": [{"id": f"t{i}", "document": f"c/d{i}"} for i in range(targets)]}
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=url, timeout=60, transport=transport) as client:
        with client.stream("POST", f"/v1/databases/{DB}:listen", json=body, headers=headers) as r:
            if r.status_code != 200:
                return r.status_code, None, json.loads(r.read())
            return 200, r.headers["x-docstore-stream"], None


def test_streams_and_targets_are_capped(stack, open_db):
    slot = "docstore_caps_" + uuid.uuid4().hex[:8]
    flags = (
        "--max-streams",
        "6",
        "--max-streams-per-caller",
        "2",
        "--max-targets-per-stream",
        "3",
    )
    with own_sidecar(stack, *flags, slot=slot) as url:
        admin = stack.admin
        # Targets: the cap counts every request of a stream.
        status, _, error = open_stream(url, admin, targets=4)
        assert status == 429 and error["code"] == "RESOURCE_EXHAUSTED", error
        assert "--max-targets-per-stream" in error["message"]
        status, stream, _ = open_stream(url, admin, targets=2)
        assert status == 200
        add = f"{url}/v1/databases/{DB}:listen/{stream}/targets"
        r = httpx.post(add, headers=admin, json={"targets": [{"id": "x", "document": "c/x"}]})
        assert r.status_code == 200, r.text
        r = httpx.post(add, headers=admin, json={"targets": [{"id": "y", "document": "c/y"}]})
        assert r.status_code == 429 and r.json()["code"] == "RESOURCE_EXHAUSTED", r.text
        assert "--max-targets-per-stream" in r.json()["message"]
        # Per caller: a JWT's subject.
        alice = stack.bearer(stack.token({"sub": "alice"}))
        assert open_stream(url, alice)[0] == 200
        assert open_stream(url, alice, source="127.0.0.2")[0] == 200
        status, _, error = open_stream(url, alice)
        assert status == 429 and error["code"] == "RESOURCE_EXHAUSTED", error
        assert "--max-streams-per-caller" in error["message"]
        # Per caller: the client address of anonymous callers.
        assert open_stream(url, {})[0] == 200
        assert open_stream(url, {})[0] == 200
        status, _, error = open_stream(url, {})
        assert status == 429 and "--max-streams-per-caller" in error["message"], error
        assert open_stream(url, {}, source="127.0.0.2")[0] == 200
        # In total (6: the admin's, alice's two, three anonymous), even for the admin key.
        status, _, error = open_stream(url, admin)
        assert status == 429 and error["code"] == "RESOURCE_EXHAUSTED", error
        assert "(--max-streams)" in error["message"]
        assert limited(url, "targets_per_stream") >= 2
        assert limited(url, "streams_per_caller") >= 2
        assert limited(url, "streams") >= 1
