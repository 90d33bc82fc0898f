//! The cluster side: a fresh database, writing documents, creating the indexes that queries
//! ask for, running a query as a user would, and `check_indexes()`.

use std::collections::BTreeSet;

use postgres::error::SqlState;
use postgres::{Client, NoTls};

use docstore_core::index::{IndexDefinition, Scope};
use docstore_core::query::Filter;
use docstore_core::value::Map;
use docstore_core::{typed_json, FieldPath, ResourcePath, Value};

use crate::cases::UNSUPPORTED_BY_DESIGN;

/// The server's message of an error (the `Display` of `postgres::Error` is only "db error").
pub(crate) fn message(e: &postgres::Error) -> String {
    e.as_db_error()
        .map_or_else(|| e.to_string(), |d| d.message().to_owned())
}

pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Drop and create the DSN's database (through `dbname=postgres`), create the extension.
pub(crate) fn fresh_database(dsn: &str) -> Client {
    let config: postgres::Config = dsn.parse().expect("DOCSTORE_TEST_DSN does not parse");
    let dbname = config
        .get_dbname()
        .expect("DOCSTORE_TEST_DSN names no dbname")
        .to_owned();
    assert_ne!(
        dbname, "postgres",
        "the test drops its database: use another one"
    );
    let mut maintenance = config.clone();
    maintenance.dbname("postgres");
    let mut admin = maintenance
        .connect(NoTls)
        .expect("connecting to dbname=postgres");
    let ident = quote_ident(&dbname);
    // Two statements: one simple-protocol batch would be one transaction block.
    admin
        .batch_execute(&format!("drop database if exists {ident} with (force)"))
        .expect("dropping the test database");
    admin
        .batch_execute(&format!("create database {ident}"))
        .expect("creating the test database");
    let mut client = config
        .connect(NoTls)
        .expect("connecting to the test database");
    client
        .batch_execute("create extension pg_docstore")
        .expect("create extension pg_docstore");
    // The client role of `run_query` (roles are cluster-wide; the grants are this database's).
    client
        .batch_execute(&format!(
            "do $$ begin create role {READER}; exception when duplicate_object then null; end $$; \
             grant usage on schema docstore to {READER}; \
             grant select on docstore.entities to {READER};"
        ))
        .expect("creating the reader role");
    for function in ["docstore.query(text)", "docstore.commit(jsonb)"] {
        client
            .execute("select $1::text::regprocedure", &[&function])
            .unwrap_or_else(|e| {
                panic!(
                    "the installed pg_docstore has no {function} (reinstall it: make up): {}",
                    message(&e)
                )
            });
    }
    client
}

/// Replace the documents of the previous set with `docs` in one commit (deletes, then sets).
pub(crate) fn write_documents(
    client: &mut Client,
    previous: &[(ResourcePath, Map)],
    docs: &[(ResourcePath, Map)],
) {
    let keep: BTreeSet<&ResourcePath> = docs.iter().map(|(p, _)| p).collect();
    let mut writes = Vec::new();
    for (path, _) in previous {
        if !keep.contains(path) {
            writes.push(format!(
                r#"{{"delete": {}}}"#,
                json_string(&path.to_string())
            ));
        }
    }
    for (path, doc) in docs {
        writes.push(set_write(path, doc));
    }
    commit(client, &writes);
}

pub(crate) fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

pub(crate) fn set_write(path: &ResourcePath, doc: &Map) -> String {
    format!(
        r#"{{"set": {}, "data": {}}}"#,
        json_string(&path.to_string()),
        typed_json::to_string(&Value::Map(doc.clone()))
    )
}

pub(crate) fn commit(client: &mut Client, writes: &[String]) {
    if writes.is_empty() {
        return;
    }
    let batch = format!("[{}]", writes.join(", "));
    client
        .execute("select docstore.commit($1::text::jsonb)", &[&batch])
        .unwrap_or_else(|e| panic!("commit failed: {e:?}\n{batch}"));
}

/// Create the generated composite indexes that create_index accepts (single-field
/// collection-scope ones are refused; existing ones are skipped).
pub(crate) fn create_composites(client: &mut Client, defs: &[IndexDefinition]) -> usize {
    let mut created = 0;
    for def in defs {
        let fields = IndexDefinition::fields_json(&def.fields).to_string();
        let scope = match def.scope {
            Scope::Collection => "collection",
            Scope::CollectionGroup => "collection_group",
        };
        match client.execute(
            "select docstore.create_index($1, $2::text::jsonb, $3)",
            &[&def.collection_group, &fields, &scope],
        ) {
            Ok(_) => created += 1,
            Err(e)
                if e.code() == Some(&SqlState::UNIQUE_VIOLATION)
                    || e.code() == Some(&SqlState::INVALID_PARAMETER_VALUE) => {}
            Err(e) => panic!("create_index('c', {fields}, {scope}) failed: {e:?}"),
        }
    }
    if created > 0 {
        build_indexes(client);
    }
    created
}

pub(crate) fn build_indexes(client: &mut Client) {
    client
        .batch_execute("call docstore.build_indexes()")
        .expect("call docstore.build_indexes()");
}

