//! The text dialect: the Firestore paper's queries, every operator and literal, clauses,
//! printing back, and every error with its position.

// Test helpers outside #[test] functions unwrap and panic to report failures.
#![allow(clippy::unwrap_used, clippy::panic)]

use docstore_core::query::{
    parse_query, AggregateFunction, Aggregation, Cursor, Direction, FieldOp, Filter, Limit, Order,
    Query, Selection, Source, UnaryOp,
};
use docstore_core::{typed_json, FieldPath, ResourcePath, Timestamp, Value};

fn q(text: &str) -> Query {
    parse_query(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn f(text: &str) -> FieldPath {
    FieldPath::parse(text).unwrap()
}

fn s(text: &str) -> Value {
    Value::String(text.into())
}

fn eq(field: &str, value: Value) -> Filter {
    Filter::field(f(field), FieldOp::Eq, value)
}

fn collection(path: &str) -> Source {
    Source::collection(&ResourcePath::parse(path).unwrap()).unwrap()
}

/// Printing a parsed query and parsing it again gives the same query.
fn reprint(query: &Query) {
    let text = query.to_string();
    let again = parse_query(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(&again, query, "{text}");
}

/// The example queries of the Firestore paper (SIGMOD 2023), verbatim. The first one ends a
/// sentence in the paper ("... order by time desc."); the sentence's period is not part of it.
const PAPER: [&str; 7] = [
    "select * from /restaurants/one/ratings\nwhere rating = 3 order by time desc",
    "select * from /restaurants\nwhere city=\"SF\" and type=\"BBQ\"\norder by avgRating desc",
    "select * from /restaurants\nwhere city=\"SF\" limit 10",
    "select * from /restaurants\nwhere numRatings > 2",
    "select * from /restaurants\norder by avgRating desc",
    "select * from /restaurants\nwhere city = \"SF\" and type = \"BBQ\"",
    "select * from /restaurants\nwhere city=\"New_York\" and type=\"BBQ\"\norder by avgRating desc",
];

#[test]
fn paper_queries_parse_verbatim() {
    for text in PAPER {
        let query = q(text);
        reprint(&query);
        assert_eq!(query.selection, Selection::Documents);
    }
    let ratings = q(PAPER[0]);
    assert_eq!(ratings.source, collection("restaurants/one/ratings"));
    assert_eq!(ratings.filter, Some(eq("rating", Value::Integer(3))));
    assert_eq!(
        ratings.order_by,
        vec![Order::new(f("time"), Direction::Descending)]
    );

    let bbq = q(PAPER[1]);
    assert_eq!(bbq.source, collection("restaurants"));
    assert_eq!(
        bbq.filter,
        Some(Filter::And(vec![eq("city", s("SF")), eq("type", s("BBQ"))]))
    );
    assert_eq!(
        bbq.order_by,
        vec![Order::new(f("avgRating"), Direction::Descending)]
    );
    assert_eq!(q(PAPER[2]).limit, Some(Limit::First(10)));
    assert_eq!(
        q(PAPER[3]).filter,
        Some(Filter::field(
            f("numRatings"),
            FieldOp::Gt,
            Value::Integer(2)
        ))
    );
    assert_eq!(q(PAPER[4]).filter, None);
    assert_eq!(q(PAPER[5]).filter, bbq.filter);
    assert_eq!(
        q(PAPER[6]).filter,
        Some(Filter::And(vec![
            eq("city", s("New_York")),
            eq("type", s("BBQ"))
        ]))
    );
}

#[test]
fn design_examples() {
    let query = q(
        r#"select * from /restaurants where city = "SF" and type = "BBQ" order by avgRating desc limit 10"#,
    );
    assert_eq!(query.limit, Some(Limit::First(10)));
    let aggregate =
        q("select count(*), avg(rating) from /restaurants/one/ratings where rating >= 3");
    assert_eq!(
        aggregate.selection,
        Selection::Aggregations(vec![
            Aggregation {
                alias: "field_1".into(),
                function: AggregateFunction::Count { up_to: None }
            },
            Aggregation {
                alias: "field_2".into(),
                function: AggregateFunction::Avg(f("rating"))
            },
        ])
    );
    assert_eq!(
        aggregate.filter,
        Some(Filter::field(f("rating"), FieldOp::Ge, Value::Integer(3)))
    );
    reprint(&aggregate);
    let group = q("select * from group(ratings)");
    assert_eq!(group.source, Source::group(None, "ratings"));
    reprint(&group);
}

#[test]
fn every_comparison_operator() {
    for (text, op) in [
        ("=", FieldOp::Eq),
        ("==", FieldOp::Eq),
        ("!=", FieldOp::Ne),
        ("<>", FieldOp::Ne),
        ("<", FieldOp::Lt),
        ("<=", FieldOp::Le),
        (">", FieldOp::Gt),
        (">=", FieldOp::Ge),
    ] {
        let query = q(&format!("select * from c where a {text} 1"));
        assert_eq!(
            query.filter,
            Some(Filter::field(f("a"), op, Value::Integer(1))),
            "{text}"
        );
        reprint(&query);
    }
}

#[test]
fn list_and_array_operators() {
    let list = Value::Array(vec![Value::Integer(1), s("x")]);
    for (text, op) in [
        ("a in (1, 'x')", FieldOp::In),
        ("a in [1, \"x\"]", FieldOp::In),
        ("a not in (1, 'x')", FieldOp::NotIn),
        ("a NOT IN [1, 'x']", FieldOp::NotIn),
        ("a array_contains_any (1, 'x')", FieldOp::ArrayContainsAny),
        ("a ARRAY_CONTAINS_ANY [1, 'x']", FieldOp::ArrayContainsAny),
    ] {
        let query = q(&format!("select * from c where {text}"));
        assert_eq!(
            query.filter,
            Some(Filter::field(f("a"), op, list.clone())),
            "{text}"
        );
        reprint(&query);
    }
    let contains = q("select * from c where tags array_contains 'red'");
    assert_eq!(
        contains.filter,
        Some(Filter::field(f("tags"), FieldOp::ArrayContains, s("red")))
    );
    reprint(&contains);
    let nested = q("select * from c where a array_contains [1, [2]]");
    assert_eq!(
        nested.filter,
        Some(Filter::field(
            f("a"),
            FieldOp::ArrayContains,
            Value::Array(vec![
                Value::Integer(1),
                Value::Array(vec![Value::Integer(2)])
            ])
        ))
    );
}

#[test]
fn unary_operators_and_null_nan_equality() {
    for (text, op) in [
        ("a is null", UnaryOp::IsNull),
        ("a IS NOT NULL", UnaryOp::IsNotNull),
        ("a is nan", UnaryOp::IsNan),
        ("a is not nan", UnaryOp::IsNotNan),
        ("a = null", UnaryOp::IsNull),
        ("a != null", UnaryOp::IsNotNull),
        ("a = {\"$double\": \"NaN\"}", UnaryOp::IsNan),
        ("a != {\"$double\": \"NaN\"}", UnaryOp::IsNotNan),
        ("not a is null", UnaryOp::IsNotNull),
        ("not (a is not nan)", UnaryOp::IsNan),
    ] {
        let query = q(&format!("select * from c where {text}"));
        assert_eq!(
            query.filter,
            Some(Filter::Unary { field: f("a"), op }),
            "{text}"
        );
        reprint(&query);
    }
}

#[test]
fn and_or_not_and_precedence() {
    let a = || eq("a", Value::Integer(1));
    let b = || eq("b", Value::Integer(2));
    let c = || eq("c", Value::Integer(3));
    assert_eq!(
        q("select * from x where a = 1 and b = 2 or c = 3").filter,
        Some(Filter::Or(vec![Filter::And(vec![a(), b()]), c()]))
    );
    assert_eq!(
        q("select * from x where a = 1 and (b = 2 or c = 3)").filter,
        Some(Filter::And(vec![a(), Filter::Or(vec![b(), c()])]))
    );
    // Nested ANDs and ORs flatten.
    assert_eq!(
        q("select * from x where (a = 1 and b = 2) and c = 3").filter,
        Some(Filter::And(vec![a(), b(), c()]))
    );
    assert_eq!(
        q("select * from x where a = 1 or (b = 2 or (c = 3))").filter,
        Some(Filter::Or(vec![a(), b(), c()]))
    );
    // NOT is pushed into the operators (De Morgan across AND/OR).
    let negated = q("select * from x where not (a != 1 or b not in (1, 2))");
    assert_eq!(
        negated.filter,
        Some(Filter::And(vec![
            a(),
            Filter::field(
                f("b"),
                FieldOp::In,
                Value::Array(vec![Value::Integer(1), Value::Integer(2)])
            ),
        ]))
    );
    assert_eq!(
        q("select * from x where not (a is null or b is not nan)").filter,
        Some(Filter::And(vec![
            Filter::Unary {
                field: f("a"),
                op: UnaryOp::IsNotNull
            },
            Filter::Unary {
                field: f("b"),
                op: UnaryOp::IsNan
            },
        ]))
    );
    assert_eq!(q("select * from x where not not a = 1").filter, Some(a()));
    assert_eq!(
        q("select * from x where not a != 1 or not a not in (2)").filter,
        Some(Filter::Or(vec![
            a(),
            Filter::field(f("a"), FieldOp::In, Value::Array(vec![Value::Integer(2)]))
        ]))
    );
    reprint(&negated);
    reprint(&q(
        "select * from x where a = 1 and (b = 2 or c = 3 and a < 4)",
    ));
}

#[test]
fn literals() {
    let value = |literal: &str| -> Value {
        match q(&format!("select * from c where a = {literal}")).filter {
            Some(Filter::Field { value, .. }) => value,
            other => panic!("{literal}: {other:?}"),
        }
    };
    assert_eq!(value("1"), Value::Integer(1));
    assert_eq!(value("-7"), Value::Integer(-7));
    assert_eq!(value("1.0"), Value::Double(1.0));
    assert_eq!(value("1e3"), Value::Double(1000.0));
    assert_eq!(value("-2.5E-1"), Value::Double(-0.25));
    assert_eq!(value(".5"), Value::Double(0.5));
    assert_eq!(value("9223372036854775807"), Value::Integer(i64::MAX));
    assert_eq!(value("-9223372036854775808"), Value::Integer(i64::MIN));
    assert_eq!(
        value("9223372036854775808"),
        Value::Double(9_223_372_036_854_775_808.0)
    );
    assert_eq!(value("true"), Value::Boolean(true));
    assert_eq!(value("FALSE"), Value::Boolean(false));
    assert_eq!(value("'it''s'"), s("it's"));
    assert_eq!(value(r#""say \"hi\"""#), s("say \"hi\""));
    assert_eq!(value(r"'a\'b'"), s("a'b"));
    assert_eq!(
        value(r#""tab\tnew\nline\\ \u00e9 \ud83d\ude00 \/""#),
        s("tab\tnew\nline\\ é 😀 /")
    );
    assert_eq!(value("'ünïcödé'"), s("ünïcödé"));
    assert_eq!(value("\"\""), s(""));
    assert_eq!(value("[]"), Value::Array(vec![]));
    assert_eq!(
        value("[1, 'a', [true], {\"k\": 2.0}]"),
        Value::Array(vec![
            Value::Integer(1),
            s("a"),
            Value::Array(vec![Value::Boolean(true)]),
            typed_json::parse(r#"{"k": 2.0}"#).unwrap(),
        ])
    );
    let ts = Value::Timestamp(Timestamp::parse_rfc3339("2022-09-01T13:23:22.123456Z").unwrap());
    assert_eq!(
        value(r#"{"$timestamp": "2022-09-01T13:23:22.123456Z"}"#),
        ts
    );
    assert_eq!(value("timestamp '2022-09-01T15:23:22.123456+02:00'"), ts);
    for typed in [
        r#"{"$bytes":"AAEC/w=="}"#,
        r#"{"$ref":"restaurants/one"}"#,
        r#"{"$geo":[37.5,-122.25]}"#,
        r#"{"$double":"-Infinity"}"#,
        r#"{"$double":"-0.0"}"#,
        r#"{"$vector":[1.0,2.5]}"#,
        r#"{"$map":{"$ref":"x"}}"#,
        r#"{"a":{"b":[1,"x\u0001"]},"c":null}"#,
    ] {
        assert_eq!(value(typed), typed_json::parse(typed).unwrap(), "{typed}");
        reprint(&q(&format!("select * from c where a = {typed}")));
    }
    // A typed JSON object mid-query does not swallow what follows.
    let query = q(r#"select * from c where a = {"x": "}"} and b = 1"#);
    assert_eq!(
        query.filter,
        Some(Filter::And(vec![
            eq("a", typed_json::parse(r#"{"x":"}"}"#).unwrap()),
            eq("b", Value::Integer(1))
        ]))
    );
}

#[test]
fn field_paths() {
    let query = q("select a.b, `x y`, `a.b`.c, `it``s`, __name__, `select` from c where `not` = 1 and `group`.x > 2");
    assert_eq!(
        query.selection,
        Selection::Fields(vec![
            f("a.b"),
            FieldPath::new(vec!["x y".into()]).unwrap(),
            FieldPath::new(vec!["a.b".into(), "c".into()]).unwrap(),
            FieldPath::new(vec!["it`s".into()]).unwrap(),
            f("select"),
        ])
    );
    assert_eq!(
        query.filter,
        Some(Filter::And(vec![
            eq("not", Value::Integer(1)),
            Filter::field(f("group.x"), FieldOp::Gt, Value::Integer(2)),
        ]))
    );
    reprint(&query);
    // Keywords are fields where a field is expected.
    let query = q("select * from c where type = 1 and time > 2 order by order, limit desc");
    assert_eq!(
        query.order_by,
        vec![
            Order::new(f("order"), Direction::Ascending),
            Order::new(f("limit"), Direction::Descending),
        ]
    );
    reprint(&query);
    assert_eq!(
        q("select __name__ from c").selection,
        Selection::Fields(vec![])
    );
}

#[test]
fn collection_paths_and_groups() {
    assert_eq!(
        q("select * from restaurants").source,
        collection("restaurants")
    );
    assert_eq!(
        q("select * from /restaurants/one/ratings").source,
        collection("restaurants/one/ratings")
    );
    let odd = q("select * from /my-coll/doc.1/sub_2 where a = 1");
    assert_eq!(odd.source, collection("my-coll/doc.1/sub_2"));
    let quoted = q("select * from /`a b`/`x``y`/c");
    assert_eq!(
        quoted.source,
        Source::collection(
            &ResourcePath::from_segments(vec!["a b".into(), "x`y".into(), "c".into()]).unwrap()
        )
        .unwrap()
    );
    reprint(&quoted);
    let unicode = q("select * from /städte/münchen/straßen");
    assert_eq!(unicode.source, collection("städte/münchen/straßen"));
    reprint(&unicode);
    let under = q("select * from /restaurants/one/group(ratings) where rating > 3");
    assert_eq!(
        under.source,
        Source::group(
            Some(ResourcePath::parse("restaurants/one").unwrap()),
            "ratings"
        )
    );
    reprint(&under);
    assert_eq!(
        q("select * from /group(ratings)").source,
        Source::group(None, "ratings")
    );
    assert_eq!(
        q("select * from GROUP ( ratings )").source,
        Source::group(None, "ratings")
    );
    // A collection called `group` is fine when not followed by `(`.
    let named_group = q("select * from /group where a = 1");
    assert_eq!(named_group.source, collection("group"));
    reprint(&named_group);
    assert_eq!(q("select * from /`group`").source, collection("group"));
    // Multi-line text keeps positions.
    let multi = q("select *\n  from\n   /a/b/c\n  where x = 1;");
    assert_eq!(multi.source, collection("a/b/c"));
}

#[test]
fn order_cursors_limit_offset() {
    let query =
        q("select * from c order by a, b desc start after (1, 'x') end at (5) limit 3 offset 2");
    assert_eq!(
        query.order_by,
        vec![
            Order::new(f("a"), Direction::Ascending),
            Order::new(f("b"), Direction::Descending)
        ]
    );
    assert_eq!(
        query.start,
        Some(Cursor {
            values: vec![Value::Integer(1), s("x")],
            inclusive: false
        })
    );
    assert_eq!(
        query.end,
        Some(Cursor {
            values: vec![Value::Integer(5)],
            inclusive: true
        })
    );
    assert_eq!(query.limit, Some(Limit::First(3)));
    assert_eq!(query.offset, 2);
    reprint(&query);
    // Clauses in any order.
    let again = q(
        "select * from c order by a asc, b desc offset 2 limit 3 end at (5) start after (1, 'x')",
    );
    assert_eq!(again, query);
    let other = q("select * from c order by a start at (1) end before (9) limit last 4");
    assert!(other.start.as_ref().unwrap().inclusive);
    assert!(!other.end.as_ref().unwrap().inclusive);
    assert_eq!(other.limit, Some(Limit::Last(4)));
    assert_eq!(
        q("select * from c order by a limit to last 4").limit,
        Some(Limit::Last(4))
    );
    reprint(&other);
    // A string at the __name__ position of a cursor is a document of the collection.
    let named = q("select * from /a/b/c order by x start after (1, 'doc9')");
    assert_eq!(
        named.start.unwrap().values[1],
        Value::Reference(ResourcePath::parse("a/b/c/doc9").unwrap())
    );
    let group = q("select * from group(c) order by __name__ start at ('a/b/c/d')");
    assert_eq!(
        group.start.unwrap().values[0],
        Value::Reference(ResourcePath::parse("a/b/c/d").unwrap())
    );
}

#[test]
fn name_filters_take_document_names() {
    let query = q("select * from /rooms where __name__ = 'r1' or __name__ in ('r2', 'rooms/r3')");
    let r = |p: &str| Value::Reference(ResourcePath::parse(p).unwrap());
    assert_eq!(
        query.filter,
        Some(Filter::Or(vec![
            eq("__name__", r("rooms/r1")),
            Filter::field(
                f("__name__"),
                FieldOp::In,
                Value::Array(vec![r("rooms/r2"), r("rooms/r3")])
            ),
        ]))
    );
    reprint(&query);
}

#[test]
fn aggregations() {
    let query = q("select count(*) as n, count_up_to(100), sum(price) as total, avg(a.b) from c");
    assert_eq!(
        query.selection,
        Selection::Aggregations(vec![
            Aggregation {
                alias: "n".into(),
                function: AggregateFunction::Count { up_to: None }
            },
            Aggregation {
                alias: "field_1".into(),
                function: AggregateFunction::Count { up_to: Some(100) }
            },
            Aggregation {
                alias: "total".into(),
                function: AggregateFunction::Sum(f("price"))
            },
            Aggregation {
                alias: "field_2".into(),
                function: AggregateFunction::Avg(f("a.b"))
            },
        ])
    );
    reprint(&query);
    // `count` without `(` is a field.
    assert_eq!(
        q("select count, sum from c").selection,
        Selection::Fields(vec![f("count"), f("sum")])
    );
}

#[test]
fn comments_and_case() {
    let query = q("SELECT * -- all of them\nFROM /c /* the collection */ WHERE A = 1 ORDER BY A DESC LIMIT 1;");
    assert_eq!(query.filter, Some(eq("A", Value::Integer(1))));
    assert_eq!(query.limit, Some(Limit::First(1)));
}
