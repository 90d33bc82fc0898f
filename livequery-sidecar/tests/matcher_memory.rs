//! What the matcher keeps per query target, in heap bytes and allocations (issue 27: memory
//! per subscription). The shape is the scale benchmark's (`scripts/bench_live.sh scale`):
//! every target `select * from loadgen where city = "cK" order by rating desc limit 10`, on a
//! city of its own, holding 3 documents of about 300 bytes. The documents are made before
//! counting (decoding them is the snapshot read's cost, and a window shares them), so what
//! is counted is the target itself: its query, window, index placement and the index's
//! entries for the documents it holds.
//!
//! A guard, not a benchmark: the bounds sit a little above what this commit measures, so a
//! change that copies documents' names again, gives each key or holder a set of its own, or
//! copies the query per target fails here. The figures are printed (`--nocapture`).
//!
//! One test in this binary: the counting allocator is process-wide.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// A global allocator is an `unsafe` trait: this one passes every call to `System` unchanged
// and counts. The only unsafe code of the crate's tests; the library has none.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use docstore_core::path::ResourcePath;
use docstore_core::value::{Map, Timestamp, Value};
use docstore_sidecar::matcher::{
    Document, Matcher, MatcherConfig, TargetId, TargetResult, TargetSpec,
};

/// The system allocator, counting the bytes and allocations alive.
struct Counting;

static BYTES: AtomicIsize = AtomicIsize::new(0);
static BLOCKS: AtomicIsize = AtomicIsize::new(0);

fn signed(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

// SAFETY: every call is passed on to `System` unchanged; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(signed(layout.size()), Ordering::Relaxed);
        BLOCKS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        BYTES.fetch_sub(signed(layout.size()), Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        BYTES.fetch_add(signed(new_size) - signed(layout.size()), Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> (isize, isize) {
    (
        BYTES.load(Ordering::Relaxed),
        BLOCKS.load(Ordering::Relaxed),
    )
}

/// Document `k` of city `city`, as the benchmark preloads it.
fn preloaded(city: usize, k: i64) -> Document {
    let fields = Map::from([
        ("city".to_owned(), Value::String(format!("c{city}"))),
        ("rating".to_owned(), Value::Integer(k)),
        ("name".to_owned(), Value::String(format!("preloaded {k}"))),
        ("note".to_owned(), Value::String("x".repeat(200))),
    ]);
    let at = Timestamp::from_micros(1_000_000 + k).unwrap();
    Document::new(
        ResourcePath::parse_document(&format!("loadgen/p{city}-{k}")).unwrap(),
        fields,
        at,
        at,
    )
}

#[test]
fn a_query_target_holding_three_documents_stays_small() {
    const TARGETS: usize = 10_000;
    // Per target, excluding its documents: the bytes and allocations alive after adding
    // 10,000 targets (hash tables at their load after growing, as in a sidecar).
    const MAX_BYTES: isize = 1_550;
    const MAX_BLOCKS: isize = 20;

    let rows: Vec<Vec<Document>> = (0..TARGETS)
        .map(|city| (1..=3).map(|k| preloaded(city, k)).collect())
        .collect();
    let texts: Vec<String> = (0..TARGETS)
        .map(|city| {
            format!("select * from loadgen where city = \"c{city}\" order by rating desc limit 10")
        })
        .collect();
    let mut matcher = Matcher::new(MatcherConfig::default());
    let (bytes_before, blocks_before) = live();
    for (city, (rows, text)) in rows.into_iter().zip(&texts).enumerate() {
        let spec = TargetSpec::parse_text(text).unwrap();
        let result = matcher
            .add_target(TargetId(city as u64), spec, rows, None)
            .unwrap();
        assert!(matches!(result, TargetResult::Documents(ref d) if d.len() == 3));
    }
    let (bytes_after, blocks_after) = live();
    assert_eq!(matcher.len(), TARGETS);
    let targets = signed(TARGETS);
    let bytes = (bytes_after - bytes_before) / targets;
    let blocks = (blocks_after - blocks_before) / targets;
    println!("per target: {bytes} bytes in {blocks} allocations (documents excluded)");
    assert!(
        bytes <= MAX_BYTES,
        "a target holding 3 documents keeps {bytes} bytes (at most {MAX_BYTES})"
    );
    assert!(
        blocks <= MAX_BLOCKS,
        "a target holding 3 documents keeps {blocks} allocations (at most {MAX_BLOCKS})"
    );
}
