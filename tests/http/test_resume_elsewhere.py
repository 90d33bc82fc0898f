"""Resuming a stream on another sidecar process (docs/listen.md, "Resuming on another
process"): two sidecars A and B on the same Postgres, each with its own slot, share a
stream registry in NATS JetStream (`--nats-url`, a real nats-server started here). A client
that saw a stream on A up to position P and resumes it on B with its Last-Event-ID gets no
reset: B's first event is one `change` that takes it from its results at P to B's position,
and the client's results, folded from A's events and then B's, equal a fresh query of each
target.

Each case fails without what it checks: without the before-images (B taking its current
results for the client's) the first event of B carries no change and the folded results
differ from the fresh query at once; without the registry (a resume of an unknown stream)
the first event is a reset; a registry that ignored the owner would adopt bob's resume of
alice's stream; a changelog that did not know where it starts would adopt the position older
than C and miss what committed before C's slot existed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from conftest import free_port, sidecar_binary, sidecar_env, sse_events, wait_healthy
from test_failover import drop_slot_under
from test_listen import Listener, View

DB = "elsewhere"
LISTEN = f"/v1/databases/{DB}:listen"
RUN = f"/v1/databases/{DB}:runQuery"
NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"


@pytest.fixture(scope="module")
def nats(stack, tmp_path_factory):
    """A nats-server with JetStream on a free port; yields its URL."""
    port = free_port()
    store = tmp_path_factory.mktemp("nats")
    log = store / "nats.log"
    proc = subprocess.Popen(
        [NATS, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(store)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log.read_text()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        stack.open_database(DB)
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(15)


@dataclasses.dataclass
class Sidecar:
    url: str
    proc: subprocess.Popen
    log: Path
    slot: str


@contextlib.contextmanager
def sidecars(
    stack,
    nats: str,
    count: int,
    graces: list[int] | None = None,
    urls: list[str] | None = None,
    queues: list[int | None] | None = None,
    replays: list[int | None] | None = None,
):
    """`count` sidecars on the test cluster, each with a slot of its own, all registering
    their streams in `nats`; `graces`: each one's `--listen-grace-seconds` (the default
    otherwise); `urls`: each one's NATS URL (`nats` otherwise: a proxy to it); `queues`: each
    one's `--listen-queue` (`None`: the default); `replays`: each one's `--listen-replay`
    (`None`: the default). Their session module logs at debug level (the registry's
    deletes)."""
    started: list[tuple[Sidecar, str]] = []
    try:
        for i in range(count):
            port = free_port()
            slot = "elsewhere_" + uuid.uuid4().hex[:8]
            log = Path(stack.cluster.dir) / f"sidecar-{port}.log"
            env = sidecar_env(
                stack,
                port,
                DOCSTORE_NATS_URL=nats if urls is None else urls[i],
                RUST_LOG="info,docstore_sidecar::session=debug",
            )
            binary = str(sidecar_binary())
            args = [] if graces is None else ["--listen-grace-seconds", str(graces[i])]
            if queues is not None and queues[i] is not None:
                args += ["--listen-queue", str(queues[i])]
            if replays is not None and replays[i] is not None:
                args += ["--listen-replay", str(replays[i])]
            proc = subprocess.Popen(
                [binary, "--slot", slot, "--heartbeat-ms", "200", *args],
                env=env,
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
            )
            side = Sidecar(f"http://127.0.0.1:{port}", proc, log, slot)
            started.append((side, slot))
            wait_healthy(side.url, proc, log)
            ready(stack, side)
        yield [s for s, _ in started]
    finally:
        for side, _ in started:
            if side.proc.poll() is None:
                side.proc.terminate()
                try:
                    side.proc.wait(15)
                except subprocess.TimeoutExpired:
                    side.proc.kill()
                    side.proc.wait(15)
        for _, slot in started:
            for _ in range(100):
                if not stack.sql(
                    "select from pg_replication_slots where slot_name = %s and active", slot
                ):
                    break
                time.sleep(0.1)
            stack.sql(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
                "where slot_name = %s and not active",
                slot,
            )


class HeldProxy:
    """A TCP proxy to `upstream` (host:port) whose client-to-server bytes the test can hold
    (`hold`) and let go (`release`): a sidecar behind it cannot reach NATS meanwhile, while
    the others can."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.rpartition("//")[2].partition(":")
        self.upstream = (host, int(port))
        self.flowing = threading.Event()
        self.flowing.set()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"nats://127.0.0.1:{self.server.getsockname()[1]}"
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                down, _ = self.server.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(down, up, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, held: bool) -> None:
        with contextlib.suppress(OSError):
            while chunk := src.recv(65536):
                if held:
                    self.flowing.wait()
                dst.sendall(chunk)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def hold(self) -> None:
        self.flowing.clear()

    def release(self) -> None:
        self.flowing.set()

    def close(self) -> None:
        self.closed = True
        self.release()
        self.server.close()


