"""One ruleset, three surfaces (docs/rules.md): a chat app with owners and members, set once
with docstore.set_rules, decides the same way for the same JWT whether the caller uses SQL
(psql: `set role docstore_client; select docstore.authenticate(jwt)`), HTTP (the sidecar's
REST API) or a live query (the sidecar's `:listen`).

Every case is a table row `(caller, operation, allowed)`; each surface answers it and every
answer must equal the row's. Writes go through `docstore.commit` in SQL and `:commit` over
HTTP with the same JSON (on ids of their own); the live surface sees them as a member's open
stream, which must receive exactly the allowed writes of both. Then the owner removes a
member, and all three surfaces deny that member from the same moment on.
"""

from __future__ import annotations

import json
import uuid
from contextlib import contextmanager

import psycopg
import pytest
from test_listen import Listener
from test_listen_rules import ended_by_permission, texts, until_text

DB = "surfaces"
LISTEN = f"/v1/databases/{DB}:listen"
RUN = f"/v1/databases/{DB}:runQuery"
COMMIT = f"/v1/databases/{DB}:commit"

CHAT = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    function signedIn() { return request.auth != null; }
    function room(id) { return get(/databases/$(database)/documents/rooms/$(id)).data; }
    function isMember(id) { return signedIn() && request.auth.uid in room(id).members; }

    match /rooms/{roomId} {
      allow read: if signedIn() && request.auth.uid in resource.data.members;
      allow create: if signedIn() && request.resource.data.owner == request.auth.uid
        && request.auth.uid in request.resource.data.members;
      allow update: if signedIn() && resource.data.owner == request.auth.uid
        && request.resource.data.owner == resource.data.owner;
      allow delete: if signedIn() && resource.data.owner == request.auth.uid;

      match /messages/{messageId} {
        allow read: if isMember(roomId);
        allow create: if isMember(roomId)
          && request.resource.data.from == request.auth.uid
          && request.resource.data.keys().hasOnly(['from', 'text'])
          && request.resource.data.text is string
          && request.resource.data.text.size() <= 200;
        allow update: if false;
        allow delete: if signedIn()
          && (resource.data.from == request.auth.uid || room(roomId).owner == request.auth.uid);
      }
    }
  }
}"""

CALLERS = ("alice", "bob", "carol", None)  # owner, member, outsider, unauthenticated


@pytest.fixture
def world(stack, client):
    """The ruleset and one room: alice owns it, bob is a member, carol is not."""
    stack.sql("insert into docstore.databases (id) values (%s) on conflict do nothing", DB)
    stack.sql("select docstore.set_rules(%s, %s)", CHAT, DB)
    room = "r" + uuid.uuid4().hex[:10]
    admin_commit(
        stack,
        client,
        [
            {"set": f"rooms/{room}", "data": {"owner": "alice", "members": ["alice", "bob"]}},
            {"set": f"rooms/{room}/messages/m1", "data": {"from": "alice", "text": "hello"}},
        ],
    )
    tokens = {who: stack.token({"sub": who}) for who in CALLERS if who}
    yield room, tokens
    stack.sql("select docstore.drop_rules(%s)", DB)


def admin_commit(stack, client, writes):
    r = client.post(COMMIT, headers=stack.admin, json={"writes": writes})
    assert r.status_code == 200, r.text


def headers(stack, tokens, who) -> dict:
    return stack.bearer(tokens[who]) if who else {}


# --- the three surfaces: each answers True (allowed) or False (PERMISSION_DENIED) ---------


@contextmanager
def psql_user(stack, tokens, who):
    """A transaction as a psql user of DB: docstore_client, authenticated with the caller's
    JWT (unauthenticated for None)."""
    with psycopg.connect(stack.cluster.url()) as conn:
        conn.execute("select set_config('docstore.database', %s, true)", (DB,))
        # The secret authenticate() verifies with; a superuser-only setting (docs/rules.md).
        conn.execute("select set_config('docstore.jwt_secret', %s, true)", (stack.jwt_secret,))
        conn.execute("set local role docstore_client")
        if who:
            conn.execute("select docstore.authenticate(%s)", (tokens[who],))
        yield conn


def sql(stack, tokens, who, statement: str, *params) -> bool:
    """`statement` as a psql user (`psql_user`)."""
    with psql_user(stack, tokens, who) as conn:
        try:
            conn.execute(statement, params or None).fetchall()
        except psycopg.errors.InsufficientPrivilege as e:
            assert e.sqlstate == "42501", e
            return False
    return True


def http(stack, client, tokens, who, method: str, url: str, body=None) -> bool:
    r = client.request(method, url, headers=headers(stack, tokens, who), json=body)
    if r.status_code == 403:
        assert r.json()["code"] == "PERMISSION_DENIED", r.text
        return False
    assert r.status_code in (200, 404), r.text
    return True


def live(stack, tokens, who, target) -> bool:
    """Whether a stream on `target` opens (and starts with its snapshot) for the caller."""
    listener = Listener(stack, params=[target], headers=headers(stack, tokens, who), path=LISTEN)
    try:
        if listener.status == 403:
            assert json.loads(listener.error_body)["code"] == "PERMISSION_DENIED"
            return False
        assert listener.status == 200, listener.error_body
        assert listener.next()["event"] == "snapshot"
        return True
    finally:
        listener.close()


def compare(rows: list[tuple]) -> None:
    """Fail with the whole table when any surface answered a row differently."""
    wrong = [row for row in rows if len(set(row[2:])) != 1]
    table = "\n".join(
        f"{case:<45} {str(who):<6} " + " ".join(str(a) for a in answers)
        for case, who, *answers in rows
    )
    assert not wrong, f"surfaces disagree (case, caller, expected, surfaces...):\n{table}"


# --- the tests ------------------------------------------------------------------------------


def test_reads_are_decided_alike_on_every_surface(stack, client, world):
    room, tokens = world
    member = {"alice": True, "bob": True, "carol": False, None: False}
    rows = []
    for who in CALLERS:
        for doc in (f"rooms/{room}", f"rooms/{room}/messages/m1", f"rooms/{room}/messages/none"):
            rows.append(
                (
                    "get " + doc.replace(room, "R"),
                    who,
                    member[who],
                    sql(stack, tokens, who, "select docstore.get(%s)", doc),
                    http(stack, client, tokens, who, "GET", stack.doc(doc, db=DB)),
                    live(stack, tokens, who, ("document", doc)),
                )
            )
        queries = [
            # The list rule is proven by the room's get(): members only.
            (f"select * from /rooms/{room}/messages", member[who]),
            (f"select * from /rooms/{room}/messages where text = 'hello'", member[who]),
            # Rules are not filters: an unconstrained query of rooms is refused for anyone...
            ("select * from /rooms", False),
            # ...and one whose constraint proves `uid in resource.data.members` is allowed.
            (f"select * from /rooms where members array_contains '{who}'", who is not None),
            ("select * from /rooms where members array_contains 'alice'", who == "alice"),
        ]
        for query, expected in queries:
            rows.append(
                (
                    query.replace(room, "R"),
                    who,
                    expected,
                    sql(stack, tokens, who, "select * from docstore.query(%s)", query),
                    http(stack, client, tokens, who, "POST", RUN, {"sql": query}),
                    live(stack, tokens, who, ("sql", query)),
                )
            )
    compare(rows)

    # Plain SQL is the one deviation: the RLS policy filters rows by the same list rule
    # instead of refusing the statement. Members see the message; the others see nothing.
    for who in CALLERS:
        with psql_user(stack, tokens, who) as conn:
            paths = conn.execute(
                "select path from docstore.entities where database_id = %s and path like %s",
                (DB, f"rooms/{room}/messages/%"),
            ).fetchall()
        assert paths == ([(f"rooms/{room}/messages/m1",)] if member[who] else []), (who, paths)


def test_writes_are_decided_alike_and_live_streams_see_exactly_the_allowed_ones(
    stack, client, world
):
    room, tokens = world
    messages = ("sql", f"select * from /rooms/{room}/messages")
    # Open before the writes: a member's stream and the admin's.
    watchers = {
        "bob": Listener(
            stack, params=[messages], headers=headers(stack, tokens, "bob"), path=LISTEN
        ),
        "admin": Listener(stack, params=[messages], headers=stack.admin, path=LISTEN),
    }
    try:
        for listener in watchers.values():
            assert listener.status == 200, listener.error_body
            assert listener.next()["event"] == "snapshot"
        rows = []
        allowed_texts = set()
        seeded = {"hello"}
        for surface in ("sql", "http"):
            m = f"rooms/{room}/messages/{surface}"
            seeded |= {f"{surface} bobs", f"{surface} keep"}
            # A message of bob's for the owner to delete, and one for carol to try.
            admin_commit(
                stack,
                client,
                [
                    {"set": f"{m}-bobs", "data": {"from": "bob", "text": f"{surface} bobs"}},
                    {"set": f"{m}-keep", "data": {"from": "bob", "text": f"{surface} keep"}},
                ],
            )
            cases = [
                (
                    "alice",
                    {"create": f"{m}-a", "data": {"from": "alice", "text": f"{surface} a"}},
                    True,
                ),
                (
                    "bob",
                    {"create": f"{m}-b", "data": {"from": "bob", "text": f"{surface} b"}},
                    True,
                ),
                (
                    "bob",
                    {
                        "create": f"{m}-forged",
                        "data": {"from": "alice", "text": f"{surface} forged"},
                    },
                    False,
                ),
                (
                    "bob",
                    {
                        "create": f"{m}-extra",
                        "data": {"from": "bob", "text": f"{surface} extra", "pin": True},
                    },
                    False,
                ),
                (
                    "bob",
                    {
                        "create": f"{m}-long",
                        "data": {"from": "bob", "text": f"{surface} " + "x" * 200},
                    },
                    False,
                ),
                (
                    "carol",
                    {"create": f"{m}-c", "data": {"from": "carol", "text": f"{surface} c"}},
                    False,
                ),
                (
                    None,
                    {"create": f"{m}-anon", "data": {"from": None, "text": f"{surface} anon"}},
                    False,
                ),
                ("alice", {"update": f"{m}-a", "fields": {"text": f"{surface} edited"}}, False),
                ("carol", {"delete": f"{m}-keep"}, False),
                # A write that would fail on its own is denied first: an outsider cannot tell
                # an existing message from a missing one (403, not 404 or 409).
                ("carol", {"update": f"{m}-missing", "fields": {"text": "x"}}, False),
                ("carol", {"create": f"{m}-keep", "data": {"from": "carol", "text": "x"}}, False),
                ("alice", {"delete": f"{m}-bobs"}, True),
                ("bob", {"update": f"rooms/{room}", "fields": {"owner": "bob"}}, False),
                ("carol", {"update": f"rooms/{room}", "fields": {"members": ["carol"]}}, False),
                # A batch is decided whole: one denied write and nothing of it is written.
                (
                    "bob",
                    [
                        {"create": f"{m}-b2", "data": {"from": "bob", "text": f"{surface} b2"}},
                        {"create": f"{m}-b3", "data": {"from": "alice", "text": f"{surface} b3"}},
                    ],
                    False,
                ),
            ]
            for who, write, expected in cases:
                writes = write if isinstance(write, list) else [write]
                if surface == "sql":
                    got = sql(stack, tokens, who, "select docstore.commit(%s)", json.dumps(writes))
                else:
                    got = http(stack, client, tokens, who, "POST", COMMIT, {"writes": writes})
                label = " + ".join(
                    next(iter(w)) + " " + w[next(iter(w))].rsplit("/", 1)[-1] for w in writes
                )
                rows.append((label, who, expected, got))
                if expected:
                    allowed_texts |= {w["data"]["text"] for w in writes if "data" in w}
        compare(rows)

        # What is stored is what was allowed, on both surfaces alike.
        r = client.post(RUN, headers=stack.admin, json={"sql": messages[1]})
        stored = {row["data"]["text"] for row in r.json()}
        assert stored == seeded - {"sql bobs", "http bobs"} | allowed_texts, stored

        # The live surface: the member's stream and the admin's receive every allowed message
        # (in commit order) and, by then, none of the denied ones.
        for name, listener in watchers.items():
            seen = {t for ev in listener.received for t in texts(ev)}

            def all_allowed(ev, seen=seen):
                seen.update(texts(ev))
                return allowed_texts <= seen

            if not allowed_texts <= seen:
                listener.until(all_allowed)
            assert seen <= seeded | allowed_texts, (name, seen - seeded - allowed_texts)
    finally:
        for listener in watchers.values():
            listener.close()


def test_removing_a_member_denies_them_on_every_surface_at_once(stack, client, world):
    room, tokens = world
    messages = ("sql", f"select * from /rooms/{room}/messages")
    bob = Listener(stack, params=[messages], headers=headers(stack, tokens, "bob"), path=LISTEN)
    try:
        assert bob.status == 200 and bob.next()["event"] == "snapshot"
        # Only the owner may change the members: bob cannot keep himself in, alice removes him.
        keep = [{"update": f"rooms/{room}", "fields": {"members": ["alice", "bob", "carol"]}}]
        assert not http(stack, client, tokens, "bob", "POST", COMMIT, {"writes": keep})
        remove = [{"update": f"rooms/{room}", "fields": {"members": ["alice"]}}]
        assert sql(stack, tokens, "alice", "select docstore.commit(%s)", json.dumps(remove))
        admin_commit(
            stack,
            client,
            [{"set": f"rooms/{room}/messages/after", "data": {"from": "alice", "text": "after"}}],
        )
        # Live: bob's stream ends with `reset {permission}` and never carries "after".
        events = ended_by_permission(bob)
        assert not any("after" in texts(ev) for ev in events), events
        # SQL and HTTP deny him too, for the room, its messages and a new stream alike.
        doc = f"rooms/{room}/messages/m1"
        query = messages[1]
        answers = {
            "sql get": sql(stack, tokens, "bob", "select docstore.get(%s)", doc),
            "sql query": sql(stack, tokens, "bob", "select * from docstore.query(%s)", query),
            "http get": http(stack, client, tokens, "bob", "GET", stack.doc(doc, db=DB)),
            "http query": http(stack, client, tokens, "bob", "POST", RUN, {"sql": query}),
            "live document": live(stack, tokens, "bob", ("document", doc)),
            "live query": live(stack, tokens, "bob", messages),
        }
        assert not any(answers.values()), answers
        # alice, still a member, reads the new message everywhere.
        alice = Listener(
            stack, params=[messages], headers=headers(stack, tokens, "alice"), path=LISTEN
        )
        try:
            assert alice.status == 200
            assert "after" in texts(until_text(alice, "after"))
        finally:
            alice.close()
        assert sql(
            stack, tokens, "alice", "select docstore.get(%s)", f"rooms/{room}/messages/after"
        )
    finally:
        bob.close()
