//! The commit format (docs/storage.md): what `docstore.commit(writes)` and the HTTP `:commit`
//! body parse to, and every malformed item's message and kind (the messages are the ones
//! pg_docstore/tests/regress/expected/preconditions.out shows).
#![allow(clippy::unwrap_used, clippy::panic)]

use docstore_core::commit::{
    parse, parse_precondition, CommitError, Operation, Precondition, WriteError, MAX_WRITES,
};
use docstore_core::mutation::{MutationError, WriteKind};
use docstore_core::{ErrorKind, Timestamp};
use serde_json::{json, Value as Json};

fn refused(writes: &Json) -> CommitError {
    match parse(writes) {
        Ok(parsed) => panic!("{writes} parsed to {parsed:?}"),
        Err(e) => e,
    }
}

#[test]
fn every_verb_parses() {
    let writes = parse(&json!([
        {"create": "c/a", "data": {"n": 1}},
        {"set": "c/b", "data": {"n": 2}, "merge": true, "precondition": {"exists": true}},
        {"set": "c/c", "data": {}},
        {"update": "c/d", "fields": {"m.n": 3},
         "precondition": {"updateTime": "2024-05-01T10:00:00.123456Z"}},
        {"delete": "c/e", "precondition": {"exists": false}},
        {"verify": "c/f", "precondition": {"exists": true}},
    ]))
    .unwrap();
    let kinds: Vec<Option<WriteKind>> = writes
        .iter()
        .map(|w| match &w.operation {
            Operation::Mutate(m) => Some(*m.kind()),
            Operation::Delete | Operation::Verify => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            Some(WriteKind::Create),
            Some(WriteKind::Set { merge: true }),
            Some(WriteKind::Set { merge: false }),
            Some(WriteKind::Update),
            None,
            None,
        ]
    );
    assert!(matches!(writes[4].operation, Operation::Delete));
    assert!(matches!(writes[5].operation, Operation::Verify));
    let paths: Vec<String> = writes.iter().map(|w| w.path.to_string()).collect();
    assert_eq!(paths, ["c/a", "c/b", "c/c", "c/d", "c/e", "c/f"]);
    let preconditions: Vec<Option<Precondition>> = writes.iter().map(|w| w.precondition).collect();
    let time = Timestamp::parse_rfc3339("2024-05-01T10:00:00.123456Z").unwrap();
    assert_eq!(
        preconditions,
        [
            None,
            Some(Precondition::Exists(true)),
            None,
            Some(Precondition::UpdateTime(time)),
            Some(Precondition::Exists(false)),
            Some(Precondition::Exists(true)),
        ]
    );
    assert!(parse(&json!([])).unwrap().is_empty());
}

