//! The conversion between Firestore's protobuf values and ours (src/proto.rs): property tests
//! both ways, seeded by `DOCSTORE_SEED` (src/test_env.rs), and one test per edge.
#![cfg(feature = "firestore-proto")]
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::HashMap;

use docstore_core::proto::{
    document_from_typed_json, document_to_proto, fields_from_proto, fields_from_typed_json,
    fields_to_proto, timestamp_from_proto, timestamp_to_proto, value_from_proto, value_into_proto,
    value_to_proto, ArrayValue, DatabaseName, MapValue, ProtoBuild, ProtoDocument, ProtoError,
    ProtoTimestamp, ProtoValue, ValueType,
};
use docstore_core::proto_wire::document_wire;
use docstore_core::test_env;
use docstore_core::typed_json;
use docstore_core::value::{Map, Timestamp, MAX_TIMESTAMP_MICROS, MIN_TIMESTAMP_MICROS};
use docstore_core::{Code, ErrorKind, ResourcePath, Value};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use prost::Message;

mod common;
use common::values::{leaf, small_string};

fn db() -> DatabaseName {
    DatabaseName {
        project: "p".into(),
        database: "(default)".into(),
    }
}

fn pv(kind: ValueType) -> ProtoValue {
    ProtoValue {
        value_type: Some(kind),
    }
}

fn map_pv(fields: Vec<(&str, ProtoValue)>) -> ProtoValue {
    pv(ValueType::MapValue(MapValue {
        fields: fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
    }))
}

fn decode(p: &ProtoValue) -> Result<Value, ProtoError> {
    value_from_proto(p, &db())
}

fn round_trip(v: &Value) -> Value {
    decode(&value_to_proto(v, &db())).unwrap()
}

/// Map keys of every shape: empty, dots, backticks, spaces, unicode, reserved-looking.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "",
            ".",
            "a.b",
            "`",
            "`a`",
            "a b",
            "ключ",
            "🔥",
            "__name__",
            "\\",
            "$map",
            "$ref",
            "$increment"
        ])
        .prop_map(str::to_owned),
        small_string(),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4).prop_map(Value::Map),
        ]
    })
}

/// The wire form of `v` as a client may send it: timestamps with nanoseconds below the
/// microsecond (`extra`), references in any project, nulls with any enum number.
fn noisy(v: &Value, extra: i32, project: &str) -> ProtoValue {
    let other = DatabaseName {
        project: project.to_owned(),
        database: "(default)".into(),
    };
    let mut p = value_to_proto(v, &other);
    add_noise(&mut p, extra);
    p
}

fn add_noise(p: &mut ProtoValue, extra: i32) {
    match &mut p.value_type {
        Some(ValueType::TimestampValue(t)) => t.nanos += extra,
        Some(ValueType::NullValue(n)) => *n = extra,
        Some(ValueType::ArrayValue(a)) => a.values.iter_mut().for_each(|v| add_noise(v, extra)),
        Some(ValueType::MapValue(m)) => m.fields.values_mut().for_each(|v| add_noise(v, extra)),
        _ => {}
    }
}

/// Structural equality of wire values with doubles compared bit for bit (NaN is NaN).
fn same(a: &ProtoValue, b: &ProtoValue) -> bool {
    match (&a.value_type, &b.value_type) {
        (Some(ValueType::DoubleValue(x)), Some(ValueType::DoubleValue(y))) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        (Some(ValueType::GeoPointValue(x)), Some(ValueType::GeoPointValue(y))) => {
            x.latitude.to_bits() == y.latitude.to_bits()
                && x.longitude.to_bits() == y.longitude.to_bits()
        }
        (Some(ValueType::ArrayValue(x)), Some(ValueType::ArrayValue(y))) => {
            x.values.len() == y.values.len()
                && x.values.iter().zip(&y.values).all(|(a, b)| same(a, b))
        }
        (Some(ValueType::MapValue(x)), Some(ValueType::MapValue(y))) => {
            x.fields.len() == y.fields.len()
                && x.fields
                    .iter()
                    .all(|(k, a)| y.fields.get(k).is_some_and(|b| same(a, b)))
        }
        (x, y) => x == y,
    }
}

