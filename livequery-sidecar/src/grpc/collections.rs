//! ListCollectionIds: the service's collection ids under a parent (admin only, as Firestore's
//! server SDKs), paged: a page holds at most `page_size` ids (0: all), its
//! `next_page_token` is the last id it holds when more follow, and a request with that token
//! starts after it (ids are sorted, so a token is a position). At a `read_time`: a current
//! listing, checked after it as the reads are (`service::read_time`).

use docstore_core::proto::{timestamp_from_proto, DatabaseName};
use docstore_core::ResourcePath;
use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use tonic::Status;
use wire::list_collection_ids_request::ConsistencySelector;

use super::error::{from_proto, from_service, invalid_argument};
use crate::service::caller::Caller;
use crate::service::collections::list_collection_ids as service_list;
use crate::service::{read_time, Service};

/// ListCollectionIds under `parent` (`None`: the root).
///
/// # Errors
/// PERMISSION_DENIED for a caller other than the admin, INVALID_ARGUMENT for a negative page
/// size, FAILED_PRECONDITION for a `read_time` before the newest commit, database errors.
///
/// # Cancel safety
/// As `service::collections::list_collection_ids`.
pub async fn list_collection_ids(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    parent: Option<&ResourcePath>,
    request: &wire::ListCollectionIdsRequest,
) -> Result<wire::ListCollectionIdsResponse, Status> {
    let read_time = match &request.consistency_selector {
        Some(ConsistencySelector::ReadTime(t)) => {
            Some(timestamp_from_proto(t).map_err(|e| from_proto(&e))?)
        }
        None => None,
    };
    let size = usize::try_from(request.page_size)
        .map_err(|_| invalid_argument("page_size must not be negative"))?;
    let segments = parent.map(|p| p.segments().to_vec()).unwrap_or_default();
    let ids = service_list(service, caller, &db.database, &segments)
        .await
        .map_err(from_service)?;
    if let Some(t) = read_time {
        // A current listing, checked after it (docs/grpc.md, "Transactions and read times").
        read_time::check(service, t).await.map_err(from_service)?;
    }
    Ok(page(ids, &request.page_token, size))
}

/// The page of sorted `ids` after `token` (empty: from the start), at most `size` (0: all).
fn page(ids: Vec<String>, token: &str, size: usize) -> wire::ListCollectionIdsResponse {
    let mut rest: Vec<String> = ids
        .into_iter()
        .filter(|id| token.is_empty() || id.as_str() > token)
        .collect();
    let mut next_page_token = String::new();
    if size > 0 && rest.len() > size {
        rest.truncate(size);
        next_page_token = rest.last().cloned().unwrap_or_default();
    }
    wire::ListCollectionIdsResponse {
        collection_ids: rest,
        next_page_token,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_their_tokens() {
        let ids: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let first = page(ids.clone(), "", 2);
        assert_eq!(first.collection_ids, ["a", "b"]);
        assert_eq!(first.next_page_token, "b");
        let second = page(ids.clone(), &first.next_page_token, 2);
        assert_eq!(second.collection_ids, ["c"]);
        assert_eq!(second.next_page_token, "");
        assert_eq!(page(ids, "", 0).collection_ids.len(), 3);
    }
}
