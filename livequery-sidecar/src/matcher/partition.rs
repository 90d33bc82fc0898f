//! Partitioned matching in one process: InvaliDB's two dimensions (docs/architecture.md,
//! "Matching and scale").
//!
//! A [`super::Matcher`] is cut into `Q` *query partitions* (a target belongs to one, by a hash
//! of its id), each with its own targets and [`PredicateIndex`]; each index is cut into `W`
//! *cells*, one per *write partition* (a write belongs to one, by a hash of its document's
//! name). A committed transaction goes through two stages:
//!
//! 1. **Filter**, one task per cell (`W x Q` of them): the writes of write partition `w` are
//!    looked up in cell `w` of query partition `q`, giving the targets of `q` each write may
//!    concern. Nothing is decided here: a cell only narrows down.
//! 2. **Apply**, one task per query partition: the candidates of its `W` cells are merged per
//!    target, and each target takes in *all* of the transaction's writes that may concern it,
//!    in one call, where its whole window (kept rows, slack, bound) is known. This is where
//!    InvaliDB's second stage (the merge of sorted queries with a limit) happens: since write
//!    partitions never compute deltas, there is nothing to merge but candidate lists, and a
//!    sorted window sees every write of the transaction at once, exactly as with one
//!    partition.
//!
//! The membership changes a target reports (documents it now holds or lets go) go back to the
//! cell of each document's write partition, inside the query partition that owns the target:
//! no state is shared between query partitions, and a cell is only written between
//! transactions' filter stages.
//!
//! [`super::Matcher::apply`] returns only when every partition has passed the transaction:
//! the hub sends nothing of a position before all partitions are done with it.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use docstore_core::path::ResourcePath;

use super::index::PredicateIndex;
use super::target::{Pending, Shared, Target};
use super::{Horizon, MatcherStats, TargetDelta, TargetId, Write};

/// The write partition of a document name among `partitions` (a fixed hash: the same in
/// every process and run).
pub fn write_partition(path: &ResourcePath, partitions: usize) -> usize {
    if partitions <= 1 {
        return 0;
    }
    let mut hasher = DefaultHasher::new();
    path.hash(&mut hasher);
    usize::try_from(hasher.finish() % partitions as u64).unwrap_or(0)
}

/// The query partition of a target among `partitions` (SplitMix64 of the id: consecutive
/// ids spread evenly).
pub fn query_partition(id: TargetId, partitions: usize) -> usize {
    if partitions <= 1 {
        return 0;
    }
    let mut z = id.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    usize::try_from(z % partitions as u64).unwrap_or(0)
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub target: Target,
    pub horizon: Option<Arc<dyn Horizon>>,
}

/// A transaction's writes, the last version of each document in first-write order, and
/// which of them each write partition has.
pub(crate) struct Batch {
    pub truncated: bool,
    pub writes: Vec<Pending>,
    /// Indexes into `writes`, by write partition.
    pub by_partition: Vec<Vec<usize>>,
}

impl Batch {
    pub fn coalesce(writes: &[Write], partitions: usize) -> Batch {
        let mut batch = Batch {
            truncated: false,
            writes: Vec::new(),
            by_partition: vec![Vec::new(); partitions.max(1)],
        };
        let mut at: HashMap<ResourcePath, usize> = HashMap::new();
        for write in writes {
            let (path, new) = match write {
                Write::Set(doc) => (&doc.path, Some(doc.clone())),
                Write::Delete(path) => (path, None),
                Write::Truncate => {
                    batch.truncated = true;
                    batch.writes.clear();
                    at.clear();
                    continue;
                }
            };
            match at.get(path) {
                Some(&i) => batch.writes[i].new = new,
                None => {
                    at.insert(path.clone(), batch.writes.len());
                    batch.writes.push(Pending {
                        path: path.clone(),
                        new,
                    });
                }
            }
        }
        let n = batch.by_partition.len();
        for (i, w) in batch.writes.iter().enumerate() {
            batch.by_partition[write_partition(&w.path, n)].push(i);
        }
        batch
    }
}

/// The candidates one cell found: (target, index of the write in the batch), with repeats.
pub(crate) type Found = Vec<(TargetId, usize)>;

/// One query partition: its targets and their index (one cell per write partition).
#[derive(Debug)]
pub(crate) struct Partition {
    pub targets: HashMap<TargetId, Entry>,
    pub index: PredicateIndex,
    /// Targets tested and deltas reported (the matcher counts transactions and writes).
    pub stats: MatcherStats,
}

impl Partition {
    pub fn new(write_partitions: usize) -> Partition {
        Partition {
            targets: HashMap::new(),
            index: PredicateIndex::new(write_partitions),
            stats: MatcherStats::default(),
        }
    }

    /// Stage 1 in cell `w`: the targets each write of write partition `w` may concern.
    pub fn filter(&self, w: usize, batch: &Batch) -> Found {
        let mut out = Vec::new();
        let mut found = Vec::new();
        for &i in batch.by_partition.get(w).map_or(&[][..], Vec::as_slice) {
            let write = &batch.writes[i];
            found.clear();
            self.index.candidates(
                &write.path,
                write.new.as_ref().map(|d| &*d.fields),
                &mut found,
            );
            out.extend(found.iter().map(|id| (*id, i)));
        }
        out
    }

    /// Stage 2: every target some cell found (every target after a truncate) takes in the
    /// writes that may concern it, in commit order; the deltas, sorted by target id.
    pub fn apply(
        &mut self,
        xid: u32,
        batch: &Batch,
        found: Vec<Found>,
    ) -> Vec<(TargetId, TargetDelta)> {
        let mut per_target: HashMap<TargetId, Vec<usize>> = HashMap::new();
        if batch.truncated {
            let all: Vec<usize> = (0..batch.writes.len()).collect();
            for id in self.targets.keys() {
                per_target.insert(*id, all.clone());
            }
        } else {
            for (id, i) in found.into_iter().flatten() {
                per_target.entry(id).or_default().push(i);
            }
        }
        let mut ids: Vec<TargetId> = per_target.keys().copied().collect();
        ids.sort_unstable();
        let mut out = Vec::new();
        // Targets on one query with the same window (a fan-out) are matched once.
        let mut shared = None;
        for id in ids {
            let mut list = per_target.remove(&id).unwrap_or_default();
            list.sort_unstable();
            list.dedup();
            let writes: Vec<&Pending> = list.iter().map(|&i| &batch.writes[i]).collect();
            if let Some(delta) = self.apply_one(id, xid, batch.truncated, &writes, &mut shared) {
                out.push((id, delta));
            }
        }
        out
    }

    /// Apply a transaction's `writes` to one target, unless its horizon sees the transaction;
    /// `shared`: the outcome of the target before it in this pass, taken when it applies here
    /// too, and replaced by this target's otherwise.
    pub fn apply_one(
        &mut self,
        id: TargetId,
        xid: u32,
        truncated: bool,
        writes: &[&Pending],
        shared: &mut Option<Shared>,
    ) -> Option<TargetDelta> {
        let entry = self.targets.get_mut(&id)?;
        if entry.horizon.as_ref().is_some_and(|h| h.sees(xid)) {
            return None;
        }
        self.stats.targets_tested += 1;
        let mut events = Vec::new();
        let (delta, taken) = entry
            .target
            .apply_shared(truncated, writes, &mut events, shared);
        self.stats.targets_shared += u64::from(taken);
        self.index.follow(id, events);
        self.stats.deltas += u64::from(delta.is_some());
        delta
    }
}
