//! The query planner: which index key ranges answer a query, with no in-memory sort or filter.
//!
//! [`plan()`] turns a validated [`Query`] and the [`Catalog`] of usable indexes into a [`Plan`]:
//! a union of [`Branch`]es (one per disjunction of the filter's DNF, `in` and
//! `array_contains_any` values included), each either one range scan, a zig-zag merge join of
//! several scans that produce the same order, or a listing of the collection from
//! `docstore.entities`. The executor (the extension, or [`simulate`] in memory) runs the
//! ranges, joins and merges by [`OrderKey`], and applies cursors, offset and limit. The key
//! layout is `docs/storage.md`'s; the algorithm is Firestore's greedy index selection.
//!
//! Stages, each a module:
//! - `terms`: the filter in disjunctive normal form, lists expanded; per disjunction the
//!   equalities that pin a field, the `array_contains`, and the remaining range leaves.
//! - `select`: index selection per disjunction (greedy set cover) or [`PlanError::MissingIndex`].
//! - `ranges`: range leaves on the first scanned component become key ranges.
//! - `keys`: reading order positions out of keys ([`order_key`]) and building keys from
//!   positions ([`seek_key`], [`scan_bounds`]) for zig-zag seeks and cursors.
//! - [`explain()`]: the plan as JSON for `docstore.explain`.
//! - [`simulate`]: the reference executor over an in-memory key set, which the property tests
//!   compare with [`crate::query::evaluate()`].
//!
//! What the executor must do with a plan ([`simulate`] does exactly this):
//! 1. For each branch, produce `(OrderKey, document name)` in `plan.order`:
//!    - [`Branch::Collection`]: list the entities of the collection (`parent` fixed) or group
//!      (`collection_id` fixed) with names in [`collection_bounds`], ascending or backward;
//!      [`name_order_key`] gives each row's position.
//!    - [`Branch::Scans`] with one scan: read the keys in [`scan_bounds`] (ascending, or
//!      descending when `backward`), decode each with [`order_key`] and keep it unless
//!      [`key_matches`] says [`KeyCheck::Fail`]. With several scans, zig-zag: take a
//!      candidate position from one scan, seek every other scan to it ([`seek_key`]: forward
//!      scans continue at keys `>=` the boundary, backward scans at keys `<` it, within their
//!      bounds); a scan that lands later gives the new candidate; a position every scan
//!      reaches is a result; then seek past it (`exclusive`).
//! 2. Merge the branches by [`Plan::compare`], dropping repeated documents (a document has
//!    the same position in every branch, so repeats are adjacent).
//! 3. Fetch each document; when [`Plan::recheck`] is set or [`key_matches`] said
//!    [`KeyCheck::Recheck`], keep it only if [`crate::query::matches()`] holds (an indexed value
//!    was cut at 1,500 bytes, so the key could not decide).
//! 4. Skip `offset` rows, keep the limit's count, then reverse the rows when
//!    [`Plan::reverse_output`] (`limit last`: the plan already runs the reversed order with
//!    the cursors swapped).

mod explain;
mod keys;
mod ranges;
mod select;
pub mod simulate;
mod terms;
mod zigzag;

use std::cmp::Ordering;

use thiserror::Error;

use crate::encoding::{self, MAX_INDEXED_VALUE_BYTES};
use crate::error::ErrorKind;
use crate::index::{IndexDefinition, IndexField, Scope};
use crate::path::{FieldPath, ResourcePath};
use crate::query::{Filter, Limit, Order, Query};
use crate::value::Value;

pub use explain::explain;
pub use keys::{
    collection_bounds, key_matches, name_order_key, order_key, scan_bounds, seek_key, KeyCheck,
    KeyError,
};
pub use zigzag::{next_agreed, JoinRow, StepError};

/// The indexes a query may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    /// Composite (and collection-group single-field) indexes of the query's collection group
    /// that are READY. Indexes of other groups are ignored.
    pub composites: Vec<IndexDefinition>,
    /// Exempted fields of the query's collection group: no automatic index on them or on
    /// their subfields.
    pub exemptions: Vec<FieldPath>,
}

