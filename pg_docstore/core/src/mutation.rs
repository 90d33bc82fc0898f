//! Firestore's write semantics as pure functions: create, set (with and without merge) and
//! update, with field transforms.
//!
//! A write arrives as typed JSON (see `docs/typed-json.md`). Inside a write, a one-key object
//! whose key is a transform tag is a field transform rather than a value:
//! `{"$increment": n}`, `{"$max": n}`, `{"$min": n}`, `{"$serverTimestamp": true}`,
//! `{"$arrayUnion": [..]}`, `{"$arrayRemove": [..]}` and `{"$delete": true}`. A map whose only
//! key is a tag is written `{"$map": {..}}` and is never a transform. Transforms may sit at any
//! depth inside maps, never inside arrays.
//!
//! [`Mutation::parse`] validates a write once; [`Mutation::apply`] turns the current document
//! into the new one. Applying is infallible apart from the existence checks
//! ([`MutationError::NotFound`], [`MutationError::AlreadyExists`]), so a transaction can parse
//! every write before it locks anything.
//!
//! The semantics follow `google.firestore.v1.Write` and `DocumentTransform`:
//!
//! - Create and set without merge: the document becomes exactly the data (transform fields
//!   removed), then the transforms apply.
//! - Set with merge: every leaf of the data (a non-map value or an empty map) is written at its
//!   path, `$delete` removes a field, other fields are kept.
//! - Update: every key is a field path whose value replaces that field entirely.
//! - Plain writes first, then transforms. Transform targets never overlap (each is one
//!   position in the data, and update paths may not overlap), so their order does not change
//!   the result; they run in the order of the parsed object (keys sorted, as `serde_json` and
//!   `jsonb` both sort them).

use std::cmp::Ordering;

use serde_json::{Map as JsonMap, Value as Json};
use thiserror::Error;

use crate::compare::compare;
use crate::error::ErrorKind;
use crate::path::{FieldPath, PathError};
use crate::reserved::is_reserved_name;
use crate::typed_json::{self, is_tag, TypedJsonError, TRANSFORM_TAGS};
use crate::value::{Map, Timestamp, Value};

/// Which write a [`Mutation`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// Write a new document; fails if it exists.
    Create,
    /// Replace the document (`merge: false`) or merge into it (`merge: true`), creating it if
    /// needed.
    Set { merge: bool },
    /// Change fields of an existing document, addressed by field paths.
    Update,
}

/// A server-side change to one field, computed from its current value at commit time.
#[derive(Debug, Clone, PartialEq)]
pub enum Transform {
    /// Add a number (integer or double).
    Increment(Value),
    /// Keep the larger of the current value and this number.
    Maximum(Value),
    /// Keep the smaller of the current value and this number.
    Minimum(Value),
    /// The commit time.
    ServerTimestamp,
    /// Append the elements not already present.
    ArrayUnion(Vec<Value>),
    /// Remove every element equal to one of these.
    ArrayRemove(Vec<Value>),
}

/// What a write does to one field.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldOp {
    /// Write this value at the path (creating intermediate maps).
    Set(Value),
    /// Remove the field (nothing happens if it does not exist).
    Delete,
    /// Apply a transform to the field.
    Transform(Transform),
}

