//! A mismatch as a reproduction: the fewest documents that still show it, and the SQL that
//! sets it up again.

use std::fmt::Write as _;

use postgres::Client;

use docstore_core::query::Query;
use docstore_core::value::Map;
use docstore_core::{typed_json, ResourcePath, Value};

use crate::cluster::{commit, json_string, run_query, set_write, Answer};
use crate::oracle::{oracle, verdict, Expected, Verdict};

/// Drop documents of the query's source one by one (deleting them from the database) while
/// the mismatch persists; returns the documents left and the answer over them. Afterwards
/// every document of `docs` is back in the database.
pub(crate) fn minimise(
    client: &mut Client,
    query: &Query,
    text: &str,
    docs: &[(ResourcePath, Map)],
    answer: Answer,
) -> (Vec<(ResourcePath, Map)>, Answer) {
    let mut kept: Vec<(ResourcePath, Map)> = docs.to_vec();
    let mut kept_answer = answer;
    let mut removed: Vec<(ResourcePath, Map)> = Vec::new();
    let mut scratch = 0;
    for (path, doc) in docs {
        let delete = format!(r#"{{"delete": {}}}"#, json_string(&path.to_string()));
        commit(client, &[delete]);
        let without: Vec<(ResourcePath, Map)> =
            kept.iter().filter(|(p, _)| p != path).cloned().collect();
        let answer = run_query(client, text, &mut scratch);
        if matches!(verdict(query, &without, &answer), Verdict::Differs(_)) {
            kept = without;
            kept_answer = answer;
            removed.push((path.clone(), doc.clone()));
        } else {
            commit(client, &[set_write(path, doc)]);
        }
    }
    let restore: Vec<String> = removed.iter().map(|(p, d)| set_write(p, d)).collect();
    commit(client, &restore);
    (kept, kept_answer)
}

/// Long runs of `x` (see [`long_string`]) are printed as this marker...
pub(crate) const LONG_RUN_MARKER: &str = "<1600 x>";

/// ...and SQL literals holding the marker are wrapped in a `replace` that restores the run, so
/// the statements of a report stay short and still run as printed.
pub(crate) fn sql_literal(text: &str) -> String {
    let run = "x".repeat(1600);
    let quoted = format!(
        "'{}'",
        text.replace(&run, LONG_RUN_MARKER).replace('\'', "''")
    );
    if quoted.contains(LONG_RUN_MARKER) {
        format!("replace({quoted}, '{LONG_RUN_MARKER}', repeat('x', 1600))")
    } else {
        quoted
    }
}

pub(crate) fn shorten(text: &str) -> String {
    text.replace(&"x".repeat(1600), LONG_RUN_MARKER)
}

/// The composite indexes the query's plan uses (`docstore.explain`) and the exemptions, as
/// the statements that recreate them.
pub(crate) fn catalog_statements(client: &mut Client, text: &str) -> Vec<String> {
    fn composites(json: &serde_json::Value, out: &mut Vec<i32>) {
        match json {
            serde_json::Value::Object(members) => {
                for (key, value) in members {
                    match (key.as_str(), value.as_i64()) {
                        ("composite", Some(id)) => out.push(i32::try_from(id).unwrap()),
                        _ => composites(value, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|i| composites(i, out)),
            _ => {}
        }
    }
    let mut ids = Vec::new();
    if let Ok(row) = client.query_one("select docstore.explain($1)::text", &[&text]) {
        let plan: serde_json::Value = serde_json::from_str(&row.get::<_, String>(0)).unwrap();
        composites(&plan, &mut ids);
    }
    let mut out = Vec::new();
    let indexes = client
        .query(
            "select collection_group, scope, fields::text from docstore.indexes \
             where id = any($1) order by id",
            &[&ids],
        )
        .expect("reading docstore.indexes");
    for row in indexes {
        let (group, scope, fields): (String, String, String) = (row.get(0), row.get(1), row.get(2));
        out.push(format!(
            "select docstore.create_index({}, {}, {});",
            sql_literal(&group),
            sql_literal(&fields),
            sql_literal(&scope)
        ));
    }
    let exemptions = client
        .query(
            "select collection_group, field_path from docstore.field_exemptions order by 1, 2",
            &[],
        )
        .expect("reading docstore.field_exemptions");
    for row in exemptions {
        let (group, field): (String, String) = (row.get(0), row.get(1));
        out.push(format!(
            "select docstore.exempt_field({}, {});",
            sql_literal(&group),
            sql_literal(&field)
        ));
    }
    out
}

/// The report of a mismatch: the query, what differs over the whole set, and a reproduction
/// (the indexes and exemptions, the fewest documents that still show it, both answers).
pub(crate) fn report(
    client: &mut Client,
    query: &Query,
    text: &str,
    why: &str,
    minimal: &[(ResourcePath, Map)],
    minimal_answer: &Answer,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "---- mismatch\nquery: {}\n{}",
        shorten(text),
        shorten(why)
    );
    let _ = writeln!(
        out,
        "reproduction ({} documents of the source are enough):",
        minimal.len()
    );
    if !minimal.is_empty() {
        let writes: Vec<String> = minimal.iter().map(|(p, d)| set_write(p, d)).collect();
        let _ = writeln!(
            out,
            "  select docstore.commit({}::jsonb);",
            sql_literal(&format!("[{}]", writes.join(", ")))
        );
    }
    for statement in catalog_statements(client, text) {
        let _ = writeln!(out, "  {statement}");
    }
    let _ = writeln!(out, "  call docstore.build_indexes();");
    let _ = writeln!(
        out,
        "  select path, data from docstore.query({});",
        sql_literal(text)
    );
    let _ = writeln!(out, "expected:");
    match oracle(query, minimal) {
        Expected::Aggregates(agg) => {
            let agg = typed_json::to_string(&Value::Map(agg));
            let _ = writeln!(out, "  \"\" {}", shorten(&agg));
        }
        Expected::Rows(rows) => {
            for (path, doc) in rows {
                let data = typed_json::to_string(&Value::Map(doc));
                let _ = writeln!(out, "  {path} {}", shorten(&data));
            }
        }
    }
    let _ = writeln!(out, "actual:");
    match minimal_answer {
        Answer::Rows(rows) => {
            for (path, data) in rows {
                let _ = writeln!(out, "  {path:?} {}", shorten(data));
            }
        }
        Answer::Unsupported => {
            let _ = writeln!(out, "  refused as unsupported");
        }
        Answer::SuggestionRefused(call, message) => {
            let _ = writeln!(out, "  asked for {call}, which failed: {message}");
        }
        Answer::Error(code, message) => {
            let _ = writeln!(out, "  error {code}: {}", shorten(message));
        }
    }
    out
}
