//! Queries: the text dialect or a structured query, and the documents of a collection in
//! name order. The first row is read before the rows are handed over, so an error of the
//! query itself (bad syntax, a missing index: FAILED_PRECONDITION with the `create_index`
//! call) is the operation's error; the rest are read as the transport takes them, never the
//! whole result in memory.

use std::pin::Pin;

use docstore_core::ResourcePath;
use futures_util::{FutureExt, StreamExt};
use serde_json::Value as Json;
use tokio_postgres::{Row, RowStream};

use docstore_core::Code;

use super::caller::{Caller, Principal};
use super::context::{structured_query_info, text_query_info, RulesMethod};
use super::documents::end;
use super::error::ServiceError;
use super::Service;
use crate::pg::query::{self as pg_query, QueryInput, ResultRow};
use crate::pg::types::RawJson;
use crate::pg::{PgError, RequestTx, RunAs};

/// What to query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// The text dialect (docs/query.md).
    Text(String),
    /// A structured query, as JSON text.
    Structured(String),
    /// A structured query over the documents as they were at `read_time` (RFC 3339), from the
    /// version history (docs/storage.md, "Version history").
    StructuredAt { text: String, read_time: String },
    /// The documents of a collection in name order, at most `page_size`.
    Collection {
        path: ResourcePath,
        page_size: Option<u32>,
    },
}

/// The rows of a running query, in the transaction that reads them.
pub struct QueryRows {
    tx: Option<RequestTx>,
    /// The rows still to read (`None`: all of them are in `buffered`).
    rows: Option<Pin<Box<RowStream>>>,
    /// Rows read before they were handed over (a query of a held transaction).
    buffered: std::collections::VecDeque<ResultRow>,
    /// The first row, read before the rows were handed over.
    first: Option<Row>,
    /// No row at all (the transaction is committed already).
    pub empty: bool,
}

impl QueryRows {
    fn item(
        row: Option<Result<Row, tokio_postgres::Error>>,
    ) -> Option<Result<ResultRow, ServiceError>> {
        Some(match row? {
            Ok(row) => pg_query::decode(&row).map_err(ServiceError::from),
            Err(e) => Err(ServiceError::from(PgError::from(e))),
        })
    }

    /// Rows read whole before they are handed over, in no transaction of their own (a held
    /// transaction's query: `service/transactions.rs`).
    pub fn buffered(rows: Vec<ResultRow>) -> QueryRows {
        QueryRows {
            tx: None,
            rows: None,
            empty: rows.is_empty(),
            buffered: rows.into(),
            first: None,
        }
    }

    /// The next row (awaited); `None` after the last.
    ///
    /// # Cancel safety
    /// Dropped while waiting, no row is lost.
    pub async fn next(&mut self) -> Option<Result<ResultRow, ServiceError>> {
        if let Some(row) = self.first.take() {
            return QueryRows::item(Some(Ok(row)));
        }
        match &mut self.rows {
            Some(rows) => QueryRows::item(rows.next().await),
            None => self.buffered.pop_front().map(Ok),
        }
    }

    /// The next row if one is at hand: `None` when none is ready yet, `Some(None)` after the
    /// last.
    pub fn next_ready(&mut self) -> Option<Option<Result<ResultRow, ServiceError>>> {
        if let Some(row) = self.first.take() {
            return Some(QueryRows::item(Some(Ok(row))));
        }
        match &mut self.rows {
            Some(rows) => rows.next().now_or_never().map(QueryRows::item),
            None => Some(self.buffered.pop_front().map(Ok)),
        }
    }

    /// Commit the (read-only) transaction after the last row.
    ///
    /// # Errors
    /// The commit failed.
    pub async fn commit(&mut self) -> Result<(), ServiceError> {
        if let Some(tx) = self.tx.take() {
            tx.commit().await?;
        }
        Ok(())
    }

    /// Roll the transaction back (after a failed row).
    pub async fn rollback(&mut self) {
        if let Some(tx) = self.tx.take() {
            if let Err(e) = tx.rollback().await {
                tracing::debug!(error = %e, "rollback after a failed stream");
            }
        }
    }
}