/// Why a write was refused. Field paths are in their text form (backtick-quoted where needed);
/// a position inside an array is written `field[i]`, inside a transform's operand
/// `field.$arrayUnion[i]`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MutationError {
    /// Malformed typed JSON, located by its full field path. SQLSTATE 22P02.
    #[error(transparent)]
    TypedJson(#[from] TypedJsonError),
    /// The document data or update fields are not a JSON object. SQLSTATE 22023.
    #[error("{what} must be a JSON object, not {got}")]
    NotAnObject { what: &'static str, got: String },
    /// An update key that is not a valid field path, or an empty field name. SQLSTATE 22023.
    #[error(transparent)]
    InvalidFieldPath(PathError),
    /// A field name matching `__.*__` (such as `__name__`). SQLSTATE 22023.
    #[error("field {path} is reserved: field names matching __.*__ cannot be written")]
    ReservedField { path: String },
    /// A transform with a bad operand. SQLSTATE 22023.
    #[error("invalid {tag} at {path}: {reason}")]
    InvalidTransform {
        path: String,
        tag: &'static str,
        reason: String,
    },
    /// A transform inside an array. SQLSTATE 22023.
    #[error("field transform {tag} at {path} is inside an array; transforms may only appear as map values")]
    TransformInArray { path: String, tag: String },
    /// `$delete` where it means nothing. SQLSTATE 22023.
    #[error("$delete at {path} is not allowed: {reason}")]
    DeleteNotAllowed { path: String, reason: &'static str },
    /// The same field path twice in an update (`a.b` and `` `a`.b ``). SQLSTATE 22023.
    #[error("field path {path} is given more than once")]
    DuplicateFieldPath { path: String },
    /// One update path inside another (`a` and `a.b`). SQLSTATE 22023.
    #[error("field paths {parent} and {child} conflict: {child} is inside {parent}")]
    ConflictingFieldPaths { parent: String, child: String },
    /// An update of a document that does not exist. SQLSTATE P0002.
    #[error("the document does not exist; update needs an existing document (use set with merge to create it)")]
    NotFound,
    /// A create of a document that exists. SQLSTATE 23505.
    #[error("the document already exists; create needs a new document (use set to overwrite it)")]
    AlreadyExists,
}

impl MutationError {
    /// The kind of failure (its canonical code and SQLSTATE).
    pub fn kind(&self) -> ErrorKind {
        match self {
            MutationError::TypedJson(_) => ErrorKind::InvalidTypedJson,
            MutationError::NotFound => ErrorKind::NotFound,
            MutationError::AlreadyExists => ErrorKind::AlreadyExists,
            MutationError::NotAnObject { .. }
            | MutationError::InvalidFieldPath(_)
            | MutationError::ReservedField { .. }
            | MutationError::InvalidTransform { .. }
            | MutationError::TransformInArray { .. }
            | MutationError::DeleteNotAllowed { .. }
            | MutationError::DuplicateFieldPath { .. }
            | MutationError::ConflictingFieldPaths { .. } => ErrorKind::InvalidArgument,
        }
    }
}

/// One parsed, validated write.
#[derive(Debug, Clone)]
pub struct Mutation {
    kind: WriteKind,
    /// Create and set without merge: the document data without its transform fields.
    data: Map,
    /// Plain writes (merge and update only), then transforms, in application order.
    ops: Vec<(FieldPath, FieldOp)>,
    /// Sorted; `None` for a full replace.
    mask: Option<Vec<FieldPath>>,
}

impl Mutation {
    /// Parse the JSON a user passed.
    ///
    /// For [`WriteKind::Create`] and [`WriteKind::Set`], `json` is the document data: a typed
    /// JSON object whose keys are field names, with transforms allowed at any depth inside
    /// maps. For [`WriteKind::Update`], `json` is the `fields` object: its keys are field paths
    /// in text form ([`FieldPath::parse`]), its values typed JSON (transforms allowed, also
    /// nested inside map values; `$delete` only directly under a key).
    ///
    /// An update with no fields is allowed: it changes nothing but the document's update time
    /// (and still fails with [`MutationError::NotFound`] on a missing document), as Firestore
    /// accepts an update with an empty mask.
    ///
    /// # Errors
    /// Malformed typed JSON ([`MutationError::TypedJson`]); data that is not an object; bad
    /// field paths, reserved field names, overlapping or repeated update paths; transforms with
    /// bad operands, transforms inside arrays, `$delete` in a create, a set without merge or
    /// nested inside an update value.
    pub fn parse(kind: WriteKind, json: &Json) -> Result<Mutation, MutationError> {
        match kind {
            WriteKind::Create | WriteKind::Set { merge: false } => {
                let object = document_object(json)?;
                let mut walker = Walker::new(false, DeleteRule::NotInReplace);
                let data = walker.walk(object, &[])?;
                Ok(Mutation {
                    kind,
                    data,
                    ops: walker.into_ops(),
                    mask: None,
                })
            }
            WriteKind::Set { merge: true } => {
                let object = document_object(json)?;
                let mut walker = Walker::new(true, DeleteRule::Allowed);
                walker.walk(object, &[])?;
                let mut mask: Vec<FieldPath> = walker
                    .writes
                    .iter()
                    .chain(&walker.transforms)
                    .map(|(path, _)| path.clone())
                    .collect();
                mask.sort();
                Ok(Mutation {
                    kind,
                    data: Map::new(),
                    ops: walker.into_ops(),
                    mask: Some(mask),
                })
            }
            WriteKind::Update => parse_update(json),
        }
    }

    /// Apply to the current document (`None`: it does not exist) at commit time
    /// `server_time` (the value of `$serverTimestamp`), returning the new document's fields.
    ///
    /// # Errors
    /// [`MutationError::NotFound`] for an update of a missing document,
    /// [`MutationError::AlreadyExists`] for a create of an existing one. Nothing else fails:
    /// every other check happened in [`Mutation::parse`].
    pub fn apply(
        &self,
        existing: Option<&Map>,
        server_time: Timestamp,
    ) -> Result<Map, MutationError> {
        match (self.kind, existing) {
            (WriteKind::Create, Some(_)) => Err(MutationError::AlreadyExists),
            (WriteKind::Update, None) => Err(MutationError::NotFound),
            _ => Ok(self.apply_ignoring_existence(existing, server_time)),
        }
    }

    /// The document this write would produce if its existence check passed: a create of an
    /// existing document replaces it, an update of a missing one starts from an empty
    /// document. What security rules see as `request.resource` when they decide a write that
    /// fails on its own (so that the failure cannot reveal whether the document exists to a
    /// caller the rules deny).
    pub fn apply_ignoring_existence(&self, existing: Option<&Map>, server_time: Timestamp) -> Map {
        let mut doc = match (self.kind, existing) {
            (WriteKind::Create | WriteKind::Set { merge: false }, _) => self.data.clone(),
            (WriteKind::Set { merge: true } | WriteKind::Update, current) => {
                current.cloned().unwrap_or_default()
            }
        };
        for (path, op) in &self.ops {
            match op {
                FieldOp::Set(value) => set_at(&mut doc, path.segments(), value.clone()),
                FieldOp::Delete => delete_at(&mut doc, path.segments()),
                FieldOp::Transform(transform) => {
                    let new = transform.apply(get_at(&doc, path.segments()), server_time);
                    set_at(&mut doc, path.segments(), new);
                }
            }
        }
        doc
    }

    /// Which write this is.
    pub fn kind(&self) -> &WriteKind {
        &self.kind
    }

    /// The field paths this mutation may change, sorted: for set with merge every leaf of the
    /// data (non-map values, empty maps, `$delete`s and transforms), for update its keys.
    /// `None` for a full replace (create, set without merge).
    pub fn field_mask(&self) -> Option<Vec<FieldPath>> {
        self.mask.clone()
    }

    /// The field operations in application order: plain writes, then transforms. For a full
    /// replace these are only the transforms; the rest is [`Mutation::data`].
    pub fn ops(&self) -> &[(FieldPath, FieldOp)] {
        &self.ops
    }

    /// The replacing document without its transform fields, for create and set without
    /// merge; `None` otherwise.
    pub fn data(&self) -> Option<&Map> {
        match self.kind {
            WriteKind::Create | WriteKind::Set { merge: false } => Some(&self.data),
            WriteKind::Set { merge: true } | WriteKind::Update => None,
        }
    }
}

impl Transform {
    /// The typed JSON tag of this transform.
    pub fn tag(&self) -> &'static str {
        match self {
            Transform::Increment(_) => "$increment",
            Transform::Maximum(_) => "$max",
            Transform::Minimum(_) => "$min",
            Transform::ServerTimestamp => "$serverTimestamp",
            Transform::ArrayUnion(_) => "$arrayUnion",
            Transform::ArrayRemove(_) => "$arrayRemove",
        }
    }

    /// The field's new value given its current one (`None`: missing).
    ///
    /// Numeric transforms expect a number operand ([`Mutation::parse`] guarantees it); a
    /// current value that is missing or not a number is replaced by the operand.
    pub fn apply(&self, current: Option<&Value>, server_time: Timestamp) -> Value {
        let current_number = current.filter(|v| is_number(v));
        match self {
            Transform::Increment(by) => increment(current_number, by),
            Transform::Maximum(operand) => extremum(current_number, operand, Ordering::Greater),
            Transform::Minimum(operand) => extremum(current_number, operand, Ordering::Less),
            Transform::ServerTimestamp => Value::Timestamp(server_time),
            Transform::ArrayUnion(elements) => {
                let mut out = match current {
                    Some(Value::Array(items)) => items.clone(),
                    _ => Vec::new(),
                };
                for element in elements {
                    if !contains(&out, element) {
                        out.push(element.clone());
                    }
                }
                Value::Array(out)
            }
            Transform::ArrayRemove(elements) => match current {
                Some(Value::Array(items)) => Value::Array(
                    items
                        .iter()
                        .filter(|item| !contains(elements, item))
                        .cloned()
                        .collect(),
                ),
                _ => Value::Array(Vec::new()),
            },
        }
    }
}

fn is_number(value: &Value) -> bool {
    matches!(value, Value::Integer(_) | Value::Double(_))
}

fn is_nan(value: &Value) -> bool {
    matches!(value, Value::Double(d) if d.is_nan())
}

/// Firestore equality (`3` equals `3.0`, NaN equals NaN).
fn contains(items: &[Value], value: &Value) -> bool {
    items.iter().any(|item| compare(item, value).is_eq())
}

/// `$increment`: integers saturate, a double on either side makes it double arithmetic.
#[allow(clippy::cast_precision_loss)]
fn increment(current: Option<&Value>, by: &Value) -> Value {
    match (current, by) {
        (Some(Value::Integer(a)), Value::Integer(b)) => Value::Integer(a.saturating_add(*b)),
        (Some(Value::Integer(a)), Value::Double(b)) => Value::Double(*a as f64 + b),
        (Some(Value::Double(a)), Value::Integer(b)) => Value::Double(a + *b as f64),
        (Some(Value::Double(a)), Value::Double(b)) => Value::Double(a + b),
        _ => by.clone(),
    }
}

/// `$max` (`wanted` = Greater) and `$min` (Less): NaN wins, a tie keeps the stored value, the
/// winner keeps its own type.
fn extremum(current: Option<&Value>, operand: &Value, wanted: Ordering) -> Value {
    let Some(current) = current else {
        return operand.clone();
    };
    if is_nan(current) {
        return current.clone();
    }
    if is_nan(operand) || compare(operand, current) == wanted {
        return operand.clone();
    }
    current.clone()
}

fn get_at<'a>(map: &'a Map, segments: &[String]) -> Option<&'a Value> {
    let (first, rest) = segments.split_first()?;
    let value = map.get(first)?;
    if rest.is_empty() {
        return Some(value);
    }
    match value {
        Value::Map(child) => get_at(child, rest),
        _ => None,
    }
}

