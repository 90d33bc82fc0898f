"""Aggregations through the SDK against the real stack, sync and async: count, sum, avg,
aggregate(...), aliases and the server's field_N names, python-firestore's result shapes
([[AggregationResult]]), aggregates over filtered/limited queries, and text-dialect
aggregations through client.sql; compared with the same query sent to the HTTP API."""

from __future__ import annotations

import math

import pytest

import docstore
from docstore import AggregationResult, FieldFilter, exceptions

PRICES = {"a": 10, "b": 20, "c": 2.5, "d": "not a number"}


@pytest.fixture
def seeded(db, coll):
    batch = db.batch()
    for doc_id, price in PRICES.items():
        batch.set(db.collection(coll).document(doc_id), {"price": price, "k": doc_id})
    batch.set(db.collection(coll).document("e"), {"k": "e"})
    batch.commit()
    return coll


def both(db, arun, build):
    """build(client).get() with the sync and the async client, as (alias, value) lists."""
    sync = build(db).get()

    async def run(c):
        return await build(c).get()

    def flat(result):
        assert isinstance(result, list) and len(result) == 1
        assert all(isinstance(r, AggregationResult) for r in result[0])
        return [(r.alias, r.value) for r in result[0]]

    assert flat(sync) == flat(arun(run))
    return flat(sync)


def test_count_sum_avg_with_aliases(stack, client, db, arun, seeded):
    def build(c):
        return c.collection(seeded).count(alias="n").sum("price", alias="s").avg("price", alias="m")

    assert both(db, arun, build) == [("n", 5), ("s", 32.5), ("m", 32.5 / 3)]
    r = client.post(
        "/v1/databases/(default):runQuery",
        json={"structuredQuery": build(db)._to_json()},
        headers=stack.bearer(stack.admin_key),
    )
    assert r.json() == [{"aggregation": {"n": 5, "s": 32.5, "m": 32.5 / 3}}]


def test_unaliased_results_take_the_server_names_in_order(db, arun, seeded):
    def build(c):
        return c.collection(seeded).sum("price").count(alias="n").count()

    assert both(db, arun, build) == [("field_1", 32.5), ("n", 5), ("field_2", 5)]


def test_aggregate_of_aggregation_objects(db, arun, seeded):
    def build(c):
        return c.collection(seeded).aggregate(
            docstore.CountAggregation(alias="n"), docstore.AvgAggregation("price", alias="m")
        )

    assert both(db, arun, build) == [("n", 5), ("m", 32.5 / 3)]


def test_aggregates_cover_the_filtered_and_limited_results(db, arun, seeded):
    def build(c):
        q = c.collection(seeded).where(filter=FieldFilter("price", ">", 2.5)).order_by("price")
        return q.limit(1).sum("price", alias="s").count(alias="n")

    assert both(db, arun, build) == [("s", 10), ("n", 1)]


def test_integer_sum_stays_an_int_and_empty_avg_is_none(db, arun, coll):
    db.collection(coll).document("x").set({"v": 2**53 + 1})
    db.collection(coll).document("y").set({"v": 1})

    def build(c):
        return c.collection(coll).sum("v", alias="s").avg("missing", alias="a")

    got = both(db, arun, build)
    assert got == [("s", 2**53 + 2), ("a", None)]
    assert isinstance(got[0][1], int)


def test_stream_yields_one_list_of_results(db, arun, seeded):
    (results,) = list(db.collection(seeded).count(alias="n").stream())
    assert [(r.alias, r.value) for r in results] == [("n", 5)]

    async def run(c):
        return [[r.value for r in rs] async for rs in c.collection(seeded).count().stream()]

    assert arun(run) == [[5]]


def test_sql_aggregation(db, arun, seeded):
    text = f"select count(*), avg(price) as m from /{seeded} where price >= 10"
    (results,) = db.sql(text).get()
    assert all(isinstance(r, AggregationResult) for r in results)
    assert {r.alias: r.value for r in results} == {"field_1": 2, "m": 15.0}

    async def run(c):
        return [{r.alias: r.value for r in rs} for rs in await c.sql(text).get()]

    assert arun(run) == [{"field_1": 2, "m": 15.0}]


def test_nan_average(db, coll):
    db.collection(coll).document("x").set({"v": float("nan")})
    ((result,),) = db.collection(coll).avg("v").get()
    assert math.isnan(result.value)


def test_bad_aggregations(db, coll):
    agg = db.collection(coll).count().count().count().count().count()
    with pytest.raises(ValueError):
        agg.count()
    with pytest.raises(ValueError):
        db.collection(coll).count(alias="")
    with pytest.raises(ValueError):
        db.collection(coll).sum("a..b")
    with pytest.raises(exceptions.InvalidArgument):
        db.collection(coll).count(alias="n").sum("x", alias="n").get()
