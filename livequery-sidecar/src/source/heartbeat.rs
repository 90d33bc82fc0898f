//! Heartbeats: when nothing is written, a transactional `pg_logical_emit_message` about once
//! a second, so the stream's position moves (every stream gets a `heartbeat` event) and the
//! slot can be confirmed past idle WAL (the Firestore paper's idle-range heartbeats).
//!
//! A heartbeat is its own committed transaction: it arrives as a [`super::Transaction`] with
//! no changes and one message whose prefix is [`PREFIX`].

use std::time::Duration;

use tokio::sync::watch;

use super::{Lsn, SourceError, Transaction};

/// The prefix of heartbeat messages.
pub const PREFIX: &str = "docstore-heartbeat";

/// Whether a transaction is nothing but heartbeats.
pub fn is_heartbeat(txn: &Transaction) -> bool {
    txn.changes.is_empty()
        && !txn.messages.is_empty()
        && txn.messages.iter().all(|m| m.prefix == PREFIX)
}

/// Emit one heartbeat (its content names the emitter, e.g. the slot); returns its LSN.
///
/// # Errors
/// [`SourceError::Postgres`] if the statement fails.
///
/// # Cancel safety
/// Cancel-safe: a cancelled heartbeat was either committed or not; either is harmless.
pub async fn emit(client: &tokio_postgres::Client, content: &str) -> Result<Lsn, SourceError> {
    let row = client
        .query_one(
            "select pg_logical_emit_message(true, $1, $2::text)::text",
            &[&PREFIX, &content],
        )
        .await?;
    let text: String = row.get(0);
    Lsn::parse(&text).ok_or_else(|| SourceError::Protocol(format!("message LSN {text:?}")))
}

/// Emit a heartbeat whenever `interval` passes without activity. `activity` is bumped by
/// the consumer of the stream for every transaction it receives (heartbeats included, so
/// an idle stream sees one about every `interval`). Returns when the sender is dropped.
///
/// # Errors
/// The first failed heartbeat ([`SourceError::Postgres`]).
///
/// # Cancel safety
/// Cancel-safe: it holds no state between heartbeats.
pub async fn run(
    client: &tokio_postgres::Client,
    content: &str,
    interval: Duration,
    mut activity: watch::Receiver<Lsn>,
) -> Result<(), SourceError> {
    loop {
        match tokio::time::timeout(interval, activity.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Ok(()),
            Err(_) => {
                emit(client, content).await?;
            }
        }
    }
}
