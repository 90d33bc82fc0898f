//! Predicate indexes: which targets a write can concern, found by lookups whose cost grows
//! with the matches, not with the number of targets (docs/architecture.md, "Matching and
//! scale"; InvaliDB's index inside each matching cell).
//!
//! Every query target is placed once, under its *scope* (a collection path, a collection
//! group's ID, or, for a kindless query, every document: the database-wide scope) and one of:
//! - an **equality key**: a top-level conjunct `field = v`, `field in [..]` (a key per
//!   value), `field is null` or `field is nan`, or an OR of those on one field; a written
//!   document is looked up with its value of each equality-indexed field of its scopes;
//! - a **contains key**: a top-level `field array_contains v` or `array_contains_any [..]`;
//!   looked up with each element of the document's array at that field;
//! - the scope's **residual** list (no such conjunct: ranges, `!=`, `not in`, OR at the top).
//!
//! Keys are core's order-preserving encodings (`docstore_core::encoding::encode`, without
//! truncation): two values have the same encoding exactly when `compare` finds them equal
//! (so `1` and `1.0` meet, `2^53` and `2^53 + 1` do not), which is the equality the filters
//! use. A document's *old* version is covered by the **holders** map (document name ->
//! targets that keep it): a write that makes a document leave a result is found there,
//! whatever its new values. Single-document targets hold their name for good.
//!
//! Candidates are only candidates: the target confirms each with core's `matches`.
//!
//! Write partitions (`partition`): the index is cut into one *cell* per write partition. A
//! query target's placement is in every cell (InvaliDB replicates a query across the write
//! partitions); a document's holders are only in the cell of the document's write partition,
//! so a write is looked up in its own cell alone and each cell can be searched by a task of
//! its own. With one write partition there is one cell: the index as it always was.

use std::collections::{HashMap, HashSet};

use docstore_core::encoding::encode;
use docstore_core::path::{FieldPath, ResourcePath};
use docstore_core::query::{field_value, FieldOp, Filter, Query, Source, UnaryOp};
use docstore_core::value::{Map, Value};

use super::partition::write_partition;
use super::target::Membership;
use super::TargetId;

/// Where writes to a document are looked for: its collection, its collection ID (for
/// group targets, whose parent prefix the target itself checks), or anywhere (for kindless
/// targets, docs/query.md section 2: every document under their parent, which the target
/// itself checks).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    Collection(ResourcePath),
    Group(String),
    Everywhere,
}

impl Scope {
    fn of_source(source: &Source) -> Scope {
        if source.is_kindless() {
            return Scope::Everywhere;
        }
        match source.collection_path() {
            Some(path) if !source.all_descendants => Scope::Collection(path),
            _ => Scope::Group(source.collection_id.clone()),
        }
    }

    /// The three scopes a document is written in.
    fn of_document(path: &ResourcePath) -> Option<[Scope; 3]> {
        let collection = path.parent()?;
        let id = collection.last().to_owned();
        Some([
            Scope::Collection(collection),
            Scope::Group(id),
            Scope::Everywhere,
        ])
    }
}

/// How a target is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Placement {
    Equality {
        scope: Scope,
        field: FieldPath,
        keys: Vec<Vec<u8>>,
    },
    Contains {
        scope: Scope,
        field: FieldPath,
        keys: Vec<Vec<u8>>,
    },
    Residual(Scope),
    /// A single-document target (found through the holders map only).
    Document(ResourcePath),
}

/// The targets under one key or holding one document: almost always a single one (each
/// subscription of a city-per-listener workload has a key and documents of its own), which is
/// held inline; a set is allocated only for a second target.
#[derive(Debug)]
enum Ids {
    One(TargetId),
    // Boxed: an `Ids` is then 16 bytes, not a set's 48, in every bucket of the maps above.
    #[allow(clippy::box_collection)]
    Many(Box<HashSet<TargetId>>),
}

impl Ids {
    fn insert(&mut self, id: TargetId) {
        match self {
            Ids::One(one) if *one == id => {}
            Ids::One(one) => *self = Ids::Many(Box::new(HashSet::from([*one, id]))),
            Ids::Many(set) => {
                set.insert(id);
            }
        }
    }

    /// Remove `id`; `true` when no target is left.
    fn remove(&mut self, id: TargetId) -> bool {
        match self {
            Ids::One(one) => *one == id,
            Ids::Many(set) => {
                set.remove(&id);
                set.is_empty()
            }
        }
    }

    fn extend_into(&self, out: &mut Vec<TargetId>) {
        match self {
            Ids::One(one) => out.push(*one),
            Ids::Many(set) => out.extend(set.iter()),
        }
    }

    /// Add `id` to the entry of `key` in `map`, made for it if absent.
    fn add<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Ids>, key: K, id: TargetId) {
        map.entry(key)
            .and_modify(|ids| ids.insert(id))
            .or_insert(Ids::One(id));
    }
}

type Keyed = HashMap<FieldPath, HashMap<Vec<u8>, Ids>>;

#[derive(Debug, Default)]
struct ScopeIndex {
    equality: Keyed,
    contains: Keyed,
    residual: HashSet<TargetId>,
}

