//! What the differential test generates: document sets (with long values that exceed what an
//! index entry holds) and queries, and the query shapes refused by design.

use proptest::prelude::*;

use crate::common::generators::{document, documents, query};
use docstore_core::query::{AggregateFunction, Aggregation, FieldOp, Filter, Query, Selection};
use docstore_core::value::Map;
use docstore_core::{FieldPath, ResourcePath, Value};

/// Messages of `docstore.query` errors (SQLSTATE 0A000, `PlanError::Unsupported`) for query
/// shapes the oracle answers but no index layout can serve, by design of the planner
/// (docs/query.md, `plan::plan`'s `# Errors`):
/// - an order with fields after `__name__` (`order by __name__, a`, or `order by __name__`
///   followed by an implicit inequality order): index entries end in the document name, so
///   nothing can be ordered after it;
/// - `array_contains` / `array_contains_any` on a field the query is also ordered by: an
///   array-contains index slot holds one element, an ordered slot the whole value.
///
/// Any other error fails the test, and so does one of these messages for a query that does not
/// have the shape ([`unsupported_by_design`]).
pub(crate) const UNSUPPORTED_BY_DESIGN: [&str; 2] = [
    "ordering by fields after __name__",
    "which the query is also ordered by",
];

/// Whether the query has one of the shapes of [`UNSUPPORTED_BY_DESIGN`].
pub(crate) fn unsupported_by_design(query: &Query) -> bool {
    let order = query.normalized_order();
    let name_not_last = order.last().is_none_or(|o| !o.field.is_document_id());
    let contains_ordered = query.filter.as_ref().is_some_and(|f| {
        f.leaves().iter().any(|l| match l {
            Filter::Field {
                field,
                op: FieldOp::ArrayContains | FieldOp::ArrayContainsAny,
                ..
            } => order.iter().any(|o| o.field == *field),
            _ => false,
        })
    });
    name_not_last || contains_ordered
}

/// Extra document paths on top of the generators' 19 (`common::generators::documents`), so
/// that a set holds 50 to 100 documents: the collection `c`, the subcollection `c/d0/c` (both
/// in the group `c` and under `c/d0`), and a group member elsewhere.
pub(crate) fn extra_paths() -> Vec<String> {
    let top = (0..44).map(|i| format!("c/k{i:02}"));
    let sub = (0..14).map(|i| format!("c/d0/c/f{i:02}"));
    let other = (0..8).map(|i| format!("x/y/c/w{i}"));
    top.chain(sub).chain(other).collect()
}

/// A string longer than the 1,500 bytes of a value an index entry holds: `b`, 1,600 `x`, then
/// `tail`. Two of them differ only past the cut, so the index cannot tell them apart and the
/// executor must re-check (and order) them from the documents.
pub(crate) fn long_string(tail: char) -> Value {
    Value::String(format!("b{}{tail}", "x".repeat(1600)))
}

/// A long value (see [`long_string`]): alone, in an array, in a map.
pub(crate) fn long_value() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(long_string('0')),
        Just(long_string('1')),
        Just(Value::Array(vec![long_string('1')])),
        Just(Value::Array(vec![Value::Integer(1), long_string('0')])),
        Just(Value::Map(Map::from([("k".to_owned(), long_string('0'))]))),
    ]
    .boxed()
}

/// One document set: the generators' documents plus documents at [`extra_paths`], one in
/// five of those with a long value in `a`, `b`, `m.x` or `tags`.
pub(crate) fn document_set() -> BoxedStrategy<Vec<(ResourcePath, Map)>> {
    let extra = extra_paths();
    let n = extra.len();
    let long = proptest::option::weighted(0.2, (0..4usize, long_value()));
    (
        documents(),
        proptest::collection::vec(proptest::option::weighted(0.85, (document(), long)), n),
    )
        .prop_map(move |(mut docs, more)| {
            for (path, doc) in extra.iter().zip(more) {
                let Some((mut doc, long)) = doc else {
                    continue;
                };
                match long {
                    Some((0, v)) => {
                        doc.insert("a".into(), v);
                    }
                    Some((1, v)) => {
                        doc.insert("b".into(), v);
                    }
                    Some((2, v)) => {
                        doc.insert("m".into(), Value::Map(Map::from([("x".to_owned(), v)])));
                    }
                    Some((_, v)) => {
                        doc.insert("tags".into(), Value::Array(vec![v]));
                    }
                    None => {}
                }
                docs.push((ResourcePath::parse_document(path).unwrap(), doc));
            }
            docs
        })
        .boxed()
}

