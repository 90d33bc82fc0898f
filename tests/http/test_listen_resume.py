"""Resuming a stream from a position it no longer holds (docs/listen.md, "Positions, ids and
resuming"): `reset {retention_passed}`, then one `snapshot` of every target, on the same
stream, with every guarantee of a fresh subscribe: the security rules decide it before it is
sent, a target still being read is in it, and no change reaches the client twice.

A sidecar of the module's own keeps one event per stream (`--listen-replay 1`), so that a
stream's first token falls out of retention after two more events. The moments that matter
are held still without timing: `docstore.entities` locked (ACCESS EXCLUSIVE) from a write's
commit on keeps every read of documents waiting (the rules' lookups and the re-read of the
targets included) while the change stream goes on; a stopped walsender keeps a new target
waiting for its first position.

Without the fix (the resume built its snapshot straight from the matcher's results) the first
test sees the denied document in the snapshot, the second a snapshot without the new target,
the third a document added twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import threading
import time
import uuid

import psycopg
import pytest
from conftest import own_sidecar
from test_listen import WAIT, Listener, View, follow
from test_listen_rules import ended_by_permission

DB = "listenresume"
LISTEN = f"/v1/databases/{DB}:listen"
SLOT = "docstore_resume"

RULES = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /notes/{note} {
      allow get: if exists(/databases/$(database)/documents/keys/$(resource.data.key));
    }
    match /boards/{board}/posts/{post} {
      allow list: if exists(/databases/$(database)/documents/authors/$(resource.data.author))
        || request.auth.uid == 'alice';
    }
  }
}"""


@pytest.fixture(scope="module")
def sidecar(stack):
    """A stack whose URL is a sidecar keeping one event per stream for resumes."""
    stack.sql("insert into docstore.databases (id) values (%s) on conflict do nothing", DB)
    stack.sql("select docstore.set_rules(%s, %s)", RULES, DB)
    try:
        with own_sidecar(stack, "--listen-replay", "1", slot=SLOT) as url:
            yield dataclasses.replace(stack, url=url)
    finally:
        stack.sql("select docstore.drop_rules(%s)", DB)


def commit(stack, client, writes):
    r = client.post(f"/v1/databases/{DB}:commit", headers=stack.admin, json={"writes": writes})
    assert r.status_code == 200, r.text


def alice(stack) -> dict:
    return stack.bearer(stack.token({"sub": "alice"}))


def listen(sidecar, params, headers) -> Listener:
    listener = Listener(sidecar, params=params, headers=headers, path=LISTEN)
    assert listener.status == 200, listener.error_body
    return listener


def carries(text: str):
    return lambda ev: text in json.dumps(ev)


def out_of_retention(listener: Listener, write) -> str:
    """The token of the stream's first event, once two later events pushed it out of the
    one event the sidecar keeps; the listener is closed (the client went away)."""
    try:
        first = listener.next()
        assert first["event"] == "snapshot", first
        for i in (1, 2):
            write(i)
            listener.until(carries(f"v{i}"))
    finally:
        listener.close()
    return first["id"]


def resume(sidecar, params, headers, token: str) -> Listener:
    """Resume `token`'s stream: it is still known, so its first event is the reset of a
    position no longer held."""
    resumed = listen(sidecar, params, {**headers, "Last-Event-ID": token})
    assert resumed.stream_id == token.rsplit(".", 1)[0]
    first = resumed.next()
    assert first["event"] == "reset", first
    assert first["data"]["reason"] == "retention_passed", first
    return resumed


@contextlib.contextmanager
def documents_locked_after(stack, path: str, data: dict):
    """Write `path` and, from that commit on until the block ends, keep docstore.entities
    locked: every read of documents waits (the sidecar's too); the change stream does not."""
    writer = psycopg.connect(stack.cluster.url())
    locker = psycopg.connect(stack.cluster.url())
    try:
        writer.execute("select set_config('docstore.database', %s, true)", (DB,))
        writer.execute("select docstore.set(%s, %s::jsonb)", (path, json.dumps(data)))
        lock = threading.Thread(
            target=locker.execute,
            args=("lock table docstore.entities in access exclusive mode",),
            daemon=True,
        )
        lock.start()
        # The lock waits for the writer's transaction: it is granted at its commit.
        queued = False
        deadline = time.monotonic() + WAIT
        while not queued and time.monotonic() < deadline:
            queued = bool(
                stack.sql(
                    "select 1 from pg_locks where pid = %s and not granted",
                    locker.info.backend_pid,
                )
            )
            time.sleep(0.01)
        assert queued, "the lock never queued behind the write"
        writer.commit()
        lock.join(WAIT)
        assert not lock.is_alive(), "the lock was not granted"
        yield
    finally:
        locker.rollback()
        locker.close()
        writer.close()


