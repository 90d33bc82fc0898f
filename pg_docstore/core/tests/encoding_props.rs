//! Property tests of the value core: the encoding agrees with `compare`, decodes back, stays
//! prefix-free under concatenation and truncation, and typed JSON round-trips.
//! 10,000 cases per property (CI runs exactly this).
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::cmp::Ordering;
use std::collections::BTreeMap;

use docstore_core::encoding::{
    decode, decode_prefix, encode, encode_index_value, Direction, MAX_INDEXED_VALUE_BYTES,
};
use docstore_core::value::{GeoPoint, Timestamp, MAX_TIMESTAMP_MICROS, MIN_TIMESTAMP_MICROS};
use docstore_core::{compare, typed_json, Value};
use proptest::prelude::*;

mod common;
use common::values::{leaf, small_string, value};

/// Pairs that often share structure, so comparisons reach deep positions.
fn related_pair() -> impl Strategy<Value = (Value, Value)> {
    prop_oneof![
        (value(), value()),
        value().prop_flat_map(|v| (Just(v.clone()), mutate(v))),
    ]
}

fn mutate(v: Value) -> BoxedStrategy<Value> {
    match v {
        Value::Array(items) if !items.is_empty() => {
            let len = items.len();
            (0..len, value(), any::<bool>())
                .prop_map(move |(i, replacement, truncate)| {
                    let mut items = items.clone();
                    if truncate {
                        items.truncate(i);
                    } else {
                        items[i] = replacement;
                    }
                    Value::Array(items)
                })
                .boxed()
        }
        Value::Map(map) => (small_string(), value())
            .prop_map(move |(k, replacement)| {
                let mut map = map.clone();
                map.insert(k, replacement);
                Value::Map(map)
            })
            .boxed(),
        other => (Just(other), leaf()).prop_map(|(_, l)| l).boxed(),
    }
}

