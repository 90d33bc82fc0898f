//! One write applied to a live aggregation target
//! `select count(*), sum(rating), avg(rating) from restaurants` over 10,000 and 100,000
//! matching documents (ratings alternate integers and doubles), and the memory the matcher
//! keeps for that target.
//!
//! - `aggregation_write/incremental`: the target as it is now, core's `RunningAggregates`
//!   (one contribution per document by name, updated per write);
//! - `aggregation_write/recompute_target`: the path every aggregation target took before
//!   (and windowed ones still take): the same aggregates over `limit 1000000`, whose target
//!   keeps every document and recomputes the row with core's `aggregate` on each change;
//! - `aggregation_write/core_aggregate`: core's `aggregate` alone over the documents, the
//!   least any recompute costs.
//!
//! Memory: bytes allocated and still live after `add_target` minus before the rows were
//! built (a counting allocator), printed per target and per document; it includes the
//! index's holders map (document name -> targets), the same for both.
//! Run: `cargo bench -p docstore-sidecar --bench aggregation`.
#![allow(clippy::expect_used, clippy::unwrap_used, unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use docstore_core::path::ResourcePath;
use docstore_core::query::{aggregate, parse_query};
use docstore_core::value::{Map, Timestamp, Value};
use docstore_sidecar::matcher::{Document, Matcher, MatcherConfig, TargetId, TargetSpec, Write};

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` with the caller's arguments; the counter is
// only arithmetic on the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation is).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as `dealloc` for `ptr` and `layout`; `new_size` is the caller's, valid.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const RUNNING: &str = "select count(*), sum(rating), avg(rating) from restaurants";
const KEPT: &str = "select count(*), sum(rating), avg(rating) from restaurants limit 1000000";

/// Initial ratings (`tick` 0) alternate small integers and tenths; a write at `tick` sets a
/// value no document had before (so every write changes the sum).
fn rating(i: usize, tick: i64) -> Value {
    let k = i64::try_from(i).unwrap();
    match (tick, k % 2) {
        (0, 0) => Value::Integer(k % 5),
        (0, _) => Value::Double((k % 50) as f64 / 10.0),
        (t, _) if t % 2 == 0 => Value::Integer(1_000 + t),
        (t, _) => Value::Double(1_000.25 + t as f64),
    }
}

fn restaurant(i: usize, tick: i64) -> Document {
    let fields = Map::from([
        ("city".to_owned(), Value::String("SF".to_owned())),
        ("rating".to_owned(), rating(i, tick)),
        ("name".to_owned(), Value::String(format!("Restaurant {i}"))),
    ]);
    Document::new(
        ResourcePath::parse_document(&format!("restaurants/r{i:06}")).unwrap(),
        fields,
        Timestamp::from_micros(tick.max(1)).unwrap(),
        Timestamp::from_micros(tick.max(1)).unwrap(),
    )
}

/// A matcher with one target on `text` over `n` restaurants, and the bytes it keeps.
fn matcher(text: &str, n: usize) -> (Matcher, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    let rows: Vec<Document> = (0..n).map(|i| restaurant(i, 0)).collect();
    let mut m = Matcher::new(MatcherConfig::default());
    m.add_target(
        TargetId(1),
        TargetSpec::parse_text(text).unwrap(),
        rows,
        None,
    )
    .unwrap();
    let after = LIVE.load(Ordering::Relaxed);
    (m, after.saturating_sub(before))
}

fn per_write(c: &mut Criterion) {
    let mut group = c.benchmark_group("aggregation_write");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for n in [10_000usize, 100_000] {
        for (name, text) in [("incremental", RUNNING), ("recompute_target", KEPT)] {
            let (mut m, bytes) = matcher(text, n);
            eprintln!(
                "memory {name}/{n}: {bytes} bytes for the target ({} per document)",
                bytes / n
            );
            let mut tick = 1i64;
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, &n| {
                b.iter(|| {
                    tick += 1;
                    // One restaurant's rating changes: one aggregation row per write.
                    let i = usize::try_from(tick).unwrap() * 7919 % n;
                    let write = Write::Set(restaurant(i, tick));
                    let deltas = m.apply(black_box(7), std::slice::from_ref(&write));
                    assert_eq!(deltas.len(), 1);
                    black_box(deltas)
                });
            });
        }
        let query = parse_query(RUNNING).unwrap();
        let docs: Vec<(ResourcePath, Map)> = (0..n)
            .map(|i| {
                let d = restaurant(i, 0);
                (d.path.clone(), (*d.fields).clone())
            })
            .collect();
        group.bench_with_input(BenchmarkId::new("core_aggregate", n), &n, |b, _| {
            b.iter(|| black_box(aggregate(&query, black_box(&docs))));
        });
    }
    group.finish();
}

criterion_group!(benches, per_write);
criterion_main!(benches);
