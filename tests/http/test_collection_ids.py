"""`POST /v1/databases/{db}:listCollectionIds` (docs/http.md): the sorted ids of the
collections holding a document directly under a parent; admin key only."""

import uuid

import pytest


@pytest.fixture
def database(stack):
    """A database of the test's own, so the root's collections are known."""
    db = "l" + uuid.uuid4().hex[:10]
    stack.sql("select docstore.create_database(%s)", db)
    return db


def ids(client, stack, db, body):
    r = client.post(f"/v1/databases/{db}:listCollectionIds", headers=stack.admin, json=body)
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"collectionIds"}
    return r.json()["collectionIds"]


def test_collections_directly_under_the_root_and_a_document(stack, client, database):
    paths = [
        "b/1",
        "a/1",
        "a/2",
        "a-/1",
        "ab/1",
        "é/1",
        "Z/1",
        "only-deep/1/sub/x",
        "a/1/ratings/r1",
        "a/1/ratings/r2",
        "a/1/photos/p1",
        "a/1/photos/p1/tags/t",
        "a/1/deeper-only/x/y/z",
        "a/2/other/o",
        "missing/parent/kids/k",
    ]
    for p in paths:
        r = client.put(stack.doc(p, db=database), json={}, headers=stack.admin)
        assert r.status_code == 200, r.text
    root = ["Z", "a", "a-", "ab", "b", "é"]  # byte order; "only-deep" holds no document itself
    assert ids(client, stack, database, {}) == root
    assert ids(client, stack, database, {"parent": ""}) == root
    assert ids(client, stack, database, {"parent": "a/1"}) == ["photos", "ratings"]
    assert ids(client, stack, database, {"parent": "a/1/photos/p1"}) == ["tags"]
    # a parent that does not exist itself still has its subcollections listed
    assert ids(client, stack, database, {"parent": "missing/parent"}) == ["kids"]
    assert ids(client, stack, database, {"parent": "only-deep/1"}) == ["sub"]
    assert ids(client, stack, database, {"parent": "a/3"}) == []
    # deleting the last document of a collection removes it from the list
    client.delete(stack.doc("a/1/photos/p1", db=database), headers=stack.admin)
    assert ids(client, stack, database, {"parent": "a/1"}) == ["ratings"]
    # another database's collections are not seen
    other = stack.doc("a/1/elsewhere/x")  # (default)
    client.put(other, json={}, headers=stack.admin)
    assert ids(client, stack, database, {"parent": "a/1"}) == ["ratings"]


def test_admin_only(stack, client, database):
    for headers in ({}, stack.bearer(stack.token({"sub": "u"}))):
        r = client.post(f"/v1/databases/{database}:listCollectionIds", headers=headers, json={})
        assert r.status_code == 403, r.text
        assert r.json()["code"] == "PERMISSION_DENIED"


@pytest.mark.parametrize(
    "body",
    [
        {"parent": "a"},
        {"parent": "a/1/b"},
        {"parent": "a/.."},
        {"parent": "a//b"},
        {"parent": 7},
        {"parent": None},
        {"parent": "a/1", "pageSize": 10},
        [],
        "a/1",
    ],
)
def test_bad_input_is_400(stack, client, body):
    r = client.post("/v1/databases/(default):listCollectionIds", headers=stack.admin, json=body)
    assert r.status_code == 400, (body, r.text)
    assert r.json()["code"] == "INVALID_ARGUMENT"


def test_unknown_database_is_404(stack, client):
    r = client.post("/v1/databases/nosuchdb:listCollectionIds", headers=stack.admin, json={})
    assert r.status_code == 404 and r.json()["code"] == "NOT_FOUND"
