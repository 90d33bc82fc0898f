//! The compiled rulesets of this backend, one per database id, kept across statements and
//! transactions and thrown away when `docstore.rules` changes.
//!
//! A client's write, read or query needs its database's ruleset; reading `docstore.rules`
//! through SPI and comparing the stored source on every call cost about as much as the rest
//! of the rules check (BENCHMARKS.md, "Security rules in the extension"). Instead:
//! - the trigger of `docstore.rules` (`docstore.rules_install`, after every statement that
//!   changes it) queues a relcache invalidation of the table ([`changed`]). Postgres delivers
//!   it like its own catalog invalidations: to this backend at the next command of the
//!   changing transaction and again when that transaction (or savepoint) rolls back, to every
//!   other backend once the transaction has committed;
//! - a relcache callback registered here bumps a generation counter when it sees one (or a
//!   reset of all caches, after an invalidation queue overflow). A cached entry is good while
//!   the generation it was read at is current;
//! - every lookup first takes the invalidations other backends have committed
//!   (`AcceptInvalidationMessages`, as a lock acquisition does), so a committed change takes
//!   effect at this backend's next statement, also inside a transaction;
//! - a miss reads the row with the latest snapshot (as Postgres reads its catalogs), not the
//!   transaction's: an invalidation is sent after its transaction's commit became visible, so a
//!   snapshot taken after the invalidation was taken sees the change. Reading with an older
//!   snapshot (a REPEATABLE READ transaction's) could put the old ruleset back in the cache
//!   under the new generation, where it would stay after that transaction ended.
//!
//! A database `docstore.databases` does not list has no rules here, whatever `docstore.rules`
//! holds for it (its clients are denied, docs/rules.md): the same read checks its row there.
//! `docstore.databases` has a trigger like `docstore.rules`' (sql/rules.sql), so creating or
//! dropping a database invalidates the entries too.
//!
//! Rules are therefore not part of a transaction's snapshot: a REPEATABLE READ transaction sees
//! a committed `set_rules` from its next statement on, as every other transaction does. A
//! change that bypasses the trigger (`session_replication_role = replica`, a disabled trigger)
//! does not regenerate the row-level-security policy either; backends that cached the old
//! ruleset keep it until the next change of `docstore.rules` or their end.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use pgrx::{pg_sys, FromDatum, IntoDatum};

use docstore_rules::Ruleset;

use crate::errors::DocstoreError;

/// One database's entry: the generation it was read at, the stored source (`None`: no rules,
/// or the database is not listed) and its ruleset.
struct Entry {
    generation: u64,
    source: Option<String>,
    ruleset: Option<Rc<Ruleset>>,
}

thread_local! {
    /// Bumped by [`relcache_changed`] for `docstore.rules` (and for a reset of all caches).
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    /// The OID of `docstore.rules` the cache holds entries of.
    static RELID: Cell<pg_sys::Oid> = const { Cell::new(pg_sys::InvalidOid) };
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
    static ENTRIES: RefCell<HashMap<String, Entry>> = RefCell::new(HashMap::new());
}

/// Relcache invalidation callback: never allocates, raises or borrows the entries (it may run
/// inside any Postgres call, including while [`ruleset`] holds them).
unsafe extern "C-unwind" fn relcache_changed(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    if relid == pg_sys::InvalidOid || relid == RELID.with(Cell::get) {
        GENERATION.with(|g| g.set(g.get().wrapping_add(1)));
    }
}

/// The OID of `docstore.rules`, or `InvalidOid` when this database's extension SQL has none.
fn rules_relid() -> pg_sys::Oid {
    crate::pg::names::relation(c"docstore", c"rules").unwrap_or(pg_sys::InvalidOid)
}

/// Queue the invalidation that tells every backend (this one at its next command) that
/// `docstore.rules` changed. Called by the table's trigger function.
pub fn changed() {
    let relid = rules_relid();
    if relid != pg_sys::InvalidOid {
        // SAFETY: an existing relation's OID; the invalidation is transactional (discarded for
        // other backends if the transaction rolls back).
        unsafe { pg_sys::CacheInvalidateRelcacheByRelid(relid) };
    }
}

