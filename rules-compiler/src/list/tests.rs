//! The list check of a query against constraint documents.

use docstore_core::query::parse_query;
use docstore_core::{ResourcePath, Timestamp};
use serde_json::json;

use super::decide_query;
use crate::eval::{Budget, Decision, NoDocuments, Request};
use crate::parse::ast::Method;

const POSTS: &str = r#"rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /posts/{p} {
    allow list: if resource.data.owner == request.auth.uid;
    allow list: if resource.data.public == true && request.query.limit <= 50;
  }
  match /typed/{t} { allow list: if resource.data.n is int; }
  match /byname/{b} { allow list: if b == request.auth.uid; }
  match /whole/{w} { allow list: if resource.data.keys().size() < 5; }
  match /prices/{i} { allow list: if resource.data.price < 100; }
  match /nested/{i} { allow list: if resource.data.a.b == 'x'; }
  match /{path=**}/comments/{c} { allow list: if resource.data.visible == true; }
  match /users/{u}/notes/{n} { allow list: if request.auth.uid == u; }
} }"#;

fn decide(query: &str, uid: Option<&str>) -> Decision {
    let ruleset = crate::compile(POSTS).unwrap();
    let q = parse_query(query).unwrap();
    let path = q.source.collection_path().unwrap_or_else(|| {
        ResourcePath::from_segments(vec![q.source.collection_id.clone()]).unwrap()
    });
    let request = Request {
        method: Method::List,
        database: "(default)".into(),
        path,
        auth: uid.map(|u| json!({ "sub": u })).into(),
        resource: None,
        time: Timestamp::from_micros(0).unwrap(),
        query: None,
    };
    decide_query(&ruleset, &request, &q, &NoDocuments, &mut Budget::single())
}

fn allowed(query: &str, uid: Option<&str>) -> bool {
    decide(query, uid) == Decision::Allow
}

#[test]
fn equality_on_the_ruled_field_allows() {
    assert!(allowed(
        r#"select * from /posts where owner = "u1""#,
        Some("u1")
    ));
    assert!(allowed(
        r#"select * from /posts where owner = "u1" and n > 3 order by n"#,
        Some("u1")
    ));
}

#[test]
fn another_value_or_no_constraint_is_refused_whatever_the_data() {
    assert!(!allowed(
        r#"select * from /posts where owner = "u2""#,
        Some("u1")
    ));
    assert!(!allowed("select * from /posts", Some("u1")));
    assert!(!allowed(r#"select * from /posts where owner = "u1""#, None));
}

#[test]
fn the_reason_names_the_unconstrained_read_and_the_line() {
    let Decision::Deny(reason) = decide("select * from /posts where n = 1", Some("u1")) else {
        panic!("allowed");
    };
    assert!(reason.contains("resource.data.owner"), "{reason}");
    assert!(reason.contains("line 4"), "{reason}");
}

#[test]
fn request_query_limit_is_checked() {
    assert!(allowed(
        "select * from /posts where public = true limit 10",
        None
    ));
    assert!(!allowed(
        "select * from /posts where public = true limit 51",
        None
    ));
    // No limit: request.query.limit is null, `null <= 50` is an error.
    assert!(!allowed("select * from /posts where public = true", None));
}

#[test]
fn a_disjunction_fixes_nothing() {
    assert!(!allowed(
        r#"select * from /posts where owner = "u1" or owner = "u1""#,
        Some("u1")
    ));
}

#[test]
fn in_of_one_value_fixes_the_field() {
    assert!(allowed(
        r#"select * from /posts where owner in ("u1")"#,
        Some("u1")
    ));
    assert!(!allowed(
        r#"select * from /posts where owner in ("u1", "u2")"#,
        Some("u1")
    ));
}

#[test]
fn a_fixed_integer_is_also_checked_as_a_float() {
    // `n = 1` also returns documents where n is 1.0, which `is int` refuses.
    assert!(!allowed("select * from /typed where n = 1", None));
    assert!(!allowed("select * from /typed where n = 1.5", None));
}

#[test]
fn range_implications_are_not_proved() {
    // Stricter than Firestore (docs/rules.md): every result has price < 50, but only
    // equalities are constraints.
    assert!(!allowed("select * from /prices where price < 50", None));
    assert!(allowed("select * from /prices where price = 20", None));
    assert!(!allowed("select * from /prices where price = 200", None));
}

#[test]
fn reading_the_whole_data_map_is_refused() {
    assert!(!allowed(r#"select * from /whole where a = "x""#, None));
}

#[test]
fn nested_fields_are_constraints() {
    assert!(allowed(r#"select * from /nested where a.b = "x""#, None));
    assert!(!allowed(r#"select * from /nested where a.c = "x""#, None));
}

#[test]
fn the_document_wildcard_is_bound_only_by_name_equality() {
    assert!(!allowed("select * from /byname", Some("u1")));
    assert!(allowed(
        "select * from /byname where __name__ = 'u1'",
        Some("u1")
    ));
    assert!(!allowed(
        "select * from /byname where __name__ = 'u2'",
        Some("u1")
    ));
}

#[test]
fn collection_wildcards_come_from_the_path() {
    assert!(allowed("select * from /users/u1/notes", Some("u1")));
    assert!(!allowed("select * from /users/u2/notes", Some("u1")));
}

#[test]
fn collection_groups_need_a_recursive_rule() {
    assert!(allowed(
        "select * from group(comments) where visible = true",
        None
    ));
    assert!(!allowed("select * from group(comments)", None));
    // `notes` is only ruled at one depth: a group query is refused.
    assert!(!allowed("select * from group(notes)", Some("u1")));
}

const ROOMS: &str = r#"rules_version = '2';
service cloud.firestore { match /databases/{database}/documents {
  match /rooms/{r} { allow list: if request.auth != null && request.auth.uid in resource.data.members; }
  match /sized/{r} { allow list: if resource.data.members.size() > 0; }
} }"#;

fn decide_rooms(query: &str, uid: &str) -> bool {
    let ruleset = crate::compile(ROOMS).unwrap();
    let q = parse_query(query).unwrap();
    let request = Request {
        method: Method::List,
        database: "(default)".into(),
        path: q.source.collection_path().unwrap(),
        auth: Some(json!({ "sub": uid })).into(),
        resource: None,
        time: Timestamp::from_micros(0).unwrap(),
        query: None,
    };
    decide_query(&ruleset, &request, &q, &NoDocuments, &mut Budget::single()) == Decision::Allow
}

#[test]
fn array_contains_proves_membership() {
    assert!(decide_rooms(
        "select * from /rooms where members array_contains 'alice'",
        "alice"
    ));
    assert!(!decide_rooms(
        "select * from /rooms where members array_contains 'bob'",
        "alice"
    ));
    assert!(!decide_rooms("select * from /rooms", "alice"));
    // Numbers are not used: 1 and 1.0 differ inside lists.
    assert!(!decide_rooms(
        "select * from /rooms where members array_contains 1",
        "alice"
    ));
    // Anything else about the list is unknown.
    assert!(!decide_rooms(
        "select * from /sized where members array_contains 'alice'",
        "alice"
    ));
}
