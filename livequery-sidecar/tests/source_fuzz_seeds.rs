//! Runs every input under `fuzz/corpus/<target>/` through the check of fuzz target
//! `<target>`, on stable Rust and without libFuzzer, so `cargo test` exercises the committed
//! seeds (captured from a real replication stream) and any local corpus. The checks are the
//! fuzz crate's library, `fuzz/checks.rs`, compiled in here unchanged.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../fuzz/checks.rs"]
#[allow(dead_code)]
mod checks;

use std::fs;
use std::path::Path;

#[test]
fn fuzz_corpus_inputs_pass_their_checks() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join("corpus");
    let mut failures = Vec::new();
    let mut seeds = 0;
    for (target, check) in checks::TARGETS {
        let dir = corpus.join(target);
        let mut files: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for file in files {
            let data = fs::read(&file).unwrap();
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            seeds += usize::from(name.starts_with("seed-"));
            let outcome = std::panic::catch_unwind(|| check(&data));
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(failure)) => failures.push(format!("{target}/{name}: {failure}")),
                Err(_) => failures.push(format!("{target}/{name}: panicked")),
            }
        }
    }
    assert!(
        seeds > 0,
        "no committed seed-* inputs under {}",
        corpus.display()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
