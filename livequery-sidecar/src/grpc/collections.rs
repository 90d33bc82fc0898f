//! ListCollectionIds: the service's collection ids under a parent (admin only, as Firestore's
//! server SDKs), paged: a page holds at most `page_size` ids (0: all), its
//! `next_page_token` is the last id it holds when more follow, and a request with that token
//! starts after it (ids are sorted, so a token is a position). ListDocuments: the documents
//! of a collection (or of every collection under a parent), paged the same way by document id
//! (by collection id, then document id). At a `read_time`: the listing as it was
//! then (the extension's `child_ids_at` and `list_documents_at`).

use docstore_core::proto::{timestamp_from_proto, DatabaseName};
use docstore_core::ResourcePath;
use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use tonic::Status;
use wire::list_collection_ids_request::ConsistencySelector;

use super::documents::{mask, render};
use super::error::{from_proto, from_service, invalid_argument};
use crate::service::caller::Caller;
use crate::service::collections::{
    list_collection_ids as service_list, list_documents as service_list_documents, Listing,
};
use crate::service::transactions::{self as service_transactions, text_of_bytes};
use crate::service::Service;

/// ListCollectionIds under `parent` (`None`: the root).
///
/// # Errors
/// PERMISSION_DENIED for a caller other than the admin, INVALID_ARGUMENT for a negative page
/// size, FAILED_PRECONDITION for a `read_time` older than the version history, database errors.
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
    let ids = service_list(service, caller, &db.database, &segments, read_time)
        .await
        .map_err(from_service)?;
    let token = request.page_token.as_str();
    let (collection_ids, next_page_token) = page(
        ids,
        |id| token.is_empty() || id.as_str() > token,
        String::clone,
        size,
    );
    Ok(wire::ListCollectionIdsResponse {
        collection_ids,
        next_page_token,
    })
}

/// ListDocuments of the collection `collection_id` under `parent` (`None`: the root), or,
/// without a `collection_id`, of every collection directly under `parent`: its documents in
/// name order (each cut to `mask`), with `show_missing` also the documents that do not exist
/// but have subcollections (a name only, no times), paged by `page_size` (0: all) and
/// `page_token` (the last id of the previous page; `{collection}/{id}` without a
/// `collection_id`).
///
/// # Errors
/// INVALID_ARGUMENT for a bad `collection_id` or page token, a negative page size, an `order_by`
/// other than the name, a bad mask; FAILED_PRECONDITION for a `read_time` older than the
/// version history; PERMISSION_DENIED for a caller other than the admin; in a transaction
/// (`transaction`: read in it, its documents locked in a read-write one), the transaction's
/// errors.
///
/// # Cancel safety
/// As `service::collections::list_documents`.
pub async fn list_documents(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    parent: Option<&ResourcePath>,
    request: &wire::ListDocumentsRequest,
) -> Result<wire::ListDocumentsResponse, Status> {
    let (read_time, transaction) = match &request.consistency_selector {
        Some(wire::list_documents_request::ConsistencySelector::ReadTime(t)) => (
            Some(timestamp_from_proto(t).map_err(|e| from_proto(&e))?),
            None,
        ),
        Some(wire::list_documents_request::ConsistencySelector::Transaction(id)) => {
            (None, Some(text_of_bytes(id)))
        }
        None => (None, None),
    };
    let order = request.order_by.trim();
    if !(order.is_empty() || order == "__name__" || order == "__name__ asc") {
        return Err(invalid_argument(format!(
            "ListDocuments orders by __name__ only, not \"{}\"",
            docstore_core::path::abbreviate(order)
        )));
    }
    let size = usize::try_from(request.page_size)
        .map_err(|_| invalid_argument("page_size must not be negative"))?;
    let parent_segments = parent.map(ResourcePath::segments).unwrap_or_default();
    let collection = if request.collection_id.is_empty() {
        None
    } else {
        let collection = match parent {
            Some(p) => p.child(&request.collection_id),
            None => ResourcePath::from_segments(vec![request.collection_id.clone()]),
        }
        .map_err(|e| invalid_argument(format!("collection_id: {e}")))?;
        Some(collection)
    };
    let listing = match &collection {
        Some(c) => Listing::Collection(c),
        None => Listing::Parent(parent_segments),
    };
    let mask = mask(request.mask.as_ref())?;
    let listed = match &transaction {
        Some(text) => {
            service_transactions::list_documents(
                service,
                caller,
                &db.database,
                text,
                listing,
                request.show_missing,
            )
            .await
        }
        None => {
            service_list_documents(
                service,
                caller,
                &db.database,
                listing,
                request.show_missing,
                read_time,
            )
            .await
        }
    }
    .map_err(from_service)?;
    // The token is the last id of a page; listing every collection, `{collection}/{id}`.
    let after = match (&collection, request.page_token.split_once('/')) {
        _ if request.page_token.is_empty() => None,
        (Some(_), _) => Some((request.collection_id.as_str(), request.page_token.as_str())),
        (None, Some(at)) => Some(at),
        (None, None) => {
            return Err(invalid_argument(
                "a page_token of ListDocuments without collection_id is {collection}/{id}",
            ))
        }
    };
    let (rest, next_page_token) = page(
        listed,
        |l| after.is_none_or(|at| (l.collection.as_str(), l.id.as_str()) > at),
        |l| match &collection {
            Some(_) => l.id.clone(),
            None => format!("{}/{}", l.collection, l.id),
        },
        size,
    );
    let documents = rest
        .iter()
        .map(|l| {
            let path = ResourcePath::from_segments(
                parent_segments
                    .iter()
                    .cloned()
                    .chain([l.collection.clone(), l.id.clone()])
                    .collect(),
            )
            .map_err(|e| invalid_argument(format!("document id: {e}")))?;
            match &l.document {
                Some(doc) => render(db, &path, doc, mask.as_deref()),
                None => Ok(wire::Document {
                    name: db.document_name(&path),
                    ..wire::Document::default()
                }),
            }
        })
        .collect::<Result<Vec<_>, Status>>()?;
    Ok(wire::ListDocumentsResponse {
        documents,
        next_page_token,
    })
}

/// The page of `items` (sorted) of those `after` the page token (all for no token), at most
/// `size` (0: all), and the token of the next page (`token` of its last item; empty: none).
fn page<T>(
    items: Vec<T>,
    after: impl Fn(&T) -> bool,
    token: impl Fn(&T) -> String,
    size: usize,
) -> (Vec<T>, String) {
    let mut rest: Vec<T> = items.into_iter().filter(|item| after(item)).collect();
    let mut next_page_token = String::new();
    if size > 0 && rest.len() > size {
        rest.truncate(size);
        next_page_token = rest.last().map(&token).unwrap_or_default();
    }
    (rest, next_page_token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_their_tokens() {
        let ids: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let first = page(ids.clone(), |_| true, String::clone, 2);
        assert_eq!(first.0, ["a", "b"]);
        assert_eq!(first.1, "b");
        let second = page(ids.clone(), |id| id.as_str() > "b", String::clone, 2);
        assert_eq!(second.0, ["c"]);
        assert_eq!(second.1, "");
        assert_eq!(page(ids, |_| true, String::clone, 0).0.len(), 3);
    }
}
