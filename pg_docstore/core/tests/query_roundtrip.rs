//! Property tests of the two front ends: every valid query prints in the text dialect and in
//! the structured JSON form and parses back to the same AST; the parsers never panic on
//! arbitrary input; the evaluator's results are exactly the matching documents in order.
#![allow(clippy::unwrap_used, clippy::panic)]

use docstore_core::query::{
    compare_results, evaluate, matches, parse_query, parse_structured, parse_structured_str,
    to_structured, AggregateFunction, Aggregation, Cursor, Direction, FieldOp, Filter, Limit,
    Order, Query, Selection, Source, UnaryOp,
};
use docstore_core::value::{GeoPoint, Map, Timestamp};
use docstore_core::{FieldPath, ResourcePath, Value};
use proptest::prelude::*;

/// Segments for paths and fields: plain, keywords, and ones that need quoting.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "a", "b", "city", "type", "rating", "x_1", "_y", "Z",
        ])
        .prop_map(str::to_owned),
        2 => prop::sample::select(vec![
            "select", "from", "where", "not", "group", "in", "is", "null", "order", "limit",
            "count", "timestamp", "true", "last",
        ])
        .prop_map(str::to_owned),
        2 => prop::sample::select(vec![
            "a b", "a.b", "x`y", "``", "1st", "ünï", "(p)", "a,b", "semi;colon", "q'uote",
            "d\"q", "tab\there", "new\nline", "-- not a comment", "/*x*/", "é", "😀",
        ])
        .prop_map(str::to_owned),
        1 => "[a-zA-Z0-9 _.`'\"()-]{1,8}",
    ]
}

fn id_segment() -> impl Strategy<Value = String> {
    segment().prop_filter("a valid path segment", |s| {
        !s.contains('/') && ResourcePath::from_segments(vec![s.clone()]).is_ok()
    })
}

fn field() -> impl Strategy<Value = FieldPath> {
    prop_oneof![
        8 => prop::collection::vec(segment(), 1..3).prop_map(|s| FieldPath::new(s).unwrap()),
        1 => Just(FieldPath::parse("__name__").unwrap()),
    ]
}

fn doc_path() -> impl Strategy<Value = ResourcePath> {
    prop::collection::vec((id_segment(), id_segment()), 1..3).prop_map(|pairs| {
        ResourcePath::from_segments(pairs.into_iter().flat_map(|(a, b)| [a, b]).collect()).unwrap()
    })
}

fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0f64),
        Just(-0.0),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(5e-324),
        Just(1e300),
        Just(9_223_372_036_854_775_808.0),
        Just(1.0),
        (-1000i32..1000).prop_map(|i| f64::from(i) / 8.0),
        any::<u64>().prop_map(f64::from_bits),
    ]
    // Any NaN prints as the one NaN.
    .prop_map(|d| if d.is_nan() { f64::NAN } else { d })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "",
            "SF",
            "BBQ",
            "it's",
            "say \"hi\"",
            "back\\slash",
            "\u{1}\u{7f}\u{85}\u{2028}",
            "😀 é"
        ])
        .prop_map(str::to_owned),
        any::<String>().prop_map(|s| s.replace('\0', "")),
    ]
}

fn leaf_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Boolean),
        prop_oneof![Just(i64::MIN), Just(i64::MAX), -100i64..100, any::<i64>()]
            .prop_map(Value::Integer),
        double().prop_map(Value::Double),
        (-62_135_596_800_000_000i64..=253_402_300_799_999_999)
            .prop_map(|m| Value::Timestamp(Timestamp::from_micros(m).unwrap())),
        text().prop_map(Value::String),
        prop::collection::vec(any::<u8>(), 0..6).prop_map(Value::Bytes),
        doc_path().prop_map(Value::Reference),
        ((-90.0f64..=90.0), (-180.0f64..=180.0)).prop_map(|(latitude, longitude)| {
            Value::GeoPoint(GeoPoint {
                latitude,
                longitude,
            })
        }),
        prop::collection::vec(double(), 0..3).prop_map(Value::Vector),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf_value().prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    segment(),
                    Just("$ref".to_owned()),
                    Just("$double".to_owned()),
                    Just("$increment".to_owned())
                ],
                inner,
                0..3
            )
            .prop_map(|m| Value::Map(m.into_iter().collect::<Map>())),
        ]
    })
}

fn list() -> impl Strategy<Value = Value> {
    prop::collection::vec(value(), 1..4).prop_map(Value::Array)
}

fn leaf_filter() -> impl Strategy<Value = Filter> {
    prop_oneof![
        4 => (field(), prop::sample::select(vec![
            FieldOp::Eq, FieldOp::Lt, FieldOp::Le, FieldOp::Gt, FieldOp::Ge, FieldOp::ArrayContains,
        ]), value())
            .prop_map(|(field, op, value)| Filter::Field { field, op, value }),
        1 => (field(), value()).prop_map(|(field, value)| Filter::Field { field, op: FieldOp::Ne, value }),
        2 => (field(), prop::sample::select(vec![FieldOp::In, FieldOp::NotIn, FieldOp::ArrayContainsAny]), list())
            .prop_map(|(field, op, value)| Filter::Field { field, op, value }),
        1 => (field(), prop::sample::select(UnaryOp::ALL.to_vec()))
            .prop_map(|(field, op)| Filter::Unary { field, op }),
    ]
}

