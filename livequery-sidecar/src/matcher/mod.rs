//! Stage 3: live targets matched against committed transactions with docstore-core's matcher
//! (docs/architecture.md, "Streams, targets and positions" and "Matching and scale").
//!
//! A [`Matcher`] owns the targets of one database by [`TargetId`]: queries (text or
//! structured, every shape core validates) and single documents. Each committed transaction
//! is applied in one call ([`Matcher::apply`]), never split, and yields at most one
//! [`TargetDelta`] per target: Firestore's document changes, a new aggregation row, or
//! [`TargetDelta::NeedsRequery`] when a sorted query with a limit has used up its slack.
//!
//! Modules, in the order a write meets them: `partition` (the query and write partitions a
//! transaction is matched in), `index` (which targets a write can concern), `target` (what
//! each target keeps and how it changes), `delta` (documents, changes and the diff of two
//! results).
//!
//! How the session drives it (the hand-off of docs/architecture.md):
//! 1. [`TargetSpec::fetch_query`] gives the query to run in the target's snapshot (whole
//!    documents, `offset + limit + slack` rows; run it as
//!    `docstore.run_query(docstore_core::query::to_structured(&q))`); [`Matcher::add_target`]
//!    takes its rows and the snapshot as a [`Horizon`], and returns the first result.
//! 2. Retained transactions the snapshot does not see go to that target alone through
//!    [`Matcher::apply_to`]; every later transaction through [`Matcher::apply`], which skips
//!    each target whose horizon already sees it.
//! 3. After [`TargetDelta::NeedsRequery`]: run [`Matcher::fetch_query`] at a new snapshot,
//!    then [`Matcher::requeried`] (its delta is relative to what the client was last told),
//!    then hand off as in step 2.
//!
//! Documents carry no database: one `Matcher` serves one database, and the session routes
//! each transaction's writes by database id (a transaction over two databases is applied to
//! both matchers before either's deltas are sent).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use docstore_core::error::ErrorKind;
use docstore_core::path::{PathError, ResourcePath};
use docstore_core::query::{parse_query, parse_structured, Query, QueryError};
use thiserror::Error;

pub mod delta;
mod index;
mod partition;
mod target;

pub use delta::{diff, DocChange, Document, TargetDelta, TargetResult};

use index::{place, Placement};
pub use partition::{query_partition, write_partition};
use partition::{Batch, Entry, Found, Partition};
use target::{DocumentTarget, Pending, QueryTarget, Target};

/// A target's id, unique in its [`Matcher`] (the session allocates them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TargetId(pub u64);

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One write of a committed transaction (the source's `Change`, by document name).
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// The document was created or replaced: its new version.
    Set(Document),
    /// The document was deleted.
    Delete(ResourcePath),
    /// Every document was deleted (`TRUNCATE docstore.entities`).
    Truncate,
}

/// What a target's initial rows saw: the snapshot they were read in. A transaction the
/// horizon sees is already in the rows and is skipped for that target.
pub trait Horizon: fmt::Debug + Send + Sync {
    /// Whether the transaction `xid` (as pgoutput sends it) is visible in the snapshot.
    fn sees(&self, xid: u32) -> bool;
}

/// What a target follows.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetSpec {
    /// A validated query (see [`TargetSpec::query`]). Shared: the session's record of the
    /// target and the matcher's target hold one allocation.
    Query(Arc<Query>),
    /// One document.
    Document(ResourcePath),
}

impl TargetSpec {
    /// A target on a query in the text dialect.
    ///
    /// # Errors
    /// [`MatcherError::Query`] when core refuses the text.
    pub fn parse_text(text: &str) -> Result<TargetSpec, MatcherError> {
        TargetSpec::live(parse_query(text)?)
    }

    /// A target on a structured query (Firestore's `StructuredQuery` JSON).
    ///
    /// # Errors
    /// [`MatcherError::Query`] when core refuses it.
    pub fn parse_structured(json: &serde_json::Value) -> Result<TargetSpec, MatcherError> {
        TargetSpec::live(parse_structured(json)?)
    }

