//! A per-backend cache of each collection group's index configuration, so a write does not
//! query the catalog. Invalidation rides on Postgres' relcache invalidation: every function
//! that changes the catalog calls [`invalidate`] (sent to all backends at commit, applied by
//! each at its next transaction start or lock acquisition), and a relcache callback bumps a
//! generation counter that makes cached entries stale. The callback only touches a `Cell`, so
//! it can fire anywhere (even inside our own SPI calls) without re-entrancy problems.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use pgrx::pg_sys;
use pgrx::spi::SpiClient;

use docstore_core::index::IndexConfig;

use crate::errors::DocstoreError;

thread_local! {
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    static CATALOG_OID: Cell<pg_sys::Oid> = const { Cell::new(pg_sys::InvalidOid) };
    static CONFIGS: RefCell<HashMap<(String, String), (u64, IndexConfig)>> = RefCell::new(HashMap::new());
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn on_relcache(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    if relid == pg_sys::InvalidOid || relid == CATALOG_OID.with(Cell::get) {
        GENERATION.with(|g| g.set(g.get().wrapping_add(1)));
    }
}

/// Register the relcache callback (once, from `_PG_init`).
pub fn register() {
    // SAFETY: called once at library load in a backend; the callback is a plain function that
    // lives as long as the library.
    unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(on_relcache), pg_sys::Datum::from(0)) };
}

fn catalog_oid(client: &SpiClient<'_>) -> Result<pg_sys::Oid, DocstoreError> {
    let oid = client
        .select(
            "select 'docstore.indexes'::pg_catalog.regclass::pg_catalog.oid",
            Some(1),
            &[],
        )?
        .first()
        .get_one::<pg_sys::Oid>()?
        .ok_or_else(|| DocstoreError::Internal("docstore.indexes is missing".into()))?;
    Ok(oid)
}

/// Tell every backend (at commit) that the index catalog changed.
pub fn invalidate(client: &SpiClient<'_>) -> Result<(), DocstoreError> {
    let oid = catalog_oid(client)?;
    // SAFETY: registers a transactional invalidation message for an existing relation.
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(oid) };
    Ok(())
}

/// The cached configuration of (database, collection group), loading it with `load` when
/// missing or stale.
pub fn get_or_load(
    client: &mut SpiClient<'_>,
    database: &str,
    group: &str,
    load: impl FnOnce(&mut SpiClient<'_>) -> Result<IndexConfig, DocstoreError>,
) -> Result<IndexConfig, DocstoreError> {
    let key = (database.to_owned(), group.to_owned());
    let generation = GENERATION.with(Cell::get);
    let cached = CONFIGS.with(|c| {
        c.borrow()
            .get(&key)
            .filter(|(g, _)| *g == generation)
            .map(|(_, cfg)| cfg.clone())
    });
    if let Some(config) = cached {
        return Ok(config);
    }
    CATALOG_OID.with(|c| c.set(pg_sys::InvalidOid));
    let oid = catalog_oid(client)?;
    let config = load(client)?;
    CATALOG_OID.with(|c| c.set(oid));
    // An invalidation that arrived while loading makes this load stale: store it under the
    // generation seen before loading, so the next call reloads.
    CONFIGS.with(|c| c.borrow_mut().insert(key, (generation, config.clone())));
    Ok(config)
}

/// The current catalog generation (changes whenever the index catalog may have changed).
pub fn generation() -> u64 {
    GENERATION.with(Cell::get)
}

/// Make sure invalidations of the catalog table reach [`generation`] (the callback matches
/// the table's oid, learnt on first use).
pub fn watch_catalog(client: &SpiClient<'_>) -> Result<(), DocstoreError> {
    if CATALOG_OID.with(Cell::get) == pg_sys::InvalidOid {
        let oid = catalog_oid(client)?;
        CATALOG_OID.with(|c| c.set(oid));
    }
    Ok(())
}
