"""Security rules over HTTP (docs/rules.md): a ruleset set with docstore.set_rules on one
database decides the sidecar's client requests, which run as docstore_client with the JWT's
claims in docstore.auth; the admin key bypasses the rules."""

import json

import pytest

DB = "rulestest"

RULES = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /users/{uid} {
      allow read: if request.auth != null && request.auth.uid == uid;
      allow create, update: if request.auth != null && request.auth.uid == uid
        && request.resource.data.owner == uid;
    }
  }
}"""


@pytest.fixture
def rules(stack):
    stack.sql("insert into docstore.databases (id) values (%s) on conflict do nothing", DB)
    stack.sql("select docstore.set_rules(%s, %s)", RULES, DB)
    yield
    stack.sql("select docstore.drop_rules(%s)", DB)


def test_writes_are_decided_by_the_rules(stack, client, rules):
    u1 = stack.bearer(stack.token({"sub": "u1"}))
    ok = client.put(stack.doc("users/u1", db=DB), json={"owner": "u1"}, headers=u1)
    assert ok.status_code == 200, ok.text
    # another user's document, a wrong owner field, and no token at all: denied, not written
    for path, data, headers in [
        ("users/u2", {"owner": "u2"}, u1),
        ("users/u1b", {"owner": "u1"}, u1),
        ("users/u3", {"owner": "u3"}, {}),
    ]:
        r = client.put(stack.doc(path, db=DB), json=data, headers=headers)
        assert r.status_code == 403, (path, r.text)
        assert r.json()["code"] == "PERMISSION_DENIED"
        assert client.get(stack.doc(path, db=DB), headers=stack.admin).status_code == 404
    # the admin key bypasses the rules
    r = client.put(stack.doc("users/u2", db=DB), json={"owner": "x"}, headers=stack.admin)
    assert r.status_code == 200, r.text


def test_a_denied_write_reads_the_same_whether_the_document_exists(stack, client, rules):
    # docs/rules.md, "What a denial tells": a set is decided as a create or an update by
    # whether its document exists, so a denial naming either (or the rule lines that failed)
    # would tell the client what the rules hide. PUT (whole and merge) and :commit answer the
    # same body, whatever the path, for an existing and a missing document.
    r = client.put(stack.doc("users/u2", db=DB), json={"owner": "u2"}, headers=stack.admin)
    assert r.status_code == 200, r.text
    u1 = stack.bearer(stack.token({"sub": "u1"}))

    def denials(path):
        bodies = []
        for method, url, params, body in [
            ("PUT", stack.doc(path, db=DB), {}, {"owner": "u1"}),
            ("PUT", stack.doc(path, db=DB), {"merge": "true"}, {"owner": "u1"}),
            (
                "POST",
                f"/v1/databases/{DB}:commit",
                {},
                {"writes": [{"set": path, "data": {"owner": "u1"}}]},
            ),
        ]:
            r = client.request(method, url, params=params, json=body, headers=u1)
            assert r.status_code == 403, (method, path, r.text)
            assert r.json()["code"] == "PERMISSION_DENIED"
            bodies.append(json.dumps(r.json(), sort_keys=True).replace(path, "<path>"))
        return bodies

    existing, missing = denials("users/u2"), denials("users/u3")
    assert existing == missing
    assert not any(word in text for text in existing for word in ("create", "update", "line"))
    # nothing was written
    r = client.get(stack.doc("users/u2", db=DB), headers=stack.admin)
    assert r.json()["data"] == {"owner": "u2"}
    assert client.get(stack.doc("users/u3", db=DB), headers=stack.admin).status_code == 404


def test_reads_are_decided_by_the_rules(stack, client, rules):
    for uid in ("u1", "u2"):
        r = client.put(stack.doc(f"users/{uid}", db=DB), json={"owner": uid}, headers=stack.admin)
        assert r.status_code == 200, r.text
    u1 = stack.bearer(stack.token({"sub": "u1"}))
    r = client.get(stack.doc("users/u1", db=DB), headers=u1)
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"owner": "u1"}
    # Another user's document, and any document without a token: 403 PERMISSION_DENIED, as
    # Firestore answers (the get rule decides, not the list rule's row filter), also for a
    # document that does not exist.
    for path, headers in [("users/u2", u1), ("users/u1", {}), ("users/nobody", u1)]:
        r = client.get(stack.doc(path, db=DB), headers=headers)
        assert r.status_code == 403, (path, r.text)
        assert r.json()["code"] == "PERMISSION_DENIED"
    # A missing document the rule allows is 404.
    u9 = stack.bearer(stack.token({"sub": "u9"}))
    assert client.get(stack.doc("users/u9", db=DB), headers=u9).status_code == 404
    assert client.get(stack.doc("users/u2", db=DB), headers=stack.admin).status_code == 200


def test_queries_are_checked_against_their_constraints(stack, client, rules):
    for uid in ("u1", "u2"):
        r = client.put(stack.doc(f"users/{uid}", db=DB), json={"owner": uid}, headers=stack.admin)
        assert r.status_code == 200, r.text
    run = f"/v1/databases/{DB}:runQuery"
    u1 = stack.bearer(stack.token({"sub": "u1"}))
    # Rules are not filters: a query that could return another user's document is refused
    # whole (403), not filtered, in both forms.
    for body in (
        {"sql": "select * from /users"},
        {"structuredQuery": {"from": [{"collectionId": "users"}]}},
        {"sql": "select * from /users where __name__ = 'u2'"},
    ):
        r = client.post(run, headers=u1, json=body)
        assert r.status_code == 403, (body, r.text)
        assert r.json()["code"] == "PERMISSION_DENIED"
    # A query whose constraints prove the rule (the document wildcard fixed by __name__)
    r = client.post(run, headers=u1, json={"sql": "select * from /users where __name__ = 'u1'"})
    assert r.status_code == 200, r.text
    assert [row["path"] for row in r.json()] == ["users/u1"]
    # A query over every collection (kindless: an empty collection id with all descendants)
    # is for administrators only, under any parent (docs/rules.md).
    for parent in (None, "users/u1"):
        query = {"from": [{"collectionId": "", "allDescendants": True}]}
        if parent:
            query["parent"] = parent
        r = client.post(run, headers=u1, json={"structuredQuery": query})
        assert r.status_code == 403, (parent, r.text)
        assert r.json()["code"] == "PERMISSION_DENIED"
        assert "administrators only" in r.json()["message"]
    # The admin key bypasses the rules.
    r = client.post(run, headers=stack.admin, json={"sql": "select * from /users"})
    assert r.status_code == 200, r.text
    assert [row["path"] for row in r.json()] == ["users/u1", "users/u2"]


def test_listen_targets_are_decided_by_the_rules(stack, client, rules):
    r = client.put(stack.doc("users/u2", db=DB), json={"owner": "u2"}, headers=stack.admin)
    assert r.status_code == 200, r.text
    listen = f"/v1/databases/{DB}:listen"
    u1 = stack.bearer(stack.token({"sub": "u1"}))
    # Refused before the stream opens: a query the list rule does not prove, another user's
    # document.
    for params in ({"sql": "select * from /users"}, {"document": "users/u2"}):
        r = client.get(listen, params=params, headers=u1)
        assert r.status_code == 403, (params, r.text)
        assert r.json()["code"] == "PERMISSION_DENIED"
    # The caller's own document opens a stream.
    with client.stream("GET", listen, params={"document": "users/u1"}, headers=u1) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
