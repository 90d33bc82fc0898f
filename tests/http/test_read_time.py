"""Reads at a read time over HTTP (docs/http.md, "Reads at a read time"): `?readTime=` on GET
of a document, `"readTime"` in the `:batchGet`, `:runQuery` and `:listCollectionIds` bodies,
`readOnly.readTime` in `:beginTransaction`. The documents as they were then, from the version
history, as gRPC's `read_time`; a future time or bad text is 400 INVALID_ARGUMENT, a time older
than the history 400 FAILED_PRECONDITION."""

import datetime

DB = "/v1/databases/(default)"
RUN_QUERY = f"{DB}:runQuery"
BATCH_GET = f"{DB}:batchGet"
LIST_IDS = f"{DB}:listCollectionIds"
BEGIN = f"{DB}:beginTransaction"
ROLLBACK = f"{DB}:rollback"


def rfc3339(t: datetime.datetime) -> str:
    return t.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def put(stack, client, path, data):
    r = client.put(stack.doc(path), headers=stack.admin, json=data)
    assert r.status_code == 200, r.text
    return r.json()["updateTime"]


def query(coll, **extra):
    return {"structuredQuery": {"from": [{"collectionId": coll}]}, **extra}


def count(coll, **extra):
    aggregation = {
        "structuredAggregationQuery": {
            "structuredQuery": {"from": [{"collectionId": coll}]},
            "aggregations": [{"alias": "n", "count": {}}],
        }
    }
    return {"structuredQuery": aggregation, **extra}


def test_each_read_route_reads_the_documents_as_they_were(stack, client, coll):
    at = put(stack, client, f"{coll}/a", {"v": 1})
    put(stack, client, f"{coll}/a", {"v": 2})
    put(stack, client, f"{coll}/b", {"v": 5})
    put(stack, client, f"{coll}/a/sub/x", {"v": 9})

    r = client.get(stack.doc(f"{coll}/a"), headers=stack.admin, params={"readTime": at})
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"v": 1} and r.json()["updateTime"] == at
    # A document that did not exist then is 404.
    r = client.get(stack.doc(f"{coll}/b"), headers=stack.admin, params={"readTime": at})
    assert r.status_code == 404 and r.json()["code"] == "NOT_FOUND", r.text

    r = client.post(
        BATCH_GET,
        headers=stack.admin,
        json={"documents": [f"{coll}/a", f"{coll}/b"], "readTime": at},
    )
    assert r.status_code == 200, r.text
    assert r.json()["readTime"] == at
    assert r.json()["documents"][0]["found"]["data"] == {"v": 1}
    assert r.json()["documents"][1] == {"missing": f"{coll}/b"}

    r = client.post(RUN_QUERY, headers=stack.admin, json=query(coll, readTime=at))
    assert r.status_code == 200, r.text
    assert [(row["path"], row["data"]) for row in r.json()] == [(f"{coll}/a", {"v": 1})]
    r = client.post(RUN_QUERY, headers=stack.admin, json=query(coll))
    assert [row["data"] for row in r.json()] == [{"v": 2}, {"v": 5}]
    r = client.post(RUN_QUERY, headers=stack.admin, json=count(coll, readTime=at))
    assert r.status_code == 200, r.text
    assert r.json() == [{"aggregation": {"n": 1}}]

    parent = {"parent": f"{coll}/a"}
    r = client.post(LIST_IDS, headers=stack.admin, json={**parent, "readTime": at})
    assert r.status_code == 200, r.text
    assert r.json() == {"collectionIds": []}
    r = client.post(LIST_IDS, headers=stack.admin, json=parent)
    assert r.json() == {"collectionIds": ["sub"]}

    # A read-only transaction at that time: its reads are of then.
    r = client.post(BEGIN, headers=stack.admin, json={"options": {"readOnly": {"readTime": at}}})
    assert r.status_code == 200, r.text
    transaction = r.json()["transaction"]
    r = client.get(stack.doc(f"{coll}/a"), headers=stack.admin, params={"transaction": transaction})
    assert r.status_code == 200 and r.json()["data"] == {"v": 1}, r.text
    r = client.post(
        BATCH_GET,
        headers=stack.admin,
        json={"documents": [f"{coll}/b"], "transaction": transaction},
    )
    assert r.json()["documents"] == [{"missing": f"{coll}/b"}], r.text
    assert client.post(ROLLBACK, headers=stack.admin, json={"transaction": transaction}).is_success

    # A deleted document reads as it was before its delete.
    assert client.delete(stack.doc(f"{coll}/a"), headers=stack.admin).status_code == 200
    r = client.get(stack.doc(f"{coll}/a"), headers=stack.admin, params={"readTime": at})
    assert r.status_code == 200 and r.json()["data"] == {"v": 1}, r.text


