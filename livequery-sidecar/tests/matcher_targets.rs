//! Unit tests of the matcher: index lookups (who is even tested for a write), limitToLast,
//! cursors, aggregations, requeries, horizons, single documents, and the exact indexes of
//! Firestore's document changes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use docstore_core::error::ErrorKind;
use docstore_core::path::ResourcePath;
use docstore_core::typed_json::map_from_json;
use docstore_core::value::{Map, Timestamp, Value};
use docstore_sidecar::matcher::{
    DocChange, Document, Horizon, Matcher, MatcherConfig, MatcherError, TargetDelta, TargetId,
    TargetResult, TargetSpec, Write,
};
use serde_json::json;

fn doc(path: &str, fields: serde_json::Value, micros: i64) -> Document {
    Document::new(
        ResourcePath::parse_document(path).unwrap(),
        map_from_json(&fields).unwrap(),
        Timestamp::from_micros(micros).unwrap(),
        Timestamp::from_micros(micros).unwrap(),
    )
}

fn set(path: &str, fields: serde_json::Value, micros: i64) -> Write {
    Write::Set(doc(path, fields, micros))
}

fn delete(path: &str) -> Write {
    Write::Delete(ResourcePath::parse_document(path).unwrap())
}

fn spec(text: &str) -> TargetSpec {
    TargetSpec::parse_text(text).unwrap()
}

fn names(result: &TargetResult) -> Vec<String> {
    match result {
        TargetResult::Documents(docs) => docs.iter().map(|d| d.path.to_string()).collect(),
        TargetResult::Aggregate(row) => panic!("aggregate {row:?}"),
    }
}

/// A shape of a change that is easy to write down: (kind, name, old index, new index).
fn shape(delta: &TargetDelta) -> Vec<(&'static str, String, i64, i64)> {
    let TargetDelta::Changes(changes) = delta else {
        panic!("not changes: {delta:?}");
    };
    changes
        .iter()
        .map(|c| match c {
            DocChange::Added { doc, new_index } => {
                ("added", doc.path.to_string(), -1, *new_index as i64)
            }
            DocChange::Modified {
                doc,
                old_index,
                new_index,
            } => (
                "modified",
                doc.path.to_string(),
                *old_index as i64,
                *new_index as i64,
            ),
            DocChange::Removed { path, old_index } => {
                ("removed", path.to_string(), *old_index as i64, -1)
            }
        })
        .collect()
}

fn only(deltas: Vec<(TargetId, TargetDelta)>, id: u64) -> TargetDelta {
    assert_eq!(deltas.len(), 1, "{deltas:?}");
    let (got, delta) = deltas.into_iter().next().unwrap();
    assert_eq!(got, TargetId(id));
    delta
}

#[test]
fn matcher_equality_targets_of_other_cities_are_not_tested() {
    let mut m = Matcher::new(MatcherConfig::default());
    for (i, city) in ["SF", "LA", "NY"].iter().enumerate() {
        let text = format!(
            "select * from restaurants where city = '{city}' order by rating desc limit 10"
        );
        m.add_target(TargetId(i as u64), spec(&text), vec![], None)
            .unwrap();
    }
    let la = set("restaurants/one", json!({"city": "LA", "rating": 4}), 1);
    assert_eq!(m.candidates(&la), vec![TargetId(1)]);
    let before = m.stats().targets_tested;
    let delta = only(m.apply(1, std::slice::from_ref(&la)), 1);
    assert_eq!(
        shape(&delta),
        vec![("added", "restaurants/one".into(), -1, 0)]
    );
    assert_eq!(
        m.stats().targets_tested,
        before + 1,
        "only LA's target was tested"
    );
    // Moving to SF: LA's target finds it through the document it holds, SF's by value.
    let sf = set("restaurants/one", json!({"city": "SF", "rating": 4}), 2);
    assert_eq!(m.candidates(&sf), vec![TargetId(0), TargetId(1)]);
    let deltas = m.apply(2, &[sf]);
    assert_eq!(deltas.len(), 2);
    assert_eq!(
        shape(&deltas[0].1),
        vec![("added", "restaurants/one".into(), -1, 0)]
    );
    assert_eq!(
        shape(&deltas[1].1),
        vec![("removed", "restaurants/one".into(), 0, -1)]
    );
    // A delete concerns only the target holding the document.
    assert_eq!(m.candidates(&delete("restaurants/one")), vec![TargetId(0)]);
    assert_eq!(
        m.candidates(&delete("restaurants/two")),
        Vec::<TargetId>::new()
    );
    // An OR of equalities on one field is keyed by each value.
    m.add_target(
        TargetId(7),
        spec("select * from restaurants where city = 'SF' or city in ('LA', 'SD')"),
        vec![],
        None,
    )
    .unwrap();
    let sd = set("restaurants/two", json!({"city": "SD"}), 3);
    assert_eq!(m.candidates(&sd), vec![TargetId(7)]);
    let ny = set("restaurants/two", json!({"city": "NY"}), 3);
    assert_eq!(m.candidates(&ny), vec![TargetId(2)]);
    // Another collection is another scope.
    let elsewhere = set("cafes/one", json!({"city": "SF"}), 3);
    assert!(m.candidates(&elsewhere).is_empty());
}

