//! What a query returns, shaped by one piece of code wherever results are produced: the
//! extension's executor, the naive evaluator ([`super::evaluate()`]) and the live-query
//! sidecar.
//!
//! A result row is the triple (path, data, update time). A document query returns a row per
//! document whose data is the document, or its projection to the `select` list
//! ([`row_data`]); an aggregation query returns one row whose path is
//! [`AGGREGATION_PATH`], which has no update time, and whose data maps each aggregation's
//! alias to its value ([`super::aggregate`], or [`count_aggregates`] when counting is all
//! it does).

use std::borrow::Cow;

use crate::path::ResourcePath;
use crate::value::{Map, Value};

use super::ast::{AggregateFunction, Limit, Query, Selection};
use super::evaluate::project;

/// The path of an aggregation query's one row (documents always have a non-empty path).
pub const AGGREGATION_PATH: &str = "";

/// The projection of `doc` to the query's `select` list; `None` when the query returns whole
/// documents (or aggregates).
pub fn projected(query: &Query, path: &ResourcePath, doc: &Map) -> Option<Map> {
    match &query.selection {
        Selection::Fields(fields) => Some(project(path, doc, fields)),
        Selection::Documents | Selection::Aggregations(_) => None,
    }
}

/// The data of the result row of `doc`: its projection for a `select` list, else the whole
/// document.
pub fn row_data<'d>(query: &Query, path: &ResourcePath, doc: &'d Map) -> Cow<'d, Map> {
    projected(query, path, doc).map_or(Cow::Borrowed(doc), Cow::Owned)
}

/// Whether the query is an aggregation query of counts only (`count(*)`, `count_up_to(n)`),
/// which needs the number of matching documents and none of their fields.
pub fn is_count_only(query: &Query) -> bool {
    query.aggregations().is_some_and(|aggregations| {
        aggregations
            .iter()
            .all(|a| matches!(a.function, AggregateFunction::Count { .. }))
    })
}

/// How many results `matching` documents (those that pass the filter and the cursors) give
/// after the offset and the limit.
pub fn window_len(query: &Query, matching: u64) -> u64 {
    let n = matching.saturating_sub(u64::from(query.offset));
    query
        .limit
        .map_or(n, |limit: Limit| n.min(u64::from(limit.count())))
}

/// A count aggregation's value over `results` results, stopped at `up_to`.
pub(crate) fn count_value(up_to: Option<u64>, results: u64) -> Value {
    let count = up_to.map_or(results, |limit| results.min(limit));
    Value::Integer(i64::try_from(count).unwrap_or(i64::MAX))
}

/// The aggregation row's data of a count-only query (see [`is_count_only`]) from the number
/// of matching documents: offset, then limit, then each count's `up_to`. Aggregations other
/// than counts are left out (a count-only query has none).
pub fn count_aggregates(query: &Query, matching: u64) -> Map {
    let results = window_len(query, matching);
    query
        .aggregations()
        .unwrap_or_default()
        .iter()
        .filter_map(|a| match a.function {
            AggregateFunction::Count { up_to } => {
                Some((a.alias.clone(), count_value(up_to, results)))
            }
            AggregateFunction::Sum(_) | AggregateFunction::Avg(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{aggregate, parse_query};
    use crate::typed_json::map_from_json;

    fn docs(n: usize) -> Vec<(ResourcePath, Map)> {
        (0..n)
            .map(|i| {
                let path = ResourcePath::parse_document(&format!("c/d{i:03}")).unwrap();
                let doc =
                    map_from_json(&serde_json::json!({"n": i, "m": {"a": 1, "b": 2}})).unwrap();
                (path, doc)
            })
            .collect()
    }

    #[test]
    fn count_aggregates_agree_with_aggregate() {
        let texts = [
            "select count(*) from c",
            "select count(*) as n, count_up_to(3) as m from c",
            "select count(*) from c offset 4",
            "select count(*) from c limit 3",
            "select count_up_to(2) from c offset 1 limit 5",
            "select count(*) from c order by n limit last 2 offset 9",
        ];
        for text in texts {
            let query = parse_query(text).unwrap();
            assert!(is_count_only(&query), "{text}");
            for n in [0, 1, 5, 10] {
                let all = docs(n);
                let matching = u64::try_from(n).unwrap();
                assert_eq!(
                    count_aggregates(&query, matching),
                    aggregate(&query, &all),
                    "{text} over {n}"
                );
            }
        }
    }

    #[test]
    fn only_counts_are_count_only() {
        for (text, expected) in [
            ("select count(*) from c", true),
            ("select count(*), sum(n) from c", false),
            ("select * from c", false),
            ("select n from c", false),
        ] {
            assert_eq!(
                is_count_only(&parse_query(text).unwrap()),
                expected,
                "{text}"
            );
        }
    }

    #[test]
    fn row_data_projects_select_lists_only() {
        let (path, doc) = docs(1).remove(0);
        let whole = parse_query("select * from c").unwrap();
        assert!(matches!(row_data(&whole, &path, &doc), Cow::Borrowed(d) if *d == doc));
        assert_eq!(projected(&whole, &path, &doc), None);
        let some = parse_query("select m.b from c").unwrap();
        let expected = map_from_json(&serde_json::json!({"m": {"b": 2}})).unwrap();
        assert_eq!(row_data(&some, &path, &doc).into_owned(), expected);
        let names = parse_query("select __name__ from c").unwrap();
        assert!(row_data(&names, &path, &doc).is_empty());
    }
}
