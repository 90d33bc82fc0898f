//! `POST /v1/databases/{db}:commit`: `{"writes": [...], "transaction": bool}` ->
//! `docstore.commit(writes)` -> `{"commitTime", "updateTimes"}`.
//!
//! Optimistic transactions: a client reads documents (their `updateTime`), then commits with
//! `"transaction": true` and `{"updateTime": t}` / `{"exists": false}` preconditions (a
//! document read but not written as a `{"verify": path, "precondition"}` entry). A failed
//! precondition then means another writer won: 409 ABORTED, retry the transaction. Without
//! `"transaction"` it is 400 FAILED_PRECONDITION.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use docstore_core::{Code, ErrorKind};

use super::body;
use super::documents::json_response;
use super::error::ApiError;
use super::resource::Target;
use super::{JsonPost, SharedState};
use crate::pg::documents as pg_documents;
use crate::pg::{PgError, RequestTx};
use crate::service::context::{run_as, RulesMethod};
use crate::service::error::raised_by_extension;

/// Handle `:commit`.
///
/// # Cancel safety
/// Dropped mid-way, the request's transaction is cancelled and its connection discarded:
/// nothing of the batch is written.
pub async fn commit(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let database = target.database().to_owned();
    let post = JsonPost::read(&state, "commit", request).await?;
    let commit = body::Commit::parse(&post.body)?;
    let run_as = run_as(
        &post.principal,
        RulesMethod::Write,
        post.method.as_str(),
        &database,
        "",
        None,
    );
    // `begin`, the settings and the commit go out together (one round trip).
    let (tx, answer) = state
        .db
        .begin_with(&database, &run_as, async |tx: &RequestTx| {
            pg_documents::commit(tx, &commit.writes).await.map_err(|e| {
            // In an optimistic transaction a failed precondition means a document changed
            // since it was read: the transaction lost a race and is retried (ABORTED). Only
            // the extension's own precondition failures are that; anything else keeps its code.
            let lost_race = commit.transaction && precondition_failed(&e);
            let mut e = ApiError::from(e);
            if lost_race {
                e.error.code = Code::Aborted;
                e.error.hint = Some(
                    "a document changed since the transaction read it: read again and retry the transaction"
                        .into(),
                );
            }
            e
        })
        })
        .await?;
    tx.commit().await?;
    Ok(json_response(StatusCode::OK, answer.0))
}

/// Whether `error` is pg_docstore's failed write precondition (55000 raised by the extension).
fn precondition_failed(error: &PgError) -> bool {
    let PgError::Db(e) = error else {
        return false;
    };
    e.as_db_error().is_some_and(|db| {
        raised_by_extension(db) && db.code().code() == ErrorKind::FailedPrecondition.sqlstate()
    })
}