#[test]
fn matcher_equality_keys_follow_value_equality() {
    let mut m = Matcher::new(MatcherConfig::default());
    m.add_target(
        TargetId(1),
        spec("select * from c where n = 1"),
        vec![],
        None,
    )
    .unwrap();
    m.add_target(
        TargetId(2),
        spec("select * from c where n = 9007199254740993"),
        vec![],
        None,
    )
    .unwrap();
    m.add_target(
        TargetId(3),
        spec("select * from c where n in (2, 'x')"),
        vec![],
        None,
    )
    .unwrap();
    m.add_target(
        TargetId(4),
        spec("select * from c where tags array_contains 'red'"),
        vec![],
        None,
    )
    .unwrap();
    m.add_target(
        TargetId(5),
        spec("select * from c where n is null"),
        vec![],
        None,
    )
    .unwrap();
    let one_double = set("c/a", json!({"n": 1.0}), 1);
    assert_eq!(m.candidates(&one_double), vec![TargetId(1)]);
    // 2^53 as a double is not 2^53 + 1.
    let two53 = set("c/a", json!({"n": 9007199254740992.0}), 1);
    assert!(m.candidates(&two53).is_empty());
    let two53_plus = set("c/b", json!({"n": 9007199254740993_i64}), 1);
    assert_eq!(m.candidates(&two53_plus), vec![TargetId(2)]);
    assert_eq!(
        m.candidates(&set("c/a", json!({"n": "x"}), 1)),
        vec![TargetId(3)]
    );
    let tags = set("c/a", json!({"tags": ["blue", "red"], "n": null}), 1);
    assert_eq!(m.candidates(&tags), vec![TargetId(4), TargetId(5)]);
    let deltas = m.apply(1, &[two53_plus, tags]);
    let ids: Vec<u64> = deltas.iter().map(|(id, _)| id.0).collect();
    assert_eq!(ids, vec![2, 4, 5]);
}

#[test]
fn matcher_residual_targets_are_scoped_to_their_collection_or_group() {
    let mut m = Matcher::new(MatcherConfig::default());
    m.add_target(
        TargetId(1),
        spec("select * from c where a > 1"),
        vec![],
        None,
    )
    .unwrap();
    m.add_target(
        TargetId(2),
        spec("select * from group(c) where a > 1"),
        vec![],
        None,
    )
    .unwrap();
    assert_eq!(
        m.candidates(&set("c/x", json!({"a": 2}), 1)),
        vec![TargetId(1), TargetId(2)]
    );
    assert_eq!(
        m.candidates(&set("p/q/c/x", json!({"a": 2}), 1)),
        vec![TargetId(2)]
    );
    assert!(m.candidates(&set("d/x", json!({"a": 2}), 1)).is_empty());
    let deltas = m.apply(1, &[set("p/q/c/x", json!({"a": 2}), 1)]);
    assert_eq!(
        only(deltas, 2),
        TargetDelta::Changes(vec![DocChange::Added {
            doc: doc("p/q/c/x", json!({"a": 2}), 1),
            new_index: 0
        }])
    );
}

#[test]
fn matcher_kindless_targets_are_found_for_every_write_under_their_parent() {
    let mut m = Matcher::new(MatcherConfig::default());
    let kindless = json!({"parent": "p/q", "from": [{"collectionId": "", "allDescendants": true}]});
    m.add_target(
        TargetId(1),
        TargetSpec::parse_structured(&kindless).unwrap(),
        vec![],
        None,
    )
    .unwrap();
    // Every write is looked up in the database-wide scope; the target confirms the parent.
    for path in ["p/q/a/x", "p/q/a/x/b/y", "r/s", "p/q"] {
        assert_eq!(
            m.candidates(&set(path, json!({"n": 1}), 1)),
            vec![TargetId(1)],
            "{path}"
        );
    }
    let deltas = m.apply(
        1,
        &[
            set("p/q/a/x/b/y", json!({"n": 1}), 1),
            set("r/s", json!({"n": 1}), 1),
            set("p/q", json!({"n": 1}), 1),
            set("p/q/z/w", json!({"n": 1}), 1),
        ],
    );
    assert_eq!(
        shape(&only(deltas, 1)),
        vec![
            ("added", "p/q/a/x/b/y".to_owned(), -1, 0),
            ("added", "p/q/z/w".to_owned(), -1, 1),
        ]
    );
    assert_eq!(
        names(&m.result(TargetId(1)).unwrap()),
        ["p/q/a/x/b/y", "p/q/z/w"]
    );
}

