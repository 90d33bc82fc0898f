//! Runs every input under `fuzz/corpus/compile/` through the fuzz target's check, on stable
//! Rust and without libFuzzer, so `cargo test` exercises the committed seeds (and, on a
//! machine that has fuzzed, the whole local corpus). Fuzzing itself:
//! `cd rules-compiler && RUSTC_BOOTSTRAP=1 cargo fuzz run compile`.

#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../fuzz/checks.rs"]
mod checks;

use std::fs;
use std::path::Path;

#[test]
fn fuzz_corpus_inputs_pass_their_check() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/compile");
    let mut checked = 0;
    let mut failures = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    entries.sort();
    for path in entries {
        let data = fs::read(&path).unwrap();
        if let Err(f) = checks::check_compile(&data) {
            failures.push(format!("{}: {f}", path.display()));
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} seeds");
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn seeds_compile_or_fail_as_intended() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/compile");
    for (name, compiles) in [
        ("seed-chat", true),
        ("seed-operators", true),
        ("seed-functions", true),
        ("seed-escapes", true),
        ("seed-unclosed", false),
        ("seed-shadowed", true),
        ("seed-empty-match", false),
    ] {
        let src = fs::read_to_string(dir.join(name)).unwrap();
        let r = docstore_rules::compile(&src);
        assert_eq!(r.is_ok(), compiles, "{name}: {:?}", r.err());
    }
}