/// The `select docstore.create_index(...);` call in a missing-index message.
pub(crate) fn create_index_call(message: &str) -> Option<&str> {
    let start = message.find("select docstore.create_index(")?;
    let end = message[start..].find(");")? + start + 2;
    Some(&message[start..end])
}

/// What `docstore.query` answered.
pub(crate) enum Answer {
    Rows(Vec<(String, String)>),
    /// Refused by design (see [`UNSUPPORTED_BY_DESIGN`]).
    Unsupported,
    /// The query asked for an index whose `create_index` call then failed: `(call, message)`.
    SuggestionRefused(String, String),
    /// Any other error: `(sqlstate, message)`.
    Error(String, String),
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) generated: usize,
    pub(crate) invalid: usize,
    pub(crate) unsupported: usize,
    pub(crate) run: usize,
    pub(crate) nonempty: usize,
    pub(crate) aggregations: usize,
    pub(crate) projections: usize,
    pub(crate) limits: usize,
    pub(crate) cursors: usize,
    pub(crate) groups: usize,
    pub(crate) or_filters: usize,
    pub(crate) suggested_indexes: usize,
    pub(crate) random_indexes: usize,
    pub(crate) documents_written: usize,
    pub(crate) exemptions: usize,
    pub(crate) long_value_ties: usize,
    pub(crate) mismatches: usize,
}

pub(crate) fn has_or(filter: &Filter) -> bool {
    match filter {
        Filter::Or(_) => true,
        Filter::And(children) => children.iter().any(has_or),
        Filter::Field { .. } | Filter::Unary { .. } => false,
    }
}

/// Run a query, creating the indexes it asks for; `created` counts them.
pub(crate) fn run_query(client: &mut Client, text: &str, created: &mut usize) -> Answer {
    for _ in 0..20 {
        match client.query("select path, data::text from docstore.query($1)", &[&text]) {
            Ok(rows) => {
                let rows: Vec<(String, String)> = rows
                    .iter()
                    .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
                    .collect();
                // A client role reads through the general executor (no single-statement fast
                // paths, documents fetched with its own rights): it must see the same rows.
                let as_client = as_reader(client, text);
                if as_client.as_ref() != Ok(&rows) {
                    return Answer::Error(
                        "-".into(),
                        format!("as {READER} the rows differ: {as_client:?}"),
                    );
                }
                return Answer::Rows(rows);
            }
            Err(e) => {
                let Some(db) = e.as_db_error() else {
                    panic!("docstore.query failed without a server error: {e:?}\n{text}");
                };
                if *db.code() == SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE {
                    let call = create_index_call(db.message()).unwrap_or_else(|| {
                        panic!("55000 without a create_index call: {}", db.message())
                    });
                    if let Err(e) = client.batch_execute(call) {
                        return Answer::SuggestionRefused(call.to_owned(), message(&e));
                    }
                    build_indexes(client);
                    *created += 1;
                    continue;
                }
                if *db.code() == SqlState::FEATURE_NOT_SUPPORTED
                    && UNSUPPORTED_BY_DESIGN
                        .iter()
                        .any(|m| db.message().contains(m))
                {
                    return Answer::Unsupported;
                }
                return Answer::Error(db.code().code().to_owned(), db.message().to_owned());
            }
        }
    }
    Answer::Error(
        "-".into(),
        "still asking for an index after 20 create_index calls".into(),
    )
}

/// A role with rights on `docstore.entities` only, as a client role would have.
pub(crate) const READER: &str = "docstore_differential_reader";

/// The rows of `text` for [`READER`], or the error message.
fn as_reader(client: &mut Client, text: &str) -> Result<Vec<(String, String)>, String> {
    client
        .batch_execute(&format!("set role {READER}"))
        .map_err(|e| message(&e))?;
    let rows = client
        .query("select path, data::text from docstore.query($1)", &[&text])
        .map(|rows| {
            rows.iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
                .collect()
        })
        .map_err(|e| message(&e));
    client.batch_execute("reset role").expect("reset role");
    rows
}

/// Make the exemptions of the collection group `c` exactly `wanted`.
pub(crate) fn set_exemptions(client: &mut Client, current: &[FieldPath], wanted: &[FieldPath]) {
    for field in current.iter().filter(|f| !wanted.contains(f)) {
        client
            .execute(
                "select docstore.remove_exemption('c', $1)",
                &[&field.to_string()],
            )
            .expect("remove_exemption");
    }
    for field in wanted.iter().filter(|f| !current.contains(f)) {
        client
            .execute(
                "select docstore.exempt_field('c', $1)",
                &[&field.to_string()],
            )
            .expect("exempt_field");
    }
}

/// `docstore.check_indexes()` finds every index entry where the documents say it should be.
pub(crate) fn check_indexes(client: &mut Client) {
    let problems: Vec<String> = client
        .query("select path, problem from docstore.check_indexes()", &[])
        .expect("docstore.check_indexes()")
        .iter()
        .map(|r| format!("{}: {}", r.get::<_, String>(0), r.get::<_, String>(1)))
        .collect();
    assert!(
        problems.is_empty(),
        "check_indexes() reports problems:\n{}",
        problems.join("\n")
    );
}
