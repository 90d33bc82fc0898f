//! The corpus of public firestore.rules files (`corpus/SOURCES.md`): every file is parsed,
//! compiled and printed as SQL, and its outcome must be the one pinned in the table, so a file
//! that compiled and stops compiling (or a refusal that changes) fails the test. The files are
//! not in git: `scripts/fetch-rules-corpus.sh` brings them into `corpus/files/`, every one it
//! can, and names each one it could not reach in `corpus/not-fetched.tsv` with the reason. The
//! tests run on the files that are there and report each one that could not be fetched as a
//! skipped case, a line `SKIPPED: rules-corpus/FILE: reason` (scripts/tally.sh counts it, and
//! tests/allowed-skips.txt allows it); a file that is missing for another reason (not recorded
//! there) is a failure. Before the fetcher has ever run (no `files/`, no `not-fetched.tsv`)
//! every file is reported skipped.
//!
//! The report (`cargo test -p docstore-rules --test corpus -- --nocapture`): how many files
//! parse, compile and are refused, and the refusals by SQLSTATE and message class. Then
//! every compiled file is a differential test against the hidane-rules crate: sample
//! requests on the paths its rules match, decided by both, which must agree.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

mod common;

use docstore_core::value::Map as CoreMap;
use docstore_core::{ResourcePath, Timestamp};
use docstore_rules::eval::{evaluate, Budget, Decision, Document, Documents, Request};
use docstore_rules::{compile, parse, sql, CompileError, CompileErrorKind, Method};
use hidane_rules::eval as h;
use serde_json::{json, Value as Json};
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
        assert!(
            hashes.insert(e.sha256.clone()),
            "{}: same content twice",
            e.file
        );
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
            [
                "Apache-2.0",
                "MIT",
                "BSD-3-Clause",
                "GPL-3.0",
                "AGPL-3.0",
                "none"
            ]
            .contains(&e.licence.as_str()),
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
    assert!(
        unsupported.result.starts_with("0A000 "),
        "{}",
        unsupported.result
    );
    let broken = outcome("service cloud.firestore { match /x { allow read: if ; } }");
    assert!(!broken.parses);
    assert!(broken.result.starts_with("42601 "), "{}", broken.result);
    let fine =
        outcome("service cloud.firestore { match /databases/{d}/documents { allow read; } }");
    assert_eq!(fine.result, "compiles");
}

/// Why each corpus file the fetcher could not reach is missing (`corpus/not-fetched.tsv`, or
/// every file when the fetcher has not run).
fn not_fetched(rows: &[Entry]) -> BTreeMap<String, String> {
    let files = corpus_dir().join("files");
    match fs::read_to_string(corpus_dir().join("not-fetched.tsv")) {
        Ok(text) => text
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(file, reason)| (file.to_owned(), format!("not fetched: {reason}")))
            .collect(),
        Err(_) if !fs::read_dir(&files).is_ok_and(|mut e| e.next().is_some()) => rows
            .iter()
            .map(|e| {
                (
                    e.file.clone(),
                    "not fetched: scripts/fetch-rules-corpus.sh has not run".to_owned(),
                )
            })
            .collect(),
        Err(_) => BTreeMap::new(),
    }
}

