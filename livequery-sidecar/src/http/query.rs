//! `POST /v1/databases/{db}:runQuery` (`{"sql": ...}` or `{"structuredQuery": {...}}`) and
//! `GET` of a collection (its documents in name order, `?pageSize=n`): a JSON array written
//! row by row, never the whole result in memory.
//!
//! The first row is read before the 200 header is sent, so an error of the query itself (bad
//! syntax, a missing index: 400 FAILED_PRECONDITION with the `create_index` call) keeps its
//! status. An error after the header ends the array with an `{"error": {...}}` item and the
//! response ends there. Document rows are `{"path", "data", "createTime", "updateTime"}`, the row of an
//! aggregation query `{"aggregation": {...}}`.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value as Json;

use super::body::{Reads, RunQuery};
use super::error::ApiError;
use super::resource::{parse_params, Target};
use super::{JsonPost, SharedState};
use crate::pg::query::ResultRow;
use crate::pg::PgError;
use crate::service::error::ServiceError;
use crate::service::query::{self, Query, QueryRows};
use crate::service::transactions;

/// A response chunk is sent once it holds this many bytes (or no further row is ready).
const CHUNK_BYTES: usize = 32 * 1024;

/// Handle `:runQuery`.
///
/// # Cancel safety
/// Dropped before or during the stream (the client went away), the request's transaction is
/// cancelled and its connection discarded.
pub async fn run_query(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let database = target.database().to_owned();
    let post = JsonPost::read(&state, "runQuery", request).await?;
    let (query, reads) = RunQuery::parse_with_reads(&post.body)?;
    let query = match (query, &reads) {
        // The documents as they were then: the version history, as gRPC's `read_time`.
        (RunQuery::Structured(text), Reads::At(t)) => Query::StructuredAt {
            text,
            read_time: t.to_rfc3339(),
        },
        (RunQuery::Structured(text), _) => Query::Structured(text),
        // parse_with_reads refuses a readTime with sql.
        (RunQuery::Sql(text), _) => Query::Text(text),
    };
    let caller = post.caller();
    let rows = match &reads {
        Reads::Now | Reads::At(_) => query::run(&state.service, &caller, &database, &query).await?,
        Reads::In(id) => {
            transactions::query(&state.service, &caller, &database, id, &query).await?
        }
    };
    stream(&state, rows).await
}

/// Handle `GET` of a collection: its documents in name order, at most `?pageSize=n`.
///
/// # Cancel safety
/// As [`run_query`].
pub async fn list(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let Target::Path { database, path } = target else {
        return Err(ApiError::invalid_argument("not a collection route"));
    };
    let params = parse_params(request.uri().query())?;
    if params.merge
        || !params.update_mask.is_empty()
        || params.precondition.is_some()
        || params.transaction.is_some()
        || params.read_time.is_some()
    {
        return Err(ApiError::invalid_argument(
            "GET of a collection takes only pageSize",
        ));
    }
    let caller =
        super::bearer::caller(&state.service.verifier, request.headers(), request.method()).await?;
    let query = Query::Collection {
        path,
        page_size: params.page_size,
    };
    let rows = query::run(&state.service, &caller, &database, &query).await?;
    stream(&state, rows).await
}

fn row_json(row: ResultRow) -> Result<String, ApiError> {
    match row {
        ResultRow::Document {
            path,
            data,
            create_time,
            update_time,
        } => {
            let out_of_range = |what: &str| {
                ApiError::from(PgError::Decode(format!(
                    "{what} time of {path} out of range"
                )))
            };
            let time = update_time
                .to_rfc3339()
                .ok_or_else(|| out_of_range("update"))?;
            let created = create_time
                .to_rfc3339()
                .ok_or_else(|| out_of_range("create"))?;
            Ok(format!(
                "{{\"path\":{},\"data\":{},\"createTime\":\"{created}\",\"updateTime\":\"{time}\"}}",
                Json::String(path),
                data.0
            ))
        }
        ResultRow::Aggregation { data } => Ok(format!("{{\"aggregation\":{}}}", data.0)),
    }
}

