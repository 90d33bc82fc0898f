"""Failures by cause in the roles of a cluster (docs/architecture.md, "Processes"; docs/http.md,
"Failures by cause"), as tests/http/test_startup_failures.py checks them for `--role all`: a
cause that retrying cannot fix ends start-up with one message naming the fix, on the slot's
side (an ingest) and on NATS' side (an ingest and a gateway); a cause that appears later, or
a server that is away, shows on /healthz while the role retries. And an ingest that loses its
lock while it retries a publish (NATS down) publishes nothing more.

Each test runs its own nats-server, login, slot and stream, so the module cluster of
test_cluster.py is untouched."""

from __future__ import annotations

import contextlib
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
from conftest import free_port, sidecar_binary, sidecar_env, sidecar_login
from test_cluster import Nats

WAIT = 60


@contextlib.contextmanager
def nats_server(tmp_path: Path, extra: str = "", jetstream: bool = True) -> Iterator[Nats]:
    server = Nats(tmp_path, extra, jetstream)
    try:
        yield server
    finally:
        server.kill()


class Role:
    """One sidecar process of a role, its log in `dir`."""

    def __init__(self, stack, dir: Path, role: str, database_url: str, nats_url: str, slot: str):
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = dir / f"{role}-{port}.log"
        env = sidecar_env(stack, port, database_url, RUST_LOG="info")
        binary = str(sidecar_binary())
        args = ["--role", role, "--nats-url", nats_url, "--slot", slot]
        args += ["--nats-stream", "T" + slot.upper()]
        self.proc = subprocess.Popen(
            [binary, *args], env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT
        )

    def health(self, status: int, text: str = "") -> httpx.Response:
        """Wait until /healthz answers `status` with `text` in its body."""
        deadline = time.monotonic() + WAIT
        last = ""
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                got = httpx.get(f"{self.url}/healthz", timeout=5)
                last = got.text
                if got.status_code == status and text in got.text:
                    return got
            except httpx.HTTPError as e:
                last = str(e)
            time.sleep(0.1)
        raise AssertionError(f"/healthz never {status} {text!r}: {last}")

    def ends(self) -> str:
        """The process must end at start-up with one message naming the fix; its log."""
        try:
            assert self.proc.wait(WAIT) != 0, self.log.read_text()
        finally:
            self.stop()
        text = self.log.read_text()
        assert text.count("cannot start: ") == 1, text
        assert "; fix: " in text, text
        return text

    def metric(self, name: str) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name) and not line.startswith("#")
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)


@contextlib.contextmanager
def login(stack, replication: bool = True) -> Iterator[tuple[str, str]]:
    """A login of its own (sql/sidecar_role.sql) and a slot name; (role, database URL).
    Dropped afterwards with its sessions and slot."""
    role = "rf_" + uuid.uuid4().hex[:10]
    url = sidecar_login(stack.cluster, role=role)
    if not replication:
        stack.sql(f"alter role {role} noreplication")
    try:
        yield role, url
    finally:
        stack.sql("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", role)
        for _ in range(100):
            if not stack.sql(
                "select from pg_replication_slots where slot_name = %s and active", role
            ):
                break
            time.sleep(0.1)
        stack.sql(
            "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
            "where slot_name = %s and not active",
            role,
        )
        stack.sql(f"drop owned by {role}")
        stack.sql(f"drop role if exists {role}")


def test_an_ingest_without_replication_ends_start_up(stack, tmp_path):
    with login(stack, replication=False) as (role, url), nats_server(tmp_path) as nats:
        text = Role(stack, tmp_path, "ingest", url, nats.url, role).ends()
        assert "REPLICATION attribute" in text, text
        assert "alter role" in text, text


