//! Document functions: get, set, create, add, update, delete, commit.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use docstore_core::mutation::{Mutation, WriteKind};
use docstore_core::ResourcePath;
use docstore_rules::eval::{Budget, Document};
use docstore_rules::Method;

use crate::errors::DocstoreError;
use crate::guc::database_id;
use crate::pg::jsonb::{DocumentJsonb, JsonbDatum, JsonbOut, StoredJsonb, TypedJsonb};
use crate::pg::random::auto_id;
use crate::pg::time::{to_timestamp, to_timestamptz};
use crate::storage::entities::{self, Keys};
use crate::writes::{self, batch, Operation, Verbatim, Write};

fn json_of(arg: &TypedJsonb) -> Result<serde_json::Value, DocstoreError> {
    docstore_core::typed_json::json_from_str(&arg.0).map_err(DocstoreError::TypedJson)
}

/// One mutation of one document, the single-document functions' write. `datum` is the `jsonb`
/// a whole document (`set`, `create`, `add`) came from: stored as it is when it is already in
/// canonical typed JSON.
fn write_one(
    path: ResourcePath,
    kind: WriteKind,
    data: &TypedJsonb,
    datum: Option<JsonbDatum>,
    generated_id: bool,
) -> Result<TimestampWithTimeZone, DocstoreError> {
    let database = database_id()?;
    let json = json_of(data)?;
    let mutation = Mutation::parse(kind, &json).map_err(DocstoreError::Mutation)?;
    let write = Write {
        path,
        operation: Operation::Mutate(mutation),
        precondition: None,
        generated_id,
        verbatim: datum.map(|datum| Verbatim { json, datum }),
    };
    let result = Spi::connect_mut(|client| writes::commit(client, &database, &[write]))?;
    to_timestamptz(result.commit_time)
}

/// Read a document as the caller may: for a client (docstore_client), the `get` rule of the
/// database decides first (a missing document is decided with `resource` = null); a denial,
/// and any read in a database without rules, is 42501. (data as stored, create and update time).
fn read_authorized(path: &str) -> Result<Option<(StoredJsonb, i64, i64)>, DocstoreError> {
    let path = ResourcePath::parse_document(path).map_err(DocstoreError::from)?;
    let database = database_id()?;
    let name = Keys::of(&path).name;
    let _generic = crate::pg::spi::GenericPlans::new();
    Spi::connect(|client| {
        if crate::pg::owner::caller_writes_as_client() {
            // A client: the database's `get` rule decides (read as the owner, so the `list`
            // policy on entities does not hide the document first).
            let _owner = crate::pg::owner::AsOwner::new(client)?;
            let found = entities::read(client, &database, &name)?;
            let fields = match &found {
                Some((data, _, _)) => Some(entities::stored_fields(&data.text())?),
                None => None,
            };
            decide_get(&database, &path, fields)?;
            return Ok(found);
        }
        entities::read(client, &database, &name)
    })
}

/// The `get` rule of `database` deciding a client's read of the document `path`, whose fields
/// are `fields` (`None`: it does not exist, `resource` = null). Call as the owner.
///
/// # Errors
/// [`DocstoreError::PermissionDenied`] (42501) when it denies, also for a database without
/// rules.
pub(crate) fn decide_get(
    database: &str,
    path: &ResourcePath,
    fields: Option<docstore_core::value::Map>,
) -> Result<(), DocstoreError> {
    let ruleset = crate::rules::client_ruleset(database)?;
    let stored = fields.map(|data| Document {
        path: path.clone(),
        data,
    });
    let request = crate::rules::request(
        Method::Get,
        database,
        path,
        None,
        crate::pg::time::transaction_start(),
    )?;
    let lookups = crate::rules::Lookups {
        database,
        batch: std::collections::HashMap::new(),
    };
    crate::rules::decide(
        &ruleset,
        &request,
        stored.as_ref(),
        &lookups,
        &mut Budget::single(),
    )?;
    Ok(())
}

/// The document's data in typed JSON, or NULL when it does not exist. For a client
/// (docstore_client), the `get` rule decides first (a missing document is decided with
/// `resource` = null); a denial, and any client read in a database without rules, is 42501.
///
/// ```sql
/// select docstore.get('restaurants/one');
/// ```
#[pg_extern(stable, parallel_safe)]
fn get(path: &str) -> Result<Option<JsonbOut>, ErrorReport> {
    Ok(read_authorized(path)?.map(|(data, _, _)| JsonbOut::Stored(data)))
}

