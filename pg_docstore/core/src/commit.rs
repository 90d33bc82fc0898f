//! The commit format (docs/http.md and docs/storage.md: `docstore.commit(writes jsonb)` and the HTTP
//! `:commit` body): a JSON array of
//! `{"create": path, "data": {..}}`, `{"set": path, "data": {..}, "merge": bool}`,
//! `{"update": path, "fields": {..}}`, `{"delete": path}`, each with an optional
//! `"precondition": {"exists": bool} | {"updateTime": "<RFC 3339>"}`, and
//! `{"verify": path, "precondition": {..}}`: a check that writes nothing, what a transaction
//! sends for a document it read but does not write; without a precondition it only locks the
//! document (what a held transaction takes before a point read).
//!
//! [`parse`] reads it into [`Write`]s; the extension and the sidecar both call it, so the SQL
//! argument and the HTTP body are the same thing read by the same code.

use serde_json::Value as Json;
use thiserror::Error;

use crate::error::ErrorKind;
use crate::mutation::{Mutation, MutationError, WriteKind};
use crate::path::{PathError, ResourcePath};
use crate::value::Timestamp;

pub use crate::limits::MAX_WRITES;

/// One write of a commit.
#[derive(Debug, Clone)]
pub struct Write {
    /// The document written.
    pub path: ResourcePath,
    /// What the write does to it.
    pub operation: Operation,
    /// What must hold of the document before the write, if anything.
    pub precondition: Option<Precondition>,
}

/// What a write does.
#[derive(Debug, Clone)]
pub enum Operation {
    /// Create, set (with or without merge) or update, parsed and validated.
    Mutate(Mutation),
    /// Delete the document (nothing happens if it does not exist).
    Delete,
    /// Check the precondition (always present) and lock the document as a write would, but
    /// write nothing.
    Verify,
}

/// A write's precondition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// The document must exist (`true`) or must not (`false`).
    Exists(bool),
    /// The document must exist with exactly this update time.
    UpdateTime(Timestamp),
}

/// Why a commit was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CommitError {
    /// The writes are not a JSON array.
    #[error("commit() takes a JSON array of writes")]
    NotAnArray,
    /// More than [`MAX_WRITES`] writes.
    #[error("a commit has at most {MAX_WRITES} writes, this one has {count}")]
    TooManyWrites { count: usize },
    /// Write `index` (counting from 0) is malformed.
    #[error("write {index}: {error}")]
    InWrite { index: usize, error: WriteError },
}

impl CommitError {
    /// The kind of failure: [`ErrorKind::InvalidArgument`], except a write whose data is bad
    /// typed JSON ([`ErrorKind::InvalidTypedJson`], the mutation's own kind).
    pub fn kind(&self) -> ErrorKind {
        match self {
            CommitError::NotAnArray | CommitError::TooManyWrites { .. } => {
                ErrorKind::InvalidArgument
            }
            CommitError::InWrite { error, .. } => error.kind(),
        }
    }
}

/// What is wrong with one write.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WriteError {
    #[error("each write must be a JSON object")]
    NotAnObject,
    #[error(
        "name exactly one of \"create\", \"set\", \"update\", \"delete\", \"verify\" with the document path"
    )]
    Verb,
    #[error("unexpected key \"{key}\" in a {verb} write")]
    UnexpectedKey { key: String, verb: &'static str },
    #[error("the document path must be a string")]
    PathNotAString,
    /// The document path does not parse (or is a collection path).
    #[error(transparent)]
    Path(PathError),
    #[error("a {verb} write needs \"{key}\"")]
    Missing {
        verb: &'static str,
        key: &'static str,
    },
    #[error("\"merge\" must be true or false")]
    Merge,
    #[error(
        "a precondition is {{\"exists\": true|false}} or {{\"updateTime\": \"<RFC 3339 time>\"}}"
    )]
    Precondition,
    /// The data or fields are refused by [`Mutation::parse`].
    #[error(transparent)]
    Mutation(MutationError),
}

