//! Automatic composite indexes (a database's `auto_composite_indexes`, docs/query.md): a query
//! the ready indexes cannot answer creates exactly the index its 55000 error names, builds it
//! in the caller's transaction, and is planned again.
//!
//! - Rights: the catalog and the entries are the extension's, so the creation runs as their
//!   owner ([`AsOwner`]), whoever queries (clients may not call `create_index`).
//! - Writers: `LOCK docstore.entities IN SHARE MODE` waits for every transaction that has
//!   written documents (they hold ROW EXCLUSIVE until they end; their documents are then
//!   visible to the backfill, whose statements take fresh READ COMMITTED snapshots) and keeps
//!   new writers out until this transaction ends. A writer takes ROW EXCLUSIVE before it reads
//!   the index catalog (`writes`), so once it gets in, it sees the committed index and
//!   maintains it.
//! - Concurrent queries needing the same index: a transaction advisory lock keyed on the
//!   definition serialises them; the second one, once the first has committed, finds the
//!   index READY (fresh snapshot) and creates nothing.
//! - Where nothing can be written (read-only transaction, standby) or the transaction reads at
//!   one snapshot (REPEATABLE READ, SERIALIZABLE: the backfill could miss documents committed
//!   since it began), the query fails with the missing index's 55000 and a hint saying so.

use pgrx::pg_sys;
use pgrx::spi::{Spi, SpiClient};

use docstore_core::index::IndexDefinition;
use docstore_core::plan::PlanError;

use crate::errors::{AutoIndexBlock, DocstoreError};
use crate::pg::jsonb::TypedJsonb;
use crate::pg::owner::AsOwner;

/// Rows per build step (as the background builder's).
const BATCH_SIZE: i64 = crate::pg::background::BATCH_SIZE as i64;

/// Create and build the index `missing` names when `database` has `auto_composite_indexes`
/// on; the caller then plans again. `missing` (as a [`DocstoreError`]) when the database does
/// not create indexes automatically, [`DocstoreError::AutoIndexBlocked`] when it cannot here.
pub fn create(
    client: &SpiClient<'_>,
    database: &str,
    missing: PlanError,
) -> Result<(), DocstoreError> {
    let PlanError::MissingIndex {
        collection_group,
        scope,
        fields,
        ..
    } = &missing
    else {
        return Err(missing.into());
    };
    if !crate::storage::databases::auto_composite_indexes(client, database)? {
        return Err(missing.into());
    }
    if let Some(reason) = blocked() {
        return Err(DocstoreError::AutoIndexBlocked {
            error: missing,
            reason,
        });
    }
    let canonical = IndexDefinition::fields_json(fields).to_string();
    let key = format!(
        "docstore auto index\n{database}\n{collection_group}\n{}\n{canonical}",
        scope.as_str()
    );
    Spi::connect_mut(|client| -> Result<(), DocstoreError> {
        let _owner = AsOwner::new(client)?;
        client.update("lock table docstore.entities in share mode", None, &[])?;
        client.update(
            "select pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0))",
            None,
            &[key.as_str().into()],
        )?;
        // A fresh snapshot (the transaction has an id now): sees an index committed by a
        // concurrent query that held the lock first.
        let existing = client.update(
            "select id, state from docstore.indexes where database_id = $1 \
             and collection_group = $2 and scope = $3 and fields = $4 and state <> 'DELETING'",
            Some(1),
            &[
                database.into(),
                collection_group.as_str().into(),
                scope.as_str().into(),
                TypedJsonb(canonical.clone()).into(),
            ],
        )?;
        let mut found: Option<(i32, String)> = None;
        for row in existing {
            let id = row.get::<i32>(1)?.unwrap_or_default();
            found = Some((id, row.get::<String>(2)?.unwrap_or_default()));
        }
        let id = match found {
            // READY: a concurrent query created it; NEEDS_REPAIR: a build that cannot
            // finish; the caller plans again (and reports the missing index for the latter).
            Some((_, state)) if state != "CREATING" => return Ok(()),
            // CREATING: defined, not yet built by the background builder; build it here.
            Some((id, _)) => id,
            None => crate::api::indexes::define(
                client,
                database,
                collection_group,
                *scope,
                TypedJsonb(canonical),
            )?,
        };
        while !crate::api::indexes::build_step(client, id, BATCH_SIZE)? {}
        Ok(())
    })
}

/// Why nothing may be created in this transaction, if so.
fn blocked() -> Option<AutoIndexBlock> {
    // SAFETY: reads backend-global state of the current transaction.
    let (read_only, recovery, isolation) = unsafe {
        (
            pg_sys::XactReadOnly,
            pg_sys::RecoveryInProgress(),
            pg_sys::XactIsoLevel,
        )
    };
    #[allow(clippy::cast_possible_wrap)]
    let repeatable_read = pg_sys::XACT_REPEATABLE_READ as core::ffi::c_int;
    if read_only || recovery {
        Some(AutoIndexBlock::ReadOnly)
    } else if isolation >= repeatable_read {
        Some(AutoIndexBlock::Snapshot)
    } else {
        None
    }
}
