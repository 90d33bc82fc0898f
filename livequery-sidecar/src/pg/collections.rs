//! The statement of `:listCollectionIds`: a skip scan of `entities_by_collection`
//! (docstore-core's [`ChildCollections`], docs/storage.md "entities").

use docstore_core::encoding::ChildCollections;

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
        if child.direct {
            ids.push(child.id);
        }
        bound = child.next;
    }
    Ok(ids)
}
