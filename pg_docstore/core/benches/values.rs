//! Criterion benchmarks of the value core on a ~1 KB document with 20 fields.
//! Run: `cargo bench -p docstore-core --bench values`.
#![allow(clippy::expect_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use docstore_core::encoding::{decode, encode};
use docstore_core::{compare, typed_json, Value};

/// A restaurant-like document of about 1 KB with 20 top-level fields of mixed types.
fn document() -> String {
    r#"{
      "name": "The Golden Spoon Bistro and Wine Bar",
      "city": "San Francisco", "state": "CA", "country": "USA",
      "type": "BBQ", "cuisine": ["american", "barbecue", "southern", "smokehouse"],
      "avgRating": 4.37, "numRatings": 1289, "price": 3, "open": true,
      "address": {"street": "1234 Market Street", "zip": "94103", "unit": null},
      "location": {"$geo": [37.7749, -122.4194]},
      "opened": {"$timestamp": "2015-06-01T18:30:00.000000Z"},
      "owner": {"$ref": "owners/alice"},
      "logo": {"$bytes": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="},
      "tags": ["outdoor seating", "late night", "happy hour", "family friendly", "vegan options"],
      "hours": {"mon": "11-22", "tue": "11-22", "wed": "11-22", "thu": "11-23", "fri": "11-24", "sat": "10-24", "sun": "10-21"},
      "description": "A neighbourhood favourite since 2015 serving slow-smoked brisket, ribs and seasonal sides, with a long list of Californian wines and local craft beers on tap.",
      "embedding": {"$vector": [0.12, -0.53, 0.33, 0.91, -0.07, 0.44, 0.18, -0.29]},
      "ratio": {"$double": "NaN"}
    }"#
    .to_owned()
}

fn benches(c: &mut Criterion) {
    let text = document();
    let value = typed_json::parse(&text).expect("bench document parses");
    let encoded = encode(&value);
    let mut other = value.clone();
    if let Value::Map(m) = &mut other {
        m.insert("zzz".into(), Value::Null);
    }

    let mut group = c.benchmark_group("document_1kb_20_fields");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("typed_json_parse", |b| {
        b.iter(|| typed_json::parse(black_box(&text)))
    });
    group.bench_function("typed_json_print", |b| {
        b.iter(|| typed_json::to_string(black_box(&value)))
    });
    group.bench_function("encode", |b| b.iter(|| encode(black_box(&value))));
    group.bench_function("decode", |b| b.iter(|| decode(black_box(&encoded))));
    group.bench_function("compare", |b| {
        b.iter(|| compare(black_box(&value), black_box(&other)))
    });
    group.bench_function("memcmp_encoded", |b| {
        let other_encoded = encode(&other);
        b.iter(|| black_box(&encoded).cmp(black_box(&other_encoded)))
    });
    // Baseline in the same run: plain serde_json parse and print of the same text.
    group.bench_function("baseline_serde_json_parse", |b| {
        b.iter(|| serde_json::from_str::<serde_json::Value>(black_box(&text)))
    });
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    group.bench_function("baseline_serde_json_print", |b| {
        b.iter(|| serde_json::to_string(black_box(&json)))
    });
    group.finish();
}

criterion_group!(values, benches);
criterion_main!(values);
