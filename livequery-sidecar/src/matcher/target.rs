//! One live target: a query (collection or group, every filter, order, cursors, offset and
//! limit, `limit last`, projections, aggregations) or a single document, with the results
//! it keeps and the deltas it reports per transaction.
//!
//! Semantics are docstore-core's: membership is `query::Matcher::matches`, order is its
//! `compare` (the normalised order ending in `__name__`), projections `query::project`,
//! aggregates `query::aggregate`. Nothing here decides a result by itself.
//!
//! What a query target keeps. Results are held in *scan order* — the query's order, reversed
//! for `limit last` — so the visible window is always `kept[offset .. offset + limit]`
//! (reversed back for `limit last`, as core's evaluator does). Without a limit the target
//! keeps every result. With one it keeps at most `offset + limit + slack` (InvaliDB): the
//! kept rows are then a prefix of the results in scan order, all results up to `bound`
//! (`bound` is `None` when the kept rows are every result). A write that enters at or
//! before `bound` is kept; one after it is beyond what the target knows and changes nothing
//! it shows. When removals leave fewer than `offset + limit` kept rows below a `bound`, the
//! window is no longer known: the target reports [`TargetDelta::NeedsRequery`], doubles its
//! slack (up to the configured maximum) and waits for fresh rows.
//!
//! Aggregation targets without offset and limit (`select count(*), sum(f), avg(f) from ...
//! where ...`, cursors and `count_up_to` included) are maintained incrementally: the target
//! keeps core's `query::RunningAggregates`, the contribution of each matching document by
//! name (its numbers at the summed fields, nothing for counts) and an accumulator; a write
//! removes the document's previous contribution and adds its new one, O(1) per write and
//! no documents kept. Core's sums are exact and order-independent, so the running row
//! equals `aggregate` over the same documents bit for bit (the accumulator *is* what
//! `aggregate` runs). With an offset or a limit the aggregated window depends on the
//! order, so those targets keep their documents like a sorted query (offset + limit +
//! slack of them with a limit, every result with only an offset) and recompute the row
//! with core's `aggregate` over them on each change.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use docstore_core::path::ResourcePath;
use docstore_core::query::{
    aggregate, project, Limit, Matcher as CoreMatcher, Query, RunningAggregates, Selection,
    MAX_LIMIT,
};
use docstore_core::value::Map;

use super::delta::{self, diff, DocChange, Document, TargetDelta, TargetResult, Tracked};
use super::{MatcherConfig, MatcherError};

/// A write of one transaction after coalescing (the last version of each document).
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub path: ResourcePath,
    /// `None`: the document is deleted.
    pub new: Option<Document>,
}

/// A change in which documents a target holds (the index's reverse map follows it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Membership {
    Hold(ResourcePath),
    Release(ResourcePath),
}

/// A target of either kind.
#[derive(Debug)]
pub(crate) enum Target {
    Query(QueryTarget),
    Document(DocumentTarget),
}

impl Target {
    /// Take in one transaction's writes that may concern this target (the rest of the
    /// transaction cannot change its result). `truncated`: every document was deleted
    /// before these writes. `shared`: the outcome of the target before this one in a query
    /// partition's pass, taken instead of matching when it applies here (see [`Shared`]).
    pub fn apply_shared(
        &mut self,
        truncated: bool,
        writes: &[&Pending],
        events: &mut Vec<Membership>,
        shared: &mut Option<Shared>,
    ) -> (Option<TargetDelta>, bool) {
        match self {
            Target::Query(t) => t.apply_shared(truncated, writes, events, shared),
            Target::Document(t) => (t.apply(truncated, writes), false),
        }
    }

    /// The visible result.
    pub fn result(&self) -> TargetResult {
        match self {
            Target::Query(t) => t.result(),
            Target::Document(t) => TargetResult::Documents(t.doc.iter().cloned().collect()),
        }
    }

    /// How many documents [`Self::result`] holds (`None` for an aggregation).
    pub fn result_size(&self) -> Option<usize> {
        match self {
            Target::Query(t) => t.result_size(),
            Target::Document(t) => Some(usize::from(t.doc.is_some())),
        }
    }
}

