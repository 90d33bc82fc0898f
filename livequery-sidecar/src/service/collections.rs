//! The ids of the collections under a document (or the root): sorted, each holding at least
//! one document directly under the parent; and the documents of a collection (ListDocuments).
//! Admin only, as in Firestore, where only server SDKs list collections and documents.

use docstore_core::{Code, ResourcePath, Timestamp};

use super::caller::{Caller, Principal};
use super::error::ServiceError;
use super::Service;
use crate::pg::collections as pg_collections;
use crate::pg::documents::Document;
use crate::pg::{PgError, RequestTx, RunAs};

/// Whether `caller` may list collection ids (the admin key only).
///
/// # Errors
/// PERMISSION_DENIED for any other caller.
pub fn may_list(caller: &Caller) -> Result<(), ServiceError> {
    if caller.principal == Principal::Admin {
        Ok(())
    } else {
        Err(ServiceError::new(
            Code::PermissionDenied,
            "listing collection ids needs the admin key",
        ))
    }
}

/// The collection ids directly under `parent` (its segments; empty: the root); with `at`, as
/// they were at that time (docs/storage.md, "Version history").
///
/// # Errors
/// PERMISSION_DENIED for a caller other than the admin ([`may_list`]), database errors
/// (FAILED_PRECONDITION for a time older than the version history).
///
/// # Cancel safety
/// Dropped mid-way, the transaction is cancelled and its connection discarded.
pub async fn list_collection_ids(
    service: &Service,
    caller: &Caller,
    database: &str,
    parent: &[String],
    at: Option<Timestamp>,
) -> Result<Vec<String>, ServiceError> {
    may_list(caller)?;
    let (tx, ids) = service
        .db
        .begin_with(database, &RunAs::Admin, async |tx: &RequestTx| {
            match at {
                Some(t) => pg_collections::child_ids_at(tx, parent, &t.to_rfc3339())
                    .await
                    .map(|ids| {
                        ids.into_iter()
                            .filter_map(|(id, direct)| direct.then_some(id))
                            .collect()
                    }),
                None => pg_collections::child_collection_ids(tx, database, parent).await,
            }
            .map_err(ServiceError::from)
        })
        .await?;
    tx.commit().await?;
    Ok(ids)
}

/// One document of a listing: its collection's id and its id, and the document (`None`: it
/// does not exist but has descendants, a "missing" document).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub collection: String,
    pub id: String,
    pub document: Option<Document>,
}

