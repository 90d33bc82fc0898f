//! Proptest generators shared by the query tests: documents (mixed types, missing fields,
//! arrays, NaN, nulls, nested maps) at a fixed set of paths, queries over them (most of them
//! valid), and index catalogs. `plan_props` runs them through the planner in memory,
//! `differential` through the extension; both compare with `query::evaluate`.

use proptest::prelude::*;

use docstore_core::index::{IndexDefinition, IndexField, IndexMode, Scope};
use docstore_core::query::{
    Cursor, Direction, FieldOp, Filter, Limit, Order, Query, Selection, Source, UnaryOp,
};
use docstore_core::value::{Map, Timestamp};
use docstore_core::{FieldPath, ResourcePath, Value};

pub const PATHS: [&str; 19] = [
    "c/d0",
    "c/d1",
    "c/d2",
    "c/d3",
    "c/d4",
    "c/d5",
    "c/d6",
    "c/d7",
    "c/d8",
    "c/d9",
    "c/d0/c/e0",
    "c/d0/c/e1",
    "c/d0/c/e2",
    "c/d0/c/e3",
    "c/d1/c/e1",
    "x/y/c/z",
    "c/d0/s/t",
    "o/p",
    "c-/d",
];

pub fn reference(path: &str) -> Value {
    Value::Reference(ResourcePath::parse_document(path).unwrap())
}

/// Values, mostly from a few common ones so that filters and documents meet.
pub fn value() -> BoxedStrategy<Value> {
    let common = prop_oneof![
        Just(Value::Null),
        Just(Value::Boolean(true)),
        Just(Value::Integer(1)),
        Just(Value::Integer(2)),
        Just(Value::Double(1.0)),
        Just(Value::String("a".into())),
        Just(Value::String("b".into())),
        Just(Value::Array(vec![Value::Integer(1)])),
    ];
    let rare = prop_oneof![
        Just(Value::Boolean(false)),
        Just(Value::Integer(-1)),
        Just(Value::Integer(0)),
        Just(Value::Double(1.5)),
        Just(Value::Double(-0.0)),
        Just(Value::Double(f64::NAN)),
        Just(Value::Double(f64::INFINITY)),
        Just(Value::Timestamp(Timestamp::from_micros(0).unwrap())),
        Just(Value::String(String::new())),
        Just(Value::Bytes(vec![0])),
        Just(reference("c/d1")),
        Just(Value::Array(vec![])),
        Just(Value::Array(vec![
            Value::Integer(1),
            Value::String("a".into())
        ])),
        Just(Value::Map(Map::new())),
        Just(Value::Map(Map::from([("k".to_owned(), Value::Integer(1))]))),
    ];
    prop_oneof![4 => common, 1 => rare].boxed()
}

pub fn name_value() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(reference("c/d1")),
        Just(reference("c/d3")),
        Just(reference("c/d0/c/e0")),
        Just(reference("x/y/c/z")),
    ]
    .boxed()
}

pub fn document() -> BoxedStrategy<Map> {
    (
        proptest::option::weighted(0.9, value()),
        proptest::option::weighted(0.8, value()),
        proptest::option::weighted(0.7, proptest::option::weighted(0.9, value())),
        proptest::option::weighted(0.6, proptest::collection::vec(value(), 0..3)),
    )
        .prop_map(|(a, b, m, tags)| {
            let mut doc = Map::new();
            if let Some(a) = a {
                doc.insert("a".into(), a);
            }
            if let Some(b) = b {
                doc.insert("b".into(), b);
            }
            if let Some(m) = m {
                let mut inner = Map::new();
                if let Some(x) = m {
                    inner.insert("x".into(), x);
                }
                doc.insert("m".into(), Value::Map(inner));
            }
            if let Some(tags) = tags {
                doc.insert("tags".into(), Value::Array(tags));
            }
            doc
        })
        .boxed()
}

pub fn documents() -> BoxedStrategy<Vec<(ResourcePath, Map)>> {
    proptest::collection::vec(proptest::option::weighted(0.9, document()), PATHS.len())
        .prop_map(|docs| {
            PATHS
                .iter()
                .zip(docs)
                .filter_map(|(path, doc)| {
                    doc.map(|d| (ResourcePath::parse_document(path).unwrap(), d))
                })
                .collect()
        })
        .boxed()
}

pub const FIELDS: [&str; 4] = ["a", "b", "m.x", "tags"];

pub fn field(name: &str) -> FieldPath {
    FieldPath::parse(name).unwrap()
}