/// A single-document target: the document, when it exists.
#[derive(Debug)]
pub(crate) struct DocumentTarget {
    pub path: ResourcePath,
    doc: Option<Document>,
}

impl DocumentTarget {
    /// A target on `path`, whose current version is `doc`.
    ///
    /// # Errors
    /// [`MatcherError::RowOutsideTarget`] when `doc` is another document.
    pub fn new(path: ResourcePath, doc: Option<Document>) -> Result<Self, MatcherError> {
        if let Some(d) = &doc {
            if d.path != path {
                return Err(MatcherError::RowOutsideTarget {
                    path: d.path.to_string(),
                });
            }
        }
        Ok(DocumentTarget { path, doc })
    }

    fn apply(&mut self, truncated: bool, writes: &[&Pending]) -> Option<TargetDelta> {
        let mut new = if truncated { None } else { self.doc.clone() };
        for w in writes.iter().filter(|w| w.path == self.path) {
            new.clone_from(&w.new);
        }
        let change = match (self.doc.take(), &new) {
            (None, None) => None,
            (None, Some(doc)) => Some(DocChange::Added {
                doc: doc.clone(),
                new_index: 0,
            }),
            (Some(old), None) => Some(DocChange::Removed {
                path: old.path,
                old_index: 0,
            }),
            (Some(old), Some(doc)) => (!old.same_version(doc)).then(|| DocChange::Modified {
                doc: doc.clone(),
                old_index: 0,
                new_index: 0,
            }),
        };
        self.doc = new;
        change.map(|c| TargetDelta::Changes(vec![c]))
    }
}

impl DocumentTarget {
    /// The delta from the document's version in `before` (if written) to its current one.
    pub fn rewound(&self, before: &HashMap<ResourcePath, Option<Document>>) -> Option<TargetDelta> {
        let then = match before.get(&self.path) {
            Some(then) => then.clone(),
            None => return None,
        };
        let order = |a: &Document, b: &Document| a.path.cmp(&b.path);
        let changes = diff(
            &order,
            &then.into_iter().collect::<Vec<_>>(),
            &self.doc.iter().cloned().collect::<Vec<_>>(),
            &Document::clone,
        );
        (!changes.is_empty()).then_some(TargetDelta::Changes(changes))
    }
}

/// Whether the target is live or waits for fresh rows.
#[derive(Debug, Clone)]
enum State {
    Live,
    /// Waiting for [`QueryTarget::requeried`]; `client` is the visible result the client was
    /// last told (query order, unprojected).
    Requery {
        client: Vec<Document>,
    },
}

/// What a query target keeps and changes (everything but its query and the running
/// aggregates). Shared, copy on write: targets on equal queries whose windows are equal hold
/// one allocation, so a transaction is matched once for all of them (see [`Shared`]).
#[derive(Debug, Clone)]
struct Window {
    slack: usize,
    /// Kept results, in scan order.
    kept: Vec<Document>,
    /// The kept version of each kept document.
    held: HashMap<ResourcePath, Document>,
    /// The last result the kept rows are known to reach (`None`: they are every result).
    bound: Option<Document>,
    state: State,
    /// The aggregation row last reported (aggregation queries only).
    aggregate: Option<Map>,
}

impl Window {
    /// Whether `other` keeps the same versions in the same order, with the same bound, slack
    /// and row: a live target with either window reports the same to the same writes.
    fn same(&self, other: &Window) -> bool {
        let same_doc = |a: &Document, b: &Document| a.path == b.path && a.same_version(b);
        self.slack == other.slack
            && matches!((&self.state, &other.state), (State::Live, State::Live))
            && self.aggregate == other.aggregate
            && self.held.len() == other.held.len()
            && self.kept.len() == other.kept.len()
            && match (&self.bound, &other.bound) {
                (None, None) => true,
                (Some(a), Some(b)) => same_doc(a, b),
                _ => false,
            }
            && self
                .kept
                .iter()
                .zip(&other.kept)
                .all(|(a, b)| same_doc(a, b))
    }
}

