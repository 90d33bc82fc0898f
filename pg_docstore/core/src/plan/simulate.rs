//! A reference executor of plans over an in-memory key set: the semantics the extension's
//! executor must have, and the planner's oracle test (`tests/plan_props.rs` checks that it
//! returns exactly [`crate::query::evaluate()`]'s rows).
//!
//! It does what the module docs of [`super`] tell an executor to do, with the same calls:
//! ranges from [`scan_bounds`] / [`collection_bounds`], positions from [`order_key`] /
//! [`name_order_key`], key filters with [`key_matches`], zig-zag seeks with [`seek_key`],
//! the union merged by [`Plan::compare`]. It never sorts or filters documents, except the
//! matcher re-check that [`Plan::recheck`] and [`KeyCheck::Recheck`] call for; it fails when a
//! branch yields rows out of order, so a wrong plan cannot go unnoticed.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

use crate::encoding;
use crate::error::ErrorKind;
use crate::index::{document_entries, IndexConfig, IndexDefinition, IndexError};
use crate::path::{FieldPath, ResourcePath};
use crate::query::{matches, project, Query, Selection};
use crate::value::Map;

use super::{
    collection_bounds, key_matches, name_order_key, next_agreed, order_key, scan_bounds, Branch,
    CollectionScan, JoinRow, KeyCheck, KeyError, KeyRange, Plan, Scan, StepError,
};

/// Documents and their index entries, as `docstore.entities` and `docstore.index_entries`
/// hold them.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    /// By encoded name.
    docs: BTreeMap<Vec<u8>, (ResourcePath, Map)>,
    keys: BTreeSet<Vec<u8>>,
}

impl MemoryStore {
    /// Index `docs` as the extension does: each document gets the automatic entries (minus
    /// the exemptions of its collection group, given as `(group, field)`) and the entries of
    /// the composites of its group.
    ///
    /// # Errors
    /// [`IndexError::TooManyEntries`] for a document past 40,000 entries.
    pub fn new(
        docs: &[(ResourcePath, Map)],
        composites: &[IndexDefinition],
        exemptions: &[(String, FieldPath)],
    ) -> Result<MemoryStore, IndexError> {
        let mut store = MemoryStore::default();
        for (path, fields) in docs {
            let group = path
                .parent()
                .map(|p| p.last().to_owned())
                .unwrap_or_default();
            let config = IndexConfig {
                exemptions: exemptions
                    .iter()
                    .filter(|(g, _)| *g == group)
                    .map(|(_, f)| f.clone())
                    .collect(),
                composites: composites
                    .iter()
                    .filter(|c| c.collection_group == group)
                    .cloned()
                    .collect(),
            };
            store.keys.extend(document_entries(path, fields, &config)?);
            store
                .docs
                .insert(encoding::encode_name(path), (path.clone(), fields.clone()));
        }
        Ok(store)
    }

    /// Every index key, in key order.
    pub fn keys(&self) -> &BTreeSet<Vec<u8>> {
        &self.keys
    }
}

/// A plan the store cannot run, or a plan that misbehaved.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SimulateError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("branch {0} produced rows out of the plan's order")]
    Unordered(usize),
    #[error("an index entry points at a missing document")]
    MissingDocument,
    #[error("a seek landed before its target")]
    Seek,
}

impl SimulateError {
    /// The kind of failure: a plan that misbehaves is a bug, so every simulation error is
    /// [`ErrorKind::Internal`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Internal
    }
}

/// One row of a branch: its position, and whether the matcher must confirm it.
type Row = JoinRow;

/// Run `plan` (made for `query`) over `store`: the query's rows, projected as
/// [`crate::query::evaluate()`] returns them.
///
/// # Errors
/// [`SimulateError`] when a key does not decode in its scan's layout, a branch is out of
/// order, or an entry has no document.
pub fn simulate(
    plan: &Plan,
    query: &Query,
    store: &MemoryStore,
) -> Result<Vec<(ResourcePath, Map)>, SimulateError> {
    let mut streams = Vec::with_capacity(plan.branches.len());
    for (i, branch) in plan.branches.iter().enumerate() {
        let rows = match branch {
            Branch::Collection(collection) => list(plan, collection, store)?,
            Branch::Scans(scans) => join(plan, scans, store)?,
        };
        if rows
            .windows(2)
            .any(|w| plan.compare(&w[0].key, &w[1].key) != Ordering::Less)
        {
            return Err(SimulateError::Unordered(i));
        }
        streams.push(rows);
    }
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let mut skip = usize::try_from(query.offset).unwrap_or(usize::MAX);
    let limit = query
        .limit
        .map(|l| usize::try_from(l.count()).unwrap_or(usize::MAX));
    for row in merge(plan, streams) {
        if limit.is_some_and(|n| out.len() >= n) {
            break;
        }
        let Some(name) = row.key.name() else {
            return Err(SimulateError::MissingDocument);
        };
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some((path, doc)) = store.docs.get(&encoding::encode_name(name)) else {
            return Err(SimulateError::MissingDocument);
        };
        if (plan.recheck || row.recheck) && !matches(query, path, doc) {
            continue;
        }
        if skip > 0 {
            skip -= 1;
            continue;
        }
        out.push((path.clone(), doc.clone()));
    }
    if plan.reverse_output {
        out.reverse();
    }
    if let Selection::Fields(fields) = &query.selection {
        for (path, doc) in &mut out {
            *doc = project(path, doc, fields);
        }
    }
    Ok(out)
}