#[test]
fn matcher_result_size_is_the_results_length_without_building_it() {
    let mut m = Matcher::new(MatcherConfig::default());
    let rows: Vec<Document> = (1..=5)
        .map(|i| doc(&format!("c/d{i}"), json!({"n": i}), 1))
        .collect();
    m.add_target(
        TargetId(1),
        spec("select * from c order by n limit 3 offset 1"),
        rows.clone(),
        None,
    )
    .unwrap();
    m.add_target(TargetId(2), spec("select * from c"), rows, None)
        .unwrap();
    m.add_target(
        TargetId(3),
        TargetSpec::document("c/d9").unwrap(),
        vec![],
        None,
    )
    .unwrap();
    m.add_target(TargetId(4), spec("select count(*) from c"), vec![], None)
        .unwrap();
    for id in [1, 2, 3] {
        assert_eq!(
            m.result_size(TargetId(id)),
            Some(names(&m.result(TargetId(id)).unwrap()).len()),
            "target {id}"
        );
    }
    assert_eq!(m.result_size(TargetId(1)), Some(3));
    assert_eq!(m.result_size(TargetId(3)), Some(0));
    assert_eq!(m.result_size(TargetId(4)), None);
    assert_eq!(m.result_size(TargetId(5)), None);
}

#[test]
fn matcher_limit_to_last_keeps_the_end_in_query_order() {
    let mut m = Matcher::new(MatcherConfig::default());
    let target = spec("select * from c order by a limit last 2");
    let fetch = target.fetch_query(m.config()).unwrap();
    assert_eq!(fetch.limit.map(|l| l.count()), Some(2 + 16));
    let rows = vec![
        doc("c/a", json!({"a": 1}), 1),
        doc("c/b", json!({"a": 2}), 1),
        doc("c/c", json!({"a": 3}), 1),
    ];
    let first = m.add_target(TargetId(1), target, rows, None).unwrap();
    assert_eq!(names(&first), vec!["c/b", "c/c"]);
    // A new last document pushes c/b out of the window.
    let delta = only(m.apply(1, &[set("c/d", json!({"a": 4}), 2)]), 1);
    assert_eq!(
        shape(&delta),
        vec![
            ("removed", "c/b".into(), 0, -1),
            ("added", "c/d".into(), -1, 1)
        ]
    );
    // Deleting the last brings c/b back at the front.
    let delta = only(m.apply(2, &[delete("c/d")]), 1);
    assert_eq!(
        shape(&delta),
        vec![
            ("removed", "c/d".into(), 1, -1),
            ("added", "c/b".into(), -1, 0)
        ]
    );
    // A write before the window changes nothing visible.
    assert!(m.apply(3, &[set("c/z", json!({"a": 0}), 3)]).is_empty());
    assert_eq!(names(&m.result(TargetId(1)).unwrap()), vec!["c/b", "c/c"]);
}

#[test]
fn matcher_cursors_bound_the_live_result() {
    let mut m = Matcher::new(MatcherConfig::default());
    let target = spec("select * from c order by a start after (2) end at (4)");
    let rows = vec![doc("c/x", json!({"a": 3}), 1)];
    m.add_target(TargetId(1), target, rows, None).unwrap();
    assert!(m.apply(1, &[set("c/y", json!({"a": 2}), 2)]).is_empty());
    let delta = only(m.apply(2, &[set("c/z", json!({"a": 4}), 3)]), 1);
    assert_eq!(shape(&delta), vec![("added", "c/z".into(), -1, 1)]);
    // c/x moves past the end cursor; c/y into the range, ahead of c/z.
    let delta = only(
        m.apply(
            3,
            &[
                set("c/x", json!({"a": 5}), 4),
                set("c/y", json!({"a": 3.5}), 4),
            ],
        ),
        1,
    );
    assert_eq!(
        shape(&delta),
        vec![
            ("removed", "c/x".into(), 0, -1),
            ("added", "c/y".into(), -1, 0)
        ]
    );
    assert_eq!(names(&m.result(TargetId(1)).unwrap()), vec!["c/y", "c/z"]);
}

#[test]
fn matcher_changes_use_firestore_indexes() {
    let mut m = Matcher::new(MatcherConfig::default());
    let rows = ["a", "b", "c", "d"]
        .iter()
        .enumerate()
        .map(|(i, n)| doc(&format!("c/{n}"), json!({"r": i}), 1))
        .collect();
    m.add_target(TargetId(1), spec("select * from c order by r"), rows, None)
        .unwrap();
    // One transaction: c/b leaves, c/e enters first, c/a moves to the end, c/c changes in place.
    let delta = only(
        m.apply(
            1,
            &[
                delete("c/b"),
                set("c/e", json!({"r": -1}), 2),
                set("c/a", json!({"r": 9}), 2),
                set("c/c", json!({"r": 2, "x": true}), 2),
            ],
        ),
        1,
    );
    // Removed first, then added, then modified (new order), each index as the list stands.
    assert_eq!(
        shape(&delta),
        vec![
            ("removed", "c/b".into(), 1, -1),
            ("added", "c/e".into(), -1, 0),
            ("modified", "c/c".into(), 2, 2),
            ("modified", "c/a".into(), 1, 3),
        ]
    );
    assert_eq!(
        names(&m.result(TargetId(1)).unwrap()),
        vec!["c/e", "c/c", "c/d", "c/a"]
    );
    // Writing a document twice in one transaction reports its last version once.
    let delta = only(
        m.apply(
            2,
            &[
                set("c/f", json!({"r": 1}), 3),
                set("c/f", json!({"r": 5}), 3),
            ],
        ),
        1,
    );
    assert_eq!(shape(&delta), vec![("added", "c/f".into(), -1, 3)]);
}

