//! Firestore's write semantics (`docstore_core::mutation`): create, set, set with merge,
//! update, and every field transform, each rule checked on small documents.

#![allow(clippy::unwrap_used)]

use docstore_core::mutation::{FieldOp, Mutation, MutationError, WriteKind};
use docstore_core::typed_json::map_from_json;
use docstore_core::value::Map;
use docstore_core::ErrorKind;
use docstore_core::{FieldPath, Timestamp, TypedJsonError, Value};
use serde_json::Value as Json;

const T: i64 = 1_700_000_000_123_456;

fn now() -> Timestamp {
    Timestamp::from_micros(T).unwrap()
}

fn json(text: &str) -> Json {
    serde_json::from_str(text).unwrap()
}

fn doc(text: &str) -> Map {
    map_from_json(&json(text)).unwrap()
}

fn parse(kind: WriteKind, text: &str) -> Result<Mutation, MutationError> {
    Mutation::parse(kind, &json(text))
}

/// Apply `text` as `kind` to `existing`, unwrapping.
fn run(kind: WriteKind, text: &str, existing: Option<&str>) -> Map {
    let existing = existing.map(doc);
    parse(kind, text)
        .unwrap()
        .apply(existing.as_ref(), now())
        .unwrap()
}

const MERGE: WriteKind = WriteKind::Set { merge: true };
const SET: WriteKind = WriteKind::Set { merge: false };

fn paths(texts: &[&str]) -> Vec<FieldPath> {
    texts.iter().map(|t| FieldPath::parse(t).unwrap()).collect()
}

fn err(kind: WriteKind, text: &str) -> MutationError {
    parse(kind, text).unwrap_err()
}

#[test]
fn create_writes_exactly_the_data() {
    let data = r#"{"a":1,"b":{"c":[1,{"d":true}]},"e":{"$timestamp":"2022-09-01T13:23:22Z"}}"#;
    assert_eq!(run(WriteKind::Create, data, None), doc(data));
    let m = parse(WriteKind::Create, data).unwrap();
    assert_eq!(m.kind(), &WriteKind::Create);
    assert_eq!(m.field_mask(), None);
    assert_eq!(m.data(), Some(&doc(data)));
}