/// The ruleset of `database` (`None`: no rules, a database `docstore.databases` does not list,
/// or no `docstore.rules` table), compiled at most
/// once per change of `docstore.rules`. `compile` turns a stored source into a ruleset.
///
/// # Errors
/// What `compile` reports for a stored source that no longer compiles (not cached).
pub fn ruleset(
    database: &str,
    compile: impl FnOnce(&str) -> Result<Ruleset, DocstoreError>,
) -> Result<Option<Rc<Ruleset>>, DocstoreError> {
    // SAFETY: processes the invalidations other backends have committed, as taking a lock
    // does; may run our callback, nothing else of ours.
    unsafe { pg_sys::AcceptInvalidationMessages() };
    let relid = rules_relid();
    if relid == pg_sys::InvalidOid {
        return Ok(None);
    }
    if !REGISTERED.with(Cell::get) {
        // SAFETY: registers a callback that only touches this module's thread-locals; done
        // once per backend (Postgres allows a fixed number of relcache callbacks).
        unsafe {
            pg_sys::CacheRegisterRelcacheCallback(Some(relcache_changed), pg_sys::Datum::from(0))
        };
        REGISTERED.with(|r| r.set(true));
    }
    if RELID.with(Cell::get) != relid {
        // The extension was (re)created since the entries were read: none of them holds.
        RELID.with(|r| r.set(relid));
        GENERATION.with(|g| g.set(g.get().wrapping_add(1)));
    }
    let generation = GENERATION.with(Cell::get);
    let cached = ENTRIES.with(|e| {
        e.borrow()
            .get(database)
            .filter(|entry| entry.generation == generation)
            .map(|entry| entry.ruleset.clone())
    });
    if let Some(ruleset) = cached {
        return Ok(ruleset);
    }
    let databases = crate::pg::names::relation(c"docstore", c"databases")
        .ok_or_else(|| DocstoreError::Internal("docstore.databases is missing".into()))?;
    // SAFETY: reads a transaction-consistent state of tables we just looked up.
    let (source, latest) = unsafe { read_source(relid, databases, database)? };
    let known = ENTRIES.with(|e| {
        e.borrow()
            .get(database)
            .filter(|entry| entry.source == source)
            .map(|entry| entry.ruleset.clone())
    });
    let ruleset = match (known, &source) {
        (Some(ruleset), _) => ruleset,
        (None, None) => None,
        (None, Some(text)) => Some(Rc::new(compile(text)?)),
    };
    // A read with an older snapshot (in parallel mode) is used once, never cached. The
    // generation read before the scan: an invalidation that arrived during it leaves the entry
    // stale, so the next call reads again.
    if latest {
        ENTRIES.with(|e| {
            e.borrow_mut().insert(
                database.to_owned(),
                Entry {
                    generation,
                    source,
                    ruleset: ruleset.clone(),
                },
            )
        });
    }
    Ok(ruleset)
}

/// The stored source of `database`'s rules (`None` too when `docstore.databases` does not list
/// it), read by primary key with the latest snapshot (`true`), or in parallel mode, where no new
/// snapshot may be taken, with the active one (`false`).
///
/// # Safety
/// `rules` is `docstore.rules` (database_id text, source text, ...) and `databases` is
/// `docstore.databases` (id text, ...), in a running transaction.
unsafe fn read_source(
    rules: pg_sys::Oid,
    databases: pg_sys::Oid,
    database: &str,
) -> Result<(Option<String>, bool), DocstoreError> {
    // SAFETY: the snapshot is registered for the scans' duration. Postgres errors unwind
    // through here as Rust panics that pgrx turns back into errors, and the transaction's
    // abort releases the relations, scans and snapshot.
    unsafe {
        let latest = !pg_sys::IsInParallelMode();
        let snapshot = if latest {
            pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot())
        } else {
            pg_sys::RegisterSnapshot(pg_sys::GetActiveSnapshot())
        };
        let listed = read_text(databases, database, snapshot, 1)?.is_some();
        let source = if listed {
            read_text(rules, database, snapshot, 2)?.flatten()
        } else {
            None
        };
        pg_sys::UnregisterSnapshot(snapshot);
        Ok((source, latest))
    }
}

/// Column `column` (text) of the row of `relid` whose first column (its primary key) is
/// `key`: `None` without such a row, `Some(None)` for a NULL.
///
/// # Safety
/// `relid` is a table whose first column is a text primary key and whose column `column` is
/// text; `snapshot` is registered; a transaction is running.
unsafe fn read_text(
    relid: pg_sys::Oid,
    key: &str,
    snapshot: pg_sys::Snapshot,
    column: i32,
) -> Result<Option<Option<String>>, DocstoreError> {
    let key_datum = key
        .into_datum()
        .ok_or_else(|| DocstoreError::Internal("database id is NULL".into()))?;
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    // SAFETY: the relation is opened and locked for the scan and closed after it; the tuple
    // is read before the scan ends.
    unsafe {
        let rel = pg_sys::table_open(relid, lock);
        let mut scan_key: pg_sys::ScanKeyData = core::mem::zeroed();
        pg_sys::ScanKeyInit(
            &mut scan_key,
            1,
            pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
            pg_sys::Oid::from(pg_sys::F_TEXTEQ),
            key_datum,
        );
        let index = pg_sys::RelationGetPrimaryKeyIndex(rel);
        let scan = pg_sys::systable_beginscan(
            rel,
            index,
            index != pg_sys::InvalidOid,
            snapshot,
            1,
            &mut scan_key,
        );
        let tuple = pg_sys::systable_getnext(scan);
        let value = if tuple.is_null() {
            None
        } else {
            let mut is_null = false;
            let datum = pg_sys::heap_getattr(tuple, column, (*rel).rd_att, &mut is_null);
            Some(String::from_datum(datum, is_null))
        };
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, lock);
        Ok(value)
    }
}