class ClaimProxy(HeldProxy):
    """A proxy that, once `arm`ed, keeps back the next compare-and-set write to the registry
    (the chunk carrying `Nats-Expected-Last-Subject-Sequence`: an adoption's claim) until
    `release`, while the bytes after it go on (`after`: how many registry reads did
    meanwhile)."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.armed = False
        self.kept = threading.Event()
        self.after = 0
        self.lock = threading.Lock()

    def arm(self) -> None:
        self.flowing.clear()
        self.armed = True

    def _pump(self, src: socket.socket, dst: socket.socket, held: bool) -> None:
        with contextlib.suppress(OSError):
            while chunk := src.recv(65536):
                if held and self.armed and b"Nats-Expected-Last-Subject-Sequence" in chunk:
                    self.armed = False
                    self.kept.set()
                    threading.Thread(target=self._later, args=(dst, chunk), daemon=True).start()
                    continue
                if held and b".GET." in chunk and self.kept.is_set() and not self.flowing.is_set():
                    self.after += 1
                with self.lock:
                    dst.sendall(chunk)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def _later(self, dst: socket.socket, chunk: bytes) -> None:
        self.flowing.wait()
        with self.lock, contextlib.suppress(OSError):
            dst.sendall(chunk)


def metric(side: Sidecar, name: str, label: str) -> float:
    text = httpx.get(f"{side.url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and label in line
    )


def at(stack, side: Sidecar):
    return dataclasses.replace(stack, url=side.url)


def ready(stack, side: Sidecar) -> None:
    """Wait until the sidecar's change stream has taken in a transaction (a first snapshot
    comes at a decoded position)."""
    listener = Listener(at(stack, side), params=[("document", "ready/x")], path=LISTEN)
    try:
        assert listener.status == 200, listener.error_body
        assert listener.next()["event"] == "snapshot"
    finally:
        listener.close()


def position(token: str) -> int:
    return int(token.rpartition(".")[2], 16)


def put(stack, client, path: str, n: int) -> None:
    r = client.put(stack.doc(path, DB), headers=stack.admin, json={"n": n})
    assert r.status_code == 200, r.text


def delete(stack, client, path: str) -> None:
    r = client.delete(stack.doc(path, DB), headers=stack.admin)
    assert r.status_code == 200, r.text


def queries(coll: str) -> dict[str, str]:
    return {
        "1": f"select * from /{coll} where n >= 0",
        "2": f"select * from /{coll} order by n desc limit 3",
    }


def params(coll: str) -> list[tuple[str, str]]:
    q = queries(coll)
    return [("document", f"{coll}/d0"), ("sql", q["1"]), ("sql", q["2"])]


def fresh(stack, client, coll: str) -> dict[str, list]:
    """Every target's current result, read now."""
    out: dict[str, list] = {}
    r = client.get(stack.doc(f"{coll}/d0", DB), headers=stack.admin)
    assert r.status_code in (200, 404), r.text
    out["0"] = [(f"{coll}/d0", r.json()["data"])] if r.status_code == 200 else []
    for name, sql in queries(coll).items():
        r = client.post(RUN, headers=stack.admin, json={"sql": sql})
        assert r.status_code == 200, r.text
        out[name] = [(row["path"], row["data"]) for row in r.json()]
    return out


def folded(view: View) -> dict[str, list]:
    return {name: view.docs(name) for name in ("0", "1", "2")}


def until_current(stack, client, coll, listener: Listener, view: View) -> list[dict]:
    """Apply events until the view equals a fresh read of every target; the events."""
    seen = []
    while True:
        ev = listener.next()
        seen.append(ev)
        view.apply(ev)
        if ev["event"] != "heartbeat" and folded(view) == fresh(stack, client, coll):
            return seen


def seeded(stack, client, coll: str) -> None:
    for i in range(8):
        put(stack, client, f"{coll}/d{i}", i * 10)


def open_and_follow(stack, client, coll, side: Sidecar, headers=None):
    """A stream on `side`, followed until it shows the seeded data and two more writes;
    the view, the listener (closed) and the last token."""
    listener = Listener(at(stack, side), params=params(coll), path=LISTEN, headers=headers)
    assert listener.status == 200, listener.error_body
    view = View()
    try:
        until_current(stack, client, coll, listener, view)
        put(stack, client, f"{coll}/d3", 33)
        put(stack, client, f"{coll}/d0", 1)
        until_current(stack, client, coll, listener, view)
    finally:
        listener.close()
    last = listener.received[-1]["id"]
    return view, listener, last


def move_everything(stack, client, coll: str) -> None:
    """Writes after P: into the limit window, out of it, modified in it, deleted from it,
    a new document, the document target changed twice and deleted."""
    put(stack, client, f"{coll}/d1", 100)  # into the window
    put(stack, client, f"{coll}/d7", -5)  # out of the window (and out of the `n >= 0` query)
    put(stack, client, f"{coll}/d6", 61)  # modified in the window
    delete(stack, client, f"{coll}/d5")  # deleted from the window
    put(stack, client, f"{coll}/new", 55)  # a new document in the window
    put(stack, client, f"{coll}/d1", 101)  # written twice
    put(stack, client, f"{coll}/d0", 2)
    delete(stack, client, f"{coll}/d0")


