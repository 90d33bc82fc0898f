//! Recording: the hub hands every committed transaction to the [`Recorder`] (a
//! [`Consumer`] of the change stream); its task inserts the matching changes into
//! `docstore.trigger_deliveries` and advances the triggers' positions, one Postgres
//! transaction per batch, and only then lets the slot be confirmed past them. A slow or absent
//! endpoint never holds the slot back: delivery reads the table, not the stream.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Notify};

use super::select;
use crate::pg::{triggers as sql, Db};
use crate::source::{Backoff, Consumer, Lsn, Transaction};

/// Most transactions recorded in one Postgres transaction.
const BATCH: usize = 512;

/// The hub's side of the recorder.
pub struct Recorder {
    queue: mpsc::UnboundedSender<Arc<Transaction>>,
    /// `(commit_lsn, end_lsn)` of the transactions handed over and perhaps not yet recorded.
    in_flight: VecDeque<(Lsn, Lsn)>,
    /// The `end_lsn` of the last transaction recorded (they are recorded in order).
    recorded: Arc<AtomicU64>,
}

impl Consumer for Recorder {
    fn on_transaction(&mut self, txn: &Arc<Transaction>) {
        if txn.changes.is_empty() {
            return;
        }
        self.in_flight.push_back((txn.commit_lsn, txn.end_lsn));
        if self.queue.send(Arc::clone(txn)).is_err() {
            // The task is gone: the transaction stays in flight and the slot is held.
            tracing::error!("the write triggers' recorder has stopped; the slot is held");
        }
    }

    fn confirmable(&mut self, lsn: Lsn) -> Lsn {
        let recorded = Lsn(self.recorded.load(Ordering::Acquire));
        while self
            .in_flight
            .front()
            .is_some_and(|(_, end)| *end <= recorded)
        {
            self.in_flight.pop_front();
        }
        match self.in_flight.front() {
            // A transaction is decoded again when the slot is confirmed before its commit.
            Some((commit, _)) => lsn.min(Lsn(commit.0.saturating_sub(1))),
            None => lsn,
        }
    }
}

/// Start the recorder's task; `recorded` is notified after each batch.
pub fn start(db: Db, max_depth: i32, recorded: Arc<Notify>) -> Recorder {
    let (queue, rx) = mpsc::unbounded_channel();
    let done = Arc::new(AtomicU64::new(0));
    tokio::spawn(run(db, max_depth, rx, Arc::clone(&done), recorded));
    Recorder {
        queue,
        in_flight: VecDeque::new(),
        recorded: done,
    }
}

/// # Cancel safety
/// Runs for the life of the process.
async fn run(
    db: Db,
    max_depth: i32,
    mut rx: mpsc::UnboundedReceiver<Arc<Transaction>>,
    done: Arc<AtomicU64>,
    recorded: Arc<Notify>,
) {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    let mut batch: Vec<Arc<Transaction>> = Vec::new();
    loop {
        if batch.is_empty() {
            let Some(txn) = rx.recv().await else {
                return;
            };
            batch.push(txn);
        }
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(txn) => batch.push(txn),
                Err(_) => break,
            }
        }
        match record(&db, &batch, max_depth).await {
            Ok(count) => {
                backoff.reset();
                if let Some(last) = batch.last() {
                    done.store(last.end_lsn.0, Ordering::Release);
                }
                if count > 0 {
                    metrics::counter!("docstore_trigger_recorded_total").increment(count as u64);
                    recorded.notify_one();
                }
                batch.clear();
            }
            Err(e) => {
                // Never dropped: the batch is recorded again until Postgres takes it.
                let delay = backoff.next_delay();
                tracing::warn!(error = %e, ?delay, "write triggers: recording failed; retrying");
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// Record one batch in one transaction; returns how many deliveries it inserted or found.
async fn record(
    db: &Db,
    batch: &[Arc<Transaction>],
    max_depth: i32,
) -> Result<usize, crate::pg::PgError> {
    let (tx, triggers) = sql::begin_recording(db).await?;
    let records: Vec<select::Record> = batch
        .iter()
        .flat_map(|txn| select::records(&triggers, txn, max_depth))
        .collect();
    let through = batch.last().map_or(Lsn(0), |t| t.commit_lsn);
    sql::record(&tx, &records, through).await?;
    tx.commit().await?;
    Ok(records.len())
}