    /// A target on a query built by hand (validated by core).
    ///
    /// # Errors
    /// [`MatcherError::Query`] when core refuses it.
    pub fn query(query: Query) -> Result<TargetSpec, MatcherError> {
        TargetSpec::live(query.validate()?)
    }

    /// A validated query as a target (a kindless one, every collection under its parent,
    /// docs/query.md, included: writes reach it through the index's database-wide scope).
    fn live(mut query: Query) -> Result<TargetSpec, MatcherError> {
        // Kept for the target's life: no spare capacity (a parser's vector grows by
        // doubling; one order by field held room for four).
        query.order_by.shrink_to_fit();
        Ok(TargetSpec::Query(Arc::new(query)))
    }

    /// A target on the document at `path`.
    ///
    /// # Errors
    /// [`MatcherError::Path`] when `path` is not a document path.
    pub fn document(path: &str) -> Result<TargetSpec, MatcherError> {
        Ok(TargetSpec::Document(ResourcePath::parse_document(path)?))
    }

    /// The query whose rows [`Matcher::add_target`] takes (`None` for a document target: its
    /// row is the document, if it exists): whole documents, no offset, and a limit of
    /// `offset + limit + slack` of the same kind.
    pub fn fetch_query(&self, config: &MatcherConfig) -> Option<Query> {
        match self {
            TargetSpec::Query(query) => Some(QueryTarget::fetch_query_for(
                query,
                usize::try_from(config.initial_slack.max(1)).unwrap_or(usize::MAX),
            )),
            TargetSpec::Document(_) => None,
        }
    }
}

/// Tuning of a [`Matcher`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatcherConfig {
    /// Results kept beyond `offset + limit` by a target with a limit (at least 1).
    pub initial_slack: u32,
    /// The slack doubles at each requery, up to this.
    pub max_slack: u32,
    /// Write partitions: a transaction's writes are looked up in this many index cells, by a
    /// hash of the document name, each by a task of its own (at least 1).
    pub write_partitions: u16,
    /// Query partitions: targets are split into this many sets with their own index, by a
    /// hash of the target id, each applying a transaction in a task of its own (at least 1).
    pub query_partitions: u16,
}

impl Default for MatcherConfig {
    fn default() -> Self {
        MatcherConfig {
            initial_slack: 16,
            max_slack: 1024,
            write_partitions: 1,
            query_partitions: 1,
        }
    }
}

impl MatcherConfig {
    fn writes(&self) -> usize {
        usize::from(self.write_partitions.max(1))
    }

    fn queries(&self) -> usize {
        usize::from(self.query_partitions.max(1))
    }
}

/// Why [`Matcher::rewound`] cannot tell a target's earlier result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Rewind {
    #[error("the target's kept rows do not determine its earlier result")]
    Inexact,
    #[error("no such target")]
    Unknown,
}

/// Why the matcher refused a call.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MatcherError {
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error("invalid document path: {0}")]
    Path(#[from] PathError),
    #[error("target {0} exists already")]
    DuplicateTarget(TargetId),
    #[error("no target {0}")]
    UnknownTarget(TargetId),
    #[error("target {0} follows a document; it has no query to re-run")]
    NotAQuery(TargetId),
    /// An initial row the target does not match: the fetch and core's matcher disagree.
    #[error("initial row {path} is not a result of the target")]
    RowOutsideTarget { path: String },
    #[error("initial rows name {path} twice")]
    DuplicateRow { path: String },
}

impl MatcherError {
    /// The canonical kind (code and status) of the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            MatcherError::Query(e) => e.kind(),
            MatcherError::Path(_) | MatcherError::DuplicateTarget(_) => ErrorKind::InvalidArgument,
            MatcherError::UnknownTarget(_) => ErrorKind::NotFound,
            MatcherError::NotAQuery(_) => ErrorKind::FailedPrecondition,
            MatcherError::RowOutsideTarget { .. } | MatcherError::DuplicateRow { .. } => {
                ErrorKind::Internal
            }
        }
    }
}

