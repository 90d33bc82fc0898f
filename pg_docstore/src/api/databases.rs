//! The catalog of Firestore databases: `docstore.databases`, kept by `create_database` and
//! `drop_database` (administrators only: `roles.sql` revokes them from everyone else).

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use crate::errors::DocstoreError;
use crate::guc::{is_valid_database_id, DATABASE_ID_RULE, DEFAULT_DATABASE};

fn valid(id: &str) -> Result<(), DocstoreError> {
    if is_valid_database_id(id) {
        Ok(())
    } else {
        Err(DocstoreError::InvalidArgument(format!(
            "'{id}' is not a valid database id: {DATABASE_ID_RULE}"
        )))
    }
}

/// Add a database to the catalog (`docstore.databases`); fails with 23505 when it exists.
///
/// ```sql
/// select docstore.create_database('staging');
/// set docstore.database = 'staging';
/// ```
#[pg_extern(volatile)]
fn create_database(id: &str) -> Result<(), ErrorReport> {
    valid(id)?;
    let inserted = Spi::connect_mut(|client| -> Result<usize, DocstoreError> {
        Ok(client
            .update(
                "insert into docstore.databases (id) values ($1) on conflict do nothing returning id",
                None,
                &[id.into()],
            )?
            .len())
    })?;
    if inserted == 0 {
        return Err(DocstoreError::DatabaseExists { id: id.to_owned() }.into());
    }
    Ok(())
}

/// Delete a database: its documents, index entries, composite indexes and exemptions, and its
/// catalog row. Refuses `(default)`. Returns whether the catalog listed it (its data is
/// deleted either way: the SQL functions write to any valid id).
///
/// ```sql
/// select docstore.drop_database('staging');
/// ```
#[pg_extern(volatile)]
fn drop_database(id: &str) -> Result<bool, ErrorReport> {
    valid(id)?;
    if id == DEFAULT_DATABASE {
        return Err(DocstoreError::InvalidArgument(
            "the (default) database cannot be dropped; delete its documents instead".into(),
        )
        .into());
    }
    let listed = Spi::connect_mut(|client| -> Result<bool, DocstoreError> {
        crate::pg::catalog_cache::invalidate(client)?;
        // Its rules too: a database created again later with the same id starts locked, not
        // under the rules of the one dropped.
        for table in [
            "entities",
            "entity_versions",
            "index_entries",
            "indexes",
            "field_exemptions",
            "rules",
        ] {
            client.update(
                &format!("delete from docstore.{table} where database_id = $1"),
                None,
                &[id.into()],
            )?;
        }
        Ok(!client
            .update(
                "delete from docstore.databases where id = $1 returning id",
                None,
                &[id.into()],
            )?
            .is_empty())
    })?;
    Ok(listed)
}

/// Set a database's options (administrators only). `max_query_results`: the most documents one
/// client query may return (a larger result fails with 54000, RESOURCE_EXHAUSTED over HTTP,
/// after the rows before it); NULL removes the cap (the default, as in Firestore); it is always
/// set, so pass the current cap to keep it. `auto_composite_indexes`: whether a query that needs
/// a composite index creates it and builds it in its own transaction instead of failing with
/// 55000 (off by default, as in Firestore; the emulator needs no index definitions); NULL, the
/// default, keeps the current setting. Fails with 22023 when the catalog does not list the
/// database or for a cap below 1.
///
/// ```sql
/// select docstore.set_database_options('(default)', max_query_results => 10000);
/// select docstore.set_database_options('dev', null, auto_composite_indexes => true);
/// ```
#[pg_extern(volatile)]
fn set_database_options(
    id: &str,
    max_query_results: Option<i64>,
    auto_composite_indexes: default!(Option<bool>, "NULL"),
) -> Result<(), ErrorReport> {
    valid(id)?;
    if max_query_results.is_some_and(|m| m < 1) {
        return Err(DocstoreError::InvalidArgument(
            "max_query_results must be at least 1, or NULL for no cap".into(),
        )
        .into());
    }
    let updated = Spi::connect_mut(|client| -> Result<usize, DocstoreError> {
        Ok(client
            .update(
                "update docstore.databases set max_query_results = $2, \
                 auto_composite_indexes = coalesce($3, auto_composite_indexes) \
                 where id = $1 returning id",
                None,
                &[
                    id.into(),
                    max_query_results.into(),
                    auto_composite_indexes.into(),
                ],
            )?
            .len())
    })?;
    if updated == 0 {
        return Err(DocstoreError::InvalidArgument(format!(
            "database '{id}' is not in docstore.databases (docstore.create_database)"
        ))
        .into());
    }
    Ok(())
}