def resume(stack, client, coll, side: Sidecar, view: View, last: str, before: list, headers=None):
    """Resume with `last` on `side`: the first event is one change (no reset), the folded
    view equals a fresh read right after it, every position is past `last`, and later
    writes arrive. Returns the listener (open) and the last token."""
    hdrs = {**(stack.admin if headers is None else headers), "Last-Event-ID": last}
    listener = Listener(at(stack, side), params=params(coll), path=LISTEN, headers=hdrs)
    try:
        assert listener.status == 200, listener.error_body
        assert listener.stream_id == last.rpartition(".")[0]
        first = listener.next()
        assert first["event"] == "change", first
        view.apply(first)
        assert folded(view) == fresh(stack, client, coll)
        put(stack, client, f"{coll}/d2", 999)
        until_current(stack, client, coll, listener, view)
        events = before + listener.received
        assert all(ev["event"] != "reset" for ev in listener.received)
        assert all(position(ev["id"]) > position(last) for ev in listener.received)
        logged = [position(ev["id"]) for ev in events if ev["event"] != "heartbeat"]
        assert logged == sorted(set(logged)), "a position repeats"
        return listener, listener.received[-1]["id"]
    except BaseException:
        listener.close()
        raise


def resume_reset(
    stack, client, coll, side: Sidecar, last: str, reason: str, headers=None, meanwhile=None
) -> tuple[Listener, dict]:
    """Resume with `last` on `side` (as `headers`, the admin by default): the first event is
    `reset {reason}`, then (after `meanwhile()`, if given) a snapshot whose folded results
    equal a fresh read of every target. Returns the listener (open; closed on failure) and
    the snapshot."""
    hdrs = {**(stack.admin if headers is None else headers), "Last-Event-ID": last}
    listener = Listener(at(stack, side), params=params(coll), path=LISTEN, headers=hdrs)
    try:
        assert listener.status == 200, listener.error_body
        first = listener.next()
        assert first["event"] == "reset", first
        assert first["data"]["reason"] == reason, first
        if meanwhile is not None:
            meanwhile()
        snapshot = listener.next()
        assert snapshot["event"] == "snapshot", snapshot
        view = View()
        view.apply(snapshot)
        assert folded(view) == fresh(stack, client, coll)
        return listener, snapshot
    except BaseException:
        listener.close()
        raise


def test_a_stream_resumes_exactly_on_another_process_after_its_own_was_killed(stack, nats, client):
    coll = "c" + uuid.uuid4().hex[:10]
    with sidecars(stack, nats, 2) as (a, b):
        seeded(stack, client, coll)
        view, on_a, last = open_and_follow(stack, client, coll, a)
        a.proc.kill()
        a.proc.wait(15)
        move_everything(stack, client, coll)
        on_b, _ = resume(stack, client, coll, b, view, last, on_a.received)
        on_b.close()


def test_a_resume_at_the_adoptions_own_position_is_sent_the_catch_up_again(stack, nats, client):
    # B adopts the stream at P (A killed; writes after P), its client leaves before reading
    # the catch-up, and resumes on B again with P: B holds the stream from P (its floor is
    # the client's position, the catch-up its first logged event), so the client is sent
    # the catch-up `change`, not a reset (issue 27: the matchers oracle's one unexplained
    # `retention_passed` was a resume there after more than `--listen-replay` events).
    coll = "c" + uuid.uuid4().hex[:10]
    with sidecars(stack, nats, 2) as (a, b):
        seeded(stack, client, coll)
        view, on_a, last = open_and_follow(stack, client, coll, a)
        a.proc.kill()
        a.proc.wait(15)
        move_everything(stack, client, coll)
        hdrs = {**stack.admin, "Last-Event-ID": last}
        unread = Listener(at(stack, b), params=params(coll), path=LISTEN, headers=hdrs)
        try:
            assert unread.status == 200, unread.error_body
            assert unread.stream_id == last.rpartition(".")[0]
        finally:
            unread.close()
        # One more event after the catch-up: both are replayed from P.
        put(stack, client, f"{coll}/d4", 44)
        again = Listener(at(stack, b), params=params(coll), path=LISTEN, headers=hdrs)
        try:
            assert again.status == 200, again.error_body
            assert again.stream_id == last.rpartition(".")[0]
            first = again.next()
            assert first["event"] == "change", first
            view.apply(first)
            until_current(stack, client, coll, again, view)
            assert all(ev["event"] != "reset" for ev in again.received)
            assert all(position(ev["id"]) > position(last) for ev in again.received)
        finally:
            again.close()


def test_a_resume_past_the_replay_after_an_adoption_resets(stack, nats, client):
    # The same with B keeping one event per stream (`--listen-replay 1`): B's stream made
    # the catch-up and then another event while its client was away, so P is no longer
    # held and the resume resets (`retention_passed`, then a snapshot): the replay bound,
    # not the adoption.
    coll = "c" + uuid.uuid4().hex[:10]
    with sidecars(stack, nats, 2, replays=[None, 1]) as (a, b):
        seeded(stack, client, coll)
        _, _, last = open_and_follow(stack, client, coll, a)
        a.proc.kill()
        a.proc.wait(15)
        move_everything(stack, client, coll)
        hdrs = {**stack.admin, "Last-Event-ID": last}
        away = Listener(at(stack, b), params=params(coll), path=LISTEN, headers=hdrs)
        try:
            assert away.status == 200, away.error_body
            assert away.next()["event"] == "change"
            put(stack, client, f"{coll}/d4", 44)
            assert away.next()["event"] == "change"
        finally:
            away.close()
        listener, _ = resume_reset(stack, client, coll, b, last, "retention_passed")
        listener.close()


