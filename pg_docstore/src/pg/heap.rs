//! Rows written below the executor: `heap_multi_insert` plus the table's index inserts, and
//! deletes by primary key. Used for `docstore.index_entries`, which is derived data the
//! extension maintains for a document write that already passed the caller's rights and
//! row-level security on `docstore.entities` (so, like an index, it needs no rights of its own),
//! and for a new document's `entities` row when [`Table::allows_direct_insert`] says an
//! `INSERT` would check nothing more.
//!
//! Compared with an `INSERT ... SELECT unnest(...)` through SPI this skips parsing-free but
//! still costly work per write: executor start-up of the statement, a projection and an
//! `ExecInsert` per row, and one heap WAL record per row (a multi-insert logs one per page).
//! What the executor would do for us and matters here is done the same way: the same heap
//! and index AM calls, unique checks, serializable conflict checks (inside those calls), and a
//! command-counter increment so later statements of the transaction see the rows.

use pgrx::{pg_sys, IntoDatum};

use crate::errors::DocstoreError;

/// A column value for [`Table::insert`] or a key for [`Table::delete_by_primary_key`].
///
/// # Errors
/// [`DocstoreError::Internal`] for a value that becomes SQL NULL (our columns are NOT NULL).
pub fn column(value: impl IntoDatum) -> Result<pg_sys::Datum, DocstoreError> {
    value
        .into_datum()
        .ok_or_else(|| DocstoreError::Internal("a NOT NULL column would be NULL".into()))
}

/// An open table with its indexes, locked `ROW EXCLUSIVE` until the end of the transaction
/// (as `INSERT`/`DELETE` lock it).
pub struct Table {
    rel: pg_sys::Relation,
    indexes: Vec<(pg_sys::Relation, *mut pg_sys::IndexInfo)>,
}

impl Table {
    /// Open `schema.name`.
    ///
    /// # Errors
    /// [`DocstoreError::Internal`] when the table is missing or has an index this module cannot
    /// maintain (an expression, a partial, an exclusion or a deferred unique index): the
    /// extension's own tables have none.
    pub fn open(schema: &core::ffi::CStr, name: &core::ffi::CStr) -> Result<Table, DocstoreError> {
        Table::open_if_exists(schema, name)?.ok_or_else(|| {
            DocstoreError::Internal(format!(
                "table {}.{} is missing",
                schema.to_string_lossy(),
                name.to_string_lossy()
            ))
        })
    }

    /// [`Table::open`], or `None` when the table does not exist.
    ///
    /// # Errors
    /// As [`Table::open`].
    pub fn open_if_exists(
        schema: &core::ffi::CStr,
        name: &core::ffi::CStr,
    ) -> Result<Option<Table>, DocstoreError> {
        // SAFETY: catalog lookups by name; `get_namespace_oid(.., false)` raises a Postgres
        // ERROR for a missing schema; a missing table is InvalidOid, checked before opening.
        let relid = unsafe {
            let namespace = pg_sys::get_namespace_oid(schema.as_ptr(), false);
            pg_sys::get_relname_relid(name.as_ptr(), namespace)
        };
        if relid == pg_sys::InvalidOid {
            return Ok(None);
        }
        let lock = pg_sys::RowExclusiveLock as pg_sys::LOCKMODE;
        // SAFETY: an existing relation's OID; the lock is held to the end of the transaction.
        let rel = unsafe { pg_sys::table_open(relid, lock) };
        let mut table = Table {
            rel,
            indexes: Vec::new(),
        };
        // SAFETY: `rel` is open; the index list is a palloc'd OID list we free after reading.
        unsafe {
            let list = pg_sys::RelationGetIndexList(rel);
            let length = if list.is_null() { 0 } else { (*list).length };
            for i in 0..usize::try_from(length).unwrap_or(0) {
                let oid = (*(*list).elements.add(i)).oid_value;
                let index = pg_sys::index_open(oid, lock);
                let info = pg_sys::BuildIndexInfo(index);
                table.indexes.push((index, info));
                let plain = (*info).ii_Expressions.is_null()
                    && (*info).ii_Predicate.is_null()
                    && (*info).ii_ExclusionOps.is_null()
                    && (*(*index).rd_index).indimmediate;
                if !plain {
                    return Err(DocstoreError::Internal(format!(
                        "{}.{} has an index docstore cannot maintain (expression, partial, exclusion or deferred)",
                        schema.to_string_lossy(),
                        name.to_string_lossy()
                    )));
                }
            }
            pg_sys::list_free(list);
        }
        Ok(Some(table))
    }