/// The document with its create and update times (no row when it does not exist), decided by
/// the `get` rule like [`get`]: what the sidecar's `GET` of a document reads.
///
/// ```sql
/// select * from docstore.get_document('restaurants/one');
/// ```
#[pg_extern(stable, parallel_safe)]
fn get_document(
    path: &str,
) -> Result<
    TableIterator<
        'static,
        (
            name!(data, JsonbOut),
            name!(create_time, TimestampWithTimeZone),
            name!(update_time, TimestampWithTimeZone),
        ),
    >,
    ErrorReport,
> {
    Ok(document_row(path)?)
}

/// The rows of `get_document` (the `#[pg_extern]` functions spell the type out: their SQL
/// signature is generated from it).
type DocumentRow = TableIterator<
    'static,
    (
        name!(data, JsonbOut),
        name!(create_time, TimestampWithTimeZone),
        name!(update_time, TimestampWithTimeZone),
    ),
>;

fn document_row(path: &str) -> Result<DocumentRow, DocstoreError> {
    let row = match read_authorized(path)? {
        Some((data, create, update)) => Some((
            JsonbOut::Stored(data),
            to_timestamptz(create)?,
            to_timestamptz(update)?,
        )),
        None => None,
    };
    Ok(TableIterator::new(row))
}

/// A client's read of one document in one statement, for the sidecar: sets `docstore.auth`
/// (verified JWT claims as JSON text, `null` when unauthenticated), `docstore.request` and
/// `docstore.database` until the end of the transaction with the caller's own rights (as
/// `set_config(.., true)` would), then reads as `docstore_client` exactly as
/// [`get_document`] does (the `get` rule decides; 42501 when it denies). The same as
/// `begin; select set_config(..); set local role docstore_client; select * from
/// docstore.get_document(path); commit` in one statement. Not executable by PUBLIC or
/// docstore_client (`roles.sql`): a superuser or a role granted EXECUTE calls it, and it must
/// be a member of docstore_client.
///
/// ```sql
/// select * from docstore.get_document_as_client('rooms/r1', '{"sub": "alice"}', '{}', '(default)');
/// ```
#[pg_extern(volatile)]
fn get_document_as_client(
    path: &str,
    auth: &str,
    request: &str,
    database: &str,
) -> Result<
    TableIterator<
        'static,
        (
            name!(data, JsonbOut),
            name!(create_time, TimestampWithTimeZone),
            name!(update_time, TimestampWithTimeZone),
        ),
    >,
    ErrorReport,
> {
    crate::guc::set_local(c"docstore.database", database)?;
    let _client = act_as_client(auth, request)?;
    Ok(document_row(path)?)
}

/// The start of the sidecar's one-statement client calls: `docstore.auth` and
/// `docstore.request` set until the end of the transaction with the caller's own rights, then
/// `docstore_client` for the rest of the call (while the result lives).
fn act_as_client(auth: &str, request: &str) -> Result<crate::pg::owner::AsClient, DocstoreError> {
    crate::guc::set_local(c"docstore.auth", auth)?;
    crate::guc::set_local(c"docstore.request", request)?;
    crate::pg::owner::AsClient::new()
}

/// Write a whole document (or, with `merge`, only the given fields). Returns the update time.
///
/// ```sql
/// select docstore.set('restaurants/one', '{"city": "SF", "avgRating": 4.5}');
/// select docstore.set('restaurants/one', '{"address": {"zip": "94103"}}', merge => true);
/// ```
#[pg_extern(volatile)]
fn set(
    path: &str,
    data: DocumentJsonb,
    merge: default!(bool, false),
) -> Result<TimestampWithTimeZone, ErrorReport> {
    let path = ResourcePath::parse_document(path).map_err(DocstoreError::from)?;
    Ok(write_one(
        path,
        WriteKind::Set { merge },
        &data.text,
        Some(data.datum),
        false,
    )?)
}

/// The newest commit time of this Postgres instance (docs/storage.md, "Commit times"): the
/// last time a docstore write assigned since the server started, else the server's start
/// time; NULL when the library is not in `shared_preload_libraries`. A read at a time at or
/// after it, taken after the read's snapshot, reads what a read at that time would.
///
/// ```sql
/// select docstore.last_commit_time();
/// ```
#[pg_extern(volatile, parallel_safe)]
fn last_commit_time() -> Result<Option<TimestampWithTimeZone>, ErrorReport> {
    Ok(crate::pg::commit_clock::latest()
        .map(to_timestamptz)
        .transpose()?)
}