/// One transaction's outcome for one target, kept while a query partition applies the
/// transaction: the next target on an equal query whose window is the same allocation, given
/// the same writes, takes the outcome instead of matching again (a fan-out of one query to
/// thousands of listeners is matched once). A target whose new window equals it (the first
/// transaction after targets were added one by one) adopts the allocation, so later
/// transactions find them shared.
#[derive(Debug)]
pub(crate) struct Shared {
    query: Arc<Query>,
    max_slack: usize,
    truncated: bool,
    /// The writes, by address in the transaction's batch.
    writes: Vec<usize>,
    /// The window the outcome started from, when other targets held it too.
    before: Option<Arc<Window>>,
    after: Arc<Window>,
    delta: Option<TargetDelta>,
    events: Vec<Membership>,
}

/// A query target (see the module documentation).
#[derive(Debug)]
pub(crate) struct QueryTarget {
    query: Arc<Query>,
    /// `limit last`: scan order is the query's order reversed.
    reversed: bool,
    offset: usize,
    limit: Option<usize>,
    max_slack: usize,
    w: Arc<Window>,
    /// An aggregation query without offset and limit: its running aggregates (`kept` and
    /// `held` stay empty).
    running: Option<Box<RunningAggregates>>,
}

/// Core's result order, reversed for `limit last` (the order results are kept in).
fn scan_compare(matcher: &CoreMatcher<'_>, reversed: bool, a: &Document, b: &Document) -> Ordering {
    let o = matcher.compare(a.entry(), b.entry());
    if reversed {
        o.reverse()
    } else {
        o
    }
}

fn to_usize(n: u32) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// A document as a target on `query` reports it (its `select` list's fields).
fn present(query: &Query, doc: &Document) -> Document {
    match &query.selection {
        Selection::Fields(fields) => Document {
            path: doc.path.clone(),
            fields: Arc::new(project(&doc.path, &doc.fields, fields)),
            update_time: doc.update_time,
            create_time: doc.create_time,
        },
        Selection::Documents | Selection::Aggregations(_) => doc.clone(),
    }
}

impl QueryTarget {
    /// A target on a validated `query` whose initial rows are `rows` (the documents
    /// [`QueryTarget::fetch_query_for`] returned at the target's snapshot).
    ///
    /// # Errors
    /// [`MatcherError::RowOutsideTarget`] for a row the query does not match (the fetch and
    /// core disagree), [`MatcherError::DuplicateRow`] for a name given twice.
    pub fn new(
        query: Arc<Query>,
        rows: Vec<Document>,
        config: &MatcherConfig,
        events: &mut Vec<Membership>,
    ) -> Result<Self, MatcherError> {
        let incremental =
            query.aggregations().is_some() && query.limit.is_none() && query.offset == 0;
        let mut target = QueryTarget {
            running: incremental.then(|| Box::new(RunningAggregates::new(&query))),
            reversed: matches!(query.limit, Some(Limit::Last(_))),
            offset: to_usize(query.offset),
            limit: query.limit.map(|l| to_usize(l.count())),
            max_slack: to_usize(config.max_slack.max(config.initial_slack).max(1)),
            w: Arc::new(Window {
                slack: to_usize(config.initial_slack.max(1)),
                aggregate: None,
                kept: Vec::new(),
                held: HashMap::new(),
                bound: None,
                state: State::Live,
            }),
            query,
        };
        target.install(rows, events)?;
        if target.query.aggregations().is_some() {
            let row = target.aggregate_row();
            Arc::make_mut(&mut target.w).aggregate = Some(row);
        }
        Ok(target)
    }

    /// Whether the target waits for a requery.
    pub fn awaiting_requery(&self) -> bool {
        matches!(self.w.state, State::Requery { .. })
    }

    /// How many results the target keeps (`None`: all of them).
    fn capacity(&self) -> Option<usize> {
        self.limit.map(|limit| {
            self.offset
                .saturating_add(limit)
                .saturating_add(self.w.slack)
                .min(to_usize(MAX_LIMIT))
        })
    }

