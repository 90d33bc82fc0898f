"""Failures by cause (docs/http.md, "Failures by cause"): a cause that retrying cannot fix
ends start-up with one message that names the fix, and /healthz says why when it appears
later; a database that does not answer yet is retried (test_process.py,
test_healthz_is_503_when_the_database_is_down).

Every case runs against the test cluster except wal_level, which needs a cluster of its own
(a throwaway one with wal_level = replica)."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import httpx
import psycopg
from conftest import (
    PG_BIN,
    Cluster,
    as_postgres,
    free_port,
    own_sidecar,
    sidecar_binary,
    sidecar_env,
    sidecar_login,
)
from test_listen import Listener, View, follow, fresh, has_doc


def run_sidecar(stack, url: str, *flags: str) -> tuple[subprocess.Popen, str, Path]:
    port = free_port()
    log = Path(stack.cluster.dir) / f"sidecar-startup-{port}.log"
    env = sidecar_env(stack, port, url)
    binary = str(sidecar_binary())
    proc = subprocess.Popen(
        [binary, *flags], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    return proc, f"http://127.0.0.1:{port}", log


def ends_with(stack, url: str, *flags: str) -> str:
    """Start a sidecar that must end at start-up; its log."""
    proc, _, log = run_sidecar(stack, url, *flags)
    try:
        assert proc.wait(60) != 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert text.count("cannot start: ") == 1, text
    assert "; fix: " in text, text
    return text


def role_url(stack, role: str, password: str | None = None, database: str = "docstore") -> str:
    auth = f"{role}:{password}" if password else role
    return f"postgresql://{auth}@127.0.0.1:{stack.cluster.port}/{database}"


def test_no_extension(stack):
    db = "noext_" + uuid.uuid4().hex[:8]
    stack_conn = psycopg.connect(stack.cluster.url("postgres"), autocommit=True)
    with stack_conn:
        stack_conn.execute(f"create database {db}")
    try:
        text = ends_with(stack, stack.cluster.url(db), "--live", "false")
        assert "pg_docstore is not installed" in text, text
        assert "create extension pg_docstore" in text, text
    finally:
        with psycopg.connect(stack.cluster.url("postgres"), autocommit=True) as conn:
            conn.execute(f"drop database {db} with (force)")


def test_bad_password_at_start_and_later_on_healthz(stack):
    role = "pw_" + uuid.uuid4().hex[:8]
    data = Path(stack.cluster.data)
    hba = data / "pg_hba.conf"
    original = hba.read_text()
    stack.sql(f"create role {role} login superuser password 'right'")
    as_postgres(["tee", str(hba)], input=f"host all {role} 127.0.0.1/32 scram-sha-256\n" + original)
    stack.sql("select pg_reload_conf()")
    proc = None
    try:
        text = ends_with(stack, role_url(stack, role, "wrong"), "--live", "false")
        assert "password authentication failed" in text, text
        # Started with the right one, then the password changes: /healthz says why.
        proc, url, log = run_sidecar(stack, role_url(stack, role, "right"), "--live", "false")
        for _ in range(300):
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        stack.sql(f"alter role {role} password 'changed'")
        stack.sql("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", role)
        for _ in range(100):
            r = httpx.get(url + "/healthz", timeout=30)
            if r.status_code == 503:
                break
            time.sleep(0.1)
        assert r.status_code == 503, r.text
        body = r.json()
        assert body["code"] == "UNAVAILABLE", body
        assert "password authentication failed" in body["message"], body
        assert "fix: " in body["message"], body
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(15)
        as_postgres(["tee", str(hba)], input=original)
        stack.sql("select pg_reload_conf()")
        stack.sql("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", role)
        stack.sql(f"drop role if exists {role}")


def test_no_replication_right(stack):
    role = "norepl_" + uuid.uuid4().hex[:8]
    stack.sql(f"create role {role} login nosuperuser noreplication")
    try:
        text = ends_with(stack, role_url(stack, role), "--slot", role)
        assert "REPLICATION attribute" in text, text
        assert "alter role" in text, text
        # Without live queries the same role starts.
        proc, url, log = run_sidecar(stack, role_url(stack, role), "--live", "false")
        try:
            for _ in range(300):
                assert proc.poll() is None, log.read_text()
                try:
                    if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
            else:
                raise AssertionError(log.read_text())
        finally:
            proc.terminate()
            proc.wait(15)
    finally:
        stack.sql("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", role)
        stack.sql(f"drop role if exists {role}")


def test_a_slot_of_another_plugin(stack):
    slot = "td_" + uuid.uuid4().hex[:8]
    stack.sql("select pg_create_logical_replication_slot(%s, 'test_decoding')", slot)
    try:
        text = ends_with(stack, stack.cluster.url(), "--slot", slot)
        assert f"slot {slot} exists with the output plugin test_decoding" in text, text
        assert "--slot" in text, text
        # Nothing was done to the slot.
        rows = stack.sql("select plugin from pg_replication_slots where slot_name = %s", slot)
        assert rows == [("test_decoding",)], rows
    finally:
        stack.sql("select pg_drop_replication_slot(%s)", slot)


def test_wal_level_not_logical(stack):
    cluster = Cluster()
    try:
        cluster.start()
        as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(cluster.data), "-m", "fast", "-w", "stop"])
        options = (
            f"-p {cluster.port} -c listen_addresses=127.0.0.1 "
            f"-c unix_socket_directories={cluster.run} -c wal_level=replica -c fsync=off"
        )
        as_postgres(
            [str(PG_BIN / "pg_ctl"), "-D", str(cluster.data), "-l", str(cluster.log), "-w"]
            + ["-o", options, "start"]
        )
        with psycopg.connect(cluster.url("postgres"), autocommit=True) as conn:
            conn.execute("create database docstore")
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("create extension pg_docstore")
        text = ends_with(stack, cluster.url(), "--slot", "docstore_walcheck")
        assert "wal_level = logical, the server has replica" in text, text
        assert "--live false" in text, text
    finally:
        cluster.stop()
        shutil.rmtree(cluster.dir, ignore_errors=True)


def metric(base: str, name: str) -> float:
    """The value of an unlabelled (or first labelled) sample `name` on /metrics; 0 if absent."""
    for line in httpx.get(base + "/metrics", timeout=30).text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_health(base: str, status: int) -> httpx.Response:
    for _ in range(600):
        r = httpx.get(base + "/healthz", timeout=30)
        if r.status_code == status:
            return r
        time.sleep(0.1)
    raise AssertionError(f"/healthz stays {r.status_code}: {r.text}")


def test_replication_revoked_under_a_running_sidecar(stack, coll):
    """A cause that appears after start-up on the live path (docs/http.md, "Failures by
    cause"): /healthz names it and its fix, it is logged once however often the source
    retries, and once an operator fixes it live events flow again from where the slot was,
    nothing lost and no reset."""
    role = "revoked_" + uuid.uuid4().hex[:8]
    url = sidecar_login(stack.cluster, role=role)
    sql = f"select * from /{coll} order by n"
    try:
        with own_sidecar(stack, slot=role, database_url=url) as base:
            log = Path(stack.cluster.dir) / f"sidecar-{base.rsplit(':', 1)[1]}.log"
            listener = Listener(SimpleNamespace(url=base, admin=stack.admin), params=[("sql", sql)])
            try:
                view = View()
                follow(listener, view, lambda ev, v: ev["event"] == "snapshot")
                stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
                follow(listener, view, has_doc("0", f"{coll}/a"))

                stack.sql(f"alter role {role} noreplication")
                stack.sql(
                    "select pg_terminate_backend(active_pid) from pg_replication_slots "
                    "where slot_name = %s",
                    role,
                )
                body = wait_health(base, 503).json()
                assert body["code"] == "UNAVAILABLE", body
                assert "REPLICATION attribute" in body["message"], body
                assert "fix: alter role" in body["message"], body
                # Written while the live path is down.
                stack.sql("select docstore.set(%s, '{\"n\": 2}')", f"{coll}/b")
                retries = metric(base, "docstore_source_retries_total")
                for _ in range(600):
                    if metric(base, "docstore_source_retries_total") >= retries + 3:
                        break
                    time.sleep(0.1)
                else:
                    raise AssertionError("the source does not retry")
                assert wait_health(base, 503).json() == body
                text = log.read_text()
                assert text.count("live queries stopped: ") == 1, text
                assert (
                    'docstore_source_failure{cause="no_replication_right"} 1'
                    in httpx.get(base + "/metrics", timeout=30).text
                )

                stack.sql(f"alter role {role} replication")
                wait_health(base, 200)
                follow(listener, view, has_doc("0", f"{coll}/b"))
                stack.sql("select docstore.set(%s, '{\"n\": 3}')", f"{coll}/c")
                follow(listener, view, has_doc("0", f"{coll}/c"))
                with stack.client() as client:
                    assert view.docs("0") == fresh(stack, client, sql)
                assert [ev for ev in listener.received if ev["event"] == "reset"] == []
                assert "live queries run again" in log.read_text()
            finally:
                listener.close()
    finally:
        stack.sql("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", role)
        stack.sql(f"drop owned by {role}")
        stack.sql(f"drop role if exists {role}")
