//! Value strategies shared by the value property tests (`encoding_props`, `proto_values`):
//! every type, edge numbers (int64 extremes, -0.0, NaN, infinities, subnormals), the timestamp
//! range's ends, geopoints on the edges of the globe, vectors, nested arrays and maps.

#![allow(clippy::expect_used)] // test support: generated values are valid by construction

use proptest::prelude::*;

use docstore_core::value::{GeoPoint, Timestamp, MAX_TIMESTAMP_MICROS, MIN_TIMESTAMP_MICROS};
use docstore_core::{ResourcePath, Value};

pub const TWO_53: i64 = 9_007_199_254_740_992;
pub const TWO_63: f64 = 9_223_372_036_854_775_808.0;

pub fn edge_int() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(0i64),
        Just(1),
        Just(-1),
        Just(i64::MIN),
        Just(i64::MAX),
        Just(i64::MIN + 1),
        Just(i64::MAX - 1),
        Just(TWO_53),
        Just(TWO_53 + 1),
        Just(TWO_53 - 1),
        Just(-TWO_53 - 1),
        Just(1 << 62),
        -1000i64..1000,
        any::<i64>(),
    ]
}

pub fn edge_double() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0f64),
        Just(-0.0),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MIN_POSITIVE),
        Just(5e-324),
        Just(-5e-324),
        Just(f64::MAX),
        Just(f64::MIN),
        Just(TWO_53 as f64),
        Just(TWO_63),
        Just(-TWO_63),
        Just(0.5),
        Just(1.0),
        edge_int().prop_map(|i| i as f64),
        (-1000i32..1000).prop_map(|i| f64::from(i) / 8.0),
        any::<u64>().prop_map(f64::from_bits),
    ]
}

pub fn small_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!['\u{1}', 'a', 'b', '\u{7f}', 'ÿ', '\u{10FFFF}', '/']),
        0..5,
    )
    .prop_map(|cs| cs.into_iter().collect())
}

pub fn small_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 0xFE, 0xFF]), 0..5)
}

pub fn segment() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec!['a', 'b', '-', 'z']), 1..3)
        .prop_map(|cs| cs.into_iter().collect())
}

pub fn reference() -> impl Strategy<Value = ResourcePath> {
    prop::collection::vec((segment(), segment()), 1..3).prop_map(|pairs| {
        let segments = pairs.into_iter().flat_map(|(c, d)| [c, d]).collect();
        ResourcePath::from_segments(segments).expect("generated segments are valid")
    })
}

pub fn timestamp() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        Just(MIN_TIMESTAMP_MICROS),
        Just(MAX_TIMESTAMP_MICROS),
        Just(0),
        Just(-1),
        Just(1),
        MIN_TIMESTAMP_MICROS..=MAX_TIMESTAMP_MICROS,
    ]
    .prop_map(|m| Timestamp::from_micros(m).expect("in range"))
}

pub fn geopoint() -> impl Strategy<Value = GeoPoint> {
    let lat = prop_oneof![
        Just(-90.0f64),
        Just(90.0),
        Just(0.0),
        Just(-0.0),
        -90.0f64..=90.0
    ];
    let lng = prop_oneof![
        Just(-180.0f64),
        Just(180.0),
        Just(0.0),
        Just(-0.0),
        -180.0f64..=180.0
    ];
    (lat, lng).prop_map(|(latitude, longitude)| GeoPoint {
        latitude,
        longitude,
    })
}

pub fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Boolean),
        edge_int().prop_map(Value::Integer),
        edge_double().prop_map(Value::Double),
        timestamp().prop_map(Value::Timestamp),
        small_string().prop_map(Value::String),
        small_bytes().prop_map(Value::Bytes),
        reference().prop_map(Value::Reference),
        geopoint().prop_map(Value::GeoPoint),
        prop::collection::vec(edge_double(), 0..4).prop_map(Value::Vector),
    ]
}

pub fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(small_string(), inner, 0..4).prop_map(Value::Map),
        ]
    })
}
