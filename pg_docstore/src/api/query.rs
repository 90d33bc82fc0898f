//! Query functions: query (text dialect), run_query (structured JSON), explain.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use docstore_core::query::{parse_query, parse_structured, Query};

use crate::errors::DocstoreError;
use crate::executor;
use crate::guc::database_id;
use crate::pg::jsonb::{JsonbOut, TypedJsonb};
use crate::pg::time::to_timestamptz;

/// The rows of `query` and `run_query`. Their signatures spell the type out again because
/// `#[pg_extern]` reads the column names from the `name!` tokens of the signature itself, not
/// through an alias.
pub(crate) type Rows = TableIterator<
    'static,
    (
        name!(path, String),
        name!(data, JsonbOut),
        name!(update_time, Option<TimestampWithTimeZone>),
        name!(create_time, Option<TimestampWithTimeZone>),
    ),
>;

/// The rows of a query, read as they are asked for: each batch of the executor runs in its own
/// SPI connection when the rows of the previous one are returned, so the backend holds one
/// batch, whatever the result size. Called in the select list (`select docstore.query(...)`),
/// Postgres asks for rows one at a time; in FROM it collects them into a tuplestore first
/// (which spills to disk past `work_mem`). See docs/storage.md.
struct LazyRows {
    run: executor::Run,
    /// The rules of a client's query were checked at the start: its batches read as the owner.
    as_owner: bool,
    rows: std::vec::IntoIter<executor::ResultRow>,
    /// Rows returned so far, and the database's cap on them (0: none).
    returned: u64,
    cap: u64,
    done: bool,
}

impl LazyRows {
    fn next_row(&mut self) -> Result<Option<Row>, DocstoreError> {
        loop {
            if let Some(row) = self.rows.next() {
                self.returned += 1;
                if self.cap > 0 && self.returned > self.cap {
                    return Err(DocstoreError::ResultTooLarge(self.cap));
                }
                let (time, created) = if row.update_time == 0 && row.path.is_empty() {
                    (None, None)
                } else {
                    (
                        Some(to_timestamptz(row.update_time)?),
                        Some(to_timestamptz(row.create_time)?),
                    )
                };
                return Ok(Some((row.path, row.data, time, created)));
            }
            if self.done {
                return Ok(None);
            }
            let (run, as_owner) = (&mut self.run, self.as_owner);
            let batch = Spi::connect(|client| {
                let _owner = as_owner
                    .then(|| crate::pg::owner::AsOwner::new(client))
                    .transpose()?;
                run.next_batch(client)
            })?;
            match batch {
                Some(rows) => self.rows = rows.into_iter(),
                None => self.done = true,
            }
        }
    }
}

type Row = (
    String,
    JsonbOut,
    Option<TimestampWithTimeZone>,
    Option<TimestampWithTimeZone>,
);

impl Iterator for LazyRows {
    type Item = Row;

    fn next(&mut self) -> Option<Row> {
        match self.next_row() {
            Ok(row) => row,
            Err(e) => {
                // Raises the Postgres error: does not return.
                ErrorReport::from(e).report(PgLogLevel::ERROR);
                None
            }
        }
    }
}

fn rows_of(
    text: &str,
    parse: impl FnOnce(&str) -> Result<Query, DocstoreError>,
) -> Result<Rows, DocstoreError> {
    let database = database_id()?;
    let (prepared, as_owner, cap) = Spi::connect(|client| {
        let prepared = executor::prepare(client, &database, text, parse)?;
        // A client's query: its `list` is decided once here (denied without rules), then it
        // reads as the owner (no per-row policy), batch after batch.
        // The cap is for clients: read while the caller is still itself (the guard of an
        // allowed client query switches to the owner).
        let cap = crate::storage::databases::max_query_results(client, &database)?;
        let checked = crate::rules::query::authorize(client, &database, &prepared.0)?;
        Ok::<_, DocstoreError>((prepared, checked.is_some(), cap))
    })?;
    let mut rows = LazyRows {
        run: executor::Run::new(&database, prepared),
        as_owner,
        rows: Vec::new().into_iter(),
        returned: 0,
        cap,
        done: false,
    };
    // The first batch is read now, so an error of the query itself is this call's error.
    let first = rows.next_row()?;
    Ok(TableIterator::new(first.into_iter().chain(rows)))
}