def test_a_stream_moves_between_live_processes_and_back(stack, nats, client):
    coll = "c" + uuid.uuid4().hex[:10]
    with sidecars(stack, nats, 2) as (a, b):
        seeded(stack, client, coll)
        view, on_a, last = open_and_follow(stack, client, coll, a)
        move_everything(stack, client, coll)
        on_b, last = resume(stack, client, coll, b, view, last, on_a.received)
        on_b.close()
        # A still holds its copy (disconnected, within its grace): B took the stream over,
        # so A drops that copy and adopts the stream again from B's position.
        put(stack, client, f"{coll}/d4", 44)
        put(stack, client, f"{coll}/new", -1)
        back, _ = resume(stack, client, coll, a, view, last, on_a.received + on_b.received)
        back.close()


def add_target(stack, side: Sidecar, stream: str, sql: str) -> None:
    """Add target `x` (`sql`) to `stream` on `side`."""
    r = httpx.post(
        f"{side.url}{LISTEN}/{stream}/targets",
        headers=stack.admin,
        json={"targets": [{"id": "x", "sql": sql}]},
        timeout=60,
    )
    assert r.status_code == 200, r.text


def current(stack, client, coll: str, sql: str) -> dict[str, list]:
    """A fresh read of every target of `params(coll)` and of target `x` (`sql`)."""
    out = fresh(stack, client, coll)
    r = client.post(RUN, headers=stack.admin, json={"sql": sql})
    assert r.status_code == 200, r.text
    out["x"] = [(row["path"], row["data"]) for row in r.json()]
    return out


def test_a_target_added_after_the_token_comes_whole_on_the_other_process(stack, nats, client):
    # The stream's client, disconnected after the event at P, adds target x on A: A writes x
    # to the registry before the add's reply, but the client holds none of x's results until
    # x's first snapshot, which it never read. Resumed on B with P, the client gets x whole
    # (a `snapshot` of x carrying the other targets' changes since P), in B's first event.
    # Without the registry knowing x as not shown at P, B took x as held at P and sent one
    # `change` that said nothing of x: the client never got x's documents.
    coll = "c" + uuid.uuid4().hex[:10]
    other = "x" + uuid.uuid4().hex[:10]
    sql = f"select * from /{other} where n >= 0"
    with sidecars(stack, nats, 2) as (a, b):
        seeded(stack, client, coll)
        for i in range(3):
            put(stack, client, f"{other}/o{i}", i)
        view, on_a, last = open_and_follow(stack, client, coll, a)
        add_target(stack, a, last.rpartition(".")[0], sql)
        move_everything(stack, client, coll)
        put(stack, client, f"{other}/o1", 11)
        hdrs = {**stack.admin, "Last-Event-ID": last}
        listener = Listener(at(stack, b), params=params(coll), path=LISTEN, headers=hdrs)
        try:
            assert listener.status == 200, listener.error_body
            assert listener.stream_id == last.rpartition(".")[0]
            first = listener.next()
            assert first["event"] == "snapshot", first
            assert [t["target"] for t in first["data"]["targets"]] == ["x"], first
            assert {t["target"] for t in first["data"]["changes"]} == {"0", "1", "2"}, first
            view.apply(first)
            assert {**folded(view), "x": view.docs("x")} == current(stack, client, coll, sql)
            put(stack, client, f"{other}/o2", 22)
            ev = listener.until(lambda ev: ev["event"] != "heartbeat")
            view.apply(ev)
            assert {**folded(view), "x": view.docs("x")} == current(stack, client, coll, sql)
            assert all(ev["event"] != "reset" for ev in listener.received)
        finally:
            listener.close()


def test_an_added_target_the_client_was_shown_moves_as_a_change(stack, nats, client):
    # x is added while the client reads on A, and the client reads x's first snapshot (at
    # S); A records S in the registry. Resumed on B with a later token, the client holds x:
    # B's first event is one `change` for every target, x included (a snapshot of x would
    # be correct too, but would send x whole again).
    coll = "c" + uuid.uuid4().hex[:10]
    other = "x" + uuid.uuid4().hex[:10]
    sql = f"select * from /{other} where n >= 0"
    with sidecars(stack, nats, 2) as (a, b):
        seeded(stack, client, coll)
        put(stack, client, f"{other}/o0", 0)
        on_a = Listener(at(stack, a), params=params(coll), path=LISTEN)
        try:
            assert on_a.status == 200, on_a.error_body
            view = View()
            until_current(stack, client, coll, on_a, view)
            stream = on_a.stream_id
            add_target(stack, a, stream, sql)
            shown = on_a.until(lambda ev: ev["event"] == "snapshot")
            view.apply(shown)
            deadline = time.monotonic() + 60
            while not any(
                "records the targets' first snapshot" in line and stream in line
                for line in a.log.read_text().splitlines()
            ):
                assert time.monotonic() < deadline, "A did not record x's first snapshot"
                time.sleep(0.1)
            put(stack, client, f"{coll}/d3", 33)
            ev = on_a.until(lambda ev: ev["event"] == "change")
            view.apply(ev)
        finally:
            on_a.close()
        last = on_a.received[-1]["id"]
        move_everything(stack, client, coll)
        put(stack, client, f"{other}/o0", 10)
        put(stack, client, f"{other}/o1", 1)
        hdrs = {**stack.admin, "Last-Event-ID": last}
        listener = Listener(at(stack, b), params=params(coll), path=LISTEN, headers=hdrs)
        try:
            assert listener.status == 200, listener.error_body
            first = listener.next()
            assert first["event"] == "change", first
            assert {t["target"] for t in first["data"]["targets"]} == {"0", "1", "2", "x"}
            view.apply(first)
            assert {**folded(view), "x": view.docs("x")} == current(stack, client, coll, sql)
        finally:
            listener.close()


