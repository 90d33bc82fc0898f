//! Stage 2: the changelog — committed transactions kept for the snapshot hand-off and for
//! positions, bounded in time and bytes (docs/architecture.md, "Exact snapshot hand-off").
//!
//! Pure: no I/O, time is passed in. One task owns the [`Changelog`].
//!
//! The hand-off protocol of a new target:
//! 1. [`Changelog::ticket`] (in the changelog's task), then, in Postgres,
//!    `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`, the initial query, and
//!    `pg_current_snapshot()`;
//! 2. [`Changelog::hand_off`] with the ticket and that [`Snapshot`]: the retained
//!    transactions that apply to the target (those the snapshot does not see), in commit
//!    order; every transaction decoded later applies iff [`Snapshot::applies_to`] says so.
//!
//! Eviction. A transaction is *pinned* until its xid is below the xmin of a snapshot taken
//! after it was decoded (the ticket's clock says which transactions were decoded before the
//! snapshot was taken); only then can no snapshot taken later fail to see it. Unpinned
//! transactions are evicted from the front once older than [`Limits::keep`]. The byte and
//! age bounds evict from the front even pinned ones; positions older than the oldest
//! retained are then [`RetentionPassed`], and so is a hand-off whose snapshot does not see a
//! transaction evicted after its ticket was issued (or evicted while pinned).

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use docstore_core::value::{Map, Value};
use thiserror::Error;

use crate::source::{Change, DocumentData, Lsn, Transaction};

pub mod visibility;

pub use visibility::Snapshot;

/// The bounds of the retention buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Retained bytes (estimated) beyond which the oldest transactions are evicted.
    pub max_bytes: usize,
    /// Age beyond which a transaction is evicted, pinned or not.
    pub max_age: Duration,
    /// How long an unpinned transaction is kept (for positions of resuming streams).
    pub keep: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 256 << 20,
            max_age: Duration::from_secs(300),
            keep: Duration::from_secs(60),
        }
    }
}

impl Limits {
    /// The limits of a sidecar whose listen streams wait `grace` for a resume
    /// (`--listen-grace-seconds`): transactions are kept at least as long as the grace (a
    /// resume within it may need them: a stream adopted on another process, a matcher taking
    /// a stream over, rebuild the client's results from the changelog), never less than the
    /// defaults; a pinned transaction is evicted no sooner than an unpinned one.
    pub fn for_grace(grace: Duration) -> Limits {
        let default = Limits::default();
        let keep = default.keep.max(grace);
        Limits {
            keep,
            max_age: default.max_age.max(keep),
            ..default
        }
    }
}

/// The changelog cannot answer: a transaction it would need was evicted. The stream or
/// target resets (reason "retention passed") and starts again from a new snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("retention passed: the changelog no longer holds what follows {position} (it holds from {oldest_retained:?})")]
pub struct RetentionPassed {
    /// The position asked for (for a hand-off, the commit LSN of the evicted transaction).
    pub position: Lsn,
    /// The commit LSN of the oldest retained transaction, if any.
    pub oldest_retained: Option<Lsn>,
}

/// Issued before a snapshot is taken: the changelog's clock then (transactions decoded so
/// far) and the ticket's place among tickets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a ticket must be handed back through hand_off or forget"]
pub struct Ticket {
    id: u64,
    clock: u64,
}

#[derive(Debug)]
struct Entry {
    /// Decode order (the clock value it was decoded at: 1, 2, ...).
    seq: u64,
    txn: Arc<Transaction>,
    decoded_at: Instant,
    bytes: usize,
    pinned: bool,
}

/// An evicted transaction a hand-off with an older ticket may still need to know about.
#[derive(Debug, Clone, Copy)]
struct Evicted {
    seq: u64,
    xid: u32,
    commit_lsn: Lsn,
    /// Tickets with a lower id were issued before this eviction.
    after_ticket: u64,
    pinned: bool,
}

/// The retention buffer of committed transactions.
#[derive(Debug)]
pub struct Changelog {
    limits: Limits,
    entries: VecDeque<Entry>,
    bytes: usize,
    clock: u64,
    next_ticket: u64,
    outstanding: BTreeSet<u64>,
    evicted: Vec<Evicted>,
    /// Commit LSN of the newest evicted transaction.
    evicted_through: Option<Lsn>,
    /// End LSN of the newest evicted transaction.
    evicted_end: Option<Lsn>,
    /// Commit LSN of the first transaction taken in: the changelog knows nothing of what
    /// committed before it.
    first: Option<Lsn>,
}

impl Changelog {
    /// An empty changelog.
    pub fn new(limits: Limits) -> Changelog {
        Changelog {
            limits,
            entries: VecDeque::new(),
            bytes: 0,
            clock: 0,
            next_ticket: 0,
            outstanding: BTreeSet::new(),
            evicted: Vec::new(),
            evicted_through: None,
            evicted_end: None,
            first: None,
        }
    }