/// Run a query in the text dialect (docs/query.md). Aggregation queries return one row with
/// an empty path and the aggregates as data.
///
/// ```sql
/// select * from docstore.query('select * from /restaurants where city = "SF" order by avgRating desc limit 10');
/// select data from docstore.query('select count(*), avg(rating) from group(ratings) where rating >= 3');
/// ```
#[pg_extern(stable)]
fn query(
    text: &str,
) -> Result<
    TableIterator<
        'static,
        (
            name!(path, String),
            name!(data, JsonbOut),
            name!(update_time, Option<TimestampWithTimeZone>),
            name!(create_time, Option<TimestampWithTimeZone>),
        ),
    >,
    ErrorReport,
> {
    Ok(rows_of(text, |t| {
        parse_query(t).map_err(DocstoreError::from)
    })?)
}

/// Run a query in the structured JSON form (Firestore's StructuredQuery with typed JSON values).
///
/// ```sql
/// select * from docstore.run_query('{"from": [{"collectionId": "restaurants"}], "limit": 2}');
/// ```
#[pg_extern(stable)]
fn run_query(
    structured: TypedJsonb,
) -> Result<
    TableIterator<
        'static,
        (
            name!(path, String),
            name!(data, JsonbOut),
            name!(update_time, Option<TimestampWithTimeZone>),
            name!(create_time, Option<TimestampWithTimeZone>),
        ),
    >,
    ErrorReport,
> {
    Ok(rows_of(&structured.0, parse_structured_text)?)
}

/// Parse a query in the structured JSON form from its `jsonb` text (`run_query`, `explain`,
/// `run_query_at`).
pub(super) fn parse_structured_text(text: &str) -> Result<Query, DocstoreError> {
    let json = docstore_core::typed_json::json_from_str(text).map_err(DocstoreError::TypedJson)?;
    parse_structured(&json).map_err(DocstoreError::from)
}

/// The plan of a query: chosen indexes, key ranges, join strategy. With `run`, also runs
/// it and reports what it read; a client's run is first decided by the `list` rules as its
/// `query` would be, and reports only its count of results (docs/rules.md).
///
/// ```sql
/// select docstore.explain('select * from /restaurants where city = "SF" and type = "BBQ"');
/// select docstore.explain('select * from /restaurants where city = "SF" limit 10', run => true);
/// ```
#[pg_extern(stable)]
fn explain(text: &str, run: default!(bool, false)) -> Result<TypedJsonb, ErrorReport> {
    let parsed = parse_query(text).map_err(DocstoreError::from)?;
    Ok(explanation(parsed, run)?)
}

/// [`explain`] of a query in the structured JSON form (`run_query`'s argument): the same
/// explanation.
///
/// ```sql
/// select docstore.explain('{"from": [{"collectionId": "restaurants"}], "limit": 2}'::jsonb);
/// ```
#[pg_extern(stable, name = "explain")]
fn explain_structured(
    structured: TypedJsonb,
    run: default!(bool, false),
) -> Result<TypedJsonb, ErrorReport> {
    Ok(explanation(parse_structured_text(&structured.0)?, run)?)
}

/// The explanation of a parsed query, whichever form it was written in.
fn explanation(parsed: Query, run: bool) -> Result<TypedJsonb, DocstoreError> {
    let database = database_id()?;
    let out = Spi::connect(|client| -> Result<serde_json::Value, DocstoreError> {
        let plan = executor::plan_query(client, &database, &parsed)?;
        let mut json = docstore_core::plan::explain(&plan);
        if run {
            // A run reads the index as the owner, and its counts answer questions about the
            // data: a client gets the `list` decision of `query` first (42501 when denied),
            // and then only the count of what that query returns. The index and fetch
            // counters also count entries of documents it does not return (the other
            // branches of a zig-zag join, candidates re-checked away): administrators' only.
            let for_client = crate::pg::owner::caller_writes_as_client();
            let _checked = crate::rules::query::authorize(client, &database, &parsed)?;
            let stats = executor::run(client, &database, std::rc::Rc::new((parsed, plan)))?;
            let analyze = if for_client {
                serde_json::json!({ "results": stats.results })
            } else {
                serde_json::json!({
                    "indexQueries": stats.index_queries,
                    "indexRowsRead": stats.index_rows_read,
                    "documentsFetched": stats.documents_fetched,
                    "results": stats.results,
                })
            };
            if let serde_json::Value::Object(map) = &mut json {
                map.insert("analyze".into(), analyze);
            }
        }
        Ok(json)
    })?;
    Ok(TypedJsonb(out.to_string()))
}
