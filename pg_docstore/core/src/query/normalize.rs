//! Canonicalisation and validation (Firestore's rules), and the normalised order.
//!
//! Both front ends end in [`Query::validate`], so a query means the same whichever way it was
//! written. Canonicalisation, as Firestore's SDKs do before sending a query:
//! - `= null` / `!= null` become `is null` / `is not null`, `= NaN` / `!= NaN` become
//!   `is nan` / `is not nan`;
//! - nested ANDs (ORs) are flattened into their parent AND (OR); a one-filter AND/OR is its
//!   filter;
//! - strings compared with `__name__` (filters and cursor positions) become references: a
//!   plain ID is a document of the queried collection, a string with `/` a full path;
//! - `__name__` is dropped from projections (names are always returned).

use std::collections::BTreeSet;

use crate::limits::MAX_DECODE_DEPTH;
use crate::path::{FieldPath, ResourcePath};
use crate::value::Value;

use super::ast::{
    AggregateFunction, Cursor, Direction, FieldOp, Filter, Limit, Order, Query, Selection, Source,
    UnaryOp, MAX_AGGREGATIONS, MAX_DISJUNCTIONS, MAX_LIMIT, MAX_NOT_IN_VALUES,
};
use super::error::QueryError;

impl Query {
    /// Canonicalise the query and check every Firestore rule (see the module docs). Both
    /// front ends call this; a query built by hand should be passed through it too.
    ///
    /// # Errors
    /// The first rule broken, as a [`QueryError`] variant naming it.
    pub fn validate(mut self) -> Result<Query, QueryError> {
        check_source(&self.source)?;
        if let Some(filter) = self.filter.take() {
            let filter = canonical_filter(filter, &self.source)?;
            check_filter(&filter)?;
            self.filter = Some(filter);
        }
        let mut seen = BTreeSet::new();
        for order in &self.order_by {
            if !seen.insert(&order.field) {
                return Err(QueryError::DuplicateOrder {
                    field: order.field.to_string(),
                });
            }
        }
        let order = self.normalized_order();
        for (clause, cursor) in [("start", &mut self.start), ("end", &mut self.end)] {
            if let Some(cursor) = cursor {
                canonical_cursor(cursor, clause, &order, &self.source)?;
            }
        }
        check_offset_and_limit(&self)?;
        if self.source.is_kindless() {
            check_kindless(&self)?;
        }
        match &mut self.selection {
            Selection::Documents => {}
            Selection::Fields(fields) => fields.retain(|f| !f.is_document_id()),
            Selection::Aggregations(aggregations) => check_aggregations(aggregations)?,
        }
        Ok(self)
    }

    /// The order the query runs in (Firestore's normalisation): the explicit orders, then
    /// every inequality field not already ordered (in field-path order), then, in a limited
    /// (or offset) aggregation query, the fields of its `sum`s and `avg`s not already ordered
    /// (in the order they are aggregated), then `__name__` (unless ordered explicitly); the
    /// added ones take the direction of the last explicit order (ascending if none).
    ///
    /// The aggregated fields are Firestore's: the index of the aggregated field serves a
    /// `sum`/`avg`, so a limited one aggregates the documents in that field's order (the
    /// smallest values first) and, as any order does, only those that hold the field.
    pub fn normalized_order(&self) -> Vec<Order> {
        let mut order = self.order_by.clone();
        let direction = order
            .last()
            .map_or(Direction::Ascending, |last| last.direction);
        let explicit: BTreeSet<&FieldPath> = self.order_by.iter().map(|o| &o.field).collect();
        let mut inequality_fields = BTreeSet::new();
        if let Some(filter) = &self.filter {
            for leaf in filter.leaves() {
                if let Some(field) = leaf.leaf_field() {
                    if leaf.is_inequality() && !field.is_document_id() && !explicit.contains(field)
                    {
                        inequality_fields.insert(field.clone());
                    }
                }
            }
        }
        order.extend(
            inequality_fields
                .into_iter()
                .map(|field| Order::new(field, direction)),
        );
        if !explicit.iter().any(|f| f.is_document_id()) {
            for field in self.windowed_aggregate_fields() {
                if !order.iter().any(|o| &o.field == field) {
                    order.push(Order::new(field.clone(), direction));
                }
            }
            order.push(Order::new(document_id(), direction));
        }
        order
    }