def test_a_stream_that_expired_where_it_moved_resets_where_it_was_before(stack, nats, client):
    # A keeps a disconnected stream for 600 s, B for 1 s. The stream opens on A, moves to B
    # (A keeps its copy, disconnected) and expires on B, which deletes its registry entry.
    # A resume on A then finds no entry: A's copy stops at what A sent before the stream
    # moved, so it is dropped and the resume resets, as one process answers a stream that
    # expired (without the drop A resumed its stale copy and sent a `change`).
    coll = "c" + uuid.uuid4().hex[:10]
    with sidecars(stack, nats, 2, graces=[600, 1]) as (a, b):
        seeded(stack, client, coll)
        view, on_a, last = open_and_follow(stack, client, coll, a)
        move_everything(stack, client, coll)
        on_b, last = resume(stack, client, coll, b, view, last, on_a.received)
        on_b.close()
        stream = last.rpartition(".")[0]
        deadline = time.monotonic() + 60
        while not any(
            "registry entry is deleted" in line and stream in line
            for line in b.log.read_text().splitlines()
        ):
            assert time.monotonic() < deadline, "B did not expire the stream"
            time.sleep(0.1)
        put(stack, client, f"{coll}/d4", 44)
        listener, _ = resume_reset(stack, client, coll, a, last, "retention_passed")
        listener.close()
        assert listener.stream_id != stream


def hold_back(stack, side: Sidecar):
    """Stop `side`'s change stream where it is (its walsender stopped with SIGSTOP) while
    every other process goes on; returns what lets it go on again (SIGCONT)."""
    deadline = time.monotonic() + 30
    while True:
        rows = stack.sql(
            "select active_pid from pg_replication_slots where slot_name = %s and active",
            side.slot,
        )
        if rows:
            break
        assert time.monotonic() < deadline, "the slot is not streaming"
        time.sleep(0.1)
    [(walsender,)] = rows
    os.kill(walsender, signal.SIGSTOP)
    return lambda: os.kill(walsender, signal.SIGCONT)


def test_an_adoption_that_waits_too_long_resets_and_snapshots(stack, nats, client):
    """B's change stream is held back while the stream runs on A, so the position P the
    client saw on A is ahead of everything B applied: the adoption on B waits for B to
    reach P. That wait is bounded (ADOPT_WAIT, docs/listen.md): past it the client gets
    `reset {restart}` (without the bound: nothing at all while B is held back), and once B
    catches up a snapshot of the current results, never a gap."""
    coll = "c" + uuid.uuid4().hex[:10]
    with sidecars(stack, nats, 2) as (a, b):
        release = hold_back(stack, b)
        try:
            seeded(stack, client, coll)
            _, _, last = open_and_follow(stack, client, coll, a)
            listener, snapshot = resume_reset(
                stack, client, coll, b, last, "restart", meanwhile=release
            )
        finally:
            release()
        try:
            assert listener.stream_id == last.rpartition(".")[0]
            assert position(snapshot["id"]) > position(last)
            view = View()
            view.apply(snapshot)
            put(stack, client, f"{coll}/d2", 999)
            until_current(stack, client, coll, listener, view)
        finally:
            listener.close()


