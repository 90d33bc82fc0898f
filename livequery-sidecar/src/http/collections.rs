//! `POST /v1/databases/{db}:listCollectionIds`: `{"parent": "c/a"}` (`{}` or `""`: the root)
//! -> `{"collectionIds": [...]}`, the sorted ids of the collections holding at least one
//! document directly under the parent. Admin key only, as in Firestore, where only server
//! SDKs list collections.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;

use super::body;
use super::documents::json_response;
use super::error::ApiError;
use super::resource::Target;
use super::{JsonPost, SharedState};
use crate::service::collections;

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
    let caller = post.caller();
    // A caller other than the admin is refused whatever its body says.
    collections::may_list(&caller)?;
    let list = body::ListCollectionIds::parse(&post.body)?;
    let ids = collections::list_collection_ids(
        &state.service,
        &caller,
        &database,
        &list.parent,
        list.read_time,
    )
    .await?;
    let out = serde_json::json!({ "collectionIds": ids });
    Ok(json_response(StatusCode::OK, out.to_string()))
}