def test_bad_read_times(stack, client, coll):
    put(stack, client, f"{coll}/a", {"v": 1})
    now = datetime.datetime.now(datetime.UTC)
    future = rfc3339(now + datetime.timedelta(days=1))
    past = rfc3339(now - datetime.timedelta(hours=2))
    a = stack.doc(f"{coll}/a")

    def reads(t):
        """Each route's read at `t` (any JSON value)."""
        return [
            lambda: client.get(a, headers=stack.admin, params={"readTime": t}),
            lambda: client.post(
                BATCH_GET, headers=stack.admin, json={"documents": [f"{coll}/a"], "readTime": t}
            ),
            lambda: client.post(RUN_QUERY, headers=stack.admin, json=query(coll, readTime=t)),
            lambda: client.post(RUN_QUERY, headers=stack.admin, json=count(coll, readTime=t)),
            lambda: client.post(LIST_IDS, headers=stack.admin, json={"readTime": t}),
            lambda: client.post(
                BEGIN, headers=stack.admin, json={"options": {"readOnly": {"readTime": t}}}
            ),
        ]

    for t in (future, "yesterday", "2020-01-01", "2020-01-01T00:00:00.0000001Z"):
        for i, read in enumerate(reads(t)):
            r = read()
            assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", (t, i, r.text)
            if t == future:
                assert "in the future" in r.json()["message"], (i, r.text)
    # Not a string in a body.
    for i, read in enumerate(reads(1577836800)[1:]):
        r = read()
        assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", (i, r.text)
    # Older than the version history. A transaction at such a time begins; its reads fail.
    for i, read in enumerate(reads(past)[:-1]):
        r = read()
        assert r.status_code == 400 and r.json()["code"] == "FAILED_PRECONDITION", (i, r.text)
        assert "version" in r.json()["message"], (i, r.text)
    r = client.post(BEGIN, headers=stack.admin, json={"options": {"readOnly": {"readTime": past}}})
    assert r.status_code == 200, r.text
    transaction = r.json()["transaction"]
    r = client.get(a, headers=stack.admin, params={"transaction": transaction})
    assert r.status_code == 400 and r.json()["code"] == "FAILED_PRECONDITION", r.text
    client.post(ROLLBACK, headers=stack.admin, json={"transaction": transaction})

    # A transaction and a read time together; a read time with the text dialect; a read time
    # on the routes that do not read.
    at = rfc3339(now)
    r = client.post(BEGIN, headers=stack.admin, json={"options": {"readOnly": {}}})
    transaction = r.json()["transaction"]
    both = [
        lambda: client.get(
            a, headers=stack.admin, params={"readTime": at, "transaction": transaction}
        ),
        lambda: client.post(
            BATCH_GET,
            headers=stack.admin,
            json={"documents": [f"{coll}/a"], "readTime": at, "transaction": transaction},
        ),
        lambda: client.post(
            RUN_QUERY, headers=stack.admin, json=query(coll, readTime=at, transaction=transaction)
        ),
        lambda: client.post(
            RUN_QUERY,
            headers=stack.admin,
            json={"sql": f"select * from /{coll}", "readTime": at},
        ),
        lambda: client.get(stack.doc(coll), headers=stack.admin, params={"readTime": at}),
        lambda: client.post(
            BEGIN, headers=stack.admin, json={"options": {"readWrite": {}, "readTime": at}}
        ),
    ]
    for i, read in enumerate(both):
        r = read()
        assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", (i, r.text)
    assert client.post(ROLLBACK, headers=stack.admin, json={"transaction": transaction}).is_success
    # Writes take no read time, and write nothing.
    for write in (
        lambda: client.put(a, headers=stack.admin, params={"readTime": at}, json={"v": 7}),
        lambda: client.patch(a, headers=stack.admin, params={"readTime": at}, json={"v": 7}),
        lambda: client.delete(a, headers=stack.admin, params={"readTime": at}),
        lambda: client.post(
            stack.doc(coll), headers=stack.admin, params={"readTime": at}, json={"v": 7}
        ),
    ):
        r = write()
        assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT", r.text
    r = client.post(RUN_QUERY, headers=stack.admin, json=query(coll))
    assert [row["data"] for row in r.json()] == [{"v": 1}]