/// Write `value` at the path, creating intermediate maps and replacing non-map intermediates.
fn set_at(map: &mut Map, segments: &[String], value: Value) {
    let Some((first, rest)) = segments.split_first() else {
        return;
    };
    if rest.is_empty() {
        map.insert(first.clone(), value);
        return;
    }
    let entry = map
        .entry(first.clone())
        .or_insert_with(|| Value::Map(Map::new()));
    if !matches!(entry, Value::Map(_)) {
        *entry = Value::Map(Map::new());
    }
    if let Value::Map(child) = entry {
        set_at(child, rest, value);
    }
}

/// Remove the field at the path; a missing field or non-map intermediate is left alone.
/// Emptied parent maps stay (Firestore keeps `{a: {}}` after deleting `a.b`).
fn delete_at(map: &mut Map, segments: &[String]) {
    match segments {
        [] => {}
        [last] => {
            map.remove(last);
        }
        [first, rest @ ..] => {
            if let Some(Value::Map(child)) = map.get_mut(first) {
                delete_at(child, rest);
            }
        }
    }
}

/// What a JSON value is inside a write.
enum Shape<'a> {
    /// `{"$increment": ..}` and friends.
    Transform(&'static str, &'a Json),
    /// A plain object or the contents of `{"$map": {..}}`: its keys are field names.
    Map(&'a JsonMap<String, Json>),
    /// Anything else: converted by [`typed_json::from_json`].
    Leaf(&'a Json),
}

fn classify(json: &Json) -> Shape<'_> {
    let Json::Object(object) = json else {
        return Shape::Leaf(json);
    };
    if object.len() == 1 {
        if let Some((key, arg)) = object.iter().next() {
            if let Some(tag) = TRANSFORM_TAGS
                .iter()
                .copied()
                .find(|tag| *tag == key.as_str())
            {
                return Shape::Transform(tag, arg);
            }
            if key == "$map" {
                return match arg {
                    Json::Object(inner) => Shape::Map(inner),
                    // Not an object: let typed JSON report the bad $map.
                    _ => Shape::Leaf(json),
                };
            }
            if is_tag(key) {
                return Shape::Leaf(json);
            }
        }
    }
    Shape::Map(object)
}

