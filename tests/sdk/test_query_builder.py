"""The query builder's structuredQuery JSON (docs/query.md, "The structured JSON form"), call
by call, without a server: the end-to-end runs are in test_queries.py."""

from __future__ import annotations

import datetime

import pytest

import docstore
from docstore import And, FieldFilter, FieldPath, Or, Query
from docstore.base_document import DocumentSnapshot


@pytest.fixture
def client():
    with docstore.Client("http://127.0.0.1:9", token="t") as c:
        yield c


def ff(field, op, value):
    return {"fieldFilter": {"field": {"fieldPath": field}, "op": op, "value": value}}


def snapshot(client, path, data):
    return DocumentSnapshot(client.document(path), data, True, None, None, None)


def test_collection_query_is_the_whole_collection(client):
    assert client.collection("restaurants")._to_json() == {
        "from": [{"collectionId": "restaurants"}]
    }
    assert client.collection("restaurants/one/ratings")._to_json() == {
        "parent": "restaurants/one",
        "from": [{"collectionId": "ratings"}],
    }


def test_collection_group(client):
    q = client.collection_group("ratings")
    assert isinstance(q, docstore.CollectionGroup)
    assert q._to_json() == {"from": [{"collectionId": "ratings", "allDescendants": True}]}
    assert q.limit(1)._to_json()["from"] == [{"collectionId": "ratings", "allDescendants": True}]


@pytest.mark.parametrize(
    ("op", "wire"),
    [
        ("<", "LESS_THAN"),
        ("<=", "LESS_THAN_OR_EQUAL"),
        ("==", "EQUAL"),
        (">=", "GREATER_THAN_OR_EQUAL"),
        (">", "GREATER_THAN"),
        ("!=", "NOT_EQUAL"),
        ("array_contains", "ARRAY_CONTAINS"),
    ],
)
def test_field_filter_operators(client, op, wire):
    q = client.collection("c").where(filter=FieldFilter("a.b", op, 3))
    assert q._to_json()["where"] == ff("a.b", wire, 3)


@pytest.mark.parametrize(
    ("op", "wire"),
    [("in", "IN"), ("not-in", "NOT_IN"), ("array_contains_any", "ARRAY_CONTAINS_ANY")],
)
def test_list_operators_take_typed_arrays(client, op, wire):
    when = datetime.datetime(2022, 9, 1, tzinfo=datetime.timezone.utc)
    q = client.collection("c").where(filter=FieldFilter("t", op, (when, 2**53 + 1)))
    value = q._to_json()["where"]["fieldFilter"]["value"]
    assert q._to_json()["where"]["fieldFilter"]["op"] == wire
    assert value == [docstore._values.encode_value(when), docstore._values.encode_value(2**53 + 1)]
    with pytest.raises(TypeError):
        FieldFilter("t", op, 3)


@pytest.mark.parametrize(
    ("op", "value", "unary"),
    [
        ("==", None, "IS_NULL"),
        ("!=", None, "IS_NOT_NULL"),
        ("==", float("nan"), "IS_NAN"),
        ("!=", float("nan"), "IS_NOT_NAN"),
    ],
)
def test_null_and_nan_are_unary_filters(client, op, value, unary):
    q = client.collection("c").where(filter=FieldFilter("x", op, value))
    assert q._to_json()["where"] == {"unaryFilter": {"op": unary, "field": {"fieldPath": "x"}}}


def test_bad_filters_raise_value_and_type_errors():
    with pytest.raises(ValueError):
        FieldFilter("x", "<", None)
    with pytest.raises(ValueError):
        FieldFilter("x", ">", float("nan"))
    with pytest.raises(ValueError):
        FieldFilter("x", "=", 1)
    with pytest.raises(ValueError):
        FieldFilter("a..b", "==", 1)
    with pytest.raises(ValueError):
        Or([])
    with pytest.raises(TypeError):
        And([("a", "==", 1)])


