//! The documents rules' `get()`/`exists()` read from `docstore.entities`, converted to rules
//! values once per transaction: a client that writes many messages into one room in one
//! transaction reads the room once, not once per write.
//!
//! Exactness: a cached entry is used only when the lookup it replaces would read the same
//! bytes. An entry holds the row version a lookup read (its TID), the document's key and its
//! stored `data` (the jsonb's bytes), and the value converted from those bytes. A later lookup
//! of the same key fetches the row version at that TID with the snapshot the lookup uses (the
//! statement's, at the current command id) and takes the cached value only if that version is
//! visible and holds the same key and exactly the same `data` bytes
//! ([`entities::data_unchanged`]). Then the lookup would read this very version: the primary
//! key is unique, so an MVCC snapshot sees at most one version of a key, and a visible version
//! with the key is the one the index scan returns. Its bytes are those the value was converted
//! from, and the conversion is a function of the bytes (and of the database and path, which
//! are the cache's key). Nothing here relies on what happened to the row in between: an
//! update or delete by this transaction (the old version is no longer visible at the current
//! command id), a rolled-back savepoint (what it wrote is invisible, what it deleted visible
//! again with its old bytes), a concurrent commit seen by a newer READ COMMITTED snapshot, a
//! TID reused after pruning or a table rewritten under the same name all either fail the
//! check (a miss: the index lookup runs, and its result replaces the entry) or leave exactly
//! the bytes the lookup would read. Absent documents are not cached (there is no row to check).
//! In a SERIALIZABLE transaction every lookup reads through the index, whose predicate locks
//! the TID fetch would not take.
//!
//! The cache is emptied when the backend's next transaction first uses it (and bounded in
//! size): the check above does not need it, it keeps memory per transaction.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use docstore_core::ResourcePath;
use docstore_rules::eval::document_value;
use docstore_rules::prim::Val;

use crate::pg::heap::{local_transaction_id, RowAt};
use crate::pg::jsonb::StoredJsonb;
use crate::storage::entities;

/// At most this many documents, and this many bytes of stored data, are kept; past either the
/// cache starts over.
const MAX_ENTRIES: usize = 1024;
const MAX_BYTES: usize = 8 << 20;

/// One document as a lookup read it.
struct Entry {
    /// Where the row version was (see `pg::heap::row_still_holds`).
    row: RowAt,
    /// Its stored `data`.
    data: StoredJsonb,
    /// `data` as rules see it ([`document_value`]), shared with the decisions that read it.
    value: Rc<Val>,
}

#[derive(Default)]
struct Cache {
    /// The transaction the entries were read in.
    transaction: u32,
    /// Database id -> encoded name -> entry.
    entries: HashMap<String, HashMap<Vec<u8>, Entry>>,
    count: usize,
    bytes: usize,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// What `get()` returns for the stored document `path` (encoded `name`) of `database`, as the
/// running statement sees it; `None` when it does not exist. A Postgres error raises (it never
/// returns here); a stored document that does not convert is reported as missing, as before.
pub fn stored_value(database: &str, path: &ResourcePath, name: &[u8]) -> Option<Rc<Val>> {
    let transaction = local_transaction_id();
    let cached = CACHE.with(|cache| {
        let cache = cache.borrow();
        if cache.transaction != transaction {
            return None;
        }
        let entry = cache.entries.get(database)?.get(name)?;
        // Reads the row below the executor; runs no user code, so nothing re-enters the cache.
        entities::data_unchanged(database, name, entry.row, &entry.data)
            .ok()?
            .then(|| Rc::clone(&entry.value))
    });
    if cached.is_some() {
        return cached;
    }
    let (data, row) = entities::read_data_at(database, name).ok()??;
    let fields = entities::stored_fields(&data.text()).ok()?;
    let value = Rc::new(document_value(database, path, &fields));
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        let size = data.payload().len();
        if cache.transaction != transaction
            || cache.count >= MAX_ENTRIES
            || cache.bytes.saturating_add(size) > MAX_BYTES
        {
            *cache = Cache {
                transaction,
                ..Cache::default()
            };
        }
        if size > MAX_BYTES {
            return;
        }
        let entry = Entry {
            row,
            data,
            value: Rc::clone(&value),
        };
        let replaced = cache
            .entries
            .entry(database.to_owned())
            .or_default()
            .insert(name.to_vec(), entry);
        match replaced {
            Some(old) => cache.bytes = cache.bytes.saturating_sub(old.data.payload().len()),
            None => cache.count += 1,
        }
        cache.bytes += size;
    });
    Some(value)
}
