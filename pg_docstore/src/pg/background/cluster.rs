//! Cluster-wide catalog reads for the background launcher, which is connected to no database.

use pgrx::pg_sys;

/// The OIDs of the databases that accept connections and are not templates (read from the
/// shared catalog `pg_database`, as the autovacuum launcher does). Call inside a transaction.
pub fn connectable_databases() -> Vec<pg_sys::Oid> {
    let mut out = Vec::new();
    // SAFETY: inside a transaction (the caller's); pg_database is a shared heap catalog that
    // any backend may scan; each tuple's struct is read before the next heap_getnext, and the
    // scan and relation are closed before returning.
    unsafe {
        let rel = pg_sys::table_open(
            pg_sys::DatabaseRelationId,
            pg_sys::AccessShareLock as pg_sys::LOCKMODE,
        );
        let scan = pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            let db = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(tuple);
            if (*db).datallowconn && !(*db).datistemplate {
                out.push((*db).oid);
            }
        }
        pg_sys::heap_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    }
    out
}
