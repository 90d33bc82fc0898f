//! `docstore.entities`: read, lock, insert, update and delete documents.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, IntoDatum, PgBuiltInOids, PgOid};

use docstore_core::encoding::{encode_name, encode_segments};
use docstore_core::value::Map;
use docstore_core::{typed_json, ResourcePath};

use crate::errors::DocstoreError;
use crate::pg::heap::{column, RowAt, Table};
use crate::pg::jsonb::{JsonbDatum, StoredJsonb, TypedJsonb};
use crate::pg::spi::plan;
use crate::pg::time::{from_timestamptz, to_timestamptz};
use crate::storage::entries as index_entries;

const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
const BYTEA: PgOid = PgOid::BuiltIn(PgBuiltInOids::BYTEAOID);
const JSONB: PgOid = PgOid::BuiltIn(PgBuiltInOids::JSONBOID);
const TIMESTAMPTZ: PgOid = PgOid::BuiltIn(PgBuiltInOids::TIMESTAMPTZOID);

/// A stored document.
#[derive(Debug, Clone)]
pub struct Stored {
    pub fields: Map,
    /// Postgres microseconds.
    pub update_time: i64,
}

/// Key columns of a document.
pub struct Keys {
    pub name: Vec<u8>,
    pub parent: Vec<u8>,
    pub collection_id: String,
}

impl Keys {
    pub fn of(path: &ResourcePath) -> Keys {
        Keys::named(path, encode_name(path))
    }

    /// [`Keys::of`] when the caller has encoded the name already (`name` is `encode_name(path)`).
    pub fn named(path: &ResourcePath, name: Vec<u8>) -> Keys {
        let parent = path.parent();
        let mut parent_key = Vec::new();
        encode_segments(
            &mut parent_key,
            parent.as_ref().map(|p| p.segments()).unwrap_or(&[]),
        );
        Keys {
            name,
            parent: parent_key,
            collection_id: parent.map(|p| p.last().to_owned()).unwrap_or_default(),
        }
    }
}

/// The fields of a stored document (`entities.data`).
///
/// # Errors
/// [`DocstoreError::Internal`]: what we stored always parses.
pub fn stored_fields(data: &TypedJsonb) -> Result<Map, DocstoreError> {
    typed_json::map_from_json(
        &typed_json::json_from_str(&data.0)
            .map_err(|e| DocstoreError::Internal(format!("stored data is not JSON: {e}")))?,
    )
    .map_err(|e| DocstoreError::Internal(format!("stored data is not typed JSON: {e}")))
}

fn parse_row(
    data: Option<TypedJsonb>,
    update: Option<TimestampWithTimeZone>,
) -> Result<Stored, DocstoreError> {
    let data = data.ok_or_else(|| DocstoreError::Internal("entity without data".into()))?;
    Ok(Stored {
        fields: stored_fields(&data)?,
        update_time: update.map(from_timestamptz).unwrap_or_default(),
    })
}

/// Read a document and lock it for update (`FOR UPDATE`): concurrent writers of the same
/// document queue here. Under REPEATABLE READ a concurrent update raises 40001.
pub fn read_for_update(
    client: &mut SpiClient<'_>,
    database: &str,
    name: &[u8],
) -> Result<Option<Stored>, DocstoreError> {
    let sql = "select data, update_time from docstore.entities \
               where database_id = $1 and name = $2 for update";
    let stmt = plan(client, sql, &[TEXT, BYTEA])?;
    let rows = client.update(&*stmt, Some(1), &[database.into(), name.to_vec().into()])?;
    match rows.into_iter().next() {
        None => Ok(None),
        Some(row) => Ok(Some(parse_row(row.get(1)?, row.get(2)?)?)),
    }
}

