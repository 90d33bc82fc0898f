//! SPI with cached plans: every statement the extension runs is prepared once per backend and
//! kept (`SPI_keepplan`), so a write costs executions, not parses and plans.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiResult};
use pgrx::PgOid;

thread_local! {
    static PLANS: RefCell<HashMap<&'static str, Rc<OwnedPreparedStatement>>> = RefCell::new(HashMap::new());
}

/// A prepared statement for `sql` (prepared on first use with argument types `types`).
/// The cache is not borrowed while the statement runs, so nested SPI use is safe.
///
/// # Errors
/// What `SPI_prepare` reports (a bug in our SQL, or a dropped table).
pub fn plan(
    client: &SpiClient<'_>,
    sql: &'static str,
    types: &[PgOid],
) -> SpiResult<Rc<OwnedPreparedStatement>> {
    if let Some(plan) = PLANS.with(|plans| plans.borrow().get(sql).cloned()) {
        return Ok(plan);
    }
    let plan = Rc::new(client.prepare_mut(sql, types)?.keep());
    PLANS.with(|plans| plans.borrow_mut().insert(sql, plan.clone()));
    Ok(plan)
}

/// While alive, kept plans run as generic plans, and never as sequential scans.
///
/// Every statement we run is a kept plan with bound parameters whose generic plan is the right
/// one (primary-key and key-range index scans). In the default `plan_cache_mode` Postgres keeps
/// re-planning them as custom plans, because array parameters make the generic plan's estimate
/// look costlier; that measured 40% of a write's CPU (BENCHMARKS.md). A function-level
/// `SET plan_cache_mode` did not take effect for SPI plans in our measurements, so the setting
/// is switched around our own statements only and restored on drop, which also runs when a
/// Postgres error unwinds through us. The caller's own queries are never affected.
///
/// A generic plan is built once and kept; one built while the tables were empty and had no
/// statistics could be a sequential scan forever (measured: 5x slower writes until ANALYZE).
/// Every statement we run is designed for a plain btree index scan with its full key
/// condition, so sequential and bitmap scans are turned off for them (without statistics the
/// generic plan of `key = any($keys)` was a bitmap scan on `database_id` alone: every entry).
pub struct GenericPlans {
    previous: core::ffi::c_int,
    previous_seqscan: bool,
    previous_bitmapscan: bool,
}

impl GenericPlans {
    pub fn new() -> Self {
        // SAFETY: a plain int GUC variable of this backend, read and written on its only thread.
        let previous = unsafe { pgrx::pg_sys::plan_cache_mode };
        // SAFETY: as above; FORCE_GENERIC_PLAN is a valid value of the enum.
        unsafe {
            pgrx::pg_sys::plan_cache_mode =
                pgrx::pg_sys::PlanCacheMode::PLAN_CACHE_MODE_FORCE_GENERIC_PLAN as core::ffi::c_int
        };
        // SAFETY: a plain bool GUC variable of this backend.
        let previous_seqscan = unsafe { pgrx::pg_sys::enable_seqscan };
        // SAFETY: a plain bool GUC variable of this backend.
        let previous_bitmapscan = unsafe { pgrx::pg_sys::enable_bitmapscan };
        // SAFETY: as above.
        unsafe {
            pgrx::pg_sys::enable_seqscan = false;
            pgrx::pg_sys::enable_bitmapscan = false;
        }
        GenericPlans {
            previous,
            previous_seqscan,
            previous_bitmapscan,
        }
    }
}

impl Drop for GenericPlans {
    fn drop(&mut self) {
        // SAFETY: restores the values read in `new`.
        unsafe {
            pgrx::pg_sys::plan_cache_mode = self.previous;
            pgrx::pg_sys::enable_seqscan = self.previous_seqscan;
            pgrx::pg_sys::enable_bitmapscan = self.previous_bitmapscan;
        }
    }
}
