//! The filter in disjunctive normal form, one [`Term`] per disjunction.
//!
//! `in` and `array_contains_any` lists are expanded into one disjunction per value (null and
//! NaN in those lists match nothing and are dropped). Within a disjunction:
//! - `=`, `is null` and `is nan` on a field other than `__name__` *pin* the field to a value;
//!   every other leaf on a pinned field is decided now, on the pinned value, with the
//!   matcher itself (any document the index returns holds a value equal to the pin, and
//!   every filter is invariant under `compare`-equality), so `a = 1 and a > 5` is an empty
//!   disjunction and `a = 1 and a > 0` is just `a = 1`;
//! - one `array_contains` (validation allows at most one per disjunction) is kept apart;
//! - what remains are range leaves on order components (`<`, `<=`, `>`, `>=`, `!=`,
//!   `not in`, `is not null`, `is not nan`) and `=` on `__name__`.

use crate::compare;
use crate::path::{FieldPath, ResourcePath};
use crate::query::{
    and_product, dnf_size, filter_matches, FieldOp, Filter, UnaryOp, MAX_DISJUNCTIONS,
};
use crate::value::{Map, Value};

use super::PlanError;

/// One disjunction.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Term {
    /// Fields pinned by an equality, in the order the filter names them.
    pub pins: Vec<(FieldPath, Value)>,
    /// The `array_contains` of the disjunction (on an unpinned field).
    pub contains: Option<(FieldPath, Value)>,
    /// The other leaves (all on order components).
    pub rest: Vec<Filter>,
}

/// The disjunctions of `filter` that can match something (none: the filter matches nothing;
/// one term with nothing in it: no filter).
///
/// # Errors
/// [`PlanError::Unsupported`] beyond 30 disjunctions (validation refuses those) or with two
/// `array_contains` in one disjunction.
pub(super) fn terms(filter: Option<&Filter>) -> Result<Vec<Term>, PlanError> {
    let Some(filter) = filter else {
        return Ok(vec![Term {
            pins: Vec::new(),
            contains: None,
            rest: Vec::new(),
        }]);
    };
    if dnf_size(filter) > MAX_DISJUNCTIONS {
        return Err(PlanError::Unsupported(format!(
            "more than {MAX_DISJUNCTIONS} disjunctions"
        )));
    }
    let mut out = Vec::new();
    for conjunction in dnf(filter) {
        if let Some(term) = term(conjunction)? {
            out.push(term);
        }
    }
    Ok(out)
}

fn is_nan(value: &Value) -> bool {
    matches!(value, Value::Double(d) if d.is_nan())
}

/// The conjunctions, with `in` / `array_contains_any` expanded into `=` / `array_contains`.
/// Bounded by [`size`].
fn dnf(filter: &Filter) -> Vec<Vec<Filter>> {
    match filter {
        Filter::Field {
            field,
            op: op @ (FieldOp::In | FieldOp::ArrayContainsAny),
            value: Value::Array(items),
        } => {
            let single = if *op == FieldOp::In {
                FieldOp::Eq
            } else {
                FieldOp::ArrayContains
            };
            let mut seen: Vec<&Value> = Vec::new();
            let mut out = Vec::new();
            for item in items {
                if matches!(item, Value::Null) || is_nan(item) {
                    continue;
                }
                if seen.iter().any(|s| compare(s, item).is_eq()) {
                    continue;
                }
                seen.push(item);
                out.push(vec![Filter::field(field.clone(), single, item.clone())]);
            }
            out
        }
        Filter::And(children) => and_product(children.iter().map(dnf)),
        Filter::Or(children) => children.iter().flat_map(dnf).collect(),
        leaf => vec![vec![leaf.clone()]],
    }
}

/// The value a leaf pins its field to, if it is an equality.
fn pin_of(leaf: &Filter) -> Option<(&FieldPath, Value)> {
    match leaf {
        Filter::Field {
            field,
            op: FieldOp::Eq,
            value,
        } if !field.is_document_id() => Some((field, value.clone())),
        Filter::Unary {
            field,
            op: UnaryOp::IsNull,
        } => Some((field, Value::Null)),
        Filter::Unary {
            field,
            op: UnaryOp::IsNan,
        } => Some((field, Value::Double(f64::NAN))),
        _ => None,
    }
}