def test_a_stream_whose_end_its_client_read_is_not_adopted_elsewhere(stack, nats, client):
    # A reaches NATS through a proxy the test holds while A closes a slow client's stream
    # (`reset {lagged}`). A must forget the stream in the registry before the client can
    # read that reset: while A cannot reach NATS, the reset waits (without the order, the
    # client read it at once and a resume on B found the entry and adopted the ended stream,
    # sending a `change` where one process answers a reset).
    coll = "c" + uuid.uuid4().hex[:10]
    proxy = HeldProxy(nats)
    sql = f"select * from /{coll}"
    try:
        with sidecars(stack, nats, 2, urls=[proxy.url, nats], queues=[4, None]) as (a, b):
            put(stack, client, f"{coll}/a", 0)
            # A slow client: a small receive buffer, and nothing read until `go`.
            transport = httpx.HTTPTransport(
                socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)]
            )
            slow = httpx.Client(base_url=a.url, transport=transport, timeout=httpx.Timeout(60))
            events: list[dict] = []
            go = threading.Event()
            opened = threading.Event()
            stream: list[str] = []

            def read() -> None:
                with contextlib.suppress(httpx.HTTPError):
                    with slow.stream("GET", LISTEN, params={"sql": sql}, headers=stack.admin) as r:
                        stream.append(r.headers.get("x-docstore-stream", ""))
                        opened.set()
                        go.wait()
                        for ev in sse_events(r.iter_lines()):
                            events.append(ev)
                opened.set()

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            assert opened.wait(60) and stream and stream[0], "the stream did not open"
            # The stream is registered (before its id reached the client); now A's requests to
            # NATS are held, and the client reads nothing while its target changes a lot.
            proxy.hold()
            lagged = metric(a, "docstore_session_resets_total", 'reason="lagged"')
            big = "x" * 4000
            with psycopg.connect(stack.cluster.url(), autocommit=True) as conn:
                conn.execute("select set_config('docstore.database', %s, false)", (DB,))
                for i in range(20000):
                    conn.execute(
                        "select docstore.set(%s, jsonb_build_object('n', %s::int, 'pad', %s::text))",
                        (f"{coll}/a", i, big),
                    )
                    if i % 50 == 49 and (
                        metric(a, "docstore_session_resets_total", 'reason="lagged"') > lagged
                    ):
                        break
            assert metric(a, "docstore_session_resets_total", 'reason="lagged"') > lagged
            go.set()
            # A's first attempt to forget the stream failed (its request to NATS timed out):
            # the client has read what was queued before the end, but not the end.
            deadline = time.monotonic() + 120
            while not any(
                "registry entry stays" in line and stream[0] in line
                for line in a.log.read_text().splitlines()
            ):
                assert time.monotonic() < deadline, "A never tried to forget the stream"
                time.sleep(0.1)
            assert not any(ev["event"] == "reset" for ev in events), (
                "the client read the end of its stream while the registry still had it"
            )
            proxy.release()
            reader.join(60)
            assert events and events[-1]["event"] == "reset", events[-3:]
            assert events[-1]["data"]["reason"] == "lagged", events[-1]
            last = events[-1]["id"]
            # Resumed on B at once: the stream ended, as on one process, and B answers the
            # reset it ended with, which A left in the registry's ended bucket (B answered
            # `restart`, a stream it never heard of, before the end was kept).
            hdrs = {**stack.admin, "Last-Event-ID": last}
            listener = Listener(at(stack, b), params=[("sql", sql)], path=LISTEN, headers=hdrs)
            try:
                assert listener.status == 200, listener.error_body
                first = listener.next()
                assert first["event"] == "reset", first
                assert first["data"]["reason"] == "lagged", first
                assert listener.stream_id != stream[0]
                ev = listener.next()
                assert ev["event"] == "snapshot", ev
                r = client.post(RUN, headers=stack.admin, json={"sql": sql})
                assert r.status_code == 200, r.text
                docs = ev["data"]["targets"][0]["documents"]
                assert [d["data"]["n"] for d in docs] == [row["data"]["n"] for row in r.json()]
            finally:
                listener.close()
            slow.close()
    finally:
        proxy.close()


def reset_in_place(stack, client, coll, side: Sidecar) -> tuple[View, dict]:
    """A stream on `side`, followed until current; then `side`'s slot is dropped under it,
    and the client reads the `reset {slot_lost}` that discards its state in place and
    disconnects before the snapshot that follows. The client's view (empty) and the reset."""
    listener = Listener(at(stack, side), params=params(coll), path=LISTEN)
    try:
        assert listener.status == 200, listener.error_body
        view = View()
        until_current(stack, client, coll, listener, view)
        drop_slot_under(stack, side.slot)
        while (ev := listener.next())["event"] != "reset":
            view.apply(ev)
        assert ev["data"]["reason"] == "slot_lost", ev
        view.apply(ev)
        return view, ev
    finally:
        listener.close()


def test_a_stream_reset_in_place_is_resumed_elsewhere_with_a_snapshot(stack, nats, client):
    # A's slot is dropped under it: its stream resets in place (`reset {slot_lost}`, a
    # snapshot follows on the same stream). A client that read the reset holds nothing; it
    # resumes on B with the reset's token. B must send every target whole: without A
    # recording the reset in the registry (its targets not held until the next snapshot),
    # the entry said the client held every target at that position and B sent one `change`
    # from there, which the client cannot apply to the nothing it holds.
    coll = "c" + uuid.uuid4().hex[:10]
    with sidecars(stack, nats, 2) as (a, b):
        seeded(stack, client, coll)
        view, reset = reset_in_place(stack, client, coll, a)
        last = reset["id"]
        move_everything(stack, client, coll)
        hdrs = {**stack.admin, "Last-Event-ID": last}
        listener = Listener(at(stack, b), params=params(coll), path=LISTEN, headers=hdrs)
        try:
            assert listener.status == 200, listener.error_body
            assert listener.stream_id == last.rpartition(".")[0]
            first = listener.next()
            assert first["event"] == "snapshot", first
            assert {t["target"] for t in first["data"]["targets"]} == {"0", "1", "2"}, first
            view.apply(first)
            assert folded(view) == fresh(stack, client, coll)
            put(stack, client, f"{coll}/d2", 999)
            until_current(stack, client, coll, listener, view)
            assert all(ev["event"] != "reset" for ev in listener.received)
        finally:
            listener.close()


