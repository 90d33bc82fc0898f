//! The one conversion between Firestore's protobuf values (`google.firestore.v1.Value`, the
//! wire of the gRPC front end, docs/grpc.md) and ours ([`Value`]). Feature `firestore-proto`.
//!
//! Decoding is structural: it refuses what no [`Value`] can hold (a value with no type, a
//! timestamp outside years 1-9999, a geopoint off the globe, a malformed vector, a reference to
//! another database, pipeline expressions) with [`ProtoError`], whose kind is
//! [`ErrorKind::InvalidArgument`]. Document rules (reserved field names, nesting, sizes) stay
//! with [`crate::document`], as for every other front end.
//!
//! - Timestamps: a protobuf timestamp has nanoseconds, ours microseconds. As Firestore does
//!   ("precise only to microseconds; any additional precision is rounded down"), decoding
//!   truncates towards the past (`nanos` is never negative, so this is a floor).
//! - Vectors: on the wire a vector is the map `{"__type__": "__vector__", "value": [doubles]}`
//!   (what every SDK sends and Firestore answers). Decoding reads any map whose `__type__` is
//!   `"__vector__"` as a vector, and refuses it unless it has exactly those two fields, the
//!   value an array of doubles of at most [`MAX_VECTOR_DIMENSIONS`]. Other maps with a
//!   `__type__` field stay maps (the document checks refuse such reserved names in writes).
//! - References: `projects/{p}/databases/{d}/documents/{path}`. Our references are within one
//!   database ([`Value::Reference`]), so `{d}` must be the database of the request; `{p}` is
//!   read and ignored, as in every name the front end accepts. A reference naming another
//!   database is refused, INVALID_ARGUMENT with both database ids in the message.
//! - Doubles travel bit for bit: `-0.0`, NaN and the infinities round-trip.

use std::collections::HashMap;

pub use googleapis_tonic_google_firestore_v1::google::r#type::LatLng;
use thiserror::Error;

use crate::error::ErrorKind;
use crate::limits::MAX_VECTOR_DIMENSIONS;
use crate::path::ResourcePath;
use crate::typed_json::{self, TypedJsonError};
use crate::value::{GeoPoint, Map, Timestamp, Value};

pub use googleapis_tonic_google_firestore_v1::google::firestore::v1::value::ValueType;
pub use googleapis_tonic_google_firestore_v1::google::firestore::v1::{
    ArrayValue, Document as ProtoDocument, MapValue, Value as ProtoValue,
};
pub use prost_types::Timestamp as ProtoTimestamp;

/// The key of the wire form of a vector that names its type.
pub const VECTOR_TYPE_KEY: &str = "__type__";
/// The value of [`VECTOR_TYPE_KEY`] in a vector.
pub const VECTOR_TYPE: &str = "__vector__";
/// The key of the wire form of a vector that holds its elements.
pub const VECTOR_VALUE_KEY: &str = "value";

/// Why a protobuf value was refused. `at` is the field path of the offending value
/// (`<root>` for the value itself, as in typed JSON's errors).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtoError {
    #[error("value at {at} has no type set (a Value must hold one of its kinds)")]
    NoType { at: String },
    #[error("{kind} at {at} is not allowed in a document value")]
    NotStorable { at: String, kind: &'static str },
    #[error("timestamp at {at} is invalid: {reason}")]
    BadTimestamp { at: String, reason: String },
    #[error("geopoint at {at} is invalid: {reason}")]
    BadGeoPoint { at: String, reason: &'static str },
    #[error("vector at {at} is invalid: {reason}")]
    BadVector { at: String, reason: String },
    #[error("reference at {at} is invalid: {reason}")]
    BadReference { at: String, reason: String },
    #[error("name is invalid: {reason}")]
    BadName { reason: String },
    #[error("write is invalid: {reason}")]
    BadWrite { reason: String },
    #[error("query is invalid: {reason}")]
    BadQuery { reason: String },
    #[error(
        "reference at {at} names database \"{found}\", but this request is on database \"{expected}\": references across databases are not supported"
    )]
    OtherDatabase {
        at: String,
        found: String,
        expected: String,
    },
}