/// How a JSON value that is not a document reads in messages.
fn describe(json: &Json) -> String {
    match classify(json) {
        Shape::Transform(tag, _) => format!("a field transform ({tag})"),
        Shape::Map(_) => "an object".to_owned(),
        Shape::Leaf(Json::Object(object)) => match object.keys().next() {
            Some(tag) => format!("a {tag} value"),
            None => "an object".to_owned(),
        },
        Shape::Leaf(Json::Array(_)) => "an array".to_owned(),
        Shape::Leaf(Json::String(_)) => "a string".to_owned(),
        Shape::Leaf(Json::Number(_)) => "a number".to_owned(),
        Shape::Leaf(Json::Bool(_)) => "a boolean".to_owned(),
        Shape::Leaf(Json::Null) => "null".to_owned(),
    }
}

fn document_object(json: &Json) -> Result<&JsonMap<String, Json>, MutationError> {
    match classify(json) {
        Shape::Map(object) => Ok(object),
        _ => Err(MutationError::NotAnObject {
            what: "document data",
            got: describe(json),
        }),
    }
}

fn is_reserved_field(segment: &str) -> bool {
    is_reserved_name(segment) && segment.starts_with("__")
}

fn check_reserved_path(path: &FieldPath) -> Result<(), MutationError> {
    if path.segments().iter().any(|s| is_reserved_field(s)) {
        return Err(MutationError::ReservedField {
            path: path.to_string(),
        });
    }
    Ok(())
}