    /// The query whose rows a target on `query` starts from: whole documents, no offset, and
    /// a limit of `offset + limit + slack` of the same kind (none without a limit), in the
    /// query's order: a limited (or offset) sum/avg runs in its field's order (docs/query.md,
    /// section 3), which the fetch, a document query, keeps as explicit orders.
    pub fn fetch_query_for(query: &Query, slack: usize) -> Query {
        let mut fetch = query.clone();
        fetch.selection = Selection::Documents;
        fetch.offset = 0;
        fetch.limit = query.limit.map(|limit| {
            let n = u64::from(query.offset)
                .saturating_add(u64::from(limit.count()))
                .saturating_add(u64::try_from(slack).unwrap_or(u64::MAX))
                .min(u64::from(MAX_LIMIT));
            let n = u32::try_from(n).unwrap_or(MAX_LIMIT);
            match limit {
                Limit::First(_) => Limit::First(n),
                Limit::Last(_) => Limit::Last(n),
            }
        });
        let order = query.normalized_order();
        if fetch.normalized_order() != order {
            fetch.order_by = order;
        }
        fetch
    }

    /// The query to run for this target's rows now (its slack as grown by requeries).
    pub fn fetch_query(&self) -> Query {
        Self::fetch_query_for(&self.query, self.w.slack)
    }

    /// Replace the kept rows with `rows` (a fetch at a snapshot).
    fn install(
        &mut self,
        rows: Vec<Document>,
        events: &mut Vec<Membership>,
    ) -> Result<(), MatcherError> {
        let query = Arc::clone(&self.query);
        let matcher = CoreMatcher::new(&query);
        let mut held = HashMap::with_capacity(rows.len());
        for row in &rows {
            if !matcher.matches(&row.path, &row.fields) {
                return Err(MatcherError::RowOutsideTarget {
                    path: row.path.to_string(),
                });
            }
            if held.insert(row.path.clone(), row.clone()).is_some() {
                return Err(MatcherError::DuplicateRow {
                    path: row.path.to_string(),
                });
            }
        }
        self.release_all(events);
        if let Some(running) = &mut self.running {
            for row in &rows {
                running.insert(&row.path, &row.fields);
            }
            events.extend(rows.into_iter().map(|r| Membership::Hold(r.path)));
            return Ok(());
        }
        let fetched = rows.len();
        let mut rows = rows;
        let reversed = self.reversed;
        rows.sort_by(|a, b| scan_compare(&matcher, reversed, a, b));
        let capacity = self.capacity();
        let w = Arc::make_mut(&mut self.w);
        w.bound = None;
        if let Some(capacity) = capacity {
            // A fetch that returned as many rows as it asked for may have stopped early.
            if fetched >= capacity {
                for gone in rows.drain(capacity..) {
                    held.remove(&gone.path);
                }
                w.bound = rows.last().cloned();
            }
        }
        events.extend(rows.iter().map(|r| Membership::Hold(r.path.clone())));
        w.kept = rows;
        w.held = held;
        Ok(())
    }

    pub fn release_all(&mut self, events: &mut Vec<Membership>) {
        match Arc::get_mut(&mut self.w) {
            Some(w) => {
                events.extend(w.held.drain().map(|(path, _)| Membership::Release(path)));
                w.kept.clear();
            }
            // Shared with other targets: they keep theirs.
            None => {
                events.extend(self.w.held.keys().cloned().map(Membership::Release));
                let old = &self.w;
                self.w = Arc::new(Window {
                    slack: old.slack,
                    kept: Vec::new(),
                    held: HashMap::new(),
                    bound: old.bound.clone(),
                    state: old.state.clone(),
                    aggregate: old.aggregate.clone(),
                });
            }
        }
        if let Some(running) = &mut self.running {
            events.extend(running.drain().map(Membership::Release));
        }
    }

    /// The visible window in query order (unprojected).
    fn visible(&self) -> Vec<Document> {
        let (start, end) = self.window();
        let mut window = self.w.kept[start..end].to_vec();
        if self.reversed {
            window.reverse();
        }
        window
    }

    /// The visible window's bounds in `kept`.
    fn window(&self) -> (usize, usize) {
        let len = self.w.kept.len();
        let start = self.offset.min(len);
        let end = self
            .limit
            .map_or(len, |limit| start.saturating_add(limit).min(len));
        (start, end)
    }

    /// How many documents [`Self::result`] holds, without building it (`None` for an
    /// aggregation).
    pub fn result_size(&self) -> Option<usize> {
        if self.w.aggregate.is_some() {
            return None;
        }
        Some(match &self.w.state {
            State::Live => {
                let (start, end) = self.window();
                end - start
            }
            State::Requery { client } => client.len(),
        })
    }