impl ScopeIndex {
    fn is_empty(&self) -> bool {
        self.equality.is_empty() && self.contains.is_empty() && self.residual.is_empty()
    }
}

/// One write partition's share of the index: every placement, the holders of its documents.
#[derive(Debug, Default)]
struct Cell {
    scopes: HashMap<Scope, ScopeIndex>,
    holders: HashMap<ResourcePath, Ids>,
}

/// The index of every target of one query partition of a [`super::Matcher`], one cell per
/// write partition.
#[derive(Debug)]
pub(crate) struct PredicateIndex {
    cells: Vec<Cell>,
    placed: HashMap<TargetId, Placement>,
}

impl Default for PredicateIndex {
    fn default() -> Self {
        PredicateIndex::new(1)
    }
}

/// Values of an `in` / `array_contains_any` list that can match (null and NaN match nothing
/// there), encoded.
fn list_keys(list: &Value) -> Vec<Vec<u8>> {
    let Value::Array(items) = list else {
        return Vec::new();
    };
    items.iter().filter(|v| matchable(v)).map(encode).collect()
}

/// Which of the two keyed maps a conjunct is looked up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keying {
    Equality,
    Contains,
}

fn matchable(value: &Value) -> bool {
    !matches!(value, Value::Null) && !matches!(value, Value::Double(d) if d.is_nan())
}

/// The keys a filter can be found by: every document it matches has one of them at
/// `field` (as its value, or an element of its array). An OR qualifies when all of its
/// branches are keyed on the same field the same way (`city = 'SF' or city = 'LA'`).
fn keys_of(filter: &Filter) -> Option<(FieldPath, Vec<Vec<u8>>, Keying)> {
    let (field, mut keys, keying) = match filter {
        Filter::Field { field, op, value } => match op {
            FieldOp::Eq => (field.clone(), vec![encode(value)], Keying::Equality),
            FieldOp::In => (field.clone(), list_keys(value), Keying::Equality),
            FieldOp::ArrayContains => {
                let keys = if matchable(value) {
                    vec![encode(value)]
                } else {
                    Vec::new()
                };
                (field.clone(), keys, Keying::Contains)
            }
            FieldOp::ArrayContainsAny => (field.clone(), list_keys(value), Keying::Contains),
            _ => return None,
        },
        Filter::Unary { field, op } => match op {
            UnaryOp::IsNull => (field.clone(), vec![encode(&Value::Null)], Keying::Equality),
            UnaryOp::IsNan => (
                field.clone(),
                vec![encode(&Value::Double(f64::NAN))],
                Keying::Equality,
            ),
            UnaryOp::IsNotNull | UnaryOp::IsNotNan => return None,
        },
        Filter::Or(branches) => {
            let mut branches = branches.iter().map(keys_of);
            let (field, mut keys, keying) = branches.next()??;
            for branch in branches {
                let (f, k, how) = branch?;
                if f != field || how != keying {
                    return None;
                }
                keys.extend(k);
            }
            (field, keys, keying)
        }
        Filter::And(_) => return None,
    };
    keys.sort();
    keys.dedup();
    Some((field, keys, keying))
}

/// The placement of a query target: the indexable top-level conjunct with the fewest keys,
/// preferring equality over contains; the residual list when there is none.
pub(crate) fn place(query: &Query) -> Placement {
    let scope = Scope::of_source(&query.source);
    let conjuncts: &[Filter] = match &query.filter {
        None => &[],
        Some(Filter::And(children)) => children,
        Some(single) => std::slice::from_ref(single),
    };
    let best = conjuncts
        .iter()
        .filter_map(keys_of)
        .min_by_key(|(_, keys, keying)| (*keying == Keying::Contains, keys.len()));
    match best {
        Some((field, keys, Keying::Equality)) => Placement::Equality { scope, field, keys },
        Some((field, keys, Keying::Contains)) => Placement::Contains { scope, field, keys },
        None => Placement::Residual(scope),
    }
}

impl PredicateIndex {
    /// An empty index of `write_partitions` cells (at least one).
    pub fn new(write_partitions: usize) -> Self {
        PredicateIndex {
            cells: (0..write_partitions.max(1))
                .map(|_| Cell::default())
                .collect(),
            placed: HashMap::new(),
        }
    }

    /// The cell of the write partition of `path`.
    fn cell_of(&mut self, path: &ResourcePath) -> &mut Cell {
        let w = write_partition(path, self.cells.len());
        &mut self.cells[w]
    }

    /// Place a target (a target is placed once; placing it again replaces the placement).
    pub fn insert(&mut self, id: TargetId, placement: Placement) {
        self.remove(id);
        match &placement {
            Placement::Equality { scope, field, keys }
            | Placement::Contains { scope, field, keys } => {
                let contains = matches!(placement, Placement::Contains { .. });
                for cell in &mut self.cells {
                    let index = cell.scopes.entry(scope.clone()).or_default();
                    let keyed = if contains {
                        &mut index.contains
                    } else {
                        &mut index.equality
                    };
                    let by_value = keyed.entry(field.clone()).or_default();
                    for key in keys {
                        Ids::add(by_value, key.clone(), id);
                    }
                }
            }
            Placement::Residual(scope) => {
                for cell in &mut self.cells {
                    cell.scopes
                        .entry(scope.clone())
                        .or_default()
                        .residual
                        .insert(id);
                }
            }
            Placement::Document(path) => {
                Ids::add(&mut self.cell_of(path).holders, path.clone(), id);
            }
        }
        self.placed.insert(id, placement);
    }