    /// The fields of the `sum`s and `avg`s of an aggregation query with a limit or an offset,
    /// in the order they are aggregated (see [`Query::normalized_order`]); none otherwise.
    fn windowed_aggregate_fields(&self) -> Vec<&FieldPath> {
        let Some(aggregations) = self.aggregations() else {
            return Vec::new();
        };
        if self.limit.is_none() && self.offset == 0 {
            return Vec::new();
        }
        aggregations
            .iter()
            .filter_map(|a| match &a.function {
                AggregateFunction::Sum(field) | AggregateFunction::Avg(field) => Some(field),
                AggregateFunction::Count { .. } => None,
            })
            .collect()
    }
}

/// The field path `__name__`.
pub(crate) fn document_id() -> FieldPath {
    FieldPath::single(crate::path::DOCUMENT_ID_FIELD)
}

fn check_source(source: &Source) -> Result<(), QueryError> {
    if source.collection_id.is_empty() {
        // A kindless query (every collection under the parent) needs all_descendants.
        let shown = source
            .parent
            .as_ref()
            .map_or_else(|| "/".to_owned(), ToString::to_string);
        if !source.all_descendants {
            return Err(QueryError::InvalidCollection {
                path: shown,
                reason: "an empty collection id (a query over every collection under the parent) needs all_descendants".into(),
            });
        }
        if let Some(parent) = &source.parent {
            if !parent.is_document() {
                return Err(QueryError::InvalidCollection {
                    path: shown,
                    reason: format!("the parent \"{parent}\" is a collection; a collection hangs from a document"),
                });
            }
        }
        return Ok(());
    }
    let shown = || match (&source.parent, source.all_descendants) {
        (Some(p), false) => format!("{p}/{}", source.collection_id),
        (None, false) => source.collection_id.clone(),
        (Some(p), true) => format!("{p}/group({})", source.collection_id),
        (None, true) => format!("group({})", source.collection_id),
    };
    let invalid = |reason: String| QueryError::InvalidCollection {
        path: shown(),
        reason,
    };
    if let Some(parent) = &source.parent {
        if !parent.is_document() {
            return Err(invalid(format!(
                "the parent \"{parent}\" is a collection; a collection hangs from a document"
            )));
        }
    }
    source
        .path_under_parent()
        .map_err(|e| invalid(e.to_string()))?;
    Ok(())
}

/// A kindless query (every collection, [`Source::kindless`]) is a listing of names: only
/// `<`, `<=`, `>`, `>=` on `__name__`, ordered by `__name__` only (Firestore's kindless
/// queries take key filters and key order only), no `sum`/`avg` with a limit or offset.
fn check_kindless(query: &Query) -> Result<(), QueryError> {
    let invalid = |reason: String| QueryError::InvalidCollection {
        path: query
            .source
            .parent
            .as_ref()
            .map_or_else(|| "/".to_owned(), ToString::to_string),
        reason: format!("a query over every collection (an empty collection id) {reason}"),
    };
    if let Some(filter) = &query.filter {
        for leaf in filter.leaves() {
            let on_name = matches!(
                leaf,
                Filter::Field { field, op: FieldOp::Lt | FieldOp::Le | FieldOp::Gt | FieldOp::Ge, .. }
                    if field.is_document_id()
            );
            if !on_name {
                return Err(invalid(format!(
                    "filters on __name__ with <, <=, > or >= only, not {}",
                    describe_leaf(leaf)
                )));
            }
        }
    }
    if let Some(order) = query
        .normalized_order()
        .iter()
        .find(|o| !o.field.is_document_id())
    {
        return Err(invalid(format!(
            "is ordered by __name__ only, not by {}",
            order.field
        )));
    }
    Ok(())
}

