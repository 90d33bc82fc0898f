//! One document: get, write (set, set with a mask, merge, update), delete, and create with a
//! random id. Every write is one call of the extension's `docstore.commit` (or `docstore.add`,
//! `docstore.delete`); a write's result reads the document back in the same transaction.

use docstore_core::{typed_json, FieldPath, ResourcePath};
use serde_json::{Map, Value as Json};

use super::caller::Caller;
use super::context::RulesMethod;
use super::error::ServiceError;
use super::Service;
use crate::pg::documents::{self as pg_documents, Document};
use crate::pg::{PgError, RequestTx};

/// A write's precondition: the document exists (or not), or was last updated at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    Exists(bool),
    /// RFC 3339, as the client sent it (the extension parses it).
    UpdateTime(String),
}

impl Precondition {
    /// The JSON of `docstore.commit`'s `"precondition"`.
    pub fn to_json(&self) -> Json {
        match self {
            Precondition::Exists(b) => serde_json::json!({ "exists": b }),
            Precondition::UpdateTime(t) => serde_json::json!({ "updateTime": t }),
        }
    }
}

/// What a write does to its document.
#[derive(Debug, Clone, PartialEq)]
pub enum DocumentWrite {
    /// Set the document to `data` (a JSON object's text, typed JSON); with `merge`, merge it
    /// into the document.
    Set { data: String, merge: bool },
    /// Set only the field paths of `mask` (Firestore's `updateMask`) to their values in `data`
    /// (a JSON object), deleting those `data` does not hold; the document is created when
    /// missing.
    MaskedSet { data: Json, mask: Vec<String> },
    /// Update an existing document: `docstore.update`'s fields object (field paths -> values or
    /// transforms) as JSON text.
    Update { fields: String },
}

/// A write of one document.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteRequest<'a> {
    pub database: &'a str,
    pub path: &'a ResourcePath,
    pub write: DocumentWrite,
    pub precondition: Option<Precondition>,
}

/// The document at `path`.
///
/// # Errors
/// NOT_FOUND when it does not exist; the rules' denial; database errors.
///
/// # Cancel safety
/// Dropped mid-way, the read is cancelled and its connection discarded.
pub async fn get(
    service: &Service,
    caller: &Caller,
    database: &str,
    path: &ResourcePath,
) -> Result<Document, ServiceError> {
    let run_as = caller.run_as(RulesMethod::Get, database, &path.to_string(), None);
    match pg_documents::get(&service.db, database, &run_as, path).await? {
        Some(doc) => Ok(doc),
        None => Err(missing(path)),
    }
}

fn missing(path: &impl std::fmt::Display) -> ServiceError {
    ServiceError::not_found(format!("document \"{path}\" does not exist"))
}

/// The `"precondition"` member of a commit write, or nothing.
fn precondition_member(precondition: Option<&Precondition>) -> String {
    precondition
        .map(|p| format!(",\"precondition\":{}", p.to_json()))
        .unwrap_or_default()
}

/// The `docstore.commit` writes of `request`, as JSON text.
///
/// # Errors
/// INVALID_ARGUMENT for a field path of the mask core refuses.
pub fn commit_writes(request: &WriteRequest<'_>) -> Result<String, ServiceError> {
    let path = request.path.to_string();
    let path_json = Json::String(path.clone()).to_string();
    let precondition = request.precondition.as_ref();
    Ok(match &request.write {
        DocumentWrite::Set { data, merge } => format!(
            "[{{\"set\":{path_json},\"data\":{data},\"merge\":{merge}{}}}]",
            precondition_member(precondition)
        ),
        DocumentWrite::MaskedSet { data, mask } => {
            masked_set(&path, data, mask, precondition.map(Precondition::to_json))?.to_string()
        }
        DocumentWrite::Update { fields } => format!(
            "[{{\"update\":{path_json},\"fields\":{fields}{}}}]",
            precondition_member(precondition)
        ),
    })
}