/// Create a document; fails with 23505 when it exists.
///
/// ```sql
/// select docstore.create('restaurants/two', '{"city": "LA"}');
/// ```
#[pg_extern(volatile)]
fn create(path: &str, data: DocumentJsonb) -> Result<TimestampWithTimeZone, ErrorReport> {
    let path = ResourcePath::parse_document(path).map_err(DocstoreError::from)?;
    Ok(write_one(
        path,
        WriteKind::Create,
        &data.text,
        Some(data.datum),
        false,
    )?)
}

/// Create a document with a random 20-character ID in `collection`; returns its path.
///
/// ```sql
/// select docstore.add('restaurants/one/ratings', '{"rating": 5}');
/// ```
#[pg_extern(volatile)]
fn add(collection: &str, data: DocumentJsonb) -> Result<String, ErrorReport> {
    Ok(add_one(collection, data)?.0.to_string())
}

/// [`add`]'s write, shared by `add_document`: the new document's path and its commit time.
fn add_one(
    collection: &str,
    data: DocumentJsonb,
) -> Result<(ResourcePath, TimestampWithTimeZone), DocstoreError> {
    let collection = ResourcePath::parse_collection(collection).map_err(DocstoreError::from)?;
    let path = collection.child(&auto_id()?).map_err(DocstoreError::from)?;
    let time = write_one(
        path.clone(),
        WriteKind::Create,
        &data.text,
        Some(data.datum),
        true,
    )?;
    Ok((path, time))
}

/// The rows of `add_document` and `add_document_as_client`: the new document's path, its data
/// as stored, its create and update time (the same).
type AddedRow = TableIterator<
    'static,
    (
        name!(path, String),
        name!(data, JsonbOut),
        name!(create_time, TimestampWithTimeZone),
        name!(update_time, TimestampWithTimeZone),
    ),
>;

/// [`add`] in the database `database`, then the document as stored: the write's own commit
/// time and the data read below the executor (no SQL query; no rights or row-level security:
/// the caller has just been allowed to write exactly this document).
fn added_row(
    collection: &str,
    data: DocumentJsonb,
    database: &str,
) -> Result<AddedRow, DocstoreError> {
    crate::guc::set_local(c"docstore.database", database)?;
    let database = database_id()?;
    let (path, time) = add_one(collection, data)?;
    let shown = path.to_string();
    let name = docstore_core::encoding::encode_name(&path);
    let stored = entities::read_data(&database, &name)?.ok_or_else(|| {
        DocstoreError::Internal(format!("document {shown} was not found after its write"))
    })?;
    Ok(TableIterator::once((
        shown,
        JsonbOut::Stored(stored),
        time,
        time,
    )))
}

/// The sidecar's `POST` to a collection in one statement: [`add`] in the database `database`
/// (set until the end of the transaction, as `set_config('docstore.database', .., true)`),
/// returning the new document as stored (path, data, create and update time), what reading it
/// back would return.
///
/// ```sql
/// select * from docstore.add_document('restaurants/one/ratings', '{"rating": 5}', '(default)');
/// ```
#[pg_extern(volatile)]
fn add_document(
    collection: &str,
    data: DocumentJsonb,
    database: &str,
) -> Result<
    TableIterator<
        'static,
        (
            name!(path, String),
            name!(data, JsonbOut),
            name!(create_time, TimestampWithTimeZone),
            name!(update_time, TimestampWithTimeZone),
        ),
    >,
    ErrorReport,
> {
    Ok(added_row(collection, data, database)?)
}