fn filter() -> impl Strategy<Value = Filter> {
    leaf_filter().prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..4).prop_map(Filter::And),
            prop::collection::vec(inner, 2..4).prop_map(Filter::Or),
        ]
    })
}

fn source() -> impl Strategy<Value = Source> {
    (prop::option::of(doc_path()), id_segment(), any::<bool>()).prop_map(
        |(parent, collection_id, all_descendants)| Source {
            parent,
            collection_id,
            all_descendants,
        },
    )
}

fn selection() -> impl Strategy<Value = Selection> {
    let function = prop_oneof![
        Just(AggregateFunction::Count { up_to: None }),
        (1u64..1000).prop_map(|n| AggregateFunction::Count { up_to: Some(n) }),
        field().prop_map(AggregateFunction::Sum),
        field().prop_map(AggregateFunction::Avg),
    ];
    prop_oneof![
        Just(Selection::Documents),
        prop::collection::vec(field(), 0..3).prop_map(Selection::Fields),
        prop::collection::vec((segment(), function), 1..4).prop_map(|items| {
            Selection::Aggregations(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, (alias, function))| Aggregation {
                        alias: format!("{alias}{i}"),
                        function,
                    })
                    .collect(),
            )
        }),
    ]
}

fn query() -> impl Strategy<Value = Query> {
    (
        source(),
        selection(),
        prop::option::of(filter()),
        prop::collection::vec(
            (
                field(),
                prop::sample::select(vec![Direction::Ascending, Direction::Descending]),
            ),
            0..3,
        ),
        prop::option::of((prop::collection::vec(value(), 1..3), any::<bool>())),
        prop::option::of((prop::collection::vec(value(), 1..2), any::<bool>())),
        prop_oneof![Just(0u32), 0u32..100, Just(2_147_483_647)],
        prop::option::of((0u32..50, any::<bool>())),
    )
        .prop_filter_map(
            "valid queries",
            |(source, selection, filter, orders, start, end, offset, limit)| {
                let query = Query {
                    source,
                    selection,
                    filter,
                    order_by: orders
                        .into_iter()
                        .map(|(field, direction)| Order::new(field, direction))
                        .collect(),
                    start: start.map(|(values, inclusive)| Cursor { values, inclusive }),
                    end: end.map(|(values, inclusive)| Cursor { values, inclusive }),
                    offset,
                    limit: limit.map(|(n, last)| {
                        if last {
                            Limit::Last(n)
                        } else {
                            Limit::First(n)
                        }
                    }),
                };
                query.validate().ok()
            },
        )
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1000,
        max_global_rejects: 200_000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn text_prints_and_parses_back(query in query()) {
        let text = query.to_string();
        prop_assert_eq!(parse_query(&text), Ok(query), "{}", text);
    }

    #[test]
    fn structured_prints_and_parses_back(query in query()) {
        let json = to_structured(&query);
        prop_assert_eq!(parse_structured(&json), Ok(query.clone()), "{}", json);
        prop_assert_eq!(parse_structured_str(&json.to_string()), Ok(query));
    }

    #[test]
    fn text_parser_never_panics(text in "\\PC{0,80}") {
        let _ = parse_query(&text);
        let _ = parse_query(&format!("select * from c where {text}"));
        let _ = parse_structured_str(&text);
    }

    #[test]
    fn token_soup_never_panics(words in prop::collection::vec(prop::sample::select(vec![
        "select", "*", "from", "/a", "/a/b/group(c)", "group(", ")", "(", "where", "a", "=",
        "!=", "<", "in", "not", "is", "null", "nan", "and", "or", "order", "by", "desc",
        "start", "at", "after", "end", "before", "limit", "last", "offset", "1", "-", "'s'",
        "\"d\"", "[", "]", "{", "}", "{\"$ref\":\"a/b\"}", ",", "count(*)", "sum(", "as",
        "`q`", "__name__", "array_contains", "array_contains_any", "timestamp", ";", ".",
    ]), 0..24)) {
        let _ = parse_query(&words.join(" "));
    }

    #[test]
    fn evaluate_is_the_sorted_matching_documents(
        query in query(),
        docs in prop::collection::vec(
            (doc_path(), prop::collection::btree_map(segment(), value(), 0..4)),
            0..12,
        ),
    ) {
        let mut query = query;
        query.offset = 0;
        query.limit = None;
        query.selection = Selection::Documents;
        let docs: Vec<(ResourcePath, Map)> =
            docs.into_iter().map(|(p, m)| (p, m.into_iter().collect())).collect();
        let results = evaluate(&query, &docs);
        let expected = docs.iter().filter(|(p, d)| matches(&query, p, d)).count();
        prop_assert_eq!(results.len(), expected);
        for pair in results.windows(2) {
            prop_assert!(compare_results(&query, (&pair[0].0, &pair[0].1), (&pair[1].0, &pair[1].1)).is_le());
        }
    }
}
