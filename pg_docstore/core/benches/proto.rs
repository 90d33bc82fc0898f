//! Criterion benchmark of the gRPC front end's read rendering: a stored ~1 KB document's
//! typed JSON text to Firestore's protobuf `Document`, in one pass
//! (`proto::document_from_typed_json`) against the two-step path it replaced (text ->
//! `serde_json::Value` -> our `Value` -> protobuf), and to the wire bytes a gRPC answer
//! carries: the tree encoded by prost (`one_pass_encoded`) against the bytes written straight
//! from the text (`proto_wire::document_wire`, `wire_bytes`). Run:
//! `cargo bench -p docstore-core --features firestore-proto --bench proto`.
#![allow(clippy::expect_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use docstore_core::proto::{document_from_typed_json, document_to_proto, DatabaseName};
use docstore_core::proto_wire::document_wire;
use docstore_core::{typed_json, ResourcePath, Timestamp, Value};
use prost::Message;

#[path = "support/restaurant.rs"]
mod restaurant;

/// The values bench's restaurant document (20 fields of every kind), as Postgres prints its
/// `jsonb`: keys by length, then bytes; a space after each colon and comma.
fn document() -> String {
    let text = restaurant::document();
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let mut fields: Vec<_> = json.as_object().expect("an object").iter().collect();
    fields.sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then(a.cmp(b)));
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}: {}", serde_json::Value::String((*k).clone()), v))
        .collect();
    format!("{{{}}}", body.join(", "))
}

fn benches(c: &mut Criterion) {
    let text = document();
    let db = DatabaseName {
        project: "p".into(),
        database: "(default)".into(),
    };
    let path = ResourcePath::parse_document("restaurants/r1").expect("a document path");
    let time = Timestamp::from_micros(1_764_240_000_000_000).expect("a time");

    let mut group = c.benchmark_group("document_to_protobuf_1kb");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("two_steps", |b| {
        b.iter(|| {
            let json = typed_json::json_from_str(black_box(&text)).ok()?;
            match typed_json::from_json(&json).ok()? {
                Value::Map(fields) => Some(document_to_proto(&db, &path, &fields, time, time)),
                _ => None,
            }
        })
    });
    group.bench_function("one_pass", |b| {
        b.iter(|| document_from_typed_json(&db, &path, black_box(&text), time, time))
    });
    group.bench_function("one_pass_encoded", |b| {
        b.iter(|| {
            document_from_typed_json(&db, &path, black_box(&text), time, time)
                .map(|doc| doc.encode_to_vec())
        })
    });
    let mut scratch = Vec::new();
    group.bench_function("wire_bytes", |b| {
        b.iter(|| {
            document_wire(&db, &path, black_box(&text), time, time, &mut scratch)
                .map(|doc| doc.encode_to_vec())
        })
    });
    // GetDocument's way: a fresh scratch buffer per document (BatchGetDocuments reuses one).
    group.bench_function("wire_bytes_fresh", |b| {
        b.iter(|| {
            document_wire(&db, &path, black_box(&text), time, time, &mut Vec::new())
                .map(|doc| doc.encode_to_vec())
        })
    });
    group.finish();
}

criterion_group!(proto, benches);
criterion_main!(proto);
