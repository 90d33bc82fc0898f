"""`POST /v1/databases/{db}:batchGet` (docs/http.md): many documents read in one snapshot,
answered in request order, each a `get` decided by the rules for a user."""

import threading

import pytest

BATCH_GET = "/v1/databases/(default):batchGet"
COMMIT = "/v1/databases/(default):commit"


def test_found_and_missing_in_request_order(stack, client, coll):
    for name, n in (("a", 1), ("b", 2)):
        r = client.put(stack.doc(f"{coll}/{name}"), json={"n": n}, headers=stack.admin)
        assert r.status_code == 200, r.text
    paths = [f"{coll}/b", f"{coll}/none", f"{coll}/a", f"{coll}/b", f"{coll}/a/sub/x"]
    r = client.post(BATCH_GET, headers=stack.admin, json={"documents": paths})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert set(answer) == {"readTime", "documents"}
    assert answer["readTime"].endswith("Z")
    got = answer["documents"]
    assert [next(iter(item)) for item in got] == ["found", "missing", "found", "found", "missing"]
    b = client.get(stack.doc(f"{coll}/b"), headers=stack.admin).json()
    assert got[0]["found"] == b == got[3]["found"]
    assert got[1] == {"missing": f"{coll}/none"}
    assert got[2]["found"]["data"] == {"n": 1} and got[2]["found"]["path"] == f"{coll}/a"
    assert got[4] == {"missing": f"{coll}/a/sub/x"}
    # the same answer for a user under the open rules
    user = stack.bearer(stack.token({"sub": "u"}))
    r = client.post(BATCH_GET, headers=user, json={"documents": paths})
    assert r.status_code == 200, r.text
    assert r.json()["documents"] == got


def test_the_limit_is_1000_documents(stack, client, coll):
    paths = [f"{coll}/d{i}" for i in range(1000)]
    r = client.post(BATCH_GET, headers=stack.admin, json={"documents": paths})
    assert r.status_code == 200, r.text
    assert r.json()["documents"] == [{"missing": p} for p in paths]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"documents": "c/a"},
        {"documents": {"c/a": True}},
        {"documents": []},
        {"documents": [f"c/d{i}" for i in range(1001)]},
        {"documents": ["c"]},
        {"documents": ["c/a", "c/a/sub"]},
        {"documents": ["c/a", "c/.."]},
        {"documents": ["c//a"]},
        {"documents": ["c/__x__"]},
        {"documents": [""]},
        {"documents": [7]},
        {"documents": [None]},
        {"documents": ["c/a"], "mask": ["x"]},
        [],
        "c/a",
    ],
)
def test_bad_input_is_400(stack, client, body):
    r = client.post(BATCH_GET, headers=stack.admin, json=body)
    assert r.status_code == 400, (body, r.text)
    assert r.json()["code"] == "INVALID_ARGUMENT"


def test_query_parameters_and_methods(stack, client):
    r = client.post(BATCH_GET + "?x=1", headers=stack.admin, json={"documents": ["c/a"]})
    assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT"
    r = client.get(BATCH_GET, headers=stack.admin)
    assert r.status_code == 404
    r = client.post(
        "/v1/databases/nosuchdb:batchGet", headers=stack.admin, json={"documents": ["c/a"]}
    )
    assert r.status_code == 404 and r.json()["code"] == "NOT_FOUND"


def test_all_documents_come_from_one_snapshot(stack, coll):
    """A writer moves one unit between two documents in each commit; the sum a batchGet sees
    must always be the total: a read that saw one document before a commit and the other after
    it would be off by one."""
    a, b = f"{coll}/a", f"{coll}/b"
    total = 100
    with stack.client() as c:
        c.post(
            COMMIT,
            headers=stack.admin,
            json={"writes": [{"set": a, "data": {"n": total}}, {"set": b, "data": {"n": 0}}]},
        )
    stop = threading.Event()
    errors: list[str] = []
    moves = []

    def writer():
        with stack.client() as c:
            step = -1
            while not stop.is_set():
                r = c.post(
                    COMMIT,
                    headers=stack.admin,
                    json={
                        "writes": [
                            {"update": a, "fields": {"n": {"$increment": step}}},
                            {"update": b, "fields": {"n": {"$increment": -step}}},
                        ]
                    },
                )
                if r.status_code != 200:
                    errors.append(r.text)
                    return
                moves.append(1)
                if len(moves) % total == 0:
                    step = -step

    t = threading.Thread(target=writer)
    t.start()
    user = stack.bearer(stack.token({"sub": "u"}))
    seen = set()
    try:
        with stack.client() as c:
            for i in range(400):
                headers = stack.admin if i % 2 == 0 else user
                r = c.post(BATCH_GET, headers=headers, json={"documents": [a, b, a]})
                assert r.status_code == 200, r.text
                docs = [d["found"]["data"]["n"] for d in r.json()["documents"]]
                assert docs[0] + docs[1] == total, docs
                assert docs[0] == docs[2], docs
                seen.add(docs[0])
    finally:
        stop.set()
        t.join(60)
    assert errors == []
    assert len(seen) > 1, "the writer never moved a value during the reads"


RULES = """rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /open/{id} { allow get: if true; }
    match /mine/{id} { allow get: if request.auth != null && request.auth.uid == id; }
  }
}"""


def test_each_path_is_a_get_decided_by_the_rules(stack, client):
    db = "batchgettest"
    stack.sql("insert into docstore.databases (id) values (%s) on conflict do nothing", db)
    stack.sql("select docstore.set_rules(%s, %s)", RULES, db)
    url = f"/v1/databases/{db}:batchGet"
    try:
        for path in ("open/x", "mine/u1", "mine/u2"):
            r = client.put(stack.doc(path, db=db), json={"p": path}, headers=stack.admin)
            assert r.status_code == 200, r.text
        u1 = stack.bearer(stack.token({"sub": "u1"}))
        r = client.post(url, headers=u1, json={"documents": ["open/x", "mine/u1", "open/none"]})
        assert r.status_code == 200, r.text
        assert [next(iter(d)) for d in r.json()["documents"]] == ["found", "found", "missing"]
        for denied in ("mine/u2", "mine/missing"):
            r = client.post(url, headers=u1, json={"documents": ["open/x", denied]})
            assert r.status_code == 403, r.text
            assert r.json()["code"] == "PERMISSION_DENIED"
        r = client.post(url, headers={}, json={"documents": ["mine/u1"]})
        assert r.status_code == 403 and r.json()["code"] == "PERMISSION_DENIED"
        # the admin key bypasses the rules
        r = client.post(url, headers=stack.admin, json={"documents": ["mine/u2"]})
        assert r.status_code == 200 and "found" in r.json()["documents"][0]
    finally:
        stack.sql("select docstore.drop_rules(%s)", db)