#[test]
fn matcher_aggregations_are_live_and_exact() {
    let mut m = Matcher::new(MatcherConfig::default());
    let target = spec("select count(*) as n, sum(v) as s, avg(v) as a from c where k = 1");
    let rows = vec![doc("c/a", json!({"k": 1, "v": 9007199254740992_i64}), 1)];
    let first = m.add_target(TargetId(1), target, rows, None).unwrap();
    let row = |n: i64, s: Value, a: Value| {
        Map::from([
            ("n".to_owned(), Value::Integer(n)),
            ("s".to_owned(), s),
            ("a".to_owned(), a),
        ])
    };
    assert_eq!(
        first,
        TargetResult::Aggregate(row(
            1,
            Value::Integer(1 << 53),
            Value::Double(9_007_199_254_740_992.0)
        ))
    );
    // Integer sums stay exact integers: 2^53 + 1.
    let delta = only(m.apply(1, &[set("c/b", json!({"k": 1, "v": 1}), 2)]), 1);
    assert_eq!(
        delta,
        TargetDelta::Aggregate(row(
            2,
            Value::Integer((1 << 53) + 1),
            Value::Double(4_503_599_627_370_496.0)
        ))
    );
    // A double makes the sum a double; a write outside the filter changes nothing.
    assert!(m
        .apply(2, &[set("c/z", json!({"k": 2, "v": 5}), 3)])
        .is_empty());
    let delta = only(m.apply(3, &[set("c/b", json!({"k": 1, "v": 0.5}), 4)]), 1);
    let TargetDelta::Aggregate(got) = delta else {
        panic!("{delta:?}")
    };
    assert_eq!(got["s"], Value::Double(9_007_199_254_740_992.0 + 0.5));
    // The same value again: no delta (the row did not change).
    assert!(m
        .apply(4, &[set("c/b", json!({"k": 1, "v": 0.5}), 5)])
        .is_empty());
    let delta = only(m.apply(5, &[delete("c/a"), delete("c/b")]), 1);
    assert_eq!(
        delta,
        TargetDelta::Aggregate(row(0, Value::Integer(0), Value::Null))
    );
}

#[test]
fn matcher_running_aggregations_follow_every_kind_of_write() {
    let text = "select count(*) as n, sum(v) as s, avg(v) as a from c where k = 1";
    let query = docstore_core::query::parse_query(text).unwrap();
    let mut m = Matcher::new(MatcherConfig::default());
    let rows = vec![
        doc("c/a", json!({"k": 1, "v": 0.1}), 1),
        doc("c/b", json!({"k": 1, "v": "not a number"}), 1),
    ];
    m.add_target(TargetId(1), spec(text), rows, None).unwrap();
    // Every document version the test writes; the row must equal core's `aggregate` over
    // the matching ones after every transaction, bit for bit.
    let mut data: std::collections::BTreeMap<String, serde_json::Value> = [
        ("c/a".to_owned(), json!({"k": 1, "v": 0.1})),
        ("c/b".to_owned(), json!({"k": 1, "v": "not a number"})),
    ]
    .into();
    let transactions: Vec<Vec<(&str, Option<serde_json::Value>)>> = vec![
        // Enter with doubles whose sequential sum depends on the order.
        vec![("c/c", Some(json!({"k": 1, "v": 0.2})))],
        vec![("c/d", Some(json!({"k": 1, "v": 0.3})))],
        // Outside the filter: no delta.
        vec![("c/z", Some(json!({"k": 2, "v": 100})))],
        // Modified in place, then a document leaves by its new value, one is deleted (found
        // by name only), one enters from outside the filter.
        vec![("c/a", Some(json!({"k": 1, "v": 9223372036854775807_i64})))],
        vec![("c/c", Some(json!({"k": 2, "v": 0.2})))],
        vec![("c/d", None), ("c/z", Some(json!({"k": 1, "v": 1e308})))],
        vec![("c/e", Some(json!({"k": 1, "v": 1e308})))],
        vec![("c/e", Some(json!({"k": 1, "v": -1e308})))],
        // NaN and an infinity come and go.
        vec![("c/f", Some(json!({"k": 1, "v": {"$double": "NaN"}})))],
        vec![("c/f", Some(json!({"k": 1, "v": {"$double": "-Infinity"}})))],
        vec![("c/f", None)],
        // The same values again: the row does not change.
        vec![("c/b", Some(json!({"k": 1, "v": "still not"})))],
    ];
    for (i, writes) in transactions.iter().enumerate() {
        let xid = u32::try_from(i).unwrap() + 1;
        let micros = i64::from(xid) + 1;
        let before = m.result(TargetId(1)).unwrap();
        let writes: Vec<Write> = writes
            .iter()
            .map(|(path, fields)| match fields {
                Some(f) => {
                    data.insert((*path).to_owned(), f.clone());
                    set(path, f.clone(), micros)
                }
                None => {
                    data.remove(*path);
                    delete(path)
                }
            })
            .collect();
        let deltas = m.apply(xid, &writes);
        let all: Vec<(ResourcePath, Map)> = data
            .iter()
            .map(|(p, f)| {
                (
                    ResourcePath::parse_document(p).unwrap(),
                    map_from_json(f).unwrap(),
                )
            })
            .collect();
        let expected = docstore_core::query::aggregate(&query, &all);
        let now = m.result(TargetId(1)).unwrap();
        assert_eq!(now, TargetResult::Aggregate(expected.clone()), "after {i}");
        match i {
            8 => assert!(matches!(expected["s"], Value::Double(d) if d.is_nan())),
            9 => assert_eq!(expected["s"], Value::Double(f64::NEG_INFINITY)),
            _ => {}
        }
        match deltas.as_slice() {
            [] => assert_eq!(before, now, "no delta yet a change after {i}"),
            [(TargetId(1), TargetDelta::Aggregate(row))] => {
                assert_eq!(row, &expected, "after {i}");
                assert_ne!(before, now, "a delta without a change after {i}");
            }
            other => panic!("after {i}: {other:?}"),
        }
    }
    // Exact sums: 1e308 and -1e308 cancel exactly, so the sum is the int64 max rounded once
    // to a double (doubles were summed); a sequential sum would give 0 in the order
    // int64 max, 1e308, -1e308.
    let TargetResult::Aggregate(row) = m.result(TargetId(1)).unwrap() else {
        panic!()
    };
    assert_eq!(row["n"], Value::Integer(4));
    assert_eq!(row["s"], Value::Double(9_223_372_036_854_775_808.0));
    assert_eq!(9_223_372_036_854_775_808.0 + 1e308 - 1e308, 0.0);
    // A truncate empties it; a forced refresh with the same rows changes nothing.
    let cleared = only(m.apply(100, &[Write::Truncate]), 1);
    assert_eq!(
        cleared,
        TargetDelta::Aggregate(Map::from([
            ("n".to_owned(), Value::Integer(0)),
            ("s".to_owned(), Value::Integer(0)),
            ("a".to_owned(), Value::Null),
        ]))
    );
    let rows = vec![doc("c/q", json!({"k": 1, "v": 2}), 101)];
    let refreshed = m.requeried(TargetId(1), rows.clone(), None).unwrap();
    assert!(
        matches!(refreshed, Some(TargetDelta::Aggregate(ref r)) if r["s"] == Value::Integer(2))
    );
    assert_eq!(m.requeried(TargetId(1), rows, None).unwrap(), None);
    // The refreshed document is held: its delete is found by name.
    let gone = only(m.apply(102, &[delete("c/q")]), 1);
    assert!(matches!(gone, TargetDelta::Aggregate(ref r) if r["n"] == Value::Integer(0)));
}

