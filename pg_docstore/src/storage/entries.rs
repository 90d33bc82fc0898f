//! `docstore.index_entries`: a document's entries and the exact delta of them (written below
//! the executor right after `storage::entities` wrote the document, see `pg::heap`), and bulk
//! inserts for index builds.

use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgBuiltInOids, PgOid};

use crate::errors::DocstoreError;
use crate::pg::heap::{column, Table};
use crate::pg::spi::plan;

const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
const BYTEA_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::BYTEAARRAYOID);

/// Apply a document's index-entry delta: delete the entries `removed` (an entry that is not
/// there is no error: an index still being built has no entries for documents its backfill has
/// not reached yet), then insert `added`. The caller holds the document's lock.
pub fn apply(
    database: &str,
    name: &[u8],
    removed: &[Vec<u8>],
    added: &[Vec<u8>],
) -> Result<(), DocstoreError> {
    if removed.is_empty() && added.is_empty() {
        return Ok(());
    }
    let table = Table::open(c"docstore", c"index_entries")?;
    let database = column(database)?;
    if !removed.is_empty() {
        let keys = removed
            .iter()
            .map(|key| Ok([database, column(key.as_slice())?]))
            .collect::<Result<Vec<_>, DocstoreError>>()?;
        let columns = [
            (
                pg_sys::RegProcedure::from(pg_sys::F_TEXTEQ),
                pg_sys::C_COLLATION_OID,
            ),
            (
                pg_sys::RegProcedure::from(pg_sys::F_BYTEAEQ),
                pg_sys::InvalidOid,
            ),
        ];
        table.delete_by_primary_key(&columns, &keys)?;
    }
    if !added.is_empty() {
        let name = column(name)?;
        let rows = added
            .iter()
            .map(|key| Ok([database, column(key.as_slice())?, name]))
            .collect::<Result<Vec<_>, DocstoreError>>()?;
        table.insert(&rows)?;
    }
    Ok(())
}

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
               select $1, k, n from unnest($2::pg_catalog.bytea[], $3::pg_catalog.bytea[]) as u(k, n) on conflict do nothing";
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
