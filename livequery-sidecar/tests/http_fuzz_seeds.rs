//! Runs every input under `fuzz-http/corpus/<target>/` through the check of fuzz target
//! `<target>` (routes, bodies, authorization), on stable Rust and without libFuzzer, so
//! `cargo test` exercises the committed seeds and any local corpus. The checks are the fuzz
//! crate's library, `fuzz-http/checks.rs`, compiled in here unchanged.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../fuzz-http/checks.rs"]
#[allow(dead_code)]
mod checks;

use std::fs;
use std::path::Path;

type Check = fn(&[u8]) -> Result<(), checks::Failure>;

const TARGETS: [(&str, Check); 3] = [
    ("routes", checks::check_routes),
    ("bodies", checks::check_bodies),
    ("authorization", checks::check_authorization),
];

#[test]
fn http_fuzz_corpus_inputs_pass_their_checks() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz-http")
        .join("corpus");
    let mut failures = Vec::new();
    let mut seeds = 0;
    for (target, check) in TARGETS {
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
                Ok(Err(failure)) => failures.push(format!("{target}/{name}: {failure}")),
                Err(_) => failures.push(format!("{target}/{name}: panicked")),
            }
        }
    }
    assert!(
        seeds >= TARGETS.len(),
        "too few committed seed-* inputs under {}",
        corpus.display()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
