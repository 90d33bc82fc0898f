//! The JSON form of `docstore.commit(writes)`: an array of
//! `{"create": path, "data": {..}}`, `{"set": path, "data": {..}, "merge": bool}`,
//! `{"update": path, "fields": {..}}`, `{"delete": path}`, each with an optional
//! `"precondition": {"exists": bool} | {"updateTime": "<RFC 3339>"}`.

use serde_json::Value as Json;

use docstore_core::mutation::{Mutation, WriteKind};
use docstore_core::{ResourcePath, Timestamp};

use super::{Operation, Precondition, Write};
use crate::errors::DocstoreError;
use crate::pg::time::from_timestamp;

/// Most writes in one commit (Firestore's limit).
pub const MAX_WRITES: usize = 500;

/// Parse a batch.
///
/// # Errors
/// [`DocstoreError::InvalidArgument`] naming the item and what is wrong with it, or the
/// mutation's own error.
pub fn parse(json: &Json) -> Result<Vec<Write>, DocstoreError> {
    let items = json.as_array().ok_or_else(|| {
        DocstoreError::InvalidArgument("commit() takes a JSON array of writes".into())
    })?;
    if items.len() > MAX_WRITES {
        return Err(DocstoreError::InvalidArgument(format!(
            "a commit has at most {MAX_WRITES} writes, this one has {}",
            items.len()
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| parse_item(i, item))
        .collect()
}

fn parse_item(i: usize, item: &Json) -> Result<Write, DocstoreError> {
    let bad = |m: &str| DocstoreError::InvalidArgument(format!("write {i}: {m}"));
    let obj = item
        .as_object()
        .ok_or_else(|| bad("each write must be a JSON object"))?;
    let verbs: Vec<&str> = ["create", "set", "update", "delete"]
        .into_iter()
        .filter(|v| obj.contains_key(*v))
        .collect();
    let [verb] = verbs.as_slice() else {
        return Err(bad("name exactly one of \"create\", \"set\", \"update\", \"delete\" with the document path"));
    };
    let allowed: &[&str] = match *verb {
        "create" => &["create", "data", "precondition"],
        "set" => &["set", "data", "merge", "precondition"],
        "update" => &["update", "fields", "precondition"],
        _ => &["delete", "precondition"],
    };
    if let Some(unknown) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(&format!(
            "unexpected key \"{unknown}\" in a {verb} write"
        )));
    }
    let path_text = obj[*verb]
        .as_str()
        .ok_or_else(|| bad("the document path must be a string"))?;
    let path = ResourcePath::parse_document(path_text).map_err(|e| bad(&e.to_string()))?;
    let body = |key: &str| {
        obj.get(key)
            .ok_or_else(|| bad(&format!("a {verb} write needs \"{key}\"")))
    };
    let operation = match *verb {
        "create" => Operation::Mutate(parse_mutation(i, WriteKind::Create, body("data")?)?),
        "set" => {
            let merge = match obj.get("merge") {
                None => false,
                Some(Json::Bool(b)) => *b,
                Some(_) => return Err(bad("\"merge\" must be true or false")),
            };
            Operation::Mutate(parse_mutation(i, WriteKind::Set { merge }, body("data")?)?)
        }
        "update" => Operation::Mutate(parse_mutation(i, WriteKind::Update, body("fields")?)?),
        _ => Operation::Delete,
    };
    let precondition = obj
        .get("precondition")
        .map(|p| parse_precondition(i, p))
        .transpose()?;
    Ok(Write {
        path,
        operation,
        precondition,
        generated_id: false,
        verbatim: None,
    })
}

fn parse_mutation(i: usize, kind: WriteKind, json: &Json) -> Result<Mutation, DocstoreError> {
    Mutation::parse(kind, json).map_err(|e| DocstoreError::InWrite {
        index: i,
        error: Box::new(DocstoreError::Mutation(e)),
    })
}

/// `{"exists": bool}` or `{"updateTime": "<RFC 3339>"}`.
pub fn parse_precondition(i: usize, json: &Json) -> Result<Precondition, DocstoreError> {
    let bad = || {
        DocstoreError::InvalidArgument(format!(
            "write {i}: a precondition is {{\"exists\": true|false}} or {{\"updateTime\": \"<RFC 3339 time>\"}}"
        ))
    };
    let obj = json.as_object().filter(|o| o.len() == 1).ok_or_else(bad)?;
    match (obj.get("exists"), obj.get("updateTime")) {
        (Some(Json::Bool(b)), None) => Ok(Precondition::Exists(*b)),
        (None, Some(Json::String(t))) => Timestamp::parse_rfc3339(t)
            .map(|t| Precondition::UpdateTime(from_timestamp(t)))
            .ok_or_else(bad),
        _ => Err(bad()),
    }
}
