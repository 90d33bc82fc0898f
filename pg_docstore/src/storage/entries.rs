//! `docstore.index_entries`: the exact delta of a document's entries (written together with
//! the entity by `storage::entities`), and bulk inserts for index builds.

use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid};

use crate::errors::DocstoreError;
use crate::pg::spi::plan;

const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
const BYTEA_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::BYTEAARRAYOID);

/// Insert entries `keys[i]` of documents `names[i]` that are not there yet (backfills: a
/// concurrent writer may have written some already). Nothing to do for an empty list.
pub fn insert_missing(
    client: &mut SpiClient<'_>,
    database: &str,
    keys: Vec<Vec<u8>>,
    names: Vec<Vec<u8>>,
) -> Result<(), DocstoreError> {
    if keys.is_empty() {
        return Ok(());
    }
    let sql = "insert into docstore.index_entries (database_id, key, name) \
               select $1, k, n from unnest($2::bytea[], $3::bytea[]) as u(k, n) on conflict do nothing";
    let stmt = plan(client, sql, &[TEXT, BYTEA_ARRAY, BYTEA_ARRAY])?;
    client.update(&*stmt, None, &[database.into(), keys.into(), names.into()])?;
    Ok(())
}

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