    /// How many columns the table has (dropped ones included, as a row stores them).
    pub fn columns(&self) -> usize {
        // SAFETY: `rel` is open; its descriptor lives as long as the relation.
        usize::try_from(unsafe { (*(*self.rel).rd_att).natts }).unwrap_or(0)
    }

    /// Whether an insert below the executor does all an `INSERT` by the current user would:
    /// the transaction may write (not read-only, not parallel), the user holds `INSERT` on the
    /// whole table, and no row-level security, trigger or check constraint applies (those need
    /// the executor). Otherwise write through SQL, which raises the right error or applies them.
    pub fn allows_direct_insert(&self) -> bool {
        // SAFETY: `rel` is open; the checks read backend state, the catalog and the current user.
        unsafe {
            if pg_sys::XactReadOnly || pg_sys::IsInParallelMode() {
                return false;
            }
            let relid = (*self.rel).rd_id;
            let granted = pg_sys::pg_class_aclcheck(
                relid,
                pg_sys::GetUserId(),
                pg_sys::AclMode::from(pg_sys::ACL_INSERT),
            ) == pg_sys::AclResult::ACLCHECK_OK;
            let rls = pg_sys::check_enable_rls(relid, pg_sys::InvalidOid, true);
            // RLS_NONE_ENV: the table has row-level security, which this user bypasses
            // (superuser, owner, BYPASSRLS): no policy applies to the insert either.
            let no_rls = u32::try_from(rls).is_ok_and(|r| {
                r == pg_sys::CheckEnableRlsResult::RLS_NONE
                    || r == pg_sys::CheckEnableRlsResult::RLS_NONE_ENV
            });
            let constr = (*(*self.rel).rd_att).constr;
            let no_checks = constr.is_null() || (*constr).num_check == 0;
            granted && no_rls && (*self.rel).trigdesc.is_null() && no_checks
        }
    }