def test_positional_where_and_several_filters_are_anded(client):
    q = client.collection("c").where("a", "==", 1).where(filter=FieldFilter("b", ">", 2))
    assert q._to_json()["where"] == {
        "compositeFilter": {
            "op": "AND",
            "filters": [ff("a", "EQUAL", 1), ff("b", "GREATER_THAN", 2)],
        }
    }
    with pytest.raises(ValueError):
        client.collection("c").where("a", "==", 1, filter=FieldFilter("b", "==", 1))
    with pytest.raises(ValueError):
        client.collection("c").where()


def test_or_of_and(client):
    f = Or(
        [FieldFilter("a", "==", 1), And([FieldFilter("b", "<", 2), FieldFilter("c", "==", None)])]
    )
    assert client.collection("c").where(filter=f)._to_json()["where"] == {
        "compositeFilter": {
            "op": "OR",
            "filters": [
                ff("a", "EQUAL", 1),
                {
                    "compositeFilter": {
                        "op": "AND",
                        "filters": [
                            ff("b", "LESS_THAN", 2),
                            {"unaryFilter": {"op": "IS_NULL", "field": {"fieldPath": "c"}}},
                        ],
                    }
                },
            ],
        }
    }


def test_field_paths_use_the_server_text_form(client):
    q = client.collection("c").where(filter=FieldFilter(FieldPath("zip code", "a"), "==", 1))
    assert q._to_json()["where"] == ff("`zip code`.a", "EQUAL", 1)
    q = client.collection("c").order_by("`a.b`").select(["x.y", FieldPath("$k")])
    assert q._to_json()["orderBy"] == [{"field": {"fieldPath": "`a.b`"}, "direction": "ASCENDING"}]
    assert q._to_json()["select"] == {"fields": [{"fieldPath": "x.y"}, {"fieldPath": "`$k`"}]}


def test_order_by_direction(client):
    q = client.collection("c").order_by("a").order_by("b", direction=Query.DESCENDING)
    assert q._to_json()["orderBy"] == [
        {"field": {"fieldPath": "a"}, "direction": "ASCENDING"},
        {"field": {"fieldPath": "b"}, "direction": "DESCENDING"},
    ]
    with pytest.raises(ValueError):
        client.collection("c").order_by("a", direction="down")


def test_limit_limit_to_last_offset(client):
    c = client.collection("c").order_by("a")
    assert c.limit(5)._to_json()["limit"] == 5
    last = c.limit(5).limit_to_last(3)._to_json()
    assert last["limitToLast"] == 3 and "limit" not in last
    assert c.limit_to_last(3).limit(2)._to_json()["limit"] == 2
    assert c.offset(7)._to_json()["offset"] == 7
    for bad in (-1, 2**31):
        with pytest.raises(ValueError):
            c.limit(bad)
    with pytest.raises(TypeError):
        c.offset(1.5)
    with pytest.raises(ValueError):
        client.collection("c").limit_to_last(2)._run_query_body()


def test_select_empty_is_names_only(client):
    assert client.collection("c").select([])._to_json()["select"] == {
        "fields": [{"fieldPath": "__name__"}]
    }


def test_cursors_of_values(client):
    q = client.collection("c").order_by("a").order_by("__name__")
    assert q.start_at([1, "x"])._to_json()["startAt"] == {
        "values": [1, {"$ref": "c/x"}],
        "before": True,
    }
    assert q.start_after([1])._to_json()["startAt"] == {"values": [1], "before": False}
    assert client.collection("c").order_by("a").end_at({"a": 2})._to_json()["endAt"] == {
        "values": [2],
        "before": False,
    }
    assert q.end_before([3])._to_json()["endAt"] == {"values": [3], "before": True}
    with pytest.raises(ValueError):
        client.collection("c").start_at([1])._to_json()
    with pytest.raises(ValueError):
        q.start_at([1, "x", 3])._to_json()
    with pytest.raises(ValueError):
        q.end_at({"a": 1})._to_json()