/// Counters of a [`Matcher`] (for metrics and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MatcherStats {
    /// Transactions applied.
    pub transactions: u64,
    /// Writes applied (after coalescing repeated writes of a document).
    pub writes: u64,
    /// Targets a transaction was tested against (index candidates, each counted once per
    /// transaction).
    pub targets_tested: u64,
    /// Of those, targets that took the outcome of a target on an equal query with the same
    /// kept results instead of being matched (a fan-out is matched once per transaction).
    pub targets_shared: u64,
    /// Deltas reported.
    pub deltas: u64,
}

/// The targets of one database and their indexes, in `query_partitions x write_partitions`
/// cells (the module `partition`; one cell by default).
#[derive(Debug)]
pub struct Matcher {
    config: MatcherConfig,
    partitions: Vec<Partition>,
    /// Transactions and writes (the partitions count the rest).
    stats: MatcherStats,
}

impl Default for Matcher {
    fn default() -> Self {
        Matcher::new(MatcherConfig::default())
    }
}

impl Matcher {
    /// An empty matcher.
    pub fn new(config: MatcherConfig) -> Matcher {
        Matcher {
            config,
            partitions: (0..config.queries())
                .map(|_| Partition::new(config.writes()))
                .collect(),
            stats: MatcherStats::default(),
        }
    }

    /// The query partition that owns target `id`.
    fn owner(&self, id: TargetId) -> &Partition {
        &self.partitions[query_partition(id, self.partitions.len())]
    }

    fn owner_mut(&mut self, id: TargetId) -> &mut Partition {
        let q = query_partition(id, self.partitions.len());
        &mut self.partitions[q]
    }

    /// Its configuration.
    pub fn config(&self) -> &MatcherConfig {
        &self.config
    }

    /// The number of targets.
    pub fn len(&self) -> usize {
        self.partitions.iter().map(|p| p.targets.len()).sum()
    }

    /// Whether there are no targets.
    pub fn is_empty(&self) -> bool {
        self.partitions.iter().all(|p| p.targets.is_empty())
    }

    /// The counters.
    pub fn stats(&self) -> MatcherStats {
        let mut stats = self.stats;
        for p in &self.partitions {
            stats.targets_tested += p.stats.targets_tested;
            stats.targets_shared += p.stats.targets_shared;
            stats.deltas += p.stats.deltas;
        }
        stats
    }

    /// Add a target whose initial `rows` were read in the snapshot `horizon` (`None`: every
    /// later transaction applies): the rows of [`TargetSpec::fetch_query`], or for a
    /// document target the document if it exists. Returns the target's first result.
    ///
    /// # Errors
    /// [`MatcherError::DuplicateTarget`]; for a query, [`MatcherError::Query`] when core
    /// refuses it and [`MatcherError::RowOutsideTarget`] / [`MatcherError::DuplicateRow`]
    /// for rows it does not match or repeats.
    pub fn add_target(
        &mut self,
        id: TargetId,
        spec: TargetSpec,
        rows: Vec<Document>,
        horizon: Option<Arc<dyn Horizon>>,
    ) -> Result<TargetResult, MatcherError> {
        let slack = self.config.initial_slack;
        self.add_target_with_slack(id, spec, rows, horizon, slack)
    }