/// Firestore's smallest numeric document id (`__id<n>__` with `n` the least int64), which
/// sorts before every other id of its collection.
pub const MIN_NUMERIC_ID: &str = "__id-9223372036854775808__";

/// A `__name__` cursor position given as `{collection}/__id-9223372036854775808__` (Firestore's
/// smallest numeric id): the position before every document of `{collection}`, which is the
/// collection's own path (a name compares after each of its prefixes). `None` for every other
/// name.
fn collection_position(name: &str) -> Option<Result<ResourcePath, String>> {
    let collection = name
        .strip_prefix('/')
        .unwrap_or(name)
        .strip_suffix(MIN_NUMERIC_ID)?
        .strip_suffix('/')?;
    let segments: Vec<String> = collection.split('/').map(str::to_owned).collect();
    Some(match ResourcePath::from_segments(segments) {
        Ok(path) if !path.is_document() => Ok(path),
        Ok(_) => Err("it does not name a document".into()),
        Err(e) => Err(e.to_string()),
    })
}

fn is_nan(value: &Value) -> bool {
    matches!(value, Value::Double(d) if d.is_nan())
}

/// Canonical form of a filter (see the module docs).
fn canonical_filter(filter: Filter, source: &Source) -> Result<Filter, QueryError> {
    Ok(match filter {
        Filter::Field { field, op, value } => {
            let unary = match (op, &value) {
                (FieldOp::Eq, Value::Null) => Some(UnaryOp::IsNull),
                (FieldOp::Ne, Value::Null) => Some(UnaryOp::IsNotNull),
                (FieldOp::Eq, v) if is_nan(v) => Some(UnaryOp::IsNan),
                (FieldOp::Ne, v) if is_nan(v) => Some(UnaryOp::IsNotNan),
                _ => None,
            };
            match unary {
                Some(op) => Filter::Unary { field, op },
                None if field.is_document_id() => {
                    let value = match value {
                        Value::Array(items) if op.takes_list() => Value::Array(
                            items
                                .into_iter()
                                .map(|v| name_value(v, source))
                                .collect::<Result<_, _>>()?,
                        ),
                        other => name_value(other, source)?,
                    };
                    Filter::Field { field, op, value }
                }
                None => Filter::Field { field, op, value },
            }
        }
        unary @ Filter::Unary { .. } => unary,
        Filter::And(children) => composite(children, source, true)?,
        Filter::Or(children) => composite(children, source, false)?,
    })
}

fn composite(children: Vec<Filter>, source: &Source, and: bool) -> Result<Filter, QueryError> {
    let mut flat = Vec::with_capacity(children.len());
    for child in children {
        match canonical_filter(child, source)? {
            Filter::And(grand) if and => flat.extend(grand),
            Filter::Or(grand) if !and => flat.extend(grand),
            other => flat.push(other),
        }
    }
    match flat.len() {
        0 => Err(QueryError::EmptyComposite {
            op: if and { "and" } else { "or" },
        }),
        1 => Ok(flat.remove(0)),
        _ => Ok(if and {
            Filter::And(flat)
        } else {
            Filter::Or(flat)
        }),
    }
}

/// A value compared with `__name__`: strings become references.
fn name_value(value: Value, source: &Source) -> Result<Value, QueryError> {
    let Value::String(name) = value else {
        return Ok(value);
    };
    let invalid = |reason: String| QueryError::InvalidDocumentName {
        name: name.clone(),
        reason,
    };
    let path = if name.contains('/') {
        ResourcePath::parse_document(&name).map_err(|e| invalid(e.to_string()))?
    } else {
        match source.collection_path() {
            Some(collection) => collection
                .child(&name)
                .map_err(|e| invalid(e.to_string()))?,
            None => {
                return Err(invalid(
                    "in a collection group query a document name must be a full path".into(),
                ))
            }
        }
    };
    Ok(Value::Reference(path))
}

