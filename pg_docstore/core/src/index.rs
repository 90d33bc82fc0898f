//! Index entries: which keys a document has in `docstore.index_entries`.
//!
//! Every key starts with a kind byte, so the whole table is one ordered keyspace (see
//! `docs/storage.md`):
//!
//! - automatic value entry: `0x01 | parent | field | value | name`
//! - automatic array-contains entry: `0x02 | parent | field | element | name`
//! - composite index entry: `0x03 | index id (u32 BE) | [parent] | value... | name`
//!
//! `parent` is the document's collection path and `field` the field path, both as segment
//! lists ([`encoding::encode_segments`]), values are order-preserving encodings truncated to
//! 1,500 bytes ([`encoding::encode_index_value`]), `name` the document name
//! ([`encoding::encode_name`]). A collection-scoped key carries the parent, so one collection
//! is one contiguous range; a collection-group-scoped composite omits it. Automatic entries
//! are written once and serve both directions (a descending order is a backward scan);
//! composite entries invert descending components, and the name in the direction of the last
//! ordered field.

use std::collections::BTreeSet;

use thiserror::Error;

use crate::encoding::{self, encode_index_value, Direction};
use crate::error::ErrorKind;
use crate::path::{FieldPath, ResourcePath};
use crate::value::{Map, Value};

pub use crate::limits::{MAX_ENTRIES_PER_DOCUMENT, MAX_ENTRY_KEY_BYTES, MAX_INDEX_FIELDS};

/// First byte of every index key.
pub mod kind {
    pub const AUTO_VALUE: u8 = 0x01;
    pub const AUTO_ARRAY_CONTAINS: u8 = 0x02;
    pub const COMPOSITE: u8 = 0x03;
}

/// Where a composite index's entries are scoped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// One collection at a time (the parent path is part of the key).
    Collection,
    /// Every collection with the same ID, anywhere (collection-group queries).
    CollectionGroup,
}

impl Scope {
    /// Parse `collection` or `collection_group`.
    pub fn parse(text: &str) -> Option<Scope> {
        match text {
            "collection" => Some(Scope::Collection),
            "collection_group" => Some(Scope::CollectionGroup),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Collection => "collection",
            Scope::CollectionGroup => "collection_group",
        }
    }
}

/// How one field of a composite index is indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexMode {
    Ascending,
    Descending,
    ArrayContains,
}

/// One field of a composite index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IndexField {
    pub path: FieldPath,
    pub mode: IndexMode,
}

/// A composite (or collection-group single-field) index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDefinition {
    pub id: u32,
    pub collection_group: String,
    pub scope: Scope,
    pub fields: Vec<IndexField>,
}

/// A definition refused by [`IndexDefinition::parse_fields`], or a document with too many
/// entries.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IndexError {
    #[error("invalid index definition: {0}")]
    InvalidDefinition(String),
    #[error("document {path} would have {count} index entries; the limit is 40000")]
    TooManyEntries { path: String, count: usize },
    #[error("document {path}: the index entry of {source_of} is {bytes} bytes; the limit is 2600")]
    EntryTooLarge {
        path: String,
        /// `field a.b` or `composite index 7`.
        source_of: String,
        bytes: usize,
    },
}

impl IndexError {
    /// The kind of failure: a bad definition is [`ErrorKind::InvalidArgument`], a document
    /// over the entry limits [`ErrorKind::TooLarge`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            IndexError::InvalidDefinition(_) => ErrorKind::InvalidArgument,
            IndexError::TooManyEntries { .. } | IndexError::EntryTooLarge { .. } => {
                ErrorKind::TooLarge
            }
        }
    }
}

/// Add `key` to `out` unless it is longer than [`MAX_ENTRY_KEY_BYTES`].
fn push_entry(
    out: &mut BTreeSet<Vec<u8>>,
    key: Vec<u8>,
    path: &ResourcePath,
    source_of: impl FnOnce() -> String,
) -> Result<(), IndexError> {
    if key.len() > MAX_ENTRY_KEY_BYTES {
        return Err(IndexError::EntryTooLarge {
            path: path.to_string(),
            source_of: source_of(),
            bytes: key.len(),
        });
    }
    out.insert(key);
    Ok(())
}