#[test]
fn the_limit_is_500_writes() {
    let writes = |n: usize| {
        Json::Array(
            (0..n)
                .map(|i| json!({"delete": format!("c/d{i}")}))
                .collect(),
        )
    };
    assert_eq!(parse(&writes(MAX_WRITES)).unwrap().len(), 500);
    let e = refused(&writes(MAX_WRITES + 1));
    assert_eq!(e, CommitError::TooManyWrites { count: 501 });
    assert_eq!(
        e.to_string(),
        "a commit has at most 500 writes, this one has 501"
    );
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn a_verify_without_precondition_is_a_lock() {
    let writes = parse(&json!([{"verify": "c/f"}])).unwrap();
    assert!(matches!(writes[0].operation, Operation::Verify));
    assert_eq!(writes[0].precondition, None);
    assert_eq!(writes[0].path.to_string(), "c/f");
}

#[test]
fn malformed_writes_name_their_index_and_fault() {
    let precondition =
        r#"a precondition is {"exists": true|false} or {"updateTime": "<RFC 3339 time>"}"#;
    let verb = r#"name exactly one of "create", "set", "update", "delete", "verify" with the document path"#;
    let cases: Vec<(Json, String)> = vec![
        (json!({"set": "pc/a"}), "commit() takes a JSON array of writes".into()),
        (
            json!([{"verify": "pc/a", "precondition": {"exists": true}, "data": {}}]),
            r#"write 0: unexpected key "data" in a verify write"#.into(),
        ),
        (
            json!([{"verify": "pc/a", "precondition": {"updateTime": "soon"}}]),
            format!("write 0: {precondition}"),
        ),
        (
            json!([{"verify": "pc/a", "precondition": null}]),
            format!("write 0: {precondition}"),
        ),
        (
            json!([{"verify": "pc", "precondition": {"exists": true}}]),
            r#"write 0: "pc" is not a document path: a document path has an even number of segments"#.into(),
        ),
        (
            json!([{"verify": 1, "precondition": {"exists": true}}]),
            "write 0: the document path must be a string".into(),
        ),
        (
            json!([{"verify": "pc/a", "delete": "pc/a", "precondition": {"exists": true}}]),
            format!("write 0: {verb}"),
        ),
        (json!("[]"), "commit() takes a JSON array of writes".into()),
        (json!([1]), "write 0: each write must be a JSON object".into()),
        (json!([{"set": "pc/a"}]), r#"write 0: a set write needs "data""#.into()),
        (json!([{"create": "pc/a"}]), r#"write 0: a create write needs "data""#.into()),
        (json!([{"update": "pc/a"}]), r#"write 0: a update write needs "fields""#.into()),
        (json!([{"set": "pc/a", "data": {}, "delete": "pc/a"}]), format!("write 0: {verb}")),
        (json!([{"upsert": "pc/a", "data": {}}]), format!("write 0: {verb}")),
        (json!([{}]), format!("write 0: {verb}")),
        (
            json!([{"set": "pc/a", "data": {}, "merge": "yes"}]),
            r#"write 0: "merge" must be true or false"#.into(),
        ),
        (
            json!([{"set": "pc/a", "data": {}, "precondition": {"exists": true, "updateTime": "x"}}]),
            format!("write 0: {precondition}"),
        ),
        (
            json!([{"delete": "pc/a", "precondition": {"updateTime": "yesterday"}}]),
            format!("write 0: {precondition}"),
        ),
        (
            json!([{"delete": "pc/a", "precondition": {"exists": "yes"}}]),
            format!("write 0: {precondition}"),
        ),
        (
            json!([{"delete": "pc/a", "precondition": {}}]),
            format!("write 0: {precondition}"),
        ),
        (
            json!([{"delete": "pc/a", "precondition": true}]),
            format!("write 0: {precondition}"),
        ),
        (
            json!([{"set": "pc", "data": {}}]),
            r#"write 0: "pc" is not a document path: a document path has an even number of segments"#.into(),
        ),
        (
            json!([{"delete": "pc/a/b/.."}]),
            r#"write 0: segment ".." of path "pc/a/b/.." is reserved (".", ".." and names matching __.*__ are not allowed)"#.into(),
        ),
        (
            json!([{"delete": 7}]),
            "write 0: the document path must be a string".into(),
        ),
        (
            json!([{"set": "pc/a", "data": {}, "extra": 1}]),
            r#"write 0: unexpected key "extra" in a set write"#.into(),
        ),
        (
            json!([{"delete": "pc/a"}, {"delete": "pc/b", "data": {}}]),
            r#"write 1: unexpected key "data" in a delete write"#.into(),
        ),
        (
            json!([{"delete": "pc/a"}, {"delete": "pc/b"}, {"create": "pc/c", "data": [1]}]),
            "write 2: document data must be a JSON object, not an array".into(),
        ),
        (
            json!([{"update": "pc/a", "fields": {"a": {"$increment": "x"}}}]),
            "write 0: invalid $increment at a: the argument must be a number (integer or double), not string".into(),
        ),
    ];
    for (writes, message) in cases {
        let e = refused(&writes);
        assert_eq!(e.to_string(), message, "{writes}");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{writes}");
        assert_eq!(e.kind().sqlstate(), "22023");
    }
}

#[test]
fn bad_typed_json_in_data_is_22p02() {
    let e = refused(
        &json!([{"delete": "c/x"}, {"set": "c/d", "data": {"t": {"$timestamp": "yesterday"}}}]),
    );
    assert!(
        matches!(
            &e,
            CommitError::InWrite {
                index: 1,
                error: WriteError::Mutation(MutationError::TypedJson(_))
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .starts_with("write 1: invalid $timestamp at t"),
        "{e}"
    );
    assert_eq!(e.kind(), ErrorKind::InvalidTypedJson);
    assert_eq!(e.kind().sqlstate(), "22P02");
}

#[test]
fn the_first_malformed_write_is_reported() {
    let e = refused(&json!([{"delete": "c/a"}, {"delete": "c"}, {"oops": 1}]));
    assert!(
        matches!(
            e,
            CommitError::InWrite {
                index: 1,
                error: WriteError::Path(_)
            }
        ),
        "{e}"
    );
}

#[test]
fn preconditions_alone() {
    assert_eq!(
        parse_precondition(&json!({"exists": false})),
        Ok(Precondition::Exists(false))
    );
    let t = parse_precondition(&json!({"updateTime": "2024-01-01T00:00:00+01:00"})).unwrap();
    assert_eq!(
        t,
        Precondition::UpdateTime(Timestamp::parse_rfc3339("2023-12-31T23:00:00Z").unwrap())
    );
    // A time with more precision than microseconds is refused, never rounded.
    assert_eq!(
        parse_precondition(&json!({"updateTime": "2024-01-01T00:00:00.1234567Z"})),
        Err(WriteError::Precondition)
    );
}
