//! Index selection for one disjunction: Firestore's greedy algorithm.
//!
//! The disjunction needs (a) every pinned field and its `array_contains` *covered* by the
//! equality prefix of some scan, and (b) every scan to produce the disjunction's order: the
//! unpinned components of the normalised order, then the name. Candidate scans:
//! - the automatic index of a pinned field `f` (`0x01 · parent · f · value`, then the name
//!   ascending) or of the `array_contains` field (`0x02 ...`), when nothing but the name is
//!   ordered; the name descending is a backward scan;
//! - the automatic index of `f` alone (`0x01 · parent · f`, then `f`, then the name) for the
//!   order `f, __name__` in one direction, when nothing is pinned;
//! - a composite `[c1..cm]` whose first `k` components are pinned fields (ascending or
//!   descending) or the `array_contains` field (array-contains component), and whose other
//!   components are exactly the unpinned order components, all in the query's directions
//!   (forward) or all reversed (backward), with the name direction following.
//!
//! Automatic indexes are collection-scoped and absent for exempted fields; collection
//! queries use collection-scoped composites, group queries group-scoped ones. The greedy loop
//! takes the candidate covering most uncovered needs (ties: fewer index fields, automatic
//! before composite, lower id) until all are covered; several scans are joined by zig-zag.
//! If a need cannot be covered, the error names the one index that serves the disjunction
//! alone: the `array_contains` field, the pinned fields ascending, the order components in
//! their directions (and `__name__` when its direction differs from the last one's).

use std::cmp::Reverse;

use crate::encoding::{self, encode_index_value, Direction as KeyDirection};
use crate::index::{auto_prefix, kind, IndexDefinition, IndexField, IndexMode, Scope};
use crate::path::{FieldPath, ResourcePath};
use crate::query::{Direction, Order, Query, Source};

use super::ranges::{leaf_intervals, to_key_ranges, Intervals, Kind};
use super::terms::Term;
use super::{
    create_index_call, Branch, Catalog, CollectionScan, IndexRef, KeyFilter, OrderValue, PlanError,
    Scan, Slot, SuffixPart,
};

/// A planned disjunction.
pub(super) struct Planned {
    pub branch: Branch,
    /// Some bound or pinned value is cut at 1,500 bytes.
    pub recheck: bool,
}

/// What a scan's equality prefix covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Pin(usize),
    Contains,
}

/// A usable scan before ranges and slots are added.
#[derive(Debug, Clone)]
struct Candidate {
    index: IndexRef,
    covers: Vec<Need>,
    fields: usize,
    /// Tie-break: automatic (0, 0) before composite (1, id).
    rank: (u8, u32),
    prefix: Vec<u8>,
    suffix: Vec<SuffixPart>,
    backward: bool,
}

/// The disjunction's shape, shared by the candidate builders.
struct Shape<'a> {
    source: &'a Source,
    term: &'a Term,
    /// The unpinned order components except the name.
    ordered: Vec<&'a Order>,
    name_descending: bool,
}

/// Plan one disjunction; `None` when it can match nothing.
///
/// # Errors
/// [`PlanError::MissingIndex`] when no set of indexes covers it; [`PlanError::Unsupported`]
/// for an `array_contains` on an ordered field.
pub(super) fn branch(
    query: &Query,
    catalog: &Catalog,
    order: &[Order],
    term: &Term,
) -> Result<Option<Planned>, PlanError> {
    let Some((name_order, fields)) = order.split_last() else {
        return Err(PlanError::Unsupported("an empty order".into()));
    };
    let pinned = |f: &FieldPath| term.pins.iter().any(|(p, _)| p == f);
    let shape = Shape {
        source: &query.source,
        term,
        ordered: fields.iter().filter(|o| !pinned(&o.field)).collect(),
        name_descending: name_order.direction == Direction::Descending,
    };
    if let Some((field, _)) = &term.contains {
        if shape.ordered.iter().any(|o| o.field == *field) {
            return Err(PlanError::Unsupported(format!(
                "array_contains on {field}, which the query is also ordered by (an index cannot hold a field twice)"
            )));
        }
    }
    for leaf in &term.rest {
        let on_order = leaf
            .leaf_field()
            .is_some_and(|f| f.is_document_id() || shape.ordered.iter().any(|o| o.field == *f));
        if !on_order {
            return Err(PlanError::Unsupported(format!(
                "a filter on {} that is not an order component",
                leaf.leaf_field()
                    .map_or_else(String::new, ToString::to_string)
            )));
        }
    }
    if term.pins.is_empty() && term.contains.is_none() && shape.ordered.is_empty() {
        return collection(&shape);
    }
    let chosen = choose(&shape, catalog)?;
    // A pinned value or an array_contains operand cut at 1,500 bytes matches every indexed
    // value sharing those bytes: the documents must be checked with the matcher.
    let mut recheck = term.pins.iter().any(|(_, v)| OrderValue::of(v).truncated)
        || term
            .contains
            .as_ref()
            .is_some_and(|(_, v)| OrderValue::of(v).truncated);
    let mut scans = Vec::with_capacity(chosen.len());
    for candidate in chosen {
        match scan(&shape, order, candidate)? {
            Some((scan, widened)) => {
                recheck |= widened;
                scans.push(scan);
            }
            None => return Ok(None),
        }
    }
    Ok(Some(Planned {
        branch: Branch::Scans(scans),
        recheck,
    }))
}

