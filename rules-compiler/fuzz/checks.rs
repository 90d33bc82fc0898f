//! The check behind the fuzz target: rules source text of any bytes through the whole
//! compiler (lex, parse, check, IR), then both back ends (SQL text, and the evaluator on a
//! fixed request). Refusing input is fine; a panic, or a compile error without a position
//! and caret, is a failure.
//!
//! Also compiled into `tests/fuzz_seeds.rs` with `#[path]`, so `cargo test` runs every file
//! under `fuzz/corpus/compile/` through the same check on stable Rust.

use docstore_core::{ResourcePath, Timestamp};
use docstore_rules::eval::{evaluate, Budget, NoDocuments, Request};
use docstore_rules::{compile, sql, Method};

/// What a check reports when a property does not hold.
pub type Failure = String;

/// `Ok` when `data` is refused properly or compiles and runs; `Err` describing what broke.
pub fn check_compile(data: &[u8]) -> Result<(), Failure> {
    let Ok(source) = std::str::from_utf8(data) else {
        return Ok(());
    };
    match compile(source) {
        Err(e) => {
            if e.line == 0 || e.column == 0 || !e.excerpt.contains('^') {
                return Err(format!("compile error without a position: {e:?}"));
            }
            Ok(())
        }
        Ok(rules) => {
            let out = sql::generate(&rules, "request", "resource");
            if out.methods.len() != Method::ALL.len() {
                return Err("sql: not one expression per method".into());
            }
            let path = ResourcePath::parse("a/b").map_err(|e| e.to_string())?;
            let time = Timestamp::from_micros(0).ok_or("time")?;
            for method in Method::ALL {
                let request = Request {
                    method,
                    database: "(default)".into(),
                    path: path.clone(),
                    auth: Some(serde_json::json!({"sub": "u"})).into(),
                    resource: None,
                    time,
                    query: None,
                };
                let _ = evaluate(&rules, &request, None, &NoDocuments, &mut Budget::single());
            }
            Ok(())
        }
    }
}
