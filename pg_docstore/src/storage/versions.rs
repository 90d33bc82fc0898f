//! `docstore.entity_versions`: the superseded versions of documents, kept for a database's
//! `version_retention` so that reads at a past read time can be answered (docs/storage.md,
//! "Version history").
//!
//! The document at time `T` is the current entity when its `update_time <= T`, else the
//! version with `update_time <= T < superseded_time` (none: it did not exist at `T`). The
//! versions live at `T` are all among those superseded after `T`, one range of
//! `entity_versions_by_time`, which the retention bounds.

use std::collections::BTreeMap;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgBuiltInOids, PgOid};

use docstore_core::encoding::{encode_segments, ChildCollections};
use docstore_core::value::Map;
use docstore_core::ResourcePath;

use crate::errors::DocstoreError;
use crate::pg::jsonb::TypedJsonb;
use crate::pg::spi::plan;
use crate::pg::time::{from_timestamptz, to_timestamp, to_timestamptz};
use crate::storage::entities::stored_fields;

const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
const BYTEA: PgOid = PgOid::BuiltIn(PgBuiltInOids::BYTEAOID);
const TIMESTAMPTZ: PgOid = PgOid::BuiltIn(PgBuiltInOids::TIMESTAMPTZOID);

/// Microseconds per second.
const SECOND: i64 = 1_000_000;

/// A database's history setting: how long superseded versions are kept (0: none) and since
/// when its history is complete (Postgres microseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub micros: i64,
    pub since: i64,
}

impl Retention {
    /// Whether writes keep versions.
    pub fn keeps(self) -> bool {
        self.micros > 0
    }
}

/// The history setting of `database` (none kept for a database the catalog does not list).
/// Read as the extension's owner: the caller may be a client.
///
/// # Errors
/// SPI errors.
pub fn retention(client: &SpiClient<'_>, database: &str) -> Result<Retention, DocstoreError> {
    let _owner = crate::pg::owner::AsOwner::new(client)?;
    let stmt = plan(
        client,
        "select (extract(epoch from version_retention) * 1000000)::int8, versions_since \
         from docstore.databases where id = $1",
        &[TEXT],
    )?;
    let mut out = Retention {
        micros: 0,
        since: i64::MAX,
    };
    for row in client.select(&*stmt, Some(1), &[database.into()])? {
        let micros: Option<i64> = row.get(1)?;
        let since: Option<TimestampWithTimeZone> = row.get(2)?;
        out = Retention {
            micros: micros.unwrap_or(0),
            since: since.map_or(i64::MAX, from_timestamptz),
        };
    }
    Ok(out)
}

/// Keep the stored version of the document `name` as superseded at `time` (the commit time of
/// the write that replaces or deletes it), before that write. Derived data written on the
/// writer's behalf, as index entries are: run as the extension's owner.
///
/// # Errors
/// SPI errors.
pub fn archive(
    client: &mut SpiClient<'_>,
    database: &str,
    name: &[u8],
    time: i64,
) -> Result<(), DocstoreError> {
    let _owner = crate::pg::owner::AsOwner::new(client)?;
    let sql = "insert into docstore.entity_versions (database_id, name, parent, collection_id, \
               path, data, create_time, update_time, superseded_time) \
               select database_id, name, parent, collection_id, path, data, create_time, \
               update_time, $3 from docstore.entities where database_id = $1 and name = $2";
    let stmt = plan(client, sql, &[TEXT, BYTEA, TIMESTAMPTZ])?;
    client.update(
        &*stmt,
        None,
        &[database.into(), name.into(), to_timestamptz(time)?.into()],
    )?;
    Ok(())
}

/// Check that `database` can answer a read at `at` (Postgres microseconds), after the read's
/// snapshot was taken: `at` is inside the retained history, or no commit of the instance has a
/// later time (then the current documents are those at `at`).
///
/// # Errors
/// [`DocstoreError::InvalidArgument`] (22023) for a time after both the clock and the newest
/// commit; [`DocstoreError::HistoryUnavailable`] (55000) for a time older than the history.
pub fn check_readable(
    client: &SpiClient<'_>,
    database: &str,
    at: i64,
) -> Result<(), DocstoreError> {
    // SAFETY: reads the system clock; no backend state.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    let latest = crate::pg::commit_clock::latest();
    let show = |t: i64| to_timestamp(t).map_or_else(|_| t.to_string(), |t| t.to_rfc3339());
    if at > now && latest.is_none_or(|l| at > l) {
        return Err(DocstoreError::InvalidArgument(format!(
            "read_time {} is in the future",
            show(at)
        )));
    }
    let retention = retention(client, database)?;
    let floor = now.saturating_sub(retention.micros).max(retention.since);
    if retention.keeps() && at >= floor {
        return Ok(());
    }
    if latest.is_some_and(|l| at >= l) {
        return Ok(());
    }
    let newest = latest.map_or_else(
        || "not known: pg_docstore is not in shared_preload_libraries".to_owned(),
        show,
    );
    Err(DocstoreError::HistoryUnavailable(if !retention.keeps() {
        format!(
            "read_time {} is before the newest commit ({newest}) and database '{database}' keeps \
             no version history (version_retention 0): a read_time is readable only while no \
             later commit exists",
            show(at)
        )
    } else if at < retention.since {
        format!(
            "read_time {} is before the version history of database '{database}' starts ({})",
            show(at),
            show(retention.since)
        )
    } else {
        format!(
            "read_time {} is older than the version retention of database '{database}' ({} s): \
             the oldest readable time is {}",
            show(at),
            retention.micros / SECOND,
            show(floor)
        )
    }))
}

/// A document as it was at a time.
#[derive(Debug, Clone)]
pub struct Version {
    pub path: String,
    pub data: TypedJsonb,
    /// Postgres microseconds.
    pub create_time: i64,
    pub update_time: i64,
}

