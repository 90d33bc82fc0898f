//! Printing a [`Query`] in the text dialect (`Display`). What is printed parses back to the
//! same query: `parse_query(&q.to_string()) == Ok(q)` for every validated `q`.

use std::fmt::{self, Write as _};

use crate::path::FieldPath;
use crate::typed_json;
use crate::value::Value;

use super::ast::{
    AggregateFunction, Cursor, Direction, FieldOp, Filter, Limit, Query, Selection, Source,
};
use super::prepass::is_plain_segment_char;

/// Words of the dialect; a field segment spelled like one is printed in backticks.
const KEYWORDS: [&str; 34] = [
    "select",
    "from",
    "where",
    "order",
    "by",
    "asc",
    "desc",
    "limit",
    "offset",
    "start",
    "end",
    "at",
    "after",
    "before",
    "and",
    "or",
    "not",
    "in",
    "is",
    "null",
    "nan",
    "true",
    "false",
    "array_contains",
    "array_contains_any",
    "group",
    "as",
    "count",
    "count_up_to",
    "sum",
    "avg",
    "last",
    "to",
    "timestamp",
];

fn is_simple(segment: &str) -> bool {
    let mut chars = segment.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A field segment or alias: bare when it is an identifier and no keyword, else in backticks
/// (a backtick inside doubled).
pub(crate) fn write_segment(out: &mut String, segment: &str) {
    if is_simple(segment) && !KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(segment)) {
        out.push_str(segment);
    } else {
        out.push('`');
        out.push_str(&segment.replace('`', "``"));
        out.push('`');
    }
}

/// A field path in the text dialect.
pub(crate) fn write_field(out: &mut String, field: &FieldPath) {
    for (i, segment) in field.segments().iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        write_segment(out, segment);
    }
}

/// A value as a literal of the text dialect: JSON-style strings, numbers keeping their type
/// (`1` integer, `1.0` double), `timestamp "..."`, arrays in brackets, and typed JSON for
/// the other types (`{"$bytes": ".."}`, `{"$double": "NaN"}`, maps).
pub fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Integer(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Double(d) => typed_json::write_double(out, *d),
        Value::String(s) => typed_json::write_str(out, s),
        Value::Timestamp(t) => {
            out.push_str("timestamp ");
            typed_json::write_str(out, &t.to_rfc3339());
        }
        Value::Array(items) => {
            out.push('[');
            write_values(out, items);
            out.push(']');
        }
        other => out.push_str(&typed_json::to_string(other)),
    }
}

fn write_values(out: &mut String, values: &[Value]) {
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_value(out, value);
    }
}

fn write_path_segment(out: &mut String, segment: &str) {
    if !segment.is_empty()
        && segment.chars().all(is_plain_segment_char)
        && !segment.eq_ignore_ascii_case("group")
    {
        out.push_str(segment);
    } else {
        out.push('`');
        out.push_str(&segment.replace('`', "``"));
        out.push('`');
    }
}

/// The `from` clause operand: `/restaurants/one/ratings`, `group(ratings)`,
/// `/restaurants/one/group(ratings)`.
impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        for segment in self.parent.iter().flat_map(|p| p.segments()) {
            out.push('/');
            write_path_segment(&mut out, segment);
        }
        if self.all_descendants {
            if !out.is_empty() {
                out.push('/');
            }
            out.push_str("group(");
            write_path_segment(&mut out, &self.collection_id);
            out.push(')');
        } else {
            out.push('/');
            write_path_segment(&mut out, &self.collection_id);
        }
        f.write_str(&out)
    }
}

fn write_filter(out: &mut String, filter: &Filter, nested: bool) {
    match filter {
        Filter::Field { field, op, value } => {
            write_field(out, field);
            out.push(' ');
            out.push_str(op.text());
            out.push(' ');
            match value {
                Value::Array(items) if op.takes_list() => {
                    out.push('(');
                    write_values(out, items);
                    out.push(')');
                }
                other => write_value(out, other),
            }
        }
        Filter::Unary { field, op } => {
            write_field(out, field);
            out.push(' ');
            out.push_str(op.text());
        }
        Filter::And(children) | Filter::Or(children) => {
            let joiner = if matches!(filter, Filter::And(_)) {
                " and "
            } else {
                " or "
            };
            if nested {
                out.push('(');
            }
            for (i, child) in children.iter().enumerate() {
                if i > 0 {
                    out.push_str(joiner);
                }
                write_filter(out, child, true);
            }
            if nested {
                out.push(')');
            }
        }
    }
}

/// A filter in the text dialect (nested AND/OR in parentheses).
impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        write_filter(&mut out, self, false);
        f.write_str(&out)
    }
}

fn write_cursor(out: &mut String, keyword: &str, cursor: &Cursor) {
    out.push(' ');
    out.push_str(keyword);
    out.push_str(" (");
    write_values(out, &cursor.values);
    out.push(')');
}

/// The query in the text dialect.
impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::from("select ");
        match &self.selection {
            Selection::Documents => out.push('*'),
            Selection::Fields(fields) if fields.is_empty() => out.push_str("__name__"),
            Selection::Fields(fields) => {
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_field(&mut out, field);
                }
            }
            Selection::Aggregations(aggregations) => {
                for (i, aggregation) in aggregations.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    match &aggregation.function {
                        AggregateFunction::Count { up_to: None } => out.push_str("count(*)"),
                        AggregateFunction::Count { up_to: Some(n) } => {
                            let _ = write!(out, "count_up_to({n})");
                        }
                        AggregateFunction::Sum(field) | AggregateFunction::Avg(field) => {
                            out.push_str(
                                if matches!(aggregation.function, AggregateFunction::Sum(_)) {
                                    "sum("
                                } else {
                                    "avg("
                                },
                            );
                            write_field(&mut out, field);
                            out.push(')');
                        }
                    }
                    out.push_str(" as ");
                    write_segment(&mut out, &aggregation.alias);
                }
            }
        }
        let _ = write!(out, " from {}", self.source);
        if let Some(filter) = &self.filter {
            out.push_str(" where ");
            write_filter(&mut out, filter, false);
        }
        for (i, order) in self.order_by.iter().enumerate() {
            out.push_str(if i == 0 { " order by " } else { ", " });
            write_field(&mut out, &order.field);
            if order.direction == Direction::Descending {
                out.push_str(" desc");
            }
        }
        if let Some(start) = &self.start {
            write_cursor(
                &mut out,
                if start.inclusive {
                    "start at"
                } else {
                    "start after"
                },
                start,
            );
        }
        if let Some(end) = &self.end {
            write_cursor(
                &mut out,
                if end.inclusive {
                    "end at"
                } else {
                    "end before"
                },
                end,
            );
        }
        match self.limit {
            Some(Limit::First(n)) => {
                let _ = write!(out, " limit {n}");
            }
            Some(Limit::Last(n)) => {
                let _ = write!(out, " limit last {n}");
            }
            None => {}
        }
        if self.offset > 0 {
            let _ = write!(out, " offset {}", self.offset);
        }
        f.write_str(&out)
    }
}

impl fmt::Display for FieldOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}
