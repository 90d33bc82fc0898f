"""TLS to Postgres (docs/http.md, "Connecting to Postgres"): `sslmode` and `sslrootcert` in
the sidecar's database URL, honoured by the pooled, shared and replication connections.

The test cluster gets `ssl = on` with a server certificate signed by a CA made here (the
openssl CLI), and a role that `pg_hba.conf` lets in over `hostssl` only (plain connections of
that role are rejected): a sidecar logged in as that role with `sslmode=verify-full` serves a
GET and a live event; with another CA it does not start, and says why.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from conftest import as_postgres, free_port, sidecar_binary
from test_listen import Listener

ROLE = "docstore_tls"
SLOT = "docstore_tls_slot"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(directory: Path, name: str) -> None:
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.crt",
        cwd=directory,
    )  # fmt: skip


def make_server_cert(directory: Path) -> None:
    """`server.crt` / `server.key` for 127.0.0.1 (and localhost), signed by `ca` (make_ca)."""
    (directory / "san.cnf").write_text("subjectAltName = IP:127.0.0.1, DNS:localhost\n")
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", "server.key", "-out", "server.csr", cwd=directory,
    )  # fmt: skip
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "san.cnf", "-out", "server.crt",
        cwd=directory,
    )  # fmt: skip


def reload(stack) -> None:
    stack.sql("select pg_reload_conf()")


@pytest.fixture(scope="module")
def tls(stack):
    """The cluster with ssl on and a role allowed over hostssl only; yields the CA files."""
    directory = Path(stack.cluster.dir) / "tls"
    directory.mkdir(exist_ok=True)
    make_ca(directory, "ca")
    make_ca(directory, "other-ca")
    make_server_cert(directory)
    # Readable by the postgres user, which copies them into its data directory.
    for path in (directory, *directory.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    data = Path(stack.cluster.data)
    for name in ("server.crt", "server.key"):
        as_postgres(["cp", str(directory / name), str(data / name)])
        as_postgres(["chmod", "600", str(data / name)])
    hba = data / "pg_hba.conf"
    original = hba.read_text()
    # First match wins: the role over TLS, and nothing else for it.
    as_postgres(
        ["tee", str(hba)],
        input=f"hostssl all {ROLE} 127.0.0.1/32 trust\n"
        f"host all {ROLE} 127.0.0.1/32 reject\n" + original,
    )
    stack.sql(f"create role {ROLE} login superuser")
    stack.sql("alter system set ssl = on")
    reload(stack)
    try:
        yield directory
    finally:
        stack.sql("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", ROLE)
        stack.sql(
            "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
            "where slot_name = %s and not active",
            SLOT,
        )
        as_postgres(["tee", str(hba)], input=original)
        stack.sql("alter system reset ssl")
        reload(stack)
        stack.sql(f"drop role if exists {ROLE}")


def sidecar(stack, url: str, log: Path) -> subprocess.Popen:
    port = free_port()
    env = {
        "PATH": "/usr/bin:/bin",
        "DOCSTORE_DATABASE_URL": url,
        "DOCSTORE_LISTEN": f"127.0.0.1:{port}",
        "DOCSTORE_ADMIN_KEY": stack.admin_key,
        "DOCSTORE_JWT_SECRET": stack.jwt_secret,
    }
    binary = str(sidecar_binary())
    proc = subprocess.Popen(
        [binary, "--slot", SLOT], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    proc.port = port  # type: ignore[attr-defined]
    return proc


def url_for(stack, query: str, host: str = "localhost") -> str:
    """The cluster's URL as the role, at `host` (the certificate names localhost and
    127.0.0.1; the replication connection checks verify-full against a DNS name only)."""
    url = stack.cluster.url().replace("postgres@127.0.0.1", f"{ROLE}@{host}", 1)
    return url + "?" + query


def test_a_plain_connection_of_the_role_is_rejected(stack, tls):
    """The set-up is what it claims: the role cannot log in without TLS."""
    plain = stack.cluster.url().replace("postgres@", f"{ROLE}@", 1) + "?sslmode=disable"
    with pytest.raises(psycopg.OperationalError, match="rejects connection|no pg_hba.conf"):
        psycopg.connect(plain).close()


def test_verify_full_serves_a_get_and_a_live_event(stack, tls, coll):
    log = Path(stack.cluster.dir) / "sidecar-tls.log"
    proc = sidecar(stack, url_for(stack, f"sslmode=verify-full&sslrootcert={tls / 'ca.crt'}"), log)
    base = f"http://127.0.0.1:{proc.port}"
    listener = None
    try:
        # Healthy only once the database answers over TLS.
        for _ in range(300):
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail("the sidecar never became healthy: " + log.read_text())
        stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
        r = httpx.get(base + stack.doc(f"{coll}/a"), headers=stack.admin, timeout=30)
        assert r.status_code == 200, r.text
        listener = Listener(
            type("S", (), {"url": base, "admin": stack.admin})(),
            params=[("sql", f"select * from /{coll}")],
        )
        assert listener.status == 200, listener.error_body
        assert listener.next()["event"] == "snapshot"
        stack.sql("select docstore.set(%s, '{\"n\": 2}')", f"{coll}/b")
        ev = listener.until(lambda e: e["event"] == "change")
        added = [c["document"]["path"] for t in ev["data"]["targets"] for c in t["changes"]]
        assert added == [f"{coll}/b"], ev
        # Every connection of the sidecar is over TLS: pooled ones and the walsender.
        rows = stack.sql(
            "select a.backend_type, s.ssl from pg_stat_activity a "
            "join pg_stat_ssl s using (pid) where a.usename = %s",
            ROLE,
        )
        assert {kind for kind, _ in rows} >= {"client backend", "walsender"}, rows
        assert all(ssl for _, ssl in rows), rows
    finally:
        if listener is not None:
            listener.close()
        proc.terminate()
        proc.wait(15)


def test_another_ca_is_refused_with_a_clear_message(stack, tls):
    log = Path(stack.cluster.dir) / "sidecar-tls-wrong.log"
    url = url_for(stack, f"sslmode=verify-full&sslrootcert={tls / 'other-ca.crt'}")
    proc = sidecar(stack, url, log)
    try:
        # /healthz stays 503 and the log names the certificate problem.
        for _ in range(100):
            assert proc.poll() is None or proc.returncode != 0
            text = log.read_text()
            if "certificate" in text.lower():
                break
            time.sleep(0.2)
        text = log.read_text()
        assert "TLS handshake with Postgres at localhost failed" in text, text
        assert "UnknownIssuer" in text, text
        assert "sslrootcert=" in text, text
        if proc.poll() is None:
            r = httpx.get(f"http://127.0.0.1:{proc.port}/healthz", timeout=5)
            assert r.status_code == 503
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(15)


def test_verify_full_without_a_ca_file_does_not_start(stack, tls):
    log = Path(stack.cluster.dir) / "sidecar-tls-noca.log"
    proc = sidecar(stack, url_for(stack, "sslmode=verify-full"), log)
    assert proc.wait(30) != 0
    assert "needs sslrootcert" in log.read_text()


def test_verify_full_with_an_ip_address_does_not_start(stack, tls):
    log = Path(stack.cluster.dir) / "sidecar-tls-ip.log"
    url = url_for(stack, f"sslmode=verify-full&sslrootcert={tls / 'ca.crt'}", host="127.0.0.1")
    proc = sidecar(stack, url, log)
    assert proc.wait(30) != 0
    assert "use the host name the certificate names, or sslmode=verify-ca" in log.read_text()


def test_an_unknown_sslmode_does_not_start(stack, tls):
    log = Path(stack.cluster.dir) / "sidecar-tls-bad.log"
    proc = sidecar(stack, url_for(stack, "sslmode=sometimes"), log)
    assert proc.wait(30) != 0
    assert "sslmode=sometimes is not one of" in log.read_text()
