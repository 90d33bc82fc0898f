//! The planner against the oracle: for random documents and random valid queries, running the
//! plan over the documents' index entries (`plan::simulate`) returns exactly what
//! `query::evaluate` returns. When the planner asks for an index, the test creates exactly
//! the suggested one and plans again, so the suggestions are checked too.

// Test helpers outside #[test] functions unwrap and panic to report failures.
#![allow(clippy::unwrap_used, clippy::panic)]

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use docstore_core::index::{IndexDefinition, IndexField, IndexMode, Scope};
use docstore_core::plan::simulate::{simulate, MemoryStore};
use docstore_core::plan::{plan, Branch, Catalog, PlanError};
use docstore_core::query::{
    evaluate, Cursor, Direction, FieldOp, Filter, Limit, Order, Query, Selection, Source, UnaryOp,
};
use docstore_core::value::{Map, Timestamp};
use docstore_core::{FieldPath, ResourcePath, Value};

const PATHS: [&str; 19] = [
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

fn reference(path: &str) -> Value {
    Value::Reference(ResourcePath::parse_document(path).unwrap())
}

/// Values, mostly from a few common ones so that filters and documents meet.
fn value() -> BoxedStrategy<Value> {
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

fn name_value() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(reference("c/d1")),
        Just(reference("c/d3")),
        Just(reference("c/d0/c/e0")),
        Just(reference("x/y/c/z")),
    ]
    .boxed()
}