/// How to answer a query: the union of `branches`, in `order`.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Disjunctions; their results are merged in `order` and deduplicated by document name.
    /// Empty when the filter can match nothing (`a = 1 and a = 2`).
    pub branches: Vec<Branch>,
    /// The order rows come out of the branches: the query's normalised order (ending in
    /// `__name__`), reversed when `reverse_output`. Every [`OrderKey`] has one value per
    /// component (the last is the document name as a reference).
    pub order: Vec<Order>,
    /// The start cursor as a position in `order` (for `limit last`, the query's end cursor).
    pub start: Option<Bound>,
    /// The end cursor as a position in `order` (for `limit last`, the query's start cursor).
    pub end: Option<Bound>,
    /// `limit last`: the plan runs the reversed query; take offset and limit in `order`, then
    /// reverse the rows.
    pub reverse_output: bool,
    /// A value of the query (an equality, a range bound or a cursor value) is longer than the
    /// 1,500 indexed bytes, so the ranges are a superset: check every document with the
    /// matcher. Result order among values that share their first 1,500 bytes is the index's.
    pub recheck: bool,
}

/// A cursor bound: every result is at or after (`start`) / at or before (`end`) `position`,
/// strictly when not `inclusive`.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    /// Values for a prefix of [`Plan::order`].
    pub position: OrderKey,
    pub inclusive: bool,
}

/// One disjunction of the query.
#[derive(Debug, Clone, PartialEq)]
pub enum Branch {
    /// One scan (a range scan), or several producing the same order: their intersection by
    /// zig-zag merge join on [`OrderKey`].
    Scans(Vec<Scan>),
    /// No index needed (no equality, order by `__name__` only): list the collection or group
    /// from `docstore.entities` in name order.
    Collection(CollectionScan),
}

/// Which index a scan reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexRef {
    /// The automatic index of `field` in the queried collection: value entries (kind `0x01`),
    /// or array-contains entries (kind `0x02`) when `contains`.
    Auto { field: FieldPath, contains: bool },
    /// A composite index (kind `0x03`).
    Composite { id: u32 },
}

/// A half-open byte range `[start, end)` of keys (or of encoded names), in byte order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyRange {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
}

/// One component of the key bytes after a scan's prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuffixPart {
    /// An indexed value (order-preserving encoding, at most 1,500 bytes), inverted when
    /// `descending`. `field` may be `__name__` (a composite with an explicit `__name__` field
    /// stores the name as a reference value before the name itself).
    Value { field: FieldPath, descending: bool },
    /// The document name (a segment list, [`encoding::encode_name`]), inverted when
    /// `descending`. Always the last part.
    Name { descending: bool },
}

/// Where the value of one order component comes from, for one scan.
#[derive(Debug, Clone, PartialEq)]
pub enum Slot {
    /// Pinned by an equality of the branch: the same for every key. `descending` is the
    /// component's direction in [`Plan::order`].
    Fixed { value: OrderValue, descending: bool },
    /// Read from the key: index into [`Scan::suffix`].
    Part(usize),
}

/// A range leaf checked on a decoded key (multi-field inequalities, `__name__` filters when the
/// name is not the first scanned component): never on documents.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyFilter {
    /// Index of the tested component in [`Plan::order`] (and in an [`OrderKey`]).
    pub position: usize,
    /// A field or unary leaf (`<`, `<=`, `>`, `>=`, `!=`, `not in`, `is not null`,
    /// `is not nan`, or `=` on `__name__`).
    pub filter: Filter,
}

/// A scan of one index.
#[derive(Debug, Clone, PartialEq)]
pub struct Scan {
    pub index: IndexRef,
    /// Bytes every key of the scan starts with: kind, (index id), (parent), the encoded
    /// equality values (inverted for descending components).
    pub prefix: Vec<u8>,
    /// Key ranges (full keys, prefix included) on the first suffix part, disjoint and in
    /// ascending byte order (a backward scan visits them last to first). Empty: every key
    /// with the prefix. Use [`scan_bounds`], which also applies the cursors.
    pub ranges: Vec<KeyRange>,
    /// Read keys in descending byte order.
    pub backward: bool,
    /// How the bytes after `prefix` decode: the unpinned order components, then the name.
    pub suffix: Vec<SuffixPart>,
    /// One per component of [`Plan::order`]: pinned, or which suffix part holds it.
    pub slots: Vec<Slot>,
    /// Leaves to check on each decoded key ([`key_matches`]).
    pub key_filters: Vec<KeyFilter>,
    /// Collection-group query under a document, over a group-scoped index whose name is not
    /// the first scanned component: keep only names under this document.
    pub name_under: Option<ResourcePath>,
}

