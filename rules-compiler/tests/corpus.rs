//! The corpus of public firestore.rules files (`corpus/SOURCES.md`): every file is parsed,
//! compiled and printed as SQL, and its outcome must be the one pinned in the table, so a file
//! that compiled and stops compiling (or a refusal that changes) fails the test. The files are
//! not in git: `scripts/fetch-rules-corpus.sh` brings them into `corpus/files/`. Without that
//! directory the corpus test prints how to fetch it and checks only the table, unless
//! `DOCSTORE_RULES_CORPUS_REQUIRED=1`, which makes the absence a failure.
//!
//! The report (`cargo test -p docstore-rules --test corpus -- --nocapture`): how many files
//! parse, compile and are refused, and the refusals by SQLSTATE and message class.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use docstore_rules::{compile, parse, sql, CompileError, CompileErrorKind, Method};
use sha2::{Digest, Sha256};

/// One row of `corpus/SOURCES.md`.
struct Entry {
    file: String,
    repository: String,
    commit: String,
    licence: String,
    sha256: String,
    expected: String,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

fn unquote(cell: &str) -> String {
    cell.trim().trim_matches('`').to_owned()
}

/// The table rows of SOURCES.md (the rows whose commit cell is 40 hex digits).
fn entries() -> Vec<Entry> {
    let text = fs::read_to_string(corpus_dir().join("SOURCES.md")).unwrap();
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<String> = line.split('|').map(unquote).collect();
        // ["", file, repository, path, commit, licence, sha256, expected, ""]
        assert_eq!(cells.len(), 9, "malformed row: {line}");
        out.push(Entry {
            file: cells[1].clone(),
            repository: cells[2].clone(),
            commit: cells[4].clone(),
            licence: cells[5].clone(),
            sha256: cells[6].clone(),
            expected: cells[7].clone(),
        });
    }
    out
}

/// A refusal's class: its SQLSTATE and its message with quoted text and numbers replaced by
/// `…`, so refusals of one kind group together whatever names they mention.
fn class(e: &CompileError) -> String {
    let code = match e.kind {
        CompileErrorKind::Syntax => "42601",
        CompileErrorKind::Unimplemented => "0A000",
    };
    let mut msg = String::new();
    let mut quote: Option<char> = None;
    for c in e.message.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '`' || c == '"' => {
                quote = Some(c);
                msg.push('…');
            }
            None if c.is_ascii_digit() => {
                if !msg.ends_with('…') {
                    msg.push('…');
                }
            }
            None => msg.push(c),
        }
    }
    format!("{code} {msg}")
}

/// What the compiler makes of one file.
struct Outcome {
    parses: bool,
    /// `compiles`, or the refusal's class.
    result: String,
}

fn outcome(source: &str) -> Outcome {
    let parses = parse::parse(source).is_ok();
    let result = match compile(source) {
        Ok(ruleset) => {
            // Both back ends must take what compiled: the SQL text is printed for every method.
            let generated = sql::generate(&ruleset, "request", "resource");
            assert_eq!(generated.methods.len(), Method::ALL.len());
            assert!(generated.methods.iter().all(|m| !m.expression.is_empty()));
            "compiles".to_owned()
        }
        Err(e) => class(&e),
    };
    Outcome { parses, result }
}

