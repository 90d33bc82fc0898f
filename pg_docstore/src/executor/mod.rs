//! The query executor: plan with `docstore_core::plan`, stream each branch's index ranges
//! through SPI (`streams`), merge the branches in order, fetch the documents, apply offset,
//! limit and projection. A limit stops every scan early; nothing is sorted or filtered in
//! memory except the matcher re-check the plan asks for (values cut at 1,500 bytes).

mod auto_index;
mod fast;
mod streams;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use pgrx::spi::SpiClient;

use docstore_core::plan::{self, Branch, Catalog, Plan};
use docstore_core::query::{aggregate, matches, result, Query, Selection};
use docstore_core::value::Map;
use docstore_core::{ResourcePath, Value};

use crate::errors::DocstoreError;
use crate::pg::jsonb::{JsonbOut, TypedJsonb};
use crate::pg::spi::GenericPlans;
use crate::storage::entities::fetch_many;
use crate::storage::scan::ScanStats;
use streams::{BranchStream, Row};

/// One result row.
pub struct ResultRow {
    pub path: String,
    /// The stored document when returned whole, else the computed value.
    pub data: JsonbOut,
    /// Postgres microseconds; 0 for aggregation rows.
    pub update_time: i64,
    /// Postgres microseconds; 0 for aggregation rows.
    pub create_time: i64,
}

/// What a run read, for `explain(..., analyze => true)`.
#[derive(Debug, Default, Clone, Copy)]
pub struct RunStats {
    pub index_queries: u64,
    pub index_rows_read: u64,
    pub documents_fetched: u64,
    pub results: u64,
}

/// The READY indexes and exemptions of the query's collection group.
pub fn catalog(
    client: &SpiClient<'_>,
    database: &str,
    group: &str,
) -> Result<Catalog, DocstoreError> {
    let _owner = crate::pg::owner::AsOwner::new(client)?;
    let config = crate::storage::catalog::index_config_in(
        client,
        database,
        group,
        crate::storage::catalog::States::Usable,
    )?;
    Ok(Catalog {
        composites: config.composites,
        exemptions: config.exemptions,
    })
}

/// Plan a query against the current catalog.
pub fn plan_query(
    client: &SpiClient<'_>,
    database: &str,
    query: &Query,
) -> Result<Plan, DocstoreError> {
    let _generic = GenericPlans::new();
    let catalog = catalog(client, database, &query.source.collection_id)?;
    plan::plan(query, &catalog).map_err(DocstoreError::from)
}

/// [`plan_query`], and when no ready index answers the query and the database has
/// `auto_composite_indexes` on, create and build the index it needs, then plan again
/// ([`auto_index`]).
pub fn plan_or_create_index(
    client: &SpiClient<'_>,
    database: &str,
    query: &Query,
) -> Result<Plan, DocstoreError> {
    match plan_query(client, database, query) {
        Err(DocstoreError::Plan(missing @ plan::PlanError::MissingIndex { .. })) => {
            auto_index::create(client, database, missing)?;
            plan_query(client, database, query)
        }
        other => other,
    }
}

/// A parsed and planned query.
pub type Prepared = Rc<(Query, Plan)>;

thread_local! {
    /// Parsed and planned queries by (database, text), valid for one catalog generation.
    static PLANS: RefCell<HashMap<(String, String), (u64, Prepared)>> = RefCell::new(HashMap::new());
}

/// Parse (with `parse`) and plan `text`, or take both from the per-backend cache. Plans depend
/// only on the text and the index catalog, whose changes bump the catalog generation.
pub fn prepare(
    client: &SpiClient<'_>,
    database: &str,
    text: &str,
    parse: impl FnOnce(&str) -> Result<Query, DocstoreError>,
) -> Result<Prepared, DocstoreError> {
    crate::pg::catalog_cache::watch_catalog(client)?;
    let generation = crate::pg::catalog_cache::generation();
    let key = (database.to_owned(), text.to_owned());
    let hit = PLANS.with(|p| {
        p.borrow()
            .get(&key)
            .filter(|(g, _)| *g == generation)
            .map(|(_, q)| q.clone())
    });
    if let Some(hit) = hit {
        return Ok(hit);
    }
    let query = parse(text)?;
    let plan = plan_or_create_index(client, database, &query)?;
    let prepared: Prepared = Rc::new((query, plan));
    PLANS.with(|p| {
        let mut plans = p.borrow_mut();
        if plans.len() >= 512 {
            plans.clear();
        }
        plans.insert(key, (generation, prepared.clone()));
    });
    Ok(prepared)
}

