"""`client.explain(query, run=...)` sync and async (docs/sdk-python.md): the plan of a Query,
a collection, a collection group, an aggregation or `client.sql(...)`, the same as the HTTP
API's `:explain` answers for the same query; admin key only; bad arguments raise TypeError."""

from __future__ import annotations

import pytest

import docstore
from docstore import FieldFilter, exceptions


@pytest.fixture
def stored(db, coll):
    for name, data in {
        "a": {"city": "SF", "type": "BBQ"},
        "b": {"city": "SF", "type": "BBQ"},
        "c": {"city": "LA", "type": "BBQ"},
    }.items():
        db.collection(coll).document(name).set(data)
        db.collection(coll).document(name).collection(coll).document("x").set(data)
    return coll


def sf_bbq(client, coll):
    return (
        client.collection(coll)
        .where(filter=FieldFilter("city", "==", "SF"))
        .where(filter=FieldFilter("type", "==", "BBQ"))
    )


def test_plans_of_every_kind_of_query(db, stored, stack, client):
    plan = db.explain(sf_bbq(db, stored))
    assert list(plan["branches"][0]) == ["zigzag"] and "analyze" not in plan
    # the text dialect's form of the same query has the same plan
    text = db.sql(f'select * from /{stored} where city = "SF" and type = "BBQ"')
    assert db.explain(text) == plan
    # and it is what the HTTP API answers for the query's structuredQuery
    body = {**sf_bbq(db, stored)._run_query_body(), "run": False}
    assert (
        client.post("/v1/databases/(default):explain", headers=stack.admin, json=body).json()
        == plan
    )
    run = db.explain(sf_bbq(db, stored), run=True)
    assert {k: v for k, v in run.items() if k != "analyze"} == plan
    assert run["analyze"]["results"] == 2
    assert db.explain(text, run=True)["analyze"]["results"] == 2
    assert "list" in db.explain(db.collection(stored))["branches"][0]
    # the group: the three documents and the three of their subcollections of the same id
    assert db.explain(db.collection_group(stored), run=True)["analyze"]["results"] == 6
    assert db.explain(db.collection(stored).count(), run=True)["analyze"]["results"] == 1


def test_async_explain(arun, stored):
    async def main(client: docstore.AsyncClient):
        plan = await client.explain(sf_bbq(client, stored))
        run = await client.explain(sf_bbq(client, stored), run=True)
        text = await client.explain(
            client.sql(f'select * from /{stored} where city = "LA"'), run=True
        )
        return plan, run, text

    plan, run, text = arun(main)
    assert list(plan["branches"][0]) == ["zigzag"] and "analyze" not in plan
    assert run["analyze"]["results"] == 2
    assert text["analyze"]["results"] == 1


def test_admin_only(stack, stored):
    with docstore.Client(stack.url, token=stack.token({"sub": "u"})) as user:
        with pytest.raises(exceptions.PermissionDenied):
            user.explain(user.collection(stored))


def test_a_query_no_index_serves(db, stored):
    query = db.collection(stored).where(filter=FieldFilter("city", "==", "SF")).order_by("type")
    with pytest.raises(exceptions.FailedPrecondition, match="create_index"):
        db.explain(query)
    with pytest.raises(exceptions.InvalidArgument):
        db.explain(db.sql(f"select * from /{stored} where"))


def test_bad_arguments(db, stored):
    for bad in (f"select * from /{stored}", None, db.document(f"{stored}/a")):
        with pytest.raises(TypeError):
            db.explain(bad)
    with pytest.raises(TypeError):
        db.explain(db.collection(stored), run="yes")
    with pytest.raises(ValueError):  # as stream() and get(): limit_to_last needs an order
        db.explain(db.collection(stored).limit_to_last(1))
