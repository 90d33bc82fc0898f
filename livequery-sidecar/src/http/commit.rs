//! `POST /v1/databases/{db}:commit`: `{"writes": [...], "transaction": bool | id}` ->
//! `service::commit` -> `{"commitTime", "updateTimes"}` (optimistic transactions there), or,
//! with a held transaction's id, `service::transactions::commit`.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;

use super::body;
use super::documents::json_response;
use super::error::ApiError;
use super::resource::Target;
use super::{JsonPost, SharedState};
use crate::service::commit::{commit as run_commit, CommitRequest};
use crate::service::transactions;

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
    let caller = post.caller();
    let answer = match &commit.held {
        Some(id) => {
            transactions::commit(&state.service, &caller, &database, id, &commit.writes, &[])
                .await?
                .answer
        }
        None => {
            run_commit(
                &state.service,
                &caller,
                CommitRequest {
                    database: &database,
                    writes: &commit.writes,
                    transaction: commit.transaction,
                    read_back: &[],
                },
            )
            .await?
            .answer
        }
    };
    Ok(json_response(StatusCode::OK, answer.0))
}