fn sha256_prefix(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_table_records_at_least_thirty_sources_with_commit_and_licence() {
    let rows = entries();
    assert!(rows.len() >= 30, "only {} rows", rows.len());
    let mut names = BTreeSet::new();
    let mut hashes = BTreeSet::new();
    for e in &rows {
        assert!(names.insert(e.file.clone()), "{} twice", e.file);
        assert!(hashes.insert(e.sha256.clone()), "{}: same content twice", e.file);
        assert!(e.repository.contains('/'), "{}: repository", e.file);
        assert!(
            e.commit.len() == 40 && e.commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{}: commit",
            e.file
        );
        assert!(
            e.sha256.len() == 16 && e.sha256.bytes().all(|b| b.is_ascii_hexdigit()),
            "{}: sha256",
            e.file
        );
        assert!(
            ["Apache-2.0", "MIT", "BSD-3-Clause", "GPL-3.0", "none"].contains(&e.licence.as_str()),
            "{}: licence {}",
            e.file,
            e.licence
        );
        assert!(
            e.expected == "compiles"
                || e.expected.starts_with("42601 ")
                || e.expected.starts_with("0A000 "),
            "{}: expected {}",
            e.file,
            e.expected
        );
    }
}

#[test]
fn refusals_are_classed_by_sqlstate_and_message_shape() {
    // The classifier on refusals of our own, one per kind, so a pinned refusal can be matched.
    let syntax = outcome(
        "service cloud.firestore { match /databases/{d}/documents { allow read: if 'a'.nope(); } }",
    );
    assert!(syntax.parses);
    assert_eq!(syntax.result, "42601 unknown method …");
    let unsupported = outcome("service firebase.storage { match /b/{bucket}/o { allow read; } }");
    assert!(unsupported.result.starts_with("0A000 "), "{}", unsupported.result);
    let broken = outcome("service cloud.firestore { match /x { allow read: if ; } }");
    assert!(!broken.parses);
    assert!(broken.result.starts_with("42601 "), "{}", broken.result);
    let fine = outcome("service cloud.firestore { match /databases/{d}/documents { allow read; } }");
    assert_eq!(fine.result, "compiles");
}

#[test]
fn every_corpus_file_has_its_pinned_outcome() {
    let rows = entries();
    let files = corpus_dir().join("files");
    if !files.is_dir() {
        let msg = format!(
            "rules corpus not fetched ({} missing): run scripts/fetch-rules-corpus.sh; {} files \
             not checked",
            files.display(),
            rows.len()
        );
        assert!(
            std::env::var("DOCSTORE_RULES_CORPUS_REQUIRED").as_deref() != Ok("1"),
            "{msg}"
        );
        println!("SKIPPED: {msg}");
        return;
    }
    let pinned: BTreeSet<&str> = rows.iter().map(|e| e.file.as_str()).collect();
    let mut problems = Vec::new();
    for entry in fs::read_dir(&files).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !pinned.contains(name.as_str()) {
            problems.push(format!("{name}: in files/ but not in SOURCES.md"));
        }
    }
    let (mut parsed, mut compiled) = (0, 0);
    let mut refused: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for e in &rows {
        let Ok(bytes) = fs::read(files.join(&e.file)) else {
            problems.push(format!("{}: missing (fetch it)", e.file));
            continue;
        };
        if sha256_prefix(&bytes) != e.sha256 {
            problems.push(format!("{}: content differs from the pinned hash", e.file));
            continue;
        }
        let Ok(source) = String::from_utf8(bytes) else {
            problems.push(format!("{}: not UTF-8", e.file));
            continue;
        };
        let got = outcome(&source);
        parsed += usize::from(got.parses);
        if got.result == "compiles" {
            compiled += 1;
        } else {
            refused.entry(got.result.clone()).or_default().push(&e.file);
        }
        if got.result != e.expected {
            problems.push(format!(
                "{}: expected `{}`, got `{}`",
                e.file, e.expected, got.result
            ));
        }
    }
    println!(
        "rules corpus: {} files from {} repositories: {parsed} parse, {compiled} compile, {} refused",
        rows.len(),
        rows.iter().map(|e| &e.repository).collect::<BTreeSet<_>>().len(),
        refused.values().map(Vec::len).sum::<usize>()
    );
    for (class, names) in &refused {
        println!("  {}x {class}: {}", names.len(), names.join(", "));
    }
    assert!(
        problems.is_empty(),
        "corpus outcomes differ from corpus/SOURCES.md (fix the compiler, or re-pin the row if \
         the change is intended):\n{}",
        problems.join("\n")
    );
}