/// `parent`'s segment list open for one more segment: every name under `parent` starts so.
fn under(parent: &ResourcePath) -> Vec<u8> {
    let mut bytes = Vec::new();
    encoding::encode_segments(&mut bytes, parent.segments());
    bytes.pop();
    bytes.push(0x01);
    bytes
}

/// The group's parent, when names must lie under it.
fn group_parent(source: &Source) -> Option<&ResourcePath> {
    source.parent.as_ref().filter(|_| source.all_descendants)
}

/// Name intervals of the `__name__` leaves (and of the group's parent).
fn name_intervals(shape: &Shape<'_>, with_parent: bool) -> Result<(Intervals, bool), PlanError> {
    let mut acc = Intervals::all();
    let mut widened = false;
    for leaf in &shape.term.rest {
        if leaf.leaf_field().is_some_and(FieldPath::is_document_id) {
            let (intervals, w) = leaf_intervals(Kind::Name, leaf)?;
            acc = acc.intersect(&intervals);
            widened |= w;
        }
    }
    if let Some(parent) = group_parent(shape.source).filter(|_| with_parent) {
        acc = acc.intersect(&Intervals::block(&under(parent)));
    }
    Ok((acc, widened))
}

fn collection(shape: &Shape<'_>) -> Result<Option<Planned>, PlanError> {
    let (intervals, recheck) = name_intervals(shape, true)?;
    if intervals.is_empty() {
        return Ok(None);
    }
    let ranges = if intervals.is_all() {
        Vec::new()
    } else {
        // Intervals with no encoding inside (`a < {}`) are no bytes at all.
        let ranges = to_key_ranges(&[], false, &intervals);
        if ranges.is_empty() {
            return Ok(None);
        }
        ranges
    };
    Ok(Some(Planned {
        branch: Branch::Collection(CollectionScan {
            parent: shape.source.parent.clone(),
            collection_id: shape.source.collection_id.clone(),
            all_descendants: shape.source.all_descendants,
            backward: shape.name_descending,
            ranges,
        }),
        recheck,
    }))
}

fn descending(direction: Direction) -> bool {
    direction == Direction::Descending
}

fn key_direction(descending: bool) -> KeyDirection {
    if descending {
        KeyDirection::Descending
    } else {
        KeyDirection::Ascending
    }
}

/// Candidates on automatic indexes (collection queries only).
fn automatic(shape: &Shape<'_>, exemptions: &[FieldPath]) -> Vec<Candidate> {
    let Some(collection) = shape.source.collection_path() else {
        return Vec::new();
    };
    let usable =
        |f: &FieldPath| !f.is_document_id() && !exemptions.iter().any(|e| f.starts_with(e));
    let mut out = Vec::new();
    let name_only = shape.ordered.is_empty();
    let equality = |kind_byte: u8, field: &FieldPath, value, need| {
        let mut prefix = auto_prefix(kind_byte, &collection, field);
        prefix.extend(encode_index_value(value, KeyDirection::Ascending));
        Candidate {
            index: IndexRef::Auto {
                field: field.clone(),
                contains: kind_byte == kind::AUTO_ARRAY_CONTAINS,
            },
            covers: vec![need],
            fields: 1,
            rank: (0, 0),
            prefix,
            suffix: vec![SuffixPart::Name { descending: false }],
            backward: shape.name_descending,
        }
    };
    if name_only {
        for (i, (field, value)) in shape.term.pins.iter().enumerate() {
            if usable(field) {
                out.push(equality(kind::AUTO_VALUE, field, value, Need::Pin(i)));
            }
        }
        if let Some((field, value)) = &shape.term.contains {
            if usable(field) {
                out.push(equality(
                    kind::AUTO_ARRAY_CONTAINS,
                    field,
                    value,
                    Need::Contains,
                ));
            }
        }
    }
    if let [only] = shape.ordered.as_slice() {
        let nothing_to_cover = shape.term.pins.is_empty() && shape.term.contains.is_none();
        if nothing_to_cover
            && usable(&only.field)
            && descending(only.direction) == shape.name_descending
        {
            out.push(Candidate {
                index: IndexRef::Auto {
                    field: only.field.clone(),
                    contains: false,
                },
                covers: Vec::new(),
                fields: 1,
                rank: (0, 0),
                prefix: auto_prefix(kind::AUTO_VALUE, &collection, &only.field),
                suffix: vec![
                    SuffixPart::Value {
                        field: only.field.clone(),
                        descending: false,
                    },
                    SuffixPart::Name { descending: false },
                ],
                backward: shape.name_descending,
            });
        }
    }
    out
}