/// Reserved names inside a converted value (maps inside arrays).
fn check_reserved_value(value: &Value, at: &str) -> Result<(), MutationError> {
    match value {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| check_reserved_value(item, &format!("{at}[{i}]"))),
        Value::Map(map) => map.iter().try_for_each(|(key, item)| {
            let at = format!("{at}.{}", FieldPath::single(key));
            if is_reserved_field(key) {
                return Err(MutationError::ReservedField { path: at });
            }
            check_reserved_value(item, &at)
        }),
        _ => Ok(()),
    }
}

/// `base` followed by a typed JSON location relative to it (`<root>`, `[0].b`, `b[1]`).
fn join_location(base: &str, at: &str) -> String {
    if at == "<root>" {
        base.to_owned()
    } else if at.starts_with('[') {
        format!("{base}{at}")
    } else {
        format!("{base}.{at}")
    }
}

/// Re-locate a typed JSON error from a value at `base` to the whole write. A transform that
/// typed JSON refused can only have been inside an array: every map is walked here.
fn locate(error: TypedJsonError, base: &str) -> MutationError {
    match error {
        TypedJsonError::TransformNotAllowed { at, tag } => MutationError::TransformInArray {
            path: join_location(base, &at),
            tag,
        },
        TypedJsonError::NumberOutOfRange { at, text } => TypedJsonError::NumberOutOfRange {
            at: join_location(base, &at),
            text,
        }
        .into(),
        TypedJsonError::BadTag { at, tag, reason } => TypedJsonError::BadTag {
            at: join_location(base, &at),
            tag,
            reason,
        }
        .into(),
        TypedJsonError::NulCharacter { at } => TypedJsonError::NulCharacter {
            at: join_location(base, &at),
        }
        .into(),
        TypedJsonError::TooDeep { at } => TypedJsonError::TooDeep {
            at: join_location(base, &at),
        }
        .into(),
        TypedJsonError::Syntax(text) => TypedJsonError::Syntax(text).into(),
        TypedJsonError::ReservedKey => TypedJsonError::ReservedKey.into(),
    }
}

