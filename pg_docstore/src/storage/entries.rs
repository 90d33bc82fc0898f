//! `docstore.index_entries`: apply the exact delta of a document's entries.

use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid};

use crate::errors::DocstoreError;
use crate::pg::spi::plan;

const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
const BYTEA: PgOid = PgOid::BuiltIn(PgBuiltInOids::BYTEAOID);
const BYTEA_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::BYTEAARRAYOID);

/// Entries in `old` but not `new`, and in `new` but not `old` (both sorted, deduplicated).
pub fn delta(old: &[Vec<u8>], new: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a < b => {
                removed.push(a.clone());
                i += 1;
            }
            (Some(a), None) => {
                removed.push(a.clone());
                i += 1;
            }
            (_, Some(b)) => {
                added.push(b.clone());
                j += 1;
            }
            (None, None) => break,
        }
    }
    (removed, added)
}

/// Delete `removed` and insert `added` for the document `name`; one statement each, none when
/// the list is empty (so untouched fields cost nothing).
pub fn apply(
    client: &mut SpiClient<'_>,
    database: &str,
    name: &[u8],
    removed: Vec<Vec<u8>>,
    added: Vec<Vec<u8>>,
) -> Result<(), DocstoreError> {
    if !removed.is_empty() {
        let sql = "delete from docstore.index_entries where database_id = $1 and key = any($2)";
        let stmt = plan(client, sql, &[TEXT, BYTEA_ARRAY])?;
        client.update(&*stmt, None, &[database.into(), removed.into()])?;
    }
    if !added.is_empty() {
        let sql = "insert into docstore.index_entries (database_id, key, name) \
                   select $1, k, $3 from unnest($2::bytea[]) k";
        let stmt = plan(client, sql, &[TEXT, BYTEA_ARRAY, BYTEA])?;
        client.update(
            &*stmt,
            None,
            &[database.into(), added.into(), name.to_vec().into()],
        )?;
    }
    Ok(())
}