    /// Insert rows (one datum per column, in column order, none NULL) and their index
    /// entries. A duplicate in a unique index raises 23505 as an `INSERT` would.
    pub fn insert<const N: usize>(&self, rows: &[[pg_sys::Datum; N]]) -> Result<(), DocstoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        // SAFETY: `rel` is open and locked; the slots are made for its descriptor, hold N
        // columns (checked), and are dropped before returning; heap_multi_insert sets each
        // slot's tts_tid, which the index inserts then point at.
        unsafe {
            let desc = (*self.rel).rd_att;
            if usize::try_from((*desc).natts).ok() != Some(N) {
                return Err(DocstoreError::Internal(format!(
                    "expected {N} columns, the table has {}",
                    (*desc).natts
                )));
            }
            let mut slots: Vec<*mut pg_sys::TupleTableSlot> = Vec::with_capacity(rows.len());
            for row in rows {
                let slot = pg_sys::MakeSingleTupleTableSlot(desc, &pg_sys::TTSOpsVirtual);
                pg_sys::ExecClearTuple(slot);
                for (column, datum) in row.iter().enumerate() {
                    *(*slot).tts_values.add(column) = *datum;
                    *(*slot).tts_isnull.add(column) = false;
                }
                pg_sys::ExecStoreVirtualTuple(slot);
                slots.push(slot);
            }
            let count = core::ffi::c_int::try_from(slots.len())
                .map_err(|_| DocstoreError::Internal("too many rows for one insert".into()))?;
            pg_sys::heap_multi_insert(
                self.rel,
                slots.as_mut_ptr(),
                count,
                pg_sys::GetCurrentCommandId(true),
                0,
                std::ptr::null_mut(),
            );
            let mut values = [pg_sys::Datum::from(0usize); pg_sys::INDEX_MAX_KEYS as usize];
            let mut isnull = [false; pg_sys::INDEX_MAX_KEYS as usize];
            for &slot in &slots {
                for &(index, info) in &self.indexes {
                    if !(*info).ii_ReadyForInserts {
                        continue;
                    }
                    pg_sys::FormIndexDatum(
                        info,
                        slot,
                        std::ptr::null_mut(),
                        values.as_mut_ptr(),
                        isnull.as_mut_ptr(),
                    );
                    let check = if (*info).ii_Unique {
                        pg_sys::IndexUniqueCheck::UNIQUE_CHECK_YES
                    } else {
                        pg_sys::IndexUniqueCheck::UNIQUE_CHECK_NO
                    };
                    pg_sys::index_insert(
                        index,
                        values.as_mut_ptr(),
                        isnull.as_mut_ptr(),
                        &mut (*slot).tts_tid,
                        self.rel,
                        check,
                        false,
                        info,
                    );
                }
                pg_sys::ExecDropSingleTupleTableSlot(slot);
            }
            // Later commands of this transaction (and a delete of these rows) see them.
            pg_sys::CommandCounterIncrement();
        }
        Ok(())
    }

    /// Delete the rows whose primary keys are `keys` (datums in key column order; `columns`
    /// gives each key column's equality function and collation), those visible to a fresh
    /// snapshot; a key with no row is skipped. The caller holds a lock that keeps other
    /// writers off these rows. Returns how many rows were deleted.
    ///
    /// # Errors
    /// [`DocstoreError::Internal`] when the table has no primary key of `K` columns.
    pub fn delete_by_primary_key<const K: usize>(
        &self,
        columns: &[(pg_sys::RegProcedure, pg_sys::Oid); K],
        keys: &[[pg_sys::Datum; K]],
    ) -> Result<usize, DocstoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let mut deleted = 0;
        // SAFETY: `rel` is open and locked; the primary key index is one of `indexes` (opened
        // with the table); the snapshot is registered for the scan's life and unregistered
        // after; the slot is made for the table and dropped before returning.
        unsafe {
            let pk = pg_sys::RelationGetPrimaryKeyIndex(self.rel);
            let index = self
                .indexes
                .iter()
                .map(|(index, _)| *index)
                .find(|index| (**index).rd_id == pk)
                .filter(|index| usize::try_from((*(**index).rd_index).indnkeyatts) == Ok(K))
                .ok_or_else(|| DocstoreError::Internal("no primary key to delete by".into()))?;
            let nkeys = core::ffi::c_int::try_from(K).unwrap_or(0);
            // Our own rows from earlier commands, and the latest committed ones, are visible.
            pg_sys::CommandCounterIncrement();
            let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
            let scan = pg_sys::index_beginscan(self.rel, index, snapshot, nkeys, 0);
            let slot = pg_sys::table_slot_create(self.rel, std::ptr::null_mut());
            let mut scankeys = [pg_sys::ScanKeyData::default(); K];
            for key in keys {
                for (i, ((procedure, collation), datum)) in columns.iter().zip(key).enumerate() {
                    pg_sys::ScanKeyEntryInitialize(
                        &mut scankeys[i],
                        0,
                        pg_sys::AttrNumber::try_from(i + 1).unwrap_or(pg_sys::AttrNumber::MAX),
                        pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
                        pg_sys::InvalidOid,
                        *collation,
                        *procedure,
                        *datum,
                    );
                }
                pg_sys::index_rescan(scan, scankeys.as_mut_ptr(), nkeys, std::ptr::null_mut(), 0);
                if pg_sys::index_getnext_slot(
                    scan,
                    pg_sys::ScanDirection::ForwardScanDirection,
                    slot,
                ) {
                    pg_sys::simple_heap_delete(self.rel, &mut (*slot).tts_tid);
                    deleted += 1;
                }
            }
            pg_sys::ExecDropSingleTupleTableSlot(slot);
            pg_sys::index_endscan(scan);
            pg_sys::UnregisterSnapshot(snapshot);
            pg_sys::CommandCounterIncrement();
        }
        Ok(deleted)
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // While a Postgres error unwinds, leave the references to the transaction's abort
        // (its resource owner releases them); otherwise close, keeping the locks.
        if std::thread::panicking() {
            return;
        }
        // SAFETY: each relation was opened by `open` and is closed once.
        unsafe {
            for (index, _) in &self.indexes {
                pg_sys::index_close(*index, pg_sys::NoLock as pg_sys::LOCKMODE);
            }
            pg_sys::table_close(self.rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        }
    }
}