/// A plain value at `at`.
fn leaf_value(json: &Json, at: &str) -> Result<Value, MutationError> {
    let value = typed_json::from_json(json).map_err(|e| locate(e, at))?;
    check_reserved_value(&value, at)?;
    Ok(value)
}

fn require_true(tag: &'static str, arg: &Json, at: &str) -> Result<(), MutationError> {
    if arg == &Json::Bool(true) {
        Ok(())
    } else {
        Err(MutationError::InvalidTransform {
            path: at.to_owned(),
            tag,
            reason: format!("the argument must be true, not {}", describe(arg)),
        })
    }
}

fn number_operand(tag: &'static str, arg: &Json, at: &str) -> Result<Value, MutationError> {
    let invalid = |got: &str| MutationError::InvalidTransform {
        path: at.to_owned(),
        tag,
        reason: format!("the argument must be a number (integer or double), not {got}"),
    };
    match typed_json::from_json(arg) {
        Ok(value) if is_number(&value) => Ok(value),
        Ok(other) => Err(invalid(other.type_name())),
        Err(TypedJsonError::TransformNotAllowed { .. }) => Err(invalid(&describe(arg))),
        Err(e) => Err(locate(e, &format!("{at}.{tag}"))),
    }
}

fn array_operand(tag: &'static str, arg: &Json, at: &str) -> Result<Vec<Value>, MutationError> {
    let Json::Array(items) = arg else {
        return Err(MutationError::InvalidTransform {
            path: at.to_owned(),
            tag,
            reason: format!("the argument must be an array, not {}", describe(arg)),
        });
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| leaf_value(item, &format!("{at}.{tag}[{i}]")))
        .collect()
}

/// A transform other than `$delete`.
fn parse_transform(tag: &'static str, arg: &Json, at: &str) -> Result<Transform, MutationError> {
    Ok(match tag {
        "$increment" => Transform::Increment(number_operand(tag, arg, at)?),
        "$max" => Transform::Maximum(number_operand(tag, arg, at)?),
        "$min" => Transform::Minimum(number_operand(tag, arg, at)?),
        "$arrayUnion" => Transform::ArrayUnion(array_operand(tag, arg, at)?),
        "$arrayRemove" => Transform::ArrayRemove(array_operand(tag, arg, at)?),
        _ => {
            require_true(tag, arg, at)?;
            Transform::ServerTimestamp
        }
    })
}

/// Where `$delete` may appear.
#[derive(Clone, Copy)]
enum DeleteRule {
    Allowed,
    NotInReplace,
    NotNestedInUpdate,
}

/// Walks the maps of a write, collecting leaves and transforms with their full paths.
struct Walker {
    /// Record each leaf as a [`FieldOp::Set`] (set with merge).
    record_leaves: bool,
    delete: DeleteRule,
    writes: Vec<(FieldPath, FieldOp)>,
    transforms: Vec<(FieldPath, FieldOp)>,
}

impl Walker {
    fn new(record_leaves: bool, delete: DeleteRule) -> Self {
        Walker {
            record_leaves,
            delete,
            writes: Vec::new(),
            transforms: Vec::new(),
        }
    }

    fn into_ops(self) -> Vec<(FieldPath, FieldOp)> {
        let mut ops = self.writes;
        ops.extend(self.transforms);
        ops
    }

    /// Convert a map at `prefix`, returning it without its transform fields.
    fn walk(
        &mut self,
        object: &JsonMap<String, Json>,
        prefix: &[String],
    ) -> Result<Map, MutationError> {
        let mut out = Map::new();
        for (key, json) in object {
            let mut segments = prefix.to_vec();
            segments.push(key.clone());
            let path = field_path(segments, prefix, key)?;
            check_reserved_path(&path)?;
            match classify(json) {
                Shape::Transform(tag, arg) => self.transform(path, tag, arg)?,
                Shape::Map(inner) if inner.is_empty() => {
                    if self.record_leaves {
                        self.writes
                            .push((path, FieldOp::Set(Value::Map(Map::new()))));
                    } else {
                        out.insert(key.clone(), Value::Map(Map::new()));
                    }
                }
                Shape::Map(inner) => {
                    let child = self.walk(inner, path.segments())?;
                    if !self.record_leaves {
                        out.insert(key.clone(), Value::Map(child));
                    }
                }
                Shape::Leaf(json) => {
                    let value = leaf_value(json, &path.to_string())?;
                    if self.record_leaves {
                        self.writes.push((path, FieldOp::Set(value)));
                    } else {
                        out.insert(key.clone(), value);
                    }
                }
            }
        }
        Ok(out)
    }

