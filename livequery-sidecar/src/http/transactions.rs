//! `POST /v1/databases/{db}:beginTransaction` (`{"options": {"readOnly": {}} | {"readWrite":
//! {}}}`) -> `{"transaction": id}` and `POST /v1/databases/{db}:rollback` (`{"transaction":
//! id}`) -> `{}`: held transactions (`service::transactions`). Their reads and commit are the
//! `transaction` of a GET, `:batchGet`, `:runQuery` and `:commit`.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value as Json;

use super::body;
use super::documents::json_response;
use super::error::ApiError;
use super::resource::Target;
use super::{JsonPost, SharedState};
use crate::service::transactions;

/// Handle `:beginTransaction`.
///
/// # Cancel safety
/// Dropped mid-way, the half-open transaction is rolled back and its slot freed.
pub async fn begin(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let database = target.database().to_owned();
    let post = JsonPost::read(&state, "beginTransaction", request).await?;
    let options = body::BeginTransaction::parse(&post.body)?;
    let id = transactions::begin(
        &state.service,
        &post.caller(),
        &database,
        options.read_only,
        options.read_time,
    )
    .await?;
    let answer = serde_json::json!({ "transaction": Json::String(id) });
    Ok(json_response(StatusCode::OK, answer.to_string()))
}

/// Handle `:rollback`.
///
/// # Cancel safety
/// Dropped mid-way, the transaction is ended or left to the reaper.
pub async fn rollback(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let database = target.database().to_owned();
    let post = JsonPost::read(&state, "rollback", request).await?;
    let rollback = body::Rollback::parse(&post.body)?;
    transactions::rollback(
        &state.service,
        &post.caller(),
        &database,
        &rollback.transaction,
    )
    .await?;
    Ok(json_response(StatusCode::OK, "{}".to_owned()))
}