pub fn leaf() -> BoxedStrategy<Filter> {
    let ops = prop_oneof![
        1 => Just(FieldOp::Lt),
        1 => Just(FieldOp::Le),
        1 => Just(FieldOp::Gt),
        1 => Just(FieldOp::Ge),
        6 => Just(FieldOp::Eq),
        1 => Just(FieldOp::Ne),
        2 => Just(FieldOp::ArrayContains),
        2 => Just(FieldOp::In),
        1 => Just(FieldOp::NotIn),
        1 => Just(FieldOp::ArrayContainsAny),
    ];
    let name_ops = prop_oneof![
        Just(FieldOp::Lt),
        Just(FieldOp::Le),
        Just(FieldOp::Gt),
        Just(FieldOp::Ge),
        Just(FieldOp::Eq),
        Just(FieldOp::Ne),
        Just(FieldOp::In),
        Just(FieldOp::NotIn),
    ];
    let unary = prop_oneof![
        Just(UnaryOp::IsNull),
        Just(UnaryOp::IsNan),
        Just(UnaryOp::IsNotNull),
        Just(UnaryOp::IsNotNan),
    ];
    let fields = prop_oneof![3 => 0..3usize, 1 => Just(3usize)];
    prop_oneof![
        8 => (fields.clone(), ops, value(), proptest::collection::vec(value(), 1..4)).prop_map(
            |(f, op, v, list)| {
                let array_op = matches!(op, FieldOp::ArrayContains | FieldOp::ArrayContainsAny);
                // Array operators mostly on the array field; no null or NaN operands where
                // validation refuses them.
                let f = if array_op && f != 0 { 3 } else { f };
                let v = match v {
                    Value::Null => Value::Integer(1),
                    Value::Double(d) if d.is_nan() && (array_op || op.is_range()) => Value::Integer(2),
                    other => other,
                };
                let operand = if op.takes_list() { Value::Array(list) } else { v };
                Filter::field(field(FIELDS[f]), op, operand)
            }
        ),
        1 => (fields, unary).prop_map(|(f, op)| Filter::Unary { field: field(FIELDS[f]), op }),
        1 => (name_ops, name_value(), proptest::collection::vec(name_value(), 1..3)).prop_map(
            |(op, v, list)| {
                let operand = if op.takes_list() { Value::Array(list) } else { v };
                Filter::field(field("__name__"), op, operand)
            }
        ),
    ]
    .boxed()
}

/// Two equalities (or an equality and an array_contains) on different fields: zig-zag joins.
pub fn equalities() -> BoxedStrategy<Filter> {
    (0..3usize, 1..4usize, value(), value())
        .prop_map(|(f, g, v, w)| {
            let g = if f == g { 3 } else { g };
            let op = if g == 3 {
                FieldOp::ArrayContains
            } else {
                FieldOp::Eq
            };
            let w = if matches!(w, Value::Null) || matches!(w, Value::Double(d) if d.is_nan()) {
                Value::Integer(1)
            } else {
                w
            };
            Filter::And(vec![
                Filter::field(field(FIELDS[f]), FieldOp::Eq, v),
                Filter::field(field(FIELDS[g]), op, w),
            ])
        })
        .boxed()
}

pub fn filter() -> BoxedStrategy<Option<Filter>> {
    prop_oneof![
        2 => Just(None),
        4 => leaf().prop_map(Some),
        2 => equalities().prop_map(Some),
        2 => proptest::collection::vec(leaf(), 2..4).prop_map(|l| Some(Filter::And(l))),
        2 => proptest::collection::vec(leaf(), 2..3).prop_map(|l| Some(Filter::Or(l))),
        1 => (leaf(), leaf(), leaf()).prop_map(|(a, b, c)| {
            Some(Filter::And(vec![a, Filter::Or(vec![b, c])]))
        }),
    ]
    .boxed()
}

/// Up to two distinct fields, `__name__` only last.
pub fn order() -> BoxedStrategy<Vec<Order>> {
    let one = (
        prop_oneof![3 => 0..3usize, 1 => Just(3usize)],
        any::<bool>(),
    );
    proptest::collection::vec(one, 0..3)
        .prop_map(|items| {
            let mut out: Vec<Order> = Vec::new();
            for (f, desc) in items {
                let direction = if desc {
                    Direction::Descending
                } else {
                    Direction::Ascending
                };
                let field = field(["a", "b", "m.x", "__name__"][f]);
                if out
                    .iter()
                    .any(|o| o.field == field || o.field.is_document_id())
                {
                    continue;
                }
                out.push(Order::new(field, direction));
            }
            out
        })
        .boxed()
}