/// The state of a streamed answer.
struct Streaming {
    rows: QueryRows,
    items: usize,
    done: bool,
}

impl Streaming {
    fn separator(&mut self, out: &mut String) {
        out.push_str(if self.items == 0 { "[\n" } else { ",\n" });
        self.items += 1;
    }

    /// Append an error item and close the array; the transaction is rolled back.
    async fn fail(&mut self, out: &mut String, error: ApiError) {
        self.separator(out);
        out.push_str("{\"error\":");
        out.push_str(&error.to_json());
        out.push_str("}\n]\n");
        self.done = true;
        self.rows.rollback().await;
    }

    /// Close the array after the last row; commit the (read-only) transaction.
    async fn finish(&mut self, out: &mut String) {
        if let Err(e) = self.rows.commit().await {
            self.fail(out, ApiError::from(e)).await;
            return;
        }
        out.push_str(if self.items == 0 { "[]\n" } else { "\n]\n" });
        self.done = true;
    }

    /// Append one row (or the error it is).
    async fn push(&mut self, out: &mut String, row: Option<Result<ResultRow, ServiceError>>) {
        match row {
            Some(Ok(row)) => match row_json(row) {
                Ok(json) => {
                    self.separator(out);
                    out.push_str(&json);
                }
                Err(e) => self.fail(out, e).await,
            },
            Some(Err(e)) => self.fail(out, ApiError::from(e)).await,
            None => self.finish(out).await,
        }
    }

    /// The next chunk: at least one row (awaited), then the rows already at hand, up to
    /// [`CHUNK_BYTES`].
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut out = String::new();
        let first = self.rows.next().await;
        self.push(&mut out, first).await;
        while !self.done && out.len() < CHUNK_BYTES {
            match self.rows.next_ready() {
                Some(row) => self.push(&mut out, row).await,
                None => break,
            }
        }
        Some(Bytes::from(out))
    }
}

/// Answer a query's rows as a streamed JSON array.
async fn stream(state: &SharedState, rows: QueryRows) -> Result<Response, ApiError> {
    let empty = rows.empty;
    let mut streaming = Streaming {
        rows,
        items: 0,
        done: false,
    };
    if empty {
        // No row at all (committed already, so a failed commit had its status).
        let mut out = String::new();
        streaming.finish(&mut out).await;
        return Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            out,
        )
            .into_response());
    }
    let Some(write_timeout) = state.query_write_timeout else {
        let body = futures_util::stream::unfold(streaming, |mut s| async move {
            s.next_chunk()
                .await
                .map(|chunk| (Ok::<Bytes, Infallible>(chunk), s))
        });
        return Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from_stream(body),
        )
            .into_response());
    };
    // The rows are read by a task that hands each chunk over within the write timeout: a
    // client that stops reading (hyper stops polling the body) makes the hand-over time out,
    // and the task drops the query (its `RequestTx` cancels the statement and takes the
    // connection out of the pool, which rolls back) instead of holding a pooled connection.
    let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(1);
    let complete = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = complete.clone();
    tokio::spawn(async move {
        let mut s = streaming;
        while let Some(chunk) = s.next_chunk().await {
            if sender.send_timeout(chunk, write_timeout).await.is_err() {
                tracing::info!("a query answer was not read within the write timeout: dropped");
                return;
            }
        }
        done.store(true, std::sync::atomic::Ordering::Release);
    });
    // Ended by the task before the last chunk: an error, so hyper aborts the response (no
    // final chunk) rather than end it as if it were complete.
    let body = futures_util::stream::unfold(Some(receiver), move |receiver| {
        let complete = complete.clone();
        async move {
            let mut receiver = receiver?;
            match receiver.recv().await {
                Some(chunk) => Some((Ok(chunk), Some(receiver))),
                None if complete.load(std::sync::atomic::Ordering::Acquire) => None,
                None => Some((
                    Err(std::io::Error::other("query answer write timeout")),
                    None,
                )),
            }
        }
    });
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response())
}
