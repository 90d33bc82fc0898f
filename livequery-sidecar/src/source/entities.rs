//! The row decoder of `docstore.entities`: decoded pgoutput messages into document changes.
//!
//! Columns are found by name in the Relation message (never by position), with their types
//! checked. Values arrive in text format: `database_id` and `path` as text, `name` as bytea
//! hex (`\x..`, or raw bytes if the stream is binary), `data` as jsonb text (typed JSON,
//! read with `docstore_core::typed_json`), the times as timestamptz text in the session's
//! TimeZone (the source passes `TimeZone=UTC`; any offset is read correctly).
//!
//! A document's path comes from its encoded `name` through `docstore_core::encoding::
//! decode_name`, for every change: a Delete carries only the replica identity (the primary
//! key `database_id, name`), and the name is the key. When the `path` column is there too,
//! it must agree.
//!
//! Pure, like `pgoutput.rs`, and included by path in the fuzz crate: it uses nothing of the
//! sidecar but `super::pgoutput`.

use std::collections::HashMap;

use docstore_core::encoding;
use docstore_core::path::ResourcePath;
use docstore_core::typed_json::{self, TypedJsonError};
use docstore_core::value::{Map, Timestamp};
use thiserror::Error;

use super::pgoutput::{ColumnValue, Message, OldTuple, Relation, Tuple};

/// Schema of the documents table.
pub const SCHEMA: &str = "docstore";
/// Name of the documents table.
pub const TABLE: &str = "entities";

const TEXT_OID: u32 = 25;
const BYTEA_OID: u32 = 17;
const JSONB_OID: u32 = 3802;
const TIMESTAMPTZ_OID: u32 = 1184;

/// A document's fields as the change carries them.
#[derive(Debug, Clone, PartialEq)]
pub enum DocumentData {
    /// The new fields.
    Fields(Map),
    /// An Update that left `data` unchanged and TOASTed: Postgres did not send it ('u').
    /// The fields are those of the previous version (the changelog's, or re-read).
    UnchangedToast,
}

/// A document's version before an Update or a Delete, when the stream carries the whole old
/// row (REPLICA IDENTITY FULL on `docstore.entities`: the `before` of write triggers,
/// docs/triggers.md). Postgres flattens TOASTed values of such an old row, so its `data` is
/// always there.
#[derive(Debug, Clone, PartialEq)]
pub struct Previous {
    pub fields: Map,
    pub create_time: Timestamp,
    pub update_time: Timestamp,
}

/// A document written (inserted or updated).
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentChange {
    pub database_id: String,
    /// The encoded name (the primary key with `database_id`).
    pub name: Vec<u8>,
    pub path: ResourcePath,
    pub data: DocumentData,
    pub create_time: Timestamp,
    pub update_time: Timestamp,
    /// An Update's previous version, when the old row came whole (`None` for an Insert).
    pub before: Option<Box<Previous>>,
}

/// A document identified by its key (what a Delete carries).
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentKey {
    pub database_id: String,
    pub name: Vec<u8>,
    pub path: ResourcePath,
    /// A Delete's removed version, when the old row came whole.
    pub before: Option<Box<Previous>>,
}

impl DocumentChange {
    /// The key of the written document.
    pub fn key(&self) -> DocumentKey {
        DocumentKey {
            database_id: self.database_id.clone(),
            name: self.name.clone(),
            path: self.path.clone(),
            before: None,
        }
    }
}

/// One change of `docstore.entities`.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A new document.
    Insert(DocumentChange),
    /// A document replaced (its `data` may be [`DocumentData::UnchangedToast`]).
    Update(DocumentChange),
    /// A document removed.
    Delete(DocumentKey),
    /// `TRUNCATE docstore.entities`: every document of every database is gone.
    Truncate,
}

