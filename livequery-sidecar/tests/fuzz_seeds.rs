//! Runs every input under each fuzz crate's `corpus/<target>/` through the check of fuzz target
//! `<target>`, on stable Rust and without libFuzzer, so `cargo test` exercises the committed
//! seeds and any local corpus: `fuzz/` (pgoutput, seeds captured from a real replication
//! stream) and `fuzz-http/` (routes, bodies, Authorization, the matcher wire format). The checks are the fuzz crates'
//! libraries, `fuzz/checks.rs` and `fuzz-http/checks.rs`, compiled in here unchanged.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../fuzz/checks.rs"]
#[allow(dead_code)]
mod source_checks;

#[path = "../fuzz-http/checks.rs"]
#[allow(dead_code)]
mod http_checks;

use std::fs;
use std::path::Path;

type Check = fn(&[u8]) -> Result<(), String>;

const HTTP_TARGETS: [(&str, Check); 4] = [
    ("routes", http_checks::check_routes),
    ("matcher_wire", http_checks::check_matcher_wire),
    ("bodies", http_checks::check_bodies),
    ("authorization", http_checks::check_authorization),
];

/// Replays the corpus of `fuzz_dir` (relative to the crate) through `targets`; returns how many
/// committed `seed-*` inputs it read and every failure.
fn replay(fuzz_dir: &str, targets: &[(&str, Check)]) -> (usize, Vec<String>) {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(fuzz_dir)
        .join("corpus");
    let mut failures = Vec::new();
    let mut seeds = 0;
    for (target, check) in targets {
        let mut files: Vec<_> = fs::read_dir(corpus.join(target))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for file in files {
            let data = fs::read(&file).unwrap();
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            seeds += usize::from(name.starts_with("seed-"));
            match std::panic::catch_unwind(|| check(&data)) {
                Ok(Ok(())) => {}
                Ok(Err(failure)) => failures.push(format!("{fuzz_dir}/{target}/{name}: {failure}")),
                Err(_) => failures.push(format!("{fuzz_dir}/{target}/{name}: panicked")),
            }
        }
    }
    (seeds, failures)
}

#[test]
fn pgoutput_corpus_inputs_pass_their_checks() {
    let (seeds, failures) = replay("fuzz", &source_checks::TARGETS);
    assert!(seeds > 0, "no committed seed-* inputs under fuzz/corpus");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn http_corpus_inputs_pass_their_checks() {
    let (seeds, failures) = replay("fuzz-http", &HTTP_TARGETS);
    assert!(
        seeds >= HTTP_TARGETS.len(),
        "too few committed seed-* inputs under fuzz-http/corpus"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The committed part seeds of `matcher_wire` reach the gatherer's whole path: each of these
/// puts frames back together (and the wrong-size one none).
#[test]
fn matcher_part_seeds_put_frames_together() {
    use docstore_sidecar::session::wire;
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz-http/corpus/matcher_wire");
    for (seed, frames) in [
        ("seed-parts-snapshot", 1),
        ("seed-parts-out-of-order", 0),
        ("seed-parts-cut-short-then-whole", 1),
        ("seed-parts-wrong-size", 0),
        ("seed-parts-two-routes", 2),
    ] {
        let data = fs::read(corpus.join(seed)).unwrap();
        let mut gatherer = wire::Gatherer::default();
        let mut got = 0;
        for (route, frame, part, bytes) in http_checks::part_messages(&data) {
            let header = wire::PartHeader::parse(route, &frame, &part).unwrap();
            got += usize::from(matches!(gatherer.push(header, bytes), Ok(Some(_))));
        }
        assert_eq!(got, frames, "{seed}");
    }
}
