//! Errors of the text dialect: syntax errors with their positions, and every rule a query can
//! break, each with its own variant and SQLSTATE.

// Test helpers outside #[test] functions unwrap and panic to report failures.
#![allow(clippy::panic)]

use docstore_core::query::{parse_query, QueryError};
use docstore_core::ErrorKind;

fn err(text: &str) -> QueryError {
    match parse_query(text) {
        Ok(query) => panic!("{text} parsed as {query:?}"),
        Err(e) => e,
    }
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
    assert_eq!(err("select * frm c").kind(), ErrorKind::Syntax);
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
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
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

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    // Within the bounds: 120 parentheses around a value of 64 nested arrays.
    let text = format!(
        "select * from c where {}a = {}1{}{}",
        "(".repeat(120),
        "[".repeat(64),
        "]".repeat(64),
        ")".repeat(120)
    );
    assert!(parse_query(&text).is_ok());
    for text in [
        format!(
            "select * from c where {}a = 1{}",
            "(".repeat(100_000),
            ")".repeat(100_000)
        ),
        format!("select * from c where {}a = 1", "not ".repeat(100_000)),
        format!(
            "select * from c where a = {}1{}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        ),
    ] {
        assert_eq!(err(&text).kind(), ErrorKind::Syntax);
    }
    let ok = format!("select * from c where {}a = 1", "not ".repeat(256));
    assert!(parse_query(&ok).is_ok());
    // Values deeper than typed JSON and the index encoding allow (64 levels) are refused.
    let deep = format!(
        "select * from c where a = {}1{}",
        "[".repeat(65),
        "]".repeat(65)
    );
    assert!(matches!(err(&deep), QueryError::InvalidOperand { .. }));
    let deep_list = format!(
        "select * from c where a in ({}1{})",
        "[".repeat(65),
        "]".repeat(65)
    );
    assert!(matches!(err(&deep_list), QueryError::InvalidOperand { .. }));
    let deep_cursor = format!(
        "select * from c order by a start at ({}{{\"k\": 1}}{})",
        "[".repeat(64),
        "]".repeat(64)
    );
    assert!(matches!(
        err(&deep_cursor),
        QueryError::InvalidCursor { .. }
    ));
}
