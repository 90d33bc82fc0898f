//! Catalog facts the extension needs on every call, kept per backend: the OIDs of its tables
//! (by schema and name) and whether the current user is a client whose writes go through
//! rules ([`crate::pg::owner::caller_writes_as_client`]). Looking them up cost a few catalog
//! cache probes, an ACL check and a role-membership check per write.
//!
//! Exactness: each fact is a function of catalog rows that Postgres reads through its own
//! syscaches (`pg_namespace`, `pg_class`, `pg_authid`, `pg_auth_members`), and those caches
//! change only when this backend processes invalidation messages. Processing one calls the
//! callbacks registered for that syscache, and [`syscache_changed`] bumps a generation for
//! every syscache a fact depends on (and for a reset of all caches). Every use first takes the
//! invalidations other backends have committed (`AcceptInvalidationMessages`, as acquiring a
//! lock does), and a fact is used only under the generation it was computed at: it is what the
//! lookups it replaces would return at that moment.

use std::cell::{Cell, RefCell};

use pgrx::pg_sys;

thread_local! {
    /// Bumped whenever a syscache a fact depends on may have changed.
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    /// (generation, schema, table) -> OID; a handful of entries.
    static RELATIONS: RefCell<Vec<(u64, &'static core::ffi::CStr, &'static core::ffi::CStr, pg_sys::Oid)>> =
        const { RefCell::new(Vec::new()) };
    /// (generation, user, whether that user writes as a client).
    static CLIENT_WRITES: Cell<Option<(u64, pg_sys::Oid, bool)>> = const { Cell::new(None) };
}

/// The syscaches the facts are read from: names of schemas and tables, `relacl` and
/// `relowner`, roles (`rolsuper`, `rolinherit`, names) and memberships.
const WATCHED: [pg_sys::SysCacheIdentifier::Type; 8] = [
    pg_sys::SysCacheIdentifier::NAMESPACENAME,
    pg_sys::SysCacheIdentifier::NAMESPACEOID,
    pg_sys::SysCacheIdentifier::RELNAMENSP,
    pg_sys::SysCacheIdentifier::RELOID,
    pg_sys::SysCacheIdentifier::AUTHNAME,
    pg_sys::SysCacheIdentifier::AUTHOID,
    pg_sys::SysCacheIdentifier::AUTHMEMROLEMEM,
    pg_sys::SysCacheIdentifier::AUTHMEMMEMROLE,
];

/// Syscache invalidation callback: only touches a `Cell`, so it may run anywhere (inside any
/// Postgres call, including while a fact is being computed).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn syscache_changed(
    _arg: pg_sys::Datum,
    _cache: core::ffi::c_int,
    _hash: u32,
) {
    GENERATION.with(|g| g.set(g.get().wrapping_add(1)));
}

/// Register the callbacks (once, from `_PG_init`).
pub fn register() {
    for cache in WATCHED {
        // SAFETY: called once at library load; the callback is a plain function that lives as
        // long as the library, and Postgres allows 64 syscache callbacks per backend.
        unsafe {
            pg_sys::CacheRegisterSyscacheCallback(
                cache as core::ffi::c_int,
                Some(syscache_changed),
                pg_sys::Datum::from(0),
            );
        }
    }
}

/// The OID of table `schema.name`, `None` when the schema or the table does not exist.
pub fn relation(
    schema: &'static core::ffi::CStr,
    name: &'static core::ffi::CStr,
) -> Option<pg_sys::Oid> {
    accept_invalidations();
    let generation = GENERATION.with(Cell::get);
    let known = RELATIONS.with_borrow(|r| {
        r.iter()
            .find(|(g, s, n, _)| *g == generation && *s == schema && *n == name)
            .map(|(_, _, _, oid)| *oid)
    });
    if known.is_some() {
        return known;
    }
    // SAFETY: catalog lookups by name; a missing schema or table is InvalidOid (missing_ok).
    let relid = unsafe {
        let namespace = pg_sys::get_namespace_oid(schema.as_ptr(), true);
        if namespace == pg_sys::InvalidOid {
            return None;
        }
        pg_sys::get_relname_relid(name.as_ptr(), namespace)
    };
    if relid == pg_sys::InvalidOid {
        return None;
    }
    // Stored under the generation read before the lookups: an invalidation during them leaves
    // the entry stale, so the next call looks up again.
    RELATIONS.with_borrow_mut(|r| {
        r.retain(|(g, s, n, _)| *g == generation && !(*s == schema && *n == name));
        r.push((generation, schema, name, relid));
    });
    Some(relid)
}

/// `compute(user)` for the current user, remembered per user until a watched syscache changes.
pub fn client_writes(compute: impl FnOnce(pg_sys::Oid) -> bool) -> bool {
    // SAFETY: reads the current user of this backend.
    let user = unsafe { pg_sys::GetUserId() };
    accept_invalidations();
    let generation = GENERATION.with(Cell::get);
    if let Some((g, u, writes)) = CLIENT_WRITES.with(Cell::get) {
        if g == generation && u == user {
            return writes;
        }
    }
    let writes = compute(user);
    CLIENT_WRITES.with(|c| c.set(Some((generation, user, writes))));
    writes
}

fn accept_invalidations() {
    // SAFETY: processes the invalidations other backends have committed, as taking a lock
    // does; runs syscache and relcache callbacks, ours only touch `Cell`s.
    unsafe { pg_sys::AcceptInvalidationMessages() };
}