impl IndexDefinition {
    /// Parse the `fields` argument of `create_index`: a JSON array of
    /// `{"field": "a.b", "order": "asc"|"desc"}` or `{"field": "tags", "array": "contains"}`.
    ///
    /// # Errors
    /// [`IndexError::InvalidDefinition`] naming what is wrong.
    pub fn parse_fields(json: &serde_json::Value) -> Result<Vec<IndexField>, IndexError> {
        let bad = |m: String| IndexError::InvalidDefinition(m);
        let items = json
            .as_array()
            .ok_or_else(|| bad("fields must be a JSON array".into()))?;
        if items.is_empty() || items.len() > MAX_INDEX_FIELDS {
            return Err(bad("an index has between 1 and 100 fields".into()));
        }
        let mut fields: Vec<IndexField> = Vec::with_capacity(items.len());
        for item in items {
            let obj = item
                .as_object()
                .ok_or_else(|| bad(format!("each field must be an object, got {item}")))?;
            let path_text = obj
                .get("field")
                .and_then(|v| v.as_str())
                .ok_or_else(|| bad(format!("missing \"field\" in {item}")))?;
            let path = FieldPath::parse(path_text).map_err(|e| bad(e.to_string()))?;
            let mode = match (
                obj.get("order").and_then(|v| v.as_str()),
                obj.get("array").and_then(|v| v.as_str()),
            ) {
                (Some("asc" | "ascending"), None) | (None, None) => IndexMode::Ascending,
                (Some("desc" | "descending"), None) => IndexMode::Descending,
                (None, Some("contains")) => IndexMode::ArrayContains,
                _ => {
                    return Err(bad(format!(
                    "field {path_text}: use \"order\": \"asc\"|\"desc\" or \"array\": \"contains\""
                )))
                }
            };
            if let Some(unknown) = obj
                .keys()
                .find(|k| !matches!(k.as_str(), "field" | "order" | "array"))
            {
                return Err(bad(format!("field {path_text}: unknown key \"{unknown}\"")));
            }
            if fields.iter().any(|f| f.path == path) {
                return Err(bad(format!("field {path_text} appears twice")));
            }
            fields.push(IndexField { path, mode });
        }
        if fields
            .iter()
            .filter(|f| f.mode == IndexMode::ArrayContains)
            .count()
            > 1
        {
            return Err(bad(
                "at most one field may be indexed with \"array\": \"contains\"".into(),
            ));
        }
        if let Some(pos) = fields.iter().position(|f| f.path.is_document_id()) {
            if pos + 1 != fields.len() {
                return Err(bad("__name__ may only be the last field".into()));
            }
        }
        Ok(fields)
    }

    /// Print fields back in the form `parse_fields` reads (canonical: explicit order).
    pub fn fields_json(fields: &[IndexField]) -> serde_json::Value {
        serde_json::Value::Array(
            fields
                .iter()
                .map(|f| {
                    let mut o = serde_json::Map::new();
                    o.insert("field".into(), f.path.to_string().into());
                    match f.mode {
                        IndexMode::Ascending => o.insert("order".into(), "asc".into()),
                        IndexMode::Descending => o.insert("order".into(), "desc".into()),
                        IndexMode::ArrayContains => o.insert("array".into(), "contains".into()),
                    };
                    serde_json::Value::Object(o)
                })
                .collect(),
        )
    }

    /// Direction of the document name at the end of every key: the last ordered field's.
    pub fn name_direction(&self) -> Direction {
        match self
            .fields
            .iter()
            .rev()
            .find(|f| f.mode != IndexMode::ArrayContains)
        {
            Some(IndexField {
                mode: IndexMode::Descending,
                ..
            }) => Direction::Descending,
            _ => Direction::Ascending,
        }
    }