#[test]
fn matcher_windows_ask_for_a_requery_when_the_slack_runs_out() {
    let config = MatcherConfig {
        initial_slack: 1,
        max_slack: 4,
        ..MatcherConfig::default()
    };
    let mut m = Matcher::new(config);
    let target = spec("select * from c order by a limit 1");
    let fetch = target.fetch_query(&config).unwrap();
    assert_eq!(fetch.limit.map(|l| l.count()), Some(2));
    // The fetch returned as many rows as it asked for: more may exist (c/c does).
    let rows = vec![
        doc("c/a", json!({"a": 1}), 1),
        doc("c/b", json!({"a": 2}), 1),
    ];
    m.add_target(TargetId(1), target, rows, None).unwrap();
    let delta = only(m.apply(1, &[delete("c/a")]), 1);
    assert_eq!(
        shape(&delta),
        vec![
            ("removed", "c/a".into(), 0, -1),
            ("added", "c/b".into(), -1, 0)
        ]
    );
    assert_eq!(
        only(m.apply(2, &[delete("c/b")]), 1),
        TargetDelta::NeedsRequery
    );
    assert!(m.awaiting_requery(TargetId(1)));
    // While waiting, transactions are ignored and the result is what the client has.
    assert!(m.apply(3, &[set("c/d", json!({"a": 0}), 2)]).is_empty());
    assert_eq!(names(&m.result(TargetId(1)).unwrap()), vec!["c/b"]);
    // The slack grew: the new fetch asks for 1 + 2.
    let fetch = m.fetch_query(TargetId(1)).unwrap();
    assert_eq!(fetch.limit.map(|l| l.count()), Some(3));
    let rows = vec![
        doc("c/d", json!({"a": 0}), 2),
        doc("c/c", json!({"a": 3}), 1),
    ];
    let delta = m.requeried(TargetId(1), rows, None).unwrap().unwrap();
    assert_eq!(
        shape(&delta),
        vec![
            ("removed", "c/b".into(), 0, -1),
            ("added", "c/d".into(), -1, 0)
        ]
    );
    assert!(!m.awaiting_requery(TargetId(1)));
    // The kept rows are complete now (fewer than asked for): deleting all but one is fine.
    let delta = only(m.apply(4, &[delete("c/d")]), 1);
    assert_eq!(
        shape(&delta),
        vec![
            ("removed", "c/d".into(), 0, -1),
            ("added", "c/c".into(), -1, 0)
        ]
    );
}

#[derive(Debug)]
struct Sees(Vec<u32>);

impl Horizon for Sees {
    fn sees(&self, xid: u32) -> bool {
        self.0.contains(&xid)
    }
}

