"""Queries through the SDK against the real stack, every call sync and async: filters
(every operator, null/NaN, Or/And), order_by, limit, limit_to_last, offset, cursors of
snapshots and values, select, collection groups, stream/get, transactions, client.sql; a query
no index serves raises FailedPrecondition naming the create_index call; results equal the same
structuredQuery sent to the HTTP API by hand."""

from __future__ import annotations

import math
import re

import pytest

import docstore
from docstore import And, FieldFilter, Or, Query, exceptions

RESTAURANTS = {
    "r1": {"name": "Zola", "city": "SF", "rating": 4.5, "n": 10, "tags": ["bbq", "wine"]},
    "r2": {"name": "Nopa", "city": "SF", "rating": 4.0, "n": 25, "tags": ["wine"]},
    "r3": {"name": "Chez", "city": "Oakland", "rating": 3.5, "n": 5, "tags": []},
    "r4": {"name": "Bar", "city": "LA", "rating": None, "n": 1, "tags": ["bbq"]},
    "r5": {"name": "Nan", "city": "LA", "rating": float("nan"), "n": 40},
    "r6": {"name": "Odd", "city": "SF", "n": 7, "zip code": {"a.b": 1}},
}


@pytest.fixture
def seeded(db, coll):
    batch = db.batch()
    for doc_id, data in RESTAURANTS.items():
        batch.set(db.collection(coll).document(doc_id), data)
    batch.commit()
    return coll


def create_index_named_by(stack, error):
    """Run the create_index call a FailedPrecondition names, and wait for its build."""
    text = " ".join(str(x) for x in (error.message, error.detail, error.hint))
    call = re.search(r"docstore\.create_index\(.*?\)(?=;|\s*$|\s)", text, re.S)
    assert call, text
    stack.sql("select " + call.group(0))
    stack.sql("call docstore.build_indexes()")


def ids(snapshots):
    return [s.id for s in snapshots]


def both(db, arun, build):
    """The ids of build(client).get() with the sync client and with the async one (equal)."""
    sync = build(db).get()

    async def run(client):
        return await build(client).get()

    assert [(s.id, _comparable(s.to_dict())) for s in sync] == [
        (s.id, _comparable(s.to_dict())) for s in arun(run)
    ]
    return sync


def _comparable(data):
    if isinstance(data, dict):
        return {k: _comparable(v) for k, v in data.items()}
    if isinstance(data, float) and math.isnan(data):
        return "NaN"
    return data


def http_ids(stack, client, query):
    """The ids the HTTP API answers for the query's structuredQuery, sent by hand."""
    r = client.post(
        "/v1/databases/(default):runQuery",
        json={"structuredQuery": query._to_json()},
        headers=stack.bearer(stack.admin_key),
    )
    assert r.status_code == 200, r.text
    return [row["path"].rsplit("/", 1)[1] for row in r.json()]


@pytest.mark.parametrize(
    ("field", "op", "value", "expected"),
    [
        ("city", "==", "SF", {"r1", "r2", "r6"}),
        ("n", "<", 7, {"r3", "r4"}),
        ("n", "<=", 7, {"r3", "r4", "r6"}),
        ("n", ">", 10, {"r2", "r5"}),
        ("n", ">=", 10, {"r1", "r2", "r5"}),
        ("city", "!=", "SF", {"r3", "r4", "r5"}),
        ("city", "in", ["LA", "Oakland"], {"r3", "r4", "r5"}),
        ("city", "not-in", ["LA", "Oakland"], {"r1", "r2", "r6"}),
        ("tags", "array_contains", "bbq", {"r1", "r4"}),
        ("tags", "array_contains_any", ["wine", "none"], {"r1", "r2"}),
        ("rating", "==", None, {"r4"}),
        ("rating", "!=", None, {"r1", "r2", "r3", "r5"}),
        ("rating", "==", float("nan"), {"r5"}),
        ("rating", "!=", float("nan"), {"r1", "r2", "r3"}),
        (docstore.FieldPath("zip code", "a.b"), "==", 1, {"r6"}),
        ("__name__", "==", "r2", {"r2"}),
    ],
)
def test_every_operator_sync_async_and_http(
    stack, client, db, arun, seeded, field, op, value, expected
):
    def build(c):
        v = c.collection(seeded).document(value) if field == "__name__" else value
        return c.collection(seeded).where(filter=FieldFilter(field, op, v))

    got = both(db, arun, build)
    assert set(ids(got)) == expected
    assert sorted(http_ids(stack, client, build(db))) == sorted(ids(got))


