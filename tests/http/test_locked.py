"""Deny by default (docs/rules.md, "A database without rules"): in a database without a
ruleset every non-admin request is refused with 403 PERMISSION_DENIED, anonymous or with a JWT,
for reads, queries, writes and live streams, and nothing is written; the admin key is
unaffected. Rules dropped while a stream runs end it (the sidecar's rules stage decides that
database's targets as locked, as the extension decides its requests).

Each test fails on a stack where a database without rules is open: the requests would answer
200, and the running stream would not end.
"""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import OPEN_RULES
from test_listen import Listener
from test_listen_rules import ended_by_permission

DB = "lockedtest"


@pytest.fixture
def locked(stack, client):
    """Database DB, listed, without rules, holding one document written by the admin."""
    stack.sql("insert into docstore.databases (id) values (%s) on conflict do nothing", DB)
    stack.sql("select docstore.drop_rules(%s)", DB)
    coll = "c" + uuid.uuid4().hex[:10]
    r = client.put(stack.doc(f"{coll}/a", db=DB), json={"n": 1}, headers=stack.admin)
    assert r.status_code == 200, r.text
    yield coll
    stack.sql("select docstore.drop_rules(%s)", DB)


def callers(stack) -> list[tuple[str, dict]]:
    return [
        ("anonymous", {}),
        ("jwt", stack.bearer(stack.token({"sub": "alice"}))),
        ("jwt without sub", stack.bearer(stack.token({}))),
    ]


def assert_denied(r, what) -> None:
    assert r.status_code == 403, (what, r.status_code, r.text)
    assert r.json()["code"] == "PERMISSION_DENIED", (what, r.text)


def test_requests_in_a_database_without_rules_are_denied(stack, client, locked):
    coll = locked
    run = f"/v1/databases/{DB}:runQuery"
    commit = f"/v1/databases/{DB}:commit"
    for who, headers in callers(stack):
        for what, r in [
            ("get", client.get(stack.doc(f"{coll}/a", db=DB), headers=headers)),
            ("get missing", client.get(stack.doc(f"{coll}/missing", db=DB), headers=headers)),
            ("query", client.post(run, json={"sql": f"select * from /{coll}"}, headers=headers)),
            (
                "structured query",
                client.post(
                    run,
                    json={"structuredQuery": {"from": [{"collectionId": coll}]}},
                    headers=headers,
                ),
            ),
            ("put", client.put(stack.doc(f"{coll}/b", db=DB), json={"n": 2}, headers=headers)),
            ("post", client.post(stack.doc(coll, db=DB), json={"n": 3}, headers=headers)),
            ("delete", client.delete(stack.doc(f"{coll}/a", db=DB), headers=headers)),
            (
                "commit",
                client.post(
                    commit,
                    json={"writes": [{"set": f"{coll}/c", "data": {"n": 4}}]},
                    headers=headers,
                ),
            ),
        ]:
            assert_denied(r, (who, what))
        stream = Listener(
            stack,
            params=[("sql", f"select * from /{coll}")],
            headers=headers,
            path=f"/v1/databases/{DB}:listen",
        )
        assert stream.status == 403, (who, stream.error_body)
        assert json.loads(stream.error_body)["code"] == "PERMISSION_DENIED"
        document = Listener(
            stack,
            params=[("document", f"{coll}/a")],
            headers=headers,
            path=f"/v1/databases/{DB}:listen",
        )
        assert document.status == 403, (who, document.error_body)
    # Nothing was written or deleted; the admin key reads and writes as before.
    r = client.post(run, json={"sql": f"select * from /{coll}"}, headers=stack.admin)
    assert r.status_code == 200, r.text
    assert [row["data"] for row in r.json()] == [{"n": 1}]
    r = client.put(stack.doc(f"{coll}/b", db=DB), json={"n": 2}, headers=stack.admin)
    assert r.status_code == 200, r.text


def test_an_open_ruleset_opens_the_database(stack, client, locked):
    coll = locked
    stack.sql("select docstore.set_rules(%s, %s)", OPEN_RULES, DB)
    for who, headers in callers(stack):
        r = client.get(stack.doc(f"{coll}/a", db=DB), headers=headers)
        assert r.status_code == 200, (who, r.text)


def test_dropped_rules_end_a_running_stream(stack, client, locked):
    coll = locked
    stack.sql("select docstore.set_rules(%s, %s)", OPEN_RULES, DB)
    headers = stack.bearer(stack.token({"sub": "alice"}))
    params = [("sql", f"select * from /{coll}")]
    stream = Listener(stack, params=params, headers=headers, path=f"/v1/databases/{DB}:listen")
    admin = Listener(stack, params=params, headers=stack.admin, path=f"/v1/databases/{DB}:listen")
    try:
        assert stream.status == 200, stream.error_body
        assert stream.next()["event"] == "snapshot"
        assert admin.next()["event"] == "snapshot"
        # Ended by the drop itself (the rules are polled about once a second), with no write.
        stack.sql("select docstore.drop_rules(%s)", DB)
        events = ended_by_permission(stream)
        assert all(ev["event"] in ("heartbeat", "reset") for ev in events), events
        # The reason stays in the sidecar's log: a client sees the one fixed text of every
        # permission reset (docs/listen.md).
        assert events[-1]["data"]["reason"] == "permission", events[-1]
        assert events[-1]["data"]["message"] == "the security rules no longer allow this stream"
        # The admin's stream goes on.
        r = client.put(stack.doc(f"{coll}/z", db=DB), json={"secret": "after"}, headers=stack.admin)
        assert r.status_code == 200, r.text
        assert admin.until(lambda ev: "after" in json.dumps(ev))["event"] == "change"
    finally:
        stream.close()
        admin.close()
