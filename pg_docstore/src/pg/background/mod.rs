//! Index builds in the background (docs/storage.md, "Index builds"): pending builds and drops
//! (indexes in state CREATING or DELETING) run by themselves, without `CALL
//! docstore.build_indexes()`.
//!
//! - [`launcher`]: one worker started by the postmaster (the library must be in
//!   `shared_preload_libraries`). It keeps a list of databases to look at and starts a
//!   [`worker`] for each, at most [`MAX_WORKERS`] at a time: every database at start-up and every
//!   [`SWEEP`] (so a build stopped by a crash, a cancel or a restore resumes), and all again soon
//!   after a transaction that created or dropped an index commits ([`request`]).
//! - [`worker`]: connects to one database; when pg_docstore is installed there and
//!   `docstore.auto_build_indexes` is on, it runs the pending builds as `build_indexes` does
//!   (one committed batch at a time, resumable), then exits, so it never holds a database that
//!   someone wants to drop.
//!
//! Loaded without `shared_preload_libraries` (a plain `LOAD`, a throwaway cluster) nothing runs
//! in the background and `CALL docstore.build_indexes()` is the way to build.

mod cluster;
pub mod launcher;
pub mod worker;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::{pg_guard, pg_shmem_init, pg_sys, PgAtomic, PgXactCallbackEvent};

/// How many database workers run at once.
pub const MAX_WORKERS: usize = 2;
/// How often every database is looked at even when no index change was seen.
pub const SWEEP: Duration = Duration::from_secs(60);
/// How often the launcher looks for requests.
pub const POLL: Duration = Duration::from_millis(250);
/// Rows per build step (as `build_indexes`' default batch size).
pub const BATCH_SIZE: i32 = 1000;

/// Bumped after each commit of a transaction that changed the index catalog.
// SAFETY: the name is this extension's own; no other shared memory segment uses it.
static REQUESTS: PgAtomic<AtomicU64> = unsafe { PgAtomic::new(c"docstore_build_requests") };

/// Whether this process inherited the shared memory above (the library was preloaded).
static PRELOADED: AtomicBool = AtomicBool::new(false);

/// From `_PG_init`: when the library is being preloaded, reserve the shared counter and
/// register the launcher. Otherwise nothing.
// pg_shmem_init! tests pgrx's own pgNN features, which this crate does not declare.
#[allow(unexpected_cfgs)]
pub fn init() {
    // SAFETY: reads a flag the postmaster sets while it loads shared_preload_libraries.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        return;
    }
    pg_shmem_init!(REQUESTS);
    PRELOADED.store(true, Ordering::Relaxed);
    BackgroundWorkerBuilder::new("docstore index build launcher")
        .set_type("docstore index build launcher")
        .set_library("pg_docstore")
        .set_function("docstore_build_launcher")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(5)))
        .load();
}

/// The current request count (0 when the library was not preloaded).
pub fn requests() -> u64 {
    if PRELOADED.load(Ordering::Relaxed) {
        REQUESTS.get().load(Ordering::Acquire)
    } else {
        0
    }
}

/// Ask the launcher to look at the databases again once this transaction has committed (so
/// the worker it starts sees the index change). Nothing when the library was not preloaded.
pub fn request() {
    if !PRELOADED.load(Ordering::Relaxed) {
        return;
    }
    pgrx::register_xact_callback(PgXactCallbackEvent::Commit, || {
        REQUESTS.get().fetch_add(1, Ordering::AcqRel);
    });
}