def test_an_ingest_names_a_later_slot_cause_on_healthz_and_recovers(stack, tmp_path):
    """REPLICATION revoked under a running ingest: its /healthz names the cause and its fix
    (it was only logged), the source retries, and once the right is back it is healthy."""
    with login(stack) as (role, url), nats_server(tmp_path) as nats:
        ingest = Role(stack, tmp_path, "ingest", url, nats.url, role)
        try:
            ingest.health(200)
            stack.sql(f"alter role {role} noreplication")
            stack.sql(
                "select pg_terminate_backend(active_pid) from pg_replication_slots "
                "where slot_name = %s",
                role,
            )
            body = ingest.health(503, "REPLICATION attribute").json()
            assert body["code"] == "UNAVAILABLE", body
            assert "fix: alter role" in body["message"], body
            assert ingest.metric('docstore_source_failure{cause="no_replication_right"}') == 1
            stack.sql(f"alter role {role} replication")
            ingest.health(200)
        finally:
            ingest.stop()


def test_nats_refusing_the_credentials_ends_start_up_of_both_roles(stack, tmp_path):
    auth = 'authorization { user: docstore, password: "right-one" }\n'
    with login(stack) as (role, url), nats_server(tmp_path, auth) as nats:
        for kind in ("ingest", "gateway"):
            text = Role(
                stack, tmp_path, kind, url, nats.url_with("docstore:wrong-one"), role
            ).ends()
            assert "refused the credentials" in text, text
            assert "--nats-url" in text, text
            assert "wrong-one" not in text, text
        # The right ones start.
        ingest = Role(stack, tmp_path, "ingest", url, nats.url_with("docstore:right-one"), role)
        try:
            ingest.health(200)
            assert "right-one" not in ingest.log.read_text()
        finally:
            ingest.stop()


def test_nats_without_jetstream_ends_start_up(stack, tmp_path):
    with login(stack) as (role, url), nats_server(tmp_path, jetstream=False) as nats:
        for kind in ("ingest", "gateway"):
            text = Role(stack, tmp_path, kind, url, nats.url, role).ends()
            assert "does not run JetStream" in text, text
            assert "-js" in text, text


def test_an_ingest_started_while_nats_is_away_waits_and_says_why(stack, tmp_path):
    with login(stack) as (role, url):
        nats = Nats(tmp_path, "", start=False)
        ingest = Role(stack, tmp_path, "ingest", url, nats.url, role)
        try:
            body = ingest.health(503, "unreachable").json()
            assert body["code"] == "UNAVAILABLE", body
            nats.start()
            ingest.health(200)
        finally:
            ingest.stop()
            nats.kill()


def test_an_ingest_that_loses_its_lock_while_retrying_publishes_nothing_more(stack, tmp_path):
    """NATS is down, so the active ingest retries the publish of a transaction; its lock's
    session is then ended (pg_terminate_backend), as when another ingest's takeover is
    possible. It notices before its next retry, with NATS still down, and publishes nothing
    more (without the check it retried until NATS came back, and published then)."""
    with login(stack) as (role, url), nats_server(tmp_path) as nats:
        ingest = Role(stack, tmp_path, "ingest", url, nats.url, role)
        try:
            ingest.health(200)
            nats.kill()
            stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"lockloss_{role}/a")
            deadline = time.monotonic() + WAIT
            while ingest.metric("docstore_ingest_publish_retries_total") < 1:
                assert time.monotonic() < deadline, "the ingest does not retry its publish"
                time.sleep(0.1)
            [(holder,)] = stack.sql(
                "select l.pid from pg_locks l join pg_stat_activity a using (pid) "
                "where l.locktype = 'advisory' and l.granted and a.usename = %s",
                role,
            )
            stack.sql("select pg_terminate_backend(%s)", holder)
            while "lost the ingest lock while retrying a publish" not in ingest.log.read_text():
                assert time.monotonic() < deadline + WAIT, ingest.log.read_text()[-3000:]
                time.sleep(0.1)
            assert ingest.metric("docstore_ingest_active") == 0
            retries = ingest.metric("docstore_ingest_publish_retries_total")
            for _ in range(30):
                assert ingest.metric("docstore_ingest_publish_retries_total") == retries
                time.sleep(0.2)
            # NATS back: the ingest takes the lock again and publishes from the slot.
            nats.start()
            ingest.health(200)
            while ingest.metric("docstore_ingest_published_transactions_total") < 1:
                assert time.monotonic() < deadline + 3 * WAIT, "nothing published"
                time.sleep(0.1)
        finally:
            ingest.stop()
