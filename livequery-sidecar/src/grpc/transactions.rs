//! BeginTransaction and Rollback over the held transactions of `service::transactions` (the
//! same operations as the HTTP API's `:beginTransaction` and `:rollback`), and the
//! consistency selector of the reads: `transaction` (read in a held transaction),
//! `new_transaction` (begin one, read in it, answer its id with the first response) and
//! `read_time` (`service::read_time`: a current read when no later commit exists).
//! docs/grpc.md, "Transactions and read times".
//!
//! A transaction id is 16 bytes on the wire; the service names it by their base64 text.

use docstore_core::proto::{
    timestamp_from_proto, timestamp_to_proto, DatabaseName, ProtoTimestamp,
};
use docstore_core::Timestamp;
use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use tonic::Status;

use super::error::{from_proto, from_service};
use crate::service::caller::Caller;
use crate::service::transactions::{self as service_transactions, bytes_of_text, text_of_bytes};
use crate::service::Service;

use wire::transaction_options::{read_only, Mode};

/// How a read reads (its request's `consistency_selector`).
pub enum Consistency {
    /// Now.
    Current,
    /// In the held transaction of this id (its text).
    In(String),
    /// In a transaction begun for it with these options.
    Begin(wire::TransactionOptions),
    /// At this time.
    At(Timestamp),
}

impl Consistency {
    /// The consistency of a read naming a transaction (`bytes`), new transaction options or a
    /// read time; `None`: a current read.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a bad read time.
    fn of(
        transaction: Option<&[u8]>,
        new_transaction: Option<&wire::TransactionOptions>,
        at: Option<&ProtoTimestamp>,
    ) -> Result<Consistency, Status> {
        Ok(match (transaction, new_transaction, at) {
            (Some(bytes), _, _) => Consistency::In(text_of_bytes(bytes)),
            (_, Some(options), _) => Consistency::Begin(options.clone()),
            (_, _, Some(t)) => {
                Consistency::At(timestamp_from_proto(t).map_err(|e| from_proto(&e))?)
            }
            (None, None, None) => Consistency::Current,
        })
    }

    /// GetDocument's.
    ///
    /// # Errors
    /// As [`Consistency::of`].
    pub fn of_get(
        selector: Option<&wire::get_document_request::ConsistencySelector>,
    ) -> Result<Consistency, Status> {
        use wire::get_document_request::ConsistencySelector as S;
        match selector {
            Some(S::Transaction(id)) => Consistency::of(Some(id), None, None),
            Some(S::ReadTime(t)) => Consistency::of(None, None, Some(t)),
            None => Ok(Consistency::Current),
        }
    }

    /// BatchGetDocuments'.
    ///
    /// # Errors
    /// As [`Consistency::of`].
    pub fn of_batch_get(
        selector: Option<&wire::batch_get_documents_request::ConsistencySelector>,
    ) -> Result<Consistency, Status> {
        use wire::batch_get_documents_request::ConsistencySelector as S;
        match selector {
            Some(S::Transaction(id)) => Consistency::of(Some(id), None, None),
            Some(S::NewTransaction(o)) => Consistency::of(None, Some(o), None),
            Some(S::ReadTime(t)) => Consistency::of(None, None, Some(t)),
            None => Ok(Consistency::Current),
        }
    }

    /// RunQuery's.
    ///
    /// # Errors
    /// As [`Consistency::of`].
    pub fn of_query(
        selector: Option<&wire::run_query_request::ConsistencySelector>,
    ) -> Result<Consistency, Status> {
        use wire::run_query_request::ConsistencySelector as S;
        match selector {
            Some(S::Transaction(id)) => Consistency::of(Some(id), None, None),
            Some(S::NewTransaction(o)) => Consistency::of(None, Some(o), None),
            Some(S::ReadTime(t)) => Consistency::of(None, None, Some(t)),
            None => Ok(Consistency::Current),
        }
    }