    /// The key prefix shared by all this index's entries (for the collection `parent` when
    /// collection-scoped).
    pub fn prefix(&self, parent: Option<&ResourcePath>) -> Vec<u8> {
        let mut key = vec![kind::COMPOSITE];
        key.extend_from_slice(&self.id.to_be_bytes());
        if let (Scope::Collection, Some(parent)) = (self.scope, parent) {
            encoding::encode_segments(&mut key, parent.segments());
        }
        key
    }

    /// This index's entries for one document (none when a field is missing, or the
    /// array-contains field is not an array).
    ///
    /// # Errors
    /// [`IndexError::EntryTooLarge`] for a key past [`MAX_ENTRY_KEY_BYTES`].
    pub fn entries(
        &self,
        path: &ResourcePath,
        fields: &Map,
        out: &mut BTreeSet<Vec<u8>>,
    ) -> Result<(), IndexError> {
        let name_value = Value::Reference(path.clone());
        let mut values: Vec<&Value> = Vec::with_capacity(self.fields.len());
        for field in &self.fields {
            let value = if field.path.is_document_id() {
                Some(&name_value)
            } else {
                lookup(fields, &field.path)
            };
            match (field.mode, value) {
                (IndexMode::ArrayContains, Some(v @ Value::Array(_))) => values.push(v),
                (IndexMode::Ascending | IndexMode::Descending, Some(v)) => values.push(v),
                _ => return Ok(()),
            }
        }
        let mut name = encoding::encode_name(path);
        if self.name_direction() == Direction::Descending {
            encoding::invert(&mut name);
        }
        let prefix = self.prefix(path.parent().as_ref());
        let build = |element: Option<&Value>| -> Vec<u8> {
            let mut key = prefix.clone();
            for (field, value) in self.fields.iter().zip(&values) {
                let encoded = match field.mode {
                    IndexMode::ArrayContains => {
                        element.map(|e| encode_index_value(e, Direction::Ascending))
                    }
                    IndexMode::Ascending => Some(encode_index_value(value, Direction::Ascending)),
                    IndexMode::Descending => Some(encode_index_value(value, Direction::Descending)),
                };
                key.extend(encoded.unwrap_or_default());
            }
            key.extend_from_slice(&name);
            key
        };
        let contained = self
            .fields
            .iter()
            .zip(&values)
            .find(|(f, _)| f.mode == IndexMode::ArrayContains)
            .map(|(_, v)| *v);
        let source_of = || format!("composite index {}", self.id);
        match contained {
            Some(Value::Array(elements)) => elements
                .iter()
                .try_for_each(|e| push_entry(out, build(Some(e)), path, source_of)),
            _ => push_entry(out, build(None), path, source_of),
        }
    }
}

/// The value at `path` inside `fields`, descending through maps.
pub fn lookup<'a>(fields: &'a Map, path: &FieldPath) -> Option<&'a Value> {
    let (first, rest) = path.segments().split_first()?;
    let mut current = fields.get(first)?;
    for segment in rest {
        match current {
            Value::Map(map) => current = map.get(segment)?,
            _ => return None,
        }
    }
    Some(current)
}

/// Key prefix of the automatic index of `field` in collection `parent` (`kind` is
/// [`kind::AUTO_VALUE`] or [`kind::AUTO_ARRAY_CONTAINS`]). Entries for `field`'s subfields are
/// not under this prefix (the field's segment list is closed).
pub fn auto_prefix(kind: u8, parent: &ResourcePath, field: &FieldPath) -> Vec<u8> {
    let mut key = vec![kind];
    encoding::encode_segments(&mut key, parent.segments());
    encoding::encode_segments(&mut key, field.segments());
    key
}