/// Replace every string `b` in the query's operands and cursors with `long` (one query in five
/// meets the long values of the documents this way).
pub(crate) fn lengthen(query: &mut Query, long: &Value) {
    fn value(v: &mut Value, long: &Value) {
        match v {
            Value::String(s) if s == "b" => *v = long.clone(),
            Value::Array(items) => items.iter_mut().for_each(|i| value(i, long)),
            _ => {}
        }
    }
    fn filter(f: &mut Filter, long: &Value) {
        match f {
            Filter::Field { value: v, .. } => value(v, long),
            Filter::Unary { .. } => {}
            Filter::And(children) | Filter::Or(children) => {
                children.iter_mut().for_each(|c| filter(c, long));
            }
        }
    }
    if let Some(f) = &mut query.filter {
        filter(f, long);
    }
    for cursor in [&mut query.start, &mut query.end].into_iter().flatten() {
        cursor.values.iter_mut().for_each(|v| value(v, long));
    }
}

pub(crate) fn aggregation_function() -> BoxedStrategy<AggregateFunction> {
    let field = prop_oneof![Just("a"), Just("b"), Just("m.x"), Just("tags"), Just("m")]
        .prop_map(|f| FieldPath::parse(f).unwrap());
    prop_oneof![
        2 => Just(AggregateFunction::Count { up_to: None }),
        1 => (1..6u64).prop_map(|n| AggregateFunction::Count { up_to: Some(n) }),
        2 => field.clone().prop_map(AggregateFunction::Sum),
        2 => field.prop_map(AggregateFunction::Avg),
    ]
    .boxed()
}

/// A generated query (see [`lengthen`]); about one in six becomes an aggregation query (1 to 3
/// aggregates), one in ten a projection of several fields (the generator's projection is `a`).
pub(crate) fn differential_query() -> BoxedStrategy<Query> {
    let projection = prop_oneof![
        Just(vec!["m.x", "tags"]),
        Just(vec!["__name__"]),
        Just(vec!["b", "m", "a"]),
        Just(vec!["m.x.y", "zz"]),
    ];
    (
        query(),
        proptest::option::weighted(
            0.17,
            proptest::collection::vec(aggregation_function(), 1..4),
        ),
        proptest::option::weighted(0.1, projection),
        any::<bool>(),
        proptest::option::weighted(0.2, prop_oneof![Just('0'), Just('1')]),
    )
        .prop_map(|(mut q, aggregations, projection, aliased, long)| {
            if let Some(tail) = long {
                lengthen(&mut q, &long_string(tail));
            }
            if let Some(mut functions) = aggregations {
                // A limited (or offset) sum/avg runs in the order of its field (docs/query.md,
                // section 3): `m` next to the filters' and orders' `m.x` would need an index
                // holding a map and its own field, whose entries pass the key limit with the
                // long values above (the build refuses it, NEEDS_REPAIR). Aggregate `tags` there.
                if q.limit.is_some() || q.offset > 0 {
                    let m = FieldPath::parse("m").unwrap();
                    for function in &mut functions {
                        if let AggregateFunction::Sum(f) | AggregateFunction::Avg(f) = function {
                            if *f == m {
                                *f = FieldPath::parse("tags").unwrap();
                            }
                        }
                    }
                }
                q.selection = Selection::Aggregations(
                    functions
                        .into_iter()
                        .enumerate()
                        .map(|(i, function)| Aggregation {
                            alias: if aliased {
                                format!("agg{i}")
                            } else {
                                format!("field_{}", i + 1)
                            },
                            function,
                        })
                        .collect(),
                );
            } else if let Some(fields) = projection {
                q.selection = Selection::Fields(
                    fields
                        .into_iter()
                        .map(|f| FieldPath::parse(f).unwrap())
                        .collect(),
                );
            }
            q
        })
        .boxed()
}