/// The OID of `schema.name`, to read it in the running statement.
///
/// # Errors
/// [`DocstoreError::Internal`] when the table is missing or there is no active snapshot.
fn relation_id(
    schema: &'static core::ffi::CStr,
    name: &'static core::ffi::CStr,
) -> Result<pg_sys::Oid, DocstoreError> {
    let relid = super::names::relation(schema, name).ok_or_else(|| {
        DocstoreError::Internal(format!(
            "table {}.{} is missing",
            schema.to_string_lossy(),
            name.to_string_lossy()
        ))
    })?;
    // SAFETY: checks the snapshot stack of this backend.
    if !unsafe { pg_sys::ActiveSnapshotSet() } {
        return Err(DocstoreError::Internal(
            "no active snapshot to read with".into(),
        ));
    }
    Ok(relid)
}

/// Column `column` of the row of `schema.name` whose primary key equals `keys` (each key
/// column's number, equality function and value, in the key's order), read below the
/// executor, and where that row version is (for [`row_still_holds`]): `None` when no such row
/// is visible. Visible means to the calling
/// statement's snapshot (the transaction's under REPEATABLE READ) with the transaction's own
/// changes up to now, what a read-only SPI query with the current command id would see. No
/// rights are checked and no row-level security applies: for the extension's own reads.
///
/// # Errors
/// [`DocstoreError::Internal`] when the table is missing or there is no active snapshot
/// (called outside a statement).
pub fn fetch_by_primary_key<T: pgrx::FromDatum>(
    schema: &'static core::ffi::CStr,
    name: &'static core::ffi::CStr,
    keys: &[(pg_sys::AttrNumber, pg_sys::RegProcedure, pg_sys::Datum)],
    column: pg_sys::AttrNumber,
) -> Result<Option<(T, RowAt)>, DocstoreError> {
    let relid = relation_id(schema, name)?;
    let nkeys = core::ffi::c_int::try_from(keys.len()).unwrap_or(0);
    let mut scankeys: Vec<pg_sys::ScanKeyData> = vec![pg_sys::ScanKeyData::default(); keys.len()];
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    // SAFETY: the relation is opened and locked for the scan and closed after it (its lock is
    // kept to the end of the transaction, as a query's); the copied snapshot is pushed for the
    // scan and popped after it; the tuple is read before the scan ends, and the value is
    // copied out of it by `T::from_datum` (detoasted varlenas included) before `endscan`.
    // A Postgres error unwinds through here; the transaction's abort then releases the scan,
    // the relation and the snapshot.
    unsafe {
        let rel = pg_sys::table_open(relid, lock);
        for (scankey, (attno, procedure, datum)) in scankeys.iter_mut().zip(keys) {
            // ScanKeyInit gives text keys the "C" collation, which is our columns'.
            pg_sys::ScanKeyInit(
                scankey,
                *attno,
                pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
                *procedure,
                *datum,
            );
        }
        pg_sys::PushCopiedSnapshot(pg_sys::GetActiveSnapshot());
        pg_sys::UpdateActiveSnapshotCommandId();
        let index = pg_sys::RelationGetPrimaryKeyIndex(rel);
        let scan = pg_sys::systable_beginscan(
            rel,
            index,
            index != pg_sys::InvalidOid,
            pg_sys::GetActiveSnapshot(),
            nkeys,
            scankeys.as_mut_ptr(),
        );
        let tuple = pg_sys::systable_getnext(scan);
        let value = if tuple.is_null() {
            None
        } else {
            let mut is_null = false;
            let datum = pg_sys::heap_getattr(tuple, i32::from(column), (*rel).rd_att, &mut is_null);
            T::from_datum(datum, is_null).map(|value| (value, RowAt::new(rel, (*tuple).t_self)))
        };
        pg_sys::systable_endscan(scan);
        pg_sys::PopActiveSnapshot();
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        Ok(value)
    }
}

