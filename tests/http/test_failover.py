"""Failover (docs/listen.md, "Failover"): Postgres 15 logical slots do not survive a promotion,
so the promoted server has no slot. Simulated by dropping the slot under a running sidecar
(after terminating its walsender) while a stream is open and writes go on: the stream gets
`reset {slot_lost}` and then a snapshot, and after quiescence it equals a fresh query: no
write is silently missing."""

from __future__ import annotations

import queue
import threading
import uuid

import psycopg
from conftest import free_port, own_sidecar
from test_listen import Listener, View, fresh, has_doc


def drop_slot_under(stack, slot: str) -> None:
    """Terminate the slot's walsender and drop the slot, until the drop wins the race with
    the sidecar's reconnection."""
    for _ in range(200):
        stack.sql(
            "select pg_terminate_backend(active_pid) from pg_replication_slots "
            "where slot_name = %s and active_pid is not null",
            slot,
        )
        try:
            stack.sql("select pg_drop_replication_slot(%s)", slot)
            return
        except psycopg.errors.ObjectInUse:
            continue
    raise AssertionError("the slot stays in use")


def test_a_dropped_slot_resets_streams_with_a_fresh_snapshot(stack, coll):
    slot = "failover_" + uuid.uuid4().hex[:8]
    sql = f"select * from /{coll} order by n"
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:
        with psycopg.connect(stack.cluster.url(), autocommit=True) as conn:
            n = 0
            while not stop.is_set():
                n += 1
                conn.execute(
                    "select docstore.set(%s, jsonb_build_object('n', %s::int))",
                    (f"{coll}/d{n % 20}", n),
                )
                written.append(n)

    with own_sidecar(stack, slot=slot) as base:
        lp = type("Sidecar", (), {"url": base, "admin": stack.admin})
        listener = Listener(lp, params=[("sql", sql)])
        thread = threading.Thread(target=writer, daemon=True)
        try:
            view = View()
            first = listener.next()
            assert first["event"] == "snapshot", first
            view.apply(first)
            thread.start()
            # Writes are flowing on the stream before the slot goes.
            while not any(ev["event"] == "change" for ev in listener.received):
                view.apply(listener.next())
            drop_slot_under(stack, slot)
            # Events keep coming while writes go on: bounded by Listener.until's deadline.
            ev = listener.until(lambda ev: ev["event"] == "reset")
            view.apply(ev)
            assert ev["data"]["reason"] == "slot_lost", ev
            after = listener.next()
            assert after["event"] == "snapshot", after
            view.apply(after)
            # Writes go on across the new slot; then quiescence and one last write.
            seen = len(written)
            while len(written) < seen + 20:
                view.apply(listener.next())
            stop.set()
            thread.join(60)
            stack.sql("select docstore.set(%s, '{\"n\": -1}')", f"{coll}/last")
            while not has_doc("0", f"{coll}/last")(None, view):
                ev = listener.next()
                assert ev["event"] != "reset", ev
                view.apply(ev)
            with stack.client() as client:
                assert view.docs("0") == fresh(stack, client, sql)
            # The slot exists again, created by the sidecar.
            assert stack.sql(
                "select plugin from pg_replication_slots where slot_name = %s", slot
            ) == [("pgoutput",)]
        finally:
            stop.set()
            listener.close()


def test_a_dropped_slot_under_grpc_listen_ends_equal_to_the_database(stack, coll, monkeypatch):
    """The same over gRPC Listen with Google's SDK (docs/grpc.md, "Listen": RESET, then the
    full result): the SDK's last snapshot after quiescence is the collection as it is."""
    from google.cloud import firestore

    slot = "failover_grpc_" + uuid.uuid4().hex[:8]
    address = f"127.0.0.1:{free_port()}"
    with own_sidecar(stack, "--grpc-listen", address, "--dev-mode", slot=slot):
        monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", address)
        db = firestore.Client(project="demo")
        seen: queue.Queue = queue.Queue()
        watch = (
            db.collection(coll)
            .order_by("n")
            .on_snapshot(lambda docs, changes, read_time: seen.put([d.id for d in docs]))
        )
        try:
            assert seen.get(timeout=60) == []
            for n in range(5):
                stack.sql(
                    "select docstore.set(%s, jsonb_build_object('n', %s::int))", f"{coll}/a{n}", n
                )
            drop_slot_under(stack, slot)
            for n in range(5, 10):
                stack.sql(
                    "select docstore.set(%s, jsonb_build_object('n', %s::int))", f"{coll}/a{n}", n
                )
            stack.sql("select docstore.delete(%s)", f"{coll}/a0")
            want = [f"a{n}" for n in range(1, 10)]
            for _ in range(100):
                if seen.get(timeout=60) == want:
                    break
            else:
                raise AssertionError("the listener never showed the collection as it is")
        finally:
            watch.unsubscribe()