/// The candidate scan of a composite index, if it serves the disjunction.
fn composite(shape: &Shape<'_>, index: &IndexDefinition) -> Option<Candidate> {
    let scope = if shape.source.all_descendants {
        Scope::CollectionGroup
    } else {
        Scope::Collection
    };
    if index.scope != scope || index.collection_group != shape.source.collection_id {
        return None;
    }
    let (body, explicit_name) = match index.fields.split_last() {
        Some((last, body)) if last.path.is_document_id() => (body, Some(last.mode)),
        _ => (index.fields.as_slice(), None),
    };
    if explicit_name == Some(IndexMode::ArrayContains) {
        return None;
    }
    let k = body.len().checked_sub(shape.ordered.len())?;
    let (equalities, ordered) = body.split_at(k);
    let mut backward: Option<bool> = None;
    let mut suffix = Vec::with_capacity(ordered.len() + 2);
    for (component, order) in ordered.iter().zip(&shape.ordered) {
        let stored_descending = match component.mode {
            IndexMode::Ascending => false,
            IndexMode::Descending => true,
            IndexMode::ArrayContains => return None,
        };
        if component.path != order.field {
            return None;
        }
        let reversed = stored_descending != descending(order.direction);
        if *backward.get_or_insert(reversed) != reversed {
            return None;
        }
        suffix.push(SuffixPart::Value {
            field: component.path.clone(),
            descending: stored_descending,
        });
    }
    let name_stored_descending = index.name_direction() == KeyDirection::Descending;
    let backward = *backward.get_or_insert(name_stored_descending != shape.name_descending);
    if (name_stored_descending != backward) != shape.name_descending {
        return None;
    }
    if explicit_name.is_some() {
        suffix.push(SuffixPart::Value {
            field: FieldPath::single(crate::path::DOCUMENT_ID_FIELD),
            descending: name_stored_descending,
        });
    }
    suffix.push(SuffixPart::Name {
        descending: name_stored_descending,
    });
    let collection = shape.source.collection_path();
    let mut prefix = index.prefix(collection.as_ref());
    let mut covers = Vec::with_capacity(equalities.len());
    for component in equalities {
        match component.mode {
            IndexMode::Ascending | IndexMode::Descending => {
                let i = shape
                    .term
                    .pins
                    .iter()
                    .position(|(f, _)| *f == component.path)?;
                let direction = key_direction(component.mode == IndexMode::Descending);
                prefix.extend(encode_index_value(&shape.term.pins[i].1, direction));
                covers.push(Need::Pin(i));
            }
            IndexMode::ArrayContains => {
                let (field, value) = shape.term.contains.as_ref()?;
                if *field != component.path {
                    return None;
                }
                prefix.extend(encode_index_value(value, KeyDirection::Ascending));
                covers.push(Need::Contains);
            }
        }
    }
    Some(Candidate {
        index: IndexRef::Composite { id: index.id },
        covers,
        fields: index.fields.len(),
        rank: (1, index.id),
        prefix,
        suffix,
        backward,
    })
}

/// The greedy choice of scans.
fn choose(shape: &Shape<'_>, catalog: &Catalog) -> Result<Vec<Candidate>, PlanError> {
    let mut candidates = automatic(shape, &catalog.exemptions);
    candidates.extend(
        catalog
            .composites
            .iter()
            .filter_map(|index| composite(shape, index)),
    );
    let mut uncovered: Vec<Need> = (0..shape.term.pins.len()).map(Need::Pin).collect();
    if shape.term.contains.is_some() {
        uncovered.push(Need::Contains);
    }
    if uncovered.is_empty() {
        return candidates
            .into_iter()
            .min_by_key(|c| (c.fields, c.rank))
            .map(|c| vec![c])
            .ok_or_else(|| missing(shape));
    }
    let mut chosen: Vec<Candidate> = Vec::new();
    while !uncovered.is_empty() {
        let best = candidates
            .iter()
            .map(|c| (c.covers.iter().filter(|n| uncovered.contains(n)).count(), c))
            .filter(|(new, _)| *new > 0)
            .min_by_key(|(new, c)| (Reverse(*new), c.fields, c.rank))
            .map(|(_, c)| c.clone())
            .ok_or_else(|| missing(shape))?;
        uncovered.retain(|n| !best.covers.contains(n));
        chosen.push(best);
    }
    Ok(chosen)
}

