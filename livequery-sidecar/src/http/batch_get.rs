//! `POST /v1/databases/{db}:batchGet`: `{"documents": [path, ...]}` -> `{"readTime",
//! "documents": [{"found": document} | {"missing": path}, ...]}` in request order, every
//! document read by one statement of a REPEATABLE READ transaction (one snapshot). A user's read of each path is a `get`
//! decided by the rules, as a GET's (one denied path fails the call with 403).

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value as Json;

use super::body;
use super::documents::{document_json, json_response};
use super::error::ApiError;
use super::resource::Target;
use super::{JsonPost, SharedState};
use crate::pg::documents as pg_documents;
use crate::pg::{PgError, RequestTx};
use crate::service::context::{run_as, RulesMethod};

/// Handle `:batchGet`.
///
/// # Cancel safety
/// Dropped mid-way, the request's transaction is cancelled and its connection discarded.
pub async fn batch_get(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let database = target.database().to_owned();
    let post = JsonPost::read(&state, "batchGet", request).await?;
    let batch = body::BatchGet::parse(&post.body)?;
    let run_as = run_as(
        &post.principal,
        RulesMethod::Get,
        post.method.as_str(),
        &database,
        "",
        None,
    );
    // `begin`, the settings and the read go out together (one round trip).
    let (tx, read) = state
        .db
        .begin_snapshot_with(&database, &run_as, async |tx: &RequestTx| {
            pg_documents::read_many(tx, &database, &run_as, &batch.documents)
                .await
                .map_err(ApiError::from)
        })
        .await?;
    tx.commit().await?;
    let read_time = read.read_time.to_rfc3339().ok_or_else(|| {
        ApiError::from(PgError::Decode(format!(
            "read time {} is out of range",
            read.read_time.0
        )))
    })?;
    let mut out = String::with_capacity(64 + 128 * read.documents.len());
    out.push_str("{\"readTime\":\"");
    out.push_str(&read_time);
    out.push_str("\",\"documents\":[");
    for (i, (path, found)) in batch.documents.iter().zip(&read.documents).enumerate() {
        if i > 0 {
            out.push(',');
        }
        match found {
            Some(doc) => {
                out.push_str("{\"found\":");
                out.push_str(&document_json(doc)?);
                out.push('}');
            }
            None => {
                out.push_str("{\"missing\":");
                out.push_str(&Json::String(path.to_string()).to_string());
                out.push('}');
            }
        }
    }
    out.push_str("]}");
    Ok(json_response(StatusCode::OK, out))
}
