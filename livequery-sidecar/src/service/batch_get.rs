//! Many documents at one snapshot: every document read by one statement of a REPEATABLE READ
//! transaction. A user's read of each path is a `get` decided by the rules, as a single get's
//! (one denied path fails the call with PERMISSION_DENIED).

use docstore_core::{ResourcePath, Timestamp};

use super::caller::Caller;
use super::context::RulesMethod;
use super::error::ServiceError;
use super::Service;
use crate::pg::documents::{self as pg_documents, Document};
use crate::pg::{PgError, RequestTx};

/// What [`batch_get`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRead {
    /// The snapshot's time (RFC 3339).
    pub read_time: String,
    /// Per requested path, in order: the document, or `None` when it does not exist.
    pub documents: Vec<Option<Document>>,
}

/// Read `paths` (1 or more) at one snapshot; with `at`, each as it was at that time (the
/// extension's `get_document_at`: docs/storage.md, "Version history"), answered with that
/// read time.
///
/// # Errors
/// The rules' denial of a path, database errors (FAILED_PRECONDITION for a time older than the
/// version history, INVALID_ARGUMENT for one in the future).
///
/// # Cancel safety
/// Dropped mid-way, the transaction is cancelled and its connection discarded.
pub async fn batch_get(
    service: &Service,
    caller: &Caller,
    database: &str,
    paths: &[ResourcePath],
    at: Option<Timestamp>,
) -> Result<BatchRead, ServiceError> {
    let run_as = caller.run_as(RulesMethod::Get, database, "", None);
    // `begin`, the settings and the read go out together (one round trip).
    let (tx, read) = service
        .db
        .begin_snapshot_with(database, &run_as, async |tx: &RequestTx| {
            match at {
                Some(t) => pg_documents::read_many_at(tx, paths, &t.to_rfc3339()).await,
                None => pg_documents::read_many(tx, database, &run_as, paths).await,
            }
            .map_err(ServiceError::from)
        })
        .await?;
    tx.commit().await?;
    BatchRead::of(read)
}

/// The document at `path` as it was at `at` (a [`batch_get`] of one path): the GET of a
/// document at a read time, over HTTP and gRPC.
///
/// # Errors
/// NOT_FOUND when it did not exist then; as [`batch_get`].
///
/// # Cancel safety
/// As [`batch_get`].
pub async fn get_at(
    service: &Service,
    caller: &Caller,
    database: &str,
    path: &ResourcePath,
    at: Timestamp,
) -> Result<Document, ServiceError> {
    let read = batch_get(
        service,
        caller,
        database,
        std::slice::from_ref(path),
        Some(at),
    )
    .await?;
    read.documents
        .into_iter()
        .flatten()
        .next()
        .ok_or_else(|| ServiceError::not_found(format!("document \"{path}\" does not exist")))
}

impl BatchRead {
    /// The answer of `read` (a snapshot's documents and read time), wherever it was read.
    ///
    /// # Errors
    /// INTERNAL when the read time is out of Firestore's range.
    pub(crate) fn of(read: pg_documents::ReadMany) -> Result<BatchRead, ServiceError> {
        let read_time = read.read_time.to_rfc3339().ok_or_else(|| {
            ServiceError::from(PgError::Decode(format!(
                "read time {} is out of range",
                read.read_time.0
            )))
        })?;
        Ok(BatchRead {
            read_time,
            documents: read.documents,
        })
    }
}