#[test]
fn matcher_skips_transactions_the_snapshot_saw() {
    let mut m = Matcher::new(MatcherConfig::default());
    let rows = vec![doc("c/a", json!({"a": 1}), 1)];
    m.add_target(
        TargetId(1),
        spec("select * from c"),
        rows,
        Some(Arc::new(Sees(vec![7]))),
    )
    .unwrap();
    // xid 7 is in the rows already (c/a was written by it).
    assert!(m.apply(7, &[set("c/a", json!({"a": 1}), 1)]).is_empty());
    let delta = only(m.apply(8, &[set("c/b", json!({"a": 2}), 2)]), 1);
    assert_eq!(shape(&delta), vec![("added", "c/b".into(), -1, 1)]);
    // A handed-off transaction goes to that target alone.
    m.add_target(TargetId(2), spec("select * from c"), vec![], None)
        .unwrap();
    let delta = m
        .apply_to(TargetId(2), 9, &[set("c/z", json!({}), 3)])
        .unwrap();
    assert_eq!(shape(&delta), vec![("added", "c/z".into(), -1, 0)]);
    assert_eq!(names(&m.result(TargetId(1)).unwrap()), vec!["c/a", "c/b"]);
}

#[test]
fn matcher_document_targets_follow_one_document() {
    let mut m = Matcher::new(MatcherConfig::default());
    let target = TargetSpec::document("c/a").unwrap();
    assert!(target.fetch_query(m.config()).is_none());
    m.add_target(TargetId(1), target, vec![], None).unwrap();
    let added = only(m.apply(1, &[set("c/a", json!({"x": 1}), 1)]), 1);
    assert_eq!(shape(&added), vec![("added", "c/a".into(), -1, 0)]);
    assert!(m.apply(2, &[set("c/b", json!({"x": 1}), 2)]).is_empty());
    let modified = only(m.apply(3, &[set("c/a", json!({"x": 2}), 3)]), 1);
    assert_eq!(shape(&modified), vec![("modified", "c/a".into(), 0, 0)]);
    let removed = only(m.apply(4, &[Write::Truncate]), 1);
    assert_eq!(shape(&removed), vec![("removed", "c/a".into(), 0, -1)]);
    assert_eq!(m.candidates(&delete("c/a")), vec![TargetId(1)]);
    assert!(m.remove_target(TargetId(1)));
    assert!(m.candidates(&delete("c/a")).is_empty());
}

#[test]
fn matcher_projections_report_selected_fields() {
    let mut m = Matcher::new(MatcherConfig::default());
    m.add_target(
        TargetId(1),
        spec("select a from c where b = 1"),
        vec![],
        None,
    )
    .unwrap();
    let delta = only(
        m.apply(1, &[set("c/x", json!({"a": 5, "b": 1, "z": 0}), 1)]),
        1,
    );
    assert_eq!(
        delta,
        TargetDelta::Changes(vec![DocChange::Added {
            doc: doc("c/x", json!({"a": 5}), 1),
            new_index: 0
        }])
    );
}

#[test]
fn matcher_refuses_bad_calls_with_canonical_kinds() {
    let mut m = Matcher::new(MatcherConfig::default());
    let err = TargetSpec::parse_text("select * from").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Syntax);
    m.add_target(TargetId(1), spec("select * from c"), vec![], None)
        .unwrap();
    let err = m
        .add_target(TargetId(1), spec("select * from c"), vec![], None)
        .unwrap_err();
    assert_eq!(err, MatcherError::DuplicateTarget(TargetId(1)));
    let outside = vec![doc("d/x", json!({}), 1)];
    let err = m
        .add_target(TargetId(2), spec("select * from c"), outside, None)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Internal);
    assert!(m.result(TargetId(2)).is_none());
    assert_eq!(
        m.requeried(TargetId(9), vec![], None).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert!(!m.remove_target(TargetId(9)));
}

#[test]
fn matcher_moves_into_a_task() {
    // A stream's task owns its matcher (tokio needs Send); horizons are shared snapshots.
    fn owned_by_a_task<T: Send + 'static>() {}
    owned_by_a_task::<Matcher>();
    owned_by_a_task::<Vec<(TargetId, TargetDelta)>>();
    let mut m = Matcher::new(MatcherConfig::default());
    m.add_target(TargetId(1), spec("select * from c"), vec![], None)
        .unwrap();
    let handle = std::thread::spawn(move || m.apply(1, &[set("c/a", json!({}), 1)]).len());
    assert_eq!(handle.join().unwrap(), 1);
}

/// A client's list after applying `delta` in Firestore's order (docs/listen.md).
fn fold(mut list: Vec<Document>, delta: Option<TargetDelta>) -> Vec<Document> {
    let Some(TargetDelta::Changes(changes)) = delta else {
        assert!(delta.is_none(), "{delta:?}");
        return list;
    };
    for change in changes {
        match change {
            DocChange::Removed { path, old_index } => {
                assert_eq!(list.remove(old_index).path, path);
            }
            DocChange::Added { doc, new_index } => list.insert(new_index, doc),
            DocChange::Modified {
                doc,
                old_index,
                new_index,
            } => {
                assert_eq!(list.remove(old_index).path, doc.path);
                list.insert(new_index, doc);
            }
        }
    }
    list
}

