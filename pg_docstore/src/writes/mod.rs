//! The write pipeline: parse -> authorize -> lock and read -> apply mutations in memory ->
//! validate -> write entities and the exact index-entry delta. All within the caller's transaction, so a
//! failed write leaves nothing behind.
//!
//! Locking: documents are locked in name order (fewer deadlocks between batches); a document
//! that does not exist yet is guarded by a claim on its name (`entities::lock_missing`: no
//! shared lock-table entry, so a transaction may write any number of documents), so two
//! creators of one path queue and the second sees the first's row (23505 for `create`).
//!
//! Time: one commit time per batch, `max(now(), latest previous update time + 1us)`, so update
//! times of a document strictly increase even when an older transaction commits later.

pub mod authorize;
pub mod batch;

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

use pgrx::spi::SpiClient;

use docstore_core::document::check_document;
use docstore_core::encoding::encode_name;
use docstore_core::index::{document_entries, IndexConfig};
use docstore_core::mutation::{Mutation, MutationError, WriteKind};
use docstore_core::value::Map;
use docstore_core::{typed_json, ResourcePath};

use crate::errors::DocstoreError;
use crate::pg::commit_clock;
use crate::pg::jsonb::JsonbDatum;
use crate::pg::time::to_timestamp;
use crate::storage::entities::{self, Data, Keys, Stored};
use crate::storage::versions;
use crate::storage::{catalog, entries};

/// A condition on the document's state before the write.
#[derive(Debug, Clone, PartialEq)]
pub enum Precondition {
    Exists(bool),
    /// Postgres microseconds; the document must exist with exactly this update time.
    UpdateTime(i64),
}

#[derive(Debug, Clone)]
pub enum Operation {
    Mutate(Mutation),
    Delete,
    /// Lock the document and check the write's precondition, writing nothing (a document a
    /// transaction read but does not write).
    Verify,
}

/// One write of a batch.
#[derive(Debug, Clone)]
pub struct Write {
    pub path: ResourcePath,
    pub operation: Operation,
    pub precondition: Option<Precondition>,
    /// The document ID was just generated at random (`add`): no document can have the name,
    /// so its insert skips `ON CONFLICT` (a collision of 20 random characters, about 119 bits,
    /// would still be refused by the primary key with 23505).
    pub generated_id: bool,
    /// The `jsonb` the write's data came from (the single-document functions): stored as it is
    /// when the document written prints exactly as it ([`typed_json::prints_as`]), which saves
    /// printing the document and parsing the text into a new `jsonb`.
    pub verbatim: Option<Verbatim>,
}

/// A write's data as JSON and as the `jsonb` datum it was parsed from.
#[derive(Debug, Clone)]
pub struct Verbatim {
    pub json: serde_json::Value,
    pub datum: JsonbDatum,
}

/// What a committed batch reports.
#[derive(Debug, Clone)]
pub struct CommitResult {
    /// Postgres microseconds.
    pub commit_time: i64,
    /// Per write: whether a document existed before it (what `delete()` returns).
    pub existed: Vec<bool>,
    /// Per write: the document's update time after it (Postgres microseconds): the commit
    /// time for a write, the document's current time (`None` when missing) for a verify.
    pub update_times: Vec<Option<i64>>,
}

/// The state of one document while a batch is applied.
struct Slot {
    path: ResourcePath,
    keys: Keys,
    stored: Option<Stored>,
    current: Option<Map>,
    /// Postgres microseconds of the current version (the stored one until written).
    current_time: Option<i64>,
    written: bool,
    /// The first write's [`Write::generated_id`].
    generated_id: bool,
}