fn describe_leaf(filter: &Filter) -> String {
    match filter {
        Filter::Field { field, op, .. } => format!("{field} {}", op.text()),
        Filter::Unary { field, op } => format!("{field} {}", op.text()),
        Filter::And(_) => "and".into(),
        Filter::Or(_) => "or".into(),
    }
}

fn check_filter(filter: &Filter) -> Result<(), QueryError> {
    let leaves = filter.leaves();
    for leaf in &leaves {
        check_leaf(leaf)?;
    }
    // At most one of != / not in / is not null / is not nan.
    let negative: Vec<&&Filter> = leaves
        .iter()
        .filter(|f| {
            matches!(
                f,
                Filter::Field {
                    op: FieldOp::Ne | FieldOp::NotIn,
                    ..
                } | Filter::Unary {
                    op: UnaryOp::IsNotNull | UnaryOp::IsNotNan,
                    ..
                }
            )
        })
        .collect();
    if let [first, second, ..] = negative.as_slice() {
        return Err(QueryError::ConflictingFilters {
            first: describe_leaf(first),
            second: describe_leaf(second),
            rule: "a query has at most one of !=, not in, is not null and is not nan",
        });
    }
    if let Some(not_in) = leaves.iter().find(|f| {
        matches!(
            f,
            Filter::Field {
                op: FieldOp::NotIn,
                ..
            }
        )
    }) {
        let other = leaves.iter().find(|f| {
            matches!(
                f,
                Filter::Field {
                    op: FieldOp::In | FieldOp::ArrayContainsAny,
                    ..
                }
            )
        });
        if let Some(other) = other {
            return Err(QueryError::ConflictingFilters {
                first: describe_leaf(not_in),
                second: describe_leaf(other),
                rule: "not in cannot be combined with in, array_contains_any or or",
            });
        }
        if contains_or(filter) {
            return Err(QueryError::ConflictingFilters {
                first: describe_leaf(not_in),
                second: "or".into(),
                rule: "not in cannot be combined with in, array_contains_any or or",
            });
        }
    }
    let count = dnf_size(filter);
    if count > MAX_DISJUNCTIONS {
        return Err(QueryError::TooManyDisjunctions { count });
    }
    for term in dnf_terms(filter) {
        let arrays: Vec<&&Filter> = term
            .iter()
            .filter(|f| {
                matches!(
                    f,
                    Filter::Field {
                        op: FieldOp::ArrayContains | FieldOp::ArrayContainsAny,
                        ..
                    }
                )
            })
            .collect();
        if let [first, second, ..] = arrays.as_slice() {
            return Err(QueryError::ConflictingFilters {
                first: describe_leaf(first),
                second: describe_leaf(second),
                rule: "a disjunction has at most one array_contains or array_contains_any",
            });
        }
    }
    Ok(())
}

fn contains_or(filter: &Filter) -> bool {
    match filter {
        Filter::Or(_) => true,
        Filter::And(children) => children.iter().any(contains_or),
        _ => false,
    }
}

