//! The text dialect: the Firestore paper's queries, every operator and literal, clauses,
//! printing back, and every error with its position.

// Test helpers outside #[test] functions unwrap and panic to report failures.
#![allow(clippy::unwrap_used, clippy::panic)]

use docstore_core::query::{
    parse_query, AggregateFunction, Aggregation, Cursor, Direction, FieldOp, Filter, Limit, Order,
    Query, QueryError, Selection, Source, UnaryOp,
};
use docstore_core::{typed_json, FieldPath, ResourcePath, Timestamp, Value};

fn q(text: &str) -> Query {
    parse_query(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn err(text: &str) -> QueryError {
    match parse_query(text) {
        Ok(query) => panic!("{text} parsed as {query:?}"),
        Err(e) => e,
    }
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

fn syntax(text: &str) -> (u64, u64, usize, String) {
    match err(text) {
        QueryError::Syntax {
            line,
            column,
            offset,
            message,
        } => (line, column, offset, message),
        other => panic!("{text}: expected a syntax error, got {other:?}"),
    }
}

#[test]
fn syntax_errors_carry_positions() {
    let (line, column, offset, message) = syntax("select * from c where a = ");
    assert_eq!((line, column, offset), (1, 27, 26), "{message}");
    let (line, column, offset, message) = syntax("select * from c\nwhere a = 1 and\n  b ~ 2");
    assert_eq!((line, column, offset), (3, 5, 36), "{message}");
    assert!(message.contains("operator"), "{message}");
    let (line, column, _, message) = syntax("select * from c where a = SF");
    assert_eq!((line, column), (1, 27));
    assert!(message.contains("quotes"), "{message}");
    // Columns count characters, offsets bytes.
    let (line, column, offset, _) = syntax("select * from /städte where ä = 1");
    assert_eq!((line, column, offset), (1, 29, 29));
    let (_, column, _, message) = syntax("select * from c where a = 'unterminated");
    assert_eq!(column, 27, "{message}");
    let (_, column, _, _) = syntax("select * from c where a = 1 extra");
    assert_eq!(column, 29);
    let (_, column, _, _) = syntax("select * from c where a = {\"$timestamp\": 5}");
    assert_eq!(column, 27);
    let (_, column, _, _) = syntax("select * from c where a = {\"a\": }");
    assert_eq!(column, 27);
    let (_, column, _, _) = syntax("select * from c where a = 1e999");
    assert_eq!(column, 27);
    let (_, column, _, _) = syntax("select * from c where a = 'a\\qb'");
    assert_eq!(column, 27);
    let (_, column, _, _) = syntax("select * from c where a = 'a\\0b'");
    assert_eq!(column, 27);
    let (_, column, _, _) = syntax("select * from /`open");
    assert_eq!(column, 16);
    let (_, column, _, _) = syntax("select * from group(x");
    assert_eq!(column, 22);
    let (_, column, _, _) = syntax("select * from ");
    assert_eq!(column, 15);
    let (_, column, _, _) = syntax("select * from /a//b");
    assert_eq!(column, 18);
    let (_, column, _, _) = syntax("select * where a = 1");
    assert_eq!(column, 10);
    let (_, column, _, _) = syntax("select from c");
    assert_eq!(column, 8);
    let (_, column, _, _) = syntax("select a, count(*) from c");
    assert_eq!(column, 11);
    let (_, column, _, _) = syntax("select a as b from c");
    assert_eq!(column, 10);
    let (_, column, _, _) = syntax("select * from c limit 1 limit 2");
    assert_eq!(column, 25);
    let (_, column, _, _) = syntax("select * from c order by a start at 1");
    assert_eq!(column, 37);
    let (_, column, _, _) = syntax("select * from c where a is maybe");
    assert_eq!(column, 28);
    let (_, column, _, _) = syntax("select * from c where (a = 1");
    assert_eq!(column, 29);
    let (_, column, _, _) = syntax("select * from c where `` = 1");
    assert_eq!(column, 23);
    let (_, column, _, _) = syntax("select * from c where a = 1 and");
    assert_eq!(column, 32);
    let (_, column, _, _) = syntax("select * from c where a = @");
    assert_eq!(column, 27);
    let (_, column, _, _) = syntax("select count(x) from c");
    assert_eq!(column, 14);
    assert_eq!(err("select * frm c").sqlstate(), "42601");
}

#[test]
fn semantic_errors() {
    assert!(matches!(
        err("select * from /restaurants/one"),
        QueryError::InvalidCollection { .. }
    ));
    assert!(matches!(
        err("select * from /restaurants/group(ratings)"),
        QueryError::InvalidCollection { .. }
    ));
    assert!(matches!(
        err("select * from /a/__b__/c"),
        QueryError::InvalidCollection { .. }
    ));
    assert!(matches!(
        err("select * from c where a array_contains_any 'x'"),
        QueryError::InvalidOperand {
            op: "array_contains_any",
            ..
        }
    ));
    assert!(matches!(
        err("select * from c where a in 5"),
        QueryError::InvalidOperand { op: "in", .. }
    ));
    assert!(matches!(
        err("select * from c where a in ()"),
        QueryError::InvalidOperand { op: "in", .. }
    ));
    assert!(matches!(
        err("select * from c where a < null"),
        QueryError::InvalidOperand { op: "<", .. }
    ));
    assert!(matches!(
        err("select * from c where a >= {\"$double\": \"NaN\"}"),
        QueryError::InvalidOperand { op: ">=", .. }
    ));
    assert!(matches!(
        err("select * from c where a array_contains null"),
        QueryError::InvalidOperand { .. }
    ));
    assert!(matches!(
        err("select * from c where __name__ is null"),
        QueryError::InvalidOperand { .. }
    ));
    assert!(matches!(
        err("select * from c where __name__ > 5"),
        QueryError::InvalidOperand { .. }
    ));
    assert!(matches!(
        err("select * from group(c) where __name__ = 'plain'"),
        QueryError::InvalidDocumentName { .. }
    ));
    let thirty_one = (0..31)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    assert!(matches!(
        err(&format!("select * from c where a in ({thirty_one})")),
        QueryError::TooManyValues {
            count: 31,
            max: 30,
            ..
        }
    ));
    assert!(matches!(
        err("select * from c where a not in (1,2,3,4,5,6,7,8,9,10,11)"),
        QueryError::TooManyValues {
            count: 11,
            max: 10,
            ..
        }
    ));
    assert!(matches!(
        err("select * from c where a in (1,2,3,4,5,6) and b in (1,2,3,4,5,6)"),
        QueryError::TooManyDisjunctions { count: 36 }
    ));
    assert!(matches!(
        err("select * from c where a != 1 and b != 2"),
        QueryError::ConflictingFilters { .. }
    ));
    assert!(matches!(
        err("select * from c where a not in (1) and b is not null"),
        QueryError::ConflictingFilters { .. }
    ));
    assert!(matches!(
        err("select * from c where a not in (1) and b in (2)"),
        QueryError::ConflictingFilters { .. }
    ));
    assert!(matches!(
        err("select * from c where a not in (1) and (b = 1 or c = 2)"),
        QueryError::ConflictingFilters { .. }
    ));
    assert!(matches!(
        err("select * from c where a array_contains 1 and b array_contains_any (2)"),
        QueryError::ConflictingFilters { .. }
    ));
    assert!(matches!(
        err("select * from c where not a < 1"),
        QueryError::UnsupportedNegation { op: "<", .. }
    ));
    assert!(matches!(
        err("select * from c where not (a = 1 and b array_contains 2)"),
        QueryError::UnsupportedNegation {
            op: "array_contains",
            ..
        }
    ));
    assert!(matches!(
        err("select * from c order by a, a desc"),
        QueryError::DuplicateOrder { .. }
    ));
    assert!(matches!(
        err("select * from c order by a start at (1, 'd', 3)"),
        QueryError::CursorTooLong {
            count: 3,
            max: 2,
            ..
        }
    ));
    assert!(matches!(
        err("select * from c order by a end before ()"),
        QueryError::InvalidCursor { .. }
    ));
    assert!(matches!(
        err("select * from c order by a start at (1, 2)"),
        QueryError::InvalidCursor { .. }
    ));
    assert!(matches!(
        err("select * from c limit -1"),
        QueryError::InvalidLimit { what: "limit", .. }
    ));
    assert!(matches!(
        err("select * from c limit 2147483648"),
        QueryError::InvalidLimit { what: "limit", .. }
    ));
    assert!(matches!(
        err("select * from c offset 1.5"),
        QueryError::InvalidLimit { what: "offset", .. }
    ));
    assert!(matches!(
        err("select count_up_to(0) from c"),
        QueryError::InvalidLimit {
            what: "count_up_to",
            ..
        }
    ));
    assert!(matches!(
        err("select * from c limit last 3"),
        QueryError::LimitToLastWithoutOrder
    ));
    assert!(matches!(
        err("select count(*), count(*) as a, count(*) as b, count(*) as c, count(*) as d, count(*) as e from c"),
        QueryError::TooManyAggregations { count: 6 }
    ));
    assert!(matches!(
        err("select count(*) as n, sum(x) as n from c"),
        QueryError::InvalidAggregation { .. }
    ));
    assert!(matches!(
        err("select count(*) as `__x__` from c"),
        QueryError::InvalidAggregation { .. }
    ));
    assert!(matches!(
        err("select avg(__name__) from c"),
        QueryError::InvalidAggregation { .. }
    ));
    for e in [
        err("select * from /restaurants/one"),
        err("select * from c limit last 3"),
    ] {
        assert_eq!(e.sqlstate(), "22023", "{e}");
    }
}

#[test]
fn errors_display_clearly() {
    let e = err("select * from c\nwhere a = ");
    assert_eq!(
        e.to_string(),
        "syntax error at line 2, column 11: expected a value, found the end of the query"
    );
    let e = err("select * from c where a not in (1,2,3,4,5,6,7,8,9,10,11)");
    assert_eq!(e.to_string(), "a not in accepts at most 10 values, got 11");
}