    fn transform(
        &mut self,
        path: FieldPath,
        tag: &'static str,
        arg: &Json,
    ) -> Result<(), MutationError> {
        let at = path.to_string();
        if tag != "$delete" {
            let transform = parse_transform(tag, arg, &at)?;
            self.transforms.push((path, FieldOp::Transform(transform)));
            return Ok(());
        }
        require_true(tag, arg, &at)?;
        let reason = match self.delete {
            DeleteRule::Allowed => {
                self.writes.push((path, FieldOp::Delete));
                return Ok(());
            }
            DeleteRule::NotInReplace => "only set with merge and update can delete fields",
            DeleteRule::NotNestedInUpdate => {
                "in an update, $delete must be the whole value of a key; write the field path as the key (\"a.b\": {\"$delete\": true})"
            }
        };
        Err(MutationError::DeleteNotAllowed { path: at, reason })
    }
}

/// The path of field `key` inside `prefix`; empty names and U+0000 are refused.
fn field_path(
    segments: Vec<String>,
    prefix: &[String],
    key: &str,
) -> Result<FieldPath, MutationError> {
    FieldPath::new(segments).map_err(|e| {
        let parent =
            FieldPath::new(prefix.to_vec()).map_or_else(|_| String::new(), |p| format!("{p}."));
        match e {
            PathError::NulCharacter => TypedJsonError::NulCharacter {
                at: format!("{parent}{}", key.replace('\0', "\\u0000")),
            }
            .into(),
            _ => MutationError::InvalidFieldPath(PathError::InvalidFieldPath {
                path: format!("{parent}``"),
                reason: "field names cannot be empty",
            }),
        }
    })
}

fn parse_update(json: &Json) -> Result<Mutation, MutationError> {
    let Json::Object(fields) = json else {
        return Err(MutationError::NotAnObject {
            what: "update fields",
            got: describe(json),
        });
    };
    let mut walker = Walker::new(false, DeleteRule::NotNestedInUpdate);
    let mut writes = Vec::new();
    let mut mask = Vec::with_capacity(fields.len());
    for (key, json) in fields {
        let path = FieldPath::parse(key).map_err(MutationError::InvalidFieldPath)?;
        check_reserved_path(&path)?;
        mask.push(path.clone());
        match classify(json) {
            Shape::Transform("$delete", arg) => {
                require_true("$delete", arg, &path.to_string())?;
                writes.push((path, FieldOp::Delete));
            }
            Shape::Transform(tag, arg) => {
                let transform = parse_transform(tag, arg, &path.to_string())?;
                walker
                    .transforms
                    .push((path, FieldOp::Transform(transform)));
            }
            Shape::Map(inner) => {
                let map = walker.walk(inner, path.segments())?;
                writes.push((path, FieldOp::Set(Value::Map(map))));
            }
            Shape::Leaf(json) => {
                let value = leaf_value(json, &path.to_string())?;
                writes.push((path, FieldOp::Set(value)));
            }
        }
    }
    mask.sort();
    // Sorted, a path is directly followed by the paths inside it.
    for pair in mask.windows(2) {
        if let [parent, child] = pair {
            if parent == child {
                return Err(MutationError::DuplicateFieldPath {
                    path: parent.to_string(),
                });
            }
            if child.starts_with(parent) {
                return Err(MutationError::ConflictingFieldPaths {
                    parent: parent.to_string(),
                    child: child.to_string(),
                });
            }
        }
    }
    writes.append(&mut walker.transforms);
    Ok(Mutation {
        kind: WriteKind::Update,
        data: Map::new(),
        ops: writes,
        mask: Some(mask),
    })
}
