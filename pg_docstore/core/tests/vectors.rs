//! The shared order vectors `tests/vectors/value_order.json` (also read by the Python SDK's
//! tests): a JSON array of groups, each an array of typed-JSON values that compare equal, the
//! groups in strictly ascending Firestore order. Checked here against `compare` and against
//! the order-preserving encoding, ascending and descending.

use std::cmp::Ordering;
use std::path::Path;

use docstore_core::encoding::{decode, encode, encode_index_value, Direction};
use docstore_core::value::TypeOrder;
use docstore_core::{compare, typed_json, Value};
use serde_json::Value as Json;

const VECTORS: &str = "../../tests/vectors/value_order.json";

/// A value of the file with the JSON text it came from (for messages).
struct Entry {
    text: String,
    value: Value,
    ascending: Vec<u8>,
    descending: Vec<u8>,
}

fn load() -> Result<Vec<Vec<Entry>>, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(VECTORS);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let json: Json = serde_json::from_str(&text).map_err(|e| format!("{VECTORS}: {e}"))?;
    let groups = json
        .as_array()
        .ok_or(format!("{VECTORS} is not an array of groups"))?;
    let mut out = Vec::with_capacity(groups.len());
    for (i, group) in groups.iter().enumerate() {
        let items = group
            .as_array()
            .filter(|items| !items.is_empty())
            .ok_or(format!("group {i} is not a non-empty array"))?;
        let mut entries = Vec::with_capacity(items.len());
        for item in items {
            let text = item.to_string();
            let value =
                typed_json::from_json(item).map_err(|e| format!("group {i}: {text}: {e}"))?;
            entries.push(Entry {
                ascending: encode(&value),
                descending: encode_index_value(&value, Direction::Descending),
                text,
                value,
            });
        }
        out.push(entries);
    }
    Ok(out)
}

#[test]
fn values_in_a_group_are_equal_and_share_one_encoding() -> Result<(), String> {
    let groups = load()?;
    for (i, group) in groups.iter().enumerate() {
        let first = &group[0];
        for other in &group[1..] {
            assert_eq!(
                compare(&first.value, &other.value),
                Ordering::Equal,
                "group {i}: {} == {}",
                first.text,
                other.text
            );
            assert_eq!(
                first.ascending, other.ascending,
                "group {i}: encodings of {} and {}",
                first.text, other.text
            );
            assert_eq!(first.descending, other.descending, "group {i}");
        }
    }
    Ok(())
}

#[test]
fn groups_are_strictly_ascending_in_compare_and_in_bytes() -> Result<(), String> {
    let groups = load()?;
    // Every pair of groups, not only neighbours: a cheap check of transitivity too.
    for (i, lower) in groups.iter().enumerate() {
        for (j, higher) in groups.iter().enumerate().skip(i + 1) {
            for a in lower {
                for b in higher {
                    let at = || format!("group {i} {} < group {j} {}", a.text, b.text);
                    assert_eq!(compare(&a.value, &b.value), Ordering::Less, "{}", at());
                    assert_eq!(compare(&b.value, &a.value), Ordering::Greater, "{}", at());
                    assert!(a.ascending < b.ascending, "ascending bytes: {}", at());
                    assert!(a.descending > b.descending, "descending bytes: {}", at());
                }
            }
        }
    }
    Ok(())
}

#[test]
fn every_value_round_trips() -> Result<(), String> {
    for entry in load()?.iter().flatten() {
        let printed = typed_json::to_string(&entry.value);
        let again = typed_json::parse(&printed).map_err(|e| format!("{printed}: {e}"))?;
        assert_eq!(again, entry.value, "{} prints as {printed}", entry.text);
        let decoded = decode(&entry.ascending).map_err(|e| format!("{}: {e}", entry.text))?;
        assert_eq!(
            compare(&decoded, &entry.value),
            Ordering::Equal,
            "{}",
            entry.text
        );
        assert_eq!(encode(&decoded), entry.ascending, "{}", entry.text);
    }
    Ok(())
}

/// The file must keep covering every type and the numeric edge cases, so that trimming it
/// cannot make the checks above vacuous.
#[test]
fn the_vectors_cover_every_type_and_the_numeric_edges() -> Result<(), String> {
    let groups = load()?;
    let values: Vec<&Value> = groups.iter().flatten().map(|e| &e.value).collect();

    let all_types = [
        TypeOrder::Null,
        TypeOrder::Boolean,
        TypeOrder::Number,
        TypeOrder::Timestamp,
        TypeOrder::String,
        TypeOrder::Bytes,
        TypeOrder::Reference,
        TypeOrder::GeoPoint,
        TypeOrder::Array,
        TypeOrder::Vector,
        TypeOrder::Map,
    ];
    for t in all_types {
        let groups_of_type = groups
            .iter()
            .filter(|g| g[0].value.type_order() == t)
            .count();
        assert!(groups_of_type >= 1, "no group of type {t:?}");
    }

    let two_53 = 9_007_199_254_740_992_i64;
    #[allow(clippy::cast_precision_loss)]
    let required = [
        Value::Double(f64::NAN),
        Value::Double(f64::NEG_INFINITY),
        Value::Integer(i64::MIN),
        Value::Integer(-1),
        Value::Double(-0.0),
        Value::Integer(0),
        Value::Double(0.0),
        Value::Double(5e-324),
        Value::Integer(1),
        Value::Double(1.0),
        Value::Integer(two_53),
        Value::Double(two_53 as f64),
        Value::Integer(two_53 + 1),
        Value::Integer(i64::MAX),
        Value::Double(2f64.powi(63)),
        Value::Double(f64::INFINITY),
        Value::String("\u{1}".into()),
        Value::String("\u{e9}".into()),
        Value::Bytes(vec![0]),
    ];
    for value in required {
        // Identity, not compare: 1 and 1.0 must both be there.
        assert!(
            values.iter().any(|v| **v == value),
            "{VECTORS} lacks {}",
            typed_json::to_string(&value)
        );
    }
    Ok(())
}
