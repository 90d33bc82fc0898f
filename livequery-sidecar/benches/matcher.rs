//! Per-write matching cost of the live-query matcher as the number of targets grows: 10,
//! 1,000 and 10,000 targets `select * from restaurants where city = "city<i>" order by
//! rating desc limit 10`, each on its own city. Every write updates one restaurant of one
//! city (one target's result changes). With the equality index the cost should stay flat.
//! Run: `cargo bench -p docstore-sidecar --bench matcher`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use docstore_core::path::ResourcePath;
use docstore_core::value::{Map, Timestamp, Value};
use docstore_sidecar::matcher::{Document, Matcher, MatcherConfig, TargetId, TargetSpec, Write};

fn restaurant(i: usize, city: usize, rating: i64, micros: i64) -> Document {
    let fields = Map::from([
        ("city".to_owned(), Value::String(format!("city{city}"))),
        ("rating".to_owned(), Value::Integer(rating)),
        ("name".to_owned(), Value::String(format!("Restaurant {i}"))),
    ]);
    Document::new(
        ResourcePath::parse_document(&format!("restaurants/r{i}")).expect("path"),
        fields,
        Timestamp::from_micros(micros).expect("time"),
    )
}

/// A matcher with `n` targets, each on its own city, each holding one restaurant.
fn matcher(n: usize) -> Matcher {
    let mut matcher = Matcher::new(MatcherConfig::default());
    for city in 0..n {
        let text = format!(
            "select * from restaurants where city = \"city{city}\" order by rating desc limit 10"
        );
        let spec = TargetSpec::parse_text(&text).expect("query");
        let rows = vec![restaurant(city, city, 3, 1)];
        matcher
            .add_target(TargetId(city as u64), spec, rows, None)
            .expect("target");
    }
    matcher
}

fn per_write(c: &mut Criterion) {
    let mut group = c.benchmark_group("matcher_write");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in [10usize, 1_000, 10_000] {
        let mut m = matcher(n);
        let mut tick = 1i64;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter(|| {
                tick += 1;
                // Restaurant `i` of city `i`: its rating changes, one target reports it.
                let i = usize::try_from(tick).unwrap_or(0) % n;
                let write = Write::Set(restaurant(i, i, tick % 5, tick));
                let deltas = m.apply(black_box(7), std::slice::from_ref(&write));
                black_box(deltas)
            });
        });
        let stats = m.stats();
        // Index candidates per transaction: stays at 1 whatever n is.
        assert_eq!(stats.targets_tested, stats.transactions);
    }
    group.finish();
}

criterion_group!(benches, per_write);
criterion_main!(benches);