/// Most rows one step of a [`Run`] fetches documents for (one `entities` lookup).
const FETCH_BATCH: usize = 256;

/// The fast path reads at most this many documents in one statement; a larger window goes
/// through the batched executor, whose memory does not grow with the result.
const FAST_WINDOW: u64 = 1_000;

/// A query being read: its state between batches, owned (no borrow of the SPI connection or
/// the plan), so `docstore.query` can return rows as they are read, one SPI connection per
/// batch. Every batch reads under the statement's snapshot (the functions are STABLE: SPI
/// reads with the snapshot of the calling statement), so a query read over many calls sees
/// one consistent state.
pub struct Run {
    prepared: Prepared,
    database: String,
    stats: RunStats,
    /// Rows ready to be returned, in order.
    ready: std::collections::VecDeque<ResultRow>,
    state: State,
}

enum State {
    /// `start` has not run yet.
    Start,
    /// Reading branches (documents or the documents an aggregation sees).
    Reading(Box<Reading>),
    Done,
}

/// The merge of the branches and what has been accepted so far.
struct Reading {
    privileged: bool,
    aggregations: bool,
    count_only: bool,
    needs_fields: bool,
    /// offset + limit, when there is a limit (never for aggregations).
    window: Option<u64>,
    branches: Vec<BranchStream>,
    heads: Vec<Option<Row>>,
    /// Names returned so far, when a name can come twice (several branches, or a branch with
    /// several key ranges); `None` otherwise, so a plain scan keeps nothing per row.
    seen: Option<HashSet<Vec<u8>>>,
    counted: u64,
    skip: u64,
    /// Rows past the plan and the re-check so far: skipped by the offset, or kept.
    accepted: u64,
    pending: Vec<(ResourcePath, Vec<u8>, bool)>,
    /// Rows kept whole until the end: an aggregation's documents, or output to reverse.
    held: Vec<(ResourcePath, Option<Map>, ResultRow)>,
    finished: bool,
}

impl Run {
    /// A run of a prepared query; nothing is read until [`Run::next_batch`].
    pub fn new(database: &str, prepared: Prepared) -> Self {
        Run {
            prepared,
            database: database.to_owned(),
            stats: RunStats::default(),
            ready: std::collections::VecDeque::new(),
            state: State::Start,
        }
    }

    /// What the run has read so far.
    pub fn stats(&self) -> RunStats {
        let mut stats = self.stats;
        if let State::Reading(r) = &self.state {
            for b in &r.branches {
                let s: ScanStats = b.stats();
                stats.index_queries += s.queries;
                stats.index_rows_read += s.rows;
            }
        }
        stats
    }

    /// The next rows (at least one), or `None` at the end. Each call reads at most a batch of
    /// index entries and documents per branch beyond what it returns.
    pub fn next_batch(
        &mut self,
        client: &SpiClient<'_>,
    ) -> Result<Option<Vec<ResultRow>>, DocstoreError> {
        let _generic = GenericPlans::new();
        loop {
            if !self.ready.is_empty() {
                let rows: Vec<ResultRow> = self.ready.drain(..).collect();
                self.stats.results += u64::try_from(rows.len()).unwrap_or(0);
                return Ok(Some(rows));
            }
            match &mut self.state {
                State::Done => return Ok(None),
                State::Start => self.start(client)?,
                State::Reading(_) => self.step(client)?,
            }
        }
    }

