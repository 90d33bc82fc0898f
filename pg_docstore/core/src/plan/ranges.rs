//! Range leaves on one key component, as byte ranges of whole keys.
//!
//! A component's possible encodings (values: the order-preserving encoding cut to 1,500
//! bytes; the name: its segment list) are prefix-free, so "the component is `P`" is the block
//! of keys that start with `prefix · P`, and every range leaf is a union of intervals between
//! block boundaries ([`Cut`]s) in the ascending encoding. A cut becomes key bytes by appending
//! it to the scan prefix ([`to_key_ranges`]); for an inverted (descending) component the
//! interval is mirrored: "just below `P`" becomes "just above `!P`".
//!
//! The matcher's rules become cuts exactly:
//! - `<`, `<=`, `>`, `>=` only match the operand's type class (numbers are one class, NaN
//!   excluded), so they stop at the class's first and last tags;
//! - `!=`, `not in`, `is not null`, `is not nan` exclude null (the lowest tag) and the listed
//!   values' blocks; a null in a `not in` list matches nothing;
//! - `=` on `__name__` is one block.
//!
//! An operand whose encoding is longer than 1,500 bytes cannot be compared exactly with the
//! cut keys: its bound is widened to include the whole block of its first 1,500 bytes, it
//! excludes nothing, and the plan asks for a recheck.

use std::cmp::Ordering;

use crate::encoding::{self, tag, MAX_INDEXED_VALUE_BYTES};
use crate::query::{FieldOp, Filter, UnaryOp};
use crate::value::{TypeOrder, Value};

use super::{KeyRange, PlanError};

/// A boundary between blocks of component encodings (ascending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cut {
    /// Before every encoding.
    Start,
    /// Just before every encoding that starts with the bytes.
    Below(Vec<u8>),
    /// Just after every encoding that starts with the bytes.
    Above(Vec<u8>),
    /// After every encoding.
    End,
}

/// Smallest byte string greater than every string that starts with `bytes` (`None` if there
/// is none: `bytes` is all `0xFF`).
pub(super) fn successor(bytes: &[u8]) -> Option<Vec<u8>> {
    let last = bytes.iter().rposition(|&b| b != 0xFF)?;
    let mut out = bytes[..=last].to_vec();
    out[last] += 1;
    Some(out)
}

/// [`successor`], or a bound above every key and name (they never start with `0xFF`).
pub(super) fn successor_or_top(bytes: &[u8]) -> Vec<u8> {
    successor(bytes).unwrap_or_else(|| vec![0xFF])
}

impl Cut {
    /// The cut's position as the least byte string at or after it (`None`: after all).
    fn position(&self) -> Option<Vec<u8>> {
        match self {
            Cut::Start => Some(Vec::new()),
            Cut::Below(p) => Some(p.clone()),
            Cut::Above(p) => successor(p),
            Cut::End => None,
        }
    }

    fn compare_to(&self, other: &Cut) -> Ordering {
        match (self.position(), other.position()) {
            (Some(a), Some(b)) => a.cmp(&b),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        }
    }
}

/// `[lo, hi)` in ascending encodings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Interval {
    pub lo: Cut,
    pub hi: Cut,
}

impl Interval {
    fn new(lo: Cut, hi: Cut) -> Interval {
        Interval { lo, hi }
    }

    fn is_empty(&self) -> bool {
        self.lo.compare_to(&self.hi).is_ge()
    }
}

/// A union of disjoint intervals, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Intervals(pub Vec<Interval>);

impl Intervals {
    pub fn all() -> Intervals {
        Intervals(vec![Interval::new(Cut::Start, Cut::End)])
    }

    fn none() -> Intervals {
        Intervals(Vec::new())
    }

    fn one(lo: Cut, hi: Cut) -> Intervals {
        let interval = Interval::new(lo, hi);
        if interval.is_empty() {
            Intervals::none()
        } else {
            Intervals(vec![interval])
        }
    }

    /// Every encoding that starts with `p`.
    pub fn block(p: &[u8]) -> Intervals {
        Intervals::one(Cut::Below(p.to_vec()), Cut::Above(p.to_vec()))
    }