    /// The visible result.
    pub fn result(&self) -> TargetResult {
        match &self.w.aggregate {
            Some(row) => TargetResult::Aggregate(row.clone()),
            None => {
                let visible = match &self.w.state {
                    State::Live => self.visible(),
                    State::Requery { client } => client.clone(),
                };
                TargetResult::Documents(visible.iter().map(|d| present(&self.query, d)).collect())
            }
        }
    }

    /// The aggregation row: the running aggregates', or core's `aggregate` over the kept
    /// rows (which applies offset and limit).
    fn aggregate_row(&self) -> Map {
        if let Some(running) = &self.running {
            return running.row();
        }
        let docs: Vec<(ResourcePath, Map)> = self
            .w
            .kept
            .iter()
            .map(|d| (d.path.clone(), (*d.fields).clone()))
            .collect();
        aggregate(&self.query, &docs)
    }

    /// [`QueryTarget::apply`], or the outcome `shared` holds when this target is on an equal
    /// query, holds the same window allocation and gets the same writes. Otherwise matched
    /// here, and `shared` becomes this outcome (a target whose new window equals the one
    /// `shared` held takes that allocation). `true` with the delta when it was taken.
    pub fn apply_shared(
        &mut self,
        truncated: bool,
        writes: &[&Pending],
        events: &mut Vec<Membership>,
        shared: &mut Option<Shared>,
    ) -> (Option<TargetDelta>, bool) {
        if self.running.is_some() {
            return (self.apply(truncated, writes, events), false);
        }
        let addresses: Vec<usize> = writes
            .iter()
            .map(|w| std::ptr::from_ref::<Pending>(*w) as usize)
            .collect();
        if let Some(s) = shared.as_ref() {
            if s.before.as_ref().is_some_and(|b| Arc::ptr_eq(b, &self.w))
                && s.truncated == truncated
                && s.writes == addresses
                && self.same_query(&s.query, s.max_slack)
            {
                self.w = Arc::clone(&s.after);
                events.extend(s.events.iter().cloned());
                return (s.delta.clone(), true);
            }
        }
        // Others hold this window: it is kept (and copied on write) for them to recognise.
        let before = (Arc::strong_count(&self.w) > 1).then(|| Arc::clone(&self.w));
        let mine = events.len();
        let delta = self.apply(truncated, writes, events);
        if let Some(s) = shared.as_ref() {
            if !Arc::ptr_eq(&s.after, &self.w)
                && self.same_query(&s.query, s.max_slack)
                && s.after.same(&self.w)
            {
                self.w = Arc::clone(&s.after);
            }
        }
        // A target matched on its own keeps the outcome of a group it is not in for the
        // targets after it (one that differs does not break up a fan-out's pass).
        if before.is_some() || shared.as_ref().is_none_or(|s| s.before.is_none()) {
            *shared = Some(Shared {
                query: Arc::clone(&self.query),
                max_slack: self.max_slack,
                truncated,
                writes: addresses,
                before,
                after: Arc::clone(&self.w),
                delta: delta.clone(),
                events: events[mine..].to_vec(),
            });
        }
        (delta, false)
    }

    /// Whether this target is on `query` (the same allocation or an equal query) with the
    /// same slack ceiling: its outcome is then a function of its window and writes alone.
    fn same_query(&self, query: &Arc<Query>, max_slack: usize) -> bool {
        self.max_slack == max_slack && (Arc::ptr_eq(&self.query, query) || *self.query == **query)
    }