def test_snapshot_cursor_adds_name_order_as_firestore_does(client):
    snap = snapshot(client, "c/d1", {"a": 4, "b": {"c": "z"}})
    q = client.collection("c").order_by("a", direction=Query.DESCENDING).start_after(snap)
    body = q._to_json()
    assert body["orderBy"] == [
        {"field": {"fieldPath": "a"}, "direction": "DESCENDING"},
        {"field": {"fieldPath": "__name__"}, "direction": "DESCENDING"},
    ]
    assert body["startAt"] == {"values": [4, {"$ref": "c/d1"}], "before": False}
    # Without an order: inequality fields first (ascending), then __name__.
    q = client.collection("c").where(filter=FieldFilter("b.c", ">", "a")).end_at(snap)
    assert q._to_json()["orderBy"] == [
        {"field": {"fieldPath": "b.c"}, "direction": "ASCENDING"},
        {"field": {"fieldPath": "__name__"}, "direction": "ASCENDING"},
    ]
    assert q._to_json()["endAt"] == {"values": ["z", {"$ref": "c/d1"}], "before": False}
    assert client.collection("c").start_at(snap)._to_json()["startAt"] == {
        "values": [{"$ref": "c/d1"}],
        "before": True,
    }
    with pytest.raises(ValueError):
        client.collection("c").order_by("missing").start_at(snap)._to_json()
    with pytest.raises(ValueError):
        client.collection("other").start_at(snap)
    with pytest.raises(TypeError):
        client.collection("c").start_at(3)


def test_builder_is_immutable_and_returns_plain_queries(client):
    coll = client.collection("c")
    q = coll.where(filter=FieldFilter("a", "==", 1))
    assert type(q) is Query
    assert coll._to_json() == {"from": [{"collectionId": "c"}]}
    q2 = q.limit(1)
    assert "limit" not in q._to_json() and q2._to_json()["limit"] == 1
    assert q == coll.where(filter=FieldFilter("a", "==", 1))


def test_aggregations(client):
    q = client.collection("c").where(filter=FieldFilter("a", ">", 1))
    agg = q.count(alias="n").sum("price").avg(FieldPath("r", "s"), alias="avg")
    assert agg._to_json()["aggregations"] == [
        {"count": {}, "alias": "n"},
        {"sum": {"field": {"fieldPath": "price"}}},
        {"avg": {"field": {"fieldPath": "r.s"}}, "alias": "avg"},
    ]
    assert agg._to_json()["where"] == ff("a", "GREATER_THAN", 1)
    with pytest.raises(ValueError):
        agg.count().count().count()
    composed = q.aggregate(docstore.CountAggregation(), docstore.SumAggregation("x", alias="s"))
    assert composed._to_json()["aggregations"] == [
        {"count": {}},
        {"sum": {"field": {"fieldPath": "x"}}, "alias": "s"},
    ]
    results = composed._results_of({"aggregation": {"s": 3, "field_1": 2}})
    assert [(r.alias, r.value) for r in results] == [("field_1", 2), ("s", 3)]


def test_sql_query_body(client):
    q = client.sql("select * from /c limit 1")
    assert isinstance(q, docstore.SqlQuery) and q._body() == {"sql": "select * from /c limit 1"}
    with pytest.raises(TypeError):
        client.sql(3)


def test_repr_of_an_invalid_query_does_not_raise(client):
    q = client.collection("c").start_at([1])  # no order: invalid when sent
    assert "invalid" in repr(q)
    with pytest.raises(ValueError):
        q._to_json()


def test_listen_targets_and_live_aggregation_results(client):
    q = client.collection("c").where(filter=FieldFilter("a", "==", 1))
    assert q._listen_target() == {"structuredQuery": q._to_json()}
    agg = q.count(alias="n").sum("x")
    assert agg._listen_target() == {"structuredQuery": agg._to_json()}
    when = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    ((n, s),) = agg._listen_results({"field_1": 4, "n": 2}, when)
    assert (n.alias, n.value, n.read_time, s.alias, s.value) == ("n", 2, when, "field_1", 4)
    assert client.sql("select * from /c")._listen_target() == {"sql": "select * from /c"}
    with pytest.raises(ValueError):
        client.collection("c").limit_to_last(1)._listen_target()