fn runner(test: &str) -> (u64, TestRunner) {
    let seed = test_env::seed(test, None);
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases: 5_000,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    (seed, TestRunner::new_with_rng(config, rng))
}

#[test]
fn ours_to_wire_and_back_is_the_identity() {
    let (seed, mut runner) = runner("proto_values::ours_to_wire_and_back_is_the_identity");
    let result = runner.run(&value(), |v| {
        let back = decode(&value_to_proto(&v, &db()))
            .map_err(|e| TestCaseError::fail(format!("{e}: {v:?}")))?;
        prop_assert_eq!(&back, &v);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e} (replay with DOCSTORE_SEED={seed})");
    }
}

#[test]
fn wire_to_ours_and_back_is_the_canonical_wire_form() {
    let (seed, mut runner) =
        runner("proto_values::wire_to_ours_and_back_is_the_canonical_wire_form");
    let strategy = (
        value(),
        0..1_000i32,
        prop::sample::select(vec!["p", "other", "x-1"]),
    );
    let result = runner.run(&strategy, |(v, extra, project)| {
        // What a client may send decodes to the value it stands for ...
        let sent = noisy(&v, extra, project);
        let decoded = decode(&sent).map_err(|e| TestCaseError::fail(format!("{e}: {sent:?}")))?;
        prop_assert_eq!(&decoded, &v);
        // ... and the canonical wire form is a fixed point of decode then encode.
        let canonical = value_to_proto(&v, &db());
        let again = value_to_proto(&decode(&canonical).unwrap(), &db());
        prop_assert!(same(&again, &canonical), "{:?} vs {:?}", again, canonical);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e} (replay with DOCSTORE_SEED={seed})");
    }
}

#[test]
fn int64_extremes_round_trip() {
    for i in [i64::MIN, i64::MAX, i64::MIN + 1, 0, -1] {
        assert_eq!(
            value_to_proto(&Value::Integer(i), &db()).value_type,
            Some(ValueType::IntegerValue(i))
        );
        assert_eq!(round_trip(&Value::Integer(i)), Value::Integer(i));
    }
}

#[test]
fn nan_negative_zero_and_infinities_keep_their_bits() {
    for d in [
        f64::NAN,
        -0.0,
        0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        5e-324,
    ] {
        let Value::Double(back) = round_trip(&Value::Double(d)) else {
            panic!("not a double");
        };
        assert!(
            back.to_bits() == d.to_bits() || (d.is_nan() && back.is_nan()),
            "{d}"
        );
    }
    let Value::Double(z) = decode(&pv(ValueType::DoubleValue(-0.0))).unwrap() else {
        panic!("not a double");
    };
    assert!(z.is_sign_negative());
}

#[test]
fn timestamps_truncate_to_microseconds() {
    let t = |seconds, nanos| timestamp_from_proto(&ProtoTimestamp { seconds, nanos });
    assert_eq!(t(1, 999).unwrap().micros(), 1_000_000);
    assert_eq!(t(1, 1_999).unwrap().micros(), 1_000_001);
    assert_eq!(t(0, 999_999_999).unwrap().micros(), 999_999);
    // Before the epoch: nanos count forwards from `seconds`, so truncation is a floor.
    assert_eq!(t(-1, 1_500).unwrap().micros(), -999_999);
    assert_eq!(t(-1, 0).unwrap().micros(), -1_000_000);
    // The ends of the range, and the wire form of ours.
    let min = Timestamp::from_micros(MIN_TIMESTAMP_MICROS).unwrap();
    let max = Timestamp::from_micros(MAX_TIMESTAMP_MICROS).unwrap();
    for ts in [min, max, Timestamp::from_micros(-1).unwrap()] {
        let wire = timestamp_to_proto(ts);
        assert!((0..1_000_000_000).contains(&wire.nanos));
        assert_eq!(wire.nanos % 1_000, 0);
        assert_eq!(timestamp_from_proto(&wire).unwrap(), ts);
    }
    assert_eq!(timestamp_to_proto(max).nanos, 999_999_000);
    assert_eq!(
        t(timestamp_to_proto(max).seconds, 999_999_999).unwrap(),
        max
    );
}