/// Serialise writers of a document that does not exist yet (a row lock needs a row): a claim
/// on its name in the unlogged `docstore.creating`, inserted and at once deleted below the
/// executor. A second claimer of the name waits in the unique check until the first
/// transaction ends (a tuple inserted by a transaction in progress blocks it, deleted or not),
/// then finds the claim dead and goes on; it then reads the first one's document. Unlike a
/// transaction advisory lock, a claim leaves no entry in the shared lock table, so one
/// transaction may create any number of documents.
///
/// A database whose extension SQL predates `docstore.creating` (a development cluster not yet
/// re-created) gets the transaction advisory lock of earlier versions.
pub fn lock_missing(
    client: &mut SpiClient<'_>,
    database: &str,
    name: &[u8],
) -> Result<(), DocstoreError> {
    let Some(table) = Table::open_if_exists(c"docstore", c"creating")? else {
        let sql = "select pg_advisory_xact_lock(hashtextextended($1, 0) # hashtextextended(encode($2, 'hex'), 7))";
        let stmt = plan(client, sql, &[TEXT, BYTEA])?;
        client.update(&*stmt, Some(1), &[database.into(), name.to_vec().into()])?;
        return Ok(());
    };
    let key = [column(database)?, column(name)?];
    table.insert(&[key])?;
    let columns = [
        (
            pg_sys::RegProcedure::from(pg_sys::F_TEXTEQ),
            pg_sys::C_COLLATION_OID,
        ),
        (
            pg_sys::RegProcedure::from(pg_sys::F_BYTEAEQ),
            pg_sys::InvalidOid,
        ),
    ];
    table.delete_by_primary_key(&columns, &[key])?;
    Ok(())
}

/// The stored data of a document, read without locking below the executor (no rights checked,
/// no row-level security: the extension's own reads, such as the security rules' `get()`),
/// as the calling statement sees it with the transaction's changes up to now
/// ([`crate::pg::heap::fetch_by_primary_key`]). About a fifth of the time of [`read`]'s SPI
/// query (BENCHMARKS.md, "Security rules in the extension").
///
/// # Errors
/// [`DocstoreError::Internal`] without `docstore.entities` or outside a statement.
pub fn read_data(database: &str, name: &[u8]) -> Result<Option<StoredJsonb>, DocstoreError> {
    Ok(read_data_at(database, name)?.map(|(data, _)| data))
}

/// [`read_data`], and where the row version read is (for [`data_unchanged`]).
///
/// # Errors
/// As [`read_data`].
pub fn read_data_at(
    database: &str,
    name: &[u8],
) -> Result<Option<(StoredJsonb, RowAt)>, DocstoreError> {
    // Columns of docstore.entities (sql/schema.sql): 1 database_id, 2 name, 6 data.
    let database = column(database)?;
    let name = column(name.to_vec())?;
    crate::pg::heap::fetch_by_primary_key(
        c"docstore",
        c"entities",
        &[
            (1, pg_sys::Oid::from(pg_sys::F_TEXTEQ), database),
            (2, pg_sys::Oid::from(pg_sys::F_BYTEAEQ), name),
        ],
        6,
    )
}

/// Whether [`read_data`] would now read exactly `data` from the row version at `row` (as
/// [`read_data_at`] returned it): that version is visible to the statement as `read_data`
/// would read and holds this document's key and `data` ([`crate::pg::heap::row_still_holds`]).
/// `false` means "read it again", not necessarily that the document changed.
///
/// # Errors
/// As [`read_data`].
pub fn data_unchanged(
    database: &str,
    name: &[u8],
    row: RowAt,
    data: &StoredJsonb,
) -> Result<bool, DocstoreError> {
    crate::pg::heap::row_still_holds(
        c"docstore",
        c"entities",
        row,
        &[(1, database.as_bytes()), (2, name), (6, data.payload())],
    )
}