    fn apply(
        &mut self,
        truncated: bool,
        writes: &[&Pending],
        events: &mut Vec<Membership>,
    ) -> Option<TargetDelta> {
        if self.awaiting_requery() {
            return None;
        }
        if self.running.is_some() {
            return self.apply_running(truncated, writes, events);
        }
        let whole = self.w.aggregate.is_none() && self.limit.is_none() && self.offset == 0;
        if whole && !truncated {
            return self.apply_whole(writes, events);
        }
        let old_visible = if self.w.aggregate.is_none() {
            self.visible()
        } else {
            Vec::new()
        };
        let query = Arc::clone(&self.query);
        let matcher = CoreMatcher::new(&query);
        let reversed = self.reversed;
        let scan = |a: &Document, b: &Document| scan_compare(&matcher, reversed, a, b);
        let mut changed = false;
        if truncated && !self.w.held.is_empty() {
            self.release_all(events);
            changed = true;
        }
        let capacity = self.capacity();
        let needed = self
            .limit
            .map_or(usize::MAX, |l| self.offset.saturating_add(l));
        let max_slack = self.max_slack;
        let w = Arc::make_mut(&mut self.w);
        if truncated {
            // Every document is gone: the results are exactly what this transaction writes.
            w.bound = None;
        }
        for write in writes {
            if let Some(old) = w.held.remove(&write.path) {
                if let Some(i) = delta::locate(&w.kept, &old, &scan) {
                    w.kept.remove(i);
                }
                events.push(Membership::Release(write.path.clone()));
                changed = true;
            }
            let Some(doc) = write
                .new
                .as_ref()
                .filter(|d| matcher.matches(&d.path, &d.fields))
            else {
                continue;
            };
            if w.bound.as_ref().is_some_and(|b| scan(doc, b).is_gt()) {
                continue;
            }
            let i = delta::insertion_point(&w.kept, doc, &scan);
            w.kept.insert(i, doc.clone());
            w.held.insert(doc.path.clone(), doc.clone());
            events.push(Membership::Hold(doc.path.clone()));
            changed = true;
        }
        if !changed {
            return None;
        }
        if let Some(capacity) = capacity {
            if w.kept.len() > capacity {
                for gone in w.kept.drain(capacity..) {
                    w.held.remove(&gone.path);
                    events.push(Membership::Release(gone.path));
                }
                w.bound = w.kept.last().cloned();
            }
        }
        if w.bound.is_some() && w.kept.len() < needed {
            self.release_all(events);
            let w = Arc::make_mut(&mut self.w);
            w.bound = None;
            w.slack = w.slack.saturating_mul(2).min(max_slack);
            w.state = State::Requery {
                client: old_visible,
            };
            return Some(TargetDelta::NeedsRequery);
        }
        self.report(&old_visible)
    }

    /// The delta from what the client was told (`old_visible`, or the last aggregation row)
    /// to the current result.
    fn report(&mut self, old_visible: &[Document]) -> Option<TargetDelta> {
        if let Some(last) = &self.w.aggregate {
            let row = self.aggregate_row();
            if *last == row {
                return None;
            }
            Arc::make_mut(&mut self.w).aggregate = Some(row.clone());
            return Some(TargetDelta::Aggregate(row));
        }
        let query = Arc::clone(&self.query);
        let matcher = CoreMatcher::new(&query);
        let order = |a: &Document, b: &Document| matcher.compare(a.entry(), b.entry());
        let shown = |d: &Document| present(&query, d);
        let changes = diff(&order, old_visible, &self.visible(), &shown);
        (!changes.is_empty()).then_some(TargetDelta::Changes(changes))
    }