/// Whether the row version at `row` of `schema.name` is visible to the snapshot
/// [`fetch_by_primary_key`] reads with (the active one at the current command id) and holds exactly `columns` (column number, and the
/// bytes of a varlena value without its header; equal bytes are equal values for `text` in
/// the "C" collation, `bytea` and `jsonb`). `false` also when it cannot tell cheaply: `row`
/// is past the table's end (vacuum truncated it), the snapshot is not an MVCC one, or the
/// transaction is SERIALIZABLE (where an index read also takes predicate locks on the index
/// this does not take).
///
/// With the primary key among `columns`, `true` means a [`fetch_by_primary_key`] now would
/// read this very row version: an MVCC snapshot sees at most one version of each key.
///
/// # Errors
/// As [`fetch_by_primary_key`].
pub fn row_still_holds(
    schema: &'static core::ffi::CStr,
    name: &'static core::ffi::CStr,
    row: RowAt,
    columns: &[(pg_sys::AttrNumber, &[u8])],
) -> Result<bool, DocstoreError> {
    let relid = relation_id(schema, name)?;
    // SAFETY: reads this backend's isolation level and active snapshot (checked above).
    let mvcc = unsafe {
        pg_sys::XactIsoLevel != pg_sys::XACT_SERIALIZABLE as core::ffi::c_int
            && (*pg_sys::GetActiveSnapshot()).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_MVCC
    };
    if !mvcc {
        return Ok(false);
    }
    let (block, _) = pgrx::itemptr::u64_to_item_pointer_parts(row.tid);
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    // SAFETY: the relation is opened and locked (which keeps vacuum from truncating it) before
    // its size is read (unless `RowAt::still_inside` knows), and closed after; heap_fetch reads
    // only a block inside the table,
    // checks the line pointer itself, and on success leaves the buffer pinned, which is
    // released once the columns are compared (their detoasted copies freed before). The
    // snapshot is a copy on the stack of the active one with the current command id, what
    // `fetch_by_primary_key`'s pushed copy is: its arrays are the active snapshot's, which
    // outlives the call, and heap_fetch registers nothing outside SERIALIZABLE (excluded
    // above). A Postgres error unwinds through here; the abort then releases pin and relation.
    unsafe {
        let rel = pg_sys::table_open(relid, lock);
        let inside = row.still_inside(rel)
            || block
                < pg_sys::RelationGetNumberOfBlocksInFork(rel, pg_sys::ForkNumber::MAIN_FORKNUM);
        let holds = inside && {
            let mut snapshot = *pg_sys::GetActiveSnapshot();
            snapshot.curcid = pg_sys::GetCurrentCommandId(false);
            let mut tuple = pg_sys::HeapTupleData::default();
            pgrx::itemptr::u64_to_item_pointer(row.tid, &mut tuple.t_self);
            let mut buffer: pg_sys::Buffer = pg_sys::InvalidBuffer as pg_sys::Buffer;
            let found = pg_sys::heap_fetch(rel, &mut snapshot, &mut tuple, &mut buffer, false);
            let same = found
                && columns.iter().all(|(attno, expected)| {
                    let mut is_null = false;
                    let datum = pg_sys::heap_getattr(
                        &mut tuple,
                        i32::from(*attno),
                        (*rel).rd_att,
                        &mut is_null,
                    );
                    !is_null && varlena_equals(datum, expected)
                });
            if found {
                pg_sys::ReleaseBuffer(buffer);
            }
            same
        };
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        Ok(holds)
    }
}

/// Whether the varlena `datum` (inline, compressed or TOASTed) holds exactly `expected`
/// (without the header).
///
/// # Safety
/// `datum` is a non-null varlena datum valid for the call (e.g. in a pinned buffer).
unsafe fn varlena_equals(datum: pg_sys::Datum, expected: &[u8]) -> bool {
    // SAFETY: per the contract; pg_detoast_datum_packed returns the datum itself when it is
    // inline and uncompressed, else a palloc'd plain copy, freed here once compared.
    unsafe {
        let raw = datum.cast_mut_ptr::<pg_sys::varlena>();
        let plain = pg_sys::pg_detoast_datum_packed(raw);
        let len = pgrx::varlena::varsize_any_exhdr(plain);
        let bytes = std::slice::from_raw_parts(pgrx::varlena::vardata_any(plain).cast::<u8>(), len);
        let equal = bytes == expected;
        if plain != raw {
            pg_sys::pfree(plain.cast());
        }
        equal
    }
}