    /// Remove a target's placement (its held documents are released by the caller).
    pub fn remove(&mut self, id: TargetId) {
        let Some(placement) = self.placed.remove(&id) else {
            return;
        };
        match placement {
            Placement::Equality { scope, field, keys } => {
                for cell in &mut self.cells {
                    cell.remove_keyed(&scope, &field, &keys, id, false);
                }
            }
            Placement::Contains { scope, field, keys } => {
                for cell in &mut self.cells {
                    cell.remove_keyed(&scope, &field, &keys, id, true);
                }
            }
            Placement::Residual(scope) => {
                for cell in &mut self.cells {
                    if let Some(index) = cell.scopes.get_mut(&scope) {
                        index.residual.remove(&id);
                        if index.is_empty() {
                            cell.scopes.remove(&scope);
                        }
                    }
                }
            }
            Placement::Document(path) => self.cell_of(&path).release(id, &path),
        }
    }

    /// Follow a target's changes of held documents.
    pub fn follow(&mut self, id: TargetId, events: Vec<Membership>) {
        for event in events {
            match event {
                Membership::Hold(path) => {
                    Ids::add(&mut self.cell_of(&path).holders, path, id);
                }
                Membership::Release(path) => {
                    // A single-document target never lets go of its name.
                    if !matches!(self.placed.get(&id), Some(Placement::Document(p)) if *p == path) {
                        self.cell_of(&path).release(id, &path);
                    }
                }
            }
        }
    }

    /// The targets a write of `path` (new fields `new`, `None` for a delete) may concern,
    /// appended to `out` (possibly with repeats): looked up in the cell of its write
    /// partition only.
    pub fn candidates(&self, path: &ResourcePath, new: Option<&Map>, out: &mut Vec<TargetId>) {
        let w = write_partition(path, self.cells.len());
        self.cells[w].candidates(path, new, out);
    }
}

impl Cell {
    fn remove_keyed(
        &mut self,
        scope: &Scope,
        field: &FieldPath,
        keys: &[Vec<u8>],
        id: TargetId,
        contains: bool,
    ) {
        let Some(index) = self.scopes.get_mut(scope) else {
            return;
        };
        let keyed = if contains {
            &mut index.contains
        } else {
            &mut index.equality
        };
        if let Some(by_value) = keyed.get_mut(field) {
            for key in keys {
                if by_value.get_mut(key).is_some_and(|ids| ids.remove(id)) {
                    by_value.remove(key);
                }
            }
            if by_value.is_empty() {
                keyed.remove(field);
            }
        }
        if index.is_empty() {
            self.scopes.remove(scope);
        }
    }

    fn release(&mut self, id: TargetId, path: &ResourcePath) {
        if self.holders.get_mut(path).is_some_and(|ids| ids.remove(id)) {
            self.holders.remove(path);
        }
    }

    fn candidates(&self, path: &ResourcePath, new: Option<&Map>, out: &mut Vec<TargetId>) {
        if let Some(ids) = self.holders.get(path) {
            ids.extend_into(out);
        }
        let Some(doc) = new else {
            return;
        };
        let Some(scopes) = Scope::of_document(path) else {
            return;
        };
        for scope in &scopes {
            let Some(index) = self.scopes.get(scope) else {
                continue;
            };
            out.extend(&index.residual);
            for (field, by_value) in &index.equality {
                if let Some(value) = field_value(path, doc, field) {
                    if let Some(ids) = by_value.get(&encode(&value)) {
                        ids.extend_into(out);
                    }
                }
            }
            for (field, by_value) in &index.contains {
                if let Some(Value::Array(items)) = field_value(path, doc, field).as_deref() {
                    for item in items {
                        if let Some(ids) = by_value.get(&encode(item)) {
                            ids.extend_into(out);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_target_is_held_inline_and_a_second_makes_a_set() {
        let mut map: HashMap<&str, Ids> = HashMap::new();
        Ids::add(&mut map, "k", TargetId(1));
        Ids::add(&mut map, "k", TargetId(1));
        assert!(matches!(map["k"], Ids::One(TargetId(1))));
        // Removing another target leaves the one.
        assert!(!map.get_mut("k").unwrap().remove(TargetId(2)));
        Ids::add(&mut map, "k", TargetId(2));
        let mut out = Vec::new();
        map["k"].extend_into(&mut out);
        out.sort_unstable();
        assert_eq!(out, [TargetId(1), TargetId(2)]);
        assert!(!map.get_mut("k").unwrap().remove(TargetId(1)));
        assert!(map.get_mut("k").unwrap().remove(TargetId(2)));
        let mut one = Ids::One(TargetId(3));
        assert!(one.remove(TargetId(3)));
    }
}