    pub fn is_all(&self) -> bool {
        matches!(
            self.0.as_slice(),
            [Interval {
                lo: Cut::Start,
                hi: Cut::End
            }]
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn intersect(&self, other: &Intervals) -> Intervals {
        let mut out = Vec::new();
        for a in &self.0 {
            for b in &other.0 {
                let lo = if a.lo.compare_to(&b.lo).is_ge() {
                    &a.lo
                } else {
                    &b.lo
                };
                let hi = if a.hi.compare_to(&b.hi).is_le() {
                    &a.hi
                } else {
                    &b.hi
                };
                let interval = Interval::new(lo.clone(), hi.clone());
                if !interval.is_empty() {
                    out.push(interval);
                }
            }
        }
        out.sort_by(|x, y| x.lo.compare_to(&y.lo));
        Intervals(out)
    }

    /// Everything except the block of `p`.
    fn without_block(&self, p: &[u8]) -> Intervals {
        let complement = Intervals(vec![
            Interval::new(Cut::Start, Cut::Below(p.to_vec())),
            Interval::new(Cut::Above(p.to_vec()), Cut::End),
        ]);
        self.intersect(&complement)
    }
}

/// What a component holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// An indexed value (cut to 1,500 bytes).
    Value,
    /// The document name as a segment list (operands are references).
    Name,
}

/// An operand's bytes in the component, and whether they are cut (`None`: the operand can
/// never be in this component, e.g. a string compared with the name).
fn operand(kind: Kind, value: &Value) -> Option<(Vec<u8>, bool)> {
    match kind {
        Kind::Value => {
            let mut encoded = encoding::encode(value);
            let cut = encoded.len() > MAX_INDEXED_VALUE_BYTES;
            encoding::truncate(&mut encoded);
            Some((encoded, cut))
        }
        Kind::Name => match value {
            Value::Reference(path) => Some((encoding::encode_name(path), false)),
            _ => None,
        },
    }
}

/// First and last cut of a value's type class (for ranges), in the component.
fn class(kind: Kind, value: &Value) -> Option<(Cut, Cut)> {
    if kind == Kind::Name {
        return matches!(value, Value::Reference(_)).then_some((Cut::Start, Cut::End));
    }
    let (first, last) = match value.type_order() {
        TypeOrder::Null => (tag::NULL, tag::NULL),
        TypeOrder::Boolean => (tag::FALSE, tag::TRUE),
        // NaN (tag::NAN) is a number but no range matches it.
        TypeOrder::Number => (tag::NEG_INFINITY, tag::POS_INFINITY),
        TypeOrder::Timestamp => (tag::TIMESTAMP, tag::TIMESTAMP),
        TypeOrder::String => (tag::STRING, tag::STRING),
        TypeOrder::Bytes => (tag::BYTES, tag::BYTES),
        TypeOrder::Reference => (tag::REFERENCE, tag::REFERENCE),
        TypeOrder::GeoPoint => (tag::GEOPOINT, tag::GEOPOINT),
        TypeOrder::Array => (tag::ARRAY, tag::ARRAY),
        TypeOrder::Vector => (tag::VECTOR, tag::VECTOR),
        TypeOrder::Map => (tag::MAP, tag::MAP),
    };
    Some((Cut::Below(vec![first]), Cut::Above(vec![last])))
}

/// Every non-null value (names are never null).
fn not_null(kind: Kind) -> Intervals {
    match kind {
        Kind::Value => Intervals::one(Cut::Above(vec![tag::NULL]), Cut::End),
        Kind::Name => Intervals::all(),
    }
}

fn is_nan(value: &Value) -> bool {
    matches!(value, Value::Double(d) if d.is_nan())
}

/// The component encodings a leaf accepts, and whether the result is only a superset
/// (an operand was cut).
///
/// # Errors
/// [`PlanError::Unsupported`] for leaves the terms stage never leaves on a component
/// (`in`, `array_contains`, `array_contains_any`, AND/OR).
pub(super) fn leaf_intervals(kind: Kind, leaf: &Filter) -> Result<(Intervals, bool), PlanError> {
    match leaf {
        Filter::Unary { op, .. } => Ok((
            match op {
                UnaryOp::IsNull => Intervals::block(&[tag::NULL]),
                UnaryOp::IsNan => Intervals::block(&[tag::NAN]),
                UnaryOp::IsNotNull => not_null(kind),
                UnaryOp::IsNotNan => not_null(kind).without_block(&[tag::NAN]),
            },
            false,
        )),
        Filter::Field { op, value, .. } => field_intervals(kind, *op, value),
        Filter::And(_) | Filter::Or(_) => Err(PlanError::Unsupported(
            "a composite filter where a leaf was expected".into(),
        )),
    }
}

fn field_intervals(kind: Kind, op: FieldOp, value: &Value) -> Result<(Intervals, bool), PlanError> {
    Ok(match op {
        FieldOp::Eq => match operand(kind, value) {
            Some((p, cut)) => (Intervals::block(&p), cut),
            None => (Intervals::none(), false),
        },
        FieldOp::Lt | FieldOp::Le | FieldOp::Gt | FieldOp::Ge => {
            let (Some((first, last)), Some((p, cut))) = (class(kind, value), operand(kind, value))
            else {
                return Ok((Intervals::none(), false));
            };
            if matches!(value, Value::Null) || is_nan(value) {
                return Ok((Intervals::none(), false));
            }
            // A cut operand widens each bound to the whole block of its first 1,500 bytes.
            let below = if cut {
                Cut::Above(p.clone())
            } else {
                Cut::Below(p.clone())
            };
            let above = if cut {
                Cut::Below(p.clone())
            } else {
                Cut::Above(p.clone())
            };
            let intervals = match op {
                FieldOp::Lt => Intervals::one(first, below),
                FieldOp::Le => Intervals::one(first, Cut::Above(p)),
                FieldOp::Gt => Intervals::one(above, last),
                _ => Intervals::one(Cut::Below(p), last),
            };
            (intervals, cut)
        }
        FieldOp::Ne => match operand(kind, value) {
            Some((p, false)) => (not_null(kind).without_block(&p), false),
            Some((_, true)) => (not_null(kind), true),
            None => (not_null(kind), false),
        },
        FieldOp::NotIn => {
            let Value::Array(items) = value else {
                return Ok((Intervals::none(), false));
            };
            if items.iter().any(|v| matches!(v, Value::Null)) {
                return Ok((Intervals::none(), false));
            }
            let mut acc = not_null(kind);
            let mut widened = false;
            for item in items {
                match operand(kind, item) {
                    Some((p, false)) => acc = acc.without_block(&p),
                    Some((_, true)) => widened = true,
                    None => {}
                }
            }
            (acc, widened)
        }
        FieldOp::In | FieldOp::ArrayContains | FieldOp::ArrayContainsAny => {
            return Err(PlanError::Unsupported(format!(
                "{} left on an ordered component",
                op.text()
            )))
        }
    })
}

/// The key byte of a cut of a component appended to `prefix`, stored ascending.
fn ascending_key(prefix: &[u8], cut: &Cut) -> Vec<u8> {
    let mut key = prefix.to_vec();
    match cut {
        Cut::Start => key,
        Cut::Below(p) => {
            key.extend_from_slice(p);
            key
        }
        Cut::Above(p) => {
            key.extend_from_slice(p);
            successor_or_top(&key)
        }
        Cut::End => successor_or_top(&key),
    }
}

/// The key bytes of a cut of a component appended to `prefix`, stored inverted: the mirror
/// image (below `P` ascending is above `!P` stored).
fn descending_key(prefix: &[u8], cut: &Cut) -> Vec<u8> {
    let mut key = prefix.to_vec();
    let inverted = |p: &[u8]| p.iter().map(|b| !b).collect::<Vec<u8>>();
    match cut {
        Cut::Start => successor_or_top(&key),
        Cut::Below(p) => {
            key.extend(inverted(p));
            successor_or_top(&key)
        }
        Cut::Above(p) => {
            key.extend(inverted(p));
            key
        }
        Cut::End => key,
    }
}

/// Key ranges (ascending byte order) for intervals of the component that follows `prefix`.
pub(super) fn to_key_ranges(
    prefix: &[u8],
    descending: bool,
    intervals: &Intervals,
) -> Vec<KeyRange> {
    let mut out: Vec<KeyRange> = intervals
        .0
        .iter()
        .map(|i| {
            if descending {
                KeyRange {
                    start: descending_key(prefix, &i.hi),
                    end: descending_key(prefix, &i.lo),
                }
            } else {
                KeyRange {
                    start: ascending_key(prefix, &i.lo),
                    end: ascending_key(prefix, &i.hi),
                }
            }
        })
        .filter(|r| r.start < r.end)
        .collect();
    out.sort();
    out
}

/// The intersection of two ranges, if not empty.
pub(super) fn intersect_range(
    a: &KeyRange,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Option<KeyRange> {
    let start = match lo {
        Some(lo) if lo > a.start.as_slice() => lo.to_vec(),
        _ => a.start.clone(),
    };
    let end = match hi {
        Some(hi) if hi < a.end.as_slice() => hi.to_vec(),
        _ => a.end.clone(),
    };
    (start < end).then_some(KeyRange { start, end })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::encode_index_value;
    use crate::encoding::Direction as EncDirection;
    use crate::path::FieldPath;

    fn leaf(op: FieldOp, value: Value) -> Filter {
        Filter::field(FieldPath::single("a"), op, value)
    }

    /// Whether the key `prefix · enc(v) · tail` is inside the ranges.
    fn hit(ranges: &[KeyRange], prefix: &[u8], v: &Value, descending: bool) -> bool {
        let direction = if descending {
            EncDirection::Descending
        } else {
            EncDirection::Ascending
        };
        let mut key = prefix.to_vec();
        key.extend(encode_index_value(v, direction));
        key.extend([0x01, 0x61, 0x00, 0x01, 0x00]);
        ranges
            .iter()
            .any(|r| r.start.as_slice() <= key.as_slice() && key.as_slice() < r.end.as_slice())
    }

    #[test]
    fn ranges_follow_the_matcher_in_both_directions() {
        let values = [
            Value::Null,
            Value::Boolean(true),
            Value::Double(f64::NAN),
            Value::Double(f64::NEG_INFINITY),
            Value::Integer(-3),
            Value::Integer(0),
            Value::Double(1.0),
            Value::Double(1.5),
            Value::Integer(2),
            Value::Double(f64::INFINITY),
            Value::String("".into()),
            Value::String("x".into()),
            Value::Array(vec![]),
        ];
        let leaves = [
            leaf(FieldOp::Lt, Value::Integer(1)),
            leaf(FieldOp::Le, Value::Integer(1)),
            leaf(FieldOp::Gt, Value::Integer(1)),
            leaf(FieldOp::Ge, Value::Double(1.0)),
            leaf(FieldOp::Gt, Value::String("".into())),
            leaf(FieldOp::Ne, Value::Integer(1)),
            leaf(
                FieldOp::NotIn,
                Value::Array(vec![Value::Integer(1), Value::Double(f64::NAN)]),
            ),
            leaf(FieldOp::NotIn, Value::Array(vec![Value::Null])),
            Filter::Unary {
                field: FieldPath::single("a"),
                op: UnaryOp::IsNotNull,
            },
            Filter::Unary {
                field: FieldPath::single("a"),
                op: UnaryOp::IsNotNan,
            },
        ];
        let prefix = [0x03, 0, 0, 0, 9];
        for l in &leaves {
            let (intervals, widened) = leaf_intervals(Kind::Value, l).unwrap();
            assert!(!widened);
            for descending in [false, true] {
                let ranges = to_key_ranges(&prefix, descending, &intervals);
                for v in &values {
                    let expected = super::super::terms::holds_for(l, v, None).unwrap();
                    assert_eq!(
                        hit(&ranges, &prefix, v, descending),
                        expected,
                        "{l:?} on {v:?}, descending {descending}"
                    );
                }
            }
        }
    }

    #[test]
    fn successors() {
        assert_eq!(successor(&[1, 2, 0xFF]), Some(vec![1, 3]));
        assert_eq!(successor(&[0xFF]), None);
        assert_eq!(successor_or_top(&[]), vec![0xFF]);
    }
}