/// A client's `POST` to a collection in one statement, for the sidecar: sets `docstore.auth`,
/// `docstore.request` and `docstore.database` until the end of the transaction with the
/// caller's own rights, then adds as `docstore_client` exactly as [`add`] does (the `create`
/// rule decides; 42501 when it denies) and returns the document as [`add_document`] does. The
/// same as `begin; select set_config(..); set local role docstore_client; select
/// docstore.add(collection, data); <read back>; commit` in one statement. Not executable by
/// PUBLIC or docstore_client (`roles.sql`), like [`get_document_as_client`].
///
/// ```sql
/// select * from docstore.add_document_as_client('rooms', '{"owner": "alice"}', '{"sub": "alice"}', '{}', '(default)');
/// ```
#[pg_extern(volatile)]
fn add_document_as_client(
    collection: &str,
    data: DocumentJsonb,
    auth: &str,
    request: &str,
    database: &str,
) -> Result<
    TableIterator<
        'static,
        (
            name!(path, String),
            name!(data, JsonbOut),
            name!(create_time, TimestampWithTimeZone),
            name!(update_time, TimestampWithTimeZone),
        ),
    >,
    ErrorReport,
> {
    let _client = act_as_client(auth, request)?;
    Ok(added_row(collection, data, database)?)
}

/// Change fields of an existing document (keys are field paths; values may be transforms).
/// Fails with P0002 when the document does not exist.
///
/// ```sql
/// select docstore.update('restaurants/one', '{"numRatings": {"$increment": 1}, "address.zip": "94107"}');
/// ```
#[pg_extern(volatile)]
fn update(path: &str, fields: TypedJsonb) -> Result<TimestampWithTimeZone, ErrorReport> {
    let path = ResourcePath::parse_document(path).map_err(DocstoreError::from)?;
    Ok(write_one(path, WriteKind::Update, &fields, None, false)?)
}

/// Delete a document; true when it existed.
///
/// ```sql
/// select docstore.delete('restaurants/two');
/// ```
#[pg_extern(volatile)]
fn delete(path: &str) -> Result<bool, ErrorReport> {
    let path = ResourcePath::parse_document(path).map_err(DocstoreError::from)?;
    let database = database_id()?;
    let write = Write {
        path,
        operation: Operation::Delete,
        precondition: None,
        generated_id: false,
        verbatim: None,
    };
    let result = Spi::connect_mut(|client| writes::commit(client, &database, &[write]))?;
    Ok(result.existed.first().copied().unwrap_or(false))
}