/// A listing of one collection or collection group from `docstore.entities`, in name order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionScan {
    pub parent: Option<ResourcePath>,
    pub collection_id: String,
    /// A collection group: every collection with `collection_id` (under `parent`, which
    /// `ranges` already enforces).
    pub all_descendants: bool,
    /// Read names descending.
    pub backward: bool,
    /// Ranges of encoded names ([`encoding::encode_name`]), ascending; empty: all. Use
    /// [`collection_bounds`], which also applies the cursors.
    pub ranges: Vec<KeyRange>,
}

/// One value of a position in the plan's order, as the index holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderValue {
    /// The ascending encoding, cut to 1,500 bytes for field values (never for the document
    /// name, which is the full encoding of a reference). Positions compare by these bytes.
    pub encoded: Vec<u8>,
    /// The value; `None` when it was read from a key that holds only its first 1,500 bytes.
    pub value: Option<Value>,
    /// `encoded` is cut (the value's full encoding is longer than 1,500 bytes).
    pub truncated: bool,
}

impl OrderValue {
    /// A field value as indexes store it.
    pub fn of(value: &Value) -> OrderValue {
        let mut encoded = encoding::encode(value);
        let truncated = encoded.len() > MAX_INDEXED_VALUE_BYTES;
        encoding::truncate(&mut encoded);
        OrderValue {
            encoded,
            value: Some(value.clone()),
            truncated,
        }
    }

    /// A document name (the `__name__` component).
    pub fn name(path: &ResourcePath) -> OrderValue {
        let value = Value::Reference(path.clone());
        OrderValue {
            encoded: encoding::encode(&value),
            value: Some(value),
            truncated: false,
        }
    }

    /// The `__name__` component of a cursor: the full encoding whatever the value.
    fn full(value: &Value) -> OrderValue {
        OrderValue {
            encoded: encoding::encode(value),
            value: Some(value.clone()),
            truncated: false,
        }
    }
}

/// A position in a plan's order: values for the order's components (all of them for a row,
/// a prefix for a cursor).
#[derive(Debug, Clone, PartialEq)]
pub struct OrderKey {
    pub values: Vec<OrderValue>,
}

impl OrderKey {
    /// The document name of a full position (its last value).
    pub fn name(&self) -> Option<&ResourcePath> {
        match self.values.last().and_then(|v| v.value.as_ref()) {
            Some(Value::Reference(path)) => Some(path),
            _ => None,
        }
    }
}

impl Plan {
    /// Compare two positions in [`Plan::order`], on the components both have (so a cursor
    /// prefix compares equal to every row it covers). Rows of different documents never
    /// compare equal.
    pub fn compare(&self, a: &OrderKey, b: &OrderKey) -> Ordering {
        for ((x, y), order) in a.values.iter().zip(&b.values).zip(&self.order) {
            let o = x.encoded.cmp(&y.encoded);
            let o = order.direction.apply(o);
            if o.is_ne() {
                return o;
            }
        }
        Ordering::Equal
    }

    /// The indexes the plan reads (for `explain`).
    pub fn indexes(&self) -> Vec<&IndexRef> {
        self.branches
            .iter()
            .flat_map(|b| match b {
                Branch::Scans(scans) => scans.iter().map(|s| &s.index).collect(),
                Branch::Collection(_) => Vec::new(),
            })
            .collect()
    }

    /// Turn the plan for the normalised order into the plan of the reversed query
    /// (`limit last`).
    fn reverse(&mut self) {
        for order in &mut self.order {
            order.direction = order.direction.reversed();
        }
        std::mem::swap(&mut self.start, &mut self.end);
        for branch in &mut self.branches {
            match branch {
                Branch::Scans(scans) => {
                    for scan in scans {
                        scan.backward = !scan.backward;
                        for slot in &mut scan.slots {
                            if let Slot::Fixed { descending, .. } = slot {
                                *descending = !*descending;
                            }
                        }
                    }
                }
                Branch::Collection(collection) => collection.backward = !collection.backward,
            }
        }
        self.reverse_output = !self.reverse_output;
    }
}

