//! The commit clock (docs/storage.md, "Commit times"): the time a docstore write takes, from
//! the clock at the write, the documents it writes and, when the library is preloaded, the
//! last time assigned on this instance (a shared-memory atomic). The combination itself is
//! [`docstore_core::commit_time`]; this is its glue.
//!
//! The first write call of a transaction takes a time; later write calls of the same
//! transaction use it again (a document whose own time is at or past it gets its time + 1 µs),
//! so the documents of one atomic commit share one time.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use docstore_core::commit_time::{commit_time, within_transaction};
use pgrx::{pg_guard, pg_shmem_init, pg_sys, PgAtomic};

/// The last commit time assigned on this instance, in Postgres microseconds (0 at start-up).
// SAFETY: the name is this extension's own; no other shared memory segment uses it.
static LAST: PgAtomic<AtomicI64> = unsafe { PgAtomic::new(c"docstore_last_commit_time") };

/// Whether this process inherited [`LAST`] (the library was preloaded).
static PRELOADED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The time the current transaction took: (its local transaction id, its start time,
    /// the time). Both keys must match, so a time never leaks into another transaction.
    static TAKEN: Cell<Option<(u32, i64, i64)>> = const { Cell::new(None) };
}

/// From `_PG_init`: reserve the shared record when the library is being preloaded.
// pg_shmem_init! tests pgrx's own pgNN features, which this crate does not declare.
#[allow(unexpected_cfgs)]
pub fn init() {
    // SAFETY: reads a flag the postmaster sets while it loads shared_preload_libraries.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        return;
    }
    pg_shmem_init!(LAST);
    PRELOADED.store(true, Ordering::Relaxed);
}

/// The current transaction's identity: its local id and start time.
fn transaction() -> (u32, i64) {
    // SAFETY: MyProc is this backend's own PGPROC, set for every backend that runs SQL; the
    // start time is a field of the current transaction state, valid inside a call.
    unsafe {
        let lxid = pg_sys::MyProc.as_ref().map_or(0, |p| p.lxid);
        (lxid, pg_sys::GetCurrentTransactionStartTimestamp())
    }
}

/// The time of a write call that writes documents whose newest update time is `latest`
/// (`i64::MIN` when none exists), in Postgres microseconds.
pub fn take(latest: i64) -> i64 {
    let (lxid, start) = transaction();
    if let Some((l, s, taken)) = TAKEN.get() {
        if l == lxid && s == start {
            let time = within_transaction(taken, latest);
            if time > taken && PRELOADED.load(Ordering::Relaxed) {
                // A time moved past a document counts as assigned too.
                LAST.get().fetch_max(time, Ordering::AcqRel);
            }
            return time;
        }
    }
    let time = fresh(latest);
    TAKEN.set(Some((lxid, start, time)));
    time
}

/// A new time: the clock now, after `latest` and after the last time assigned here.
fn fresh(latest: i64) -> i64 {
    // SAFETY: reads the system clock.
    let clock = unsafe { pg_sys::GetCurrentTimestamp() };
    if !PRELOADED.load(Ordering::Relaxed) {
        return commit_time(clock, latest, i64::MIN);
    }
    let last = LAST.get();
    let mut seen = last.load(Ordering::Acquire);
    loop {
        let time = commit_time(clock, latest, seen);
        match last.compare_exchange_weak(seen, time, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return time,
            Err(now) => seen = now,
        }
    }
}

/// The newest commit time this instance knows, in Postgres microseconds: the last time
/// assigned since the server started or, when none was, the server's start time (every
/// earlier commit took a time from the clock before it). `None` when the library is not
/// preloaded (no shared record: the newest time is not known).
pub fn latest() -> Option<i64> {
    if !PRELOADED.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: PgStartTime is set by the postmaster before any backend runs and never changes.
    let started = unsafe { pg_sys::PgStartTime };
    Some(LAST.get().load(Ordering::Acquire).max(started))
}
