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
    ),
>;

fn rows_of(
    text: &str,
    parse: impl FnOnce(&str) -> Result<Query, DocstoreError>,
) -> Result<Rows, DocstoreError> {
    let database = database_id()?;
    let (rows, _) = Spi::connect(|client| {
        let prepared = executor::prepare(client, &database, text, parse)?;
        // A client's query: its `list` is decided once here (denied without rules), then
        // it reads as the owner (no per-row policy).
        let _checked = crate::rules::query::authorize(client, &database, &prepared.0)?;
        executor::run(client, &database, &prepared.0, &prepared.1)
    })?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let time = if row.update_time == 0 && row.path.is_empty() {
            None
        } else {
            Some(to_timestamptz(row.update_time)?)
        };
        out.push((row.path, row.data, time));
    }
    Ok(TableIterator::new(out))
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
        ),
    >,
    ErrorReport,
> {
    Ok(rows_of(&structured.0, |text| {
        let json =
            docstore_core::typed_json::json_from_str(text).map_err(DocstoreError::TypedJson)?;
        parse_structured(&json).map_err(DocstoreError::from)
    })?)
}

/// The plan of a query: chosen indexes, key ranges, join strategy. With `run`, also runs
/// it and reports what it read.
///
/// ```sql
/// select docstore.explain('select * from /restaurants where city = "SF" and type = "BBQ"');
/// select docstore.explain('select * from /restaurants where city = "SF" limit 10', run => true);
/// ```
#[pg_extern(stable)]
fn explain(text: &str, run: default!(bool, false)) -> Result<TypedJsonb, ErrorReport> {
    let parsed = parse_query(text).map_err(DocstoreError::from)?;
    let database = database_id()?;
    let out = Spi::connect(|client| -> Result<serde_json::Value, DocstoreError> {
        let plan = executor::plan_query(client, &database, &parsed)?;
        let mut json = docstore_core::plan::explain(&plan);
        if run {
            let (_, stats) = executor::run(client, &database, &parsed, &plan)?;
            if let serde_json::Value::Object(map) = &mut json {
                map.insert(
                    "analyze".into(),
                    serde_json::json!({
                        "indexQueries": stats.index_queries,
                        "indexRowsRead": stats.index_rows_read,
                        "documentsFetched": stats.documents_fetched,
                        "results": stats.results,
                    }),
                );
            }
        }
        Ok(json)
    })?;
    Ok(TypedJsonb(out.to_string()))
}