/// A human-readable description of an index key (for `check_indexes` reports).
pub fn describe_key(key: &[u8]) -> String {
    fn segments(bytes: &[u8]) -> Option<(Vec<String>, usize)> {
        // A segment list is a document name encoding of any length.
        let end = (1..=bytes.len()).find(|&n| encoding::decode_name(&bytes[..n]).is_ok())?;
        let path = encoding::decode_name(&bytes[..end]).ok()?;
        Some((path.segments().to_vec(), end))
    }
    fn field_segments(bytes: &[u8]) -> Option<(FieldPath, usize)> {
        // Field paths may contain reserved names that a resource path refuses; decode by hand.
        let mut segments = Vec::new();
        let mut pos = 0;
        loop {
            match bytes.get(pos)? {
                0x00 => return FieldPath::new(segments).ok().map(|p| (p, pos + 1)),
                0x01 => {
                    let rest = &bytes[pos + 1..];
                    let mut s = Vec::new();
                    let mut i = 0;
                    loop {
                        match (rest.get(i)?, rest.get(i + 1)) {
                            (0, Some(0xFF)) => {
                                s.push(0);
                                i += 2;
                            }
                            (0, Some(0x01)) => break,
                            (b, _) => {
                                s.push(*b);
                                i += 1;
                            }
                        }
                    }
                    segments.push(String::from_utf8(s).ok()?);
                    pos += 1 + i + 2;
                }
                _ => return None,
            }
        }
    }
    let describe = || -> Option<String> {
        let (&k, rest) = key.split_first()?;
        match k {
            kind::AUTO_VALUE | kind::AUTO_ARRAY_CONTAINS => {
                let (parent, used) = segments(rest)?;
                let (field, used2) = field_segments(&rest[used..])?;
                let (value, _) = encoding::decode_prefix(&rest[used + used2..]).ok()?;
                let op = if k == kind::AUTO_VALUE {
                    "=="
                } else {
                    "array_contains"
                };
                Some(format!(
                    "automatic index of {} in {}: {field} {op} {}",
                    field,
                    parent.join("/"),
                    crate::typed_json::to_string(&value)
                ))
            }
            kind::COMPOSITE => {
                let id = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
                Some(format!("composite index {id}"))
            }
            _ => None,
        }
    };
    describe().unwrap_or_else(|| format!("undecodable key of {} bytes", key.len()))
}

/// What governs a collection group's entries: exempted field paths (no automatic entries for
/// them or their subfields) and the composite indexes to maintain (CREATING or READY).
#[derive(Debug, Clone, Default)]
pub struct IndexConfig {
    pub exemptions: Vec<FieldPath>,
    pub composites: Vec<IndexDefinition>,
}

impl IndexConfig {
    fn exempted(&self, path: &FieldPath) -> bool {
        self.exemptions.iter().any(|e| path.starts_with(e))
    }
}

/// Every index key of a document, sorted and without duplicates.
///
/// # Errors
/// [`IndexError::TooManyEntries`] past 40,000 entries, [`IndexError::EntryTooLarge`] for a key
/// past [`MAX_ENTRY_KEY_BYTES`].
pub fn document_entries(
    path: &ResourcePath,
    fields: &Map,
    config: &IndexConfig,
) -> Result<Vec<Vec<u8>>, IndexError> {
    let mut out = BTreeSet::new();
    if let Some(parent) = path.parent() {
        let mut parent_key = Vec::new();
        encoding::encode_segments(&mut parent_key, parent.segments());
        let name = encoding::encode_name(path);
        let mut field_path = Vec::new();
        auto_entries(
            path,
            fields,
            &mut field_path,
            &parent_key,
            &name,
            config,
            &mut out,
        )?;
    }
    for index in &config.composites {
        index.entries(path, fields, &mut out)?;
    }
    if out.len() > MAX_ENTRIES_PER_DOCUMENT {
        return Err(IndexError::TooManyEntries {
            path: path.to_string(),
            count: out.len(),
        });
    }
    Ok(out.into_iter().collect())
}