fn documents(result: TargetResult) -> Vec<Document> {
    match result {
        TargetResult::Documents(docs) => docs,
        TargetResult::Aggregate(row) => panic!("aggregate {row:?}"),
    }
}

/// Every document's version at P, and the writes after P (one transaction each).
fn rewind_case() -> (Vec<Document>, Vec<Write>) {
    let at_p: Vec<Document> = (0..8)
        .map(|i| doc(&format!("c/d{i}"), json!({"n": i * 10}), 1))
        .collect();
    let writes = vec![
        // Into the top-3 window, out of it, modified in it, deleted from it, a new one.
        set("c/d1", json!({"n": 100}), 2),
        set("c/d7", json!({"n": -5}), 2),
        set("c/d6", json!({"n": 61}), 2),
        delete("c/d5"),
        set("c/new", json!({"n": 55}), 2),
        set("c/d1", json!({"n": 101}), 3),
    ];
    (at_p, writes)
}

fn state_after(at_p: &[Document], writes: &[Write]) -> Vec<Document> {
    let mut now: Vec<Document> = at_p.to_vec();
    for w in writes {
        match w {
            Write::Set(d) => {
                now.retain(|x| x.path != d.path);
                now.push(d.clone());
            }
            Write::Delete(p) => now.retain(|x| &x.path != p),
            Write::Truncate => now.clear(),
        }
    }
    now
}

/// The version at P of every document written after P (`None`: it did not exist).
fn before_images(
    at_p: &[Document],
    writes: &[Write],
) -> std::collections::HashMap<ResourcePath, Option<Document>> {
    let mut before = std::collections::HashMap::new();
    for w in writes {
        let path = match w {
            Write::Set(d) => d.path.clone(),
            Write::Delete(p) => p.clone(),
            Write::Truncate => unreachable!(),
        };
        before
            .entry(path.clone())
            .or_insert_with(|| at_p.iter().find(|d| d.path == path).cloned());
    }
    before
}

#[test]
fn matcher_rewound_takes_a_client_from_an_earlier_result_to_the_current_one() {
    let (at_p, writes) = rewind_case();
    let now = state_after(&at_p, &writes);
    let before = before_images(&at_p, &writes);
    for (i, text) in [
        "select * from c order by n desc limit 3",
        "select * from c order by n limit 3 offset 1",
        "select * from c order by n limit last 2",
        "select * from c where n > 20",
        "select n from c order by n desc limit 2",
    ]
    .into_iter()
    .enumerate()
    {
        let config = MatcherConfig::default();
        let target = spec(text);
        let id = TargetId(i as u64);
        let mut m = Matcher::new(config);
        let rows_at = |docs: &[Document], slack: u32| -> Vec<Document> {
            let fetch = target
                .fetch_query(&MatcherConfig {
                    initial_slack: slack,
                    ..config
                })
                .unwrap();
            let pairs: Vec<(ResourcePath, Map)> = docs
                .iter()
                .map(|d| (d.path.clone(), (*d.fields).clone()))
                .collect();
            let names: Vec<ResourcePath> = docstore_core::query::evaluate(&fetch, &pairs)
                .into_iter()
                .map(|(p, _)| p)
                .collect();
            names
                .iter()
                .map(|p| docs.iter().find(|d| &d.path == p).unwrap().clone())
                .collect()
        };
        // What the client had at P.
        m.add_target(id, target.clone(), rows_at(&at_p, 16), None)
            .unwrap();
        let client = documents(m.result(id).unwrap());
        m.remove_target(id);
        // The adopting process reads at H with a slack that covers the written documents.
        let slack = 1 + u32::try_from(before.len()).unwrap();
        m.add_target_with_slack(id, target.clone(), rows_at(&now, slack), None, slack)
            .unwrap();
        let delta = m.rewound(id, &before).unwrap();
        assert_eq!(
            fold(client, delta),
            documents(m.result(id).unwrap()),
            "{text}"
        );
    }
}

#[test]
fn matcher_rewound_refuses_when_the_kept_rows_are_too_few() {
    let (at_p, _) = rewind_case();
    // Two low documents jump to the top: at H the kept rows (limit 2 + slack 1) are both of
    // them and d7, so only one unwritten row is known above the bound; the window at P needs
    // two.
    let writes = vec![
        set("c/d0", json!({"n": 200}), 2),
        set("c/d1", json!({"n": 201}), 2),
    ];
    let before = before_images(&at_p, &writes);
    let config = MatcherConfig {
        initial_slack: 1,
        ..MatcherConfig::default()
    };
    let mut m = Matcher::new(config);
    let target = spec("select * from c order by n desc limit 2");
    let rows = vec![
        doc("c/d1", json!({"n": 201}), 2),
        doc("c/d0", json!({"n": 200}), 2),
        doc("c/d7", json!({"n": 70}), 1),
    ];
    m.add_target(TargetId(1), target, rows, None).unwrap();
    assert_eq!(
        m.rewound(TargetId(1), &before),
        Err(docstore_sidecar::matcher::Rewind::Inexact)
    );
    assert_eq!(
        m.rewound(TargetId(9), &before),
        Err(docstore_sidecar::matcher::Rewind::Unknown)
    );
    let mut agg = Matcher::new(config);
    agg.add_target(
        TargetId(1),
        spec("select count(*) from c"),
        Vec::new(),
        None,
    )
    .unwrap();
    assert_eq!(
        agg.rewound(TargetId(1), &before),
        Err(docstore_sidecar::matcher::Rewind::Inexact)
    );
}