    fn start(&mut self, client: &SpiClient<'_>) -> Result<(), DocstoreError> {
        let prepared = self.prepared.clone();
        let (query, plan) = (&prepared.0, &prepared.1);
        let database = self.database.as_str();
        // The fast paths read index entries and documents in one statement (or only the
        // entries), which would bypass the caller's rights on entities: only for callers that
        // have them.
        let privileged = crate::pg::owner::caller_is_privileged(client)?;
        let small = query
            .limit
            .is_some_and(|l| u64::from(query.offset) + u64::from(l.count()) <= FAST_WINDOW);
        if privileged && small {
            if let Some(rows) = fast::documents(client, database, query, plan)? {
                self.stats.documents_fetched = u64::try_from(rows.len()).unwrap_or(0);
                self.stats.index_queries = 1;
                self.ready.extend(rows);
                self.state = State::Done;
                return Ok(());
            }
        }
        let aggregations = query.aggregations().is_some();
        let count_only = result::is_count_only(query);
        // Aggregations see every matching document; `aggregate` applies offset and limit
        // itself. A count-only query without a re-check never fetches documents.
        let window = if aggregations {
            None
        } else {
            query
                .limit
                .map(|l| u64::from(query.offset) + u64::from(l.count()))
        };
        let fast_count = if count_only && privileged {
            fast::count(client, database, query, plan)?
        } else {
            None
        };
        let mut branches = Vec::with_capacity(plan.branches.len());
        let batch = window.map_or(64, |w| i64::try_from(w.clamp(1, 64)).unwrap_or(64) + 1);
        if fast_count.is_none() {
            for (i, branch) in plan.branches.iter().enumerate() {
                branches.push(match branch {
                    Branch::Scans(scans) => BranchStream::scans(plan, i, scans, database, batch),
                    Branch::Collection(c) => BranchStream::listing(plan, c, database, batch)?,
                });
            }
        }
        let mut heads: Vec<Option<Row>> = Vec::with_capacity(branches.len());
        for b in &mut branches {
            heads.push(b.next(plan, client)?);
        }
        let repeats = branches.len() > 1 || branches.iter().any(BranchStream::may_repeat);
        self.state = State::Reading(Box::new(Reading {
            privileged,
            aggregations,
            count_only,
            // Documents returned whole are passed through as stored, and counts need no
            // fields; projections and the other aggregations do.
            needs_fields: !count_only && !matches!(query.selection, Selection::Documents),
            window,
            branches,
            heads,
            seen: repeats.then(HashSet::new),
            counted: fast_count.unwrap_or(0),
            skip: u64::from(query.offset),
            accepted: 0,
            pending: Vec::new(),
            held: Vec::new(),
            // An empty window (`limit 0`, no offset) wants no row: stop before taking the
            // first, which the check after each flush would otherwise let through.
            finished: window == Some(0),
        }));
        Ok(())
    }