/// What ListDocuments lists: the documents of one collection, or those of every collection
/// directly under a document (its segments; empty: the root), as Firestore does for a request
/// without a `collection_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing<'a> {
    Collection(&'a ResourcePath),
    Parent(&'a [String]),
}

/// The documents listed by `listing`, in name order (by collection id, then id, in the byte
/// order of each); with `show_missing`, also the ids that do not exist but have descendants,
/// in their place. One snapshot of the database (a REPEATABLE READ transaction); with `at`, as
/// they were at that time (docs/storage.md, "Version history").
///
/// # Errors
/// PERMISSION_DENIED for a caller other than the admin ([`may_list`]), database errors
/// (FAILED_PRECONDITION for a time older than the version history).
///
/// # Cancel safety
/// Dropped mid-way, the transaction is cancelled and its connection discarded.
pub async fn list_documents(
    service: &Service,
    caller: &Caller,
    database: &str,
    listing: Listing<'_>,
    show_missing: bool,
    at: Option<Timestamp>,
) -> Result<Vec<Listed>, ServiceError> {
    may_list(caller)?;
    let at = at.map(Timestamp::to_rfc3339);
    let (tx, listed) = service
        .db
        .begin_snapshot_with(database, &RunAs::Admin, async |tx: &RequestTx| {
            Ok::<_, ServiceError>(
                list_in(tx, database, listing, show_missing, at.as_deref()).await?,
            )
        })
        .await?;
    tx.commit().await?;
    Ok(listed)
}

/// The documents of `listing` in `tx` (also a held transaction's), as [`list_documents`]:
/// for a parent, the collections under it that hold a document directly (with `show_missing`,
/// also those whose documents are all missing), each listed by [`listing`] in id order.
///
/// # Errors
/// Database errors (55000 for a time older than the version history).
///
/// # Cancel safety
/// A read; the caller's [`RequestTx`] decides.
pub(super) async fn list_in(
    tx: &RequestTx,
    database: &str,
    listing: Listing<'_>,
    show_missing: bool,
    at: Option<&str>,
) -> Result<Vec<Listed>, PgError> {
    let parent = match listing {
        Listing::Collection(collection) => {
            return self::listing(tx, database, collection, show_missing, at).await
        }
        Listing::Parent(parent) => parent,
    };
    let mut children = match at {
        Some(t) => pg_collections::child_ids_at(tx, parent, t).await?,
        None => pg_collections::child_collections(tx, database, parent).await?,
    };
    children.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut out = Vec::new();
    for (id, direct) in children {
        if !(direct || show_missing) {
            continue;
        }
        let mut segments = parent.to_vec();
        segments.push(id);
        let collection = ResourcePath::from_segments(segments)
            .map_err(|e| PgError::Decode(format!("stored collection: {e}")))?;
        out.extend(self::listing(tx, database, &collection, show_missing, at).await?);
    }
    Ok(out)
}

/// The listing of `collection` in `tx` (also a held transaction's): its documents, as they
/// were at `at` (RFC 3339) when given, and with `show_missing` the ids without a document
/// that have descendants.
///
/// # Errors
/// Database errors (55000 for a time older than the version history).
///
/// # Cancel safety
/// A read; the caller's [`RequestTx`] decides.
async fn listing(
    tx: &RequestTx,
    database: &str,
    collection: &ResourcePath,
    show_missing: bool,
    at: Option<&str>,
) -> Result<Vec<Listed>, PgError> {
    let documents = match at {
        Some(t) => pg_collections::documents_in_at(tx, collection, t).await?,
        None => pg_collections::documents_in(tx, database, collection).await?,
    };
    let with_descendants = match (at, show_missing) {
        (_, false) => Vec::new(),
        (Some(t), true) => pg_collections::child_ids_at(tx, collection.segments(), t)
            .await?
            .into_iter()
            .map(|(id, _)| id)
            .collect(),
        (None, true) => pg_collections::ids_with_descendants(tx, database, collection).await?,
    };
    let id = collection
        .segments()
        .last()
        .map(String::as_str)
        .unwrap_or_default();
    Ok(merge(id, documents, with_descendants))
}

/// The listing of collection `collection`'s `documents` (in name order) and
/// `with_descendants` (sorted ids): each id once, in byte order, a document where one exists.
fn merge(collection: &str, documents: Vec<Document>, with_descendants: Vec<String>) -> Vec<Listed> {
    let mut out: Vec<Listed> = documents
        .into_iter()
        .map(|doc| Listed {
            collection: collection.to_owned(),
            id: doc.path.rsplit('/').next().unwrap_or_default().to_owned(),
            document: Some(doc),
        })
        .collect();
    let present: std::collections::HashSet<String> = out.iter().map(|l| l.id.clone()).collect();
    out.extend(
        with_descendants
            .into_iter()
            .filter(|id| !present.contains(id))
            .map(|id| Listed {
                collection: collection.to_owned(),
                id,
                document: None,
            }),
    );
    out.sort_by(|a, b| a.id.as_bytes().cmp(b.id.as_bytes()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::types::{PgTime, RawJson};

    fn doc(path: &str) -> Document {
        Document {
            path: path.to_owned(),
            data: RawJson("{}".to_owned()),
            create_time: PgTime(0),
            update_time: PgTime(0),
        }
    }

    #[test]
    fn missing_documents_take_their_place_once() {
        let listed = merge(
            "c",
            vec![doc("c/a"), doc("c/m")],
            vec!["b".to_owned(), "m".to_owned(), "z".to_owned()],
        );
        let ids: Vec<(&str, bool)> = listed
            .iter()
            .map(|l| (l.id.as_str(), l.document.is_some()))
            .collect();
        assert_eq!(ids, [("a", true), ("b", false), ("m", true), ("z", false)]);
    }
}