/// Write one document and read it back: `begin`, the settings, the write and the read-back go
/// out together (one round trip; a failed write aborts the transaction, so the read then fails
/// too and the write's error is reported); the commit, or the rollback when the document
/// cannot be read back, follows. A set is the rules' `write` (only the extension can tell a
/// create from an update), an update their `update`.
///
/// # Errors
/// INVALID_ARGUMENT for a bad mask; NOT_FOUND when an update's document does not exist; the
/// extension's errors (a failed precondition, a refused value, the rules' denial).
///
/// # Cancel safety
/// Dropped mid-way, the transaction is cancelled and its connection discarded: nothing is
/// written.
pub async fn write(
    service: &Service,
    caller: &Caller,
    request: WriteRequest<'_>,
) -> Result<Document, ServiceError> {
    let writes = commit_writes(&request)?;
    let method = match request.write {
        DocumentWrite::Update { .. } => RulesMethod::Update,
        DocumentWrite::Set { .. } | DocumentWrite::MaskedSet { .. } => RulesMethod::Write,
    };
    let database = request.database;
    let path = request.path;
    let run_as = caller.run_as(method, database, &path.to_string(), None);
    let (tx, read) = service
        .db
        .begin_with(database, &run_as, async |tx: &RequestTx| {
            Ok::<_, ServiceError>(pg_documents::commit_and_read(tx, &writes, database, path).await?)
        })
        .await?;
    end(tx, read.ok_or_else(|| missing(path))).await
}

/// Delete the document at `path`; whether it existed (deleting a missing document is no
/// error, as in Firestore, unless the precondition `exists: true` demands it).
///
/// # Errors
/// A failed precondition, the rules' denial, database errors.
///
/// # Cancel safety
/// As [`write`].
pub async fn delete(
    service: &Service,
    caller: &Caller,
    database: &str,
    path: &ResourcePath,
    precondition: Option<&Precondition>,
) -> Result<bool, ServiceError> {
    let text = path.to_string();
    let run_as = caller.run_as(RulesMethod::Delete, database, &text, None);
    let (tx, existed) = service
        .db
        .begin_with(
            database,
            &run_as,
            async |tx: &RequestTx| match precondition {
                None => Ok::<_, ServiceError>(pg_documents::delete(tx, &text).await?),
                Some(precondition) => {
                    let writes = format!(
                        "[{{\"delete\":{}{}}}]",
                        Json::String(text.clone()),
                        precondition_member(Some(precondition))
                    );
                    pg_documents::commit(tx, &writes).await?;
                    // The precondition held: exists=false means there was nothing to delete.
                    Ok(!matches!(precondition, Precondition::Exists(false)))
                }
            },
        )
        .await?;
    tx.commit().await?;
    Ok(existed)
}

/// Create a document with a random id in `collection` (`docstore.add`): one autocommit
/// statement (`docstore.add_document`, or `add_document_as_client` for a client) when this
/// role may call it; otherwise `docstore.add` and the read-back in one transaction. The rules'
/// `create`.
///
/// # Errors
/// The extension's errors (a refused value, the rules' denial), database errors.
///
/// # Cancel safety
/// As [`write`].
pub async fn add(
    service: &Service,
    caller: &Caller,
    database: &str,
    collection: &ResourcePath,
    data: &str,
) -> Result<Document, ServiceError> {
    let collection = collection.to_string();
    let run_as = caller.run_as(RulesMethod::Create, database, &collection, None);
    if pg_documents::adds_in_one_statement(&service.db, &run_as).await? {
        return Ok(pg_documents::add_one(&service.db, database, &run_as, &collection, data).await?);
    }
    let (tx, path) = service
        .db
        .begin_with(database, &run_as, async |tx: &RequestTx| {
            Ok::<_, ServiceError>(pg_documents::add(tx, &collection, data).await?)
        })
        .await?;
    let result = async {
        let resource = ResourcePath::parse_document(&path).map_err(|e| {
            ServiceError::from(PgError::Decode(format!(
                "docstore.add returned {path:?}: {e}"
            )))
        })?;
        pg_documents::read(&tx, database, &resource)
            .await?
            .ok_or_else(|| missing(&path))
    }
    .await;
    end(tx, result).await
}

