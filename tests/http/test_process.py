"""The process: configuration by flags and environment, /healthz when the database is down,
graceful shutdown on SIGTERM."""

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx


def binary(stack) -> str:
    return stack.sidecar.args[0]


def start(stack, tmp_path: Path, database_url: str, *flags: str) -> tuple[subprocess.Popen, str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSTORE_")}
    env["DOCSTORE_DATABASE_URL"] = database_url
    log = (tmp_path / "sidecar.log").open("w")
    proc = subprocess.Popen(
        [binary(stack), "--listen", f"127.0.0.1:{port}", *flags],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/healthz", timeout=10)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError((tmp_path / "sidecar.log").read_text())


def test_help_documents_every_flag(stack):
    out = subprocess.run([binary(stack), "--help"], capture_output=True, text=True, check=True)
    for flag, env in (
        ("--database-url", "DOCSTORE_DATABASE_URL"),
        ("--listen", "DOCSTORE_LISTEN"),
        ("--jwt-secret", "DOCSTORE_JWT_SECRET"),
        ("--jwks-file", "DOCSTORE_JWKS_FILE"),
        ("--jwt-issuer", None),
        ("--jwt-audience", None),
        ("--admin-key", "DOCSTORE_ADMIN_KEY"),
        ("--max-body-bytes", None),
        ("--pool-size", None),
        ("--shared-connections", "DOCSTORE_SHARED_CONNECTIONS"),
        ("--statement-timeout-ms", "DOCSTORE_STATEMENT_TIMEOUT_MS"),
        ("--query-write-timeout-ms", "DOCSTORE_QUERY_WRITE_TIMEOUT_MS"),
        ("--allowed-hosts", "DOCSTORE_ALLOWED_HOSTS"),
        ("--cors-origins", "DOCSTORE_CORS_ORIGINS"),
        ("--header-timeout-ms", "DOCSTORE_HEADER_TIMEOUT_MS"),
        ("--body-timeout-ms", "DOCSTORE_BODY_TIMEOUT_MS"),
        ("--idle-timeout-ms", "DOCSTORE_IDLE_TIMEOUT_MS"),
        ("--max-connections", "DOCSTORE_MAX_CONNECTIONS"),
        ("--max-connections-per-client", "DOCSTORE_MAX_CONNECTIONS_PER_CLIENT"),
        ("--max-streams", "DOCSTORE_MAX_STREAMS"),
        ("--max-streams-per-caller", "DOCSTORE_MAX_STREAMS_PER_CALLER"),
        ("--max-targets-per-stream", "DOCSTORE_MAX_TARGETS_PER_STREAM"),
    ):
        assert flag in out.stdout, flag
        if env:
            assert env in out.stdout, env


def test_healthz_is_503_when_the_database_is_down(stack, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    proc, url = start(stack, tmp_path, f"postgresql://postgres@127.0.0.1:{dead_port}/docstore")
    try:
        r = httpx.get(url + "/healthz", timeout=30)
        assert r.status_code == 503
        assert r.json()["code"] == "UNAVAILABLE"
        # A request needing the database: 503 too, with no internals in the message.
        r = httpx.get(url + "/v1/databases/(default)/documents/a/b", timeout=30)
        assert r.status_code == 503, r.text
        assert str(dead_port) not in r.text
    finally:
        proc.kill()
        proc.wait()


def test_sigterm_shuts_down_gracefully(stack, tmp_path):
    proc, url = start(stack, tmp_path, stack.cluster.url())
    assert httpx.get(url + "/healthz").status_code == 200
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert "shutting down" in (tmp_path / "sidecar.log").read_text()


def test_small_body_limit_flag(stack, tmp_path):
    proc, url = start(
        stack, tmp_path, stack.cluster.url(), "--max-body-bytes", "100", "--admin-key", "k" * 20
    )
    try:
        headers = {"Authorization": "Bearer " + "k" * 20}
        r = httpx.put(
            url + "/v1/databases/(default)/documents/lim/a", headers=headers, json={"s": "x" * 200}
        )
        assert r.status_code == 413
        r = httpx.put(
            url + "/v1/databases/(default)/documents/lim/a", headers=headers, json={"s": "x"}
        )
        assert r.status_code == 200, r.text
    finally:
        proc.kill()
        proc.wait()


def test_jwks_file_rs256_and_es256(stack, tmp_path):
    import json

    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from jwt.algorithms import ECAlgorithm, RSAAlgorithm

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_jwk = json.loads(RSAAlgorithm.to_jwk(rsa_key.public_key()))
    rsa_jwk.update(kid="r1", alg="RS256")
    ec_jwk = json.loads(ECAlgorithm.to_jwk(ec_key.public_key()))
    ec_jwk.update(kid="e1")
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [rsa_jwk, ec_jwk]}))
    proc, url = start(
        stack,
        tmp_path,
        stack.cluster.url(),
        "--jwks-file",
        str(jwks),
        "--jwt-issuer",
        "https://issuer.test",
        "--jwt-audience",
        "my-app",
    )
    try:
        exp = int(time.time()) + 600
        claims = {"sub": "u1", "exp": exp, "iss": "https://issuer.test", "aud": "my-app"}
        doc = url + "/v1/databases/(default)/documents/jwks/none"

        def status(token):
            return httpx.get(doc, headers={"Authorization": f"Bearer {token}"}).status_code

        assert status(jwt.encode(claims, rsa_key, "RS256", headers={"kid": "r1"})) == 404
        assert status(jwt.encode(claims, ec_key, "ES256", headers={"kid": "e1"})) == 404
        assert status(jwt.encode(claims, rsa_key, "RS256")) == 404  # no kid: tried by alg
        # Wrong key, wrong kid, wrong issuer or audience, an HS256 token (no secret): 401.
        assert status(jwt.encode(claims, other_key, "RS256", headers={"kid": "r1"})) == 401
        assert status(jwt.encode(claims, rsa_key, "RS256", headers={"kid": "e1"})) == 401
        assert status(jwt.encode({**claims, "iss": "evil"}, rsa_key, "RS256")) == 401
        assert status(jwt.encode({**claims, "aud": "other"}, rsa_key, "RS256")) == 401
        no_aud = {k: v for k, v in claims.items() if k != "aud"}
        assert status(jwt.encode(no_aud, rsa_key, "RS256")) == 401
        assert status(jwt.encode(claims, "secret" * 6, "HS256")) == 401
    finally:
        proc.kill()
        proc.wait()