impl Version {
    /// Its fields.
    ///
    /// # Errors
    /// As [`stored_fields`].
    pub fn fields(&self) -> Result<Map, DocstoreError> {
        stored_fields(&self.data)
    }
}

fn version_of(row: &pgrx::spi::SpiHeapTupleData<'_>) -> Result<Version, DocstoreError> {
    let path: Option<String> = row.get(1)?;
    let data: Option<TypedJsonb> = row.get(2)?;
    let create: Option<TimestampWithTimeZone> = row.get(3)?;
    let update: Option<TimestampWithTimeZone> = row.get(4)?;
    Ok(Version {
        path: path.unwrap_or_default(),
        data: data.ok_or_else(|| DocstoreError::Internal("version without data".into()))?,
        create_time: create.map(from_timestamptz).unwrap_or_default(),
        update_time: update.map(from_timestamptz).unwrap_or_default(),
    })
}

/// The document `name` as it was at `at` (`None`: it did not exist then). Read as the
/// extension's owner; the caller decides who may read it.
///
/// # Errors
/// SPI errors.
pub fn read_at(
    client: &SpiClient<'_>,
    database: &str,
    name: &[u8],
    at: i64,
) -> Result<Option<Version>, DocstoreError> {
    let _owner = crate::pg::owner::AsOwner::new(client)?;
    let sql = "select path, data, create_time, update_time from docstore.entities \
               where database_id = $1 and name = $2 and update_time <= $3 \
               union all \
               select path, data, create_time, update_time from docstore.entity_versions \
               where database_id = $1 and name = $2 and superseded_time > $3 \
               and update_time <= $3 \
               limit 1";
    let stmt = plan(client, sql, &[TEXT, BYTEA, TIMESTAMPTZ])?;
    let rows = client.select(
        &*stmt,
        Some(1),
        &[database.into(), name.into(), to_timestamptz(at)?.into()],
    )?;
    match rows.into_iter().next() {
        Some(row) => Ok(Some(version_of(&row)?)),
        None => Ok(None),
    }
}

/// Which documents a read at a time looks at.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// The documents directly in one collection (its encoded path: `entities.parent`).
    Collection(&'a [u8]),
    /// The documents of every collection with this id (a collection group).
    Group(&'a str),
    /// The documents whose encoded parent is in `[from, to)`.
    Parents(&'a [u8], &'a [u8]),
}

/// The documents of `scope` as they were at `at`, in name order. Read as the extension's
/// owner; the caller decides who may read them.
///
/// # Errors
/// SPI errors.
pub fn scan_at(
    client: &SpiClient<'_>,
    database: &str,
    scope: Scope<'_>,
    at: i64,
) -> Result<Vec<(Vec<u8>, Version)>, DocstoreError> {
    let _owner = crate::pg::owner::AsOwner::new(client)?;
    macro_rules! live_at {
        ($condition:literal) => {
            concat!(
                "select path, data, create_time, update_time, name, parent \
                 from docstore.entities where database_id = $1 and update_time <= $2 and ",
                $condition,
                " union all \
                 select path, data, create_time, update_time, name, parent \
                 from docstore.entity_versions where database_id = $1 and superseded_time > $2 \
                 and update_time <= $2 and ",
                $condition,
                " order by 5"
            )
        };
    }
    let at = to_timestamptz(at)?;
    let rows = match scope {
        Scope::Collection(parent) => {
            let stmt = plan(client, live_at!("parent = $3"), &[TEXT, TIMESTAMPTZ, BYTEA])?;
            client.select(&*stmt, None, &[database.into(), at.into(), parent.into()])?
        }
        Scope::Group(id) => {
            let stmt = plan(
                client,
                live_at!("collection_id = $3"),
                &[TEXT, TIMESTAMPTZ, TEXT],
            )?;
            client.select(&*stmt, None, &[database.into(), at.into(), id.into()])?
        }
        Scope::Parents(from, to) => {
            let stmt = plan(
                client,
                live_at!("parent >= $3 and parent < $4"),
                &[TEXT, TIMESTAMPTZ, BYTEA, BYTEA],
            )?;
            client.select(
                &*stmt,
                None,
                &[database.into(), at.into(), from.into(), to.into()],
            )?
        }
    };
    let mut out = Vec::new();
    for row in rows {
        let parent: Option<Vec<u8>> = row.get(6)?;
        out.push((parent.unwrap_or_default(), version_of(&row)?));
    }
    Ok(out)
}

/// The children of `parent` at `at`: under a document (none: the root), the ids of its child
/// collections that held a document, each with whether one was directly in it (not only in
/// its subcollections); under a collection, the ids of its documents (existing or not) that
/// had a document below them. Sorted by id bytes.
///
/// # Errors
/// SPI errors; a stored parent that does not decode.
pub fn children_at(
    client: &SpiClient<'_>,
    database: &str,
    parent: &[String],
    at: i64,
) -> Result<BTreeMap<String, bool>, DocstoreError> {
    let scan = ChildCollections::under(parent);
    let (from, to) = (scan.start(), scan.end());
    let mut out: BTreeMap<String, bool> = BTreeMap::new();
    for (found, _) in scan_at(client, database, Scope::Parents(&from, &to), at)? {
        let child = scan
            .step(&found)
            .map_err(|e| DocstoreError::Internal(format!("stored parent: {e}")))?;
        *out.entry(child.id).or_default() |= child.direct;
    }
    Ok(out)
}

/// The encoded path of a collection (`entities.parent` of its documents).
pub fn collection_key(collection: &ResourcePath) -> Vec<u8> {
    let mut key = Vec::new();
    encode_segments(&mut key, collection.segments());
    key
}