impl WriteError {
    /// The kind of failure: the mutation's or the path's own kind, else
    /// [`ErrorKind::InvalidArgument`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            WriteError::Mutation(e) => e.kind(),
            WriteError::Path(e) => e.kind(),
            WriteError::NotAnObject
            | WriteError::Verb
            | WriteError::UnexpectedKey { .. }
            | WriteError::PathNotAString
            | WriteError::Missing { .. }
            | WriteError::Merge
            | WriteError::Precondition => ErrorKind::InvalidArgument,
        }
    }
}

/// Parse a commit's writes.
///
/// # Errors
/// [`CommitError::NotAnArray`], [`CommitError::TooManyWrites`], or the first malformed write
/// ([`CommitError::InWrite`], naming its index and what is wrong with it).
pub fn parse(json: &Json) -> Result<Vec<Write>, CommitError> {
    let items = json.as_array().ok_or(CommitError::NotAnArray)?;
    if items.len() > MAX_WRITES {
        return Err(CommitError::TooManyWrites { count: items.len() });
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            parse_write(item).map_err(|error| CommitError::InWrite { index, error })
        })
        .collect()
}

/// The verbs, and the keys a write with each may have.
const VERBS: [(&str, &[&str]); 5] = [
    ("create", &["create", "data", "precondition"]),
    ("set", &["set", "data", "merge", "precondition"]),
    ("update", &["update", "fields", "precondition"]),
    ("delete", &["delete", "precondition"]),
    ("verify", &["verify", "precondition"]),
];

/// Parse one write (a member of the array [`parse`] reads).
///
/// # Errors
/// What is wrong with it.
pub fn parse_write(item: &Json) -> Result<Write, WriteError> {
    let obj = item.as_object().ok_or(WriteError::NotAnObject)?;
    let mut named = VERBS.iter().filter(|(verb, _)| obj.contains_key(*verb));
    let (Some(&(verb, allowed)), None) = (named.next(), named.next()) else {
        return Err(WriteError::Verb);
    };
    if let Some(unknown) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(WriteError::UnexpectedKey {
            key: unknown.clone(),
            verb,
        });
    }
    let path_text = obj
        .get(verb)
        .and_then(Json::as_str)
        .ok_or(WriteError::PathNotAString)?;
    let path = ResourcePath::parse_document(path_text).map_err(WriteError::Path)?;
    let body = |key: &'static str| obj.get(key).ok_or(WriteError::Missing { verb, key });
    let mutate = |kind: WriteKind, json: &Json| {
        Mutation::parse(kind, json)
            .map(Operation::Mutate)
            .map_err(WriteError::Mutation)
    };
    let operation = match verb {
        "create" => mutate(WriteKind::Create, body("data")?)?,
        "set" => {
            let merge = match obj.get("merge") {
                None => false,
                Some(Json::Bool(b)) => *b,
                Some(_) => return Err(WriteError::Merge),
            };
            mutate(WriteKind::Set { merge }, body("data")?)?
        }
        "update" => mutate(WriteKind::Update, body("fields")?)?,
        // Without a precondition a verify checks nothing: it only locks the document.
        "verify" => Operation::Verify,
        _ => Operation::Delete,
    };
    let precondition = obj
        .get("precondition")
        .map(parse_precondition)
        .transpose()?;
    Ok(Write {
        path,
        operation,
        precondition,
    })
}

/// `{"exists": bool}` or `{"updateTime": "<RFC 3339>"}`.
///
/// # Errors
/// [`WriteError::Precondition`] for anything else.
pub fn parse_precondition(json: &Json) -> Result<Precondition, WriteError> {
    let obj = json
        .as_object()
        .filter(|o| o.len() == 1)
        .ok_or(WriteError::Precondition)?;
    match (obj.get("exists"), obj.get("updateTime")) {
        (Some(Json::Bool(b)), None) => Ok(Precondition::Exists(*b)),
        (None, Some(Json::String(t))) => Timestamp::parse_rfc3339(t)
            .map(Precondition::UpdateTime)
            .ok_or(WriteError::Precondition),
        _ => Err(WriteError::Precondition),
    }
}
