//! A database's worker: purges the expired document versions of one database (docs/storage.md,
//! "Version history"), runs its pending index builds and drops, then exits.

use pgrx::bgworkers::{BackgroundWorker, SignalWakeFlags};
use pgrx::prelude::*;

use super::BATCH_SIZE;

/// Main function of a database worker; `arg` is the database's OID.
#[pg_guard]
#[no_mangle]
pub extern "C-unwind" fn docstore_build_worker(arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGTERM);
    // SAFETY: the launcher passed an OID by value.
    let Some(db) = (unsafe { pg_sys::Oid::from_datum(arg, false) }) else {
        return;
    };
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(db), None);
    let installed = BackgroundWorker::transaction(|| {
        Spi::get_one::<bool>(
            "select exists (select from pg_catalog.pg_extension where extname = 'pg_docstore')",
        )
    });
    if !matches!(installed, Ok(Some(true))) {
        return;
    }
    purge_versions();
    let enabled = BackgroundWorker::transaction(|| {
        Spi::get_one::<bool>(
            "select pg_catalog.current_setting('docstore.auto_build_indexes')::pg_catalog.bool",
        )
    });
    if !matches!(enabled, Ok(Some(true))) {
        return;
    }
    while !BackgroundWorker::sigterm_received() {
        let next = BackgroundWorker::transaction(|| {
            Spi::get_one::<i32>(
                "select id from docstore.indexes where state in ('CREATING', 'DELETING') \
                 order by id limit 1",
            )
        });
        let Ok(Some(index)) = next else {
            return;
        };
        // Transactions that began before this build may have read the catalog without the
        // index and would not maintain it: as build_indexes, wait for them first.
        let waited = BackgroundWorker::transaction(|| {
            Spi::run("select docstore.wait_for_older_transactions(clock_timestamp())")
        });
        if let Err(e) = waited {
            // The launcher's next sweep starts another worker.
            pgrx::warning!("docstore index builder: {e}");
            return;
        }
        loop {
            if BackgroundWorker::sigterm_received() {
                return;
            }
            let done = BackgroundWorker::transaction(|| {
                Spi::get_one_with_args::<bool>(
                    "select docstore.index_build_step($1, $2)",
                    &[index.into(), BATCH_SIZE.into()],
                )
            });
            match done {
                Ok(Some(false)) => continue,
                Ok(_) => break,
                Err(e) => {
                    pgrx::warning!("docstore index builder: index {index}: {e}");
                    return;
                }
            }
        }
    }
}

/// Delete the versions past their retention, one bounded batch per transaction, until a batch
/// finds fewer than a whole one (the launcher starts a worker per database every
/// [`super::SWEEP`]). A database whose extension predates the history has no
/// `purge_versions`: nothing to do.
fn purge_versions() {
    let exists = BackgroundWorker::transaction(|| {
        Spi::get_one::<bool>(
            "select pg_catalog.to_regprocedure('docstore.purge_versions(bigint)') is not null",
        )
    });
    if !matches!(exists, Ok(Some(true))) {
        return;
    }
    while !BackgroundWorker::sigterm_received() {
        let purged = BackgroundWorker::transaction(|| {
            Spi::get_one_with_args::<i64>(
                "select docstore.purge_versions($1)",
                &[PURGE_BATCH.into()],
            )
        });
        match purged {
            Ok(Some(n)) if n >= PURGE_BATCH => continue,
            Ok(_) => return,
            Err(e) => {
                pgrx::warning!("docstore version purge: {e}");
                return;
            }
        }
    }
}

/// The most versions of one database a purge transaction deletes.
const PURGE_BATCH: i64 = 10_000;