/// Read a document without locking: (data as stored, create and update time).
pub fn read(
    client: &SpiClient<'_>,
    database: &str,
    name: &[u8],
) -> Result<Option<(StoredJsonb, i64, i64)>, DocstoreError> {
    let sql = "select data, create_time, update_time from docstore.entities where database_id = $1 and name = $2";
    let stmt = plan(client, sql, &[TEXT, BYTEA])?;
    let rows = client.select(&*stmt, Some(1), &[database.into(), name.to_vec().into()])?;
    match rows.into_iter().next() {
        None => Ok(None),
        Some(row) => {
            let data: Option<StoredJsonb> = row.get(1)?;
            let create: Option<TimestampWithTimeZone> = row.get(2)?;
            let update: Option<TimestampWithTimeZone> = row.get(3)?;
            match data {
                Some(data) => Ok(Some((
                    data,
                    create.map(from_timestamptz).unwrap_or_default(),
                    update.map(from_timestamptz).unwrap_or_default(),
                ))),
                None => Ok(None),
            }
        }
    }
}

const BYTEA_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::BYTEAARRAYOID);

/// The `data` column of a write.
#[derive(Debug, Clone, Copy)]
pub enum Data<'a> {
    /// The document's fields, printed as typed JSON.
    Fields(&'a Map),
    /// A `jsonb` that holds exactly the typed JSON of the fields (`typed_json::prints_as`).
    Jsonb(JsonbDatum),
}

impl IntoDatum for Data<'_> {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        match self {
            Data::Fields(fields) => TypedJsonb(typed_json::map_to_string(fields)).into_datum(),
            Data::Jsonb(datum) => datum.into_datum(),
        }
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

/// What an insert does when the document exists already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConflict {
    /// Write nothing and report it (`ON CONFLICT DO NOTHING`): the caller decides the error.
    Skip,
    /// Let the primary key refuse it (23505), without the cost of checking first: for names
    /// that cannot exist yet (a freshly generated random ID).
    Refuse,
}

/// Insert a new document (`keys` are its path's), then its index entries. Returns false (and
/// writes nothing) when the document exists already: a concurrent creator won, or it was never
/// read.
#[allow(clippy::too_many_arguments)]
pub fn insert(
    client: &mut SpiClient<'_>,
    database: &str,
    path: &ResourcePath,
    keys: &Keys,
    data: Data<'_>,
    time: i64,
    entries: &[Vec<u8>],
    conflict: OnConflict,
) -> Result<bool, DocstoreError> {
    let time = to_timestamptz(time)?;
    if conflict == OnConflict::Refuse {
        // A name that cannot exist yet needs no conflict handling: when an INSERT would check
        // nothing more than the heap and index AMs do, write the row below the executor.
        let table = Table::open(c"docstore", c"entities")?;
        if table.allows_direct_insert() && table.columns() == 8 {
            table.insert(&[[
                column(database)?,
                column(keys.name.as_slice())?,
                column(keys.parent.as_slice())?,
                column(keys.collection_id.as_str())?,
                column(path.to_string())?,
                column(data)?,
                column(time)?,
                column(time)?,
            ]])?;
            index_entries::apply(database, &keys.name, &[], entries)?;
            return Ok(true);
        }
    }
    macro_rules! insert {
        ($tail:literal) => {
            concat!(
                "insert into docstore.entities ",
                "(database_id, name, parent, collection_id, path, data, create_time, update_time) ",
                "values ($1, $2, $3, $4, $5, $6, $7, $7)",
                $tail
            )
        };
    }
    let sql = match conflict {
        OnConflict::Skip => insert!(" on conflict do nothing"),
        OnConflict::Refuse => insert!(""),
    };
    let stmt = plan(
        client,
        sql,
        &[TEXT, BYTEA, BYTEA, TEXT, TEXT, JSONB, TIMESTAMPTZ],
    )?;
    let inserted = client
        .update(
            &*stmt,
            None,
            &[
                database.into(),
                keys.name.as_slice().into(),
                keys.parent.as_slice().into(),
                keys.collection_id.as_str().into(),
                path.to_string().into(),
                data.into(),
                time.into(),
            ],
        )?
        .len()
        == 1;
    if inserted {
        index_entries::apply(database, &keys.name, &[], entries)?;
    }
    Ok(inserted)
}