/// Commit on success, roll back on failure (a connection that cannot roll back is discarded
/// by [`RequestTx`]'s drop).
///
/// # Cancel safety
/// Dropped mid-way, the transaction is cancelled and its connection discarded.
pub async fn end<T>(tx: RequestTx, result: Result<T, ServiceError>) -> Result<T, ServiceError> {
    match result {
        Ok(value) => {
            tx.commit().await?;
            Ok(value)
        }
        Err(error) => {
            if let Err(e) = tx.rollback().await {
                tracing::debug!(error = %e, "rollback after a failed request");
            }
            Err(error)
        }
    }
}

/// The value at a field path of typed JSON document data, `None` when absent. A map written
/// `{"$map": {...}}` is looked into; a one-key object whose key is one of typed JSON's tags
/// (core's [`typed_json::is_tag`]: a typed value or a transform) has no fields; any other
/// object is a map, whatever its keys look like.
fn value_at<'a>(data: &'a Json, path: &FieldPath) -> Option<&'a Json> {
    let mut at = data;
    for segment in path.segments() {
        let mut obj = at.as_object()?;
        if obj.len() == 1 {
            if let Some(Json::Object(inner)) = obj.get("$map") {
                obj = inner;
            } else if obj.keys().any(|k| typed_json::is_tag(k)) {
                return None;
            }
        }
        at = obj.get(segment)?;
    }
    Some(at)
}

/// The writes of a set with an update mask (Firestore's `updateMask`): the document is
/// created when missing (a merge of nothing), then each masked field path is set to its
/// value in `data`, or deleted when `data` does not hold it; other fields stay as they are.
/// Returns the `docstore.commit` writes as JSON; `precondition` goes on the first.
///
/// # Errors
/// INVALID_ARGUMENT for data that is not a JSON object or a field path core refuses.
pub fn masked_set(
    path: &str,
    data: &Json,
    mask: &[String],
    precondition: Option<Json>,
) -> Result<Json, ServiceError> {
    if !data.is_object() {
        return Err(ServiceError::invalid_argument(
            "the document data must be a JSON object",
        ));
    }
    let mut fields = Map::new();
    for text in mask {
        let field = FieldPath::parse(text)
            .map_err(|e| ServiceError::invalid_argument(format!("updateMask \"{text}\": {e}")))?;
        let value = value_at(data, &field)
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"$delete": true}));
        fields.insert(text.clone(), value);
    }
    let mut create = serde_json::json!({"set": path, "data": {}, "merge": true});
    if let (Some(p), Some(obj)) = (precondition, create.as_object_mut()) {
        obj.insert("precondition".into(), p);
    }
    Ok(Json::Array(vec![
        create,
        serde_json::json!({"update": path, "fields": fields}),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_sets() {
        let writes = masked_set(
            "r/a",
            &serde_json::json!({"a": 1, "b": {"c": {"$map": {"d": 2}}}, "t": {"$timestamp": "2020-01-01T00:00:00Z"}}),
            &["a".into(), "b.c.d".into(), "x".into(), "t.y".into()],
            Some(serde_json::json!({"exists": true})),
        )
        .unwrap();
        assert_eq!(
            writes,
            serde_json::json!([
                {"set": "r/a", "data": {}, "merge": true, "precondition": {"exists": true}},
                {"update": "r/a", "fields": {"a": 1, "b.c.d": 2, "x": {"$delete": true}, "t.y": {"$delete": true}}}
            ])
        );
        // A map key that merely starts with `$` is a field, not a typed value.
        let writes = masked_set(
            "r/a",
            &serde_json::json!({"a": {"$x": 1}}),
            &["a.`$x`".into()],
            None,
        )
        .unwrap();
        assert_eq!(writes[1]["fields"], serde_json::json!({"a.`$x`": 1}));
        assert!(masked_set("r/a", &serde_json::json!([]), &["a".into()], None).is_err());
        assert!(masked_set("r/a", &serde_json::json!({}), &["a..b".into()], None).is_err());
    }
}
