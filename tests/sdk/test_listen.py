"""Listeners of the SDK (docstore.watch, docstore.async_watch) against the real sidecar and
Postgres: what a callback sees, built only from the changes it was handed, equals a fresh query
after concurrent writes, a SIGKILLed and restarted sidecar, a Postgres restart; a permission
denial mid-stream ends the listener with PermissionDenied; one client's listeners share one
stream.

Every wait is a condition with a generous deadline (a broken listener fails, never hangs); no
test asserts on a duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import signal
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

import docstore
from docstore import _values, async_watch, watch
from docstore.exceptions import InvalidArgument, PermissionDenied

WAIT = 60


class Recorder:
    """A callback that rebuilds the result from the changes alone, and notes every change that
    does not fit what it saw (a duplicate ADDED, a MODIFIED of nothing new, a wrong index)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.view: list[tuple[str, Any, Any]] = []  # (path, data, update_time)
        self.calls = 0
        self.changes: list[tuple[str, str]] = []
        self.problems: list[str] = []
        self.errors: list[BaseException] = []

    def __call__(self, docs: list, changes: list, read_time: Any) -> None:
        with self.cond:
            for c in changes:
                self._apply(c)
            seen = [(d.reference.path, d.to_dict()) for d in docs]
            if [(p, data) for p, data, _ in self.view] != seen:
                self.problems.append(f"changes do not add up to the documents: {self.view} {seen}")
            if read_time is None:
                self.problems.append("no read_time")
            self.calls += 1
            self.cond.notify_all()

    def _apply(self, c: watch.DocumentChange) -> None:
        path = c.document.reference.path
        self.changes.append((c.type.name, path))
        paths = [p for p, _, _ in self.view]
        entry = (path, c.document.to_dict(), c.document.update_time)
        if c.type.name == "ADDED":
            if path in paths or c.old_index != -1:
                self.problems.append(f"duplicate ADDED {path}")
                return
            self.view.insert(c.new_index, entry)
        elif c.type.name == "REMOVED":
            if c.new_index != -1 or paths[c.old_index : c.old_index + 1] != [path]:
                self.problems.append(f"REMOVED {path} not at {c.old_index}")
                return
            self.view.pop(c.old_index)
        else:
            if paths[c.old_index : c.old_index + 1] != [path]:
                self.problems.append(f"MODIFIED {path} not at {c.old_index}")
                return
            if self.view[c.old_index][2] == c.document.update_time:
                self.problems.append(f"MODIFIED {path} repeats a version already seen")
            self.view.pop(c.old_index)
            self.view.insert(c.new_index, entry)

    def on_error(self, error: BaseException) -> None:
        with self.cond:
            self.errors.append(error)
            self.cond.notify_all()

    def wait(self, pred, what: str) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: pred(self), WAIT), (what, self.view, self.problems)

    def docs(self) -> list[tuple[str, Any]]:
        with self.cond:
            return [(p, d) for p, d, _ in self.view]


def fresh(client: docstore.Client, sql: str) -> list[tuple[str, Any]]:
    """A fresh :runQuery of `sql`, decoded like the snapshots."""
    rows = client._transport.request(
        "POST", client._database_route(":runQuery"), json={"sql": sql}, idempotent=True
    )
    return [(r["path"], _values.decode_data(r["data"], client)) for r in rows]


def settles_at(client: docstore.Client, rec: Recorder, sql: str) -> None:
    """Wait until the recorder shows the fresh result, and check nothing was out of place."""
    want = fresh(client, sql)
    rec.wait(lambda r: [(p, d) for p, d, _ in r.view] == want, "the fresh result")
    assert rec.problems == []


def writer(client: docstore.Client, coll: str, seed: int, n: int) -> None:
    rng = random.Random(seed)
    for i in range(n):
        ref = client.document(f"{coll}/d{rng.randrange(8)}")
        op = rng.random()
        if op < 0.2:
            ref.delete()
        else:
            ref.set({"n": rng.randrange(20), "w": seed, "i": i})