/// Replace a document's data and update time, then apply its index-entry delta.
pub fn update(
    client: &mut SpiClient<'_>,
    database: &str,
    name: &[u8],
    data: Data<'_>,
    time: i64,
    removed: &[Vec<u8>],
    added: &[Vec<u8>],
) -> Result<(), DocstoreError> {
    let sql = "update docstore.entities set data = $3, update_time = $4 \
               where database_id = $1 and name = $2";
    let stmt = plan(client, sql, &[TEXT, BYTEA, JSONB, TIMESTAMPTZ])?;
    client.update(
        &*stmt,
        None,
        &[
            database.into(),
            name.into(),
            data.into(),
            to_timestamptz(time)?.into(),
        ],
    )?;
    index_entries::apply(database, name, removed, added)
}

/// Delete a document, then its index entries.
pub fn delete(
    client: &mut SpiClient<'_>,
    database: &str,
    name: &[u8],
    entries: &[Vec<u8>],
) -> Result<(), DocstoreError> {
    let sql = "delete from docstore.entities where database_id = $1 and name = $2";
    let stmt = plan(client, sql, &[TEXT, BYTEA])?;
    client.update(&*stmt, None, &[database.into(), name.into()])?;
    index_entries::apply(database, name, entries, &[])
}

/// A document as a query returns it.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub path: String,
    pub data: StoredJsonb,
    /// Postgres microseconds.
    pub update_time: i64,
    /// Postgres microseconds.
    pub create_time: i64,
}

/// Fetch documents by name (one statement); missing names are absent from the result.
pub fn fetch_many(
    client: &SpiClient<'_>,
    database: &str,
    names: Vec<Vec<u8>>,
) -> Result<std::collections::HashMap<Vec<u8>, Fetched>, DocstoreError> {
    let mut out = std::collections::HashMap::with_capacity(names.len());
    if names.is_empty() {
        return Ok(out);
    }
    let sql = "select name, path, data, update_time, create_time from docstore.entities \
               where database_id = $1 and name = any($2)";
    let stmt = plan(client, sql, &[TEXT, BYTEA_ARRAY])?;
    for row in client.select(&*stmt, None, &[database.into(), names.into()])? {
        let name: Vec<u8> = row.get(1)?.unwrap_or_default();
        let path: String = row.get(2)?.unwrap_or_default();
        let data: Option<StoredJsonb> = row.get(3)?;
        let update: Option<TimestampWithTimeZone> = row.get(4)?;
        let create: Option<TimestampWithTimeZone> = row.get(5)?;
        if let Some(data) = data {
            out.insert(
                name,
                Fetched {
                    path,
                    data,
                    update_time: update.map(from_timestamptz).unwrap_or_default(),
                    create_time: create.map(from_timestamptz).unwrap_or_default(),
                },
            );
        }
    }
    Ok(out)
}

/// Take ROW EXCLUSIVE on `docstore.entities` (the lock the writes take anyway) now, before the
/// index catalog is read: a query that creates an index automatically holds SHARE until it
/// commits (`executor::auto_index`), and taking the lock applies the invalidations of that
/// commit, so the catalog read next includes the new index.
pub fn lock_for_write() {
    if let Some(entities) = crate::pg::names::relation(c"docstore", c"entities") {
        #[allow(clippy::cast_possible_wrap)]
        let mode = pg_sys::RowExclusiveLock as pg_sys::LOCKMODE;
        // SAFETY: locks an existing relation until the end of the transaction, as the INSERT,
        // UPDATE or DELETE that follows would.
        unsafe { pg_sys::LockRelationOid(entities, mode) };
    }
}
