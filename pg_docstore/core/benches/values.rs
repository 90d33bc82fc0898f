//! Criterion benchmarks of the value core on a ~1 KB document with 20 fields.
//! Run: `cargo bench -p docstore-core --bench values`.
#![allow(clippy::expect_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use docstore_core::encoding::{decode, encode};
use docstore_core::{compare, typed_json, Value};

#[path = "support/restaurant.rs"]
mod restaurant;
use restaurant::document;

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