fn auto_entries(
    path: &ResourcePath,
    fields: &Map,
    trail: &mut Vec<String>,
    parent_key: &[u8],
    name: &[u8],
    config: &IndexConfig,
    out: &mut BTreeSet<Vec<u8>>,
) -> Result<(), IndexError> {
    for (key, value) in fields {
        trail.push(key.clone());
        let field = FieldPath::new(trail.clone());
        if let Ok(field) = field {
            if !config.exempted(&field) {
                let mut prefix = Vec::with_capacity(parent_key.len() + 32);
                prefix.push(kind::AUTO_VALUE);
                prefix.extend_from_slice(parent_key);
                encoding::encode_segments(&mut prefix, field.segments());
                let source_of = || format!("field {field}");
                let mut entry = prefix.clone();
                entry.extend(encode_index_value(value, Direction::Ascending));
                entry.extend_from_slice(name);
                push_entry(out, entry, path, source_of)?;
                if let Value::Array(items) = value {
                    prefix[0] = kind::AUTO_ARRAY_CONTAINS;
                    for item in items {
                        let mut entry = prefix.clone();
                        entry.extend(encode_index_value(item, Direction::Ascending));
                        entry.extend_from_slice(name);
                        push_entry(out, entry, path, source_of)?;
                    }
                }
                if let Value::Map(inner) = value {
                    auto_entries(path, inner, trail, parent_key, name, config, out)?;
                }
            }
        }
        trail.pop();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typed_json::map_from_json;

    fn doc(json: &str) -> Map {
        map_from_json(&serde_json::from_str(json).unwrap()).unwrap()
    }

    fn path(p: &str) -> ResourcePath {
        ResourcePath::parse_document(p).unwrap()
    }

    #[test]
    fn automatic_entries_cover_maps_and_arrays() {
        let d = doc(r#"{"a": 1, "m": {"x": "s", "y": [1, 1, 2]}, "t": []}"#);
        let keys = document_entries(&path("c/d"), &d, &IndexConfig::default()).unwrap();
        // a, m, m.x, m.y (+2 distinct contains), t
        assert_eq!(keys.len(), 7);
        let contains = keys
            .iter()
            .filter(|k| k[0] == kind::AUTO_ARRAY_CONTAINS)
            .count();
        assert_eq!(contains, 2);
        let prefix = auto_prefix(
            kind::AUTO_VALUE,
            &ResourcePath::parse("c").unwrap(),
            &FieldPath::parse("m.x").unwrap(),
        );
        assert_eq!(keys.iter().filter(|k| k.starts_with(&prefix)).count(), 1);
    }

    #[test]
    fn exemptions_are_inherited() {
        let d = doc(r#"{"a": 1, "m": {"x": "s", "y": 2}}"#);
        let config = IndexConfig {
            exemptions: vec![FieldPath::parse("m").unwrap()],
            composites: vec![],
        };
        let keys = document_entries(&path("c/d"), &d, &config).unwrap();
        assert_eq!(keys.len(), 1);
    }

    #[test]
    fn collections_are_contiguous_and_ordered() {
        let config = IndexConfig::default();
        let field = FieldPath::parse("n").unwrap();
        let prefix = auto_prefix(kind::AUTO_VALUE, &ResourcePath::parse("c").unwrap(), &field);
        let k1 = document_entries(&path("c/b"), &doc(r#"{"n": 1}"#), &config).unwrap();
        let k2 = document_entries(&path("c/a"), &doc(r#"{"n": 2}"#), &config).unwrap();
        let sub = document_entries(&path("c/a/s/x"), &doc(r#"{"n": 0}"#), &config).unwrap();
        assert!(k1[0].starts_with(&prefix) && k2[0].starts_with(&prefix));
        assert!(
            !sub[0].starts_with(&prefix),
            "subcollections are another range"
        );
        assert!(k1[0] < k2[0], "ordered by value first, then name");
    }

    #[test]
    fn composite_entries() {
        let fields = IndexDefinition::parse_fields(
            &serde_json::from_str(r#"[{"field":"city"},{"field":"avgRating","order":"desc"}]"#)
                .unwrap(),
        )
        .unwrap();
        let index = IndexDefinition {
            id: 7,
            collection_group: "r".into(),
            scope: Scope::Collection,
            fields,
        };
        assert_eq!(index.name_direction(), Direction::Descending);
        let config = IndexConfig {
            exemptions: vec![],
            composites: vec![index.clone()],
        };
        let hi = document_entries(
            &path("r/1"),
            &doc(r#"{"city":"SF","avgRating":4.5}"#),
            &config,
        )
        .unwrap();
        let lo = document_entries(
            &path("r/2"),
            &doc(r#"{"city":"SF","avgRating":3}"#),
            &config,
        )
        .unwrap();
        let missing = document_entries(&path("r/3"), &doc(r#"{"city":"SF"}"#), &config).unwrap();
        let composite = |keys: &[Vec<u8>]| {
            keys.iter()
                .filter(|k| k[0] == kind::COMPOSITE)
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(composite(&missing).len(), 0);
        assert!(composite(&hi)[0] < composite(&lo)[0], "descending rating");
    }

    #[test]
    fn composite_array_contains_fans_out() {
        let fields = IndexDefinition::parse_fields(
            &serde_json::from_str(r#"[{"field":"tags","array":"contains"},{"field":"n"}]"#)
                .unwrap(),
        )
        .unwrap();
        let index = IndexDefinition {
            id: 1,
            collection_group: "r".into(),
            scope: Scope::CollectionGroup,
            fields,
        };
        let mut out = BTreeSet::new();
        index
            .entries(
                &path("a/b/r/1"),
                &doc(r#"{"tags":["x","y","x"],"n":1}"#),
                &mut out,
            )
            .unwrap();
        assert_eq!(out.len(), 2);
        let mut none = BTreeSet::new();
        index
            .entries(&path("r/1"), &doc(r#"{"tags":"x","n":1}"#), &mut none)
            .unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn definitions_are_validated() {
        for bad in [
            "[]",
            "{}",
            r#"[{"field":"a","order":"up"}]"#,
            r#"[{"field":"a"},{"field":"a"}]"#,
            r#"[{"field":"a","array":"contains"},{"field":"b","array":"contains"}]"#,
            r#"[{"field":"__name__"},{"field":"a"}]"#,
            r#"[{"field":"a..b"}]"#,
            r#"[{"field":"a","color":"red"}]"#,
        ] {
            assert!(
                IndexDefinition::parse_fields(&serde_json::from_str(bad).unwrap()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn entry_limit() {
        let items: Vec<String> = (0..40_001).map(|i| i.to_string()).collect();
        let d = doc(&format!(r#"{{"a": [{}]}}"#, items.join(",")));
        assert!(matches!(
            document_entries(&path("c/d"), &d, &IndexConfig::default()),
            Err(IndexError::TooManyEntries { .. })
        ));
    }

    #[test]
    fn entry_size_limit() {
        // A 1,500-byte value is truncated, so it fits under a short name and field path...
        let value = "v".repeat(4_000);
        let d = doc(&format!(r#"{{"f": "{value}"}}"#));
        assert!(document_entries(&path("c/d"), &d, &IndexConfig::default()).is_ok());
        // ...but not next to a 1,000-byte field name and document id.
        let long = "x".repeat(1_000);
        let d = doc(&format!(r#"{{"m": {{"{long}": "{value}"}}}}"#));
        let err =
            document_entries(&path(&format!("c/{long}")), &d, &IndexConfig::default()).unwrap_err();
        assert!(
            matches!(&err, IndexError::EntryTooLarge { source_of, bytes, .. }
                if source_of == &format!("field m.{long}") && *bytes > MAX_ENTRY_KEY_BYTES),
            "{err}"
        );
        // An exemption of the field lets the document in.
        let config = IndexConfig {
            exemptions: vec![FieldPath::parse("m").unwrap()],
            composites: vec![],
        };
        assert!(document_entries(&path(&format!("c/{long}")), &d, &config).is_ok());
    }
}