def test_or_and_composites(stack, client, db, arun, seeded):
    def build(c):
        return c.collection(seeded).where(
            filter=Or(
                [
                    FieldFilter("city", "==", "Oakland"),
                    And([FieldFilter("city", "==", "SF"), FieldFilter("n", "==", 25)]),
                ]
            )
        )

    got = both(db, arun, build)
    assert sorted(ids(got)) == ["r2", "r3"]
    assert sorted(http_ids(stack, client, build(db))) == ["r2", "r3"]


def test_snapshots_hold_data_and_update_time(db, seeded):
    (snap,) = db.collection(seeded).where(filter=FieldFilter("name", "==", "Zola")).get()
    assert isinstance(snap, docstore.DocumentSnapshot) and snap.exists
    assert snap.reference == db.collection(seeded).document("r1")
    assert snap.to_dict() == RESTAURANTS["r1"]
    assert snap.update_time == db.collection(seeded).document("r1").get().update_time


def test_order_limit_offset(stack, client, db, arun, seeded):
    by_n = ["r5", "r2", "r1", "r6", "r3", "r4"]

    def desc(c):
        return c.collection(seeded).order_by("n", direction=Query.DESCENDING)

    assert ids(both(db, arun, desc)) == by_n
    assert ids(both(db, arun, lambda c: c.collection(seeded).order_by("n"))) == by_n[::-1]
    assert ids(both(db, arun, lambda c: desc(c).limit(2))) == by_n[:2]
    assert ids(both(db, arun, lambda c: desc(c).offset(2).limit(2))) == by_n[2:4]
    assert ids(both(db, arun, lambda c: desc(c).limit_to_last(2))) == by_n[-2:]
    assert ids(both(db, arun, lambda c: desc(c).offset(1).limit_to_last(2))) == by_n[-3:-1]
    assert http_ids(stack, client, desc(db).limit_to_last(2)) == by_n[-2:]
    assert ids(both(db, arun, lambda c: desc(c).limit(0))) == []


def test_limit_to_last_cannot_stream_and_needs_an_order(db, arun, seeded):
    q = db.collection(seeded).order_by("n").limit_to_last(1)
    with pytest.raises(ValueError):
        list(q.stream())
    with pytest.raises(ValueError):
        db.collection(seeded).limit_to_last(1).get()

    async def run(c):
        with pytest.raises(ValueError):
            async for _ in c.collection(seeded).order_by("n").limit_to_last(1).stream():
                pass
        return True

    assert arun(run)


def test_stream_sync_and_async(db, arun, seeded):
    q = db.collection(seeded).order_by("n")
    streamed = list(q.stream())
    assert ids(streamed) == ids(q.get())

    async def run(c):
        return [s.id async for s in c.collection(seeded).order_by("n").stream()]

    assert arun(run) == ids(streamed)


def test_cursors_of_values(db, arun, seeded):
    def q(c):
        return c.collection(seeded).order_by("n")

    # n: r4=1 r3=5 r6=7 r1=10 r2=25 r5=40
    assert ids(both(db, arun, lambda c: q(c).start_at([7]))) == ["r6", "r1", "r2", "r5"]
    assert ids(both(db, arun, lambda c: q(c).start_after([7]))) == ["r1", "r2", "r5"]
    assert ids(both(db, arun, lambda c: q(c).end_at({"n": 7}))) == ["r4", "r3", "r6"]
    assert ids(both(db, arun, lambda c: q(c).end_before([7]))) == ["r4", "r3"]
    assert ids(both(db, arun, lambda c: q(c).start_at([5]).end_at([10]))) == ["r3", "r6", "r1"]
    by_name = lambda c: c.collection(seeded).order_by("__name__")  # noqa: E731
    assert ids(both(db, arun, lambda c: by_name(c).start_after(["r4"]))) == ["r5", "r6"]


def test_cursor_snapshots_page_through_everything(db, arun, seeded):
    """Pages of 2 by start_after(last snapshot) give the whole ordering once."""
    q = db.collection(seeded).order_by("city")
    pages, cursor = [], None
    while True:
        page = (q.start_after(cursor) if cursor else q).limit(2).get()
        if not page:
            break
        pages.extend(ids(page))
        cursor = page[-1]
    assert pages == ids(q.get())
    assert sorted(pages) == sorted(RESTAURANTS)
    # ties on city are broken by __name__ (Firestore's implicit order)
    assert pages == ["r4", "r5", "r3", "r1", "r2", "r6"]

    async def run(c):
        snap = await c.collection(seeded).document("r5").get()
        return ids(await c.collection(seeded).order_by("city").start_at(snap).get())

    assert arun(run) == ["r5", "r3", "r1", "r2", "r6"]
    # a snapshot cursor without an order: by __name__
    r3 = db.collection(seeded).document("r3").get()
    assert ids(db.collection(seeded).end_before(r3).get()) == ["r1", "r2"]
    # with an inequality filter: ordered by that field first, as Firestore does
    got = db.collection(seeded).where(filter=FieldFilter("n", ">", 1)).start_after(r3).get()
    assert ids(got) == ["r6", "r1", "r2", "r5"]