/// Apply `writes` in order, all or nothing.
///
/// # Errors
/// The first write that fails (not found, exists, precondition, invalid data, limits); the
/// caller's transaction is then aborted by the raised error, so nothing remains.
pub fn commit(
    client: &mut SpiClient<'_>,
    database: &str,
    writes: &[Write],
) -> Result<CommitResult, DocstoreError> {
    let _generic = crate::pg::spi::GenericPlans::new();
    // Clients (docstore_client) write as the extension's owner once their batch is allowed.
    let authority = authorize::authorize(database, writes)?;
    let _owner = match authority {
        authorize::Authority::Extension => Some(crate::pg::owner::AsOwner::new(client)?),
        authorize::Authority::Caller => None,
    };
    let mut rules = authorize::Rules::of(database, authority)?;
    // Lock and read every document once, in name order.
    let names: Vec<Vec<u8>> = writes.iter().map(|w| encode_name(&w.path)).collect();
    let mut first_writes: BTreeMap<&[u8], &Write> = BTreeMap::new();
    for (write, name) in writes.iter().zip(&names) {
        first_writes.entry(name).or_insert(write);
    }
    let mut slots: HashMap<Vec<u8>, Slot> = HashMap::with_capacity(first_writes.len());
    let mut latest = i64::MIN;
    for (name, first) in first_writes {
        // A document whose first write is a plain create is not read: the insert itself
        // decides (ON CONFLICT), which is exact even against concurrent creators.
        let create_first = first.precondition.is_none()
            && matches!(&first.operation, Operation::Mutate(m) if *m.kind() == WriteKind::Create);
        let stored = if create_first {
            None
        } else {
            let mut stored = entities::read_for_update(client, database, name)?;
            if stored.is_none() {
                entities::lock_missing(client, database, name)?;
                stored = entities::read_for_update(client, database, name)?;
            }
            stored
        };
        if let Some(s) = &stored {
            latest = latest.max(s.update_time);
        }
        slots.insert(
            name.to_vec(),
            Slot {
                current: stored.as_ref().map(|s| s.fields.clone()),
                current_time: stored.as_ref().map(|s| s.update_time),
                stored,
                keys: Keys::named(&first.path, name.to_vec()),
                path: first.path.clone(),
                written: false,
                generated_id: first.generated_id,
            },
        );
    }
    let commit_time = commit_clock::take(latest);
    let server_time = to_timestamp(commit_time)?;

    // Apply in order, in memory.
    let mut existed = Vec::with_capacity(writes.len());
    let mut update_times = Vec::with_capacity(writes.len());
    let in_write = |index: usize, error: DocstoreError| {
        if writes.len() > 1 {
            DocstoreError::InWrite {
                index,
                error: Box::new(error),
            }
        } else {
            error
        }
    };
    for (index, (write, name)) in writes.iter().zip(&names).enumerate() {
        let slot = slots
            .get_mut(name)
            .ok_or_else(|| DocstoreError::Internal("document of a write was not read".into()))?;
        let applied =
            check_precondition(&write.path, slot, write.precondition.as_ref()).and_then(|()| {
                // `None`: the document is unchanged (a verify); `Some(next)`: its new state.
                match &write.operation {
                    Operation::Verify => Ok(None),
                    Operation::Delete => Ok(Some(None)),
                    Operation::Mutate(m) => m
                        .apply(slot.current.as_ref(), server_time)
                        .map(|next| Some(Some(next)))
                        .map_err(|e| match e {
                            MutationError::NotFound => DocstoreError::NotFound {
                                path: write.path.to_string(),
                            },
                            MutationError::AlreadyExists => DocstoreError::AlreadyExists {
                                path: write.path.to_string(),
                            },
                            other => DocstoreError::Mutation(other),
                        }),
                }
            });
        let next = match applied {
            Ok(next) => next,
            Err(error) => {
                // A client's write that fails on its own (a precondition, an update of a
                // missing document, a create of an existing one) is decided by the rules
                // first: a denied one reports PERMISSION_DENIED, so the failure cannot tell a
                // client whether a document it may not see exists.
                if let Some(rules) = rules.as_ref() {
                    rules.check_failed(
                        database,
                        index,
                        writes.len() > 1,
                        write,
                        name,
                        batch_state(&slots),
                        server_time,
                        commit_time,
                    )?;
                }
                return Err(in_write(index, error));
            }
        };
        existed.push(slot.current.is_some());
        let Some(next) = next else {
            // A verify: locked and checked, nothing changes; the rules decide it as a `get`.
            update_times.push(slot.current_time);
            if let Some(rules) = rules.as_mut() {
                rules.record(index, write, slot.current.clone(), None);
            }
            continue;
        };
        update_times.push(Some(commit_time));
        let before = rules.as_ref().map(|_| slot.current.clone());
        slot.current = next;
        slot.current_time = slot.current.as_ref().map(|_| commit_time);
        slot.written = true;
        if let (Some(rules), Some(before)) = (rules.as_mut(), before) {
            rules.record(index, write, before, slot.current.as_ref());
        }
        if let Some(fields) = &slot.current {
            check_document(&slot.path, fields).map_err(|e| {
                in_write(
                    index,
                    DocstoreError::Limit {
                        path: write.path.to_string(),
                        error: e,
                    },
                )
            })?;
        }
    }

    // The security rules decide the batch as applied, before anything is written.
    if let Some(rules) = rules {
        rules.check(database, batch_state(&slots), commit_time)?;
    }

    // A single write whose document is exactly the jsonb it was given stores that jsonb.
    let verbatim = match writes {
        [Write {
            verbatim: Some(v), ..
        }] => Some(v),
        _ => None,
    };
    fn data_of<'a>(verbatim: Option<&Verbatim>, fields: &'a Map) -> Data<'a> {
        match verbatim {
            Some(v) if typed_json::map_prints_as(&v.json, fields) => Data::Jsonb(v.datum),
            _ => Data::Fields(fields),
        }
    }

    // Write entities and index deltas, in name order, with the index catalog read after the
    // table lock (an index created automatically is committed by then).
    if slots.values().any(|s| s.written) {
        entities::lock_for_write();
    }
    // A replaced or deleted version is kept when the database keeps a version history
    // (docs/storage.md, "Version history"), in this transaction, before its row changes.
    let history = slots.values().any(|s| s.written && s.stored.is_some())
        && versions::retention(client, database)?.keeps();
    let mut configs: HashMap<String, IndexConfig> = HashMap::new();
    let mut names: Vec<&Vec<u8>> = slots.keys().collect();
    names.sort();
    for name in names {
        let Some(slot) = slots.get(name) else {
            continue;
        };
        if !slot.written {
            continue;
        }
        let group = &slot.keys.collection_id;
        let config = match configs.entry(group.clone()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(catalog::index_config_cached(client, database, group)?),
        };
        let old = match &slot.stored {
            Some(s) => document_entries(&slot.path, &s.fields, config)?,
            None => Vec::new(),
        };
        let new = match &slot.current {
            Some(fields) => document_entries(&slot.path, fields, config)?,
            None => Vec::new(),
        };
        if history && slot.stored.is_some() {
            versions::archive(client, database, name, commit_time)?;
        }
        match (&slot.stored, &slot.current) {
            (None, None) => {}
            (Some(_), None) => entities::delete(client, database, name, &old)?,
            (Some(_), Some(fields)) => {
                let (removed, added) = entries::delta(&old, &new);
                entities::update(
                    client,
                    database,
                    name,
                    data_of(verbatim, fields),
                    commit_time,
                    &removed,
                    &added,
                )?;
            }
            (None, Some(fields)) => {
                let conflict = if slot.generated_id {
                    entities::OnConflict::Refuse
                } else {
                    entities::OnConflict::Skip
                };
                if !entities::insert(
                    client,
                    database,
                    &slot.path,
                    &slot.keys,
                    data_of(verbatim, fields),
                    commit_time,
                    &new,
                    conflict,
                )? {
                    // Either the first write was a create and the document exists, or our
                    // snapshot predates a concurrent creator's commit (REPEATABLE READ).
                    let created_first = writes.iter().find(|w| w.path == slot.path && !matches!(w.operation, Operation::Verify)).is_some_and(|w| {
                        matches!(&w.operation, Operation::Mutate(m) if *m.kind() == WriteKind::Create)
                    });
                    return Err(if created_first {
                        DocstoreError::AlreadyExists {
                            path: slot.path.to_string(),
                        }
                    } else {
                        DocstoreError::Contention {
                            path: slot.path.to_string(),
                        }
                    });
                }
            }
        }
    }
    Ok(CommitResult {
        commit_time,
        existed,
        update_times,
    })
}