def test_statement_timeout_ends_a_blocked_request_with_deadline_exceeded(stack, tmp_path):
    """A write waits on a row lock another session holds: with --statement-timeout-ms the
    request does not hang but ends 504 DEADLINE_EXCEEDED, for the admin key (the sidecar's own
    role) and for a JWT (docstore_client); the write did not happen, no transaction stays open,
    and once the lock is gone the same write succeeds on the same sidecar. The timeout (3 s) is
    far above what an unblocked statement takes even on a loaded machine: only the blocked write
    can reach it, and it always does, since the lock is held until the test releases it."""
    import psycopg

    admin = "k" * 20
    proc, url = start(
        stack,
        tmp_path,
        stack.cluster.url(),
        "--statement-timeout-ms",
        "3000",
        "--admin-key",
        admin,
        "--jwt-secret",
        stack.jwt_secret,
    )
    path = "timeouts/locked"
    doc = url + stack.doc(path)
    stack.sql("select docstore.set(%s, '{\"v\": 0}')", path)
    holder = psycopg.connect(stack.cluster.url())
    try:
        holder.execute("select 1 from docstore.entities where path = %s for update", (path,))
        for token in (admin, stack.token({"sub": "u1"})):
            headers = {"Authorization": f"Bearer {token}"}
            r = httpx.put(doc, headers=headers, json={"v": 1}, timeout=60)
            assert r.status_code == 504, r.text
            assert r.json()["code"] == "DEADLINE_EXCEEDED"
            assert "timeout" in r.json()["message"]
        holder.rollback()
        assert stack.sql("select docstore.get(%s)", path) == [({"v": 0},)]
        open_tx = [
            b for b in stack.sidecar_backends() if b[1] and b[1].startswith("idle in transaction")
        ]
        assert open_tx == []
        r = httpx.put(doc, headers={"Authorization": f"Bearer {admin}"}, json={"v": 2}, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["data"] == {"v": 2}
    finally:
        holder.close()
        proc.kill()
        proc.wait()


def test_query_write_timeout_releases_a_slow_readers_connection(stack, tmp_path):
    """A client that stops reading a large :runQuery answer (a raw socket with a small receive
    buffer) does not keep its pooled connection: after --query-write-timeout-ms the sidecar
    drops the response (it ends without its final chunk) and the one connection of the pool
    serves the next request; no transaction stays open."""
    import socket

    admin = "k" * 20
    # Its own application_name: the stack's sidecar (its triggers' claims) may be between two
    # statements of a transaction at the moment of the check below.
    name = "docstore-slowread-test"
    proc, url = start(
        stack,
        tmp_path,
        stack.cluster.url() + f"?application_name={name}",
        "--pool-size",
        "1",
        "--shared-connections",
        "0",
        "--query-write-timeout-ms",
        "300",
        "--admin-key",
        admin,
    )
    stack.sql(
        "select count(docstore.set('slowread/d' || lpad(i::text, 5, '0'), "
        "jsonb_build_object('pad', repeat('x', 2000)))) from generate_series(1, 40000) i"
    )
    port = int(url.rsplit(":", 1)[1])
    slow = socket.socket()
    try:
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", port))
        body = b'{"sql": "select * from /slowread"}'
        slow.sendall(
            b"POST /v1/databases/(default):runQuery HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {admin}\r\nContent-Type: application/json\r\n".encode()
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        assert slow.recv(1024).startswith(b"HTTP/1.1 200")
        # The slow client stops reading. The pool's only connection serves this request once
        # the sidecar has dropped the stalled answer.
        r = httpx.get(
            url + stack.doc("slowread/d00001"),
            headers={"Authorization": f"Bearer {admin}"},
            timeout=120,
        )
        assert r.status_code == 200, r.text
        rest = b""
        while chunk := slow.recv(1 << 20):
            rest += chunk
        assert not rest.endswith(b"0\r\n\r\n")  # aborted: no final chunk
        ours = stack.sql(
            "select pid, state, query from pg_stat_activity where application_name = %s", name
        )
        assert ours, "the sidecar's connections are not found by their application_name"
        open_tx = [b for b in ours if b[1] and b[1].startswith("idle in")]
        assert open_tx == []
    finally:
        slow.close()
        proc.kill()
        proc.wait()


def test_first_write_on_a_connection_that_has_only_read(stack, tmp_path):
    """A write and its read-back go out together; on a connection that has prepared the read
    (a GET) but not yet the write, the write must still run first (pool of one connection, so
    every request uses the same one)."""
    admin = "k" * 20
    proc, url = start(
        stack,
        tmp_path,
        stack.cluster.url(),
        "--pool-size",
        "1",
        "--admin-key",
        admin,
        "--jwt-secret",
        stack.jwt_secret,
    )
    try:
        docs = url + "/v1/databases/(default)/documents/firstwrite"
        for who, token in (("admin", admin), ("jwt", stack.token({"sub": "u1"}))):
            headers = {"Authorization": f"Bearer {token}"}
            assert httpx.get(f"{docs}/{who}", headers=headers).status_code == 404
            r = httpx.put(f"{docs}/{who}", headers=headers, json={"v": 1})
            assert r.status_code == 200, r.text
            assert r.json()["data"] == {"v": 1}
            r = httpx.patch(f"{docs}/{who}", headers=headers, json={"w": 2})
            assert r.status_code == 200, r.text
            assert r.json()["data"] == {"v": 1, "w": 2}
            r = httpx.post(docs, headers=headers, json={"v": 3})
            assert r.status_code == 201, r.text
            assert r.json()["data"] == {"v": 3}
    finally:
        proc.kill()
        proc.wait()
