//! Kindless queries (an empty collection id with `all_descendants`: every document under the
//! parent, any collection, in name order; python-firestore's `recursive()`), and the
//! `__name__` cursor positions `{collection}/__id-9223372036854775808__` they are bounded by.
//! The planner's listing (through the in-memory executor) must return what the evaluator does.

// Test helpers outside #[test] functions unwrap and panic to report failures.
#![allow(clippy::unwrap_used, clippy::panic)]

use docstore_core::path::ResourcePath;
use docstore_core::plan::simulate::{simulate, MemoryStore};
use docstore_core::plan::{plan, Branch, Catalog};
use docstore_core::query::{evaluate, parse_structured_str, Query, QueryError};
use docstore_core::value::Map;

fn docs(paths: &[&str]) -> Vec<(ResourcePath, Map)> {
    paths
        .iter()
        .map(|p| (ResourcePath::parse(p).unwrap(), Map::new()))
        .collect()
}

fn query(json: &str) -> Result<Query, QueryError> {
    parse_structured_str(json)
}

/// The names the query returns, from the plan and from the evaluator (which must agree).
fn names(q: &Query, d: &[(ResourcePath, Map)]) -> Vec<String> {
    let p = plan(q, &Catalog::default()).unwrap();
    assert!(p
        .branches
        .iter()
        .all(|b| matches!(b, Branch::Collection(_))));
    let store = MemoryStore::new(d, &[], &[]).unwrap();
    let planned: Vec<String> = simulate(&p, q, &store)
        .unwrap()
        .iter()
        .map(|(p, _)| p.to_string())
        .collect();
    let evaluated: Vec<String> = evaluate(q, d).iter().map(|(p, _)| p.to_string()).collect();
    assert_eq!(planned, evaluated);
    planned
}

fn all() -> Vec<(ResourcePath, Map)> {
    docs(&[
        "a/1",
        "col/ABC",
        "col/ABC/sub/x",
        "col/_z",
        "col/zz/deeper/y/deepest/z",
        "col\u{1}/q",
        "col0/1",
        "colx/2",
        "p/d/col/3",
    ])
}

#[test]
fn every_document_under_the_root_in_name_order() {
    let q = query(r#"{"from": [{"collectionId": "", "allDescendants": true}]}"#).unwrap();
    assert_eq!(
        names(&q, &all()),
        [
            "a/1",
            "col/ABC",
            "col/ABC/sub/x",
            "col/_z",
            "col/zz/deeper/y/deepest/z",
            "col\u{1}/q",
            "col0/1",
            "colx/2",
            "p/d/col/3"
        ]
    );
}

#[test]
fn every_document_under_a_parent_document() {
    let q =
        query(r#"{"parent": "col/ABC", "from": [{"collectionId": "", "allDescendants": true}]}"#)
            .unwrap();
    assert_eq!(names(&q, &all()), ["col/ABC/sub/x"]);
}

#[test]
fn recursive_bounds_take_one_collection_and_its_descendants() {
    // python-firestore's recursive() of `col`: start at `col/<min id>`, end at
    // `col\0/<min id>` (sent over gRPC as `col\u0001/<min id>`, docs/grpc.md).
    let q = query(
        r#"{"from": [{"collectionId": "", "allDescendants": true}],
            "orderBy": [{"field": {"fieldPath": "__name__"}}],
            "startAt": {"values": ["col/__id-9223372036854775808__"], "before": true},
            "endAt": {"values": ["col\u0001/__id-9223372036854775808__"], "before": false}}"#,
    )
    .unwrap();
    assert_eq!(
        names(&q, &all()),
        [
            "col/ABC",
            "col/ABC/sub/x",
            "col/_z",
            "col/zz/deeper/y/deepest/z"
        ]
    );
    // The same start in a plain collection query: before every document of the collection.
    let q = query(
        r#"{"from": [{"collectionId": "col"}],
            "startAt": {"values": ["col/__id-9223372036854775808__"], "before": false}}"#,
    )
    .unwrap();
    assert_eq!(names(&q, &all()), ["col/ABC", "col/_z"]);
}

#[test]
fn kindless_queries_take_name_ranges_only() {
    let refused = [
        // No all_descendants: an empty collection id names nothing.
        r#"{"from": [{"collectionId": ""}]}"#,
        r#"{"from": [{"collectionId": "", "allDescendants": true}],
            "where": {"fieldFilter": {"field": {"fieldPath": "a"}, "op": "EQUAL", "value": 1}}}"#,
        r#"{"from": [{"collectionId": "", "allDescendants": true}],
            "orderBy": [{"field": {"fieldPath": "a"}}]}"#,
        r#"{"from": [{"collectionId": "", "allDescendants": true}],
            "where": {"fieldFilter": {"field": {"fieldPath": "__name__"}, "op": "EQUAL", "value": "a/1"}}}"#,
        r#"{"parent": "col", "from": [{"collectionId": "", "allDescendants": true}]}"#,
    ];
    for json in refused {
        assert!(
            matches!(query(json), Err(QueryError::InvalidCollection { .. })),
            "{json}: {:?}",
            query(json)
        );
    }
    let q = query(
        r#"{"from": [{"collectionId": "", "allDescendants": true}],
            "where": {"fieldFilter": {"field": {"fieldPath": "__name__"}, "op": "GREATER_THAN_OR_EQUAL", "value": "col0/1"}}}"#,
    )
    .unwrap();
    assert_eq!(names(&q, &all()), ["col0/1", "colx/2", "p/d/col/3"]);
}
