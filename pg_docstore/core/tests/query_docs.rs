//! `docs/query.md` is checked against the code: every `sql` block holds queries (separated by
//! blank lines) that parse, and a `json` block right after a one-query `sql` block is the
//! same query in the structured form.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;

use docstore_core::query::{parse_query, parse_structured_str};

const DOC: &str = "../../docs/query.md";

/// The fenced code blocks of the document: (language, text).
fn blocks(markdown: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, usize, Vec<String>)> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match (&mut current, trimmed.strip_prefix("```")) {
            (None, Some(lang)) => current = Some((lang.trim().to_owned(), indent, Vec::new())),
            (Some(_), Some("")) => {
                let (lang, _, lines) = current.take().unwrap();
                out.push((lang, lines.join("\n")));
            }
            (Some((_, indent, lines)), _) => {
                lines.push(line.get(*indent..).unwrap_or(line.trim_start()).to_owned());
            }
            (None, None) => {}
        }
    }
    assert!(current.is_none(), "an unclosed code block");
    out
}

#[test]
fn examples_in_the_document_hold() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
    let markdown = std::fs::read_to_string(&path).unwrap();
    let mut checked_sql = 0;
    let mut checked_json = 0;
    let mut previous: Option<Vec<String>> = None;
    for (lang, text) in blocks(&markdown) {
        match lang.as_str() {
            "sql" => {
                let queries: Vec<String> = text
                    .split("\n\n")
                    .map(str::trim)
                    .filter(|q| !q.is_empty())
                    .map(str::to_owned)
                    .collect();
                for query in &queries {
                    let parsed = parse_query(query).unwrap_or_else(|e| panic!("{query}: {e}"));
                    assert_eq!(parse_query(&parsed.to_string()), Ok(parsed), "{query}");
                    checked_sql += 1;
                }
                previous = Some(queries);
                continue;
            }
            "json" => {
                let structured =
                    parse_structured_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                let Some([query]) = previous.as_deref() else {
                    panic!("a json block must follow a one-query sql block:\n{text}");
                };
                assert_eq!(structured, parse_query(query).unwrap(), "{query}");
                checked_json += 1;
            }
            _ => {}
        }
        previous = None;
    }
    assert!(checked_sql >= 15, "{checked_sql} queries checked");
    assert!(
        checked_json >= 3,
        "{checked_json} structured examples checked"
    );
}
