//! What a target reports: result documents, Firestore's document changes, and the diff of
//! two results.
//!
//! The indexes of a [`DocChange`] follow Firestore's `DocumentChange` (the JS SDK's
//! `changesFromSnapshot`): the changes of one event are listed removed first (in the old
//! order), then added, then modified (both in the new order), and each index is a position in
//! the client's list *as the changes before it have left it*. A client that applies them in
//! order — `Removed`: remove at `old_index`; `Added`: insert at `new_index`; `Modified`:
//! remove at `old_index`, then insert at `new_index` — ends with the new result. A document
//! appears at most once per event.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use docstore_core::path::ResourcePath;
use docstore_core::value::{Map, Timestamp};

/// A document as the matcher holds and reports it: name, fields, create and update time.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The document's name.
    pub path: ResourcePath,
    /// Its fields (for a projection target's reports, the selected ones). Shared: one
    /// decoded version serves every target that holds it.
    pub fields: Arc<Map>,
    /// The commit time of this version (`docstore.entities.update_time`).
    pub update_time: Timestamp,
    /// The commit time of the document's creation (`docstore.entities.create_time`).
    pub create_time: Timestamp,
}

impl Document {
    /// A document from its parts.
    pub fn new(
        path: ResourcePath,
        fields: Map,
        create_time: Timestamp,
        update_time: Timestamp,
    ) -> Document {
        Document {
            path,
            fields: Arc::new(fields),
            update_time,
            create_time,
        }
    }

    /// Whether `other` is the same version (same fields and update time): no change to report.
    pub fn same_version(&self, other: &Document) -> bool {
        self.update_time == other.update_time
            && (Arc::ptr_eq(&self.fields, &other.fields) || self.fields == other.fields)
    }

    /// The `(path, fields)` pair core's matcher and comparator take.
    pub fn entry(&self) -> (&ResourcePath, &Map) {
        (&self.path, &self.fields)
    }
}

/// One change of a target's visible result (Firestore's `DocumentChange`; see the module
/// documentation for the meaning of the indexes).
#[derive(Debug, Clone, PartialEq)]
pub enum DocChange {
    /// The document entered the result at `new_index`.
    Added { doc: Document, new_index: usize },
    /// The document changed; it was at `old_index` and is now at `new_index`.
    Modified {
        doc: Document,
        old_index: usize,
        new_index: usize,
    },
    /// The document left the result; it was at `old_index`.
    Removed {
        path: ResourcePath,
        old_index: usize,
    },
}

impl DocChange {
    /// The document's name.
    pub fn path(&self) -> &ResourcePath {
        match self {
            DocChange::Added { doc, .. } | DocChange::Modified { doc, .. } => &doc.path,
            DocChange::Removed { path, .. } => path,
        }
    }
}

/// What one committed transaction (or a requery) did to one target.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetDelta {
    /// The visible result changed (never empty).
    Changes(Vec<DocChange>),
    /// The aggregation row changed: its new data, alias -> value.
    Aggregate(Map),
    /// The results the target keeps no longer determine its visible window (a sorted query
    /// with limit/offset whose slack ran out). The transaction is *not* reflected: re-run
    /// [`super::Matcher::fetch_query`] at a new snapshot and hand the rows to
    /// [`super::Matcher::requeried`], which reports the difference from what the client was
    /// last told. Until then the target ignores transactions.
    NeedsRequery,
}

/// A target's full result: the documents in order (projected), or the aggregation row.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetResult {
    /// The documents of a query (projected to its `select` list) or the single document.
    Documents(Vec<Document>),
    /// The aggregation row of an aggregation query: alias -> value.
    Aggregate(Map),
}

/// The changes that take a client from `old` to `new`, both sorted by `order` (a total
/// order: core's result order, which ends in the document name). Documents in both lists
/// are reported as modified when their version differs; `present` shapes the reported
/// documents (the projection of a `select` list).
pub fn diff(
    order: &dyn Fn(&Document, &Document) -> Ordering,
    old: &[Document],
    new: &[Document],
    present: &dyn Fn(&Document) -> Document,
) -> Vec<DocChange> {
    let old_at: HashMap<&ResourcePath, &Document> = old.iter().map(|d| (&d.path, d)).collect();
    let new_at: HashMap<&ResourcePath, &Document> = new.iter().map(|d| (&d.path, d)).collect();
    let removed: Vec<Document> = old
        .iter()
        .filter(|d| !new_at.contains_key(&d.path))
        .cloned()
        .collect();
    let added: Vec<Document> = new
        .iter()
        .filter(|d| !old_at.contains_key(&d.path))
        .cloned()
        .collect();
    let modified: Vec<(Document, Document)> = new
        .iter()
        .filter_map(|d| {
            old_at
                .get(&d.path)
                .filter(|o| !o.same_version(d))
                .map(|o| ((*o).clone(), d.clone()))
        })
        .collect();
    let mut tracker = old.to_vec();
    let mut out = Vec::new();
    track(
        &mut tracker,
        Tracked {
            removed,
            added,
            modified,
        },
        order,
        present,
        &mut out,
    );
    out
}

/// The document-level changes of one event, before indexes are assigned.
#[derive(Debug, Default)]
pub(crate) struct Tracked {
    /// Old versions of documents that left.
    pub removed: Vec<Document>,
    /// Documents that entered.
    pub added: Vec<Document>,
    /// (old version, new version) of documents that changed and stayed.
    pub modified: Vec<(Document, Document)>,
}

/// Apply `changes` to `list` (sorted by `order`) in Firestore's sequence, recording each
/// with the index it had or takes at that moment. `list` ends sorted with the new versions.
pub(crate) fn track(
    list: &mut Vec<Document>,
    mut changes: Tracked,
    order: &dyn Fn(&Document, &Document) -> Ordering,
    present: &dyn Fn(&Document) -> Document,
    out: &mut Vec<DocChange>,
) {
    changes.removed.sort_by(|a, b| order(a, b));
    changes.added.sort_by(|a, b| order(a, b));
    changes.modified.sort_by(|a, b| order(&a.1, &b.1));
    for old in changes.removed {
        if let Some(old_index) = locate(list, &old, order) {
            list.remove(old_index);
            out.push(DocChange::Removed {
                path: old.path,
                old_index,
            });
        }
    }
    for doc in changes.added {
        let new_index = insertion_point(list, &doc, order);
        out.push(DocChange::Added {
            doc: present(&doc),
            new_index,
        });
        list.insert(new_index, doc);
    }
    for (old, doc) in changes.modified {
        let Some(old_index) = locate(list, &old, order) else {
            continue;
        };
        list.remove(old_index);
        let new_index = insertion_point(list, &doc, order);
        out.push(DocChange::Modified {
            doc: present(&doc),
            old_index,
            new_index,
        });
        list.insert(new_index, doc);
    }
}

/// Where `doc` (a version held in `list`) is: by binary search, else (a list out of order,
/// which would be a bug) by name.
pub(crate) fn locate(
    list: &[Document],
    doc: &Document,
    order: &dyn Fn(&Document, &Document) -> Ordering,
) -> Option<usize> {
    match list.binary_search_by(|x| order(x, doc)) {
        Ok(i) if list[i].path == doc.path => Some(i),
        _ => list.iter().position(|x| x.path == doc.path),
    }
}

/// Where `doc` goes in `list` (sorted by `order`).
pub(crate) fn insertion_point(
    list: &[Document],
    doc: &Document,
    order: &dyn Fn(&Document, &Document) -> Ordering,
) -> usize {
    match list.binary_search_by(|x| order(x, doc)) {
        Ok(i) | Err(i) => i,
    }
}
