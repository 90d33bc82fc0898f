//! Whether a document matches a query, and the order of results: the planner-independent
//! semantics that the extension's differential tests and the live-query sidecar share.
//!
//! Firestore's rules, as its backend applies them (see `docs/query.md` for the table):
//! - a document must be in the queried collection (or group) and have a value for every
//!   field of the normalised order (so `order by x` drops documents without `x`);
//! - `=`, `<`, `<=`, `>`, `>=` only match values of the operand's type class (numbers
//!   compare across integers and doubles): `a < 5` never matches a string, and a range
//!   never matches NaN;
//! - `!=` and `not in` match every existing, non-null value that differs (of any type);
//! - `is null` / `is nan` match exactly null / NaN; `is not null` matches existing non-null
//!   values, `is not nan` existing values that are neither null nor NaN;
//! - `in` is an OR of `=`; null and NaN in an `in` or `array_contains_any` list match
//!   nothing; a null in a `not in` list makes the filter match nothing;
//! - `array_contains` / `array_contains_any` look for an element equal to the operand;
//! - cursors bound the position in the full normalised order (including `__name__`).

use std::borrow::Cow;
use std::cmp::Ordering;

use crate::compare::compare;
use crate::path::{FieldPath, ResourcePath};
use crate::value::{Map, Value};

use super::ast::{Cursor, FieldOp, Filter, Order, Query, UnaryOp};

/// The value of `field` in the document at `path`: `__name__` is the document's own name
/// (as a reference); `None` when the field is missing.
pub fn field_value<'a>(
    path: &ResourcePath,
    doc: &'a Map,
    field: &FieldPath,
) -> Option<Cow<'a, Value>> {
    if field.is_document_id() {
        return Some(Cow::Owned(Value::Reference(path.clone())));
    }
    let (first, rest) = field.segments().split_first()?;
    let mut value = doc.get(first)?;
    for segment in rest {
        match value {
            Value::Map(map) => value = map.get(segment)?,
            _ => return None,
        }
    }
    Some(Cow::Borrowed(value))
}

/// A query with its normalised order computed once: use it to match many documents.
#[derive(Debug, Clone)]
pub struct Matcher<'q> {
    query: &'q Query,
    order: Vec<Order>,
}