/// Why a query cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlanError {
    /// No set of ready indexes answers the query; `call` creates one that does.
    #[error("the query needs an index that does not exist: create it with {call}")]
    MissingIndex {
        collection_group: String,
        scope: Scope,
        fields: Vec<IndexField>,
        /// The exact SQL that creates the index.
        call: String,
    },
    /// A query no index layout can serve (the reason says which part).
    #[error("the query cannot be served by an index: {0}")]
    Unsupported(String),
}

impl PlanError {
    /// The kind of failure: a missing index is [`ErrorKind::FailedPrecondition`] (the
    /// message holds the `create_index` call), a query no index can serve
    /// [`ErrorKind::Unimplemented`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            PlanError::MissingIndex { .. } => ErrorKind::FailedPrecondition,
            PlanError::Unsupported(_) => ErrorKind::Unimplemented,
        }
    }
}

/// Plan a validated query (see the module docs).
///
/// # Errors
/// [`PlanError::MissingIndex`] when the indexes in `catalog` (and the automatic ones) cannot
/// answer a disjunction; [`PlanError::Unsupported`] for an order with fields after
/// `__name__`, or an `array_contains` on a field the query is also ordered by.
pub fn plan(query: &Query, catalog: &Catalog) -> Result<Plan, PlanError> {
    let order = query.normalized_order();
    match order.iter().position(|o| o.field.is_document_id()) {
        Some(i) if i + 1 == order.len() => {}
        _ => {
            return Err(PlanError::Unsupported(
                "ordering by fields after __name__ (__name__ must be the last order)".into(),
            ))
        }
    }
    let mut branches = Vec::new();
    let mut recheck = false;
    for term in terms::terms(query.filter.as_ref())? {
        if let Some(planned) = select::branch(query, catalog, &order, &term)? {
            branches.push(planned.branch);
            recheck |= planned.recheck;
        }
    }
    let bound = |cursor: &crate::query::Cursor| Bound {
        position: cursor_position(&order, &cursor.values),
        inclusive: cursor.inclusive,
    };
    let start = query.start.as_ref().map(bound);
    let end = query.end.as_ref().map(bound);
    recheck |= [&start, &end]
        .into_iter()
        .flatten()
        .any(|b| b.position.values.iter().any(|v| v.truncated));
    let mut plan = Plan {
        branches,
        order,
        start,
        end,
        reverse_output: false,
        recheck,
    };
    if matches!(query.limit, Some(Limit::Last(_))) {
        plan.reverse();
    }
    Ok(plan)
}

/// The position of a cursor's values (a prefix of `order`).
pub fn cursor_position(order: &[Order], values: &[Value]) -> OrderKey {
    OrderKey {
        values: values
            .iter()
            .zip(order)
            .map(|(value, component)| {
                if component.field.is_document_id() {
                    OrderValue::full(value)
                } else {
                    OrderValue::of(value)
                }
            })
            .collect(),
    }
}

/// The SQL that creates an index with `fields`, e.g.
/// `select docstore.create_index('restaurants', '[{"field": "city", "order": "asc"}]');`.
pub fn create_index_call(collection_group: &str, scope: Scope, fields: &[IndexField]) -> String {
    let json = match IndexDefinition::fields_json(fields) {
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(spaced_object).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    };
    let literal = |text: &str| format!("'{}'", text.replace('\'', "''"));
    match scope {
        Scope::Collection => format!(
            "select docstore.create_index({}, {});",
            literal(collection_group),
            literal(&json)
        ),
        Scope::CollectionGroup => format!(
            "select docstore.create_index({}, {}, scope => 'collection_group');",
            literal(collection_group),
            literal(&json)
        ),
    }
}

/// `{"field": "a", "order": "asc"}`: `field` first, `: ` and `, ` separators.
fn spaced_object(item: &serde_json::Value) -> String {
    let serde_json::Value::Object(members) = item else {
        return item.to_string();
    };
    let mut keys: Vec<&String> = members.keys().collect();
    keys.sort_by_key(|k| (k.as_str() != "field", k.as_str()));
    let pairs: Vec<String> = keys
        .into_iter()
        .filter_map(|k| {
            members
                .get(k)
                .map(|v| format!("{}: {v}", serde_json::Value::String(k.clone())))
        })
        .collect();
    format!("{{{}}}", pairs.join(", "))
}