    /// [`Matcher::add_target`] for a query target that keeps `slack` results beyond its
    /// window instead of the configured initial slack (its rows are those of
    /// [`TargetSpec::fetch_query`] with that slack: an adopted stream's reads,
    /// [`Matcher::rewound`]).
    ///
    /// # Errors
    /// As [`Matcher::add_target`].
    pub fn add_target_with_slack(
        &mut self,
        id: TargetId,
        spec: TargetSpec,
        rows: Vec<Document>,
        horizon: Option<Arc<dyn Horizon>>,
        slack: u32,
    ) -> Result<TargetResult, MatcherError> {
        let config = MatcherConfig {
            initial_slack: slack.max(1),
            max_slack: self.config.max_slack.max(slack),
            ..self.config
        };
        let partition = self.owner_mut(id);
        if partition.targets.contains_key(&id) {
            return Err(MatcherError::DuplicateTarget(id));
        }
        let mut events = Vec::new();
        let (target, placement) = match spec {
            TargetSpec::Query(query) => {
                // A spec's query is validated already (validation is idempotent): the
                // target keeps the spec's allocation unless validating changed it.
                let validated = Query::clone(&query).validate()?;
                let query = if validated == *query {
                    query
                } else {
                    Arc::new(validated)
                };
                let placement = place(&query);
                let target = QueryTarget::new(query, rows, &config, &mut events)?;
                (Target::Query(target), placement)
            }
            TargetSpec::Document(path) => {
                let mut rows = rows.into_iter();
                let doc = rows.next();
                if let Some(extra) = rows.next() {
                    return Err(MatcherError::RowOutsideTarget {
                        path: extra.path.to_string(),
                    });
                }
                let target = DocumentTarget::new(path.clone(), doc)?;
                (Target::Document(target), Placement::Document(path))
            }
        };
        let result = target.result();
        partition.index.insert(id, placement);
        partition.index.follow(id, events);
        partition.targets.insert(id, Entry { target, horizon });
        Ok(result)
    }

    /// Remove a target; `false` if there was none.
    pub fn remove_target(&mut self, id: TargetId) -> bool {
        let partition = self.owner_mut(id);
        let Some(entry) = partition.targets.remove(&id) else {
            return false;
        };
        partition.index.remove(id);
        if let Target::Query(mut t) = entry.target {
            let mut events = Vec::new();
            t.release_all(&mut events);
            partition.index.follow(id, events);
        }
        true
    }

    /// The delta that takes a client from the target's result at an earlier position to its
    /// current one, given `before`: every document written since that position, with its
    /// version then (`None`: it did not exist). The earlier result is the current one with
    /// each written document replaced by its version then, kept if the query matches it
    /// (core's matcher and order, as every result). `Ok(None)`: no difference.
    ///
    /// # Errors
    /// [`Rewind::Inexact`] when the target cannot know that result exactly (its kept rows
    /// do not reach far enough past the written documents, it waits for a requery, or it
    /// is an aggregation); [`Rewind::Unknown`] for a target it does not have.
    pub fn rewound(
        &self,
        id: TargetId,
        before: &HashMap<ResourcePath, Option<Document>>,
    ) -> Result<Option<TargetDelta>, Rewind> {
        match self.owner(id).targets.get(&id).map(|e| &e.target) {
            Some(Target::Query(t)) => t.rewound(before),
            Some(Target::Document(t)) => Ok(t.rewound(before)),
            None => Err(Rewind::Unknown),
        }
    }

    /// The current visible result of a target.
    pub fn result(&self, id: TargetId) -> Option<TargetResult> {
        self.owner(id).targets.get(&id).map(|e| e.target.result())
    }

    /// How many documents the target's [`Self::result`] holds, without building it (`None`
    /// for an unknown target or an aggregation).
    pub fn result_size(&self, id: TargetId) -> Option<usize> {
        self.owner(id).targets.get(&id)?.target.result_size()
    }

    /// The query to run for a query target's rows now (after [`TargetDelta::NeedsRequery`]:
    /// with its grown slack).
    ///
    /// # Errors
    /// [`MatcherError::UnknownTarget`], [`MatcherError::NotAQuery`].
    pub fn fetch_query(&self, id: TargetId) -> Result<Query, MatcherError> {
        match self.owner(id).targets.get(&id).map(|e| &e.target) {
            Some(Target::Query(t)) => Ok(t.fetch_query()),
            Some(Target::Document(_)) => Err(MatcherError::NotAQuery(id)),
            None => Err(MatcherError::UnknownTarget(id)),
        }
    }