    /// Merge rows until a fetch of documents ran (or the branches ended); the rows it accepts
    /// go to `ready` (or are held, for aggregations and reversed output).
    fn step(&mut self, client: &SpiClient<'_>) -> Result<(), DocstoreError> {
        let prepared = self.prepared.clone();
        let (query, plan) = (&prepared.0, &prepared.1);
        let State::Reading(r) = &mut self.state else {
            return Ok(());
        };
        let mut fetched_once = false;
        while !fetched_once && !r.finished {
            // Next row of the merge (smallest head in the plan's order).
            let best = r
                .heads
                .iter()
                .enumerate()
                .filter_map(|(i, h)| h.as_ref().map(|row| (i, row)))
                .min_by(|(_, a), (_, b)| plan.compare(&a.key, &b.key))
                .map(|(i, _)| i);
            let row = match best {
                Some(i) => {
                    let row = r.heads[i].take();
                    r.heads[i] = r.branches[i].next(plan, client)?;
                    row
                }
                None => None,
            };
            if let Some(row) = row {
                let Some(path) = row.key.name().cloned() else {
                    return Err(DocstoreError::Internal(
                        "index row without a document name".into(),
                    ));
                };
                let name = docstore_core::encoding::encode_name(&path);
                if let Some(seen) = &mut r.seen {
                    if !seen.insert(name.clone()) {
                        continue;
                    }
                }
                let recheck = plan.recheck || row.recheck;
                // Counting from the index alone is only for callers who may read the
                // documents anyway; everyone else's rows are fetched, so their rights (and
                // RLS) apply.
                if r.count_only && !recheck && r.privileged {
                    r.counted += 1;
                    continue;
                }
                r.pending.push((path, name, recheck));
            } else {
                r.finished = true;
            }
            let wanted = r.window.map(|w| w.saturating_sub(r.accepted));
            let pending_len = u64::try_from(r.pending.len()).unwrap_or(u64::MAX);
            let flush = r.finished
                || r.pending.len() >= FETCH_BATCH
                || wanted.is_some_and(|w| pending_len >= w);
            if flush && !r.pending.is_empty() {
                fetched_once = true;
                let names: Vec<Vec<u8>> = r.pending.iter().map(|(_, n, _)| n.clone()).collect();
                let mut fetched = fetch_many(client, &self.database, names)?;
                self.stats.documents_fetched += u64::try_from(fetched.len()).unwrap_or(0);
                for (path, name, recheck) in std::mem::take(&mut r.pending) {
                    // Each name is pending once, so its document can be moved out.
                    let Some(f) = fetched.remove(&name) else {
                        continue;
                    };
                    let fields = if recheck || r.needs_fields {
                        match f.data.text().value()? {
                            Value::Map(m) => Some(m),
                            _ => continue,
                        }
                    } else {
                        None
                    };
                    if recheck && !fields.as_ref().is_some_and(|m| matches(query, &path, m)) {
                        continue;
                    }
                    if r.count_only {
                        r.counted += 1;
                        continue;
                    }
                    r.accepted += 1;
                    if !r.aggregations && r.skip > 0 {
                        r.skip -= 1;
                        continue;
                    }
                    let row = ResultRow {
                        path: f.path,
                        data: JsonbOut::Stored(f.data),
                        update_time: f.update_time,
                        create_time: f.create_time,
                    };
                    if r.aggregations || plan.reverse_output {
                        r.held.push((path, fields, row));
                    } else {
                        self.ready.push_back(projected(query, path, fields, row));
                    }
                }
                if r.window.is_some_and(|w| r.accepted >= w) {
                    r.finished = true;
                }
            }
        }
        if !r.finished {
            return Ok(());
        }
        // The end: fold the branches' counters in, then the held rows.
        for b in &r.branches {
            let s: ScanStats = b.stats();
            self.stats.index_queries += s.queries;
            self.stats.index_rows_read += s.rows;
        }
        let held = std::mem::take(&mut r.held);
        let (aggregations, count_only, counted) = (r.aggregations, r.count_only, r.counted);
        self.state = State::Done;
        if aggregations {
            let result = if count_only {
                // The window of `aggregate`, without the documents.
                result::count_aggregates(query, counted)
            } else {
                let all: Vec<(ResourcePath, Map)> = held
                    .into_iter()
                    .filter_map(|(p, m, _)| m.map(|m| (p, m)))
                    .collect();
                aggregate(query, &all)
            };
            self.ready.push_back(ResultRow {
                path: result::AGGREGATION_PATH.to_owned(),
                data: JsonbOut::Text(TypedJsonb::from_value(&Value::Map(result))),
                update_time: 0,
                create_time: 0,
            });
        } else {
            // Reversed output (the plan scans opposite to the requested order, under a limit).
            for (path, fields, row) in held.into_iter().rev() {
                self.ready.push_back(projected(query, path, fields, row));
            }
        }
        Ok(())
    }
}

/// Whole documents keep their stored form; a select list is projected.
fn projected(
    query: &Query,
    path: ResourcePath,
    fields: Option<Map>,
    mut row: ResultRow,
) -> ResultRow {
    if let Some(projected) = fields.and_then(|doc| result::projected(query, &path, &doc)) {
        row.data = JsonbOut::Text(TypedJsonb::from_value(&Value::Map(projected)));
    }
    row
}

/// Run a planned query to the end: how many rows it returns and what it read (for
/// `explain(..., run => true)`). The rows are counted, not kept.
pub fn run(
    client: &SpiClient<'_>,
    database: &str,
    prepared: Prepared,
) -> Result<RunStats, DocstoreError> {
    let mut run = Run::new(database, prepared);
    while run.next_batch(client)?.is_some() {}
    Ok(run.stats())
}