impl<'q> Matcher<'q> {
    pub fn new(query: &'q Query) -> Matcher<'q> {
        Matcher {
            query,
            order: query.normalized_order(),
        }
    }

    /// The normalised order.
    pub fn order(&self) -> &[Order] {
        &self.order
    }

    /// See [`matches`].
    pub fn matches(&self, path: &ResourcePath, doc: &Map) -> bool {
        self.query.source.contains(path)
            && self
                .order
                .iter()
                .all(|o| field_value(path, doc, &o.field).is_some())
            && self
                .query
                .filter
                .as_ref()
                .is_none_or(|f| filter_matches(f, path, doc))
            && self
                .query
                .start
                .as_ref()
                .is_none_or(|c| self.after_start(c, path, doc))
            && self
                .query
                .end
                .as_ref()
                .is_none_or(|c| self.before_end(c, path, doc))
    }

    /// See [`compare_results`].
    pub fn compare(&self, a: (&ResourcePath, &Map), b: (&ResourcePath, &Map)) -> Ordering {
        for order in &self.order {
            let x = field_value(a.0, a.1, &order.field);
            let y = field_value(b.0, b.1, &order.field);
            let o = match (x, y) {
                (Some(x), Some(y)) => compare(&x, &y),
                // Only for documents that do not match: missing sorts first.
                (x, y) => x.is_some().cmp(&y.is_some()),
            };
            let o = order.direction.apply(o);
            if o.is_ne() {
                return o;
            }
        }
        a.0.cmp(b.0)
    }

    /// The cursor's position compared with the document's, in the normalised order.
    fn cursor_vs_doc(&self, cursor: &Cursor, path: &ResourcePath, doc: &Map) -> Ordering {
        for (value, order) in cursor.values.iter().zip(&self.order) {
            let o = match field_value(path, doc, &order.field) {
                Some(field) => compare(value, &field),
                None => Ordering::Less,
            };
            let o = order.direction.apply(o);
            if o.is_ne() {
                return o;
            }
        }
        Ordering::Equal
    }

    fn after_start(&self, cursor: &Cursor, path: &ResourcePath, doc: &Map) -> bool {
        let o = self.cursor_vs_doc(cursor, path, doc);
        if cursor.inclusive {
            o.is_le()
        } else {
            o.is_lt()
        }
    }

    fn before_end(&self, cursor: &Cursor, path: &ResourcePath, doc: &Map) -> bool {
        let o = self.cursor_vs_doc(cursor, path, doc);
        if cursor.inclusive {
            o.is_ge()
        } else {
            o.is_gt()
        }
    }
}

/// Whether the document at `path` with fields `doc` is a result of `query` (ignoring
/// offset and limit, which depend on the other results): it is in the queried collection or
/// group, has every field of the normalised order, passes the filter and lies between the
/// cursors. For many documents build a [`Matcher`] once.
pub fn matches(query: &Query, path: &ResourcePath, doc: &Map) -> bool {
    Matcher::new(query).matches(path, doc)
}

/// The order of two results of `query`: its normalised order, ending in `__name__`, so two
/// different documents never compare equal.
pub fn compare_results(
    query: &Query,
    a: (&ResourcePath, &Map),
    b: (&ResourcePath, &Map),
) -> Ordering {
    Matcher::new(query).compare(a, b)
}

fn is_nan(value: &Value) -> bool {
    matches!(value, Value::Double(d) if d.is_nan())
}

fn equal(a: &Value, b: &Value) -> bool {
    compare(a, b).is_eq()
}

/// Whether a value of an `in` / `array_contains_any` list can match anything.
fn matchable(value: &Value) -> bool {
    !matches!(value, Value::Null) && !is_nan(value)
}

/// Whether the document passes the filter (the filter alone: no source, order or cursors).
pub fn filter_matches(filter: &Filter, path: &ResourcePath, doc: &Map) -> bool {
    match filter {
        Filter::And(children) => children.iter().all(|c| filter_matches(c, path, doc)),
        Filter::Or(children) => children.iter().any(|c| filter_matches(c, path, doc)),
        Filter::Unary { field, op } => {
            let Some(value) = field_value(path, doc, field) else {
                return false;
            };
            let null = matches!(*value, Value::Null);
            match op {
                UnaryOp::IsNull => null,
                UnaryOp::IsNan => is_nan(&value),
                UnaryOp::IsNotNull => !null,
                UnaryOp::IsNotNan => !null && !is_nan(&value),
            }
        }
        Filter::Field { field, op, value } => {
            let Some(other) = field_value(path, doc, field) else {
                return false;
            };
            field_op_matches(*op, &other, value)
        }
    }
}

fn field_op_matches(op: FieldOp, other: &Value, operand: &Value) -> bool {
    match op {
        FieldOp::Eq => equal(other, operand),
        FieldOp::Ne => !matches!(other, Value::Null) && !equal(other, operand),
        FieldOp::Lt | FieldOp::Le | FieldOp::Gt | FieldOp::Ge => {
            if !matchable(operand) || is_nan(other) || other.type_order() != operand.type_order() {
                return false;
            }
            let o = compare(other, operand);
            match op {
                FieldOp::Lt => o.is_lt(),
                FieldOp::Le => o.is_le(),
                FieldOp::Gt => o.is_gt(),
                _ => o.is_ge(),
            }
        }
        FieldOp::ArrayContains => match other {
            Value::Array(items) => matchable(operand) && items.iter().any(|e| equal(e, operand)),
            _ => false,
        },
        FieldOp::In => match operand {
            Value::Array(list) => list.iter().any(|e| matchable(e) && equal(other, e)),
            _ => false,
        },
        FieldOp::NotIn => match operand {
            Value::Array(list) => {
                !list.iter().any(|e| matches!(e, Value::Null))
                    && !matches!(other, Value::Null)
                    && !list.iter().any(|e| equal(other, e))
            }
            _ => false,
        },
        FieldOp::ArrayContainsAny => match (other, operand) {
            (Value::Array(items), Value::Array(list)) => list
                .iter()
                .any(|e| matchable(e) && items.iter().any(|item| equal(item, e))),
            _ => false,
        },
    }
}