fn check_leaf(leaf: &Filter) -> Result<(), QueryError> {
    match leaf {
        Filter::Unary { field, op } if field.is_document_id() => Err(QueryError::InvalidOperand {
            field: field.to_string(),
            op: op.text(),
            reason: "a document name is never null or NaN".into(),
        }),
        Filter::Field { field, op, value } => {
            let invalid = |reason: String| QueryError::InvalidOperand {
                field: field.to_string(),
                op: op.text(),
                reason,
            };
            if op.takes_list() {
                let Value::Array(items) = value else {
                    return Err(invalid(format!(
                        "needs a list of values, not a {}",
                        value.type_name()
                    )));
                };
                if items.is_empty() {
                    return Err(invalid("needs a non-empty list of values".into()));
                }
                let max = if *op == FieldOp::NotIn {
                    MAX_NOT_IN_VALUES
                } else {
                    MAX_DISJUNCTIONS
                };
                if items.len() > max {
                    return Err(QueryError::TooManyValues {
                        field: field.to_string(),
                        op: op.text(),
                        count: items.len(),
                        max,
                    });
                }
            }
            let operands: &[Value] = match value {
                Value::Array(items) if op.takes_list() => items,
                other => std::slice::from_ref(other),
            };
            if operands.iter().any(|v| height(v) > MAX_DECODE_DEPTH) {
                return Err(invalid(format!(
                    "a value nested more than {MAX_DECODE_DEPTH} levels deep cannot be compared with indexed values"
                )));
            }
            if (op.is_range() || *op == FieldOp::ArrayContains)
                && (matches!(value, Value::Null) || is_nan(value))
            {
                return Err(invalid(format!(
                    "{} matches no document; null and NaN are only found with = and != (is null, is nan)",
                    if is_nan(value) { "NaN" } else { "null" }
                )));
            }
            if field.is_document_id() {
                if matches!(op, FieldOp::ArrayContains | FieldOp::ArrayContainsAny) {
                    return Err(invalid("a document name is not an array".into()));
                }
                if let Some(bad) = operands.iter().find(|v| !matches!(v, Value::Reference(_))) {
                    return Err(invalid(format!(
                        "__name__ is compared with document names (a reference or a string), not a {}",
                        bad.type_name()
                    )));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// How deeply a value nests arrays and maps (a scalar or an empty container is 0), as typed
/// JSON and the index encoding bound it.
fn height(value: &Value) -> usize {
    match value {
        Value::Array(items) => items.iter().map(|v| 1 + height(v)).max().unwrap_or(0),
        Value::Map(map) => map.values().map(|v| 1 + height(v)).max().unwrap_or(0),
        _ => 0,
    }
}

/// Number of disjunctions of the filter in disjunctive normal form; each value of an `in` or
/// `array_contains_any` list is one.
pub(crate) fn dnf_size(filter: &Filter) -> usize {
    match filter {
        Filter::Field {
            op: FieldOp::In | FieldOp::ArrayContainsAny,
            value: Value::Array(items),
            ..
        } => items.len(),
        Filter::Field { .. } | Filter::Unary { .. } => 1,
        Filter::And(children) => children
            .iter()
            .fold(1usize, |acc, c| acc.saturating_mul(dnf_size(c))),
        Filter::Or(children) => children
            .iter()
            .fold(0usize, |acc, c| acc.saturating_add(dnf_size(c))),
    }
}

/// The conjunctions of the filter's disjunctive normal form (lists kept as one leaf). Only
/// called once [`dnf_size`] is at most 30, which bounds every intermediate product.
pub(crate) fn dnf_terms(filter: &Filter) -> Vec<Vec<&Filter>> {
    match filter {
        Filter::And(children) => and_product(children.iter().map(dnf_terms)),
        Filter::Or(children) => children.iter().flat_map(dnf_terms).collect(),
        leaf => vec![vec![leaf]],
    }
}

/// The conjunctions of an AND of children given as their own DNF terms: every choice of one
/// term per child, joined (the distributive law). An AND of nothing is one empty term.
pub(crate) fn and_product<T: Clone>(
    children: impl IntoIterator<Item = Vec<Vec<T>>>,
) -> Vec<Vec<T>> {
    let mut terms: Vec<Vec<T>> = vec![Vec::new()];
    for child_terms in children {
        let mut next = Vec::with_capacity(terms.len() * child_terms.len());
        for term in &terms {
            for child_term in &child_terms {
                let mut joined = term.clone();
                joined.extend(child_term.iter().cloned());
                next.push(joined);
            }
        }
        terms = next;
    }
    terms
}

fn describe_order(order: &[Order]) -> String {
    order
        .iter()
        .map(|o| match o.direction {
            Direction::Ascending => o.field.to_string(),
            Direction::Descending => format!("{} desc", o.field),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn canonical_cursor(
    cursor: &mut Cursor,
    clause: &'static str,
    order: &[Order],
    source: &Source,
) -> Result<(), QueryError> {
    if cursor.values.is_empty() {
        return Err(QueryError::InvalidCursor {
            clause,
            reason: "a cursor needs at least one value".into(),
        });
    }
    if cursor.values.len() > order.len() {
        return Err(QueryError::CursorTooLong {
            clause,
            count: cursor.values.len(),
            max: order.len(),
            order: describe_order(order),
        });
    }
    if cursor.values.iter().any(|v| height(v) > MAX_DECODE_DEPTH) {
        return Err(QueryError::InvalidCursor {
            clause,
            reason: format!("a value nested more than {MAX_DECODE_DEPTH} levels deep"),
        });
    }
    for (value, component) in cursor.values.iter_mut().zip(order) {
        if component.field.is_document_id() {
            let text = match value {
                Value::String(s) => Some(s.clone()),
                Value::Reference(path) => Some(path.to_string()),
                _ => None,
            };
            if let Some(position) = text.as_deref().and_then(collection_position) {
                *value = Value::Reference(position.map_err(|reason| {
                    QueryError::InvalidDocumentName {
                        name: text.unwrap_or_default(),
                        reason,
                    }
                })?);
                continue;
            }
            let named = name_value(std::mem::replace(value, Value::Null), source)?;
            if !matches!(named, Value::Reference(_)) {
                return Err(QueryError::InvalidCursor {
                    clause,
                    reason: format!(
                        "the value at the __name__ position must be a document name (a reference or a string), not a {}",
                        named.type_name()
                    ),
                });
            }
            *value = named;
        }
    }
    Ok(())
}

fn check_offset_and_limit(query: &Query) -> Result<(), QueryError> {
    const RANGE: &str = "must be between 0 and 2147483647";
    if query.offset > MAX_LIMIT {
        return Err(QueryError::InvalidLimit {
            what: "offset",
            value: query.offset.to_string(),
            reason: RANGE,
        });
    }
    if let Some(limit) = query.limit {
        if limit.count() > MAX_LIMIT {
            return Err(QueryError::InvalidLimit {
                what: "limit",
                value: limit.count().to_string(),
                reason: RANGE,
            });
        }
        if matches!(limit, Limit::Last(_)) && query.order_by.is_empty() {
            return Err(QueryError::LimitToLastWithoutOrder);
        }
    }
    Ok(())
}

fn check_aggregations(aggregations: &[super::ast::Aggregation]) -> Result<(), QueryError> {
    if aggregations.is_empty() {
        return Err(QueryError::InvalidAggregation {
            alias: String::new(),
            reason: "an aggregation query needs at least one aggregation".into(),
        });
    }
    if aggregations.len() > MAX_AGGREGATIONS {
        return Err(QueryError::TooManyAggregations {
            count: aggregations.len(),
        });
    }
    let mut aliases = BTreeSet::new();
    for aggregation in aggregations {
        let invalid = |reason: &str| QueryError::InvalidAggregation {
            alias: aggregation.alias.clone(),
            reason: reason.to_owned(),
        };
        let alias = &aggregation.alias;
        if alias.is_empty() {
            return Err(invalid("the alias is empty"));
        }
        if crate::reserved::is_reserved_name(alias) {
            return Err(invalid(
                "the alias is reserved (names matching __.*__ are not allowed)",
            ));
        }
        if alias.len() > crate::limits::MAX_NAME_BYTES {
            return Err(invalid("the alias is longer than 1500 bytes"));
        }
        if alias.contains('\0') {
            return Err(invalid("the alias contains U+0000"));
        }
        if !aliases.insert(alias) {
            return Err(invalid("the alias is used twice"));
        }
        match &aggregation.function {
            AggregateFunction::Count { up_to: Some(0) } => {
                return Err(QueryError::InvalidLimit {
                    what: "count_up_to",
                    value: "0".into(),
                    reason: "must be greater than 0",
                })
            }
            AggregateFunction::Count { up_to: Some(n) } if *n > i64::MAX as u64 => {
                return Err(QueryError::InvalidLimit {
                    what: "count_up_to",
                    value: n.to_string(),
                    reason: "must be at most 9223372036854775807",
                })
            }
            AggregateFunction::Sum(field) | AggregateFunction::Avg(field)
                if field.is_document_id() =>
            {
                return Err(invalid("__name__ is not a number"));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(field: &str, op: FieldOp, value: Value) -> Filter {
        Filter::field(FieldPath::single(field), op, value)
    }

    fn list(n: i64) -> Value {
        Value::Array((0..n).map(Value::Integer).collect())
    }

    #[test]
    fn dnf_counts_list_values_as_disjunctions() {
        let a = leaf("a", FieldOp::Eq, Value::Integer(1));
        let b = leaf("b", FieldOp::In, list(3));
        let c = leaf("c", FieldOp::ArrayContainsAny, list(2));
        let d = leaf("d", FieldOp::NotIn, list(5));
        assert_eq!(dnf_size(&a), 1);
        assert_eq!(dnf_size(&b), 3);
        assert_eq!(dnf_size(&d), 1);
        let and = Filter::And(vec![a.clone(), b.clone(), c.clone()]);
        assert_eq!(dnf_size(&and), 6);
        let or = Filter::Or(vec![and.clone(), a.clone(), b.clone()]);
        assert_eq!(dnf_size(&or), 10);
        // (a or b) and (c or d) has four conjunctions (lists kept whole).
        let both = Filter::And(vec![
            Filter::Or(vec![a.clone(), b.clone()]),
            Filter::Or(vec![c.clone(), d.clone()]),
        ]);
        let terms = dnf_terms(&both);
        assert_eq!(terms.len(), 4);
        assert_eq!(terms[0], vec![&a, &c]);
        assert_eq!(terms[3], vec![&b, &d]);
        // Saturates instead of overflowing.
        let huge = Filter::And(vec![leaf("x", FieldOp::In, list(30)); 20]);
        assert_eq!(dnf_size(&huge), usize::MAX);
    }

    #[test]
    fn canonical_filters() {
        let source = Source::collection(&ResourcePath::parse("c").unwrap()).unwrap();
        let nested = Filter::And(vec![
            Filter::And(vec![leaf("a", FieldOp::Eq, Value::Null)]),
            Filter::Or(vec![
                leaf("b", FieldOp::Ne, Value::Double(f64::NAN)),
                Filter::Or(vec![leaf(
                    "__name__",
                    FieldOp::Lt,
                    Value::String("x".into()),
                )]),
            ]),
        ]);
        let expected = Filter::And(vec![
            Filter::Unary {
                field: FieldPath::single("a"),
                op: UnaryOp::IsNull,
            },
            Filter::Or(vec![
                Filter::Unary {
                    field: FieldPath::single("b"),
                    op: UnaryOp::IsNotNan,
                },
                leaf(
                    "__name__",
                    FieldOp::Lt,
                    Value::Reference(ResourcePath::parse("c/x").unwrap()),
                ),
            ]),
        ]);
        assert_eq!(canonical_filter(nested, &source), Ok(expected));
        assert_eq!(
            canonical_filter(Filter::Or(vec![]), &source),
            Err(QueryError::EmptyComposite { op: "or" })
        );
    }
}
