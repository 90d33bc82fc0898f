//! Query semantics: every operator (with the cases Firestore's own SDK integration tests check
//! against the real backend), normalisation, cursors, limits, projection and aggregation.

// Test helpers outside #[test] functions unwrap and panic to report failures.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::cmp::Ordering;

use docstore_core::query::{
    aggregate, compare_results, evaluate, matches, parse_query, Direction, Order, Query,
};
use docstore_core::value::Map;
use docstore_core::{typed_json, FieldPath, ResourcePath, Value};

fn q(text: &str) -> Query {
    parse_query(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn doc(path: &str, json: &str) -> (ResourcePath, Map) {
    (
        ResourcePath::parse_document(path).unwrap(),
        typed_json::map_from_json(&serde_json::from_str(json).unwrap()).unwrap(),
    )
}

fn docs(collection: &str, items: &[(&str, &str)]) -> Vec<(ResourcePath, Map)> {
    items
        .iter()
        .map(|(id, json)| doc(&format!("{collection}/{id}"), json))
        .collect()
}

/// IDs of the results, in order.
fn ids(text: &str, docs: &[(ResourcePath, Map)]) -> Vec<String> {
    let query = q(text);
    let results = evaluate(&query, docs);
    // The oracle agrees with the matcher and the comparator.
    let matching = docs.iter().filter(|(p, d)| matches(&query, p, d)).count();
    assert!(results.len() <= matching, "{text}");
    for pair in results.windows(2) {
        assert_eq!(
            compare_results(&query, (&pair[0].0, &pair[0].1), (&pair[1].0, &pair[1].1)),
            Ordering::Less,
            "{text}"
        );
    }
    results.iter().map(|(p, _)| p.last().to_owned()).collect()
}

fn expect(text: &str, docs: &[(ResourcePath, Map)], expected: &[&str]) {
    assert_eq!(ids(text, docs), expected, "{text}");
}

/// Firestore SDK integration test data for `!=` (checked against the backend there).
fn not_equal_docs() -> Vec<(ResourcePath, Map)> {
    docs(
        "c",
        &[
            ("a", r#"{"zip": {"$double": "NaN"}}"#),
            ("b", r#"{"zip": 91102}"#),
            ("c", r#"{"zip": 98101}"#),
            ("d", r#"{"zip": "98101"}"#),
            ("e", r#"{"zip": [98101]}"#),
            ("f", r#"{"zip": [98101, 98102]}"#),
            ("g", r#"{"zip": ["98101", {"zip": 98101}]}"#),
            ("h", r#"{"zip": {"code": 500}}"#),
            ("i", r#"{"code": 500}"#),
            ("j", r#"{"zip": null}"#),
        ],
    )
}

#[test]
fn not_equal_like_firestore() {
    let d = not_equal_docs();
    expect(
        "select * from c where zip != 98101",
        &d,
        &["a", "b", "d", "e", "f", "g", "h"],
    );
    expect(
        r#"select * from c where zip != {"code": 500}"#,
        &d,
        &["a", "b", "c", "d", "e", "f", "g"],
    );
    expect(
        "select * from c where zip != null",
        &d,
        &["a", "b", "c", "d", "e", "f", "g", "h"],
    );
    expect(
        r#"select * from c where zip != {"$double": "NaN"}"#,
        &d,
        &["b", "c", "d", "e", "f", "g", "h"],
    );
    expect(
        "select * from c where zip is not nan",
        &d,
        &["b", "c", "d", "e", "f", "g", "h"],
    );
    expect("select * from c where zip is null", &d, &["j"]);
    expect("select * from c where zip = null", &d, &["j"]);
    expect("select * from c where zip is nan", &d, &["a"]);
    expect(
        r#"select * from c where zip = {"$double": "NaN"}"#,
        &d,
        &["a"],
    );
}

#[test]
fn in_like_firestore() {
    let d = docs(
        "c",
        &[
            ("a", r#"{"zip": 98101}"#),
            ("b", r#"{"zip": 91102}"#),
            ("c", r#"{"zip": 98103}"#),
            ("d", r#"{"zip": [98101]}"#),
            ("e", r#"{"zip": ["98101", {"zip": 98101}]}"#),
            ("f", r#"{"zip": {"code": 500}}"#),
            ("g", r#"{"zip": [98101, 98102]}"#),
            ("h", r#"{"zip": null}"#),
            ("i", r#"{"zip": {"$double": "NaN"}}"#),
        ],
    );
    expect(
        "select * from c where zip in (98101, 98103, [98101, 98102])",
        &d,
        &["a", "c", "g"],
    );
    expect(
        r#"select * from c where zip in ({"code": 500})"#,
        &d,
        &["f"],
    );
    expect("select * from c where zip in (null)", &d, &[]);
    expect("select * from c where zip in (98101, null)", &d, &["a"]);
    expect(
        r#"select * from c where zip in ({"$double": "NaN"})"#,
        &d,
        &[],
    );
    expect(
        r#"select * from c where zip in (98101, {"$double": "NaN"})"#,
        &d,
        &["a"],
    );
    // Integers and doubles compare by value.
    expect("select * from c where zip in (98101.0)", &d, &["a"]);
}

#[test]
fn not_in_like_firestore() {
    let d = docs(
        "c",
        &[
            ("a", r#"{"zip": {"$double": "NaN"}}"#),
            ("b", r#"{"zip": 91102}"#),
            ("c", r#"{"zip": 98101}"#),
            ("d", r#"{"zip": 98103}"#),
            ("e", r#"{"zip": [98101]}"#),
            ("f", r#"{"zip": [98101, 98102]}"#),
            ("g", r#"{"zip": ["98101", {"zip": 98101}]}"#),
            ("h", r#"{"zip": {"code": 500}}"#),
            ("i", r#"{"code": 500}"#),
            ("j", r#"{"zip": null}"#),
        ],
    );
    expect(
        "select * from c where zip not in (98101, 98103, [98101, 98102])",
        &d,
        &["a", "b", "e", "g", "h"],
    );
    expect(
        r#"select * from c where zip not in ({"code": 500})"#,
        &d,
        &["a", "b", "c", "d", "e", "f", "g"],
    );
    expect("select * from c where zip not in (null)", &d, &[]);
    expect(
        r#"select * from c where zip not in ({"$double": "NaN"})"#,
        &d,
        &["b", "c", "d", "e", "f", "g", "h"],
    );
    expect(
        r#"select * from c where zip not in ({"$double": "NaN"}, 98101)"#,
        &d,
        &["b", "d", "e", "f", "g", "h"],
    );
}

#[test]
fn array_contains_like_firestore() {
    let d = docs(
        "c",
        &[
            ("a", r#"{"array": [42]}"#),
            ("b", r#"{"array": ["a", 42, "c"]}"#),
            ("c", r#"{"array": [41.999, "42", {"a": [42]}]}"#),
            ("d", r#"{"array": [42], "array2": ["bingo"]}"#),
            ("e", r#"{"array": [43]}"#),
            ("f", r#"{"array": [{"a": 42}]}"#),
            ("g", r#"{"array": 42}"#),
            ("h", r#"{"array": [null]}"#),
            ("i", r#"{"array": [{"$double": "NaN"}]}"#),
        ],
    );
    expect(
        "select * from c where array array_contains 42",
        &d,
        &["a", "b", "d"],
    );
    expect(
        "select * from c where array array_contains 42.0",
        &d,
        &["a", "b", "d"],
    );
    expect(
        r#"select * from c where array array_contains {"a": 42}"#,
        &d,
        &["f"],
    );
    expect(
        "select * from c where array array_contains_any (42, 43)",
        &d,
        &["a", "b", "d", "e"],
    );
    expect(
        r#"select * from c where array array_contains_any ({"a": 42})"#,
        &d,
        &["f"],
    );
    expect(
        "select * from c where array array_contains_any (null)",
        &d,
        &[],
    );
    expect(
        "select * from c where array array_contains_any (43, null)",
        &d,
        &["e"],
    );
    expect(
        r#"select * from c where array array_contains_any ({"$double": "NaN"})"#,
        &d,
        &[],
    );
    expect(
        r#"select * from c where array array_contains_any (43, {"$double": "NaN"})"#,
        &d,
        &["e"],
    );
}

#[test]
fn ranges_stay_in_their_type_class() {
    let d = docs(
        "c",
        &[
            ("int", r#"{"a": 4}"#),
            ("double", r#"{"a": 4.5}"#),
            ("big", r#"{"a": 9007199254740993}"#),
            ("nan", r#"{"a": {"$double": "NaN"}}"#),
            ("ninf", r#"{"a": {"$double": "-Infinity"}}"#),
            ("str", r#"{"a": "abc"}"#),
            ("str2", r#"{"a": "xyz"}"#),
            ("null", r#"{"a": null}"#),
            ("bool", r#"{"a": true}"#),
            ("arr", r#"{"a": [1]}"#),
            ("ts", r#"{"a": {"$timestamp": "2022-01-01T00:00:00Z"}}"#),
            ("none", r#"{"b": 1}"#),
        ],
    );
    expect(
        "select * from c where a < 5",
        &d,
        &["ninf", "int", "double"],
    );
    expect("select * from c where a <= 4", &d, &["ninf", "int"]);
    expect("select * from c where a > 4", &d, &["double", "big"]);
    expect(
        "select * from c where a >= 9007199254740992.0",
        &d,
        &["big"],
    );
    expect("select * from c where a > 9007199254740992.0", &d, &["big"]);
    expect("select * from c where a >= 'm'", &d, &["str2"]);
    expect("select * from c where a < 'zzz'", &d, &["str", "str2"]);
    expect("select * from c where a > false", &d, &["bool"]);
    expect("select * from c where a >= []", &d, &["arr"]);
    expect(
        "select * from c where a > timestamp '2021-01-01T00:00:00Z'",
        &d,
        &["ts"],
    );
    expect("select * from c where a = 4.0", &d, &["int"]);
    expect("select * from c where a = 4", &d, &["int"]);
    expect("select * from c where a = 9007199254740992.0", &d, &[]);
    expect(
        "select * from c where a is not null and a < 100",
        &d,
        &["ninf", "int", "double"],
    );
}

#[test]
fn nested_fields_and_missing_fields() {
    let d = docs(
        "c",
        &[
            ("x", r#"{"a": {"b": {"c": 1}}}"#),
            ("y", r#"{"a": {"b": 2}}"#),
            ("z", r#"{"a": 3}"#),
            ("w", r#"{"a.b": {"c": 1}}"#),
        ],
    );
    expect("select * from c where a.b.c = 1", &d, &["x"]);
    expect("select * from c where `a.b`.c = 1", &d, &["w"]);
    expect("select * from c where a.b != 0", &d, &["y", "x"]);
    expect("select * from c order by a.b", &d, &["y", "x"]);
}

#[test]
fn or_queries_like_firestore() {
    let d = docs(
        "c",
        &[
            ("doc1", r#"{"a": 1, "b": 0}"#),
            ("doc2", r#"{"a": 2, "b": 1}"#),
            ("doc3", r#"{"a": 3, "b": 2}"#),
            ("doc4", r#"{"a": 1, "b": 3}"#),
            ("doc5", r#"{"a": 1, "b": 1}"#),
        ],
    );
    expect(
        "select * from c where a = 1 or b = 1",
        &d,
        &["doc1", "doc2", "doc4", "doc5"],
    );
    expect(
        "select * from c where (a = 1 and b = 0) or (a = 3 and b = 2)",
        &d,
        &["doc1", "doc3"],
    );
    expect(
        "select * from c where a = 1 and (b = 0 or b = 3)",
        &d,
        &["doc1", "doc4"],
    );
    expect(
        "select * from c where a = 2 or b = 1",
        &d,
        &["doc2", "doc5"],
    );
    // The inequality orders by `a`: documents are sorted by it.
    expect(
        "select * from c where a > 2 or b = 1",
        &d,
        &["doc5", "doc2", "doc3"],
    );
    expect(
        "select * from c where a = 1 or b > 0 limit 2",
        &d,
        &["doc1", "doc2"],
    );
    expect(
        "select * from c where a = 1 or b > 0 order by a limit last 2",
        &d,
        &["doc2", "doc3"],
    );
    expect(
        "select * from c where a = 1 or b > 1 order by a",
        &d,
        &["doc1", "doc5", "doc4", "doc3"],
    );
    expect(
        "select * from c where a = 1 or b in (2, 3)",
        &d,
        &["doc1", "doc3", "doc4", "doc5"],
    );
    // An inequality inside an OR still drops documents without its field.
    let sparse = docs("c", &[("p", r#"{"b": 1}"#), ("q", r#"{"a": 5, "b": 1}"#)]);
    expect("select * from c where a > 1 or b = 1", &sparse, &["q"]);
}

#[test]
fn collection_groups_like_firestore() {
    let cg = "bcg";
    let paths = [
        format!("abc/123/{cg}/cg-doc1"),
        format!("abc/123/{cg}/cg-doc2"),
        format!("{cg}/cg-doc3"),
        format!("{cg}/cg-doc4"),
        format!("def/456/{cg}/cg-doc5"),
        format!("{cg}/virtual-doc/nested-coll/not-cg-doc"),
        format!("x{cg}/not-cg-doc"),
        format!("{cg}x/not-cg-doc"),
        format!("abc/123/{cg}x/not-cg-doc"),
        format!("abc/123/x{cg}/not-cg-doc"),
        format!("abc/{cg}"),
    ];
    let d: Vec<_> = paths.iter().map(|p| doc(p, r#"{"x": 1}"#)).collect();
    expect(
        &format!("select * from group({cg})"),
        &d,
        &["cg-doc1", "cg-doc2", "cg-doc3", "cg-doc4", "cg-doc5"],
    );
    expect(
        &format!("select * from /abc/123/group({cg})"),
        &d,
        &["cg-doc1", "cg-doc2"],
    );
    expect(&format!("select * from /{cg}"), &d, &["cg-doc3", "cg-doc4"]);

    let paths = [
        format!("a/a/{cg}/cg-doc1"),
        format!("a/b/a/b/{cg}/cg-doc2"),
        format!("a/b/{cg}/cg-doc3"),
        format!("a/b/c/d/{cg}/cg-doc4"),
        format!("a/c/{cg}/cg-doc5"),
        format!("{cg}/cg-doc6"),
        "a/b/nope/nope".to_owned(),
    ];
    let d: Vec<_> = paths.iter().map(|p| doc(p, r#"{"x": 1}"#)).collect();
    expect(
        &format!("select * from group({cg}) order by __name__ start at ('a/b') end at ('a/b0')"),
        &d,
        &["cg-doc2", "cg-doc3", "cg-doc4"],
    );
    expect(
        &format!(
            "select * from group({cg}) order by __name__ start after ('a/b') end before ('a/b/{cg}/cg-doc3')"
        ),
        &d,
        &["cg-doc2"],
    );
    expect(
        &format!("select * from group({cg}) where __name__ >= 'a/b' and __name__ <= 'a/b0'"),
        &d,
        &["cg-doc2", "cg-doc3", "cg-doc4"],
    );
    expect(
        &format!(
            "select * from group({cg}) where __name__ > 'a/b' and __name__ < 'a/b/{cg}/cg-doc3'"
        ),
        &d,
        &["cg-doc2"],
    );
    expect(
        &format!("select * from /a/b/group({cg})"),
        &d,
        &["cg-doc2", "cg-doc3", "cg-doc4"],
    );
}

#[test]
fn name_filters_in_a_collection() {
    let d = docs(
        "c",
        &[("aa", "{}"), ("ab", "{}"), ("ba", "{}"), ("bb", "{}")],
    );
    expect(
        "select * from c where __name__ != 'aa'",
        &d,
        &["ab", "ba", "bb"],
    );
    expect(
        "select * from c where __name__ in ('aa', 'ab')",
        &d,
        &["aa", "ab"],
    );
    expect(
        "select * from c where __name__ not in ('aa', 'ab')",
        &d,
        &["ba", "bb"],
    );
    expect("select * from c where __name__ >= 'b'", &d, &["ba", "bb"]);
    expect(
        "select * from c order by __name__ desc",
        &d,
        &["bb", "ba", "ab", "aa"],
    );
}

fn field(text: &str) -> FieldPath {
    FieldPath::parse(text).unwrap()
}

fn order(items: &[(&str, Direction)]) -> Vec<Order> {
    items
        .iter()
        .map(|(f, d)| Order::new(field(f), *d))
        .collect()
}

#[test]
fn normalized_order_like_firestore() {
    use Direction::{Ascending as A, Descending as D};
    let cases: [(&str, Vec<Order>); 18] = [
        ("select * from c", order(&[("__name__", A)])),
        ("select * from c where a = 1", order(&[("__name__", A)])),
        (
            "select * from c order by a",
            order(&[("a", A), ("__name__", A)]),
        ),
        (
            "select * from c order by a desc",
            order(&[("a", D), ("__name__", D)]),
        ),
        (
            "select * from c where a > 1",
            order(&[("a", A), ("__name__", A)]),
        ),
        (
            "select * from c where __name__ > 'x' and a > 1",
            order(&[("a", A), ("__name__", A)]),
        ),
        (
            "select * from c where b > 1 and a < 5 and a > 0",
            order(&[("a", A), ("b", A), ("__name__", A)]),
        ),
        (
            "select * from c where a > 1 order by b desc",
            order(&[("b", D), ("a", D), ("__name__", D)]),
        ),
        (
            "select * from c where a > 1 order by a desc, b",
            order(&[("a", D), ("b", A), ("__name__", A)]),
        ),
        (
            "select * from c where x = 1 or b is not nan and a > 2",
            order(&[("a", A), ("b", A), ("__name__", A)]),
        ),
        (
            "select * from c where c not in (1) and a = 2 order by x desc",
            order(&[("x", D), ("c", D), ("__name__", D)]),
        ),
        (
            "select * from c order by __name__ desc, a",
            order(&[("__name__", D), ("a", A)]),
        ),
        // A limited (or offset) sum/avg runs in the order of its field, as Firestore's.
        (
            "select sum(x) from c limit 12",
            order(&[("x", A), ("__name__", A)]),
        ),
        (
            "select count(*), avg(x), sum(b), sum(x) from c where a > 1 offset 2",
            order(&[("a", A), ("x", A), ("b", A), ("__name__", A)]),
        ),
        (
            "select avg(x) from c order by x desc limit 3",
            order(&[("x", D), ("__name__", D)]),
        ),
        ("select sum(x) from c", order(&[("__name__", A)])),
        ("select count(*) from c limit 2", order(&[("__name__", A)])),
        (
            "select sum(x) from c order by __name__ limit 2",
            order(&[("__name__", A)]),
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(q(text).normalized_order(), expected, "{text}");
    }
    assert_eq!(
        q("select * from c where a.b > 1 and a_c < 1 and `a b` != 0 and a > 0 or z < 1")
            .normalized_order()
            .iter()
            .map(|o| o.field.to_string())
            .collect::<Vec<_>>(),
        ["a", "a.b", "`a b`", "a_c", "z", "__name__"]
    );
}

fn ranked() -> Vec<(ResourcePath, Map)> {
    docs(
        "c",
        &[
            ("d1", r#"{"a": 1, "b": "x"}"#),
            ("d2", r#"{"a": 2, "b": "y"}"#),
            ("d3", r#"{"a": 2, "b": "z"}"#),
            ("d4", r#"{"a": 3}"#),
            ("d5", r#"{"a": "text"}"#),
            ("d6", r#"{"b": "no a"}"#),
            ("d7", r#"{"a": 2, "b": "y"}"#),
        ],
    )
}

#[test]
fn order_by_drops_missing_fields_and_sorts() {
    let d = ranked();
    expect(
        "select * from c order by a",
        &d,
        &["d1", "d2", "d3", "d7", "d4", "d5"],
    );
    expect(
        "select * from c order by a desc",
        &d,
        &["d5", "d4", "d7", "d3", "d2", "d1"],
    );
    expect(
        "select * from c order by a, b desc",
        &d,
        &["d1", "d3", "d7", "d2"],
    );
    expect(
        "select * from c",
        &d,
        &["d1", "d2", "d3", "d4", "d5", "d6", "d7"],
    );
}

#[test]
fn cursors_on_the_full_order() {
    let d = ranked();
    expect(
        "select * from c order by a start at (2)",
        &d,
        &["d2", "d3", "d7", "d4", "d5"],
    );
    expect(
        "select * from c order by a start after (2)",
        &d,
        &["d4", "d5"],
    );
    expect(
        "select * from c order by a end at (2)",
        &d,
        &["d1", "d2", "d3", "d7"],
    );
    expect("select * from c order by a end before (2)", &d, &["d1"]);
    // The __name__ position of the cursor breaks ties (what startAfter(snapshot) sends).
    expect(
        "select * from c order by a start after (2, 'd2') end before (2, 'd7')",
        &d,
        &["d3"],
    );
    expect(
        "select * from c order by a start at (2, 'd3')",
        &d,
        &["d3", "d7", "d4", "d5"],
    );
    // Descending: a cursor is a position in the order, not a bound on values.
    expect(
        "select * from c order by a desc start after (3) end at (2, 'd3')",
        &d,
        &["d7", "d3"],
    );
    // Cursor values of another type sit in the cross-type order.
    expect("select * from c order by a start at ('')", &d, &["d5"]);
    expect("select * from c order by a end before (true)", &d, &[]);
    // Implicit orders count: `a > 0` orders by a, then __name__.
    expect(
        "select * from c where a > 0 start after (2, 'd3')",
        &d,
        &["d7", "d4"],
    );
}

#[test]
fn offset_limit_and_limit_last() {
    let d = ranked();
    expect("select * from c order by a limit 2", &d, &["d1", "d2"]);
    expect(
        "select * from c order by a limit 2 offset 3",
        &d,
        &["d7", "d4"],
    );
    expect("select * from c order by a offset 5", &d, &["d5"]);
    expect("select * from c order by a offset 50", &d, &[]);
    expect("select * from c order by a limit 0", &d, &[]);
    expect("select * from c order by a limit last 2", &d, &["d4", "d5"]);
    expect(
        "select * from c order by a limit last 2 offset 1",
        &d,
        &["d7", "d4"],
    );
    expect(
        "select * from c order by a desc limit last 3",
        &d,
        &["d3", "d2", "d1"],
    );
    expect(
        "select * from c order by a start at (2) end at (2) limit last 2",
        &d,
        &["d3", "d7"],
    );
}

#[test]
fn projection() {
    let d = docs(
        "c",
        &[
            ("p", r#"{"a": {"b": 1, "c": 2}, "d": 3, "e": [1]}"#),
            ("q", r#"{"d": 4}"#),
        ],
    );
    let results = evaluate(&q("select a.b, e, zz from c"), &d);
    assert_eq!(results.len(), 2);
    assert_eq!(
        typed_json::to_string(&Value::Map(results[0].1.clone())),
        r#"{"a":{"b":1},"e":[1]}"#
    );
    assert!(results[1].1.is_empty());
    let names = evaluate(&q("select __name__ from c"), &d);
    assert_eq!(names[0].0.to_string(), "c/p");
    assert!(names[0].1.is_empty());
    let both = evaluate(&q("select a, a.b from c where d = 3"), &d);
    assert_eq!(
        typed_json::to_string(&Value::Map(both[0].1.clone())),
        r#"{"a":{"b":1,"c":2}}"#
    );
}

#[test]
fn aggregations() {
    let d = docs(
        "c",
        &[
            ("a", r#"{"n": 1, "x": 1.5}"#),
            ("b", r#"{"n": 2, "x": "text"}"#),
            ("c", r#"{"n": 3}"#),
            ("d", r#"{"n": 9223372036854775807, "x": 2.5}"#),
            ("e", r#"{"m": true}"#),
        ],
    );
    let result = |text: &str| typed_json::to_string(&Value::Map(aggregate(&q(text), &d)));
    assert_eq!(
        result("select count(*) as all, count_up_to(2) as two from c"),
        r#"{"all":5,"two":2}"#
    );
    assert_eq!(
        result("select sum(n) as s, avg(n) as a from c where n < 4"),
        r#"{"a":2.0,"s":6}"#
    );
    // Overflowing int64 gives a double.
    assert_eq!(
        result("select sum(n) from c where n > 2"),
        r#"{"field_1":9.223372036854776e18}"#
    );
    // Non-numbers are ignored; a double makes the sum a double.
    assert_eq!(
        result("select sum(x) as s, avg(x) as a, count(*) as c from c"),
        r#"{"a":2.0,"c":5,"s":4.0}"#
    );
    // Nothing to average: null; nothing to sum: 0.
    assert_eq!(
        result("select avg(zz) as a, sum(zz) as s from c"),
        r#"{"a":null,"s":0}"#
    );
    // Limit and offset apply before aggregating.
    assert_eq!(
        result("select count(*) as c, sum(n) as s from c order by n limit 2 offset 1"),
        r#"{"c":2,"s":5}"#
    );
    // A limited sum/avg takes the documents in its field's order (Firestore's), only those
    // holding the field: x is 1.5 (a), 2.5 (d), then the string (b); c and e lack it.
    assert_eq!(
        result("select sum(x) as s, count(*) as c from c limit 2"),
        r#"{"c":2,"s":4.0}"#
    );
    assert_eq!(
        result("select avg(x) as a, count(*) as c from c offset 1"),
        r#"{"a":2.5,"c":2}"#
    );
    assert!(aggregate(&q("select * from c"), &d).is_empty());
}

#[test]
fn matches_checks_the_collection() {
    let query = q("select * from /restaurants/one/ratings");
    let fields = Map::new();
    for (path, expected) in [
        ("restaurants/one/ratings/2", true),
        ("restaurants/two/ratings/2", false),
        ("ratings/2", false),
        ("restaurants/one/ratings/2/x/y", false),
    ] {
        assert_eq!(
            matches(&query, &ResourcePath::parse(path).unwrap(), &fields),
            expected,
            "{path}"
        );
    }
    // A collection path is never a result.
    assert!(!matches(
        &query,
        &ResourcePath::parse("restaurants/one/ratings").unwrap(),
        &fields
    ));
}