/// Start `query` in a new transaction of `database` (the rules' `list`): its first row is
/// read, the rest wait in [`QueryRows`].
///
/// # Errors
/// The query's own error (syntax, a missing index, the rules' denial), database errors.
///
/// # Cancel safety
/// Dropped mid-way, the transaction is cancelled and its connection discarded.
pub async fn run(
    service: &Service,
    caller: &Caller,
    database: &str,
    query: &Query,
) -> Result<QueryRows, ServiceError> {
    // The structured query of a collection's listing, built here and borrowed by `input`.
    let listing: String;
    let (resource, info, input) = match query {
        Query::Text(text) => (String::new(), text_query_info(text), QueryInput::Sql(text)),
        Query::Structured(text) => (
            String::new(),
            serde_json::from_str::<Json>(text)
                .map(|q| structured_query_info(&q))
                .unwrap_or(Json::Null),
            QueryInput::Structured(text),
        ),
        Query::StructuredAt { text, read_time } => (
            String::new(),
            serde_json::from_str::<Json>(text)
                .map(|q| structured_query_info(&q))
                .unwrap_or(Json::Null),
            QueryInput::StructuredAt(text, read_time),
        ),
        Query::Collection { path, page_size } => {
            let mut structured = serde_json::json!({
                "from": [{"collectionId": path.last()}],
            });
            if let (Some(parent), Some(obj)) = (path.parent(), structured.as_object_mut()) {
                obj.insert("parent".into(), Json::String(parent.to_string()));
            }
            if let (Some(limit), Some(obj)) = (page_size, structured.as_object_mut()) {
                obj.insert("limit".into(), Json::from(*limit));
            }
            listing = structured.to_string();
            (
                path.to_string(),
                structured_query_info(&structured),
                QueryInput::Structured(&listing),
            )
        }
    };
    let run_as = caller.run_as(RulesMethod::List, database, &resource, Some(info));
    let tx = service.db.begin(database, &run_as).await?;
    let rows = match pg_query::start(&tx, input).await {
        Ok(rows) => rows,
        Err(e) => return end(tx, Err(ServiceError::from(e))).await,
    };
    let mut rows = Box::pin(rows);
    let first = match rows.next().await {
        Some(Ok(row)) => Some(row),
        Some(Err(e)) => return end(tx, Err(ServiceError::from(PgError::from(e)))).await,
        None => None,
    };
    if first.is_none() {
        // No row at all: commit now, so a failed commit is the operation's error.
        tx.commit().await?;
        return Ok(QueryRows {
            tx: None,
            rows: Some(rows),
            buffered: std::collections::VecDeque::new(),
            first: None,
            empty: true,
        });
    }
    Ok(QueryRows {
        tx: Some(tx),
        rows: Some(rows),
        buffered: std::collections::VecDeque::new(),
        first,
        empty: false,
    })
}

/// Whether `caller` may explain queries (the admin key only: a run's counters describe index
/// contents that a client's rules may hide).
///
/// # Errors
/// PERMISSION_DENIED for any other caller.
pub fn may_explain(caller: &Caller) -> Result<(), ServiceError> {
    if caller.principal == Principal::Admin {
        Ok(())
    } else {
        Err(ServiceError::new(
            Code::PermissionDenied,
            "explaining a query needs the admin key",
        ))
    }
}

/// `docstore.explain` of a query in the text dialect or the structured form (docs/query.md,
/// section 7): its plan, and with `run` what running it read.
///
/// # Errors
/// PERMISSION_DENIED for a caller other than the admin ([`may_explain`]); what the extension
/// reports for the query (a bad query, a missing index); INVALID_ARGUMENT for a collection's
/// listing, which has no plan of its own to explain.
///
/// # Cancel safety
/// Dropped mid-way, the transaction is cancelled and its connection discarded.
pub async fn explain(
    service: &Service,
    caller: &Caller,
    database: &str,
    query: &Query,
    run: bool,
) -> Result<RawJson, ServiceError> {
    may_explain(caller)?;
    let input = match query {
        Query::Text(text) => QueryInput::Sql(text),
        Query::Structured(text) => QueryInput::Structured(text),
        Query::Collection { .. } | Query::StructuredAt { .. } => {
            return Err(ServiceError::invalid_argument(
                "explain takes a query in the text dialect or the structured form",
            ))
        }
    };
    let (tx, out) = service
        .db
        .begin_with(database, &RunAs::Admin, async |tx: &RequestTx| {
            pg_query::explain(tx, input, run)
                .await
                .map_err(ServiceError::from)
        })
        .await?;
    tx.commit().await?;
    Ok(out)
}