/// The index that serves the disjunction alone.
fn missing(shape: &Shape<'_>) -> PlanError {
    let mut fields = Vec::new();
    if let Some((field, _)) = &shape.term.contains {
        fields.push(IndexField {
            path: field.clone(),
            mode: IndexMode::ArrayContains,
        });
    }
    for (field, _) in &shape.term.pins {
        fields.push(IndexField {
            path: field.clone(),
            mode: IndexMode::Ascending,
        });
    }
    let mode = |direction| {
        if descending(direction) {
            IndexMode::Descending
        } else {
            IndexMode::Ascending
        }
    };
    for order in &shape.ordered {
        fields.push(IndexField {
            path: order.field.clone(),
            mode: mode(order.direction),
        });
    }
    if let Some(last) = shape.ordered.last() {
        if descending(last.direction) != shape.name_descending {
            fields.push(IndexField {
                path: FieldPath::single(crate::path::DOCUMENT_ID_FIELD),
                mode: if shape.name_descending {
                    IndexMode::Descending
                } else {
                    IndexMode::Ascending
                },
            });
        }
    }
    let scope = if shape.source.all_descendants {
        Scope::CollectionGroup
    } else {
        Scope::Collection
    };
    let group = shape.source.collection_id.clone();
    PlanError::MissingIndex {
        call: create_index_call(&group, scope, &fields),
        collection_group: group,
        scope,
        fields,
    }
}

/// The field a suffix part holds (`__name__` for the name).
fn part_field(part: &SuffixPart) -> FieldPath {
    match part {
        SuffixPart::Value { field, .. } => field.clone(),
        SuffixPart::Name { .. } => FieldPath::single(crate::path::DOCUMENT_ID_FIELD),
    }
}

/// A chosen candidate as a scan: ranges on its first suffix part, key filters on the others,
/// slots. `None` when the ranges are empty; the flag says a bound was widened.
fn scan(
    shape: &Shape<'_>,
    order: &[Order],
    candidate: Candidate,
) -> Result<Option<(Scan, bool)>, PlanError> {
    let Some(first) = candidate.suffix.first() else {
        return Err(PlanError::Unsupported("a scan without a suffix".into()));
    };
    let first_field = part_field(first);
    let (kind, first_descending) = match first {
        SuffixPart::Value { descending, .. } => (Kind::Value, *descending),
        SuffixPart::Name { descending } => (Kind::Name, *descending),
    };
    let name_first = kind == Kind::Name;
    let (mut intervals, mut widened) = if name_first {
        name_intervals(shape, true)?
    } else {
        (Intervals::all(), false)
    };
    let mut key_filters = Vec::new();
    let position = |f: &FieldPath| order.iter().position(|o| o.field == *f);
    for leaf in &shape.term.rest {
        let Some(field) = leaf.leaf_field() else {
            continue;
        };
        if *field == first_field {
            if !name_first {
                let (i, w) = leaf_intervals(kind, leaf)?;
                intervals = intervals.intersect(&i);
                widened |= w;
            }
        } else {
            let Some(position) = position(field) else {
                return Err(PlanError::Unsupported(format!(
                    "a filter on {field} outside the order"
                )));
            };
            key_filters.push(KeyFilter {
                position,
                filter: leaf.clone(),
            });
        }
    }
    if intervals.is_empty() {
        return Ok(None);
    }
    let ranges = if intervals.is_all() {
        Vec::new()
    } else {
        // Intervals with no encoding inside (`a < {}`) are no bytes at all.
        let ranges = to_key_ranges(&candidate.prefix, first_descending, &intervals);
        if ranges.is_empty() {
            return Ok(None);
        }
        ranges
    };
    let name_part = candidate.suffix.len() - 1;
    let mut slots = Vec::with_capacity(order.len());
    for component in order {
        if component.field.is_document_id() {
            slots.push(Slot::Part(name_part));
        } else if let Some((_, value)) = shape.term.pins.iter().find(|(f, _)| *f == component.field)
        {
            slots.push(Slot::Fixed {
                value: OrderValue::of(value),
                descending: descending(component.direction),
            });
        } else {
            let part = candidate.suffix.iter().position(
                |p| matches!(p, SuffixPart::Value { field, .. } if *field == component.field),
            );
            match part {
                Some(part) => slots.push(Slot::Part(part)),
                None => {
                    return Err(PlanError::Unsupported(format!(
                        "the scan does not hold the order component {}",
                        component.field
                    )))
                }
            }
        }
    }
    let name_under = if name_first {
        None
    } else {
        group_parent(shape.source).cloned()
    };
    Ok(Some((
        Scan {
            index: candidate.index,
            prefix: candidate.prefix,
            ranges,
            backward: candidate.backward,
            suffix: candidate.suffix,
            slots,
            key_filters,
            name_under,
        },
        widened,
    )))
}