impl ProtoError {
    /// The kind of failure: every protobuf value error is [`ErrorKind::InvalidArgument`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidArgument
    }
}

/// The database a conversion runs in: what references are written with and checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseName {
    /// The project id; accepted and ignored in what clients send, written back in names.
    pub project: String,
    /// Our database id (`(default)` or a named database).
    pub database: String,
}

impl DatabaseName {
    /// `projects/{project}/databases/{database}`.
    pub fn name(&self) -> String {
        format!("projects/{}/databases/{}", self.project, self.database)
    }

    /// `projects/{project}/databases/{database}/documents/{path}` (the wire name of a
    /// document, of a reference, of a collection).
    pub fn document_name(&self, path: &ResourcePath) -> String {
        format!("{}/documents/{path}", self.name())
    }

    /// The path a full name (`projects/{p}/databases/{d}/documents/...`) names in this
    /// database: `None` for the documents root itself (`.../documents`), else the path
    /// (document or collection).
    ///
    /// # Errors
    /// [`ProtoError::BadName`] for a name of another shape or a bad path,
    /// [`ProtoError::OtherDatabase`] (`at` is `<name>`) for a name of another database.
    pub fn parse_name(&self, name: &str) -> Result<Option<ResourcePath>, ProtoError> {
        self.parse_at(name, "<name>").map_err(|e| match e {
            ProtoError::BadReference { reason, .. } => ProtoError::BadName { reason },
            other => other,
        })
    }

    /// The database at the head of a name, `projects/{p}/databases/{d}`, and what follows it
    /// (empty, or starting with `/`); `None` when the name does not start that way. The
    /// database id is not checked here (see [`crate::path::is_valid_database_id`]).
    pub fn split_name(name: &str) -> Option<(DatabaseName, &str)> {
        let rest = name.strip_prefix("projects/")?;
        let (project, rest) = rest.split_once('/')?;
        let rest = rest.strip_prefix("databases/")?;
        let end = rest.find('/').unwrap_or(rest.len());
        let (database, rest) = rest.split_at(end);
        if project.is_empty() || database.is_empty() {
            return None;
        }
        let db = DatabaseName {
            project: project.to_owned(),
            database: database.to_owned(),
        };
        Some((db, rest))
    }

    fn parse_at(&self, name: &str, at: &str) -> Result<Option<ResourcePath>, ProtoError> {
        let bad = |reason: String| ProtoError::BadReference {
            at: at.to_owned(),
            reason,
        };
        let shape = || {
            bad(format!(
                "\"{}\" is not of the form projects/{{project}}/databases/{{database}}/documents/{{path}}",
                crate::path::abbreviate(name)
            ))
        };
        let (named, rest) = DatabaseName::split_name(name).ok_or_else(shape)?;
        if named.database != self.database {
            return Err(ProtoError::OtherDatabase {
                at: at.to_owned(),
                found: crate::path::abbreviate(&named.database),
                expected: self.database.clone(),
            });
        }
        if rest == "/documents" {
            return Ok(None);
        }
        let path = rest.strip_prefix("/documents/").ok_or_else(shape)?;
        // Not `ResourcePath::parse`, which takes a leading `/`: `documents//c/d` is no name.
        ResourcePath::from_segments(path.split('/').map(str::to_owned).collect())
            .map(Some)
            .map_err(|e| bad(e.to_string()))
    }
}

/// Our value as Firestore's protobuf value. Never fails: every [`Value`] has a wire form.
pub fn value_to_proto(value: &Value, db: &DatabaseName) -> ProtoValue {
    match value {
        Value::Array(items) => array_proto(items.iter().map(|v| value_to_proto(v, db)).collect()),
        Value::Map(map) => map_proto(fields_to_proto(map, db)),
        // A leaf: cloning it is the copy of its string or bytes the message needs anyway.
        leaf => value_into_proto(leaf.clone(), db),
    }
}

