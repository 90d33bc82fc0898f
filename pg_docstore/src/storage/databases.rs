//! Per-database options of `docstore.databases` (set by `docstore.set_database_options`).

use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid};

use crate::errors::DocstoreError;
use crate::pg::spi::plan;

const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);

/// The most documents a client's query may return in `database`; 0: no cap (the default, and
/// for a database the catalog does not list). Administrators' queries are never capped.
pub fn max_query_results(client: &SpiClient<'_>, database: &str) -> Result<u64, DocstoreError> {
    if !crate::pg::owner::caller_writes_as_client() {
        return Ok(0);
    }
    let stmt = plan(
        client,
        "select max_query_results from docstore.databases where id = $1",
        &[TEXT],
    )?;
    let mut cap: Option<i64> = None;
    for row in client.select(&*stmt, Some(1), &[database.into()])? {
        cap = row.get(1)?;
    }
    Ok(cap.and_then(|c| u64::try_from(c).ok()).unwrap_or(0))
}

/// Whether a query in `database` that needs a composite index creates it
/// (`auto_composite_indexes`; false for a database the catalog does not list). Read as the
/// extension's owner: the caller may be a client.
pub fn auto_composite_indexes(
    client: &SpiClient<'_>,
    database: &str,
) -> Result<bool, DocstoreError> {
    let _owner = crate::pg::owner::AsOwner::new(client)?;
    let stmt = plan(
        client,
        "select auto_composite_indexes from docstore.databases where id = $1",
        &[TEXT],
    )?;
    let mut on = false;
    for row in client.select(&*stmt, Some(1), &[database.into()])? {
        on = row.get::<bool>(1)?.unwrap_or(false);
    }
    Ok(on)
}
