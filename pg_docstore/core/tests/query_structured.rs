//! The structured JSON form: Firestore's StructuredQuery shape with typed-JSON values, its
//! agreement with the text dialect, round trips and errors.

// Test helpers outside #[test] functions unwrap and panic to report failures.
#![allow(clippy::unwrap_used, clippy::panic)]

use docstore_core::query::{
    parse_query, parse_structured, parse_structured_str, to_structured, Cursor, Limit, Query,
    QueryError, Selection,
};
use docstore_core::{ErrorKind, Value};
use serde_json::json;

fn text(text: &str) -> Query {
    parse_query(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn structured(json: serde_json::Value) -> Query {
    parse_structured(&json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

fn structured_err(json: serde_json::Value) -> QueryError {
    match parse_structured(&json) {
        Ok(query) => panic!("{json} parsed as {query:?}"),
        Err(e) => e,
    }
}

fn field(path: &str) -> serde_json::Value {
    json!({ "fieldPath": path })
}

#[test]
fn paper_query_in_both_forms() {
    let from_json = structured(json!({
        "from": [{"collectionId": "restaurants"}],
        "where": {"compositeFilter": {"op": "AND", "filters": [
            {"fieldFilter": {"field": field("city"), "op": "EQUAL", "value": "SF"}},
            {"fieldFilter": {"field": field("type"), "op": "EQUAL", "value": "BBQ"}},
        ]}},
        "orderBy": [{"field": field("avgRating"), "direction": "DESCENDING"}],
        "limit": 10,
    }));
    assert_eq!(
        from_json,
        text(
            r#"select * from /restaurants where city="SF" and type="BBQ" order by avgRating desc limit 10"#
        )
    );
}

#[test]
fn every_operator_by_name() {
    for (name, op) in [
        ("LESS_THAN", "<"),
        ("LESS_THAN_OR_EQUAL", "<="),
        ("GREATER_THAN", ">"),
        ("GREATER_THAN_OR_EQUAL", ">="),
        ("EQUAL", "="),
        ("NOT_EQUAL", "!="),
        ("ARRAY_CONTAINS", "array_contains"),
    ] {
        let query = structured(json!({
            "from": [{"collectionId": "c"}],
            "where": {"fieldFilter": {"field": field("a.b"), "op": name, "value": 5}},
        }));
        assert_eq!(
            query,
            text(&format!("select * from c where a.b {op} 5")),
            "{name}"
        );
    }
    for (name, op) in [
        ("IN", "in"),
        ("NOT_IN", "not in"),
        ("ARRAY_CONTAINS_ANY", "array_contains_any"),
    ] {
        let query = structured(json!({
            "from": [{"collectionId": "c"}],
            "where": {"fieldFilter": {"field": field("a"), "op": name, "value": [1, "x"]}},
        }));
        assert_eq!(
            query,
            text(&format!("select * from c where a {op} (1, 'x')")),
            "{name}"
        );
    }
    for (name, op) in [
        ("IS_NULL", "is null"),
        ("IS_NAN", "is nan"),
        ("IS_NOT_NULL", "is not null"),
        ("IS_NOT_NAN", "is not nan"),
    ] {
        let query = structured(json!({
            "from": [{"collectionId": "c"}],
            "where": {"unaryFilter": {"op": name, "field": field("a")}},
        }));
        assert_eq!(
            query,
            text(&format!("select * from c where a {op}")),
            "{name}"
        );
    }
    let or = structured(json!({
        "from": [{"collectionId": "c"}],
        "where": {"compositeFilter": {"op": "OR", "filters": [
            {"fieldFilter": {"field": field("a"), "op": "EQUAL", "value": null}},
            {"compositeFilter": {"op": "AND", "filters": [
                {"fieldFilter": {"field": field("b"), "op": "EQUAL", "value": {"$double": "NaN"}}},
            ]}},
        ]}},
    }));
    assert_eq!(or, text("select * from c where a is null or b is nan"));
}

#[test]
fn members_and_defaults() {
    let query = structured(json!({
        "parent": "/restaurants/one",
        "from": [{"collectionId": "ratings", "allDescendants": true}],
        "select": {"fields": [field("rating"), field("`a.b`.c"), field("__name__")]},
        "orderBy": [{"field": field("rating")}, {"field": field("time"), "direction": "DESCENDING"}],
        "startAt": {"values": [3], "before": true},
        "endAt": {"values": [5, {"$timestamp": "2022-09-01T00:00:00Z"}]},
        "offset": "2",
        "limit": {"value": 7},
    }));
    assert_eq!(
        query,
        text("select rating, `a.b`.c from /restaurants/one/group(ratings) order by rating, time desc start at (3) end at (5, timestamp '2022-09-01T00:00:00Z') limit 7 offset 2")
    );
    // A start cursor without `before` starts after its position (Firestore's default).
    let after = structured(json!({
        "from": [{"collectionId": "c"}],
        "orderBy": [{"field": field("a")}],
        "startAt": {"values": [1]},
        "endAt": {"values": [9], "before": true},
        "limitToLast": 3,
    }));
    assert_eq!(
        after.start,
        Some(Cursor {
            values: vec![Value::Integer(1)],
            inclusive: false
        })
    );
    assert!(!after.end.unwrap().inclusive);
    assert_eq!(after.limit, Some(Limit::Last(3)));
    for parent in [json!(""), json!("/"), json!(null)] {
        assert_eq!(
            structured(json!({"parent": parent, "from": [{"collectionId": "c"}]})),
            text("select * from c")
        );
    }
    assert_eq!(
        structured(json!({"from": [{"collectionId": "c"}], "select": {}})).selection,
        Selection::Fields(vec![])
    );
}

#[test]
fn aggregations_and_wrappers() {
    let expected =
        text("select count(*) as n, count_up_to(10), sum(x) as s, avg(y) from c where x > 0");
    let inner = json!({
        "from": [{"collectionId": "c"}],
        "where": {"fieldFilter": {"field": field("x"), "op": "GREATER_THAN", "value": 0}},
    });
    let aggregations = json!([
        {"alias": "n", "count": {}},
        {"count": {"upTo": "10"}},
        {"alias": "s", "sum": {"field": field("x")}},
        {"avg": {"field": field("y")}},
    ]);
    let mut flat = inner.clone();
    flat["aggregations"] = aggregations.clone();
    assert_eq!(structured(flat), expected);
    assert_eq!(
        structured(json!({"structuredQuery": inner.clone(), "aggregations": aggregations.clone()})),
        expected
    );
    assert_eq!(
        structured(
            json!({"structuredAggregationQuery": {"structuredQuery": inner, "aggregations": aggregations}})
        ),
        expected
    );
}

const ROUND_TRIPS: [&str; 12] = [
    "select * from /restaurants",
    "select * from /restaurants/one/ratings where rating = 3 order by time desc",
    "select a, b.c, `x y` from c where a in (1, 2.5, 'x', [true]) and b != null",
    "select * from group(ratings) where rating >= 3 or rating is nan order by rating desc limit last 5",
    "select * from /a/b/group(c) where x array_contains {\"$bytes\": \"AAE=\"} start after ('a/b/c/d') limit 2 offset 1",
    "select count(*), sum(price) as total from /shops where open = true",
    "select __name__ from c where __name__ > 'k' order by __name__ desc end before ('a')",
    "select * from c where a not in ({\"$ref\": \"x/y\"}, {\"$geo\": [1.5, -2.0]}) order by a start at ({\"$vector\": [1.0]})",
    "select * from c where m = {\"k\": {\"$map\": {\"$double\": 1}}, \"t\": [{\"$timestamp\": \"2000-01-01T00:00:00Z\"}]}",
    "select * from c where d = {\"$double\": \"-0.0\"} or d = 1e300 or d = -5e-324 or d = 9223372036854775808",
    "select * from c where s = \"line\\nbreak \\\"quoted\\\" \\u0001 é 😀\" and `odd``name`.`x.y` = 'it''s'",
    "select avg(a.b) as `weird alias` from c order by a.b limit 100",
];

#[test]
fn structured_round_trips() {
    for source in ROUND_TRIPS {
        let query = text(source);
        let json = to_structured(&query);
        assert_eq!(
            parse_structured(&json).as_ref(),
            Ok(&query),
            "{source}\n{json}"
        );
        let again = parse_structured_str(&serde_json::to_string_pretty(&json).unwrap());
        assert_eq!(again.as_ref(), Ok(&query), "{source}");
        assert_eq!(
            Query::from_structured(&query.to_structured()),
            Ok(query.clone())
        );
        // And the text form prints back.
        assert_eq!(parse_query(&query.to_string()), Ok(query), "{source}");
    }
}

#[test]
fn structured_output_shape() {
    let query = text("select a from /r/one/ratings where x < 2 order by x desc start at (1) end before (3) limit last 4 offset 1");
    assert_eq!(
        to_structured(&query),
        json!({
            "parent": "r/one",
            "from": [{"collectionId": "ratings", "allDescendants": false}],
            "select": {"fields": [{"fieldPath": "a"}]},
            "where": {"fieldFilter": {"field": {"fieldPath": "x"}, "op": "LESS_THAN", "value": 2}},
            "orderBy": [{"field": {"fieldPath": "x"}, "direction": "DESCENDING"}],
            "startAt": {"values": [1], "before": true},
            "endAt": {"values": [3], "before": true},
            "offset": 1,
            "limitToLast": 4,
        })
    );
}

#[test]
fn structured_errors() {
    let base = || json!({"from": [{"collectionId": "c"}]});
    let with = |key: &str, value: serde_json::Value| {
        let mut json = base();
        json[key] = value;
        json
    };
    let shape = |e: QueryError| match e {
        QueryError::InvalidStructure { at, .. } => at,
        other => panic!("expected a structure error, got {other:?}"),
    };
    assert_eq!(shape(structured_err(json!([]))), "<root>");
    assert_eq!(shape(structured_err(with("limt", json!(1)))), "limt");
    assert_eq!(shape(structured_err(json!({}))), "from");
    assert_eq!(
        shape(structured_err(
            json!({"from": [{"collectionId": "a"}, {"collectionId": "b"}]})
        )),
        "from"
    );
    assert_eq!(
        shape(structured_err(json!({"from": [{"collectionId": 5}]}))),
        "from[0].collectionId"
    );
    assert_eq!(
        shape(structured_err(with(
            "where",
            json!({"fieldFilter": {"field": field("a"), "op": "LIKE", "value": 1}})
        ))),
        "where.fieldFilter.op"
    );
    assert_eq!(
        shape(structured_err(with(
            "where",
            json!({"fieldFilter": {"field": field("a"), "op": "EQUAL"}})
        ))),
        "where.fieldFilter.value"
    );
    assert_eq!(
        shape(structured_err(with(
            "where",
            json!({"fieldFilter": {"field": field("a"), "op": "EQUAL", "value": 1}, "unaryFilter": {}})
        ))),
        "where"
    );
    assert_eq!(
        shape(structured_err(with(
            "orderBy",
            json!([{"field": field("a"), "direction": "UP"}])
        ))),
        "orderBy[0].direction"
    );
    assert_eq!(
        shape(structured_err(with("startAt", json!({"values": 1})))),
        "startAt.values"
    );
    let mut both = with("limit", json!(1));
    both["limitToLast"] = json!(1);
    assert_eq!(shape(structured_err(both)), "limitToLast");
    assert_eq!(
        shape(structured_err(with(
            "aggregations",
            json!([{"count": {}, "sum": {}}])
        ))),
        "aggregations[0]"
    );
    let mut mixed = with("select", json!({"fields": []}));
    mixed["aggregations"] = json!([{"count": {}}]);
    assert_eq!(shape(structured_err(mixed)), "aggregations");

    match structured_err(with(
        "where",
        json!({"fieldFilter": {"field": field("a"), "op": "EQUAL", "value": {"$timestamp": "yesterday"}}}),
    )) {
        e @ QueryError::InvalidValue { .. } => {
            assert_eq!(e.kind(), ErrorKind::InvalidTypedJson);
            assert!(e.to_string().contains("where.fieldFilter.value"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        structured_err(with("orderBy", json!([{"field": field("a..b")}]))),
        QueryError::InvalidFieldPath { .. }
    ));
    assert!(matches!(
        structured_err(with("parent", json!("restaurants"))),
        QueryError::InvalidCollection { .. }
    ));
    assert!(matches!(
        structured_err(json!({"from": [{"collectionId": "a/b"}]})),
        QueryError::InvalidCollection { .. }
    ));
    assert!(matches!(
        structured_err(with("limit", json!(-1))),
        QueryError::InvalidLimit { .. }
    ));
    assert!(matches!(
        structured_err(with("offset", json!(1.5))),
        QueryError::InvalidStructure { .. }
    ));
    assert!(matches!(
        structured_err(with(
            "where",
            json!({"compositeFilter": {"op": "AND", "filters": []}})
        )),
        QueryError::EmptyComposite { op: "and" }
    ));
    assert!(matches!(
        structured_err(with(
            "where",
            json!({"fieldFilter": {"field": field("a"), "op": "IN", "value": (0..31).collect::<Vec<_>>()}})
        )),
        QueryError::TooManyValues { .. }
    ));
    match parse_structured_str("{\"from\": [\n  {\"collectionId\": }]}") {
        Err(QueryError::Syntax { line, column, .. }) => assert_eq!((line, column), (2, 20)),
        other => panic!("{other:?}"),
    }
    let name = structured(with(
        "where",
        json!({"fieldFilter": {"field": field("__name__"), "op": "EQUAL", "value": "doc1"}}),
    ));
    assert_eq!(
        name.filter.unwrap().to_string(),
        "__name__ = {\"$ref\":\"c/doc1\"}"
    );
}
