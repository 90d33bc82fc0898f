"""Security rules on live queries (docs/listen.md "Security rules", docs/rules.md): a chat
ruleset (rooms with members; a room's messages listable by its members through one get() of
the room) set with docstore.set_rules decides every event of a non-admin stream before it is
sent. A stream the rules no longer allow ends with `reset {reason: permission}`, and nothing
of the denied transaction, nor of any later one, reaches it. The admin key is unaffected.

Each test fails without the sidecar's rules stage: the removed member, the changed ruleset and
the denied document would otherwise keep flowing to the stream (no reset, later events sent).
"""

from __future__ import annotations

import json
import queue
import time
import uuid

import pytest
from test_listen import WAIT, Listener

DB = "listenrules"
LISTEN = f"/v1/databases/{DB}:listen"

CHAT = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /rooms/{room} {
      allow get: if request.auth != null && request.auth.uid in resource.data.members;
      match /messages/{message} {
        allow list: if request.auth != null
          && request.auth.uid in get(/databases/$(database)/documents/rooms/$(room)).data.members;
      }
    }
    match /notices/{notice} {
      allow get: if resource.data.visible == true;
    }
  }
}"""

# The same, but messages are no longer listable by anyone.
LOCKED = CHAT.replace(
    "allow list: if request.auth != null", "allow list: if false && request.auth != null"
)


@pytest.fixture
def chat(stack):
    stack.sql("insert into docstore.databases (id) values (%s) on conflict do nothing", DB)
    stack.sql("select docstore.set_rules(%s, %s)", CHAT, DB)
    yield
    stack.sql("select docstore.drop_rules(%s)", DB)


@pytest.fixture
def room(stack, client, chat) -> str:
    """A room whose members are alice and bob, with one message."""
    rid = "r" + uuid.uuid4().hex[:10]
    commit(
        stack,
        client,
        [
            {"set": f"rooms/{rid}", "data": {"members": ["alice", "bob"]}},
            {"set": f"rooms/{rid}/messages/m1", "data": {"text": "hello"}},
        ],
    )
    return rid


def commit(stack, client, writes):
    r = client.post(f"/v1/databases/{DB}:commit", headers=stack.admin, json={"writes": writes})
    assert r.status_code == 200, r.text


def user(stack, sub: str) -> dict:
    return stack.bearer(stack.token({"sub": sub}))


def messages(rid: str) -> list:
    return [("sql", f"select * from /rooms/{rid}/messages")]


def listen(stack, params, headers) -> Listener:
    listener = Listener(stack, params=params, headers=headers, path=LISTEN)
    assert listener.status == 200, listener.error_body
    return listener


def texts(ev: dict) -> set[str]:
    """Every message text an event carries."""
    found = set()

    def walk(v):
        if isinstance(v, dict):
            if isinstance(v.get("text"), str):
                found.add(v["text"])
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(ev.get("data"))
    return found


def until_text(listener: Listener, text: str) -> dict:
    return listener.until(lambda ev: text in texts(ev))


def rest(listener: Listener) -> list[dict]:
    """Every event up to the end of the stream (it must end)."""
    out = []
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            ev = listener.events.get(timeout=WAIT)
        except queue.Empty:
            break
        if ev is None:
            return out
        out.append(ev)
    raise AssertionError(f"the stream did not end; received {[e['event'] for e in out]}: {out[:3]}")


def ended_by_permission(listener: Listener) -> list[dict]:
    """The events after the last one read: they end with `reset {permission}` and the
    stream closes. Returns them."""
    events = rest(listener)
    assert events, "no reset before the stream ended"
    last = events[-1]
    assert last["event"] == "reset", events
    assert last["data"]["reason"] == "permission", last
    # the same text whatever the rules read (docs/rules.md, "What a denial tells")
    assert last["data"]["message"] == "the security rules no longer allow this stream", last
    return events


def test_a_member_follows_a_room_until_removed(stack, client, room):
    alice = listen(stack, messages(room), user(stack, "alice"))
    bob = listen(stack, messages(room), user(stack, "bob"))
    admin = listen(stack, messages(room), stack.admin)
    try:
        for listener in (alice, bob, admin):
            ev = listener.next()
            assert ev["event"] == "snapshot", ev
            assert texts(ev) == {"hello"}
        commit(stack, client, [{"set": f"rooms/{room}/messages/m2", "data": {"text": "second"}}])
        for listener in (alice, bob, admin):
            assert until_text(listener, "second")["event"] == "change"
        # alice leaves the room: her stream ends; no later message reaches her.
        commit(stack, client, [{"set": f"rooms/{room}", "data": {"members": ["bob"]}}])
        commit(stack, client, [{"set": f"rooms/{room}/messages/m3", "data": {"text": "after"}}])
        after_removal = ended_by_permission(alice)
        assert not any("after" in texts(ev) for ev in after_removal), json.dumps(after_removal)
        # bob (still a member) and the admin key go on.
        assert until_text(bob, "after")["event"] == "change"
        assert until_text(admin, "after")["event"] == "change"
    finally:
        for listener in (alice, bob, admin):
            listener.close()


def test_a_transaction_that_removes_the_member_is_not_sent_to_them(stack, client, room):
    alice = listen(stack, messages(room), user(stack, "alice"))
    bob = listen(stack, messages(room), user(stack, "bob"))
    try:
        for listener in (alice, bob):
            assert listener.next()["event"] == "snapshot"
        # One transaction: alice removed and a message posted. The message is committed
        # with her removal: it is never sent to her, and the transaction is not split.
        commit(
            stack,
            client,
            [
                {"set": f"rooms/{room}", "data": {"members": ["bob"]}},
                {"set": f"rooms/{room}/messages/m9", "data": {"text": "without alice"}},
            ],
        )
        events = ended_by_permission(alice)
        assert not any("without alice" in texts(ev) for ev in events), events
        assert until_text(bob, "without alice")["event"] == "change"
    finally:
        alice.close()
        bob.close()


def test_a_ruleset_change_ends_a_running_target(stack, client, room):
    alice = listen(stack, messages(room), user(stack, "alice"))
    admin = listen(stack, messages(room), stack.admin)
    try:
        assert alice.next()["event"] == "snapshot"
        assert admin.next()["event"] == "snapshot"
        stack.sql("select docstore.set_rules(%s, %s)", LOCKED, DB)
        # Ended by the new ruleset itself (polled about once a second), with no write at all.
        events = ended_by_permission(alice)
        assert all(ev["event"] in ("heartbeat", "reset") for ev in events), events
        # A new subscription is refused at once, and the admin key is unaffected.
        refused = Listener(stack, params=messages(room), headers=user(stack, "alice"), path=LISTEN)
        assert refused.status == 403, refused.error_body
        assert json.loads(refused.error_body)["code"] == "PERMISSION_DENIED"
        commit(stack, client, [{"set": f"rooms/{room}/messages/m4", "data": {"text": "locked"}}])
        assert until_text(admin, "locked")["event"] == "change"
    finally:
        alice.close()
        admin.close()


def test_a_document_in_flight_the_rule_denies_is_never_sent(stack, client, room):
    target = [("document", f"rooms/{room}")]
    alice = listen(stack, target, user(stack, "alice"))
    bob = listen(stack, target, user(stack, "bob"))
    try:
        for listener in (alice, bob):
            ev = listener.next()
            assert ev["event"] == "snapshot", ev
        # The room's new version no longer names alice: the get rule denies it to her, so
        # its topic must never reach her; bob still reads it.
        commit(
            stack,
            client,
            [{"set": f"rooms/{room}", "data": {"members": ["bob"], "topic": "classified"}}],
        )
        events = ended_by_permission(alice)
        assert "classified" not in json.dumps(events), events
        ev = bob.until(lambda ev: "classified" in json.dumps(ev))
        assert ev["event"] == "change"
    finally:
        alice.close()
        bob.close()


def test_anonymous_streams_are_decided_too(stack, client, room):
    # The list rule needs a signed-in member: refused at subscribe without a token.
    refused = Listener(stack, params=messages(room), headers={}, path=LISTEN)
    assert refused.status == 403, refused.error_body
    # A visible notice may be read by anyone; its hidden version never reaches them.
    notice = "notices/n" + uuid.uuid4().hex[:10]
    commit(stack, client, [{"set": notice, "data": {"visible": True, "body": "open"}}])
    anonymous = listen(stack, [("document", notice)], {})
    try:
        ev = anonymous.next()
        assert ev["event"] == "snapshot" and "open" in json.dumps(ev), ev
        commit(stack, client, [{"set": notice, "data": {"visible": False, "body": "hidden"}}])
        events = ended_by_permission(anonymous)
        assert "hidden" not in json.dumps(events), events
    finally:
        anonymous.close()
    # (default), open in the test stack (the demo's open ruleset), answers anonymous streams.
    coll = "c" + uuid.uuid4().hex[:10]
    stack.sql("select docstore.set(%s, '{\"n\": 1}')", f"{coll}/a")
    open_stream = Listener(stack, params=[("document", f"{coll}/a")], headers={})
    try:
        assert open_stream.status == 200, open_stream.error_body
        assert open_stream.next()["event"] == "snapshot"
        stack.sql("select docstore.set(%s, '{\"n\": 2}')", f"{coll}/a")
        ev = open_stream.until(lambda ev: ev["event"] == "change")
        assert '"n":2' in json.dumps(ev["data"], separators=(",", ":"))
    finally:
        open_stream.close()
