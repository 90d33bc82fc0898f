//! The query executor: plan with `docstore_core::plan`, stream each branch's index ranges
//! through SPI (`streams`), merge the branches in order, fetch the documents, apply offset,
//! limit and projection. A limit stops every scan early; nothing is sorted or filtered in
//! memory except the matcher re-check the plan asks for (values cut at 1,500 bytes).

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
    let plan = plan_query(client, database, &query)?;
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

/// Run a planned query: its rows (documents, projections, or one aggregation row).
pub fn run(
    client: &SpiClient<'_>,
    database: &str,
    query: &Query,
    plan: &Plan,
) -> Result<(Vec<ResultRow>, RunStats), DocstoreError> {
    let _generic = GenericPlans::new();
    let mut stats = RunStats::default();
    // The fast paths read index entries and documents in one statement (or only the entries),
    // which would bypass the caller's rights on entities: only for callers that have them.
    let privileged = crate::pg::owner::caller_is_privileged(client)?;
    if let Some(rows) = privileged
        .then(|| fast::documents(client, database, query, plan))
        .transpose()?
        .flatten()
    {
        stats.results = u64::try_from(rows.len()).unwrap_or(0);
        stats.documents_fetched = stats.results;
        stats.index_queries = 1;
        return Ok((rows, stats));
    }
    let aggregations = query.aggregations().is_some();
    let count_only = result::is_count_only(query);
    // Aggregations see every matching document; `aggregate` applies offset and limit itself.
    // A count-only query without a re-check never fetches documents.
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
        for branch in &plan.branches {
            branches.push(match branch {
                Branch::Scans(scans) => BranchStream::scans(plan, scans, database, batch),
                Branch::Collection(c) => BranchStream::listing(plan, c, database, batch)?,
            });
        }
    }
    let mut heads: Vec<Option<Row>> = Vec::with_capacity(branches.len());
    for b in &mut branches {
        heads.push(b.next(client)?);
    }
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    // Documents returned whole are passed through as stored, and counts need no fields;
    // projections and the other aggregations do.
    let needs_fields = !count_only && !matches!(query.selection, Selection::Documents);
    let mut docs: Vec<(ResourcePath, Option<Map>, ResultRow)> = Vec::new();
    let mut counted: u64 = fast_count.unwrap_or(0);
    let mut skip = u64::from(query.offset);
    // Rows past the plan and the re-check so far: skipped by the offset, or kept.
    let mut accepted: u64 = 0;
    let mut pending: Vec<(ResourcePath, Vec<u8>, bool)> = Vec::new();
    // An empty window (`limit 0`, no offset) wants no row: stop before taking the first, which
    // the check after each flush would otherwise let through.
    let mut finished = window == Some(0);
    while !finished {
        // Next row of the merge (smallest head in the plan's order).
        let best = heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.as_ref().map(|r| (i, r)))
            .min_by(|(_, a), (_, b)| plan.compare(&a.key, &b.key))
            .map(|(i, _)| i);
        let row = match best {
            Some(i) => {
                let row = heads[i].take();
                heads[i] = branches[i].next(client)?;
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
            if !seen.insert(name.clone()) {
                continue;
            }
            let recheck = plan.recheck || row.recheck;
            // Counting from the index alone is only for callers who may read the documents
            // anyway; everyone else's rows are fetched, so their rights (and RLS) apply.
            if count_only && !recheck && privileged {
                counted += 1;
                continue;
            }
            pending.push((path, name, recheck));
        } else {
            finished = true;
        }
        let wanted = window.map(|w| w.saturating_sub(accepted));
        let pending_len = u64::try_from(pending.len()).unwrap_or(u64::MAX);
        let flush = finished || pending_len >= 256 || wanted.is_some_and(|w| pending_len >= w);
        if flush && !pending.is_empty() {
            let names: Vec<Vec<u8>> = pending.iter().map(|(_, n, _)| n.clone()).collect();
            let mut fetched = fetch_many(client, database, names)?;
            stats.documents_fetched += u64::try_from(fetched.len()).unwrap_or(0);
            for (path, name, recheck) in pending.drain(..) {
                // Each name is pending once (`seen`), so its document can be moved out.
                let Some(f) = fetched.remove(&name) else {
                    continue;
                };
                let fields = if recheck || needs_fields {
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
                if count_only {
                    counted += 1;
                    continue;
                }
                accepted += 1;
                if !aggregations && skip > 0 {
                    skip -= 1;
                    continue;
                }
                let row = ResultRow {
                    path: f.path,
                    data: JsonbOut::Stored(f.data),
                    update_time: f.update_time,
                };
                docs.push((path, fields, row));
            }
            if window.is_some_and(|w| accepted >= w) {
                finished = true;
            }
        }
    }
    for b in &branches {
        let s: ScanStats = b.stats();
        stats.index_queries += s.queries;
        stats.index_rows_read += s.rows;
    }
    if aggregations {
        let result = if count_only {
            // The window of `aggregate`, without the documents.
            result::count_aggregates(query, counted)
        } else {
            let all: Vec<(ResourcePath, Map)> = docs
                .into_iter()
                .filter_map(|(p, m, _)| m.map(|m| (p, m)))
                .collect();
            aggregate(query, &all)
        };
        stats.results = 1;
        let row = ResultRow {
            path: result::AGGREGATION_PATH.to_owned(),
            data: JsonbOut::Text(TypedJsonb::from_value(&Value::Map(result))),
            update_time: 0,
        };
        return Ok((vec![row], stats));
    }
    if plan.reverse_output {
        docs.reverse();
    }
    let rows: Vec<ResultRow> = docs
        .into_iter()
        .map(|(path, doc, mut row)| {
            // Whole documents keep their stored form; a select list is projected.
            if let Some(projected) = doc.and_then(|doc| result::projected(query, &path, &doc)) {
                row.data = JsonbOut::Text(TypedJsonb::from_value(&Value::Map(projected)));
            }
            row
        })
        .collect();
    stats.results = u64::try_from(rows.len()).unwrap_or(0);
    Ok((rows, stats))
}
