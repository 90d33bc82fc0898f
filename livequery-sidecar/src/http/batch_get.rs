//! `POST /v1/databases/{db}:batchGet`: `{"documents": [path, ...]}` -> `{"readTime",
//! "documents": [{"found": document} | {"missing": path}, ...]}` in request order, read at one
//! snapshot by `service::batch_get` (one denied path fails the call with 403).

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value as Json;

use super::body::{self, Reads};
use super::documents::{document_json, json_response};
use super::error::ApiError;
use super::resource::Target;
use super::{JsonPost, SharedState};
use crate::service::batch_get::batch_get as service_batch_get;
use crate::service::transactions;

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
    let caller = post.caller();
    let (service, paths) = (&state.service, &batch.documents);
    let read = match &batch.reads {
        Reads::Now => service_batch_get(service, &caller, &database, paths, None).await?,
        Reads::At(t) => service_batch_get(service, &caller, &database, paths, Some(*t)).await?,
        Reads::In(id) => transactions::batch_get(service, &caller, &database, id, paths).await?,
    };
    let read_time = read.read_time;
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