def test_a_reset_in_place_waits_for_the_registry(stack, nats, client):
    # A reaches NATS through a proxy the test holds while A's slot is dropped under it: the
    # registry must say the stream's targets are not held before the client can read the
    # reset, so while A cannot reach NATS the reset waits (without the order, the client
    # read it at once, and a resume on B before the registry write would still be sent a
    # `change` of results the client discarded). Once NATS answers, the reset and the
    # snapshot come, and a resume on B with the reset's token gets every target whole.
    coll = "c" + uuid.uuid4().hex[:10]
    proxy = HeldProxy(nats)
    try:
        with sidecars(stack, nats, 2, urls=[proxy.url, nats]) as (a, b):
            seeded(stack, client, coll)
            listener = Listener(at(stack, a), params=params(coll), path=LISTEN)
            try:
                assert listener.status == 200, listener.error_body
                view = View()
                until_current(stack, client, coll, listener, view)
                stream = listener.stream_id
                proxy.hold()
                drop_slot_under(stack, a.slot)
                # A records the resets of its streams in order (another stream of A, within
                # its grace, may come first): any of them failing means every one waits.
                deadline = time.monotonic() + 120
                while "reset in place is not in the registry" not in a.log.read_text():
                    assert time.monotonic() < deadline, "A never tried to record a reset"
                    time.sleep(0.1)
                failed = metric(a, "docstore_registry_write_errors_total", 'op="reset"')
                assert failed > 0
                while not listener.events.empty():
                    ev = listener.next()
                    assert ev["event"] == "heartbeat", (
                        "the client read the reset while the registry said it held results"
                    )
                proxy.release()
                reset = listener.until(lambda ev: ev["event"] != "heartbeat")
                assert reset["event"] == "reset", reset
                assert reset["data"]["reason"] == "slot_lost", reset
                snapshot = listener.next()
                assert snapshot["event"] == "snapshot", snapshot
            finally:
                listener.close()
            view = View()
            view.apply(reset)
            move_everything(stack, client, coll)
            hdrs = {**stack.admin, "Last-Event-ID": reset["id"]}
            on_b = Listener(at(stack, b), params=params(coll), path=LISTEN, headers=hdrs)
            try:
                assert on_b.status == 200, on_b.error_body
                assert on_b.stream_id == stream
                first = on_b.next()
                assert first["event"] == "snapshot", first
                view.apply(first)
                assert folded(view) == fresh(stack, client, coll)
            finally:
                on_b.close()
    finally:
        proxy.close()


def test_a_reset_of_an_adoption_before_its_claim_is_in_the_registry(stack, nats, client):
    # B reaches NATS through a proxy that keeps back B's claim of the adopted stream, so its
    # targets could come live before the claim is written. The stream has an aggregation
    # target, so its adoption cannot be exact: B resets it in place. That reset's "not held"
    # write must apply to B's entry: without waiting for the claim, it found A's entry and
    # was skipped, the claim then kept the old "held" marks, and a client that read only
    # the reset and resumed on A was sent a reset again (or, for a target A can rewind, a
    # `change` it cannot apply) rather than a snapshot of every target.
    coll = "c" + uuid.uuid4().hex[:10]
    targets = [("document", f"{coll}/d0"), ("sql", f"select count(*), sum(n) from /{coll}")]
    proxy = ClaimProxy(nats)
    try:
        with sidecars(stack, nats, 2, urls=[nats, proxy.url]) as (a, b):
            seeded(stack, client, coll)
            listener = Listener(at(stack, a), params=targets, path=LISTEN)
            try:
                assert listener.status == 200, listener.error_body
                first = listener.next()
                assert first["event"] == "snapshot", first
                put(stack, client, f"{coll}/d0", 1)
                ev = listener.until(lambda ev: ev["event"] == "change")
            finally:
                listener.close()
            last = ev["id"]
            put(stack, client, f"{coll}/d1", 11)
            proxy.arm()
            hdrs = {**stack.admin, "Last-Event-ID": last}
            opened: list[Listener] = []
            opener = threading.Thread(
                target=lambda: opened.append(
                    Listener(at(stack, b), params=targets, path=LISTEN, headers=hdrs)
                ),
                daemon=True,
            )
            opener.start()
            assert proxy.kept.wait(120), "B never claimed the stream"
            # B's change stream goes past the read of the targets (a write after it).
            put(stack, client, f"{coll}/d2", 22)
            deadline = time.monotonic() + 120
            while True:
                log = b.log.read_text()
                if "wait for its claim in the registry" in log:
                    break
                if "cannot be brought from its client's position exactly" in log and proxy.after:
                    break
                assert time.monotonic() < deadline, "B's adopted stream neither waited nor reset"
                time.sleep(0.1)
            proxy.release()
            opener.join(120)
            [on_b] = opened
            try:
                assert on_b.status == 200, on_b.error_body
                reset = on_b.until(lambda ev: ev["event"] != "heartbeat")
                assert reset["event"] == "reset", reset
            finally:
                on_b.close()
            hdrs = {**stack.admin, "Last-Event-ID": reset["id"]}
            on_a = Listener(at(stack, a), params=targets, path=LISTEN, headers=hdrs)
            try:
                assert on_a.status == 200, on_a.error_body
                first = on_a.until(lambda ev: ev["event"] != "heartbeat")
                assert first["event"] == "snapshot", first
                assert {t["target"] for t in first["data"]["targets"]} == {"0", "1"}, first
            finally:
                on_a.close()
    finally:
        proxy.close()


def test_a_resume_at_position_0_waits_for_its_snapshot_without_a_reset(stack, nats, client):
    """A token at position 0 holds nothing. B's change stream is held back past ADOPT_WAIT
    (30 s, docs/listen.md) while the client resumes there at 0: the bound on waiting is for
    a client that holds results, so there is no `reset {restart}` (there was before: the
    late sweep reset every adopted stream); once B catches up the first event is the
    snapshot of every target."""
    coll = "c" + uuid.uuid4().hex[:10]
    with sidecars(stack, nats, 2) as (a, b):
        seeded(stack, client, coll)
        listener = Listener(at(stack, a), params=params(coll), path=LISTEN)
        try:
            assert listener.status == 200, listener.error_body
            stream = listener.stream_id
        finally:
            listener.close()
        release = hold_back(stack, b)
        try:
            hdrs = {**stack.admin, "Last-Event-ID": f"{stream}.0000000000000000"}
            on_b = Listener(at(stack, b), params=params(coll), path=LISTEN, headers=hdrs)
            try:
                assert on_b.status == 200, on_b.error_body
                assert on_b.stream_id == stream
                # Past ADOPT_WAIT (the late sweep runs on the hub's tick).
                time.sleep(35)
                release()
                first = on_b.until(lambda ev: ev["event"] != "heartbeat")
                assert first["event"] == "snapshot", first
                view = View()
                view.apply(first)
                assert folded(view) == fresh(stack, client, coll)
            finally:
                on_b.close()
        finally:
            release()


