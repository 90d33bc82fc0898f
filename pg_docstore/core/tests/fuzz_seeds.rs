//! Runs every input under `fuzz/corpus/<target>/` through the check of fuzz target `<target>`,
//! on stable Rust and without libFuzzer, so `cargo test` exercises the committed seeds (and,
//! on a machine that has fuzzed, the whole local corpus). The checks are the fuzz crate's
//! library, `fuzz/checks.rs`, compiled in here unchanged. Fuzzing itself: `scripts/fuzz.sh`.

#[path = "../fuzz/checks.rs"]
mod checks;

use std::fs;
use std::io;
use std::panic;
use std::path::{Path, PathBuf};

/// Seeds that reproduce bugs in `src/` which the fuzz checks catch and which are not fixed
/// yet, as `("<target>/<file>", "what is wrong")`. They must still fail their check, so the
/// list cannot go stale: when a fix makes one pass, this test says so; delete its line then.
const KNOWN_FAILURES: &[(&str, &str)] = &[];

fn files_in(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[test]
fn fuzz_corpus_inputs_pass_their_checks() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join("corpus");
    let mut failures = Vec::new();
    let mut known_seen = Vec::new();
    let mut checked = 0;

    for dir in
        fs::read_dir(&corpus).unwrap_or_else(|e| panic!("cannot read {}: {e}", corpus.display()))
    {
        let dir = dir
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", corpus.display()))
            .path();
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(
            checks::TARGETS.iter().any(|(target, _)| *target == name),
            "{} has no fuzz target of that name",
            dir.display()
        );
    }

    for (target, check) in checks::TARGETS {
        let dir = corpus.join(target);
        let files = files_in(&dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        assert!(
            files.iter().any(|f| is_seed(f)),
            "no seed-* inputs for fuzz target {target}"
        );
        for file in files {
            let data =
                fs::read(&file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
            let outcome = match panic::catch_unwind(|| check(&data)) {
                Ok(result) => result,
                Err(payload) => Err(format!("panicked: {}", panic_message(payload.as_ref()))),
            };
            checked += 1;
            let file_name = file
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let key = format!("{target}/{file_name}");
            let known = KNOWN_FAILURES.iter().any(|(k, _)| *k == key);
            match outcome {
                Err(_) if known => known_seen.push(key),
                Err(failure) => failures.push(format!("{}: {failure}", file.display())),
                Ok(()) if known => {
                    failures.push(format!("{key} passes now: delete it from KNOWN_FAILURES"))
                }
                Ok(()) => {}
            }
        }
    }
    for (key, _) in KNOWN_FAILURES {
        if !known_seen.iter().any(|seen| seen == key)
            && !failures.iter().any(|f| f.starts_with(key))
        {
            failures.push(format!(
                "{key} is in KNOWN_FAILURES but is not in the corpus"
            ));
        }
    }

    assert!(
        failures.is_empty(),
        "{} of {checked} fuzz inputs fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn is_seed(file: &Path) -> bool {
    file.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("seed-"))
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}
