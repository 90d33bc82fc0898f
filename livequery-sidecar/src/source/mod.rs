//! Stage 1: the change source — committed transactions of `docstore.entities`, decoded.
//!
//! `pgoutput` decodes one logical replication message; `entities` turns the messages of
//! `docstore.entities` into document changes; `transaction` assembles Begin .. Commit into
//! [`Transaction`]s; `replication` is the [`ChangeSource`] over a replication connection
//! (pgwire-replication), `supervisor` the one that reconnects with backoff and replaces a
//! lost slot; `heartbeat` moves the position when nothing is written; `wire` is the format of
//! transactions in a JetStream stream and `jetstream` the source of a gateway that reads
//! them (the roles of docs/architecture.md, "Processes").
//!
//! A delete carries only the key (`database_id`, encoded `name`): its path is decoded from
//! the name (`docstore_core::encoding::decode_name`). An update that leaves the TOASTed
//! `data` unchanged carries [`DocumentData::UnchangedToast`]: the changelog takes the
//! previous version, never an empty document.

use std::future::Future;
use std::sync::Arc;

use thiserror::Error;

pub mod entities;
pub mod heartbeat;
pub mod jetstream;
pub mod pgoutput;
pub mod replication;
pub mod supervisor;
pub mod transaction;
pub mod wire;

pub use entities::{Change, DocumentChange, DocumentData, DocumentKey, Previous};
pub use pgoutput::Lsn;
pub use replication::{replace_slot, ReplicationSettings, ReplicationSource};
pub use supervisor::{Backoff, SourceHealth, SupervisedSource};
pub use transaction::{EmittedMessage, Transaction};

/// What a [`ChangeSource`] delivers, in stream order.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceEvent {
    /// The slot did not exist and was created at `consistent_point`: nothing before it can
    /// be delivered (a consumer at an older position must reset).
    SlotCreated { consistent_point: Lsn },
    /// A committed transaction (changes and transactional messages, heartbeats included).
    Transaction(Transaction),
    /// A non-transactional `pg_logical_emit_message`.
    Message(EmittedMessage),
    /// The server's keepalive between transactions: it has sent everything it decoded up to
    /// `wal_end`. `reply_requested`: the walsender waits for the client's position. It asks
    /// when a fast or smart shutdown has sent the last WAL (it exits only once the reported
    /// flush position reaches `wal_end`), or when no status came for half of
    /// `wal_sender_timeout`.
    KeepAlive { wal_end: Lsn, reply_requested: bool },
}

/// Why the source stopped. After any error the source is finished: connect again (the
/// stream restarts at the slot's confirmed position).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SourceError {
    /// The stream could not be decoded or assembled.
    #[error("change stream: {0}")]
    Stream(#[from] transaction::AssembleError),
    /// The replication slot does not exist (dropped under us; SQLSTATE 42704).
    #[error("replication slot missing: {0}")]
    SlotMissing(String),
    /// Postgres invalidated the slot (`max_slot_wal_keep_size`; SQLSTATE 55000): changes
    /// after its confirmed position are lost. Drop and recreate it, and reset every stream.
    #[error("replication slot invalidated: {0}")]
    SlotInvalidated(String),
    /// A slot of that name exists but is not a pgoutput slot of this database.
    #[error("replication slot {0:?} is not a logical pgoutput slot of this database")]
    SlotUnusable(String),
    /// The replication connection failed (I/O, authentication, server error).
    #[error("replication connection: {0}")]
    Replication(String),
    /// The SQL connection failed.
    #[error("postgres: {0}")]
    Postgres(String),
    /// Postgres answered something unexpected.
    #[error("unexpected answer from postgres: {0}")]
    Protocol(String),
    /// The stream ended.
    #[error("the replication stream ended")]
    Closed,
}

impl From<tokio_postgres::Error> for SourceError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.code() {
            // Written as the replication connection writes it, for [`SourceError::sqlstate`].
            Some(code) => SourceError::Postgres(format!("{e} (SQLSTATE {})", code.code())),
            None => SourceError::Postgres(e.to_string()),
        }
    }
}

impl SourceError {
    /// The SQLSTATE of the server's error this is, if it is one: both connections write it
    /// at the end of the message, `... (SQLSTATE 28P01)`.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            SourceError::Replication(text)
            | SourceError::Postgres(text)
            | SourceError::SlotMissing(text)
            | SourceError::SlotInvalidated(text) => {
                let start = text.rfind("(SQLSTATE ")? + "(SQLSTATE ".len();
                let code = text.get(start..start + 5)?;
                code.bytes()
                    .all(|b| b.is_ascii_alphanumeric())
                    .then_some(code)
            }
            _ => None,
        }
    }
}

/// A stream of committed transactions. One consumer owns it (the changelog's task).
pub trait ChangeSource: Send {
    /// The next event: a committed transaction, a non-transactional message, a keepalive,
    /// or the creation of the slot.
    ///
    /// # Errors
    /// [`SourceError`]; the source is finished after one.
    ///
    /// # Cancel safety
    /// Implementations are cancel-safe: a cancelled call loses nothing (a partly received
    /// transaction stays in the source).
    fn next_event(&mut self) -> impl Future<Output = Result<SourceEvent, SourceError>> + Send;

    /// Confirm that nothing up to `lsn` (a transaction's `end_lsn`) is needed any more: the
    /// server may then drop that WAL, and a reconnect starts after it. Monotonic (a lower
    /// LSN than one confirmed before is ignored) and never implied: without calls the slot
    /// stays where it is.
    fn confirm(&mut self, lsn: Lsn);
}

/// A consumer of the committed transactions besides the live-query hub (write triggers,
/// `triggers::record`): the hub hands it every transaction of the stream, in commit order and
/// once (replays after a reconnect are skipped), and confirms the slot no further than every
/// consumer allows. Both calls run on the hub's task: they must not wait.
pub trait Consumer: Send {
    /// A committed transaction.
    fn on_transaction(&mut self, txn: &Arc<Transaction>);

    /// How far the slot may be confirmed when the hub would confirm `lsn`: `lsn`, or less
    /// while a transaction before it is not yet safe (for triggers: recorded in Postgres).
    fn confirmable(&mut self, lsn: Lsn) -> Lsn;
}