    /// An incrementally maintained aggregation target: each write takes out the document's
    /// previous contribution and puts in its new one.
    fn apply_running(
        &mut self,
        truncated: bool,
        writes: &[&Pending],
        events: &mut Vec<Membership>,
    ) -> Option<TargetDelta> {
        let query = Arc::clone(&self.query);
        let matcher = CoreMatcher::new(&query);
        let running = self.running.as_mut()?;
        let mut changed = false;
        if truncated && !running.is_empty() {
            events.extend(running.drain().map(Membership::Release));
            changed = true;
        }
        for w in writes {
            let new = w
                .new
                .as_ref()
                .filter(|d| matcher.matches(&d.path, &d.fields));
            match new {
                Some(doc) => {
                    if running.insert(&w.path, &doc.fields) {
                        events.push(Membership::Hold(w.path.clone()));
                    }
                    changed = true;
                }
                None => {
                    if running.remove(&w.path) {
                        events.push(Membership::Release(w.path.clone()));
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            return None;
        }
        self.report(&[])
    }

    /// A target whose visible result is every result (no offset, no limit, documents): the
    /// changes are those of the written documents, tracked on the kept rows themselves.
    fn apply_whole(
        &mut self,
        writes: &[&Pending],
        events: &mut Vec<Membership>,
    ) -> Option<TargetDelta> {
        let query = Arc::clone(&self.query);
        let matcher = CoreMatcher::new(&query);
        let mut tracked = Tracked::default();
        let w = Arc::make_mut(&mut self.w);
        for write in writes {
            let new = write
                .new
                .as_ref()
                .filter(|d| matcher.matches(&d.path, &d.fields));
            match (w.held.remove(&write.path), new) {
                (None, None) => {}
                (Some(old), None) => {
                    events.push(Membership::Release(write.path.clone()));
                    tracked.removed.push(old);
                }
                (None, Some(doc)) => {
                    events.push(Membership::Hold(write.path.clone()));
                    w.held.insert(write.path.clone(), doc.clone());
                    tracked.added.push(doc.clone());
                }
                (Some(old), Some(doc)) => {
                    w.held.insert(write.path.clone(), doc.clone());
                    if !old.same_version(doc) {
                        tracked.modified.push((old, doc.clone()));
                    }
                }
            }
        }
        let order = |a: &Document, b: &Document| matcher.compare(a.entry(), b.entry());
        let mut changes = Vec::new();
        let shown = |d: &Document| present(&query, d);
        delta::track(&mut w.kept, tracked, &order, &shown, &mut changes);
        (!changes.is_empty()).then_some(TargetDelta::Changes(changes))
    }

    /// The delta from the result at an earlier position to the current one
    /// ([`super::Matcher::rewound`]). The earlier results are the kept rows nobody wrote
    /// since, and the earlier versions of the written documents that the query matches.
    /// The kept rows are every result up to `bound`, so every earlier result up to `bound`
    /// is among those; the earlier window is exact when at least `offset + limit` of them
    /// are at or before `bound` (or there is no bound).
    pub fn rewound(
        &self,
        before: &HashMap<ResourcePath, Option<Document>>,
    ) -> Result<Option<TargetDelta>, super::Rewind> {
        if self.w.aggregate.is_some() || self.running.is_some() || self.awaiting_requery() {
            return Err(super::Rewind::Inexact);
        }
        let query = Arc::clone(&self.query);
        let matcher = CoreMatcher::new(&query);
        let reversed = self.reversed;
        let scan = |a: &Document, b: &Document| scan_compare(&matcher, reversed, a, b);
        let mut then: Vec<Document> = self
            .w
            .kept
            .iter()
            .filter(|d| !before.contains_key(&d.path))
            .cloned()
            .collect();
        then.extend(
            before
                .values()
                .flatten()
                .filter(|d| matcher.matches(&d.path, &d.fields))
                .cloned(),
        );
        then.sort_by(|a, b| scan(a, b));
        if let Some(bound) = &self.w.bound {
            let known = then.iter().filter(|d| scan(d, bound).is_le()).count();
            let needed = self
                .limit
                .map_or(usize::MAX, |l| self.offset.saturating_add(l));
            if known < needed {
                return Err(super::Rewind::Inexact);
            }
            then.truncate(needed);
        }
        let start = self.offset.min(then.len());
        let end = self
            .limit
            .map_or(then.len(), |l| start.saturating_add(l).min(then.len()));
        let mut old_visible = then[start..end].to_vec();
        if self.reversed {
            old_visible.reverse();
        }
        let order = |a: &Document, b: &Document| matcher.compare(a.entry(), b.entry());
        let shown = |d: &Document| present(&query, d);
        let changes = diff(&order, &old_visible, &self.visible(), &shown);
        Ok((!changes.is_empty()).then_some(TargetDelta::Changes(changes)))
    }

    /// Take the rows of a requery (see [`TargetDelta::NeedsRequery`]): the delta from what
    /// the client was last told to the new result. A live target takes them too (a forced
    /// refresh).
    ///
    /// # Errors
    /// As [`QueryTarget::new`]; the target then still waits.
    pub fn requeried(
        &mut self,
        rows: Vec<Document>,
        events: &mut Vec<Membership>,
    ) -> Result<Option<TargetDelta>, MatcherError> {
        let client = match &self.w.state {
            State::Requery { client } => client.clone(),
            State::Live => self.visible(),
        };
        self.install(rows, events)?;
        Arc::make_mut(&mut self.w).state = State::Live;
        Ok(self.report(&client))
    }
}
