//! Queries: `docstore.query(text)` and `docstore.run_query(structured)`, read row by row
//! (`query_raw`: rows arrive as Postgres sends them, so the sidecar's memory does not grow
//! with the result). The function is called in the select list, not in FROM: there Postgres
//! asks it for one row at a time and sends each as it comes, where a function in FROM is
//! first run to the end into a tuplestore (docs/storage.md).

use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, RowStream};

use super::types::{JsonText, PgTime, RawJson};
use super::{PgError, RequestTx};

/// A query as the client sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryInput<'a> {
    /// The text dialect (docs/query.md).
    Sql(&'a str),
    /// A structured query, as JSON text.
    Structured(&'a str),
    /// A structured query over the documents as they were at a time (RFC 3339): the
    /// extension's `run_query_at` (docs/storage.md, "Version history").
    StructuredAt(&'a str, &'a str),
}

/// One result row: a document, or (empty path, no update time) an aggregation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultRow {
    Document {
        path: String,
        data: RawJson,
        create_time: PgTime,
        update_time: PgTime,
    },
    Aggregation {
        data: RawJson,
    },
}

/// Start the query; its rows are read from the returned stream.
///
/// # Errors
/// Errors Postgres reports before the first row is asked for (most come with the first row:
/// the function runs when the portal executes).
///
/// # Cancel safety
/// As the other statements: the caller's [`RequestTx`] decides what happens to the
/// transaction when the stream is dropped.
pub async fn start(tx: &RequestTx, input: QueryInput<'_>) -> Result<RowStream, PgError> {
    let client = tx.client()?;
    let json;
    let (sql, params): (&str, Vec<&(dyn ToSql + Sync)>) = match &input {
        QueryInput::Sql(text) => (
            "select (r).path, (r).data, (r).update_time, (r).create_time \
             from (select docstore.query($1) as r offset 0) q",
            vec![text],
        ),
        QueryInput::Structured(text) => {
            json = JsonText(text);
            (
                "select (r).path, (r).data, (r).update_time, (r).create_time \
                 from (select docstore.run_query($1::jsonb) as r offset 0) q",
                vec![&json],
            )
        }
        QueryInput::StructuredAt(text, at) => {
            json = JsonText(text);
            (
                "select (r).path, (r).data, (r).update_time, (r).create_time \
                 from (select docstore.run_query_at($1::jsonb, $2::text::timestamptz) as r \
                 offset 0) q",
                vec![&json, at],
            )
        }
    };
    let stmt = client.prepare_cached(sql).await?;
    Ok(client.query_raw(&stmt, params).await?)
}

/// Decode one row of [`start`]'s stream.
///
/// # Errors
/// [`PgError::Db`] for a column of an unexpected type.
pub fn decode(row: &Row) -> Result<ResultRow, PgError> {
    let path: String = row.try_get(0)?;
    let data: RawJson = row.try_get(1)?;
    let update_time: Option<PgTime> = row.try_get(2)?;
    let create_time: Option<PgTime> = row.try_get(3)?;
    Ok(match (update_time, create_time) {
        (Some(update_time), Some(create_time)) if !path.is_empty() => ResultRow::Document {
            path,
            data,
            create_time,
            update_time,
        },
        _ => ResultRow::Aggregation { data },
    })
}

/// `docstore.explain` of the query (docs/query.md, section 7): its plan, and with `run` what
/// running it read.
///
/// # Errors
/// What the extension reports for the query (a bad query, a missing index).
///
/// # Cancel safety
/// As [`start`].
pub async fn explain(tx: &RequestTx, input: QueryInput<'_>, run: bool) -> Result<RawJson, PgError> {
    let client = tx.client()?;
    let row = match &input {
        QueryInput::Sql(text) => {
            let stmt = client
                .prepare_cached("select docstore.explain($1::text, $2)")
                .await?;
            client.query_one(&stmt, &[text, &run]).await?
        }
        // The plan of a query at a time is that of the query (the time reads no index).
        QueryInput::Structured(json) | QueryInput::StructuredAt(json, _) => {
            let stmt = client
                .prepare_cached("select docstore.explain($1::jsonb, $2)")
                .await?;
            client.query_one(&stmt, &[&JsonText(json), &run]).await?
        }
    };
    Ok(row.try_get(0)?)
}
