//! The launcher: picks the databases to look at and starts one [`super::worker`] per database.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BackgroundWorkerStatus, DynamicBackgroundWorker,
    SignalWakeFlags,
};
use pgrx::prelude::*;

use super::cluster::connectable_databases;
use super::{requests, MAX_WORKERS, POLL, SWEEP};

/// Main function of the launcher (registered by [`super::init`]).
#[pg_guard]
#[no_mangle]
pub extern "C-unwind" fn docstore_build_launcher(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGTERM);
    // No database: the launcher only reads the shared catalog pg_database.
    BackgroundWorker::connect_worker_to_spi(None, None);
    let mut seen = requests();
    // Database OIDs as u32 (pg_sys::Oid has no order).
    let mut pending: BTreeSet<u32> = BackgroundWorker::transaction(connectable_databases)
        .into_iter()
        .map(pg_sys::Oid::to_u32)
        .collect();
    let mut last_sweep = Instant::now();
    let mut running: HashMap<u32, DynamicBackgroundWorker> = HashMap::new();
    while BackgroundWorker::wait_latch(Some(POLL)) {
        let now = requests();
        if now != seen || last_sweep.elapsed() >= SWEEP {
            seen = now;
            last_sweep = Instant::now();
            pending.extend(
                BackgroundWorker::transaction(connectable_databases)
                    .into_iter()
                    .map(pg_sys::Oid::to_u32),
            );
        }
        running.retain(|_, worker| {
            matches!(
                worker.pid(),
                Ok(_) | Err(BackgroundWorkerStatus::NotYetStarted)
            )
        });
        // A database whose worker is still running stays pending: that worker may have looked
        // before the change, so another one follows it.
        let startable: Vec<u32> = pending
            .iter()
            .copied()
            .filter(|db| !running.contains_key(db))
            .take(MAX_WORKERS.saturating_sub(running.len()))
            .collect();
        for db in startable {
            match start_worker(db) {
                Some(worker) => {
                    pending.remove(&db);
                    running.insert(db, worker);
                }
                // No free worker slot (max_worker_processes): try again at the next poll.
                None => break,
            }
        }
    }
}

fn start_worker(db: u32) -> Option<DynamicBackgroundWorker> {
    BackgroundWorkerBuilder::new("docstore index builder")
        .set_type("docstore index builder")
        .set_library("pg_docstore")
        .set_function("docstore_build_worker")
        .set_argument(pg_sys::Oid::from(db).into_datum())
        .enable_spi_access()
        .set_restart_time(None)
        // SAFETY: reads this process's pid.
        .set_notify_pid(unsafe { pg_sys::MyProcPid })
        .load_dynamic()
        .ok()
}