#[test]
fn bad_timestamps_are_invalid_argument() {
    let min = timestamp_to_proto(Timestamp::from_micros(MIN_TIMESTAMP_MICROS).unwrap());
    let max = timestamp_to_proto(Timestamp::from_micros(MAX_TIMESTAMP_MICROS).unwrap());
    for (seconds, nanos) in [
        (0, -1),
        (0, 1_000_000_000),
        (min.seconds - 1, 999_999_999),
        (max.seconds + 1, 0),
        (i64::MAX, 0),
        (i64::MIN, 0),
    ] {
        let e = timestamp_from_proto(&ProtoTimestamp { seconds, nanos }).unwrap_err();
        assert!(matches!(e, ProtoError::BadTimestamp { .. }), "{e}");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
    let nested = map_pv(vec![(
        "when",
        pv(ValueType::TimestampValue(ProtoTimestamp {
            seconds: 0,
            nanos: -5,
        })),
    )]);
    let e = decode(&nested).unwrap_err();
    assert_eq!(
        e.to_string(),
        "timestamp at when is invalid: nanos must be between 0 and 999999999, not -5"
    );
}

#[test]
fn geopoints_must_be_on_the_globe() {
    use docstore_core::proto::LatLng;
    let g = |latitude, longitude| {
        decode(&pv(ValueType::GeoPointValue(LatLng {
            latitude,
            longitude,
        })))
    };
    assert!(g(90.0, -180.0).is_ok());
    assert!(g(-90.0, 180.0).is_ok());
    for (lat, lng) in [
        (90.5, 0.0),
        (0.0, 180.5),
        (f64::NAN, 0.0),
        (0.0, f64::INFINITY),
    ] {
        let e = g(lat, lng).unwrap_err();
        assert!(matches!(e, ProtoError::BadGeoPoint { .. }), "{e}");
    }
}

#[test]
fn vectors_travel_as_firestore_maps() {
    let v = Value::Vector(vec![1.0, -0.0, 2.5]);
    let wire = value_to_proto(&v, &db());
    let expected = map_pv(vec![
        ("__type__", pv(ValueType::StringValue("__vector__".into()))),
        (
            "value",
            pv(ValueType::ArrayValue(ArrayValue {
                values: vec![
                    pv(ValueType::DoubleValue(1.0)),
                    pv(ValueType::DoubleValue(-0.0)),
                    pv(ValueType::DoubleValue(2.5)),
                ],
            })),
        ),
    ]);
    assert!(same(&wire, &expected), "{wire:?}");
    assert_eq!(round_trip(&v), v);
    assert_eq!(round_trip(&Value::Vector(vec![])), Value::Vector(vec![]));
}

#[test]
fn malformed_vectors_are_invalid_argument() {
    let tag = || pv(ValueType::StringValue("__vector__".into()));
    let array = |values| pv(ValueType::ArrayValue(ArrayValue { values }));
    let cases = [
        map_pv(vec![("__type__", tag())]),
        map_pv(vec![
            ("__type__", tag()),
            ("value", pv(ValueType::DoubleValue(1.0))),
        ]),
        map_pv(vec![
            ("__type__", tag()),
            ("value", array(vec![pv(ValueType::IntegerValue(1))])),
        ]),
        map_pv(vec![
            ("__type__", tag()),
            ("value", array(vec![])),
            ("x", pv(ValueType::NullValue(0))),
        ]),
        map_pv(vec![
            ("__type__", tag()),
            ("value", array(vec![pv(ValueType::DoubleValue(0.5)); 2_049])),
        ]),
    ];
    for case in cases {
        let e = decode(&case).unwrap_err();
        assert!(matches!(e, ProtoError::BadVector { .. }), "{e}");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
    let at_limit = map_pv(vec![
        ("__type__", tag()),
        ("value", array(vec![pv(ValueType::DoubleValue(0.5)); 2_048])),
    ]);
    assert_eq!(decode(&at_limit).unwrap(), Value::Vector(vec![0.5; 2_048]));
    // Another `__type__` is a plain map (the document checks refuse the reserved name).
    let other = map_pv(vec![("__type__", pv(ValueType::StringValue("x".into())))]);
    assert!(matches!(decode(&other).unwrap(), Value::Map(_)));
}

#[test]
fn references_are_within_the_database() {
    let r = |name: &str| decode(&pv(ValueType::ReferenceValue(name.into())));
    let path = ResourcePath::parse_document("c/d/e/f").unwrap();
    assert_eq!(
        value_to_proto(&Value::Reference(path.clone()), &db()).value_type,
        Some(ValueType::ReferenceValue(
            "projects/p/databases/(default)/documents/c/d/e/f".into()
        ))
    );
    assert_eq!(
        r("projects/any-project/databases/(default)/documents/c/d/e/f").unwrap(),
        Value::Reference(path)
    );
    let e = r("projects/p/databases/other-db/documents/c/d").unwrap_err();
    assert_eq!(
        e.to_string(),
        "reference at <root> names database \"other-db\", but this request is on database \"(default)\": references across databases are not supported"
    );
    for bad in [
        "projects/p/databases/(default)/documents",
        "projects/p/databases/(default)/documents/c",
        "projects/p/databases/(default)/documents/c//d",
        "projects/p/databases/(default)/documents//c/d",
        "projects/p/databases/(default)/documents/",
        "projects/p/databases/(default)/documentsX/c/d",
        "projects/p/databases/(default)/documents/c/__x__",
        "projects/p/databases/(default)/c/d",
        "projects/p/databases/(default)",
        "projects//databases/(default)/documents/c/d",
        "c/d",
        "",
    ] {
        let e = r(bad).unwrap_err();
        assert!(matches!(e, ProtoError::BadReference { .. }), "{bad}: {e}");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}

#[test]
fn names_parse_to_paths() {
    let name = |n: &str| db().parse_name(n);
    assert_eq!(
        name("projects/x/databases/(default)/documents").unwrap(),
        None
    );
    assert_eq!(
        name("projects/x/databases/(default)/documents/c").unwrap(),
        Some(ResourcePath::parse("c").unwrap())
    );
    assert!(matches!(
        name("projects/x/databases/db2/documents/c/d").unwrap_err(),
        ProtoError::OtherDatabase { .. }
    ));
    let e = name("projects/x/databases/(default)/documents/c//d").unwrap_err();
    assert!(e.to_string().starts_with("name is invalid: "), "{e}");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let (named, rest) = DatabaseName::split_name("projects/x/databases/db-2/documents/c").unwrap();
    assert_eq!(
        (named.project.as_str(), named.database.as_str(), rest),
        ("x", "db-2", "/documents/c")
    );
    assert_eq!(
        DatabaseName::split_name("projects/x/databases/d")
            .unwrap()
            .1,
        ""
    );
    assert!(DatabaseName::split_name("projects/x/databases/").is_none());
    assert!(DatabaseName::split_name("projects/x").is_none());
    assert_eq!(
        db().document_name(&ResourcePath::parse("c/d").unwrap()),
        "projects/p/databases/(default)/documents/c/d"
    );
}

#[test]
fn maps_keep_any_key() {
    let keys = ["", ".", "a.b", "`", "a`b", "a b", "ключ", "🔥", "\\", "a/b"];
    let map: Map = keys
        .iter()
        .map(|k| ((*k).to_owned(), Value::String((*k).to_owned())))
        .collect();
    assert_eq!(
        round_trip(&Value::Map(map.clone())),
        Value::Map(map.clone())
    );
    let fields = docstore_core::proto::fields_to_proto(&map, &db());
    assert_eq!(fields_from_proto(&fields, &db()).unwrap(), map);
}

#[test]
fn values_without_a_type_or_not_storable_are_refused_where_they_are() {
    let missing = ProtoValue { value_type: None };
    let nested = map_pv(vec![(
        "a.b",
        pv(ValueType::ArrayValue(ArrayValue {
            values: vec![pv(ValueType::NullValue(0)), missing.clone()],
        })),
    )]);
    let e = decode(&nested).unwrap_err();
    assert_eq!(
        e.to_string(),
        "value at `a.b`.1 has no type set (a Value must hold one of its kinds)"
    );
    let e = decode(&missing).unwrap_err();
    assert!(matches!(e, ProtoError::NoType { .. }));
    let e = decode(&pv(ValueType::FieldReferenceValue("a".into()))).unwrap_err();
    assert!(matches!(e, ProtoError::NotStorable { .. }), "{e}");
    let e = decode(&pv(ValueType::VariableReferenceValue("a".into()))).unwrap_err();
    assert!(matches!(e, ProtoError::NotStorable { .. }), "{e}");
    assert_eq!(e.kind().code(), Code::InvalidArgument);
}

#[test]
fn documents_carry_their_name_and_times() {
    let path = ResourcePath::parse_document("c/d").unwrap();
    let fields = Map::from([("n".to_owned(), Value::Integer(1))]);
    let created = Timestamp::from_micros(1).unwrap();
    let updated = Timestamp::from_micros(2_000_001).unwrap();
    let doc = document_to_proto(&db(), &path, &fields, created, updated);
    assert_eq!(doc.name, "projects/p/databases/(default)/documents/c/d");
    assert_eq!(
        doc.update_time,
        Some(ProtoTimestamp {
            seconds: 2,
            nanos: 1_000
        })
    );
    assert_eq!(fields_from_proto(&doc.fields, &db()).unwrap(), fields);
    let _: HashMap<String, ProtoValue> = doc.fields;
}

/// The one-pass entry point (typed JSON text straight to the wire) gives what the two steps
/// give: the text `typed_json` prints for a value, read into protobuf, is the value's wire
/// form; and the same for a document's fields and for the owned conversion.
#[test]
fn typed_json_text_to_wire_is_ours_to_wire() {
    let (seed, mut runner) = runner("proto_values::typed_json_text_to_wire_is_ours_to_wire");
    let fields = prop::collection::btree_map(key(), value(), 0..6);
    let result = runner.run(&(value(), fields), |(v, fields)| {
        let expected = value_to_proto(&v, &db());
        let text = typed_json::to_string(&v);
        let read = typed_json::parse_with(&text, &ProtoBuild { db: &db() })
            .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        prop_assert!(same(&read, &expected), "{text}: {read:?} != {expected:?}");
        prop_assert!(same(&value_into_proto(v.clone(), &db()), &expected));

        let text = typed_json::map_to_string(&fields);
        let read = fields_from_typed_json(&text, &db())
            .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        let read = pv(ValueType::MapValue(MapValue { fields: read }));
        let expected = pv(ValueType::MapValue(MapValue {
            fields: fields_to_proto(&fields, &db()),
        }));
        prop_assert!(same(&read, &expected), "{text}: {read:?} != {expected:?}");
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e} (replay with DOCSTORE_SEED={seed})");
    }
}

#[test]
fn typed_json_documents_carry_their_name_and_times() {
    let path = ResourcePath::parse_document("c/d").unwrap();
    let created = Timestamp::from_micros(1).unwrap();
    let updated = Timestamp::from_micros(2_000_001).unwrap();
    // As Postgres prints a jsonb: keys by length, spaces after colons and commas.
    let text =
        r#"{"n": 1, "at": {"$timestamp": "2026-11-27T12:00:00.000001Z"}, "ref": {"$ref": "c/e"}}"#;
    let doc = document_from_typed_json(&db(), &path, text, created, updated).unwrap();
    let fields = typed_json::map_from_json(&serde_json::from_str(text).unwrap()).unwrap();
    assert_eq!(
        doc,
        document_to_proto(&db(), &path, &fields, created, updated)
    );
}

#[test]
fn typed_json_that_is_not_a_map_is_no_document() {
    for (text, kind) in [
        ("[1]", "an array"),
        ("1", "an integer"),
        (r#"{"$vector": [1.0]}"#, "a vector"),
        (r#"{"$timestamp": "2026-11-27T12:00:00Z"}"#, "a timestamp"),
    ] {
        let e = fields_from_typed_json(text, &db()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidTypedJson, "{text}");
        assert!(e.to_string().contains(kind), "{text}: {e}");
    }
    for text in ["{", r#"{"a": {"$timestamp": 1}}"#, r#"{"a": "\u0000"}"#] {
        let e = fields_from_typed_json(text, &db()).unwrap_err();
        assert_eq!(e, typed_json::parse(text).unwrap_err(), "{text}");
    }
}

/// A repeated key in typed JSON text: the later value wins in the one-pass wire form as in
/// [`typed_json::parse`], at the root, in a nested map and in a `$map`'s fields, and the
/// map holds each key once.
#[test]
fn typed_json_repeated_keys_keep_the_last() {
    for text in [
        r#"{"a": 1, "b": 2, "a": 3}"#,
        r#"{"m": {"x": "one", "y": true, "x": "two"}, "m": {"x": 1, "x": 2}}"#,
        r#"{"m": {"$map": {"k": 1, "$timestamp": 2, "k": [3]}}}"#,
        r#"{"a": {"$timestamp": "2024-01-01T00:00:00Z"}, "a": {"$bytes": "AA=="}, "c": null}"#,
    ] {
        let Value::Map(expected) = typed_json::parse(text).unwrap() else {
            panic!("{text}: not a map");
        };
        let read = fields_from_typed_json(text, &db()).unwrap();
        let read = pv(ValueType::MapValue(MapValue { fields: read }));
        let expected = pv(ValueType::MapValue(MapValue {
            fields: fields_to_proto(&expected, &db()),
        }));
        assert!(same(&read, &expected), "{text}: {read:?} != {expected:?}");
    }
}

/// Structural equality of documents, doubles bit for bit ([`same`]).
fn same_document(a: &ProtoDocument, b: &ProtoDocument) -> bool {
    let fields = |d: &ProtoDocument| {
        pv(ValueType::MapValue(MapValue {
            fields: d.fields.clone(),
        }))
    };
    a.name == b.name
        && a.create_time == b.create_time
        && a.update_time == b.update_time
        && same(&fields(a), &fields(b))
}

/// The wire bytes written straight from typed JSON (`proto_wire::document_wire`), decoded by
/// prost, are the document the tree path builds (`document_from_typed_json`), and their size
/// is what prost computes for it: every kind of value, nested maps and arrays, NaN, -0.0,
/// empty and reserved-looking keys, as `typed_json` prints them and as Postgres prints a
/// `jsonb` (spaces, keys reordered).
#[test]
fn typed_json_wire_bytes_decode_to_the_tree() {
    let (seed, mut runner) = runner("proto_values::typed_json_wire_bytes_decode_to_the_tree");
    let fields = prop::collection::btree_map(key(), value(), 0..6);
    let path = ResourcePath::parse_document("c/d").unwrap();
    let times = (
        Timestamp::from_micros(MIN_TIMESTAMP_MICROS).unwrap(),
        Timestamp::from_micros(1).unwrap(),
    );
    let result = runner.run(&fields, |fields| {
        let mut scratch = Vec::new();
        let printed = typed_json::map_to_string(&fields);
        let json: serde_json::Value = serde_json::from_str(&printed).unwrap();
        for text in [printed.clone(), format!("{json:#}")] {
            let tree = document_from_typed_json(&db(), &path, &text, times.0, times.1)
                .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
            let wire = document_wire(&db(), &path, &text, times.0, times.1, &mut scratch)
                .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
            let bytes = wire.encode_to_vec();
            prop_assert_eq!(bytes.len(), wire.encoded_len());
            prop_assert_eq!(bytes.len(), tree.encoded_len(), "{}", text);
            // As prost writes and reads the tree: prost leaves out a geopoint's -0.0 (a
            // default `double` field), so it reads back as 0.0 either way.
            let decoded = ProtoDocument::decode(bytes.as_slice())
                .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
            let tree = ProtoDocument::decode(tree.encode_to_vec().as_slice())
                .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
            prop_assert!(
                same_document(&decoded, &tree),
                "{text}: {decoded:?} != {tree:?}"
            );
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e} (replay with DOCSTORE_SEED={seed})");
    }
}

/// A document of one field or none is written exactly as prost writes the tree (with more
/// fields only the order of the map's entries may differ); what is not a plain map is refused
/// or read as the tree path reads it, with its errors.
#[test]
fn typed_json_wire_bytes_edges() {
    let path = ResourcePath::parse_document("c/d").unwrap();
    let t = Timestamp::from_micros(0).unwrap();
    let mut scratch = Vec::new();
    for text in [
        "{}",
        r#"{"": 1}"#,
        r#"{"a": {"$double": "-0.0"}}"#,
        r#"{"a": {"$double": "NaN"}}"#,
        r#"{"a": {"$geo": [-0.0, 0.0]}}"#,
        r#"{"a": [[], {}, [[1]], {"": {"": []}}]}"#,
        r#"{"a": {"$map": {"$ref": "c/d"}}}"#,
        r#"{"a": {"$bytes": ""}}"#,
        r#"{"a": ""}"#,
        r#"{"a": {"$timestamp": "0001-01-01T00:00:00Z"}}"#,
        r#"{"a": [1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2]}"#,
        r#"{"__type__": "__vectors__"}"#,
        r#"{"$map": {"$increment": 1}}"#,
    ] {
        let tree = document_from_typed_json(&db(), &path, text, t, t).unwrap();
        let wire = document_wire(&db(), &path, text, t, t, &mut scratch).unwrap();
        assert_eq!(wire.encode_to_vec(), tree.encode_to_vec(), "{text}");
    }
    // A vector is a map of two entries: their order is the tree's `HashMap`'s.
    let text = r#"{"a": {"$vector": [1.0, -0.0]}}"#;
    let tree = document_from_typed_json(&db(), &path, text, t, t).unwrap();
    let wire = document_wire(&db(), &path, text, t, t, &mut scratch).unwrap();
    let decoded = ProtoDocument::decode(wire.encode_to_vec().as_slice()).unwrap();
    assert!(same_document(&decoded, &tree), "{decoded:?} != {tree:?}");
    for text in [
        "[1]",
        "1",
        r#"{"$vector": [1.0]}"#,
        r#"{"__type__": "__vector__", "value": [1.0]}"#,
        "{",
        r#"{"a": {"$timestamp": 1}}"#,
        r#"{"a": "\u0000"}"#,
        r#"{"a": {"$serde_json::private::Number": "1"}}"#,
    ] {
        let tree = document_from_typed_json(&db(), &path, text, t, t).unwrap_err();
        let wire = document_wire(&db(), &path, text, t, t, &mut scratch).unwrap_err();
        assert_eq!(wire, tree, "{text}");
    }
}
