//! A document as a whole: its storage size, and its check against Firestore's limits
//! ([`crate::limits`]) before anything is written.
//!
//! Sizes follow Firestore's published storage-size calculation: a string is its UTF-8 length
//! plus one, numbers and timestamps 8, booleans and null 1, a geopoint 16, bytes their length,
//! a reference its document-name size, a map the sum of its keys (as strings) and values, an
//! array the sum of its values; a document is its name size plus its fields plus 32.

use thiserror::Error;

use crate::error::ErrorKind;
use crate::limits::{MAX_DEPTH, MAX_DOCUMENT_BYTES, MAX_FIELD_PATH_BYTES, MAX_NAME_BYTES};
use crate::path::{FieldPath, ResourcePath};
use crate::reserved::{is_reserved_name, RESERVED_KEY};
use crate::value::{Map, Value};

/// A document that breaks one of Firestore's limits. Each variant names the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LimitError {
    #[error("document is {bytes} bytes; the limit is 1048576 bytes (1 MiB)")]
    DocumentTooLarge { bytes: usize },
    #[error("field {at} is nested {depth} levels deep; the limit is 20")]
    TooDeep { at: String, depth: usize },
    #[error("field name at {at} is empty")]
    EmptyFieldName { at: String },
    #[error("field name \"{name}\" at {at} is reserved (names matching __.*__ are not allowed)")]
    ReservedFieldName { at: String, name: String },
    #[error(
        "field name \"{name}\" at {at} is reserved (typed JSON's parser uses it for exact numbers)"
    )]
    UnrepresentableFieldName { at: String, name: String },
    #[error("field name at {at} is {bytes} bytes; the limit is 1500 bytes")]
    FieldNameTooLong { at: String, bytes: usize },
    #[error("field path {at} is longer than 1500 bytes")]
    FieldPathTooLong { at: String },
}

impl LimitError {
    /// The kind of failure: a document too large or too deep is [`ErrorKind::TooLarge`]; a
    /// bad field name or an over-long field path is [`ErrorKind::InvalidArgument`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            LimitError::DocumentTooLarge { .. } | LimitError::TooDeep { .. } => ErrorKind::TooLarge,
            LimitError::EmptyFieldName { .. }
            | LimitError::ReservedFieldName { .. }
            | LimitError::UnrepresentableFieldName { .. }
            | LimitError::FieldNameTooLong { .. }
            | LimitError::FieldPathTooLong { .. } => ErrorKind::InvalidArgument,
        }
    }
}

/// Storage size of a document name.
pub fn name_size(path: &ResourcePath) -> usize {
    path.segments().iter().map(|s| s.len() + 1).sum::<usize>() + 16
}

/// Storage size of a value.
pub fn value_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Boolean(_) => 1,
        Value::Integer(_) | Value::Double(_) | Value::Timestamp(_) => 8,
        Value::String(s) => s.len() + 1,
        Value::Bytes(b) => b.len(),
        Value::Reference(p) => name_size(p),
        Value::GeoPoint(_) => 16,
        Value::Array(items) => items.iter().map(value_size).sum(),
        Value::Vector(items) => items.len() * 8,
        Value::Map(map) => map_size(map),
    }
}

fn map_size(map: &Map) -> usize {
    map.iter().map(|(k, v)| k.len() + 1 + value_size(v)).sum()
}

/// Storage size of a whole document.
pub fn document_size(path: &ResourcePath, fields: &Map) -> usize {
    name_size(path) + map_size(fields) + 32
}

/// Check a document against every limit.
///
/// # Errors
/// The first limit broken, naming the field.
pub fn check_document(path: &ResourcePath, fields: &Map) -> Result<(), LimitError> {
    check_map(fields, &mut Vec::new(), 0)?;
    let bytes = document_size(path, fields);
    if bytes > MAX_DOCUMENT_BYTES {
        return Err(LimitError::DocumentTooLarge { bytes });
    }
    Ok(())
}

fn shown(trail: &[&str]) -> String {
    FieldPath::new(trail.iter().map(|s| (*s).to_owned()).collect())
        .map_or_else(|_| trail.join("."), |p| p.to_string())
}