    /// Retained transactions.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is retained.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Estimated bytes retained.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The commit LSN of the oldest retained transaction.
    pub fn oldest_retained(&self) -> Option<Lsn> {
        self.entries.front().map(|e| e.txn.commit_lsn)
    }

    /// How far the slot may be confirmed for the changelog's sake ([`ChangeSource::confirm`]):
    /// the end of the newest evicted transaction; everything retained is still needed.
    /// Other consumers of the slot (trigger deliveries) confirm at most the minimum.
    ///
    /// [`ChangeSource::confirm`]: crate::source::ChangeSource::confirm
    pub fn confirmable(&self) -> Option<Lsn> {
        self.evicted_end
    }

    /// Take in a decoded transaction at `now`, then enforce the bounds. A transaction at or
    /// before one already taken (the replay after a reconnect) is skipped: `None`.
    pub fn push(&mut self, txn: Transaction, now: Instant) -> Option<Arc<Transaction>> {
        let newest = self
            .entries
            .back()
            .map(|e| e.txn.commit_lsn)
            .max(self.evicted_through);
        if newest.is_some_and(|n| txn.commit_lsn <= n) {
            return None;
        }
        let mut txn = txn;
        self.first.get_or_insert(txn.commit_lsn);
        self.resolve_unchanged(&mut txn);
        self.clock += 1;
        let bytes = transaction_bytes(&txn);
        let txn = Arc::new(txn);
        self.entries.push_back(Entry {
            seq: self.clock,
            txn: Arc::clone(&txn),
            decoded_at: now,
            bytes,
            pinned: true,
        });
        self.bytes += bytes;
        self.trim(now);
        Some(txn)
    }

    /// Give an Update whose `data` arrived as unchanged TOAST the fields of the document's
    /// previous version: an earlier change of the same transaction, or the newest retained
    /// one. Left [`DocumentData::UnchangedToast`] when the changelog holds no earlier version
    /// (the consumer then re-reads the document); never empty.
    fn resolve_unchanged(&self, txn: &mut Transaction) {
        for i in 0..txn.changes.len() {
            let (earlier, rest) = txn.changes.split_at_mut(i);
            let Some(Change::Update(doc)) = rest.first_mut() else {
                continue;
            };
            if doc.data != DocumentData::UnchangedToast {
                continue;
            }
            let previous = earlier
                .iter()
                .rev()
                .chain(
                    self.entries
                        .iter()
                        .rev()
                        .flat_map(|e| e.txn.changes.iter().rev()),
                )
                .find_map(|c| match c {
                    Change::Insert(d) | Change::Update(d)
                        if d.name == doc.name && d.database_id == doc.database_id =>
                    {
                        Some(Some(&d.data))
                    }
                    Change::Delete(k) if k.name == doc.name && k.database_id == doc.database_id => {
                        Some(None)
                    }
                    Change::Truncate => Some(None),
                    _ => None,
                });
            if let Some(Some(DocumentData::Fields(map))) = previous {
                doc.data = DocumentData::Fields(map.clone());
            }
        }
    }

    /// A ticket for a snapshot about to be taken (issue it before `BEGIN`).
    pub fn ticket(&mut self) -> Ticket {
        let id = self.next_ticket;
        self.next_ticket += 1;
        self.outstanding.insert(id);
        Ticket {
            id,
            clock: self.clock,
        }
    }

    /// Give back a ticket whose snapshot will not be handed off (the query failed).
    pub fn forget(&mut self, ticket: Ticket) {
        self.outstanding.remove(&ticket.id);
        self.prune_evicted();
    }

    /// The retained transactions after `position` (a commit LSN a stream has seen), in
    /// commit order.
    ///
    /// # Errors
    /// [`RetentionPassed`] when a transaction after `position` was evicted, or may have
    /// committed before the changelog's first (`position` is before it: another process's
    /// stream from before this one started).
    pub fn since(&self, position: Lsn) -> Result<Vec<Arc<Transaction>>, RetentionPassed> {
        if self.evicted_through.is_some_and(|e| position < e)
            || self.first.is_none_or(|first| position < first)
        {
            return Err(RetentionPassed {
                position,
                oldest_retained: self.oldest_retained(),
            });
        }
        Ok(self
            .entries
            .iter()
            .filter(|e| e.txn.commit_lsn > position)
            .map(|e| Arc::clone(&e.txn))
            .collect())
    }

