//! A naive evaluator: filter, sort, offset, limit, project and aggregate a slice of documents
//! in memory. It is the oracle the planner's differential tests compare against, and serves
//! queries at a past read time (the extension's `run_query_at`, over the documents as they
//! were: docs/storage.md, "Version history"); current queries are served by the planner.

use crate::path::{FieldPath, ResourcePath};
use crate::value::{Map, Value};

use super::aggregation::Accumulator;
use super::ast::{Limit, Query};
use super::matcher::{field_value, Matcher};
use super::result::row_data;

/// The results of `query` over `docs`, in the query's order: matching documents (see
/// [`super::matches`]) sorted by [`super::compare_results`], then offset and limit applied
/// (`limit last n` keeps the last `n` after skipping `offset` from the end, as Firestore's
/// reversed query does), then the projection. For an aggregation query these are the
/// documents the aggregates are computed over (unprojected).
pub fn evaluate(query: &Query, docs: &[(ResourcePath, Map)]) -> Vec<(ResourcePath, Map)> {
    result_window(query, docs)
        .into_iter()
        .map(|(path, doc)| (path.clone(), row_data(query, path, doc).into_owned()))
        .collect()
}

fn result_window<'d>(
    query: &Query,
    docs: &'d [(ResourcePath, Map)],
) -> Vec<(&'d ResourcePath, &'d Map)> {
    let matcher = Matcher::new(query);
    let mut results: Vec<(&ResourcePath, &Map)> = docs
        .iter()
        .filter(|(path, doc)| matcher.matches(path, doc))
        .map(|(path, doc)| (path, doc))
        .collect();
    results.sort_by(|a, b| matcher.compare(*a, *b));
    let offset = usize::try_from(query.offset).unwrap_or(usize::MAX);
    match query.limit {
        None => results.into_iter().skip(offset).collect(),
        Some(Limit::First(n)) => results
            .into_iter()
            .skip(offset)
            .take(usize::try_from(n).unwrap_or(usize::MAX))
            .collect(),
        Some(Limit::Last(n)) => {
            let mut last: Vec<_> = results
                .into_iter()
                .rev()
                .skip(offset)
                .take(usize::try_from(n).unwrap_or(usize::MAX))
                .collect();
            last.reverse();
            last
        }
    }
}

/// The document with only the given fields (nested paths keep their enclosing maps).
pub fn project(path: &ResourcePath, doc: &Map, fields: &[FieldPath]) -> Map {
    let mut out = Map::new();
    for field in fields {
        if field.is_document_id() {
            continue;
        }
        if let Some(value) = field_value(path, doc, field) {
            insert_at(&mut out, field.segments(), value.into_owned());
        }
    }
    out
}

fn insert_at(map: &mut Map, segments: &[String], value: Value) {
    match segments {
        [] => {}
        [last] => {
            map.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let entry = map
                .entry(first.clone())
                .or_insert_with(|| Value::Map(Map::new()));
            if !matches!(entry, Value::Map(_)) {
                *entry = Value::Map(Map::new());
            }
            if let Value::Map(inner) = entry {
                insert_at(inner, rest, value);
            }
        }
    }
}

/// The aggregates of an aggregation query over `docs` (empty for other queries), by alias.
///
/// Computed over the documents [`evaluate`] returns (so offset and limit apply first) by an
/// [`Accumulator`], whose semantics (exact, order-independent sums) are documented in
/// [`super::aggregation`]:
/// - `count(*)`: their number, at most `up_to`;
/// - `sum(f)`: the sum of the numeric values of `f` (others and missing ones ignored): an
///   integer while every value is an integer and the sum fits int64, else a double (the
///   exact sum of every value rounded once, NaN and infinities as IEEE-754 adds them); 0
///   when there are none;
/// - `avg(f)`: that sum as a double over the number of values, `null` when there are none.
pub fn aggregate(query: &Query, docs: &[(ResourcePath, Map)]) -> Map {
    if query.aggregations().is_none() {
        return Map::new();
    }
    let mut accumulator = Accumulator::new(query);
    for (path, doc) in result_window(query, docs) {
        accumulator.add_document(path, doc);
    }
    accumulator.row()
}