fn check_map<'a>(map: &'a Map, trail: &mut Vec<&'a str>, depth: usize) -> Result<(), LimitError> {
    for (key, value) in map {
        trail.push(key);
        if key.is_empty() {
            return Err(LimitError::EmptyFieldName { at: shown(trail) });
        }
        if key.len() > MAX_NAME_BYTES {
            trail.pop();
            return Err(LimitError::FieldNameTooLong {
                at: shown(trail).chars().take(64).collect(),
                bytes: key.len(),
            });
        }
        if is_reserved_name(key) && key.starts_with("__") {
            return Err(LimitError::ReservedFieldName {
                at: shown(trail),
                name: key.clone(),
            });
        }
        if key == RESERVED_KEY {
            return Err(LimitError::UnrepresentableFieldName {
                at: shown(trail),
                name: key.clone(),
            });
        }
        if trail.iter().map(|s| s.len() + 1).sum::<usize>() > MAX_FIELD_PATH_BYTES + 1 {
            return Err(LimitError::FieldPathTooLong {
                at: shown(trail).chars().take(64).collect(),
            });
        }
        check_value(value, trail, depth + 1)?;
        trail.pop();
    }
    Ok(())
}

fn check_value<'a>(
    value: &'a Value,
    trail: &mut Vec<&'a str>,
    depth: usize,
) -> Result<(), LimitError> {
    if depth > MAX_DEPTH {
        return Err(LimitError::TooDeep {
            at: shown(trail),
            depth,
        });
    }
    match value {
        Value::Map(map) => check_map(map, trail, depth),
        Value::Array(items) => items
            .iter()
            .try_for_each(|item| check_value(item, trail, depth + 1)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typed_json::map_from_json;

    fn doc(json: &str) -> Map {
        map_from_json(&serde_json::from_str(json).unwrap()).unwrap()
    }

    #[test]
    fn the_key_typed_json_cannot_hold_is_refused() {
        // Built in Rust (JSON text holding it never parses): {"m": {RESERVED_KEY: true}}.
        let inner: Map = [(RESERVED_KEY.to_owned(), Value::Boolean(true))]
            .into_iter()
            .collect();
        let fields: Map = [("m".to_owned(), Value::Map(inner))].into_iter().collect();
        let path = ResourcePath::parse_document("c/d").unwrap();
        assert!(matches!(
            check_document(&path, &fields),
            Err(LimitError::UnrepresentableFieldName { .. })
        ));
    }

    #[test]
    fn sizes_follow_firestore() {
        // Firestore's documented example: a task document of 147 bytes.
        let path = ResourcePath::parse("users/jeff/tasks/my_task_id").unwrap();
        assert_eq!(name_size(&path), 6 + 5 + 6 + 11 + 16);
        let fields = doc(
            r#"{"type":"Personal","done":false,"priority":1,"description":"Learn Cloud Firestore"}"#,
        );
        assert_eq!(document_size(&path, &fields), 147);
    }

    #[test]
    fn limits() {
        let path = ResourcePath::parse("a/b").unwrap();
        assert!(check_document(&path, &doc(r#"{"a":1}"#)).is_ok());
        assert!(matches!(
            check_document(&path, &doc(r#"{"__x__":1}"#)),
            Err(LimitError::ReservedFieldName { .. })
        ));
        assert!(matches!(
            check_document(&path, &doc(r#"{"":1}"#)),
            Err(LimitError::EmptyFieldName { .. })
        ));
        let mut deep = "1".to_owned();
        for _ in 0..20 {
            deep = format!("{{\"a\":{deep}}}");
        }
        assert!(check_document(&path, &doc(&deep)).is_ok());
        let deeper = format!("{{\"a\":{deep}}}");
        assert!(matches!(
            check_document(&path, &doc(&deeper)),
            Err(LimitError::TooDeep { depth: 21, .. })
        ));
        let big = format!("{{\"s\":\"{}\"}}", "x".repeat(MAX_DOCUMENT_BYTES));
        assert!(matches!(
            check_document(&path, &doc(&big)),
            Err(LimitError::DocumentTooLarge { .. })
        ));
    }
}