    /// Hand off a target whose initial results were read in `snapshot`, taken after
    /// `ticket` was issued: the retained transactions it does not see, in commit order. The
    /// snapshot then unpins what it can (see the module documentation).
    ///
    /// # Errors
    /// [`RetentionPassed`] when a transaction the snapshot does not see was evicted.
    pub fn hand_off(
        &mut self,
        ticket: Ticket,
        snapshot: &Snapshot,
        now: Instant,
    ) -> Result<Vec<Arc<Transaction>>, RetentionPassed> {
        self.outstanding.remove(&ticket.id);
        let missing = self
            .evicted
            .iter()
            .find(|e| (e.pinned || e.after_ticket > ticket.id) && snapshot.applies_to(e.xid));
        let result = match missing {
            Some(e) => Err(RetentionPassed {
                position: e.commit_lsn,
                oldest_retained: self.oldest_retained(),
            }),
            None => Ok(self
                .entries
                .iter()
                .filter(|e| snapshot.applies_to(e.txn.xid))
                .map(|e| Arc::clone(&e.txn))
                .collect()),
        };
        self.observe(ticket.clock, snapshot);
        self.trim(now);
        result
    }

    /// Unpin with a snapshot that no target uses (the source's periodic one): a ticket then
    /// `pg_current_snapshot()`.
    pub fn observe_snapshot(&mut self, ticket: Ticket, snapshot: &Snapshot, now: Instant) {
        self.outstanding.remove(&ticket.id);
        self.observe(ticket.clock, snapshot);
        self.trim(now);
    }

    fn observe(&mut self, clock: u64, snapshot: &Snapshot) {
        for e in self
            .entries
            .iter_mut()
            .filter(|e| e.pinned && e.seq <= clock)
        {
            if snapshot.widen(e.txn.xid) < snapshot.xmin {
                e.pinned = false;
            }
        }
        for e in self
            .evicted
            .iter_mut()
            .filter(|e| e.pinned && e.seq <= clock)
        {
            if snapshot.widen(e.xid) < snapshot.xmin {
                e.pinned = false;
                e.after_ticket = self.next_ticket;
            }
        }
        self.prune_evicted();
    }

    /// Evict from the front: unpinned transactions older than `keep`, and anything beyond
    /// the byte and age bounds.
    pub fn trim(&mut self, now: Instant) {
        while let Some(front) = self.entries.front() {
            let age = now.saturating_duration_since(front.decoded_at);
            let forced = self.bytes > self.limits.max_bytes || age > self.limits.max_age;
            if !forced && (front.pinned || age < self.limits.keep) {
                break;
            }
            let Some(e) = self.entries.pop_front() else {
                break;
            };
            self.bytes -= e.bytes;
            self.evicted_through = Some(e.txn.commit_lsn);
            self.evicted_end = Some(e.txn.end_lsn);
            self.evicted.push(Evicted {
                seq: e.seq,
                xid: e.txn.xid,
                commit_lsn: e.txn.commit_lsn,
                after_ticket: self.next_ticket,
                pinned: e.pinned,
            });
        }
        self.prune_evicted();
    }

    /// Forget evicted transactions that no outstanding ticket can need: unpinned, and
    /// evicted before the oldest outstanding ticket was issued.
    fn prune_evicted(&mut self) {
        let oldest = self
            .outstanding
            .first()
            .copied()
            .unwrap_or(self.next_ticket);
        self.evicted.retain(|e| e.pinned || e.after_ticket > oldest);
    }
}

/// Estimated memory of a transaction: its documents' sizes plus fixed overheads.
pub fn transaction_bytes(txn: &Transaction) -> usize {
    let changes: usize = txn
        .changes
        .iter()
        .map(|c| match c {
            Change::Insert(d) | Change::Update(d) => {
                96 + d.database_id.len()
                    + d.name.len() * 2
                    + match &d.data {
                        DocumentData::Fields(map) => map_bytes(map),
                        DocumentData::UnchangedToast => 0,
                    }
            }
            Change::Delete(k) => 64 + k.database_id.len() + k.name.len() * 2,
            Change::Truncate => 16,
        })
        .sum();
    let messages: usize = txn
        .messages
        .iter()
        .map(|m| 48 + m.prefix.len() + m.content.len())
        .sum();
    128 + changes + messages
}

/// Estimated memory of a map of fields (shared with the listen streams' replay estimate).
pub(crate) fn map_bytes(map: &Map) -> usize {
    map.iter().map(|(k, v)| 48 + k.len() + value_bytes(v)).sum()
}

fn value_bytes(value: &Value) -> usize {
    32 + match value {
        Value::String(s) => s.len(),
        Value::Bytes(b) => b.len(),
        Value::Reference(p) => p.segments().iter().map(|s| 24 + s.len()).sum(),
        Value::Array(items) => items.iter().map(value_bytes).sum(),
        Value::Vector(items) => items.len() * 8,
        Value::Map(m) => map_bytes(m),
        _ => 0,
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