def test_query_listener_follows_concurrent_writes(stack, db, coll):
    db.document(f"{coll}/d0").set({"n": 3})
    sql = f"select * from /{coll} where n >= 5 order by n desc"
    rec = Recorder()
    w = db.sql(sql).on_snapshot(rec, rec.on_error)
    try:
        rec.wait(lambda r: r.calls >= 1, "the first results")
        threads = [threading.Thread(target=writer, args=(db, coll, s, 40)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        settles_at(db, rec, sql)
        assert rec.errors == []
        assert {t for t, _ in rec.changes} >= {"ADDED", "REMOVED", "MODIFIED"}
    finally:
        w.unsubscribe()
    assert not w.is_active


def test_structured_query_listener_equals_get_after_writes(db, coll):
    query = (
        db.collection(coll)
        .where(filter=docstore.FieldFilter("n", ">=", 5))
        .order_by("n", direction=docstore.Query.DESCENDING)
        .limit(4)
    )
    rec = Recorder()
    w = query.on_snapshot(rec, rec.on_error)
    try:
        rec.wait(lambda r: r.calls >= 1, "the first results")
        writer(db, coll, 11, 60)
        want = [(s.reference.path, s.to_dict()) for s in query.get()]
        rec.wait(lambda r: r.docs() == want, "query.get()'s result")
        assert rec.problems == [] and rec.errors == []
    finally:
        w.unsubscribe()


def test_aggregation_listener_follows_writes(db, coll):
    got: list = []
    cond = threading.Condition()

    def callback(results, read_time):
        with cond:
            got.append({r.alias: r.value for r in results[0]})
            cond.notify_all()

    def wait_for(want):
        with cond:
            assert cond.wait_for(lambda: want in got, WAIT), got

    w = db.collection(coll).count(alias="n").on_snapshot(callback)
    s = db.sql(f"select count(*) as c, sum(x) as s from /{coll}").on_snapshot(callback)
    try:
        wait_for({"n": 0})
        db.document(f"{coll}/a").set({"x": 2})
        db.document(f"{coll}/b").set({"x": 3})
        wait_for({"c": 2, "s": 5})
        wait_for({"n": 2})
    finally:
        w.unsubscribe()
        s.unsubscribe()


def test_a_change_reuses_the_snapshots_of_unchanged_documents(db, coll):
    for i in range(3):
        db.document(f"{coll}/d{i}").set({"i": i})
    calls: list[list] = []
    cond = threading.Condition()

    def callback(docs, changes, read_time):
        with cond:
            calls.append(list(docs))
            cond.notify_all()

    w = db.collection(coll).on_snapshot(callback)
    try:
        with cond:
            assert cond.wait_for(lambda: len(calls) == 1, WAIT)
        db.document(f"{coll}/d1").set({"i": 10})
        with cond:
            assert cond.wait_for(lambda: len(calls) == 2, WAIT)
        first, second = calls
        # A change costs the changed documents, not the size of the result.
        assert second[0] is first[0] and second[2] is first[2]
        assert second[1] is not first[1] and second[1].to_dict() == {"i": 10}
    finally:
        w.unsubscribe()


def test_document_listener_sees_creation_change_and_deletion(db, coll):
    ref = db.document(f"{coll}/one")
    calls: list[tuple[list, list]] = []
    cond = threading.Condition()

    def callback(docs, changes, read_time):
        with cond:
            calls.append(
                (
                    [(d.reference is ref, d.exists, d.to_dict()) for d in docs],
                    [(c.type.name, c.old_index, c.new_index) for c in changes],
                )
            )
            cond.notify_all()

    def wait(n):
        with cond:
            assert cond.wait_for(lambda: len(calls) >= n, WAIT), calls

    w = ref.on_snapshot(callback)
    try:
        wait(1)
        ref.set({"a": 1})
        wait(2)
        ref.update({"a": 2})
        wait(3)
        ref.delete()
        wait(4)
    finally:
        w.unsubscribe()
    assert calls == [
        ([], []),
        ([(True, True, {"a": 1})], [("ADDED", -1, 0)]),
        ([(True, True, {"a": 2})], [("MODIFIED", 0, 0)]),
        ([], [("REMOVED", 0, -1)]),
    ]


def test_a_refused_target_raises_from_on_snapshot_and_the_stream_goes_on(db, coll):
    rec = Recorder()
    ok = db.sql(f"select * from /{coll}").on_snapshot(rec)
    try:
        rec.wait(lambda r: r.calls >= 1, "the first results")
        with pytest.raises(InvalidArgument):
            db.sql("select * from").on_snapshot(Recorder())
        db.document(f"{coll}/a").set({"x": 1})
        rec.wait(lambda r: r.docs() == [(f"{coll}/a", {"x": 1})], "the write")
    finally:
        ok.unsubscribe()


def test_a_refused_first_target_raises_and_the_client_listens_afterwards(stack, coll):
    with docstore.Client(stack.url, token=stack.admin_key) as client:
        with pytest.raises(InvalidArgument):
            client.sql("select * from").on_snapshot(Recorder())
        rec = Recorder()
        w = client.collection(coll).on_snapshot(rec)
        try:
            client.document(f"{coll}/a").set({"x": 1})
            rec.wait(lambda r: r.docs() == [(f"{coll}/a", {"x": 1})], "the write")
        finally:
            w.unsubscribe()


def test_closing_the_client_ends_its_listener_thread(stack, coll):
    client = docstore.Client(stack.url, token=stack.admin_key)
    rec = Recorder()
    client.collection(coll).on_snapshot(rec)
    rec.wait(lambda r: r.calls >= 1, "the first results")
    thread = watch.session_of(client)._thread
    assert thread is not None and thread.is_alive()
    client.close()
    thread.join(WAIT)
    assert not thread.is_alive()


def test_listeners_of_a_client_share_one_stream(stack, db, coll):
    recs = [Recorder() for _ in range(3)]
    watches = [
        db.sql(f"select * from /{coll} where k = {i}").on_snapshot(rec)
        for i, rec in enumerate(recs)
    ]
    try:
        for rec in recs:
            rec.wait(lambda r: r.calls >= 1, "the first results")
        session = watch.session_of(db)
        stream = session.stream_id
        assert stream
        # The stream holds the three targets: adding any of their ids again is refused.
        route = f"/v1/databases/(default):listen/{stream}/targets"
        for lst in (w._listener for w in watches):
            r = httpx.post(
                stack.url + route,
                headers=stack.admin,
                json={"targets": [{"id": lst.id, "document": f"{coll}/x"}]},
                timeout=WAIT,
            )
            assert r.status_code == 400, r.text
        watches[1].unsubscribe()
        for i in range(3):
            db.document(f"{coll}/d{i}").set({"k": i})
        recs[0].wait(lambda r: len(r.docs()) == 1, "listener 0")
        recs[2].wait(lambda r: len(r.docs()) == 1, "listener 2")
        assert session.stream_id == stream
        assert recs[1].docs() == []
        assert all(rec.problems == [] for rec in recs)
    finally:
        for w in watches:
            w.unsubscribe()


def test_a_callback_that_raises_does_not_stop_the_stream(db, coll, caplog):
    rec = Recorder()
    seen = []

    def bad(docs, changes, read_time):
        seen.append(len(docs))
        raise RuntimeError("boom")

    w1 = db.sql(f"select * from /{coll}").on_snapshot(bad)
    w2 = db.sql(f"select * from /{coll}").on_snapshot(rec)
    try:
        with caplog.at_level(logging.ERROR, logger="docstore.watch"):
            db.document(f"{coll}/a").set({"x": 1})
            db.document(f"{coll}/b").set({"x": 2})
            rec.wait(lambda r: len(r.docs()) == 2, "both writes")
        assert "boom" in caplog.text
    finally:
        w1.unsubscribe()
        w2.unsubscribe()


# --- permission denial mid-stream -------------------------------------------------------------

DENY_READS = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /{document=**} { allow read: if false; allow write: if true; }
  }
}"""


@pytest.fixture
def rules_db(stack):
    name = "sdklisten" + os.urandom(4).hex()
    stack.open_database(name)
    yield name


def test_permission_denial_mid_stream_goes_to_on_error(stack, rules_db, coll):
    token = stack.token({"sub": "u1"})
    with docstore.Client(stack.url, token=token, database=rules_db) as client:
        rec = Recorder()
        w = client.sql(f"select * from /{coll}").on_snapshot(rec, rec.on_error)
        rec.wait(lambda r: r.calls >= 1, "the first results")
        stack.sql("select docstore.set_rules(%s, %s)", DENY_READS, rules_db)
        rec.wait(lambda r: r.errors, "the denial")
        assert [type(e) for e in rec.errors] == [PermissionDenied]
        assert not w.is_active
        # Reconnecting is refused while the rules deny it.
        with pytest.raises(PermissionDenied):
            client.sql(f"select * from /{coll}").on_snapshot(Recorder())


def test_permission_denial_without_on_error_is_logged_and_closes(stack, rules_db, coll, caplog):
    token = stack.token({"sub": "u2"})
    with docstore.Client(stack.url, token=token, database=rules_db) as client:
        rec = Recorder()
        with caplog.at_level(logging.ERROR, logger="docstore.watch"):
            w = client.sql(f"select * from /{coll}").on_snapshot(rec)
            rec.wait(lambda r: r.calls >= 1, "the first results")
            stack.sql("select docstore.set_rules(%s, %s)", DENY_READS, rules_db)
            deadline = threading.Event()
            for _ in range(WAIT * 10):
                if not w.is_active:
                    break
                deadline.wait(0.1)
        assert not w.is_active
        assert "closed" in caplog.text


# --- a sidecar killed with SIGKILL, Postgres restarted ---------------------------------------


@pytest.fixture
def base_conftest(request) -> Any:
    parent = Path(__file__).resolve().parents[1] / "conftest.py"
    for plugin in request.config.pluginmanager.get_plugins():
        if getattr(plugin, "__file__", None) and Path(plugin.__file__).resolve() == parent:
            return plugin
    raise RuntimeError("tests/conftest.py is not loaded")


class Sidecar:
    """A sidecar of the test's own with live queries on its own slot, restartable on the same
    port (tests/conftest.py's own_sidecar cannot restart)."""

    def __init__(self, stack, base, *flags: str) -> None:
        self.stack, self.base, self.flags = stack, base, flags
        self.port = base.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.slot = "sdk_listen_" + os.urandom(4).hex()
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = Path(self.stack.cluster.dir) / f"sidecar-{self.port}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSTORE_")}
        env.update(
            {
                "DOCSTORE_DATABASE_URL": self.stack.cluster.url(),
                "DOCSTORE_LISTEN": f"127.0.0.1:{self.port}",
                "DOCSTORE_ADMIN_KEY": self.stack.admin_key,
                "DOCSTORE_JWT_SECRET": self.stack.jwt_secret,
            }
        )
        binary = os.environ.get("DOCSTORE_SIDECAR_BIN") or str(self.base.sidecar_binary())
        self.proc = subprocess.Popen(
            [binary, "--slot", self.slot, *self.flags],
            env=env,
            stdout=log.open("a"),
            stderr=subprocess.STDOUT,
        )
        self.base.wait_healthy(self.url, self.proc, log)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(WAIT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.stack.sql(
            "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
            "where slot_name = %s and not active",
            self.slot,
        )


@contextlib.contextmanager
def own_live_sidecar(stack, base, *flags: str):
    sidecar = Sidecar(stack, base, *flags)
    sidecar.start()
    try:
        yield sidecar
    finally:
        sidecar.stop()


def test_listener_survives_a_sigkilled_sidecar(stack, base_conftest, coll):
    with (
        own_live_sidecar(stack, base_conftest) as sidecar,
        docstore.Client(sidecar.url, token=stack.admin_key) as client,
    ):
        for i in range(6):
            client.document(f"{coll}/d{i}").set({"n": i})
        sql = f"select * from /{coll} where n >= 2 order by n"
        rec = Recorder()
        w = client.sql(sql).on_snapshot(rec, rec.on_error)
        try:
            settles_at(client, rec, sql)
            first_stream = watch.session_of(client).stream_id
            sidecar.kill()
            # Written while no sidecar runs: straight into Postgres.
            stack.sql("select docstore.set(%s, '{\"n\": 9}')", f"{coll}/d0")
            stack.sql("select docstore.delete(%s)", f"{coll}/d3")
            stack.sql('select docstore.set(%s, \'{"n": 4, "m": 1}\')', f"{coll}/d4")
            sidecar.start()
            settles_at(client, rec, sql)
            assert watch.session_of(client).stream_id != first_stream
            writer(client, coll, 7, 30)
            settles_at(client, rec, sql)
            assert rec.errors == []
            assert ("ADDED", f"{coll}/d0") in rec.changes
        finally:
            w.unsubscribe()


def test_a_lagging_listener_gets_the_difference_after_reset_lagged(stack, base_conftest, coll):
    with (
        own_live_sidecar(stack, base_conftest, "--listen-queue", "2") as sidecar,
        docstore.Client(sidecar.url, token=stack.admin_key) as client,
    ):
        sql = f"select * from /{coll} order by n"
        rec = Recorder()
        release = threading.Event()

        def slow(docs, changes, read_time):
            # Blocks the stream's reader until the writes are done: the sidecar's queue of
            # two events overflows and the stream ends with reset {lagged}.
            release.wait(WAIT)
            rec(docs, changes, read_time)

        w = client.sql(sql).on_snapshot(slow, rec.on_error)
        try:
            # Large documents: the events must fill the socket's buffers too.
            for i in range(300):
                stack.sql(
                    "select docstore.set(%s, jsonb_build_object('n', %s::int, 'pad', "
                    "repeat('x', 65536)))",
                    f"{coll}/d{i % 5}",
                    i,
                )
            release.set()
            settles_at(client, rec, sql)
            resets = httpx.get(sidecar.url + "/metrics", timeout=WAIT).text
            assert re.search(r'docstore_session_resets_total\{reason="lagged"\} [1-9]', resets)
            assert rec.errors == []
        finally:
            w.unsubscribe()


def test_listener_survives_a_postgres_restart(stack, base_conftest, coll):
    pg_ctl = str(base_conftest.PG_BIN / "pg_ctl")
    with (
        own_live_sidecar(stack, base_conftest) as sidecar,
        docstore.Client(sidecar.url, token=stack.admin_key) as client,
    ):
        sql = f"select * from /{coll} order by n"
        rec = Recorder()
        w = client.sql(sql).on_snapshot(rec, rec.on_error)
        try:
            writer(client, coll, 1, 20)
            settles_at(client, rec, sql)
            base_conftest.as_postgres(
                [
                    pg_ctl,
                    "-D",
                    str(stack.cluster.data),
                    "-l",
                    str(stack.cluster.log),
                    "-w",
                    "-t",
                    "60",
                    "-m",
                    "fast",
                    "restart",
                ],
                timeout=WAIT,
            )
            stack.sql("select docstore.set(%s, '{\"n\": 100}')", f"{coll}/after")
            settles_at(client, rec, sql)
            writer(client, coll, 2, 20)
            settles_at(client, rec, sql)
            assert rec.errors == []
        finally:
            w.unsubscribe()


class CuttingProxy:
    """A TCP proxy in front of the sidecar whose connections the test can cut (a dropped
    connection, with the sidecar and its streams still alive)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.server.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            with self.lock:
                self.conns += [down, up]
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self.lock:
            conns, self.conns = self.conns, []
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self.server.close()
        self.cut()


def test_a_dropped_connection_resumes_the_same_stream(stack, coll):
    proxy = CuttingProxy(int(stack.url.rsplit(":", 1)[1]))
    try:
        with docstore.Client(proxy.url, token=stack.admin_key) as client:
            sql = f"select * from /{coll} order by n"
            rec = Recorder()
            w = client.sql(sql).on_snapshot(rec, rec.on_error)
            try:
                writer(client, coll, 3, 10)
                settles_at(client, rec, sql)
                stream = watch.session_of(client).stream_id
                calls = rec.calls
                proxy.cut()
                for i in range(5):
                    stack.sql("select docstore.set(%s, %s)", f"{coll}/cut{i}", f'{{"n": {i}}}')
                settles_at(client, rec, sql)
                # Resumed with Last-Event-ID: the same stream, one call per transaction (a
                # new stream would have handed the five documents over in one difference).
                assert watch.session_of(client).stream_id == stream
                assert rec.calls == calls + 5
                assert rec.errors == []
            finally:
                w.unsubscribe()
    finally:
        proxy.close()


# --- async ------------------------------------------------------------------------------------


async def next_of(it) -> Any:
    return await asyncio.wait_for(it.__anext__(), WAIT)


def test_async_query_listen_follows_concurrent_writes(db, arun, coll):
    sql = f"select * from /{coll} where n >= 5 order by n desc"
    rec = Recorder()

    async def main(client):
        it = client.sql(sql).listen()
        snap = await next_of(it)
        rec(snap.docs, snap.document_changes(), snap.read_time)
        writers = [asyncio.to_thread(writer, db, coll, s, 30) for s in range(3)]
        await asyncio.gather(*writers)
        want = await asyncio.to_thread(fresh, db, sql)
        while rec.docs() != want:
            snap = await next_of(it)
            assert isinstance(snap, watch.QuerySnapshot)
            rec(snap.docs, snap.document_changes(), snap.read_time)
        stream = async_watch.session_of(client).stream_id
        await it.aclose()
        return stream

    assert arun(main)
    assert rec.problems == []


def test_async_document_listen_and_one_shared_stream(db, arun, coll):
    async def main(client):
        ref = client.document(f"{coll}/one")
        doc_it = ref.listen()
        query_it = client.sql(f"select * from /{coll}").listen()
        first = await next_of(doc_it)
        assert (first.exists, first.reference.path) == (False, f"{coll}/one")
        assert (await next_of(query_it)).empty
        session = async_watch.session_of(client)
        stream = session.stream_id
        assert stream and len(session._core.on_server) == 2
        await asyncio.to_thread(db.document(f"{coll}/one").set, {"a": 1})
        snap = await next_of(doc_it)
        assert (snap.exists, snap.to_dict()) == (True, {"a": 1})
        qs = await next_of(query_it)
        assert [(c.type.name, c.new_index) for c in qs.document_changes()] == [("ADDED", 0)]
        await doc_it.aclose()
        await asyncio.to_thread(db.document(f"{coll}/two").set, {"a": 2})
        qs = await next_of(query_it)
        assert [d.id for d in qs] == ["one", "two"]
        assert session.stream_id == stream and len(session._core.on_server) == 1
        await query_it.aclose()

    arun(main)


def test_async_permission_denial_is_raised_from_the_iterator(stack, rules_db, coll):
    token = stack.token({"sub": "u3"})

    async def main():
        async with docstore.AsyncClient(stack.url, token=token, database=rules_db) as client:
            it = client.sql(f"select * from /{coll}").listen()
            await next_of(it)
            await asyncio.to_thread(
                stack.sql, "select docstore.set_rules(%s, %s)", DENY_READS, rules_db
            )
            with pytest.raises(PermissionDenied):
                await next_of(it)

    asyncio.run(main())


def test_async_query_and_aggregation_listen(db, arun, coll):
    async def main(client):
        query = client.collection(coll).where(filter=docstore.FieldFilter("n", ">=", 1))
        docs_it = query.listen()
        count_it = client.collection(coll).count(alias="k").listen()
        assert (await next_of(docs_it)).empty
        assert [r.value for r in (await next_of(count_it))[0]] == [0]
        await asyncio.to_thread(db.document(f"{coll}/a").set, {"n": 1})
        snap = await next_of(docs_it)
        assert [d.id for d in snap] == ["a"] and snap.read_time is not None
        results = await next_of(count_it)
        assert [(r.alias, r.value) for r in results[0]] == [("k", 1)]
        await docs_it.aclose()
        await count_it.aclose()

    arun(main)
