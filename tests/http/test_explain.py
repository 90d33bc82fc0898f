"""`POST /v1/databases/{db}:explain` (docs/http.md): the plan of a query in either form, and
with `run` what running it read; admin key only."""

import pytest

EXPLAIN = "/v1/databases/(default):explain"


def eq(field, value):
    return {"fieldFilter": {"field": {"fieldPath": field}, "op": "EQUAL", "value": value}}


@pytest.fixture
def stored(stack, client, coll):
    """Three documents of a collection of the test's own, two of them in SF and BBQ."""
    for name, data in {
        "a": {"city": "SF", "type": "BBQ"},
        "b": {"city": "SF", "type": "BBQ"},
        "c": {"city": "SF", "type": "Thai"},
    }.items():
        r = client.put(stack.doc(f"{coll}/{name}"), json=data, headers=stack.admin)
        assert r.status_code == 200, r.text
    return coll


def explain(stack, client, body, status=200):
    r = client.post(EXPLAIN, headers=stack.admin, json=body)
    assert r.status_code == status, r.text
    return r.json()


def test_both_forms_explain_the_same_plan(stack, client, stored):
    sql = {"sql": f'select * from /{stored} where city = "SF" and type = "BBQ"'}
    structured = {
        "structuredQuery": {
            "from": [{"collectionId": stored}],
            "where": {
                "compositeFilter": {"op": "AND", "filters": [eq("city", "SF"), eq("type", "BBQ")]}
            },
        }
    }
    plan = explain(stack, client, sql)
    assert explain(stack, client, structured) == plan
    assert list(plan["branches"][0]) == ["zigzag"]
    assert "analyze" not in plan
    # with run: the same plan, and what running it read
    run = explain(stack, client, {**sql, "run": True})
    assert explain(stack, client, {**structured, "run": True}) == run
    assert {k: v for k, v in run.items() if k != "analyze"} == plan
    assert run["analyze"]["results"] == 2
    assert set(run["analyze"]) == {"indexQueries", "indexRowsRead", "documentsFetched", "results"}
    assert explain(stack, client, {**sql, "run": False}) == plan


def test_explaining_writes_nothing(stack, client, stored):
    before = stack.sql("select count(*) from docstore.entities")
    explain(stack, client, {"sql": f"select * from /{stored}", "run": True})
    assert stack.sql("select count(*) from docstore.entities") == before


def test_admin_only(stack, client, stored):
    body = {"sql": f"select * from /{stored}", "run": True}
    for headers in ({}, stack.bearer(stack.token({"sub": "u"}))):
        r = client.post(EXPLAIN, headers=headers, json=body)
        assert r.status_code == 403, r.text
        assert r.json()["code"] == "PERMISSION_DENIED"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"run": True},
        {"sql": "select * from /x", "structuredQuery": {"from": [{"collectionId": "x"}]}},
        {"sql": 7},
        {"structuredQuery": "select * from /x"},
        {"sql": "select * from /x", "run": "yes"},
        {"sql": "select * from /x", "pageSize": 1},
        [],
    ],
)
def test_bad_bodies(stack, client, body):
    r = client.post(EXPLAIN, headers=stack.admin, json=body)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    "body",
    [
        {"sql": "select * from /x where"},
        {"structuredQuery": {"from": [{"collectionId": "x"}], "bogus": 1}},
        {"structuredQuery": {"from": []}},
    ],
)
def test_bad_queries(stack, client, body):
    r = client.post(EXPLAIN, headers=stack.admin, json={**body, "run": True})
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "INVALID_ARGUMENT"


def test_a_query_no_index_serves(stack, client, stored):
    r = client.post(
        EXPLAIN,
        headers=stack.admin,
        json={"sql": f'select * from /{stored} where city = "SF" order by type desc'},
    )
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "FAILED_PRECONDITION"
    assert "create_index" in r.json()["message"]