/// Merge sorted branches by the plan's order (repeated documents are dropped by the caller).
fn merge(plan: &Plan, streams: Vec<Vec<Row>>) -> Vec<Row> {
    let mut next = vec![0usize; streams.len()];
    let mut out = Vec::new();
    loop {
        let mut best: Option<(usize, &Row)> = None;
        for (i, stream) in streams.iter().enumerate() {
            let Some(row) = stream.get(next[i]) else {
                continue;
            };
            if best.is_none_or(|(_, current)| plan.compare(&row.key, &current.key).is_lt()) {
                best = Some((i, row));
            }
        }
        match best {
            Some((i, row)) => {
                out.push(row.clone());
                next[i] += 1;
            }
            None => return out,
        }
    }
}

/// The keys of `ranges`, in the scan's direction.
fn keys_in<'s>(
    store: &'s MemoryStore,
    ranges: &[KeyRange],
    backward: bool,
) -> Box<dyn Iterator<Item = &'s Vec<u8>> + 's> {
    let ranges = ranges.to_vec();
    let keys = &store.keys;
    if backward {
        Box::new(
            ranges
                .into_iter()
                .rev()
                .flat_map(move |r| keys.range(r.start..r.end).rev()),
        )
    } else {
        Box::new(
            ranges
                .into_iter()
                .flat_map(move |r| keys.range(r.start..r.end)),
        )
    }
}

/// A collection listing, from the entities (not the index).
fn list(
    plan: &Plan,
    collection: &CollectionScan,
    store: &MemoryStore,
) -> Result<Vec<Row>, SimulateError> {
    let in_listing = |path: &ResourcePath| {
        let Some(parent) = path.parent() else {
            return false;
        };
        if collection.all_descendants {
            // A kindless listing (empty collection id) takes every collection.
            collection.collection_id.is_empty() || parent.last() == collection.collection_id
        } else {
            let expected = match &collection.parent {
                Some(p) => p.child(&collection.collection_id).ok(),
                None => ResourcePath::from_segments(vec![collection.collection_id.clone()]).ok(),
            };
            expected.as_ref() == Some(&parent)
        }
    };
    let ranges = collection_bounds(plan, collection);
    let mut rows = Vec::new();
    let mut visit = |name: &Vec<u8>, path: &ResourcePath| -> Result<(), SimulateError> {
        if in_listing(path) {
            rows.push(Row {
                key: name_order_key(name)?,
                recheck: false,
            });
        }
        Ok(())
    };
    let ordered: Vec<_> = if collection.backward {
        ranges
            .iter()
            .rev()
            .flat_map(|r| store.docs.range(r.start.clone()..r.end.clone()).rev())
            .collect()
    } else {
        ranges
            .iter()
            .flat_map(|r| store.docs.range(r.start.clone()..r.end.clone()))
            .collect()
    };
    for (name, (path, _)) in ordered {
        visit(name, path)?;
    }
    Ok(rows)
}

/// The first key of `scan` within `ranges` at or after `boundary` (a [`seek_key`] result) in
/// the scan's direction that passes the key filters.
fn first_from(
    store: &MemoryStore,
    scan: &Scan,
    ranges: &[KeyRange],
    boundary: Option<&[u8]>,
) -> Result<Option<Row>, SimulateError> {
    let cut: Vec<KeyRange> = ranges
        .iter()
        .filter_map(|r| match boundary {
            None => Some(r.clone()),
            Some(b) if scan.backward => super::ranges::intersect_range(r, None, Some(b)),
            Some(b) => super::ranges::intersect_range(r, Some(b), None),
        })
        .collect();
    for key in keys_in(store, &cut, scan.backward) {
        let position = order_key(scan, key)?;
        match key_matches(scan, &position) {
            KeyCheck::Fail => {}
            check => {
                return Ok(Some(Row {
                    key: position,
                    recheck: check == KeyCheck::Recheck,
                }))
            }
        }
    }
    Ok(None)
}

/// One scan, or the zig-zag merge join of several ([`next_agreed`]).
fn join(plan: &Plan, scans: &[Scan], store: &MemoryStore) -> Result<Vec<Row>, SimulateError> {
    let bounds: Vec<Vec<KeyRange>> = scans.iter().map(|s| scan_bounds(plan, s)).collect();
    let mut rows = Vec::new();
    let mut resume: Option<Vec<u8>> = None;
    loop {
        let step = next_agreed(plan, scans, resume.as_deref(), |s, seek| {
            match (scans.get(s), bounds.get(s)) {
                (Some(scan), Some(ranges)) => first_from(store, scan, ranges, seek),
                _ => Ok(None),
            }
        });
        match step {
            Ok(Some((row, after))) => {
                rows.push(row);
                resume = Some(after);
            }
            Ok(None) => return Ok(rows),
            Err(StepError::Source(e)) => return Err(e),
            Err(StepError::Backwards) => return Err(SimulateError::Seek),
        }
    }
}