/// Apply a batch of writes atomically, in order. Returns
/// `{"commitTime": "...", "updateTimes": ["...", ...]}` (a `verify` entry's time is the
/// document's current update time, or null when it does not exist).
///
/// ```sql
/// select docstore.commit('[
///   {"create": "rooms/a", "data": {"n": 0}},
///   {"update": "rooms/b", "fields": {"n": {"$increment": 1}}, "precondition": {"exists": true}},
///   {"delete": "rooms/c"}
/// ]');
/// ```
#[pg_extern(volatile)]
fn commit(writes: TypedJsonb) -> Result<TypedJsonb, ErrorReport> {
    let database = database_id()?;
    let json = json_of(&writes)?;
    let parsed = batch::parse(&json)?;
    let result = Spi::connect_mut(|client| writes::commit(client, &database, &parsed))?;
    let time = to_timestamp(result.commit_time)?.to_rfc3339();
    let times = result
        .update_times
        .iter()
        .map(|t| match t {
            Some(t) if *t == result.commit_time => Ok(time.clone().into()),
            Some(t) => Ok(to_timestamp(*t)?.to_rfc3339().into()),
            None => Ok(serde_json::Value::Null),
        })
        .collect::<Result<Vec<serde_json::Value>, DocstoreError>>()?;
    let out = serde_json::json!({"commitTime": time, "updateTimes": times});
    Ok(TypedJsonb(out.to_string()))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use pgrx::prelude::*;

    fn get(path: &str) -> Option<String> {
        Spi::get_one::<String>(&format!("select docstore.get('{path}')::text"))
            .ok()
            .flatten()
    }

    #[pg_test]
    fn set_get_update_delete() {
        Spi::run("select docstore.set('pt/a', '{\"n\": 1, \"m\": {\"x\": true}}')").unwrap();
        assert_eq!(
            get("pt/a").as_deref(),
            Some("{\"m\": {\"x\": true}, \"n\": 1}")
        );
        Spi::run("select docstore.update('pt/a', '{\"n\": {\"$increment\": 2}, \"m.y\": \"z\"}')")
            .unwrap();
        assert_eq!(
            get("pt/a").as_deref(),
            Some("{\"m\": {\"x\": true, \"y\": \"z\"}, \"n\": 3}")
        );
        assert_eq!(
            Spi::get_one::<bool>("select docstore.delete('pt/a')"),
            Ok(Some(true))
        );
        assert_eq!(get("pt/a"), None);
        let leftovers = Spi::get_one::<i64>("select count(*) from docstore.index_entries");
        assert_eq!(
            leftovers,
            Ok(Some(0)),
            "deleting a document removes its entries"
        );
    }

    #[pg_test]
    fn entries_follow_every_write() {
        Spi::run("select docstore.set('pt/b', '{\"a\": 1, \"tags\": [\"x\", \"y\"]}')").unwrap();
        Spi::run(
            "select docstore.set('pt/b', '{\"tags\": [\"y\"], \"b\": {\"c\": 2}}', merge => true)",
        )
        .unwrap();
        let problems = Spi::get_one::<i64>("select count(*) from docstore.check_indexes()");
        assert_eq!(problems, Ok(Some(0)));
        let entries = Spi::get_one::<i64>("select count(*) from docstore.index_entries");
        // a, tags, tags contains y, b, b.c
        assert_eq!(entries, Ok(Some(5)));
    }

    #[pg_test]
    fn added_ids_are_distinct_and_use_the_whole_alphabet() {
        // 3,000 IDs span several refills of the backend's random byte pool.
        Spi::run("select docstore.add('ids', '{}') from generate_series(1, 3000)").unwrap();
        let row = Spi::get_three::<i64, i64, bool>(
            "select count(distinct path), count(*), \
                    bool_and(path ~ '^ids/[A-Za-z0-9]{20}$') \
             from docstore.documents where collection = 'ids'",
        )
        .unwrap();
        assert_eq!(row, (Some(3000), Some(3000), Some(true)));
        // Every position takes every one of the 62 characters (3,000 draws each).
        let narrow = Spi::get_one::<i64>(
            "select count(*) from generate_series(1, 20) i \
             where (select count(distinct substr(split_part(path, '/', 2), i, 1)) \
                    from docstore.documents where collection = 'ids') <> 62",
        );
        assert_eq!(narrow, Ok(Some(0)));
    }

    /// docs/storage.md, "Commit times": a write's time is taken when it is applied, not when
    /// its transaction began; the write calls of one transaction share it, except where a
    /// document's own time must move past its previous one.
    #[pg_test]
    fn commit_time_is_taken_at_the_write_and_shared_by_the_transaction() {
        // The whole test is one transaction: now() is its start.
        Spi::run("select pg_sleep(0.01)").unwrap();
        Spi::run("select docstore.set('pt/t1', '{}'), docstore.set('pt/t2', '{}')").unwrap();
        let time = |path: &str| {
            Spi::get_one::<i64>(&format!(
                "select (extract(epoch from update_time) * 1000000)::bigint \
                 from docstore.documents where path = '{path}'"
            ))
            .unwrap()
            .unwrap()
        };
        let after_begin = Spi::get_one::<bool>(
            "select update_time > now() from docstore.documents where path = 'pt/t1'",
        );
        assert_eq!(
            after_begin,
            Ok(Some(true)),
            "taken at the write, not at BEGIN"
        );
        let first = time("pt/t1");
        assert_eq!(time("pt/t2"), first, "one transaction, one time");
        Spi::run("select docstore.set('pt/t1', '{\"n\": 1}')").unwrap();
        assert_eq!(
            time("pt/t1"),
            first + 1,
            "a document's times strictly increase"
        );
        Spi::run("select docstore.set('pt/t3', '{}')").unwrap();
        assert_eq!(time("pt/t3"), first, "the transaction keeps its time");
    }

    #[pg_test(error = "document not found: pt/missing")]
    fn update_of_a_missing_document() {
        Spi::run("select docstore.update('pt/missing', '{\"n\": 1}')").unwrap();
    }

    #[pg_test(error = "document already exists: pt/c")]
    fn create_of_an_existing_document() {
        Spi::run("select docstore.create('pt/c', '{}')").unwrap();
        Spi::run("select docstore.create('pt/c', '{}')").unwrap();
    }

    #[pg_test(error = "write 1: precondition failed for pt/none: the document does not exist")]
    fn failed_precondition_names_the_write() {
        Spi::run(
            "select docstore.commit('[{\"set\": \"pt/d\", \"data\": {}}, \
             {\"update\": \"pt/none\", \"fields\": {}, \"precondition\": {\"exists\": true}}]')",
        )
        .unwrap();
    }
}
