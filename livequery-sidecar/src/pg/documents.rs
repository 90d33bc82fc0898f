//! Statements of the document endpoints. Every write goes through the extension's functions
//! (`docstore.commit`, `docstore.add`, `docstore.delete`): one write path.

use docstore_core::encoding::encode_name;
use docstore_core::ResourcePath;

use super::types::{JsonText, PgTime, RawJson};
use super::{PgError, RequestTx};

/// A stored document with its times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub path: String,
    /// Typed JSON.
    pub data: RawJson,
    pub create_time: PgTime,
    pub update_time: PgTime,
}

/// Read one document of `database` in the request's transaction (`None`: it does not exist).
/// One primary-key lookup by the document's encoded name (docstore-core's encoding).
///
/// # Errors
/// Postgres errors (permission denied included).
///
/// # Cancel safety
/// Dropping the future drops nothing but the read; the caller's [`RequestTx`] decides.
pub async fn read(
    tx: &RequestTx,
    database: &str,
    path: &ResourcePath,
) -> Result<Option<Document>, PgError> {
    let client = tx.client()?;
    let stmt = client
        .prepare_cached(
            "select data, create_time, update_time from docstore.entities \
             where database_id = $1 and name = $2",
        )
        .await?;
    let name = encode_name(path);
    let Some(row) = client.query_opt(&stmt, &[&database, &name]).await? else {
        return Ok(None);
    };
    Ok(Some(Document {
        path: path.to_string(),
        data: row.try_get(0)?,
        create_time: row.try_get(1)?,
        update_time: row.try_get(2)?,
    }))
}

/// `docstore.commit(writes)`: the batch's JSON text (validated JSON); returns the
/// extension's `{"commitTime", "updateTimes"}` as text.
///
/// # Errors
/// The extension's errors (precondition 55000, not found, invalid argument, ...).
///
/// # Cancel safety
/// As [`read`].
pub async fn commit(tx: &RequestTx, writes: &str) -> Result<RawJson, PgError> {
    let client = tx.client()?;
    let stmt = client
        .prepare_cached("select docstore.commit($1::jsonb)")
        .await?;
    let row = client.query_one(&stmt, &[&JsonText(writes)]).await?;
    Ok(row.try_get(0)?)
}

/// `docstore.add(collection, data)`: a new document with a random id; returns its path.
///
/// # Errors
/// The extension's errors.
///
/// # Cancel safety
/// As [`read`].
pub async fn add(tx: &RequestTx, collection: &str, data: &str) -> Result<String, PgError> {
    let client = tx.client()?;
    let stmt = client
        .prepare_cached("select docstore.add($1, $2::jsonb)")
        .await?;
    let row = client
        .query_one(&stmt, &[&collection, &JsonText(data)])
        .await?;
    Ok(row.try_get(0)?)
}

/// `docstore.delete(path)`: whether the document existed.
///
/// # Errors
/// The extension's errors.
///
/// # Cancel safety
/// As [`read`].
pub async fn delete(tx: &RequestTx, path: &str) -> Result<bool, PgError> {
    let client = tx.client()?;
    let stmt = client.prepare_cached("select docstore.delete($1)").await?;
    let row = client.query_one(&stmt, &[&path]).await?;
    Ok(row.try_get(0)?)
}