/// Where [`fetch_by_primary_key`] read a row version, for [`row_still_holds`]: its TID, and what
/// tells whether its block is still inside the table without asking the table for its size
/// (an `lseek`, a tenth of a ruled write's rules cost).
///
/// The block was inside the table when the version was read, under the `ACCESS SHARE` lock
/// `fetch_by_primary_key` takes and keeps. Only a truncation can take the block away: vacuum's
/// (and `TRUNCATE`'s, in place or to new storage) needs `ACCESS EXCLUSIVE`, which conflicts
/// with that lock, so no other backend truncates while this transaction holds it. The lock is
/// held from the read to the end of the transaction unless the subtransaction that took it
/// aborts (then it is released): any subtransaction abort since the read ([`ABORTS`]) makes
/// the size be read again. This transaction itself can shrink the table only with `TRUNCATE`:
/// in place when the table's storage was created in this transaction (`rd_createSubid`,
/// `rd_firstRelfilenodeSubid`), else to new storage (`rd_node` changes). In recovery (a hot
/// standby) replay truncates under locks of its own; there the size is always read.
#[derive(Debug, Clone, Copy)]
pub struct RowAt {
    tid: u64,
    /// [`local_transaction_id`] at the read.
    transaction: u32,
    /// [`ABORTS`] at the read.
    aborts: u64,
    /// The table's storage (relfilenode) at the read.
    storage: pg_sys::Oid,
}

/// `InvalidSubTransactionId` (c.h).
const INVALID_SUBTRANSACTION: pg_sys::SubTransactionId = 0;

thread_local! {
    /// Subtransactions aborted in this backend ([`subtransaction_event`]).
    static ABORTS: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn subtransaction_event(
    event: pg_sys::SubXactEvent::Type,
    _subtransaction: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut core::ffi::c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        ABORTS.with(|a| a.set(a.get().wrapping_add(1)));
    }
}

/// Register the subtransaction callback [`RowAt`] relies on (once, from `_PG_init`).
pub fn register() {
    // SAFETY: called once at library load; the callback only touches a `Cell` and lives as
    // long as the library.
    unsafe { pg_sys::RegisterSubXactCallback(Some(subtransaction_event), core::ptr::null_mut()) };
}

impl RowAt {
    /// # Safety
    /// `rel` is open.
    unsafe fn new(rel: pg_sys::Relation, tid: pg_sys::ItemPointerData) -> RowAt {
        RowAt {
            tid: pgrx::itemptr::item_pointer_to_u64(tid),
            transaction: local_transaction_id(),
            aborts: ABORTS.with(core::cell::Cell::get),
            // SAFETY: `rel` is open (the caller's promise).
            storage: unsafe { (*rel).rd_node.relNode },
        }
    }

    /// Whether the block is certainly still inside `rel` (see [`RowAt`]); `false` means "read
    /// the table's size".
    ///
    /// # Safety
    /// `rel` is open, and it is the table the row was read from.
    unsafe fn still_inside(self, rel: pg_sys::Relation) -> bool {
        // SAFETY: reads fields of an open relation and the backend's recovery state.
        unsafe {
            self.transaction == local_transaction_id()
                && self.aborts == ABORTS.with(core::cell::Cell::get)
                && (*rel).rd_node.relNode == self.storage
                && (*rel).rd_createSubid == INVALID_SUBTRANSACTION
                && (*rel).rd_firstRelfilenodeSubid == INVALID_SUBTRANSACTION
                && !pg_sys::RecoveryInProgress()
        }
    }
}

/// This backend's number of the running transaction (`MyProc->lxid`): differs between any two
/// transactions of the backend that are less than 2^32 transactions apart.
pub fn local_transaction_id() -> u32 {
    // SAFETY: MyProc is set for every backend that runs SQL, and lxid is this backend's own.
    unsafe {
        if pg_sys::MyProc.is_null() {
            0
        } else {
            (*pg_sys::MyProc).lxid
        }
    }
}