#[test]
fn create_of_existing_document_fails() {
    let m = parse(WriteKind::Create, r#"{"a":1}"#).unwrap();
    let e = m.apply(Some(&doc(r#"{"a":0}"#)), now()).unwrap_err();
    assert_eq!(e, MutationError::AlreadyExists);
    assert_eq!(e.kind(), ErrorKind::AlreadyExists);
}

#[test]
fn set_replaces_the_whole_document() {
    let out = run(SET, r#"{"b":{"x":1}}"#, Some(r#"{"a":1,"b":{"y":2}}"#));
    assert_eq!(out, doc(r#"{"b":{"x":1}}"#));
    assert_eq!(run(SET, "{}", Some(r#"{"a":1}"#)), Map::new());
    assert_eq!(parse(SET, "{}").unwrap().field_mask(), None);
}

#[test]
fn set_removes_transform_fields_then_applies_them() {
    let m = parse(
        SET,
        r#"{"a":{"b":{"$increment":2},"c":1},"t":{"$serverTimestamp":true}}"#,
    )
    .unwrap();
    assert_eq!(m.data(), Some(&doc(r#"{"a":{"c":1}}"#)));
    // The stored b is dropped by the replace, so the increment starts from nothing.
    let out = m
        .apply(Some(&doc(r#"{"a":{"b":10},"z":1}"#)), now())
        .unwrap();
    let expected = Map::from([
        ("a".to_owned(), Value::Map(doc(r#"{"b":2,"c":1}"#))),
        ("t".to_owned(), Value::Timestamp(now())),
    ]);
    assert_eq!(out, expected);
}

#[test]
fn delete_is_refused_in_create_and_set() {
    for kind in [WriteKind::Create, SET] {
        let e = err(kind, r#"{"a":{"b":{"$delete":true}}}"#);
        assert!(
            matches!(&e, MutationError::DeleteNotAllowed { path, .. } if path == "a.b"),
            "{e}"
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}

#[test]
fn merge_keeps_fields_outside_the_mask() {
    let out = run(
        MERGE,
        r#"{"b":2,"c":{"d":3}}"#,
        Some(r#"{"a":1,"b":1,"c":{"e":4}}"#),
    );
    assert_eq!(out, doc(r#"{"a":1,"b":2,"c":{"d":3,"e":4}}"#));
}

#[test]
fn merge_with_an_empty_map_replaces_the_subtree() {
    let out = run(MERGE, r#"{"c":{}}"#, Some(r#"{"a":1,"c":{"e":4}}"#));
    assert_eq!(out, doc(r#"{"a":1,"c":{}}"#));
    let out = run(
        MERGE,
        r#"{"c":{"d":{}}}"#,
        Some(r#"{"c":{"d":{"x":1},"e":4}}"#),
    );
    assert_eq!(out, doc(r#"{"c":{"d":{},"e":4}}"#));
    assert_eq!(
        parse(MERGE, r#"{"c":{"d":{}}}"#).unwrap().field_mask(),
        Some(paths(&["c.d"]))
    );
}

#[test]
fn merge_and_update_differ_on_nested_maps() {
    let existing = Some(r#"{"m":{"x":1,"y":2}}"#);
    assert_eq!(
        run(MERGE, r#"{"m":{"x":10}}"#, existing),
        doc(r#"{"m":{"x":10,"y":2}}"#)
    );
    assert_eq!(
        run(WriteKind::Update, r#"{"m":{"x":10}}"#, existing),
        doc(r#"{"m":{"x":10}}"#)
    );
    assert_eq!(
        run(WriteKind::Update, r#"{"m.x":10}"#, existing),
        doc(r#"{"m":{"x":10,"y":2}}"#)
    );
}

#[test]
fn merge_replaces_non_map_intermediates() {
    let out = run(MERGE, r#"{"a":{"b":1}}"#, Some(r#"{"a":"text","k":true}"#));
    assert_eq!(out, doc(r#"{"a":{"b":1},"k":true}"#));
}

#[test]
fn merge_deletes_nested_fields() {
    let data = r#"{"a":{"b":{"$delete":true}},"gone":{"$delete":true},"missing":{"$delete":true}}"#;
    let out = run(MERGE, data, Some(r#"{"a":{"b":1,"c":2},"gone":1,"k":0}"#));
    assert_eq!(out, doc(r#"{"a":{"c":2},"k":0}"#));
    // Deleting the last field of a map keeps the (now empty) map.
    let out = run(
        MERGE,
        r#"{"a":{"b":{"$delete":true}}}"#,
        Some(r#"{"a":{"b":1}}"#),
    );
    assert_eq!(out, doc(r#"{"a":{}}"#));
}

#[test]
fn merge_creates_a_missing_document() {
    let out = run(MERGE, r#"{"a":{"b":1},"d":{"$delete":true}}"#, None);
    assert_eq!(out, doc(r#"{"a":{"b":1}}"#));
}

#[test]
fn merge_mask_lists_every_leaf() {
    let m = parse(
        MERGE,
        r#"{"z":1,"a":{"b":[1,2],"c":{"d":null,"e":{}},"f":{"$delete":true},"g":{"$increment":1}},"t":{"$timestamp":"2022-09-01T13:23:22Z"}}"#,
    )
    .unwrap();
    assert_eq!(
        m.field_mask(),
        Some(paths(&["a.b", "a.c.d", "a.c.e", "a.f", "a.g", "t", "z"]))
    );
    assert_eq!(m.data(), None);
}

#[test]
fn merge_transform_in_nested_map_keeps_siblings() {
    let out = run(
        MERGE,
        r#"{"a":{"b":{"$increment":1}}}"#,
        Some(r#"{"a":{"c":1}}"#),
    );
    assert_eq!(out, doc(r#"{"a":{"b":1,"c":1}}"#));
}

#[test]
fn update_replaces_a_map_value_entirely() {
    let out = run(
        WriteKind::Update,
        r#"{"a":{"b":1},"c":{}}"#,
        Some(r#"{"a":{"x":1},"c":{"y":2},"k":3}"#),
    );
    assert_eq!(out, doc(r#"{"a":{"b":1},"c":{},"k":3}"#));
}

#[test]
fn update_paths_create_intermediate_maps() {
    let out = run(
        WriteKind::Update,
        r#"{"a.b.c":1,"`x.y`.z":2}"#,
        Some(r#"{"k":0}"#),
    );
    assert_eq!(out, doc(r#"{"a":{"b":{"c":1}},"k":0,"x.y":{"z":2}}"#));
}

#[test]
fn update_replaces_non_map_intermediates() {
    let out = run(
        WriteKind::Update,
        r#"{"a.b":1,"n.m":{"$increment":2}}"#,
        Some(r#"{"a":[1,2],"n":5}"#),
    );
    assert_eq!(out, doc(r#"{"a":{"b":1},"n":{"m":2}}"#));
}

#[test]
fn update_deletes_nested_and_missing_fields() {
    let out = run(
        WriteKind::Update,
        r#"{"a.b":{"$delete":true},"missing":{"$delete":true},"x.y.z":{"$delete":true},"s.t":{"$delete":true}}"#,
        Some(r#"{"a":{"b":1,"c":2},"s":"str"}"#),
    );
    assert_eq!(out, doc(r#"{"a":{"c":2},"s":"str"}"#));
}

#[test]
fn update_of_missing_document_is_not_found() {
    let m = parse(WriteKind::Update, r#"{"a":1}"#).unwrap();
    let e = m.apply(None, now()).unwrap_err();
    assert_eq!(e, MutationError::NotFound);
    assert_eq!(e.kind(), ErrorKind::NotFound);
}

#[test]
fn update_paths_may_not_overlap() {
    let e = err(WriteKind::Update, r#"{"a":1,"a.b":2}"#);
    assert_eq!(
        e,
        MutationError::ConflictingFieldPaths {
            parent: "a".into(),
            child: "a.b".into()
        }
    );
    // Several paths inside one: still a conflict.
    let e = err(WriteKind::Update, r#"{"a":1,"a.a":2,"a.b.c":3}"#);
    assert!(
        matches!(e, MutationError::ConflictingFieldPaths { .. }),
        "{e}"
    );
    // `ab` is not inside `a`.
    assert!(parse(WriteKind::Update, r#"{"a":1,"ab":2,"`a.b`":3}"#).is_ok());
    assert_eq!(
        err(
            WriteKind::Update,
            r#"{"a.b":{"$delete":true},"a":{"$increment":1}}"#
        )
        .kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn update_paths_may_not_repeat() {
    let e = err(WriteKind::Update, r#"{"a.b":1,"`a`.b":2}"#);
    assert_eq!(e, MutationError::DuplicateFieldPath { path: "a.b".into() });
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn empty_update_changes_nothing() {
    let m = parse(WriteKind::Update, "{}").unwrap();
    assert_eq!(m.field_mask(), Some(vec![]));
    let existing = doc(r#"{"a":1}"#);
    assert_eq!(m.apply(Some(&existing), now()).unwrap(), existing);
    assert_eq!(m.apply(None, now()).unwrap_err(), MutationError::NotFound);
}

#[test]
fn update_walks_map_values_for_transforms() {
    let m = parse(
        WriteKind::Update,
        r#"{"a":{"b":1,"c":{"d":{"$increment":5}},"t":{"$serverTimestamp":true}}}"#,
    )
    .unwrap();
    assert_eq!(m.field_mask(), Some(paths(&["a"])));
    let out = m
        .apply(Some(&doc(r#"{"a":{"c":{"d":1},"old":1}}"#)), now())
        .unwrap();
    // The map replaces a, so the increment starts from nothing.
    let mut expected = doc(r#"{"a":{"b":1,"c":{"d":5}}}"#);
    if let Some(Value::Map(a)) = expected.get_mut("a") {
        a.insert("t".into(), Value::Timestamp(now()));
    }
    assert_eq!(out, expected);
}

#[test]
fn update_refuses_delete_nested_in_a_value() {
    let e = err(WriteKind::Update, r#"{"a":{"b":{"$delete":true}}}"#);
    assert!(
        matches!(&e, MutationError::DeleteNotAllowed { path, .. } if path == "a.b"),
        "{e}"
    );
}

#[test]
fn update_keys_must_be_field_paths() {
    for bad in [
        r#"{"a..b":1}"#,
        r#"{"a b":1}"#,
        r#"{"":1}"#,
        r#"{"$map":{"a":1}}"#,
    ] {
        let e = err(WriteKind::Update, bad);
        assert!(
            matches!(e, MutationError::InvalidFieldPath(_)),
            "{bad}: {e}"
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
    let e = err(WriteKind::Update, "[1]");
    assert!(matches!(e, MutationError::NotAnObject { .. }), "{e}");
}

#[test]
fn reserved_field_names_are_refused() {
    for (kind, text, at) in [
        (WriteKind::Update, r#"{"__name__":1}"#, "__name__"),
        (WriteKind::Update, r#"{"a.__x__":1}"#, "a.__x__"),
        (WriteKind::Update, r#"{"a":{"__x__":1}}"#, "a.__x__"),
        (SET, r#"{"__name__":1}"#, "__name__"),
        (MERGE, r#"{"a":{"____":{"$increment":1}}}"#, "a.____"),
        (
            WriteKind::Create,
            r#"{"a":[{"b":{"__x__":1}}]}"#,
            "a[0].b.__x__",
        ),
        (
            MERGE,
            r#"{"a":{"$arrayUnion":[{"__y__":1}]}}"#,
            "a.$arrayUnion[0].__y__",
        ),
    ] {
        let e = err(kind, text);
        assert_eq!(
            e,
            MutationError::ReservedField { path: at.into() },
            "{text}"
        );
    }
    // Not reserved: too short, or not both ends.
    assert!(parse(SET, r#"{"__":1,"___":2,"__a":3,"a__":4,".":5}"#).is_ok());
}

#[test]
fn empty_field_names_are_refused() {
    let e = err(SET, r#"{"a":{"":1}}"#);
    assert!(matches!(e, MutationError::InvalidFieldPath(_)), "{e}");
    let e = err(SET, "{\"a\\u0000\":1}");
    assert!(
        matches!(
            e,
            MutationError::TypedJson(TypedJsonError::NulCharacter { .. })
        ),
        "{e}"
    );
}

#[test]
fn increment_saturates_integers() {
    let up = run(
        WriteKind::Update,
        r#"{"n":{"$increment":1}}"#,
        Some(r#"{"n":9223372036854775807}"#),
    );
    assert_eq!(up, doc(r#"{"n":9223372036854775807}"#));
    let down = run(
        WriteKind::Update,
        r#"{"n":{"$increment":-2}}"#,
        Some(r#"{"n":-9223372036854775807}"#),
    );
    assert_eq!(down["n"], Value::Integer(i64::MIN));
    let plain = run(
        WriteKind::Update,
        r#"{"n":{"$increment":-3}}"#,
        Some(r#"{"n":5}"#),
    );
    assert_eq!(plain["n"], Value::Integer(2));
}

#[test]
fn increment_with_a_double_is_double_arithmetic() {
    let a = run(
        WriteKind::Update,
        r#"{"n":{"$increment":0.5}}"#,
        Some(r#"{"n":1}"#),
    );
    assert_eq!(a["n"], Value::Double(1.5));
    let b = run(
        WriteKind::Update,
        r#"{"n":{"$increment":2}}"#,
        Some(r#"{"n":1.0}"#),
    );
    assert_eq!(b["n"], Value::Double(3.0));
    let c = run(
        WriteKind::Update,
        r#"{"n":{"$increment":1.0}}"#,
        Some(r#"{"n":9223372036854775807}"#),
    );
    assert_eq!(c["n"], Value::Double(2f64.powi(63)));
    let d = run(
        WriteKind::Update,
        r#"{"n":{"$increment":{"$double":"-Infinity"}}}"#,
        Some(r#"{"n":{"$double":"Infinity"}}"#),
    );
    assert!(matches!(d["n"], Value::Double(x) if x.is_nan()));
}

#[test]
fn increment_of_missing_or_non_number_is_the_operand() {
    let out = run(
        MERGE,
        r#"{"missing":{"$increment":2},"s":{"$increment":2.5},"b":{"$increment":1},"m":{"$increment":1}}"#,
        Some(r#"{"s":"7","b":true,"m":{"x":1}}"#),
    );
    assert_eq!(out, doc(r#"{"b":1,"m":1,"missing":2,"s":2.5}"#));
}

#[test]
fn numeric_transforms_need_a_number() {
    for tag in ["$increment", "$max", "$min"] {
        for arg in [
            r#""1""#,
            "null",
            "[1]",
            r#"{"$increment":1}"#,
            r#"{"a":1}"#,
            "true",
        ] {
            let e = err(MERGE, &format!(r#"{{"f":{{"{tag}":{arg}}}}}"#));
            assert!(
                matches!(&e, MutationError::InvalidTransform { path, tag: t, .. } if path == "f" && *t == tag),
                "{tag} {arg}: {e}"
            );
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        }
    }
    let e = err(MERGE, r#"{"f":{"$increment":1e400}}"#);
    assert_eq!(e.kind(), ErrorKind::InvalidTypedJson, "{e}");
    assert!(parse(MERGE, r#"{"f":{"$max":{"$double":"NaN"}}}"#).is_ok());
}

#[test]
fn max_and_min_keep_the_stored_value_on_a_tie() {
    let existing = r#"{"i":3,"d":3.0,"z":0,"nz":{"$double":"-0.0"}}"#;
    for tag in ["$max", "$min"] {
        let text = format!(
            r#"{{"i":{{"{tag}":3.0}},"d":{{"{tag}":3}},"z":{{"{tag}":{{"$double":"-0.0"}}}},"nz":{{"{tag}":0}}}}"#
        );
        assert_eq!(
            run(WriteKind::Update, &text, Some(existing)),
            doc(existing),
            "{tag}"
        );
    }
}

#[test]
fn max_and_min_keep_the_winners_type() {
    let existing = Some(r#"{"a":3,"b":2.5}"#);
    assert_eq!(
        run(
            WriteKind::Update,
            r#"{"a":{"$max":3.5},"b":{"$max":3}}"#,
            existing
        ),
        doc(r#"{"a":3.5,"b":3}"#)
    );
    assert_eq!(
        run(
            WriteKind::Update,
            r#"{"a":{"$max":2.5},"b":{"$max":2}}"#,
            existing
        ),
        doc(r#"{"a":3,"b":2.5}"#)
    );
    assert_eq!(
        run(
            WriteKind::Update,
            r#"{"a":{"$min":2.5},"b":{"$min":2}}"#,
            existing
        ),
        doc(r#"{"a":2.5,"b":2}"#)
    );
    assert_eq!(
        run(
            WriteKind::Update,
            r#"{"a":{"$min":4.0},"b":{"$min":3}}"#,
            existing
        ),
        doc(r#"{"a":3,"b":2.5}"#)
    );
}

#[test]
fn max_and_min_with_nan_are_nan() {
    for tag in ["$max", "$min"] {
        let out = run(
            WriteKind::Update,
            &format!(
                r#"{{"a":{{"{tag}":{{"$double":"NaN"}}}},"b":{{"{tag}":5}},"c":{{"{tag}":{{"$double":"NaN"}}}}}}"#
            ),
            Some(r#"{"a":1,"b":{"$double":"NaN"},"c":{"$double":"NaN"}}"#),
        );
        for field in ["a", "b", "c"] {
            assert!(
                matches!(out[field], Value::Double(x) if x.is_nan()),
                "{tag} {field}: {out:?}"
            );
        }
    }
}

#[test]
fn max_and_min_of_missing_or_non_number_are_the_operand() {
    let out = run(
        MERGE,
        r#"{"m":{"$max":1},"s":{"$min":2.5},"n":{"$max":-1}}"#,
        Some(r#"{"s":"x","n":null}"#),
    );
    assert_eq!(out, doc(r#"{"m":1,"n":-1,"s":2.5}"#));
}

#[test]
fn array_union_appends_missing_elements_once() {
    let out = run(
        WriteKind::Update,
        r#"{"a":{"$arrayUnion":[1.0,2,2,{"x":1.0},[3],null,{"$double":"NaN"}]}}"#,
        Some(r#"{"a":[1,{"x":1},[3.0],{"$double":"NaN"}]}"#),
    );
    assert_eq!(
        out,
        doc(r#"{"a":[1,{"x":1},[3.0],{"$double":"NaN"},2,null]}"#)
    );
    // Duplicates already stored stay.
    let out = run(
        WriteKind::Update,
        r#"{"a":{"$arrayUnion":[1]}}"#,
        Some(r#"{"a":[1,1]}"#),
    );
    assert_eq!(out, doc(r#"{"a":[1,1]}"#));
}

#[test]
fn array_union_of_non_array_starts_from_empty() {
    let out = run(
        MERGE,
        r#"{"s":{"$arrayUnion":[1,1.0,"x"]},"m":{"$arrayUnion":[]},"v":{"$arrayUnion":[1]}}"#,
        Some(r#"{"s":"text","v":{"$vector":[1.0]}}"#),
    );
    assert_eq!(out, doc(r#"{"m":[],"s":[1,"x"],"v":[1]}"#));
}

#[test]
fn array_remove_removes_every_equal_element() {
    let out = run(
        WriteKind::Update,
        r#"{"a":{"$arrayRemove":[1.0,{"$double":"NaN"},{"x":1}]},"s":{"$arrayRemove":[1]},"m":{"$arrayRemove":[1]}}"#,
        Some(r#"{"a":[1,2,1,{"$double":"NaN"},{"x":1.0},3,"1"],"s":"text"}"#),
    );
    assert_eq!(out, doc(r#"{"a":[2,3,"1"],"m":[],"s":[]}"#));
}

#[test]
fn array_transforms_need_an_array() {
    for tag in ["$arrayUnion", "$arrayRemove"] {
        let e = err(SET, &format!(r#"{{"f":{{"{tag}":1}}}}"#));
        assert!(matches!(e, MutationError::InvalidTransform { .. }), "{e}");
    }
    let e = err(SET, r#"{"f":{"$arrayUnion":[{"$bytes":"***"}]}}"#);
    assert!(
        matches!(&e, MutationError::TypedJson(TypedJsonError::BadTag { at, .. }) if at == "f.$arrayUnion[0]"),
        "{e}"
    );
    let e = err(SET, r#"{"f":{"$arrayRemove":[{"$increment":1}]}}"#);
    assert!(matches!(e, MutationError::TransformInArray { .. }), "{e}");
}

#[test]
fn server_timestamp_is_the_commit_time() {
    let out = run(
        WriteKind::Create,
        r#"{"a":{"b":{"$serverTimestamp":true}}}"#,
        None,
    );
    assert_eq!(
        out,
        Map::from([(
            "a".to_owned(),
            Value::Map(Map::from([("b".to_owned(), Value::Timestamp(now()))]))
        )])
    );
}

#[test]
fn server_timestamp_and_delete_need_true() {
    for text in [
        r#"{"a":{"$serverTimestamp":false}}"#,
        r#"{"a":{"$serverTimestamp":1}}"#,
        r#"{"a":{"$delete":null}}"#,
        r#"{"a":{"$delete":"yes"}}"#,
    ] {
        let e = err(MERGE, text);
        assert!(
            matches!(&e, MutationError::InvalidTransform { path, .. } if path == "a"),
            "{text}: {e}"
        );
    }
    let e = err(WriteKind::Update, r#"{"a":{"$delete":false}}"#);
    assert!(matches!(e, MutationError::InvalidTransform { .. }), "{e}");
}

#[test]
fn transforms_inside_arrays_are_refused() {
    for (kind, text, at) in [
        (SET, r#"{"a":[1,{"$increment":1}]}"#, "a[1]"),
        (
            MERGE,
            r#"{"a":{"b":[[{"c":{"$serverTimestamp":true}}]]}}"#,
            "a.b[0][0].c",
        ),
        (WriteKind::Update, r#"{"a.b":[{"$delete":true}]}"#, "a.b[0]"),
    ] {
        let e = err(kind, text);
        assert!(
            matches!(&e, MutationError::TransformInArray { path, .. } if path == at),
            "{text}: {e}"
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}

#[test]
fn map_tag_is_a_literal_map_never_a_transform() {
    let out = run(SET, r#"{"a":{"$map":{"$increment":1}}}"#, None);
    let inner = Map::from([("$increment".to_owned(), Value::Integer(1))]);
    assert_eq!(out, Map::from([("a".to_owned(), Value::Map(inner))]));
    // Its contents are still walked: a transform inside applies at its path.
    let out = run(
        MERGE,
        r#"{"a":{"$map":{"$max":{"$increment":3}}}}"#,
        Some(r#"{"a":{"k":1}}"#),
    );
    assert_eq!(
        out["a"],
        Value::Map(Map::from([
            ("$max".to_owned(), Value::Integer(3)),
            ("k".to_owned(), Value::Integer(1)),
        ]))
    );
    // An empty $map is an empty map leaf.
    assert_eq!(
        run(MERGE, r#"{"a":{"$map":{}}}"#, Some(r#"{"a":{"k":1}}"#)),
        doc(r#"{"a":{}}"#)
    );
    // The whole document may be a $map.
    assert_eq!(
        run(WriteKind::Create, r#"{"$map":{"$ref":1}}"#, None)["$ref"],
        Value::Integer(1)
    );
}

#[test]
fn bad_typed_json_is_located_by_full_path() {
    let e = err(MERGE, r#"{"a":{"b":{"$timestamp":"yesterday"}}}"#);
    assert!(
        matches!(&e, MutationError::TypedJson(TypedJsonError::BadTag { at, .. }) if at == "a.b"),
        "{e}"
    );
    assert_eq!(e.kind(), ErrorKind::InvalidTypedJson);
    assert_eq!(e.kind().sqlstate(), "22P02");
    let e = err(WriteKind::Update, r#"{"x.y":[1,{"z":1e999}]}"#);
    assert!(
        matches!(&e, MutationError::TypedJson(TypedJsonError::NumberOutOfRange { at, .. }) if at == "x.y[1].z"),
        "{e}"
    );
    let e = err(SET, r#"{"`q`":{"$map":5}}"#);
    assert!(
        matches!(e, MutationError::TypedJson(TypedJsonError::BadTag { .. })),
        "{e}"
    );
}

#[test]
fn document_data_must_be_an_object() {
    for text in [
        "[]",
        "1",
        "null",
        r#""s""#,
        r#"{"$increment":1}"#,
        r#"{"$timestamp":"2022-09-01T13:23:22Z"}"#,
    ] {
        for kind in [WriteKind::Create, SET, MERGE] {
            let e = err(kind, text);
            assert!(
                matches!(e, MutationError::NotAnObject { .. }),
                "{text}: {e}"
            );
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        }
    }
    assert_eq!(
        err(SET, r#"{"$delete":true}"#).to_string(),
        "document data must be a JSON object, not a field transform ($delete)"
    );
}

#[test]
fn field_names_in_data_are_literal() {
    let out = run(
        MERGE,
        r#"{"a.b":1,"c d":{"e":2}}"#,
        Some(r#"{"a":{"b":0}}"#),
    );
    assert_eq!(out, doc(r#"{"a":{"b":0},"a.b":1,"c d":{"e":2}}"#));
    assert_eq!(
        parse(MERGE, r#"{"a.b":1,"c d":{"e":2}}"#)
            .unwrap()
            .field_mask(),
        Some(paths(&["`a.b`", "`c d`.e"]))
    );
}

#[test]
fn plain_writes_run_before_transforms() {
    let m = parse(
        WriteKind::Update,
        r#"{"a":{"$increment":1},"b":2,"c":{"$delete":true},"d":{"e":{"$max":1}}}"#,
    )
    .unwrap();
    let kinds: Vec<&str> = m
        .ops()
        .iter()
        .map(|(_, op)| match op {
            FieldOp::Set(_) => "set",
            FieldOp::Delete => "delete",
            FieldOp::Transform(t) => t.tag(),
        })
        .collect();
    assert_eq!(kinds, ["set", "delete", "set", "$increment", "$max"]);
    assert_eq!(m.field_mask(), Some(paths(&["a", "b", "c", "d"])));
}

#[test]
fn messages_name_the_field() {
    assert_eq!(
        err(MERGE, r#"{"a":{"`b":{"$increment":"x"}}}"#).to_string(),
        "invalid $increment at a.`\\`b`: the argument must be a number (integer or double), not string"
    );
    assert_eq!(
        err(WriteKind::Update, r#"{"a":1,"a.b":2}"#).to_string(),
        "field paths a and a.b conflict: a.b is inside a"
    );
}