/// What decoding returns: numbers in canonical form.
fn canonical(v: &Value) -> Value {
    fn canon_f64(d: f64) -> f64 {
        if d.is_nan() {
            f64::NAN
        } else if d == 0.0 {
            0.0
        } else {
            d
        }
    }
    match v {
        Value::Double(d) if d.is_nan() => Value::Double(f64::NAN),
        Value::Double(d) if d.is_infinite() => Value::Double(*d),
        Value::Double(d) if *d == 0.0 => Value::Integer(0),
        Value::Double(d) => {
            let as_int = *d as i64;
            if d.fract() == 0.0 && compare(&Value::Integer(as_int), &Value::Double(*d)).is_eq() {
                Value::Integer(as_int)
            } else {
                Value::Double(*d)
            }
        }
        Value::GeoPoint(g) => Value::GeoPoint(GeoPoint {
            latitude: canon_f64(g.latitude),
            longitude: canon_f64(g.longitude),
        }),
        Value::Vector(items) => Value::Vector(items.iter().map(|d| canon_f64(*d)).collect()),
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        Value::Map(map) => Value::Map(
            map.iter()
                .map(|(k, v)| (k.clone(), canonical(v)))
                .collect::<BTreeMap<_, _>>(),
        ),
        other => other.clone(),
    }
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 10_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn timestamp_text_is_the_canonical_form(micros in MIN_TIMESTAMP_MICROS..=MAX_TIMESTAMP_MICROS) {
        // UTC, `Z`, four-digit year, six fractional digits; and it reads back.
        let t = Timestamp::from_micros(micros).unwrap();
        let text = t.to_rfc3339();
        let expected = chrono::DateTime::from_timestamp_micros(micros)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        prop_assert_eq!(&text, &expected);
        prop_assert_eq!(Timestamp::parse_rfc3339(&text), Some(t));
    }

    #[test]
    fn ascending_encoding_matches_compare((a, b) in related_pair()) {
        prop_assert_eq!(encode(&a).cmp(&encode(&b)), compare(&a, &b), "{:?} vs {:?}", a, b);
    }

    #[test]
    fn descending_encoding_reverses_compare((a, b) in related_pair()) {
        let ea = encode_index_value(&a, Direction::Descending);
        let eb = encode_index_value(&b, Direction::Descending);
        prop_assert_eq!(ea.cmp(&eb), compare(&a, &b).reverse());
    }

    #[test]
    fn decode_inverts_encode(v in value()) {
        let encoded = encode(&v);
        let decoded = decode(&encoded).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(compare(&decoded, &v).is_eq());
        prop_assert_eq!(&decoded, &canonical(&v));
        prop_assert_eq!(encode(&decoded), encoded);
    }

    #[test]
    fn concatenations_compare_component_wise((a1, b1) in related_pair(), a2 in value(), b2 in value()) {
        let mut ka = encode(&a1);
        ka.extend(encode(&a2));
        let mut kb = encode(&b1);
        kb.extend(encode(&b2));
        let expected = compare(&a1, &b1).then_with(|| compare(&a2, &b2));
        prop_assert_eq!(ka.cmp(&kb), expected);
        let (first, used) = decode_prefix(&ka).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(compare(&first, &a1).is_eq());
        prop_assert_eq!(used, encode(&a1).len());
    }

    #[test]
    fn compare_is_a_total_order(a in value(), b in value(), c in value()) {
        prop_assert_eq!(compare(&a, &b), compare(&b, &a).reverse());
        prop_assert!(compare(&a, &a).is_eq());
        if compare(&a, &b).is_le() && compare(&b, &c).is_le() {
            prop_assert!(compare(&a, &c).is_le());
        }
    }

    #[test]
    fn typed_json_round_trips(v in value()) {
        let text = typed_json::to_string(&v);
        let back = typed_json::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        prop_assert_eq!(&back, &v, "{}", text);
        prop_assert_eq!(typed_json::to_string(&back), text);
    }

    #[test]
    fn a_value_prints_as_its_own_typed_json(v in value()) {
        let text = typed_json::to_string(&v);
        let json = typed_json::json_from_str(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // Complete wherever serde_json keeps every token as printed (it writes exponents as
        // `e+308` and does not escape DEL or C1 characters; jsonb prints no exponents at all).
        if serde_json::to_string(&json).ok().as_deref() == Some(text.as_str()) {
            prop_assert!(typed_json::prints_as(&json, &v), "{}", text);
        }
    }

    #[test]
    fn prints_as_only_for_the_same_text(v in value(), w in value()) {
        // Sound: whenever the stored jsonb would be taken as is, it is what printing gives.
        let json = typed_json::json_from_str(&typed_json::to_string(&v)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if typed_json::prints_as(&json, &w) {
            prop_assert_eq!(typed_json::to_string(&w), typed_json::to_string(&v));
        }
    }

    #[test]
    fn truncation_keeps_order_weakly(prefix in "[ab]{1490,1510}", a in value(), b in value()) {
        // Long strings with a shared prefix are where truncation bites.
        let wrap = |tail: &Value| Value::Array(vec![Value::String(prefix.clone()), tail.clone()]);
        let (va, vb) = (wrap(&a), wrap(&b));
        let ta = encode_index_value(&va, Direction::Ascending);
        let tb = encode_index_value(&vb, Direction::Ascending);
        prop_assert!(ta.len() <= MAX_INDEXED_VALUE_BYTES);
        match compare(&va, &vb) {
            Ordering::Less => prop_assert!(ta <= tb),
            Ordering::Greater => prop_assert!(ta >= tb),
            Ordering::Equal => prop_assert_eq!(&ta, &tb),
        }
        // Prefix-free even when truncated: one cannot be a proper prefix of the other.
        if ta != tb {
            prop_assert!(!ta.starts_with(&tb) && !tb.starts_with(&ta));
        }
    }
}

#[test]
fn timestamp_text_at_the_ends_of_the_range() {
    let text = |micros| Timestamp::from_micros(micros).unwrap().to_rfc3339();
    assert_eq!(text(MIN_TIMESTAMP_MICROS), "0001-01-01T00:00:00.000000Z");
    assert_eq!(text(MAX_TIMESTAMP_MICROS), "9999-12-31T23:59:59.999999Z");
    assert_eq!(text(0), "1970-01-01T00:00:00.000000Z");
}
