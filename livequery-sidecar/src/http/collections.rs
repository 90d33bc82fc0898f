//! `POST /v1/databases/{db}:listCollectionIds`: `{"parent": "c/a"}` (`{}` or `""`: the root)
//! -> `{"collectionIds": [...]}`, the sorted ids of the collections holding at least one
//! document directly under the parent. Admin key only, as in Firestore, where only server
//! SDKs list collections.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use docstore_core::Code;

use super::body;
use super::documents::json_response;
use super::error::ApiError;
use super::resource::Target;
use super::{JsonPost, SharedState};
use crate::pg::collections as pg_collections;
use crate::pg::{RequestTx, RunAs};
use crate::service::caller::Principal;

/// Handle `:listCollectionIds`.
///
/// # Cancel safety
/// Dropped mid-way, the request's transaction is cancelled and its connection discarded.
pub async fn list_collection_ids(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let database = target.database().to_owned();
    let post = JsonPost::read(&state, "listCollectionIds", request).await?;
    if post.principal != Principal::Admin {
        return Err(ApiError::new(
            Code::PermissionDenied,
            "listing collection ids needs the admin key",
        ));
    }
    let list = body::ListCollectionIds::parse(&post.body)?;
    let (tx, ids) = state
        .db
        .begin_with(&database, &RunAs::Admin, async |tx: &RequestTx| {
            pg_collections::child_collection_ids(tx, &database, &list.parent)
                .await
                .map_err(ApiError::from)
        })
        .await?;
    tx.commit().await?;
    let out = serde_json::json!({ "collectionIds": ids });
    Ok(json_response(StatusCode::OK, out.to_string()))
}