def test_a_stream_reset_in_place_is_resumed_on_its_process_with_a_snapshot(stack, nats, client):
    # The same client resumes on A itself: the reset's token is no longer held there (a
    # reset in place drops the older tokens), so the stream resets again and snapshots.
    coll = "c" + uuid.uuid4().hex[:10]
    with sidecars(stack, nats, 1) as (a,):
        seeded(stack, client, coll)
        _, reset = reset_in_place(stack, client, coll, a)
        move_everything(stack, client, coll)
        listener, _ = resume_reset(stack, client, coll, a, reset["id"], "retention_passed")
        try:
            assert listener.stream_id == reset["id"].rpartition(".")[0]
        finally:
            listener.close()


def test_a_reset_of_a_resume_on_its_process_is_in_the_registry_first(stack, nats, client):
    # A keeps one event per stream (`--listen-replay 1`): the admin's stream on A, resumed
    # there with the token of its first snapshot, is past that token and resets
    # (`reset {retention_passed}`, then a snapshot). A client that read only the reset holds
    # nothing; it resumes on B at once with the reset's token. B must send every target
    # whole: without A writing to the registry that the targets are not held before the
    # reset went out (the admin's reset and snapshot went back to back, with no registry
    # write), B found them held at the reset's position and sent one `change`, which the
    # client cannot apply to the nothing it holds.
    coll = "c" + uuid.uuid4().hex[:10]
    with sidecars(stack, nats, 2, replays=[1, None]) as (a, b):
        seeded(stack, client, coll)
        _, on_a, _ = open_and_follow(stack, client, coll, a)
        oldest = on_a.received[0]
        assert oldest["event"] == "snapshot", oldest
        hdrs = {**stack.admin, "Last-Event-ID": oldest["id"]}
        again = Listener(at(stack, a), params=params(coll), path=LISTEN, headers=hdrs)
        try:
            assert again.status == 200, again.error_body
            reset = again.next()
        finally:
            again.close()
        assert reset["event"] == "reset", reset
        assert reset["data"]["reason"] == "retention_passed", reset
        stream = reset["id"].rpartition(".")[0]
        assert stream == oldest["id"].rpartition(".")[0]
        move_everything(stack, client, coll)
        hdrs = {**stack.admin, "Last-Event-ID": reset["id"]}
        on_b = Listener(at(stack, b), params=params(coll), path=LISTEN, headers=hdrs)
        try:
            assert on_b.status == 200, on_b.error_body
            assert on_b.stream_id == stream
            first = on_b.next()
            assert first["event"] == "snapshot", first
            assert {t["target"] for t in first["data"]["targets"]} == {"0", "1", "2"}, first
            view = View()
            view.apply(first)
            assert folded(view) == fresh(stack, client, coll)
        finally:
            on_b.close()


def test_another_callers_token_is_unknown_on_the_other_process(stack, nats, client):
    coll = "c" + uuid.uuid4().hex[:10]
    alice = stack.bearer(stack.token({"sub": "alice"}))
    bob = stack.bearer(stack.token({"sub": "bob"}))
    with sidecars(stack, nats, 2) as (a, b):
        seeded(stack, client, coll)
        _, _, last = open_and_follow(stack, client, coll, a, headers=alice)
        listener, _ = resume_reset(stack, client, coll, b, last, "permission", headers=bob)
        listener.close()
        assert listener.stream_id != last.rpartition(".")[0]


def test_a_position_older_than_the_other_process_resets(stack, nats, client):
    coll = "c" + uuid.uuid4().hex[:10]
    with sidecars(stack, nats, 1) as (a,):
        seeded(stack, client, coll)
        _, _, last = open_and_follow(stack, client, coll, a)
        put(stack, client, f"{coll}/d1", 100)
        # C starts after P: its changelog cannot tell what happened between P and its start.
        with sidecars(stack, nats, 1) as (c,):
            listener, _ = resume_reset(stack, client, coll, c, last, "retention_passed")
            listener.close()


def test_a_bad_nats_url_ends_start_up_with_a_clear_message(stack):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSTORE_")}
    env.update(
        {
            "DOCSTORE_DATABASE_URL": stack.cluster.url(),
            "DOCSTORE_LISTEN": f"127.0.0.1:{port}",
            "DOCSTORE_ADMIN_KEY": stack.admin_key,
            "DOCSTORE_NATS_URL": f"nats://127.0.0.1:{free_port()}",
        }
    )
    binary = str(sidecar_binary())
    done = subprocess.run(
        [binary, "--slot", "elsewhere_never"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "--nats-url" in done.stdout + done.stderr
    with contextlib.suppress(httpx.HTTPError):
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code != 200
