//! Soundness of the list check of queries (`list::decide_query`): whenever a query is allowed,
//! every document it could return is allowed by the per-document evaluation of the same rules.
//! Random documents over edge values (1 and 1.0, 0 and -0.0, NaN, null, lists of strings and of
//! numbers, missing fields) are matched with the query engine's own matcher; the allowed
//! queries and their matching documents are counted so the test cannot pass vacuously.
#![allow(clippy::unwrap_used, clippy::panic)]

use docstore_core::query::{matches, parse_query};
use docstore_core::value::Map;
use docstore_core::{ResourcePath, Timestamp, Value};
use docstore_rules::eval::{evaluate, Budget, Decision, Document, NoDocuments, Request};
use docstore_rules::list::decide_query;
use docstore_rules::Method;
use serde_json::json;

const CONDITIONS: &[&str] = &[
    "resource.data.a == 1",
    "resource.data.a is int",
    "resource.data.a is float",
    "resource.data.a == 'x' || resource.data.b == true",
    "resource.data.a == 'x' && resource.data.b == true",
    "request.auth.uid in resource.data.members",
    "resource.data.members.size() > 0",
    "!(resource.data.a is string)",
    "resource.data.keys().size() < 3",
    "resource.data.a == null",
    "string(resource.data.a) == '1'",
    "resource.data.a < 5",
    "resource.data.b != false",
    "resource.data.a != resource.data.a",
    "resource.id == 'd1' || resource.data.b == true",
    "d == 'd1'",
    "request.query.limit <= 10 && resource.data.b == true",
    "resource.data.a.size() == 1",
];

const QUERIES: &[&str] = &[
    "select * from /c",
    "select * from /c where a = 1",
    "select * from /c where a = 1.0",
    "select * from /c where a = 0",
    "select * from /c where a = -0.0",
    "select * from /c where a = 'x'",
    "select * from /c where b = true",
    "select * from /c where b = true limit 5",
    "select * from /c where b = true limit 50",
    "select * from /c where a = 'x' and b = true",
    "select * from /c where a = 1 or b = true",
    "select * from /c where a in (1)",
    "select * from /c where a > 0",
    "select * from /c where a is null",
    "select * from /c where a is nan",
    "select * from /c where a = ['x']",
    "select * from /c where a = [1]",
    "select * from /c where members array_contains 'u'",
    "select * from /c where members array_contains 1",
    "select * from /c where __name__ = 'd1'",
];

fn a_values() -> Vec<Option<Value>> {
    vec![
        None,
        Some(Value::Integer(1)),
        Some(Value::Double(1.0)),
        Some(Value::Integer(0)),
        Some(Value::Double(0.0)),
        Some(Value::Double(-0.0)),
        Some(Value::Integer(2)),
        Some(Value::Double(f64::NAN)),
        Some(Value::String("x".into())),
        Some(Value::Null),
        Some(Value::Boolean(true)),
        Some(Value::Array(vec![Value::String("x".into())])),
        Some(Value::Array(vec![Value::Integer(1)])),
        Some(Value::Array(vec![Value::Double(1.0)])),
    ]
}

fn b_values() -> Vec<Option<Value>> {
    vec![
        None,
        Some(Value::Boolean(true)),
        Some(Value::Boolean(false)),
        Some(Value::String("x".into())),
    ]
}

fn members_values() -> Vec<Option<Value>> {
    let s = |v: &str| Value::String(v.into());
    vec![
        None,
        Some(Value::Array(vec![s("u")])),
        Some(Value::Array(vec![s("u"), s("v")])),
        Some(Value::Array(vec![s("v")])),
        Some(Value::Array(vec![Value::Integer(1)])),
        Some(Value::Array(vec![Value::Double(1.0), s("u")])),
    ]
}

/// Every combination of the field values, on documents d0, d1, ...
fn documents() -> Vec<(ResourcePath, Map)> {
    let mut out = Vec::new();
    for a in a_values() {
        for b in b_values() {
            for m in members_values() {
                let mut doc = Map::new();
                if let Some(a) = &a {
                    doc.insert("a".into(), a.clone());
                }
                if let Some(b) = &b {
                    doc.insert("b".into(), b.clone());
                }
                if let Some(m) = &m {
                    doc.insert("members".into(), m.clone());
                }
                let id = format!("d{}", out.len() % 3);
                out.push((
                    ResourcePath::parse_document(&format!("c/{id}")).unwrap(),
                    doc,
                ));
            }
        }
    }
    out
}

fn request(path: ResourcePath) -> Request {
    Request {
        method: Method::List,
        database: "(default)".into(),
        path,
        auth: Some(json!({ "sub": "u" })).into(),
        resource: None,
        time: Timestamp::from_micros(0).unwrap(),
        query: None,
    }
}

#[test]
fn an_allowed_query_returns_only_allowed_documents() {
    let docs = documents();
    let mut allowed_queries = 0;
    let mut checked_documents = 0;
    for condition in CONDITIONS {
        let source = format!(
            "rules_version = '2'; service cloud.firestore {{ match /databases/{{db}}/documents {{ \
             match /c/{{d}} {{ allow list: if {condition}; }} }} }}"
        );
        let ruleset = docstore_rules::compile(&source).unwrap();
        for text in QUERIES {
            let query = parse_query(text).unwrap();
            let collection = query.source.collection_path().unwrap();
            let decision = decide_query(
                &ruleset,
                &request(collection),
                &query,
                &NoDocuments,
                &mut Budget::single(),
            );
            if decision != Decision::Allow {
                continue;
            }
            allowed_queries += 1;
            for (path, data) in docs.iter().filter(|(p, d)| matches(&query, p, d)) {
                checked_documents += 1;
                let mut r = request(path.clone());
                r.query = Some(docstore_rules::list::request_query(&query));
                let stored = Document {
                    path: path.clone(),
                    data: data.clone(),
                };
                let each = evaluate(
                    &ruleset,
                    &r,
                    Some(&stored),
                    &NoDocuments,
                    &mut Budget::single(),
                );
                assert_eq!(
                    each,
                    Decision::Allow,
                    "`{condition}` allowed `{text}` but denies {path} {data:?}"
                );
            }
        }
    }
    // Not vacuous: many (condition, query) pairs are allowed, over many matching documents.
    assert!(allowed_queries >= 15, "{allowed_queries} allowed queries");
    assert!(
        checked_documents >= 500,
        "{checked_documents} documents checked"
    );
}