fn term(leaves: Vec<Filter>) -> Result<Option<Term>, PlanError> {
    let mut pins: Vec<(FieldPath, Value)> = Vec::new();
    let mut unpinned = Vec::new();
    for leaf in leaves {
        match pin_of(&leaf) {
            Some((field, value)) => match pins.iter().find(|(f, _)| f == field) {
                Some((_, pinned)) if compare(pinned, &value).is_ne() => return Ok(None),
                Some(_) => {}
                None => pins.push((field.clone(), value)),
            },
            None => unpinned.push(leaf),
        }
    }
    let mut contains = None;
    let mut rest = Vec::new();
    for leaf in unpinned {
        let field = leaf.leaf_field().cloned();
        if let Some(pinned) = field
            .as_ref()
            .and_then(|f| pins.iter().find(|(p, _)| p == f))
        {
            if !holds_for(&leaf, &pinned.1, None)? {
                return Ok(None);
            }
            continue;
        }
        match leaf {
            Filter::Field {
                field,
                op: FieldOp::ArrayContains,
                value,
            } => {
                if contains.is_some() {
                    return Err(PlanError::Unsupported(
                        "two array_contains in one disjunction".into(),
                    ));
                }
                contains = Some((field, value));
            }
            other => rest.push(other),
        }
    }
    Ok(Some(Term {
        pins,
        contains,
        rest,
    }))
}

/// Whether a leaf holds for a document whose tested field is `value` (and whose name is
/// `name`, for `__name__` leaves), by the matcher itself.
///
/// # Errors
/// Only if the probe document's path cannot be built (it always can).
pub(super) fn holds_for(
    leaf: &Filter,
    value: &Value,
    name: Option<&ResourcePath>,
) -> Result<bool, PlanError> {
    const PROBE: &str = "v";
    let probe_field = FieldPath::single(PROBE);
    let renamed = match leaf {
        Filter::Field { field, op, value } => Filter::Field {
            field: if field.is_document_id() {
                field.clone()
            } else {
                probe_field
            },
            op: *op,
            value: value.clone(),
        },
        Filter::Unary { field, op } => Filter::Unary {
            field: if field.is_document_id() {
                field.clone()
            } else {
                probe_field
            },
            op: *op,
        },
        Filter::And(_) | Filter::Or(_) => {
            return Err(PlanError::Unsupported(
                "a composite filter where a leaf was expected".into(),
            ))
        }
    };
    let path = match name {
        Some(path) => path.clone(),
        None => ResourcePath::parse_document("probe/probe")
            .map_err(|e| PlanError::Unsupported(e.to_string()))?,
    };
    let mut doc = Map::new();
    doc.insert(PROBE.to_owned(), value.clone());
    Ok(filter_matches(&renamed, &path, &doc))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(field: &str, op: FieldOp, value: Value) -> Filter {
        Filter::field(FieldPath::single(field), op, value)
    }

    #[test]
    fn lists_expand_and_pins_decide_other_leaves() {
        let f = Filter::And(vec![
            leaf(
                "a",
                FieldOp::In,
                Value::Array(vec![
                    Value::Integer(1),
                    Value::Null,
                    Value::Double(1.0),
                    Value::Integer(7),
                ]),
            ),
            leaf("a", FieldOp::Gt, Value::Integer(5)),
        ]);
        let t = terms(Some(&f)).unwrap();
        // 1 and 1.0 are one value, null is dropped, 1 > 5 fails: only a = 7 is left.
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].pins, vec![(FieldPath::single("a"), Value::Integer(7))]);
        assert!(t[0].rest.is_empty());
        let contradiction = Filter::And(vec![
            leaf("a", FieldOp::Eq, Value::Integer(1)),
            Filter::Unary {
                field: FieldPath::single("a"),
                op: UnaryOp::IsNull,
            },
        ]);
        assert!(terms(Some(&contradiction)).unwrap().is_empty());
    }

    #[test]
    fn contains_and_rest() {
        let f = Filter::And(vec![
            leaf(
                "tags",
                FieldOp::ArrayContainsAny,
                Value::Array(vec![Value::Integer(1), Value::Integer(2)]),
            ),
            leaf("n", FieldOp::Ne, Value::Integer(3)),
        ]);
        let t = terms(Some(&f)).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[1].contains,
            Some((FieldPath::single("tags"), Value::Integer(2)))
        );
        assert_eq!(t[1].rest.len(), 1);
    }
}