/// A cursor of one or two values; the second (at the `__name__` position when one field is
/// ordered) is a document name.
pub fn cursor() -> BoxedStrategy<Option<Cursor>> {
    proptest::option::weighted(
        0.3,
        (
            value(),
            proptest::option::weighted(0.3, name_value()),
            any::<bool>(),
        )
            .prop_map(|(first, second, inclusive)| Cursor {
                values: std::iter::once(first).chain(second).collect(),
                inclusive,
            }),
    )
    .boxed()
}

pub fn source() -> BoxedStrategy<Source> {
    prop_oneof![
        3 => Just(Source::collection(&ResourcePath::parse("c").unwrap()).unwrap()),
        2 => Just(Source::group(None, "c")),
        1 => Just(Source::group(Some(ResourcePath::parse("c/d0").unwrap()), "c")),
        1 => Just(Source::collection(&ResourcePath::parse("c/d0/c").unwrap()).unwrap()),
    ]
    .boxed()
}

pub fn query() -> BoxedStrategy<Query> {
    (
        source(),
        filter(),
        order(),
        (cursor(), cursor()),
        prop_oneof![3 => Just(0u32), 1 => 1..3u32],
        prop_oneof![
            2 => Just(None),
            1 => (1..5u32).prop_map(|n| Some(Limit::First(n))),
            1 => (1..5u32).prop_map(|n| Some(Limit::Last(n))),
        ],
        any::<bool>(),
    )
        .prop_map(
            |(source, filter, order_by, (start, end), offset, limit, project)| {
                let mut q = Query::new(source);
                q.filter = filter;
                // limit last needs an explicit order.
                q.limit = match limit {
                    Some(Limit::Last(n)) if order_by.is_empty() => Some(Limit::First(n)),
                    other => other,
                };
                q.order_by = order_by.clone();
                // Cursors fit the normalised order: no longer than it, names at its name position.
                let normalized = q.normalized_order();
                let fix = |c: Option<Cursor>| {
                    c.map(|mut c| {
                        c.values.truncate(normalized.len());
                        for (value, o) in c.values.iter_mut().zip(&normalized) {
                            if o.field.is_document_id() && !matches!(value, Value::Reference(_)) {
                                *value = reference("c/d2");
                            }
                        }
                        c
                    })
                };
                q.start = fix(start);
                q.end = fix(end);
                q.order_by = order_by;
                q.offset = offset;
                if project {
                    q.selection = Selection::Fields(vec![field("a")]);
                }
                q
            },
        )
        .boxed()
}

pub fn index_field() -> BoxedStrategy<IndexField> {
    (0..4usize, 0..3usize)
        .prop_map(|(f, mode)| IndexField {
            path: field(FIELDS[f]),
            mode: [
                IndexMode::Ascending,
                IndexMode::Descending,
                IndexMode::ArrayContains,
            ][mode],
        })
        .boxed()
}

/// Composite indexes that exist before planning (valid definitions only).
pub fn composites() -> BoxedStrategy<Vec<IndexDefinition>> {
    let name = proptest::option::weighted(
        0.2,
        prop_oneof![Just(IndexMode::Ascending), Just(IndexMode::Descending)],
    );
    proptest::collection::vec(
        (
            proptest::collection::vec(index_field(), 1..4),
            name,
            any::<bool>(),
        ),
        0..4,
    )
    .prop_map(|defs| {
        defs.into_iter()
            .enumerate()
            .filter_map(|(i, (mut fields, name, group))| {
                if let Some(mode) = name {
                    fields.push(IndexField {
                        path: field("__name__"),
                        mode,
                    });
                }
                let fields =
                    IndexDefinition::parse_fields(&IndexDefinition::fields_json(&fields)).ok()?;
                Some(IndexDefinition {
                    id: u32::try_from(i).unwrap() + 100,
                    collection_group: "c".into(),
                    scope: if group {
                        Scope::CollectionGroup
                    } else {
                        Scope::Collection
                    },
                    fields,
                })
            })
            .collect()
    })
    .boxed()
}

pub fn exemptions() -> BoxedStrategy<Vec<FieldPath>> {
    prop_oneof![
        3 => Just(vec![]),
        1 => Just(vec![field("b")]),
        1 => Just(vec![field("m")]),
    ]
    .boxed()
}