/// [`value_to_proto`] of a value given away (strings and bytes move into the message). The
/// one mapping of our kinds to the wire's.
pub fn value_into_proto(value: Value, db: &DatabaseName) -> ProtoValue {
    let kind = match value {
        Value::Null => ValueType::NullValue(0),
        Value::Boolean(b) => ValueType::BooleanValue(b),
        Value::Integer(i) => ValueType::IntegerValue(i),
        Value::Double(d) => ValueType::DoubleValue(d),
        Value::Timestamp(t) => ValueType::TimestampValue(timestamp_to_proto(t)),
        Value::String(s) => ValueType::StringValue(s),
        Value::Bytes(b) => ValueType::BytesValue(b),
        Value::Reference(path) => ValueType::ReferenceValue(db.document_name(&path)),
        Value::GeoPoint(g) => ValueType::GeoPointValue(LatLng {
            latitude: g.latitude,
            longitude: g.longitude,
        }),
        Value::Array(items) => {
            return array_proto(items.into_iter().map(|v| value_into_proto(v, db)).collect())
        }
        Value::Vector(items) => {
            let elements = items
                .into_iter()
                .map(|d| ProtoValue {
                    value_type: Some(ValueType::DoubleValue(d)),
                })
                .collect();
            let fields = HashMap::from([
                (
                    VECTOR_TYPE_KEY.to_owned(),
                    ProtoValue {
                        value_type: Some(ValueType::StringValue(VECTOR_TYPE.to_owned())),
                    },
                ),
                (VECTOR_VALUE_KEY.to_owned(), array_proto(elements)),
            ]);
            ValueType::MapValue(MapValue { fields })
        }
        Value::Map(map) => {
            return map_proto(
                map.into_iter()
                    .map(|(k, v)| (k, value_into_proto(v, db)))
                    .collect(),
            )
        }
    };
    ProtoValue {
        value_type: Some(kind),
    }
}

fn array_proto(values: Vec<ProtoValue>) -> ProtoValue {
    ProtoValue {
        value_type: Some(ValueType::ArrayValue(ArrayValue { values })),
    }
}

fn map_proto(fields: HashMap<String, ProtoValue>) -> ProtoValue {
    ProtoValue {
        value_type: Some(ValueType::MapValue(MapValue { fields })),
    }
}

/// A document's fields (or any map) as the protobuf `fields` of a `Document` / `MapValue`.
pub fn fields_to_proto(map: &Map, db: &DatabaseName) -> HashMap<String, ProtoValue> {
    map.iter()
        .map(|(k, v)| (k.clone(), value_to_proto(v, db)))
        .collect()
}

/// A stored document as Firestore's protobuf `Document`.
pub fn document_to_proto(
    db: &DatabaseName,
    path: &ResourcePath,
    fields: &Map,
    create_time: Timestamp,
    update_time: Timestamp,
) -> ProtoDocument {
    ProtoDocument {
        name: db.document_name(path),
        fields: fields_to_proto(fields, db),
        create_time: Some(timestamp_to_proto(create_time)),
        update_time: Some(timestamp_to_proto(update_time)),
    }
}

/// [`typed_json::Build`] of protobuf values: typed JSON text read straight into the wire
/// form ([`typed_json::parse_with`]), each value through [`value_into_proto`].
#[derive(Debug, Clone, Copy)]
pub struct ProtoBuild<'a> {
    /// The database references are named in.
    pub db: &'a DatabaseName,
}