/// Each document of a batch (encoded name) with its state before the batch and now: what the
/// rules' `get()` and `getAfter()` read.
fn batch_state(slots: &HashMap<Vec<u8>, Slot>) -> HashMap<&[u8], (Option<&Map>, Option<&Map>)> {
    slots
        .iter()
        .map(|(name, slot)| {
            (
                name.as_slice(),
                (
                    slot.stored.as_ref().map(|s| &s.fields),
                    slot.current.as_ref(),
                ),
            )
        })
        .collect()
}

fn check_precondition(
    path: &ResourcePath,
    slot: &Slot,
    precondition: Option<&Precondition>,
) -> Result<(), DocstoreError> {
    let failed = |reason: String| DocstoreError::PreconditionFailed {
        path: path.to_string(),
        reason,
    };
    match precondition {
        None => Ok(()),
        Some(Precondition::Exists(true)) if slot.current.is_none() => {
            Err(failed("the document does not exist".into()))
        }
        Some(Precondition::Exists(false)) if slot.current.is_some() => {
            Err(failed("the document exists".into()))
        }
        Some(Precondition::Exists(_)) => Ok(()),
        Some(Precondition::UpdateTime(t)) => match slot.current_time {
            Some(current) if current == *t => Ok(()),
            Some(current) => Err(failed(format!(
                "its update time is {}, not {}",
                display_time(current),
                display_time(*t)
            ))),
            None => Err(failed("the document does not exist".into())),
        },
    }
}

fn display_time(pg_micros: i64) -> String {
    to_timestamp(pg_micros)
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|_| pg_micros.to_string())
}