    /// Whether a query target waits for [`Matcher::requeried`].
    pub fn awaiting_requery(&self, id: TargetId) -> bool {
        matches!(self.owner(id).targets.get(&id).map(|e| &e.target), Some(Target::Query(t)) if t.awaiting_requery())
    }

    /// Give a query target the rows of [`Matcher::fetch_query`] read in the snapshot
    /// `horizon`: the delta from what its client was last told to the new result (`None`:
    /// no difference).
    ///
    /// # Errors
    /// [`MatcherError::UnknownTarget`], [`MatcherError::NotAQuery`], and as
    /// [`Matcher::add_target`] for the rows.
    pub fn requeried(
        &mut self,
        id: TargetId,
        rows: Vec<Document>,
        horizon: Option<Arc<dyn Horizon>>,
    ) -> Result<Option<TargetDelta>, MatcherError> {
        let partition = self.owner_mut(id);
        let entry = partition
            .targets
            .get_mut(&id)
            .ok_or(MatcherError::UnknownTarget(id))?;
        let Target::Query(target) = &mut entry.target else {
            return Err(MatcherError::NotAQuery(id));
        };
        let mut events = Vec::new();
        let delta = target.requeried(rows, &mut events);
        partition.index.follow(id, events);
        let delta = delta?;
        entry.horizon = horizon;
        partition.stats.deltas += u64::from(delta.is_some());
        Ok(delta)
    }

    /// The targets a write may concern (index candidates, before core's matcher confirms
    /// them), sorted.
    pub fn candidates(&self, write: &Write) -> Vec<TargetId> {
        let mut out = Vec::new();
        for p in &self.partitions {
            match write {
                Write::Set(doc) => p.index.candidates(&doc.path, Some(&doc.fields), &mut out),
                Write::Delete(path) => p.index.candidates(path, None, &mut out),
                Write::Truncate => out.extend(p.targets.keys()),
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Apply one committed transaction (xid `xid`, its writes in commit order) to every
    /// target whose horizon does not see it: the deltas, sorted by target id.
    ///
    /// With more than one partition, the cells filter and the query partitions apply as
    /// tasks of rayon's pool (module `partition`); the call returns when all are done.
    pub fn apply(&mut self, xid: u32, writes: &[Write]) -> Vec<(TargetId, TargetDelta)> {
        let w = self.config.writes();
        let batch = Batch::coalesce(writes, w);
        self.stats.transactions += 1;
        self.stats.writes += u64::try_from(batch.writes.len()).unwrap_or(u64::MAX);
        if let [only] = self.partitions.as_mut_slice() {
            if w == 1 {
                let found = if batch.truncated {
                    Vec::new()
                } else {
                    vec![only.filter(0, &batch)]
                };
                return only.apply(xid, &batch, found);
            }
        }
        use rayon::prelude::*;
        let batch = &batch;
        let mut out: Vec<(TargetId, TargetDelta)> = self
            .partitions
            .par_iter_mut()
            .flat_map_iter(|p| {
                let found: Vec<Found> = if batch.truncated {
                    Vec::new()
                } else {
                    let shared: &Partition = p;
                    (0..w)
                        .into_par_iter()
                        .map(|cell| shared.filter(cell, batch))
                        .collect()
                };
                p.apply(xid, batch, found)
            })
            .collect();
        out.sort_unstable_by_key(|(id, _)| *id);
        out
    }

    /// Apply one committed transaction to one target only (a retained transaction handed off
    /// to a new or requeried target), unless its horizon sees it.
    pub fn apply_to(&mut self, id: TargetId, xid: u32, writes: &[Write]) -> Option<TargetDelta> {
        let batch = Batch::coalesce(writes, 1);
        let writes: Vec<&Pending> = batch.writes.iter().collect();
        self.owner_mut(id)
            .apply_one(id, xid, batch.truncated, &writes, &mut None)
    }
}