/// Why a change of `docstore.entities` could not be decoded. Like [`super::pgoutput::DecodeError`]
/// a fault of the stream or of a direct SQL write that broke the table's invariants.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RowError {
    #[error("change of relation {0} before its Relation message")]
    UnknownRelation(u32),
    #[error("docstore.entities has no column {0}")]
    MissingColumn(&'static str),
    #[error("docstore.entities column {column} has type {oid}, expected {expected}")]
    ColumnType {
        column: &'static str,
        oid: u32,
        expected: u32,
    },
    #[error("docstore.entities tuple has {got} columns, the relation {expected}")]
    ColumnCount { expected: usize, got: usize },
    #[error("docstore.entities column {0} is null")]
    Null(&'static str),
    #[error("docstore.entities column {0} arrived as an unchanged TOAST value")]
    UnchangedToast(&'static str),
    #[error("docstore.entities column {0} arrived in binary format, which is not requested")]
    Binary(&'static str),
    #[error("docstore.entities column {0} is not valid UTF-8")]
    NotUtf8(&'static str),
    #[error("docstore.entities name is not bytea hex text")]
    NameNotHex,
    #[error("docstore.entities name is not an encoded document name: {0}")]
    Name(encoding::DecodeError),
    #[error("docstore.entities path {column:?} disagrees with its name ({name})")]
    PathMismatch { column: String, name: String },
    #[error("docstore.entities data is not a typed JSON map: {0}")]
    Data(TypedJsonError),
    #[error("docstore.entities {column} is not a timestamptz in range: {text:?}")]
    Timestamp { column: &'static str, text: String },
}

/// Where the columns of `docstore.entities` are in its tuples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    count: usize,
    database_id: usize,
    name: usize,
    path: usize,
    data: usize,
    create_time: usize,
    update_time: usize,
}

impl Layout {
    fn of(relation: &Relation) -> Result<Layout, RowError> {
        let find = |name: &'static str, oid: u32| -> Result<usize, RowError> {
            let index = relation
                .columns
                .iter()
                .position(|c| c.name == name)
                .ok_or(RowError::MissingColumn(name))?;
            match relation.columns.get(index).map(|c| c.type_oid) {
                Some(found) if found == oid => Ok(index),
                found => Err(RowError::ColumnType {
                    column: name,
                    oid: found.unwrap_or(0),
                    expected: oid,
                }),
            }
        };
        Ok(Layout {
            count: relation.columns.len(),
            database_id: find("database_id", TEXT_OID)?,
            name: find("name", BYTEA_OID)?,
            path: find("path", TEXT_OID)?,
            data: find("data", JSONB_OID)?,
            create_time: find("create_time", TIMESTAMPTZ_OID)?,
            update_time: find("update_time", TIMESTAMPTZ_OID)?,
        })
    }
}

/// Decodes the changes of `docstore.entities` from a stream of pgoutput messages; keeps the
/// Relation messages it has seen (Postgres sends one before a relation's first change in a
/// session, and again when the relation changes).
#[derive(Debug, Default)]
pub struct EntitiesDecoder {
    /// `None`: a relation that is not `docstore.entities`; its changes are skipped.
    relations: HashMap<u32, Option<Layout>>,
}

impl EntitiesDecoder {
    /// A decoder that has seen no Relation message.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take in one message; push the changes of `docstore.entities` it carries onto `out`
    /// (none for Begin, Commit, Message, Origin, Type, Relation and other relations' rows;
    /// two for an Update that changed a document's key: a Delete and an Insert).
    ///
    /// # Errors
    /// [`RowError`] for a change of a relation not yet described, a `docstore.entities`
    /// without the expected columns, or a row whose values do not decode. Nothing is pushed
    /// then.
    pub fn apply(&mut self, message: &Message<'_>, out: &mut Vec<Change>) -> Result<(), RowError> {
        match message {
            Message::Relation(relation) => {
                let layout = if relation.namespace == SCHEMA && relation.name == TABLE {
                    Some(Layout::of(relation)?)
                } else {
                    None
                };
                self.relations.insert(relation.id, layout);
            }
            Message::Insert(insert) => {
                if let Some(layout) = self.layout(insert.relation_id)? {
                    out.push(Change::Insert(written(&layout, &insert.new)?));
                }
            }
            Message::Update(update) => {
                if let Some(layout) = self.layout(update.relation_id)? {
                    let mut new = written(&layout, &update.new)?;
                    let old_key = match &update.old {
                        Some(old) => Some(key(&layout, old)?),
                        None => None,
                    };
                    match old_key {
                        Some(old) if old.database_id != new.database_id || old.name != new.name => {
                            // A key changed by direct SQL: the old document is gone.
                            out.push(Change::Delete(old));
                            out.push(Change::Insert(new));
                        }
                        Some(old) => {
                            // An unchanged TOASTed `data` is the old row's, when it came whole.
                            if let (DocumentData::UnchangedToast, Some(before)) =
                                (&new.data, &old.before)
                            {
                                new.data = DocumentData::Fields(before.fields.clone());
                            }
                            new.before = old.before;
                            out.push(Change::Update(new));
                        }
                        None => out.push(Change::Update(new)),
                    }
                }
            }
            Message::Delete(delete) => {
                if let Some(layout) = self.layout(delete.relation_id)? {
                    out.push(Change::Delete(key(&layout, &delete.old)?));
                }
            }
            Message::Truncate(truncate) => {
                for id in &truncate.relation_ids {
                    if self.layout(*id)?.is_some() {
                        out.push(Change::Truncate);
                        break;
                    }
                }
            }
            Message::Begin(_)
            | Message::Commit(_)
            | Message::Origin(_)
            | Message::Type(_)
            | Message::Logical(_) => {}
        }
        Ok(())
    }

    fn layout(&self, relation_id: u32) -> Result<Option<Layout>, RowError> {
        self.relations
            .get(&relation_id)
            .copied()
            .ok_or(RowError::UnknownRelation(relation_id))
    }
}

fn column<'t>(
    layout: &Layout,
    tuple: &'t Tuple<'_>,
    index: usize,
    name: &'static str,
) -> Result<ColumnValue<'t>, RowError> {
    if tuple.columns.len() != layout.count {
        return Err(RowError::ColumnCount {
            expected: layout.count,
            got: tuple.columns.len(),
        });
    }
    tuple
        .columns
        .get(index)
        .copied()
        .ok_or(RowError::MissingColumn(name))
}

/// The text of a column that must be present.
fn text<'t>(value: ColumnValue<'t>, name: &'static str) -> Result<&'t str, RowError> {
    match value {
        ColumnValue::Text(bytes) => std::str::from_utf8(bytes).map_err(|_| RowError::NotUtf8(name)),
        ColumnValue::Null => Err(RowError::Null(name)),
        ColumnValue::UnchangedToast => Err(RowError::UnchangedToast(name)),
        ColumnValue::Binary(_) => Err(RowError::Binary(name)),
    }
}

/// The key of an old row, with its whole version when the row came whole ('O').
fn key(layout: &Layout, old: &OldTuple<'_>) -> Result<DocumentKey, RowError> {
    let mut key = key_of(layout, old.tuple())?;
    if let OldTuple::Full(tuple) = old {
        let version = version(layout, tuple)?;
        if let DocumentData::Fields(fields) = version.0 {
            key.before = Some(Box::new(Previous {
                fields,
                create_time: version.1,
                update_time: version.2,
            }));
        }
    }
    Ok(key)
}

fn key_of(layout: &Layout, tuple: &Tuple<'_>) -> Result<DocumentKey, RowError> {
    let database_id = text(
        column(layout, tuple, layout.database_id, "database_id")?,
        "database_id",
    )?
    .to_owned();
    let name = match column(layout, tuple, layout.name, "name")? {
        ColumnValue::Binary(bytes) => bytes.to_vec(),
        other => bytea_hex(text(other, "name")?).ok_or(RowError::NameNotHex)?,
    };
    let path = encoding::decode_name(&name).map_err(RowError::Name)?;
    if let ColumnValue::Text(_) = column(layout, tuple, layout.path, "path")? {
        let stored = text(column(layout, tuple, layout.path, "path")?, "path")?;
        if stored != path.to_string() {
            return Err(RowError::PathMismatch {
                column: stored.to_owned(),
                name: path.to_string(),
            });
        }
    }
    Ok(DocumentKey {
        database_id,
        name,
        path,
        before: None,
    })
}

fn written(layout: &Layout, tuple: &Tuple<'_>) -> Result<DocumentChange, RowError> {
    let DocumentKey {
        database_id,
        name,
        path,
        ..
    } = key_of(layout, tuple)?;
    let (data, create_time, update_time) = version(layout, tuple)?;
    Ok(DocumentChange {
        database_id,
        name,
        path,
        data,
        create_time,
        update_time,
        before: None,
    })
}

/// A row's data and times.
fn version(
    layout: &Layout,
    tuple: &Tuple<'_>,
) -> Result<(DocumentData, Timestamp, Timestamp), RowError> {
    let data = match column(layout, tuple, layout.data, "data")? {
        ColumnValue::UnchangedToast => DocumentData::UnchangedToast,
        other => {
            let json = typed_json::json_from_str(text(other, "data")?).map_err(RowError::Data)?;
            DocumentData::Fields(typed_json::map_from_json(&json).map_err(RowError::Data)?)
        }
    };
    let time = |index: usize, name: &'static str| -> Result<Timestamp, RowError> {
        let text = text(column(layout, tuple, index, name)?, name)?;
        parse_timestamptz(text).ok_or_else(|| RowError::Timestamp {
            column: name,
            text: text.chars().take(64).collect(),
        })
    };
    Ok((
        data,
        time(layout.create_time, "create_time")?,
        time(layout.update_time, "update_time")?,
    ))
}

/// bytea's hex text output (`\x0a1b...`) into bytes.
pub fn bytea_hex(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?.as_bytes();
    if hex.len() % 2 != 0 {
        return None;
    }
    let digit = |b: u8| -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    };
    hex.chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// timestamptz's text output in DateStyle ISO (`2026-11-23 02:15:29.123456+00`, the offset
/// `+HH` or `+HH:MM` of the session's TimeZone) into a timestamp; `None` for any other
/// text (including offsets with seconds, BC dates and `infinity`) or out of Firestore's range.
pub fn parse_timestamptz(text: &str) -> Option<Timestamp> {
    let (date, rest) = text.split_once(' ')?;
    let split = rest.rfind(['+', '-'])?;
    let (time, offset) = rest.split_at(split);
    let offset = match offset.len() {
        3 => format!("{offset}:00"),
        6 => offset.to_owned(),
        _ => return None,
    };
    Timestamp::parse_rfc3339(&format!("{date}T{time}{offset}"))
}

#[cfg(test)]
#[path = "entities_tests.rs"]
mod tests;