impl typed_json::Build for ProtoBuild<'_> {
    type Out = ProtoValue;
    // A map's fields are gathered in order, then hashed into a map sized once for them: no
    // growth (rehash) of the map as its fields arrive (serde_json gives no count ahead).
    type Fields = Vec<(String, ProtoValue)>;
    fn value(&self, value: Value) -> ProtoValue {
        value_into_proto(value, self.db)
    }
    fn array(&self, items: Vec<ProtoValue>) -> ProtoValue {
        array_proto(items)
    }
    fn insert(&self, fields: &mut Self::Fields, key: String, value: ProtoValue) {
        fields.push((key, value));
    }
    fn map(&self, fields: Self::Fields) -> ProtoValue {
        // In order, so a later equal key replaces an earlier one ([`typed_json::Build::insert`]).
        let mut map = HashMap::with_capacity(fields.len());
        map.extend(fields);
        map_proto(map)
    }
}

/// Typed JSON text (a stored document's data, as Postgres returns it) as the protobuf
/// `fields` of a `Document`, in one pass: the same as [`fields_to_proto`] of what
/// [`typed_json::parse`] reads, without that [`Value`] between.
///
/// # Errors
/// As [`typed_json::parse`]; [`TypedJsonError::BadTag`] (`$map`) when the text is not a map.
pub fn fields_from_typed_json(
    text: &str,
    db: &DatabaseName,
) -> Result<HashMap<String, ProtoValue>, TypedJsonError> {
    document_fields(typed_json::parse_with(text, &ProtoBuild { db })?)
}

/// The fields of a document's data read as a wire value: the one check that it is a map
/// (and not a vector's wire form) of [`fields_from_typed_json`] and of the wire bytes
/// written straight from typed JSON ([`crate::proto_wire`]).
///
/// # Errors
/// [`TypedJsonError::BadTag`] (`$map`) when the value is not a map.
pub(crate) fn document_fields(
    value: ProtoValue,
) -> Result<HashMap<String, ProtoValue>, TypedJsonError> {
    match value.value_type {
        // Not a vector's wire form (a map of `__type__` and `value`, names no document holds).
        Some(ValueType::MapValue(map)) if vector_type(&map) != Some(true) => Ok(map.fields),
        Some(ValueType::MapValue(_)) => Err(not_a_map("a vector")),
        other => Err(not_a_map(other.as_ref().map_or("no value", wire_kind))),
    }
}

/// [`fields_from_typed_json`]'s error for a text that is not a map.
fn not_a_map(kind: &str) -> TypedJsonError {
    TypedJsonError::BadTag {
        at: "<root>".into(),
        tag: "$map",
        reason: format!("a document must be a JSON object, not {kind}"),
    }
}

/// A stored document, its data typed JSON text, as Firestore's protobuf `Document`: the same
/// as [`document_to_proto`] of the parsed fields, in one pass ([`fields_from_typed_json`]).
///
/// # Errors
/// As [`fields_from_typed_json`].
pub fn document_from_typed_json(
    db: &DatabaseName,
    path: &ResourcePath,
    text: &str,
    create_time: Timestamp,
    update_time: Timestamp,
) -> Result<ProtoDocument, TypedJsonError> {
    Ok(ProtoDocument {
        name: db.document_name(path),
        fields: fields_from_typed_json(text, db)?,
        create_time: Some(timestamp_to_proto(create_time)),
        update_time: Some(timestamp_to_proto(update_time)),
    })
}

/// The kind of a wire value, for messages.
fn wire_kind(kind: &ValueType) -> &'static str {
    match kind {
        ValueType::NullValue(_) => "a null",
        ValueType::BooleanValue(_) => "a boolean",
        ValueType::IntegerValue(_) => "an integer",
        ValueType::DoubleValue(_) => "a double",
        ValueType::TimestampValue(_) => "a timestamp",
        ValueType::StringValue(_) => "a string",
        ValueType::BytesValue(_) => "bytes",
        ValueType::ReferenceValue(_) => "a reference",
        ValueType::GeoPointValue(_) => "a geopoint",
        ValueType::ArrayValue(_) => "an array",
        ValueType::MapValue(_) => "a map",
        _ => "an expression",
    }
}