#[test]
fn matcher_rewound_document_targets() {
    let (at_p, writes) = rewind_case();
    let now = state_after(&at_p, &writes);
    let before = before_images(&at_p, &writes);
    for name in ["c/d1", "c/d5", "c/new", "c/d0"] {
        let path = ResourcePath::parse_document(name).unwrap();
        let mut m = Matcher::default();
        let then: Vec<Document> = at_p.iter().filter(|d| d.path == path).cloned().collect();
        let current: Vec<Document> = now.iter().filter(|d| d.path == path).cloned().collect();
        m.add_target(
            TargetId(1),
            TargetSpec::Document(path),
            current.clone(),
            None,
        )
        .unwrap();
        let delta = m.rewound(TargetId(1), &before).unwrap();
        assert_eq!(fold(then, delta), current, "{name}");
    }
}

/// Targets on one query with the same kept results (a fan-out) are matched once per
/// transaction and take the one outcome; a target whose state differs (another horizon, a
/// hand-off of its own) is matched on its own and reports what a lone target would.
#[test]
fn matcher_fan_out_targets_are_matched_once_and_apart_when_they_differ() {
    const N: u64 = 200;
    let text = "select * from r where city = 'SF' order by rating desc limit 3";
    // Target 7's snapshot already saw transaction 2; target 9 takes a hand-off of its own.
    let horizon = |i: u64| -> Option<Arc<dyn Horizon>> {
        (i == 7).then(|| Arc::new(Sees(vec![2])) as Arc<dyn Horizon>)
    };
    let lone = |i: u64| {
        let mut l = Matcher::new(MatcherConfig::default());
        l.add_target(TargetId(0), spec(text), rows(), horizon(i))
            .unwrap();
        l
    };
    fn rows() -> Vec<Document> {
        (1..=3)
            .map(|k| doc(&format!("r/p{k}"), json!({"city": "SF", "rating": k}), 1))
            .collect()
    }
    fn w(k: i64, rating: i64) -> Write {
        set(
            &format!("r/w{k}"),
            json!({"city": "SF", "rating": rating}),
            10 + k,
        )
    }
    let mut m = Matcher::new(MatcherConfig::default());
    for i in 0..N {
        m.add_target(TargetId(i), spec(text), rows(), horizon(i))
            .unwrap();
    }
    // What a lone target reports: 0 stands for every target but 7 and 9.
    let mut lones = [lone(0), lone(7), lone(9)];
    let which = |i: u64| match i {
        7 => 1,
        9 => 2,
        _ => 0,
    };
    let check =
        |m: &mut Matcher, lones: &mut [Matcher; 3], xid: u32, writes: &[Write], from: u64| {
            let deltas = m.apply(xid, writes);
            let want: Vec<Option<TargetDelta>> = lones
                .iter_mut()
                .map(|l| l.apply(xid, writes).into_iter().next().map(|(_, d)| d))
                .collect();
            for i in from..N {
                let got = deltas
                    .iter()
                    .find(|(id, _)| *id == TargetId(i))
                    .map(|(_, d)| d.clone());
                assert_eq!(got, want[which(i)], "target {i} at transaction {xid}");
                assert_eq!(
                    m.result(TargetId(i)),
                    lones[which(i)].result(TargetId(0)),
                    "target {i} after transaction {xid}"
                );
            }
        };
    let before = m.stats();
    check(&mut m, &mut lones, 1, &[w(1, 10)], 0);
    let first = m.stats();
    assert_eq!(first.targets_tested - before.targets_tested, N);
    assert_eq!(first.targets_shared, 0, "the first pass matches each");
    assert!(m.apply_to(TargetId(9), 50, &[w(50, 1)]).is_none());
    assert!(lones[2].apply_to(TargetId(0), 50, &[w(50, 1)]).is_none());
    check(&mut m, &mut lones, 2, &[w(2, 20)], 0);
    let second = m.stats();
    assert_eq!(
        second.targets_tested - first.targets_tested,
        1 + (N - 1),
        "target 9's hand-off, then every target but 7 (whose snapshot saw transaction 2)"
    );
    assert_eq!(
        second.targets_shared,
        N - 3,
        "all but the first, 7 and 9 took the first one's outcome"
    );
    check(&mut m, &mut lones, 3, &[w(3, 30), delete("r/p3")], 0);
    check(&mut m, &mut lones, 4, &[delete("r/w3"), delete("r/w2")], 0);
    // A target removed from a shared group leaves the others' state alone.
    assert!(m.remove_target(TargetId(0)));
    check(&mut m, &mut lones, 5, &[w(5, 50)], 1);
}
