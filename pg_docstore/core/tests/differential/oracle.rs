//! What the answer must be: `query::evaluate` over the same documents, and how an answer may
//! differ from it (the documented order among values cut at 1,500 bytes).

use docstore_core::query::{
    aggregate, evaluate, field_value, project, Direction, Limit, Query, Selection,
};
use docstore_core::value::Map;
use docstore_core::{encoding, typed_json, ResourcePath, Value};

use crate::cluster::Answer;

/// What a query should return: rows (projected), or the aggregates.
pub(crate) enum Expected {
    Rows(Vec<(ResourcePath, Map)>),
    Aggregates(Map),
}

/// The oracle: `query::evaluate` / `query::aggregate`.
pub(crate) fn oracle(query: &Query, docs: &[(ResourcePath, Map)]) -> Expected {
    if query.aggregations().is_some() {
        Expected::Aggregates(aggregate(query, docs))
    } else {
        Expected::Rows(evaluate(query, docs))
    }
}

/// The indexed form of a value: its order-preserving encoding cut to 1,500 bytes.
pub(crate) fn indexed(value: Option<&Value>) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(v) = value {
        encoding::encode_into(&mut out, v);
        out.truncate(encoding::MAX_INDEXED_VALUE_BYTES);
    }
    out
}

/// Whether a document of `docs` has a value longer than an index holds in a field the query
/// is ordered by.
pub(crate) fn truncated_order_values(query: &Query, docs: &[(ResourcePath, Map)]) -> bool {
    let order = query.normalized_order();
    docs.iter().any(|(path, doc)| {
        order.iter().any(|o| {
            field_value(path, doc, &o.field).is_some_and(|v| {
                let mut out = Vec::new();
                encoding::encode_into(&mut out, &v);
                out.len() > encoding::MAX_INDEXED_VALUE_BYTES
            })
        })
    })
}

/// The oracle with the documented order among long values (`Plan::recheck`: "result order
/// among values that share their first 1,500 bytes is the index's"): the matching documents
/// sorted by their indexed (cut) values, ties by name, then offset, limit, projection or
/// aggregates as `query::evaluate` does.
pub(crate) fn index_order_oracle(query: &Query, docs: &[(ResourcePath, Map)]) -> Expected {
    let mut unbounded = query.clone();
    unbounded.offset = 0;
    unbounded.limit = None;
    unbounded.selection = Selection::Documents;
    let mut matched = evaluate(&unbounded, docs);
    let order = query.normalized_order();
    matched.sort_by(|(pa, a), (pb, b)| {
        for o in &order {
            let ka = indexed(field_value(pa, a, &o.field).as_deref());
            let kb = indexed(field_value(pb, b, &o.field).as_deref());
            let c = match o.direction {
                Direction::Ascending => ka.cmp(&kb),
                Direction::Descending => kb.cmp(&ka),
            };
            if c.is_ne() {
                return c;
            }
        }
        std::cmp::Ordering::Equal
    });
    let offset = usize::try_from(query.offset).unwrap();
    let window: Vec<(ResourcePath, Map)> = match query.limit {
        None => matched.into_iter().skip(offset).collect(),
        Some(Limit::First(n)) => matched
            .into_iter()
            .skip(offset)
            .take(usize::try_from(n).unwrap())
            .collect(),
        Some(Limit::Last(n)) => {
            let mut last: Vec<_> = matched
                .into_iter()
                .rev()
                .skip(offset)
                .take(usize::try_from(n).unwrap())
                .collect();
            last.reverse();
            last
        }
    };
    match &query.selection {
        Selection::Aggregations(_) => {
            let mut over_window = query.clone();
            over_window.offset = 0;
            over_window.limit = None;
            Expected::Aggregates(aggregate(&over_window, &window))
        }
        Selection::Fields(fields) => Expected::Rows(
            window
                .into_iter()
                .map(|(p, d)| {
                    let projected = project(&p, &d, fields);
                    (p, projected)
                })
                .collect(),
        ),
        Selection::Documents => Expected::Rows(window),
    }
}

/// How an answer compares with the oracle.
pub(crate) enum Verdict {
    Same,
    /// Differs from `query::evaluate` only in the order of values sharing their first 1,500
    /// bytes, which is the index's by design (see [`index_order_oracle`]).
    SameUpToLongValueTies,
    Differs(String),
}

pub(crate) fn verdict(query: &Query, docs: &[(ResourcePath, Map)], answer: &Answer) -> Verdict {
    let Some(why) = difference(&oracle(query, docs), answer) else {
        return Verdict::Same;
    };
    if truncated_order_values(query, docs)
        && difference(&index_order_oracle(query, docs), answer).is_none()
    {
        return Verdict::SameUpToLongValueTies;
    }
    Verdict::Differs(why)
}

/// Why the answer differs from the expected one (`None` when it does not).
pub(crate) fn difference(expected: &Expected, answer: &Answer) -> Option<String> {
    let rows = match answer {
        Answer::Rows(rows) => rows,
        Answer::Unsupported => return Some(
            "refused as unsupported, but the query has none of the UNSUPPORTED_BY_DESIGN shapes"
                .into(),
        ),
        Answer::SuggestionRefused(call, message) => {
            return Some(format!(
                "the query asked for an index and the call failed: {call}\n  {message}"
            ))
        }
        Answer::Error(code, message) => {
            return Some(format!("docstore.query failed: {code} {message}"))
        }
    };
    let expected = match expected {
        Expected::Aggregates(expected) => {
            let [(path, data)] = rows.as_slice() else {
                return Some(format!(
                    "expected one aggregation row {}, got {} rows",
                    typed_json::to_string(&Value::Map(expected.clone())),
                    rows.len()
                ));
            };
            let actual = typed_json::parse(data);
            let same = path.is_empty()
                && matches!(&actual, Ok(Value::Map(got)) if aggregates_equal(expected, got));
            return (!same).then(|| {
                format!(
                    "aggregates differ\nexpected: {}\nactual:   {path:?} {data}",
                    typed_json::to_string(&Value::Map(expected.clone()))
                )
            });
        }
        Expected::Rows(rows) => rows,
    };
    let expected_paths: Vec<String> = expected.iter().map(|(p, _)| p.to_string()).collect();
    let actual_paths: Vec<&str> = rows.iter().map(|(p, _)| p.as_str()).collect();
    if expected_paths != actual_paths {
        return Some(format!(
            "paths differ\nexpected: {expected_paths:?}\nactual:   {actual_paths:?}"
        ));
    }
    for ((path, doc), (_, data)) in expected.iter().zip(rows) {
        let want = Value::Map(doc.clone());
        match typed_json::parse(data) {
            Ok(got) if got == want => {}
            Ok(_) | Err(_) => {
                return Some(format!(
                    "data of {path} differs\nexpected: {}\nactual:   {data}",
                    typed_json::to_string(&want)
                ))
            }
        }
    }
    None
}

/// Equal aggregates; doubles within a relative 1e-9 (a sum of doubles may be summed in another
/// order, docs/query.md section 6), NaN equal to NaN.
pub(crate) fn aggregates_equal(expected: &Map, actual: &Map) -> bool {
    expected.len() == actual.len()
        && expected.iter().zip(actual).all(|((ka, a), (kb, b))| {
            ka == kb
                && match (a, b) {
                    (Value::Double(x), Value::Double(y)) => {
                        (x.is_nan() && y.is_nan())
                            || x == y
                            || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
                    }
                    _ => a == b,
                }
        })
}