def test_select(stack, client, db, arun, seeded):
    def build(c):
        return c.collection(seeded).select(["name", "zip code"]).order_by("n").limit(2)

    got = both(db, arun, build)
    assert [s.to_dict() for s in got] == [{"name": "Bar"}, {"name": "Chez"}]
    odd = db.collection(seeded).select([docstore.FieldPath("zip code")]).end_at(["r6"])
    assert odd.order_by("__name__").get()[-1].to_dict() == {"zip code": {"a.b": 1}}
    names = db.collection(seeded).select([]).get()
    assert sorted(ids(names)) == sorted(RESTAURANTS) and names[0].to_dict() == {}


def test_collection_group(stack, db, arun, coll):
    db.document(f"{coll}/a/ratings/x").set({"stars": 5})
    db.document(f"{coll}/b/ratings/y").set({"stars": 3})
    db.document(f"{coll}/b/other/z").set({"stars": 4})
    group = f"ratings{coll}"
    db.document(f"{coll}/a/{group}/x").set({"stars": 5})
    db.document(f"{coll}/b/{group}/y").set({"stars": 3})
    db.document(f"{coll}/b/{group}/z").set({"stars": 1})

    def build(c):
        return c.collection_group(group).where(filter=FieldFilter("stars", ">=", 3))

    with pytest.raises(exceptions.FailedPrecondition) as info:
        build(db).get()
    create_index_named_by(stack, info.value)
    got = both(db, arun, build)
    assert sorted(s.reference.path for s in got) == [f"{coll}/a/{group}/x", f"{coll}/b/{group}/y"]
    with pytest.raises(ValueError):
        db.collection_group("a/b")


def test_query_without_index_raises_failed_precondition_with_the_create_index_call(
    stack, db, arun, seeded
):
    def build(c):
        return (
            c.collection(seeded)
            .where(filter=FieldFilter("city", "==", "SF"))
            .order_by("n", direction=Query.DESCENDING)
        )

    with pytest.raises(exceptions.FailedPrecondition) as info:
        build(db).get()
    assert "docstore.create_index(" in info.value.message

    async def run(c):
        with pytest.raises(exceptions.FailedPrecondition):
            await build(c).get()
        return True

    assert arun(run)
    create_index_named_by(stack, info.value)
    assert ids(both(db, arun, build)) == ["r2", "r1", "r6"]


def test_server_errors_raise_their_classes(db, arun, coll):
    with pytest.raises(exceptions.InvalidArgument):
        db.sql("select * from /x where").get()
    with pytest.raises(exceptions.InvalidArgument):
        db.collection(coll).where(filter=FieldFilter("a", "in", [])).get()

    async def run(c):
        with pytest.raises(exceptions.InvalidArgument):
            await c.sql("select * from /x where").get()
        return True

    assert arun(run)


def test_query_in_a_transaction_is_verified_at_commit(db, seeded):
    """A document a transaction's query read and someone changed before commit aborts it."""
    transaction = db.transaction(max_attempts=1)
    q = db.collection(seeded).where(filter=FieldFilter("city", "==", "Oakland"))

    @docstore.transactional
    def read_then_write(t):
        (snap,) = q.get(transaction=t)
        db.collection(seeded).document("r3").update({"n": 6})  # someone else, outside t
        t.set(db.collection(seeded).document("new"), {"from": snap.id})

    with pytest.raises(exceptions.Aborted):
        read_then_write(transaction)
    assert not db.collection(seeded).document("new").get().exists


def test_sql_sync_and_async(db, arun, seeded):
    text = f'select name from /{seeded} where city = "SF" order by __name__ limit 2'
    got = db.sql(text).get()
    assert [(s.id, s.to_dict()) for s in got] == [
        ("r1", {"name": "Zola"}),
        ("r2", {"name": "Nopa"}),
    ]
    assert ids(db.sql(text).stream()) == ["r1", "r2"]

    async def run(c):
        streamed = [s.id async for s in c.sql(text).stream()]
        return streamed, ids(await c.sql(text).get())

    assert arun(run) == (["r1", "r2"], ["r1", "r2"])