fn document() -> BoxedStrategy<Map> {
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

fn documents() -> BoxedStrategy<Vec<(ResourcePath, Map)>> {
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

const FIELDS: [&str; 4] = ["a", "b", "m.x", "tags"];

fn field(name: &str) -> FieldPath {
    FieldPath::parse(name).unwrap()
}

fn leaf() -> BoxedStrategy<Filter> {
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
fn equalities() -> BoxedStrategy<Filter> {
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

fn filter() -> BoxedStrategy<Option<Filter>> {
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
fn order() -> BoxedStrategy<Vec<Order>> {
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
fn cursor() -> BoxedStrategy<Option<Cursor>> {
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

fn source() -> BoxedStrategy<Source> {
    prop_oneof![
        3 => Just(Source::collection(&ResourcePath::parse("c").unwrap()).unwrap()),
        2 => Just(Source::group(None, "c")),
        1 => Just(Source::group(Some(ResourcePath::parse("c/d0").unwrap()), "c")),
        1 => Just(Source::collection(&ResourcePath::parse("c/d0/c").unwrap()).unwrap()),
    ]
    .boxed()
}

fn query() -> BoxedStrategy<Query> {
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

fn index_field() -> BoxedStrategy<IndexField> {
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
fn composites() -> BoxedStrategy<Vec<IndexDefinition>> {
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

fn exemptions() -> BoxedStrategy<Vec<FieldPath>> {
    prop_oneof![
        3 => Just(vec![]),
        1 => Just(vec![field("b")]),
        1 => Just(vec![field("m")]),
    ]
    .boxed()
}

#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    invalid: bool,
    unsupported: bool,
    indexes_created: usize,
    rows: usize,
    branches: usize,
    zigzag: bool,
    listing: bool,
}

/// Plan (creating suggested indexes as asked), simulate and compare with the oracle.
fn check(
    docs: &[(ResourcePath, Map)],
    query: Query,
    mut composites: Vec<IndexDefinition>,
    exemptions: &[FieldPath],
) -> Result<Outcome, TestCaseError> {
    let Ok(query) = query.validate() else {
        return Ok(Outcome {
            invalid: true,
            ..Outcome::default()
        });
    };
    let mut outcome = Outcome::default();
    for _ in 0..40 {
        let catalog = Catalog {
            composites: composites.clone(),
            exemptions: exemptions.to_vec(),
        };
        match plan(&query, &catalog) {
            Ok(p) => {
                let exempt: Vec<(String, FieldPath)> = exemptions
                    .iter()
                    .map(|f| ("c".to_owned(), f.clone()))
                    .collect();
                let store = MemoryStore::new(docs, &composites, &exempt).unwrap();
                let got = simulate(&p, &query, &store)
                    .map_err(|e| TestCaseError::fail(format!("{e}\n{query}\n{p:#?}")))?;
                let expected = evaluate(&query, docs);
                prop_assert_eq!(
                    got.iter().map(|(p, _)| p.to_string()).collect::<Vec<_>>(),
                    expected
                        .iter()
                        .map(|(p, _)| p.to_string())
                        .collect::<Vec<_>>(),
                    "query: {}\nplan: {:#?}",
                    query,
                    p
                );
                prop_assert_eq!(&got, &expected);
                outcome.rows = got.len();
                outcome.branches = p.branches.len();
                outcome.zigzag = p
                    .branches
                    .iter()
                    .any(|b| matches!(b, Branch::Scans(s) if s.len() > 1));
                outcome.listing = p
                    .branches
                    .iter()
                    .any(|b| matches!(b, Branch::Collection(_)));
                return Ok(outcome);
            }
            Err(PlanError::MissingIndex {
                collection_group,
                scope,
                fields,
                call,
            }) => {
                prop_assert_eq!(collection_group.as_str(), "c");
                let group = query.source.all_descendants;
                prop_assert_eq!(scope == Scope::CollectionGroup, group);
                prop_assert_eq!(call.contains("collection_group"), group);
                // The suggestion is a definition create_index accepts, and is new.
                let parsed = IndexDefinition::parse_fields(&IndexDefinition::fields_json(&fields));
                prop_assert_eq!(parsed.as_ref().ok(), Some(&fields));
                prop_assert!(
                    !composites
                        .iter()
                        .any(|c| c.fields == fields && c.scope == scope),
                    "suggested an existing index: {}",
                    call
                );
                composites.push(IndexDefinition {
                    id: u32::try_from(composites.len()).unwrap() + 1,
                    collection_group,
                    scope,
                    fields,
                });
                outcome.indexes_created += 1;
            }
            Err(PlanError::Unsupported(reason)) => {
                let order = query.normalized_order();
                let name_not_last = order.last().is_none_or(|o| !o.field.is_document_id());
                let contains_ordered = query.filter.as_ref().is_some_and(|f| {
                    f.leaves().iter().any(|l| {
                        matches!(l, Filter::Field { field, op: FieldOp::ArrayContains | FieldOp::ArrayContainsAny, .. }
                            if order.iter().any(|o| o.field == *field))
                    })
                });
                prop_assert!(name_not_last || contains_ordered, "unsupported: {}", reason);
                outcome.unsupported = true;
                return Ok(outcome);
            }
        }
    }
    Err(TestCaseError::fail("the planner kept asking for indexes"))
}

/// Documents, a query, the composites that exist before planning, the exemptions.
type Case = (
    Vec<(ResourcePath, Map)>,
    Query,
    Vec<IndexDefinition>,
    Vec<FieldPath>,
);

fn case() -> impl Strategy<Value = Case> {
    (documents(), query(), composites(), exemptions())
}

proptest! {
    #![proptest_config(Config { cases: 2000, ..Config::default() })]

    #[test]
    fn plans_return_what_the_oracle_returns((docs, query, composites, exemptions) in case()) {
        check(&docs, query, composites, &exemptions)?;
    }
}

/// The generator exercises what the property is about (a property over mostly invalid or
/// empty queries could not fail).
#[test]
fn the_property_covers_the_interesting_cases() {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let strategy = case();
    let mut totals = [0usize; 8];
    let n = 600;
    for _ in 0..n {
        let (docs, query, composites, exemptions) =
            strategy.new_tree(&mut runner).unwrap().current();
        let outcome = check(&docs, query, composites, &exemptions).unwrap();
        let planned = !outcome.invalid && !outcome.unsupported;
        totals[0] += usize::from(outcome.invalid);
        totals[1] += usize::from(planned);
        totals[2] += usize::from(planned && outcome.rows > 0);
        totals[3] += usize::from(outcome.indexes_created > 0);
        totals[4] += usize::from(outcome.branches > 1);
        totals[5] += usize::from(outcome.zigzag);
        totals[6] += usize::from(outcome.listing);
        totals[7] += usize::from(outcome.unsupported);
    }
    eprintln!(
        "invalid, planned, nonempty, created, unions, zigzags, listings, unsupported: {totals:?}"
    );
    let [_, planned, nonempty, created, unions, zigzags, listings, _] = totals;
    assert!(planned * 2 >= n, "{totals:?}");
    assert!(nonempty * 4 >= n, "{totals:?}");
    assert!(created * 10 >= n, "{totals:?}");
    assert!(unions * 10 >= n, "{totals:?}");
    assert!(zigzags * 20 >= n, "{totals:?}");
    assert!(listings * 20 >= n, "{totals:?}");
}
