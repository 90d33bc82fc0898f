//! A batch of writes: `docstore.commit(writes)` -> `{"commitTime", "updateTimes"}`.
//!
//! Optimistic transactions: a client reads documents (their `updateTime`), then commits with
//! `transaction` set and `{"updateTime": t}` / `{"exists": false}` preconditions (a document
//! read but not written as a `{"verify": path, "precondition"}` entry). A failed precondition
//! then means another writer won: ABORTED, retry the transaction. Without `transaction` it is
//! FAILED_PRECONDITION.

use docstore_core::path::ResourcePath;
use docstore_core::{Code, ErrorKind};

use super::caller::Caller;
use super::context::RulesMethod;
use super::error::{raised_by_extension, ServiceError};
use super::Service;
use crate::pg::documents::{self as pg_documents, Document};
use crate::pg::types::RawJson;
use crate::pg::{PgError, RequestTx};

/// A commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRequest<'a> {
    pub database: &'a str,
    /// `docstore.commit`'s writes: a JSON array's text.
    pub writes: &'a str,
    /// The commit ends an optimistic transaction: a failed precondition is ABORTED.
    pub transaction: bool,
    /// Documents to read back after the writes, in the same transaction
    /// (`pg::documents::read_written`): a gRPC Commit's transform results.
    pub read_back: &'a [ResourcePath],
}

/// What a commit answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// `{"commitTime", "updateTimes"}` as the extension answers it.
    pub answer: RawJson,
    /// Per `read_back` path, in order: the document after the writes (`None`: it does not
    /// exist).
    pub read_back: Vec<Option<Document>>,
}

/// Commit the writes in one transaction: `{"commitTime", "updateTimes"}` as the extension
/// answers it, and the `read_back` documents as the writes left them.
///
/// # Errors
/// The extension's errors (ABORTED for a failed precondition of a transaction), database
/// errors.
///
/// # Cancel safety
/// Dropped mid-way, the transaction is cancelled and its connection discarded: nothing of the
/// batch is written.
pub async fn commit(
    service: &Service,
    caller: &Caller,
    request: CommitRequest<'_>,
) -> Result<Committed, ServiceError> {
    let database = request.database;
    let run_as = caller.run_as(RulesMethod::Write, database, "", None);
    // `begin`, the settings and the commit go out together (one round trip).
    let (tx, answer) = service
        .db
        .begin_with(database, &run_as, async |tx: &RequestTx| {
            let answer = pg_documents::commit(tx, request.writes).await.map_err(|e| {
                // In an optimistic transaction a failed precondition means a document changed
                // since it was read: the transaction lost a race and is retried (ABORTED). Only
                // the extension's own precondition failures are that; anything else keeps its
                // code.
                let lost_race = request.transaction && precondition_failed(&e);
                let mut e = ServiceError::from(e);
                if lost_race {
                    e.code = Code::Aborted;
                    e.hint = Some(
                        "a document changed since the transaction read it: read again and retry the transaction"
                            .into(),
                    );
                }
                e
            })?;
            let read_back = pg_documents::read_written(tx, database, request.read_back).await?;
            Ok::<_, ServiceError>(Committed { answer, read_back })
        })
        .await?;
    tx.commit().await?;
    Ok(answer)
}

/// Whether `error` is pg_docstore's failed write precondition (55000 raised by the extension).
fn precondition_failed(error: &PgError) -> bool {
    let PgError::Db(e) = error else {
        return false;
    };
    e.as_db_error().is_some_and(|db| {
        raised_by_extension(db) && db.code().code() == ErrorKind::FailedPrecondition.sqlstate()
    })
}
