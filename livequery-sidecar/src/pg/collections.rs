//! The statement of `:listCollectionIds`: a skip scan of `entities_by_collection`
//! (docstore-core's [`ChildCollections`], docs/storage.md "entities"); and those of
//! ListDocuments: a collection's documents, and the same skip scan for the ids of its documents
//! that have descendants.

use docstore_core::encoding::ChildCollections;

use docstore_core::encoding::encode_segments;
use docstore_core::ResourcePath;

use super::documents::Document;
use super::{PgError, RequestTx};

/// The first `parent` in `[$2, $3)`: one probe of the `(database_id, parent, name)` btree (a
/// `limit 1` index scan that stops at its first row).
const PROBE_SQL: &str = "select parent from docstore.entities \
                         where database_id = $1 and parent >= $2 and parent < $3 \
                         order by parent limit 1";

/// The ids of the collections holding at least one document directly under the document
/// `parent` (none: the root), in byte order. One probe per child collection of the parent
/// (those holding only subcollections' documents included) plus one: never a scan of the
/// documents themselves. The probes run in the request's transaction one after another
/// (each sees the data committed when it starts).
///
/// # Errors
/// Postgres errors; a stored `parent` that does not decode.
///
/// # Cancel safety
/// Dropped between probes, nothing has changed; the caller's [`RequestTx`] decides.
pub async fn child_collection_ids(
    tx: &RequestTx,
    database: &str,
    parent: &[String],
) -> Result<Vec<String>, PgError> {
    Ok(child_collections(tx, database, parent)
        .await?
        .into_iter()
        .filter_map(|(id, direct)| direct.then_some(id))
        .collect())
}

/// The ids of every collection under the document `parent` (none: the root), in byte order,
/// each with whether it holds a document directly (`false`: only its documents'
/// subcollections do). The same probes as [`child_collection_ids`].
///
/// # Errors
/// As [`child_collection_ids`].
///
/// # Cancel safety
/// As [`child_collection_ids`].
pub async fn child_collections(
    tx: &RequestTx,
    database: &str,
    parent: &[String],
) -> Result<Vec<(String, bool)>, PgError> {
    let client = tx.client()?;
    let stmt = client.prepare_cached(PROBE_SQL).await?;
    let scan = ChildCollections::under(parent);
    let (mut bound, end) = (scan.start(), scan.end());
    let mut ids = Vec::new();
    while let Some(row) = client.query_opt(&stmt, &[&database, &bound, &end]).await? {
        let found: Vec<u8> = row.try_get(0)?;
        let child = scan
            .step(&found)
            .map_err(|e| PgError::Decode(format!("stored parent: {e}")))?;
        ids.push((child.id, child.direct));
        bound = child.next;
    }
    Ok(ids)
}

/// The documents directly in a collection (one range of `entities_by_collection`), in name order.
const DOCUMENTS_SQL: &str = "select path, data, create_time, update_time from docstore.entities \
                             where database_id = $1 and parent = $2 order by name";

/// The documents directly in the collection `collection`, in name order.
///
/// # Errors
/// Postgres errors.
///
/// # Cancel safety
/// A read; the caller's [`RequestTx`] decides.
pub async fn documents_in(
    tx: &RequestTx,
    database: &str,
    collection: &ResourcePath,
) -> Result<Vec<Document>, PgError> {
    let client = tx.client()?;
    let stmt = client.prepare_cached(DOCUMENTS_SQL).await?;
    let mut parent = Vec::new();
    encode_segments(&mut parent, collection.segments());
    let rows = client.query(&stmt, &[&database, &parent]).await?;
    rows.iter().map(listed_document).collect()
}

/// The ids of the documents of `collection` that have descendants (a document in one of their
/// subcollections, at any depth), whether or not they exist themselves, in byte order: the
/// skip scan of [`child_collection_ids`] under the collection (one probe per such id).
///
/// # Errors
/// Postgres errors; a stored `parent` that does not decode.
///
/// # Cancel safety
/// As [`child_collection_ids`].
pub async fn ids_with_descendants(
    tx: &RequestTx,
    database: &str,
    collection: &ResourcePath,
) -> Result<Vec<String>, PgError> {
    let client = tx.client()?;
    let stmt = client.prepare_cached(PROBE_SQL).await?;
    let scan = ChildCollections::under(collection.segments());
    let (mut bound, end) = (scan.start(), scan.end());
    let mut ids = Vec::new();
    while let Some(row) = client.query_opt(&stmt, &[&database, &bound, &end]).await? {
        let found: Vec<u8> = row.try_get(0)?;
        let child = scan
            .step(&found)
            .map_err(|e| PgError::Decode(format!("stored parent: {e}")))?;
        ids.push(child.id);
        bound = child.next;
    }
    Ok(ids)
}

/// The children of `parent` (a document or collection path; empty: the root) as they were at
/// `at` (RFC 3339): the extension's `child_ids_at` (docs/storage.md, "Version history"), each
/// id with whether a document was directly in it. Sorted by id bytes.
///
/// # Errors
/// Postgres errors (55000 for a time older than the version history, 22023 for one in the
/// future).
///
/// # Cancel safety
/// A read; the caller's [`RequestTx`] decides.
pub async fn child_ids_at(
    tx: &RequestTx,
    parent: &[String],
    at: &str,
) -> Result<Vec<(String, bool)>, PgError> {
    let client = tx.client()?;
    let stmt = client
        .prepare_cached("select id, direct from docstore.child_ids_at($1, $2::text::timestamptz)")
        .await?;
    let rows = client.query(&stmt, &[&parent.join("/"), &at]).await?;
    rows.iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect()
}

/// [`documents_in`] as they were at `at` (RFC 3339): the extension's `list_documents_at`.
///
/// # Errors
/// As [`child_ids_at`].
///
/// # Cancel safety
/// A read; the caller's [`RequestTx`] decides.
pub async fn documents_in_at(
    tx: &RequestTx,
    collection: &ResourcePath,
    at: &str,
) -> Result<Vec<Document>, PgError> {
    let client = tx.client()?;
    let stmt = client
        .prepare_cached(
            "select path, data, create_time, update_time \
             from docstore.list_documents_at($1, $2::text::timestamptz)",
        )
        .await?;
    let rows = client.query(&stmt, &[&collection.to_string(), &at]).await?;
    rows.iter().map(listed_document).collect()
}

/// A document of a listing's row `(path, data, create_time, update_time)`.
fn listed_document(row: &tokio_postgres::Row) -> Result<Document, PgError> {
    Ok(Document {
        path: row.try_get(0)?,
        data: row.try_get(1)?,
        create_time: row.try_get(2)?,
        update_time: row.try_get(3)?,
    })
}