/// Firestore's protobuf value as ours.
///
/// # Errors
/// [`ProtoError`] (kind INVALID_ARGUMENT), see the module documentation.
pub fn value_from_proto(value: &ProtoValue, db: &DatabaseName) -> Result<Value, ProtoError> {
    let mut trail = Vec::new();
    decode(value, db, &mut trail)
}

/// The protobuf `fields` of a `Document` (or `MapValue`) as our map.
///
/// # Errors
/// As [`value_from_proto`]; `at` names the field.
pub fn fields_from_proto(
    fields: &HashMap<String, ProtoValue>,
    db: &DatabaseName,
) -> Result<Map, ProtoError> {
    let mut trail = Vec::new();
    decode_fields(fields, db, &mut trail)
}

/// Our timestamp as a protobuf timestamp.
pub fn timestamp_to_proto(t: Timestamp) -> ProtoTimestamp {
    let micros = t.micros();
    let seconds = micros.div_euclid(1_000_000);
    // In 0..1_000_000, times 1000: in 0..1e9, which an i32 holds.
    let nanos = i32::try_from(micros.rem_euclid(1_000_000) * 1_000).unwrap_or(0);
    ProtoTimestamp { seconds, nanos }
}

/// A protobuf timestamp as ours, truncated to microseconds (Firestore rounds down).
///
/// # Errors
/// [`ProtoError::BadTimestamp`] for `nanos` outside 0..=999,999,999 or an instant outside
/// 0001-01-01T00:00:00Z..=9999-12-31T23:59:59.999999Z; `at` is `<root>`.
pub fn timestamp_from_proto(t: &ProtoTimestamp) -> Result<Timestamp, ProtoError> {
    timestamp_at(t, &[])
}

fn timestamp_at(t: &ProtoTimestamp, trail: &[String]) -> Result<Timestamp, ProtoError> {
    let bad = |reason: String| ProtoError::BadTimestamp {
        at: at(trail),
        reason,
    };
    if !(0..1_000_000_000).contains(&t.nanos) {
        return Err(bad(format!(
            "nanos must be between 0 and 999999999, not {}",
            t.nanos
        )));
    }
    let micros = t
        .seconds
        .checked_mul(1_000_000)
        .and_then(|m| m.checked_add(i64::from(t.nanos / 1_000)));
    micros.and_then(Timestamp::from_micros).ok_or_else(|| {
        bad(format!(
            "{}s is outside 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z",
            t.seconds
        ))
    })
}

/// The field path of the trail, for messages (`<root>` when empty).
fn at(trail: &[String]) -> String {
    if trail.is_empty() {
        "<root>".to_owned()
    } else {
        trail.join(".")
    }
}