#[test]
fn every_corpus_file_has_its_pinned_outcome() {
    let rows = entries();
    let files = corpus_dir().join("files");
    let skipped = not_fetched(&rows);
    let pinned: BTreeSet<&str> = rows.iter().map(|e| e.file.as_str()).collect();
    let mut problems = Vec::new();
    for entry in fs::read_dir(&files).into_iter().flatten() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !pinned.contains(name.as_str()) {
            problems.push(format!("{name}: in files/ but not in SOURCES.md"));
        }
    }
    let (mut parsed, mut compiled, mut checked) = (0, 0, 0);
    let mut refused: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for e in &rows {
        let Ok(bytes) = fs::read(files.join(&e.file)) else {
            match skipped.get(&e.file) {
                Some(reason) => println!("SKIPPED: rules-corpus/{}: {reason}", e.file),
                None => problems.push(format!(
                    "{}: missing, and not recorded as unreachable by scripts/fetch-rules-corpus.sh",
                    e.file
                )),
            }
            continue;
        };
        checked += 1;
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
        "rules corpus: {checked} of {} files checked ({} not fetched) from {} repositories: \
         {parsed} parse, {compiled} compile, {} refused",
        rows.len(),
        rows.len() - checked,
        rows.iter()
            .map(|e| &e.repository)
            .collect::<BTreeSet<_>>()
            .len(),
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

/// Every lookup finds a document with the same data (`Some`), or none exists (`None`).
struct Everywhere(Option<CoreMap>);

impl Documents for Everywhere {
    fn get(&self, _: &ResourcePath) -> Option<CoreMap> {
        self.0.clone()
    }
    fn get_after(&self, _: &ResourcePath) -> Option<CoreMap> {
        self.0.clone()
    }
}

impl h::Documents for Everywhere {
    fn get(&self, p: &[String]) -> Option<h::Document> {
        let rel = p.get(3..)?.join("/");
        self.0.as_ref().map(|d| common::hidane::document(&rel, d))
    }
    fn get_after(&self, p: &[String]) -> Option<h::Document> {
        h::Documents::get(self, p)
    }
}

/// Document paths a rule's pattern matches: wildcards become `u1` (so `uid == userId` can
/// hold), a `**` one or two segments, whichever makes a document path.
fn sample_paths(pattern: &str) -> Vec<String> {
    let segments: Vec<&str> = pattern.trim_start_matches('/').split('/').skip(3).collect();
    let mut out = Vec::new();
    for rest in ["u1", "u1/u1"] {
        let mut parts = Vec::new();
        let mut recursive = false;
        for s in &segments {
            if s.starts_with('{') && s.ends_with("=**}") {
                recursive = true;
                parts.push(rest);
            } else if s.starts_with('{') {
                parts.push("u1");
            } else {
                parts.push(s);
            }
        }
        let path = parts.join("/");
        if path.split('/').count() % 2 == 0 && !out.contains(&path) {
            out.push(path);
        }
        if !recursive {
            break;
        }
    }
    out
}

/// Data variants over the fields the ruleset reads: none, and every field a string, an int,
/// a list, a boolean.
fn variants(source: &str) -> Vec<CoreMap> {
    let field = regex::Regex::new(r"resource\.data\.([A-Za-z_][A-Za-z0-9_]*)").unwrap();
    let fields: BTreeSet<&str> = field
        .captures_iter(source)
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    [
        json!(null),
        json!("u1"),
        json!(1),
        json!(["u1"]),
        json!(true),
    ]
    .iter()
    .enumerate()
    .map(|(i, v)| {
        let m: serde_json::Map<String, Json> = if i == 0 {
            serde_json::Map::new()
        } else {
            fields
                .iter()
                .map(|f| ((*f).to_owned(), v.clone()))
                .collect()
        };
        common::map(&Json::Object(m))
    })
    .collect()
}

#[test]
fn corpus_rulesets_decide_as_hidane_rules_does() {
    // The files that are there; each missing one is every_corpus_file_has_its_pinned_outcome's
    // skip or failure, reported once, there.
    let files = corpus_dir().join("files");
    let mut compared = 0usize;
    let auths = [
        None,
        Some(
            json!({"sub": "u1", "email": "u1@example.com", "email_verified": true, "admin": true, "role": "admin"}),
        ),
        Some(json!({"sub": "u2"})),
    ];
    let (mut decisions, mut refused_by_hidane) = (0usize, Vec::new());
    let mut differ: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut refused_by_both = Vec::new();
    for e in &entries() {
        let Ok(source) = fs::read_to_string(files.join(&e.file)) else {
            continue;
        };
        compared += 1;
        let hidane = common::hidane::compile(&source);
        // A file whose outcome changed is every_corpus_file_has_its_pinned_outcome's failure.
        let Ok(ours) = compile(&source) else {
            if let Err(err) = hidane {
                refused_by_both.push(format!("{}: {}", e.file, err.replace('\n', " ")));
            }
            continue;
        };
        let theirs = match hidane {
            Ok(r) => r,
            Err(err) => {
                refused_by_hidane.push(format!("{}: {}", e.file, err.replace('\n', " ")));
                continue;
            }
        };
        let data = variants(&source);
        let mut paths: Vec<String> = ours
            .rules
            .iter()
            .flat_map(|r| sample_paths(&r.pattern))
            .collect();
        paths.sort();
        paths.dedup();
        for path in &paths {
            let rpath = ResourcePath::parse(path).unwrap();
            for auth in &auths {
                // (method, stored, new, lookups find)
                let mut cases: Vec<(Method, Option<&CoreMap>, Option<&CoreMap>)> =
                    vec![(Method::Get, None, None)];
                for d in &data {
                    cases.push((Method::Get, Some(d), None));
                    cases.push((Method::Create, None, Some(d)));
                    cases.push((Method::Update, Some(d), Some(d)));
                    cases.push((Method::Update, Some(d), Some(&data[1])));
                    cases.push((Method::Delete, Some(d), None));
                }
                for (method, stored, new) in cases {
                    for lookups in [None, stored.or(new).or(Some(&data[1]))] {
                        let docs = Everywhere(lookups.cloned());
                        let request = Request {
                            method,
                            database: "(default)".into(),
                            path: rpath.clone(),
                            auth: auth.clone().into(),
                            resource: new.map(|d| Document {
                                path: rpath.clone(),
                                data: d.clone(),
                            }),
                            time: Timestamp::from_micros(common::TIME_MICROS).unwrap(),
                            query: None,
                        };
                        let stored_doc = stored.map(|d| Document {
                            path: rpath.clone(),
                            data: d.clone(),
                        });
                        let store = Stored {
                            at: path,
                            stored,
                            lookups: &docs,
                        };
                        let a = evaluate(
                            &ours,
                            &request,
                            stored_doc.as_ref(),
                            &store,
                            &mut Budget::single(),
                        ) == Decision::Allow;
                        let b = common::hidane::authorize(
                            &theirs,
                            &store,
                            auth.as_ref(),
                            method,
                            path,
                            new,
                            common::TIME_MICROS,
                            None,
                        );
                        decisions += 1;
                        if a != b {
                            differ.entry(e.file.clone()).or_default().push(format!(
                                "{method:?} {path} auth={} stored={} new={} lookups={}: ours {a}, hidane {b}",
                                auth.as_ref().map_or("none".to_owned(), |a| a["sub"].to_string()),
                                stored.map_or("none".to_owned(), |d| format!("{d:?}")),
                                new.map_or("none".to_owned(), |d| format!("{d:?}")),
                                lookups.is_some()
                            ));
                        }
                    }
                }
            }
        }
    }
    println!(
        "rules corpus against hidane-rules: {compared} files, {decisions} decisions compared, {} \
         files differ; hidane refuses {}",
        differ.len(),
        refused_by_hidane.len()
    );
    for r in &refused_by_hidane {
        println!("  hidane refuses (we compile) {r}");
    }
    for r in &refused_by_both {
        println!("  both refuse; hidane: {r}");
    }
    for (file, cases) in &differ {
        println!("  {file}: {} cases differ, e.g. {}", cases.len(), cases[0]);
    }
    assert!(differ.is_empty());
}

/// Both implementations' lookups: the document at the request's path is `stored` (a rule's
/// `get()` of its own document sees it before the write), every other path the lookup store's.
struct Stored<'a> {
    at: &'a str,
    stored: Option<&'a CoreMap>,
    lookups: &'a Everywhere,
}

impl h::Documents for Stored<'_> {
    fn get(&self, p: &[String]) -> Option<h::Document> {
        let rel = p.get(3..)?.join("/");
        if rel == self.at {
            return self.stored.map(|d| common::hidane::document(&rel, d));
        }
        h::Documents::get(self.lookups, p)
    }
    fn get_after(&self, p: &[String]) -> Option<h::Document> {
        h::Documents::get(self, p)
    }
}

impl Documents for Stored<'_> {
    fn get(&self, p: &ResourcePath) -> Option<CoreMap> {
        if p.to_string() == self.at {
            return self.stored.cloned();
        }
        Documents::get(self.lookups, p)
    }
    fn get_after(&self, p: &ResourcePath) -> Option<CoreMap> {
        Documents::get(self, p)
    }
}