@contextlib.contextmanager
def replication_stopped(stack):
    """Stop the walsender of the module's sidecar: no transaction reaches it until the block
    ends."""
    (pid,) = stack.sql("select active_pid from pg_replication_slots where slot_name = %s", SLOT)[0]
    assert pid, "the sidecar's slot is not streaming"
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_resume_sends_nothing_the_rules_have_not_decided(stack, client, sidecar):
    note = f"notes/n{uuid.uuid4().hex[:10]}"
    key = f"k{uuid.uuid4().hex[:10]}"
    commit(
        stack,
        client,
        [{"set": f"keys/{key}", "data": {}}, {"set": note, "data": {"key": key, "body": "v0"}}],
    )
    target = [("document", note)]
    admin = listen(sidecar, target, stack.admin)
    try:
        token = out_of_retention(
            listen(sidecar, target, alice(stack)),
            lambda i: commit(stack, client, [{"set": note, "data": {"key": key, "body": f"v{i}"}}]),
        )
        # The note's new version names a key that does not exist: the get rule denies it.
        # Its decision looks the key up, and the lookup waits for the lock.
        with documents_locked_after(stack, note, {"key": "nokey", "body": "secret"}):
            # The admin stream has the transaction: so has alice's, waiting for its decision.
            admin.until(carries("secret"))
            resumed = resume(sidecar, target, alice(stack), token)
        try:
            events = ended_by_permission(resumed)
        finally:
            resumed.close()
    finally:
        admin.close()
    # The re-read is refused as a subscribe would be: the stream ends as a denied event ends
    # it, nothing of the denied version sent (heartbeats carry no document).
    assert "secret" not in json.dumps(events), events
    assert all(ev["event"] in ("reset", "heartbeat") for ev in events), events


@pytest.mark.parametrize("caller", ["admin", "alice"])
def test_a_target_still_being_read_is_in_the_resumed_snapshot(stack, client, sidecar, caller):
    headers = stack.admin if caller == "admin" else alice(stack)
    board = f"boards/b{uuid.uuid4().hex[:10]}/posts"
    note = f"notes/n{uuid.uuid4().hex[:10]}"
    key = f"k{uuid.uuid4().hex[:10]}"
    commit(
        stack,
        client,
        [{"set": f"keys/{key}", "data": {}}, {"set": note, "data": {"key": key, "body": "n0"}}],
    )
    target = [("sql", f"select * from /{board}")]
    listener = listen(sidecar, target, headers)
    stream = listener.stream_id
    token = out_of_retention(
        listener,
        lambda i: commit(
            stack, client, [{"set": f"{board}/p{i}", "data": {"author": "x", "text": f"v{i}"}}]
        ),
    )
    with replication_stopped(stack):
        # Added and read: the new target waits for a position past its read, which the
        # stopped change stream does not bring.
        with sidecar.client() as own:
            r = own.post(
                f"{LISTEN}/{stream}/targets",
                headers=headers,
                json={"targets": [{"id": "note", "document": note}]},
            )
        assert r.status_code == 200, r.text
        resumed = resume(sidecar, target, headers, token)
    try:
        snap = resumed.until(lambda ev: ev["event"] != "heartbeat")
        assert snap["event"] == "snapshot", snap
        view = View()
        view.apply(snap)
        assert sorted(view.targets) == ["0", "note"], snap
        assert [p for p, _ in view.docs("0")] == [f"{board}/p1", f"{board}/p2"]
        assert view.docs("note") == [(note, {"key": key, "body": "n0"})]
    finally:
        resumed.close()


def test_a_resume_delivers_no_change_twice(stack, client, sidecar):
    board = f"boards/b{uuid.uuid4().hex[:10]}/posts"
    sql = f"select * from /{board}"
    target = [("sql", sql)]
    admin = listen(sidecar, target, stack.admin)
    try:
        token = out_of_retention(
            listen(sidecar, target, alice(stack)),
            lambda i: commit(
                stack, client, [{"set": f"{board}/p{i}", "data": {"author": "x", "text": f"v{i}"}}]
            ),
        )
        # p3's list decision looks up an author not read yet: it waits for the lock.
        with documents_locked_after(stack, f"{board}/p3", {"author": "y", "text": "v3"}):
            admin.until(carries("v3"))
            resumed = resume(sidecar, target, alice(stack), token)
        try:
            # View.apply fails on a document added twice.
            view = View()
            follow(resumed, view, lambda ev, v: ev["event"] == "snapshot")
            commit(stack, client, [{"set": f"{board}/p4", "data": {"author": "x", "text": "v4"}}])
            follow(resumed, view, lambda ev, v: carries("v4")(ev))
        finally:
            resumed.close()
    finally:
        admin.close()
    r = client.post(f"/v1/databases/{DB}:runQuery", headers=stack.admin, json={"sql": sql})
    assert r.status_code == 200, r.text
    assert view.docs("0") == [(row["path"], row["data"]) for row in r.json()]
    assert [p for p, _ in view.docs("0")] == [f"{board}/p{i}" for i in (1, 2, 3, 4)]


def test_a_resume_at_the_reset_of_a_resume_is_sent_the_snapshot_again(stack, client, sidecar):
    """An admin stream whose targets are live answers a resume from a position it no longer
    holds with a reset and a snapshot from the results it holds, both at the stream's
    position. A client that read only the reset and resumes with its token must be sent the
    snapshot again: it has thrown its results away. Before the fix that position was still
    held, and the resume was sent nothing (the client kept an empty view)."""
    coll = f"rr{uuid.uuid4().hex[:10]}"
    commit(stack, client, [{"set": f"{coll}/a", "data": {"v": "v0"}}])
    target = [("sql", f"select * from /{coll}")]
    token = out_of_retention(
        listen(sidecar, target, stack.admin),
        lambda i: commit(stack, client, [{"set": f"{coll}/a", "data": {"v": f"v{i}"}}]),
    )
    resumed = resume(sidecar, target, stack.admin, token)
    try:
        reset_token = resumed.received[-1]["id"]
    finally:
        # The client goes away having read the reset only.
        resumed.close()
    again = listen(sidecar, target, {**stack.admin, "Last-Event-ID": reset_token})
    try:
        first = again.next()
        assert first["event"] == "reset", first
        assert first["data"]["reason"] == "retention_passed", first
        snapshot = again.next()
        assert snapshot["event"] == "snapshot", snapshot
        assert "v2" in json.dumps(snapshot["data"]), snapshot
    finally:
        again.close()