fn decode(
    value: &ProtoValue,
    db: &DatabaseName,
    trail: &mut Vec<String>,
) -> Result<Value, ProtoError> {
    let not_storable = |kind| ProtoError::NotStorable {
        at: at(trail),
        kind,
    };
    let Some(kind) = &value.value_type else {
        return Err(ProtoError::NoType { at: at(trail) });
    };
    Ok(match kind {
        // Any enum number: NullValue has one member, and protobuf keeps unknown numbers.
        ValueType::NullValue(_) => Value::Null,
        ValueType::BooleanValue(b) => Value::Boolean(*b),
        ValueType::IntegerValue(i) => Value::Integer(*i),
        ValueType::DoubleValue(d) => Value::Double(*d),
        ValueType::TimestampValue(t) => Value::Timestamp(timestamp_at(t, trail)?),
        ValueType::StringValue(s) => Value::String(s.clone()),
        ValueType::BytesValue(b) => Value::Bytes(b.clone()),
        ValueType::ReferenceValue(name) => match db.parse_at(name, &at(trail))? {
            Some(path) if path.is_document() => Value::Reference(path),
            _ => {
                return Err(ProtoError::BadReference {
                    at: at(trail),
                    reason: format!(
                        "\"{}\" does not name a document",
                        crate::path::abbreviate(name)
                    ),
                })
            }
        },
        ValueType::GeoPointValue(LatLng {
            latitude,
            longitude,
        }) => {
            let bad = |reason| ProtoError::BadGeoPoint {
                at: at(trail),
                reason,
            };
            if !(-90.0..=90.0).contains(latitude) {
                return Err(bad("latitude must be between -90 and 90"));
            }
            if !(-180.0..=180.0).contains(longitude) {
                return Err(bad("longitude must be between -180 and 180"));
            }
            Value::GeoPoint(GeoPoint {
                latitude: *latitude,
                longitude: *longitude,
            })
        }
        ValueType::ArrayValue(array) => {
            let mut items = Vec::with_capacity(array.values.len());
            for (i, item) in array.values.iter().enumerate() {
                trail.push(i.to_string());
                let decoded = decode(item, db, trail);
                trail.pop();
                items.push(decoded?);
            }
            Value::Array(items)
        }
        ValueType::MapValue(map) => match vector_type(map) {
            Some(true) => Value::Vector(vector(map, trail)?),
            _ => Value::Map(decode_fields(&map.fields, db, trail)?),
        },
        ValueType::FieldReferenceValue(_) => return Err(not_storable("a field reference")),
        ValueType::VariableReferenceValue(_) => return Err(not_storable("a variable reference")),
        ValueType::FunctionValue(_) => return Err(not_storable("a function")),
        ValueType::PipelineValue(_) => return Err(not_storable("a pipeline")),
    })
}

fn decode_fields(
    fields: &HashMap<String, ProtoValue>,
    db: &DatabaseName,
    trail: &mut Vec<String>,
) -> Result<Map, ProtoError> {
    let mut map = Map::new();
    for (key, item) in fields {
        trail.push(quoted_segment(key));
        let decoded = decode(item, db, trail);
        trail.pop();
        map.insert(key.clone(), decoded?);
    }
    Ok(map)
}

/// A field name as a field path segment in messages (backticks unless a simple name).
fn quoted_segment(key: &str) -> String {
    let simple = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if simple {
        key.to_owned()
    } else {
        format!("`{}`", key.replace('\\', "\\\\").replace('`', "\\`"))
    }
}

/// `Some(true)` when the map's `__type__` is the string `"__vector__"`.
fn vector_type(map: &MapValue) -> Option<bool> {
    match map.fields.get(VECTOR_TYPE_KEY)?.value_type.as_ref()? {
        ValueType::StringValue(s) => Some(s == VECTOR_TYPE),
        _ => Some(false),
    }
}

/// The elements of the wire form of a vector.
fn vector(map: &MapValue, trail: &[String]) -> Result<Vec<f64>, ProtoError> {
    let bad = |reason: String| ProtoError::BadVector {
        at: at(trail),
        reason,
    };
    if map.fields.len() != 2 {
        return Err(bad(format!(
            "a vector is the map {{\"{VECTOR_TYPE_KEY}\": \"{VECTOR_TYPE}\", \"{VECTOR_VALUE_KEY}\": [doubles]}} and has no other field"
        )));
    }
    let Some(ValueType::ArrayValue(array)) = map
        .fields
        .get(VECTOR_VALUE_KEY)
        .and_then(|v| v.value_type.as_ref())
    else {
        return Err(bad(format!(
            "its \"{VECTOR_VALUE_KEY}\" must be an array of doubles"
        )));
    };
    if array.values.len() > MAX_VECTOR_DIMENSIONS {
        return Err(bad(format!(
            "a vector has at most {MAX_VECTOR_DIMENSIONS} dimensions, this one {}",
            array.values.len()
        )));
    }
    array
        .values
        .iter()
        .enumerate()
        .map(|(i, item)| match item.value_type {
            Some(ValueType::DoubleValue(d)) => Ok(d),
            _ => Err(bad(format!("element {i} is not a double"))),
        })
        .collect()
}