    /// RunAggregationQuery's.
    ///
    /// # Errors
    /// As [`Consistency::of`].
    pub fn of_aggregation(
        selector: Option<&wire::run_aggregation_query_request::ConsistencySelector>,
    ) -> Result<Consistency, Status> {
        use wire::run_aggregation_query_request::ConsistencySelector as S;
        match selector {
            Some(S::Transaction(id)) => Consistency::of(Some(id), None, None),
            Some(S::NewTransaction(o)) => Consistency::of(None, Some(o), None),
            Some(S::ReadTime(t)) => Consistency::of(None, None, Some(t)),
            None => Ok(Consistency::Current),
        }
    }
}

/// A read under way: the transaction it reads in, the id of one begun for it, the time it
/// must answer for.
pub struct Reading {
    /// The held transaction to read in (its id's text).
    pub transaction: Option<String>,
    /// The id of the transaction begun for this read (empty: none), for its first answer.
    pub began: Vec<u8>,
    /// The read time asked for.
    pub read_time: Option<Timestamp>,
}

impl Reading {
    /// Start a read of `caller` on `db` with `consistency`: a new transaction is begun here.
    ///
    /// # Errors
    /// As [`begin`].
    pub async fn start(
        service: &Service,
        caller: &Caller,
        db: &DatabaseName,
        consistency: Consistency,
    ) -> Result<Reading, Status> {
        let (transaction, began, read_time) = match consistency {
            Consistency::Current => (None, Vec::new(), None),
            Consistency::In(id) => (Some(id), Vec::new(), None),
            Consistency::At(t) => (None, Vec::new(), Some(t)),
            Consistency::Begin(options) => {
                let id = begin_text(service, caller, db, Some(&options)).await?;
                let bytes = bytes_of_text(&id).map_err(from_service)?;
                (Some(id), bytes, None)
            }
        };
        Ok(Reading {
            transaction,
            began,
            read_time,
        })
    }

    /// After the read: the read time to answer (`None`: the read's own). A read at a
    /// `read_time` read the documents as they were then (the extension's `*_at` functions,
    /// which refuse a time older than the version history).
    pub fn finish(&self) -> Option<ProtoTimestamp> {
        self.read_time.map(timestamp_to_proto)
    }
}

/// Begin a transaction of `caller` on `db` with `options` (none: read-write); its id's text.
///
/// # Errors
/// RESOURCE_EXHAUSTED over a bound; INVALID_ARGUMENT for a bad read time or one in the future
/// (one older than the version history fails the transaction's reads: FAILED_PRECONDITION).
async fn begin_text(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    options: Option<&wire::TransactionOptions>,
) -> Result<String, Status> {
    // read_write.retry_transaction names the transaction retried: an ended one, whose place
    // in line Firestore keeps; a lock wait here has no queue to keep a place in.
    let (read_only, at) = match options.and_then(|o| o.mode.as_ref()) {
        None | Some(Mode::ReadWrite(_)) => (false, None),
        Some(Mode::ReadOnly(r)) => match &r.consistency_selector {
            Some(read_only::ConsistencySelector::ReadTime(t)) => (
                true,
                Some(timestamp_from_proto(t).map_err(|e| from_proto(&e))?),
            ),
            None => (true, None),
        },
    };
    service_transactions::begin(service, caller, &db.database, read_only, at)
        .await
        .map_err(from_service)
}

/// BeginTransaction: the new transaction's id.
///
/// # Errors
/// As [`begin_text`].
///
/// # Cancel safety
/// As `service::transactions::begin`.
pub async fn begin(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    options: Option<&wire::TransactionOptions>,
) -> Result<Vec<u8>, Status> {
    let id = begin_text(service, caller, db, options).await?;
    bytes_of_text(&id).map_err(from_service)
}

/// Rollback of transaction `id`.
///
/// # Errors
/// INVALID_ARGUMENT for an unknown, ended or expired id; PERMISSION_DENIED for another
/// caller's.
///
/// # Cancel safety
/// As `service::transactions::rollback`.
pub async fn rollback(
    service: &Service,
    caller: &Caller,
    db: &DatabaseName,
    id: &[u8],
) -> Result<(), Status> {
    service_transactions::rollback(service, caller, &db.database, &text_of_bytes(id))
        .await
        .map_err(from_service)
}
