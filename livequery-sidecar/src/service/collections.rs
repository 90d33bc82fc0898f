//! The ids of the collections under a document (or the root): sorted, each holding at least
//! one document directly under the parent. Admin only, as in Firestore, where only server SDKs
//! list collections.

use docstore_core::Code;

use super::caller::{Caller, Principal};
use super::error::ServiceError;
use super::Service;
use crate::pg::collections as pg_collections;
use crate::pg::{RequestTx, RunAs};

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

/// The collection ids directly under `parent` (its segments; empty: the root).
///
/// # Errors
/// PERMISSION_DENIED for a caller other than the admin ([`may_list`]), database errors.
///
/// # Cancel safety
/// Dropped mid-way, the transaction is cancelled and its connection discarded.
pub async fn list_collection_ids(
    service: &Service,
    caller: &Caller,
    database: &str,
    parent: &[String],
) -> Result<Vec<String>, ServiceError> {
    may_list(caller)?;
    let (tx, ids) = service
        .db
        .begin_with(database, &RunAs::Admin, async |tx: &RequestTx| {
            pg_collections::child_collection_ids(tx, database, parent)
                .await
                .map_err(ServiceError::from)
        })
        .await?;
    tx.commit().await?;
    Ok(ids)
}
