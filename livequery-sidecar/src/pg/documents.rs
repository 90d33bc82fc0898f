//! Statements of the document endpoints. Every write goes through the extension's functions
//! (`docstore.commit`, `docstore.add`, `docstore.delete`): one write path.

use docstore_core::encoding::encode_name;
use docstore_core::ResourcePath;

use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::types::{JsonText, PgTime, RawJson};
use super::{Db, PgError, RequestTx, RunAs, CLIENT_ROLE, SETTINGS_SQL};

const READ_SQL: &str = "select data, create_time, update_time from docstore.entities \
                        where database_id = $1 and name = $2";

/// A client's read of one document: the extension's `get_document`, which the database's `get`
/// rule decides (42501 when it denies; a missing document is decided with `resource` = null).
/// A plain read of `docstore.entities` would be filtered by the `list` rule's row-level
/// security instead, and a denial would look like a missing document.
const CLIENT_READ_SQL: &str =
    "select data, create_time, update_time from docstore.get_document($1)";

/// A stored document with its times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub path: String,
    /// Typed JSON.
    pub data: RawJson,
    pub create_time: PgTime,
    pub update_time: PgTime,
}

/// Read one document of `database` in the request's transaction (`None`: it does not exist).
/// One primary-key lookup by the document's encoded name (docstore-core's encoding).
///
/// # Errors
/// Postgres errors (permission denied included).
///
/// # Cancel safety
/// Dropping the future drops nothing but the read; the caller's [`RequestTx`] decides.
pub async fn read(
    tx: &RequestTx,
    database: &str,
    path: &ResourcePath,
) -> Result<Option<Document>, PgError> {
    let client = tx.client()?;
    let stmt = client.prepare_cached(READ_SQL).await?;
    let name = encode_name(path);
    let row = client.query_opt(&stmt, &[&database, &name]).await?;
    document_of(path, row)
}

/// Read one document as `run_as` in the request's transaction: the admin reads its row (as
/// [`read`]); a client reads through `docstore.get_document`, so the database's `get` rule
/// decides (a denial is an error, not a missing document).
///
/// # Errors
/// Postgres errors (42501 when the `get` rule denies).
///
/// # Cancel safety
/// As [`read`].
pub async fn read_as(
    tx: &RequestTx,
    database: &str,
    run_as: &RunAs,
    path: &ResourcePath,
) -> Result<Option<Document>, PgError> {
    if *run_as == RunAs::Admin {
        return read(tx, database, path).await;
    }
    let client = tx.client()?;
    let stmt = client.prepare_cached(CLIENT_READ_SQL).await?;
    let row = client.query_opt(&stmt, &[&path.to_string()]).await?;
    document_of(path, row)
}

/// The admin's read of many documents: a row per requested name, in request order (a
/// primary-key lookup each).
const READ_MANY_SQL: &str = "select e.data, e.create_time, e.update_time, statement_timestamp() \
     from unnest($2::bytea[]) with ordinality as u(name, i) \
     left join docstore.entities e on e.database_id = $1 and e.name = u.name \
     order by u.i";

/// A client's read of many documents: `get_document` (the `get` rule deciding each) per path,
/// in one statement. Its reads take snapshots of their own under READ COMMITTED, so the
/// caller runs it in a REPEATABLE READ transaction ([`Db::begin_snapshot_with`]).
const CLIENT_READ_MANY_SQL: &str =
    "select d.data, d.create_time, d.update_time, statement_timestamp() \
     from unnest($1::text[]) with ordinality as u(path, i) \
     left join lateral docstore.get_document(u.path) d on true \
     order by u.i";

/// What [`read_many`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadMany {
    /// The start of the reading statement.
    pub read_time: PgTime,
    /// Per requested path, in order: the document, or `None` when it does not exist.
    pub documents: Vec<Option<Document>>,
}

/// Read `paths` (1 or more) as `run_as` in the request's transaction, in one statement: the
/// admin reads the rows, a client reads each through `docstore.get_document`, so the `get`
/// rule decides each as for a GET (42501 when it denies one). One snapshot only when the
/// transaction is REPEATABLE READ ([`Db::begin_snapshot_with`]).
///
/// # Errors
/// Postgres errors (42501 when the `get` rule denies a path); an answer of the wrong size.
///
/// # Cancel safety
/// As [`read`].
pub async fn read_many(
    tx: &RequestTx,
    database: &str,
    run_as: &RunAs,
    paths: &[ResourcePath],
) -> Result<ReadMany, PgError> {
    let client = tx.client()?;
    let rows = if *run_as == RunAs::Admin {
        let stmt = client.prepare_cached(READ_MANY_SQL).await?;
        let names: Vec<Vec<u8>> = paths.iter().map(encode_name).collect();
        client.query(&stmt, &[&database, &names]).await?
    } else {
        let stmt = client.prepare_cached(CLIENT_READ_MANY_SQL).await?;
        let texts: Vec<String> = paths.iter().map(ResourcePath::to_string).collect();
        client.query(&stmt, &[&texts]).await?
    };
    many_of(paths, &rows)
}

/// A read of many documents as they were at a time (`$2`, RFC 3339): the extension's
/// `get_document_at` per path, which decides a client's read by the `get` rule on the document
/// as it was. The answer's read time is that time.
const READ_MANY_AT_SQL: &str =
    "select d.data, d.create_time, d.update_time, $2::text::timestamptz \
     from unnest($1::text[]) with ordinality as u(path, i) \
     left join lateral docstore.get_document_at(u.path, $2::text::timestamptz) d on true \
     order by u.i";

/// [`read_many`] of `paths` as they were at `at` (RFC 3339), from the version history
/// (docs/storage.md, "Version history"), as whoever the request's transaction runs as.
///
/// # Errors
/// Postgres errors (55000 for a time older than the version history, 22023 for one in the
/// future, 42501 when the `get` rule denies a path); an answer of the wrong size.
///
/// # Cancel safety
/// As [`read`].
pub async fn read_many_at(
    tx: &RequestTx,
    paths: &[ResourcePath],
    at: &str,
) -> Result<ReadMany, PgError> {
    let client = tx.client()?;
    let stmt = client.prepare_cached(READ_MANY_AT_SQL).await?;
    let texts: Vec<String> = paths.iter().map(ResourcePath::to_string).collect();
    let rows = client.query(&stmt, &[&texts, &at]).await?;
    many_of(paths, &rows)
}

/// The answer of a read of many documents: a row per path, in order, the read time in the
/// fourth column.
fn many_of(paths: &[ResourcePath], rows: &[Row]) -> Result<ReadMany, PgError> {
    if rows.len() != paths.len() {
        return Err(PgError::Decode(format!(
            "{} rows for {} documents",
            rows.len(),
            paths.len()
        )));
    }
    let read_time = match rows.first() {
        Some(row) => row.try_get(3)?,
        None => return Err(PgError::Decode("no rows for a batch read".into())),
    };
    let documents = paths
        .iter()
        .zip(rows)
        .map(|(path, row)| {
            let found: Option<RawJson> = row.try_get(0)?;
            match found {
                None => Ok(None),
                Some(data) => Ok(Some(Document {
                    path: path.to_string(),
                    data,
                    create_time: row.try_get(1)?,
                    update_time: row.try_get(2)?,
                })),
            }
        })
        .collect::<Result<Vec<_>, PgError>>()?;
    Ok(ReadMany {
        read_time,
        documents,
    })
}

fn document_of(path: &ResourcePath, row: Option<Row>) -> Result<Option<Document>, PgError> {
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some(Document {
        path: path.to_string(),
        data: row.try_get(0)?,
        create_time: row.try_get(1)?,
        update_time: row.try_get(2)?,
    }))
}

/// The client read in one statement: the extension sets the request's settings for the
/// transaction and reads as `docstore_client`, as `get_document` after `set local role` does.
const CLIENT_READ_ONE_SQL: &str = "select data, create_time, update_time \
                                   from docstore.get_document_as_client($1, $2, $3, $4)";

/// Whether this role may call each one-statement function (false when the extension predates
/// it or the role was not granted EXECUTE): the client read, the admin create, the client
/// create, in [`ONE_STATEMENT_BITS`]' order.
const CAN_ONE_STATEMENT_SQL: &str = "select \
    coalesce(has_function_privilege(\
        to_regprocedure('docstore.get_document_as_client(text, text, text, text)'), \
        'execute'), false), \
    coalesce(has_function_privilege(\
        to_regprocedure('docstore.add_document(text, jsonb, text)'), 'execute'), false), \
    coalesce(has_function_privilege(\
        to_regprocedure('docstore.add_document_as_client(text, jsonb, text, text, text)'), \
        'execute'), false)";

/// [`Db`]'s `one_statement`: not asked yet.
pub const ONE_STATEMENT_UNKNOWN: u8 = 0;
/// Set once asked, with one bit per function this role may call.
const ONE_STATEMENT_KNOWN: u8 = 0x80;
const CLIENT_READ: u8 = 1;
const ADMIN_ADD: u8 = 2;
const CLIENT_ADD: u8 = 4;
/// The bits of [`CAN_ONE_STATEMENT_SQL`]'s columns.
const ONE_STATEMENT_BITS: [u8; 3] = [CLIENT_READ, ADMIN_ADD, CLIENT_ADD];

/// Which requests go through their one-statement function ([`CLIENT_READ`], [`ADMIN_ADD`],
/// [`CLIENT_ADD`] bits), asked once per sidecar for all of them with `client` (a grant or an
/// extension upgrade later needs a restart to be used).
///
/// # Cancel safety
/// Dropped before the answer, nothing is remembered; the next call asks again.
async fn one_statement(db: &Db, client: &tokio_postgres::Client) -> Result<u8, PgError> {
    if let Some(known) = one_statement_known(db) {
        return Ok(known);
    }
    let row = client.query_one(CAN_ONE_STATEMENT_SQL, &[]).await?;
    let mut state = ONE_STATEMENT_KNOWN;
    for (i, bit) in ONE_STATEMENT_BITS.into_iter().enumerate() {
        if row.try_get::<_, bool>(i)? {
            state |= bit;
        }
    }
    db.one_statement
        .store(state, std::sync::atomic::Ordering::Relaxed);
    Ok(state)
}

/// [`one_statement`]'s answer if it was asked already.
fn one_statement_known(db: &Db) -> Option<u8> {
    let state = db.one_statement.load(std::sync::atomic::Ordering::Relaxed);
    (state & ONE_STATEMENT_KNOWN != 0).then_some(state)
}

/// Read one document in a request of its own, in one round trip: an admin read is a single
/// statement; so is a client's, through `docstore.get_document_as_client` (one autocommit
/// statement that sets the request's settings and reads as `docstore_client`, the `get` rule
/// deciding) when this role may call it; both on a shared connection ([`Db::single`]).
/// Otherwise a client's `begin`, settings, read and
/// `commit` go out together (pipelined, executed in order, so the read runs as
/// `docstore_client` with the request's settings; its result is used only when all four
/// succeeded).
///
/// # Errors
/// [`PgError::NoSuchDatabase`]; Postgres errors.
///
/// # Cancel safety
/// Dropped before the answer, the transaction is cancelled and its connection discarded
/// ([`RequestTx`]'s drop).
pub async fn get(
    db: &Db,
    database: &str,
    run_as: &RunAs,
    path: &ResourcePath,
) -> Result<Option<Document>, PgError> {
    let single = db.single().await?;
    db.databases.check(single.client(), database).await?;
    let (auth, request) = match run_as {
        RunAs::Admin => {
            let read = single.prepare(READ_SQL).await?;
            let name = encode_name(path);
            let row = single
                .client()
                .query_opt(&read, &[&database, &name])
                .await?;
            return document_of(path, row);
        }
        RunAs::Client { auth, request } => (auth, request),
    };
    if one_statement(db, single.client()).await? & CLIENT_READ != 0 {
        let read = single.prepare(CLIENT_READ_ONE_SQL).await?;
        let text_path = path.to_string();
        let params: [&(dyn ToSql + Sync); 4] = [&text_path, auth, request, &database];
        let row = single.client().query_opt(&read, &params).await?;
        return document_of(path, row);
    }
    drop(single);
    let mut tx = RequestTx {
        client: Some(db.pool.get().await?),
        open: false,
        tls: std::sync::Arc::clone(&db.tls),
    };
    let client = tx.client()?;
    let read = client.prepare_cached(CLIENT_READ_SQL).await?;
    let settings = client.prepare_cached(SETTINGS_SQL).await?;
    tx.open = true;
    let client = tx.client()?;
    let setting_params: [&(dyn ToSql + Sync); 4] = [auth, request, &database, &CLIENT_ROLE];
    let text_path = path.to_string();
    let read_params: [&(dyn ToSql + Sync); 1] = [&text_path];
    let (began, set, row, committed) = tokio::join!(
        client.batch_execute("begin"),
        client.execute(&settings, &setting_params),
        client.query_opt(&read, &read_params),
        client.batch_execute("commit"),
    );
    // A commit that went through ended the transaction (Postgres turns the commit of a
    // failed one into a rollback), so the connection can go back to the pool.
    tx.open = committed.is_err();
    began?;
    set?;
    let row = row?;
    committed?;
    document_of(path, row)
}

/// `docstore.commit(writes)`: the batch's JSON text (validated JSON); returns the
/// extension's `{"commitTime", "updateTimes"}` as text.
///
/// # Errors
/// The extension's errors (precondition 55000, not found, invalid argument, ...).
///
/// # Cancel safety
/// As [`read`].
pub async fn commit(tx: &RequestTx, writes: &str) -> Result<RawJson, PgError> {
    let client = tx.client()?;
    let stmt = client
        .prepare_cached("select docstore.commit($1::jsonb)")
        .await?;
    let row = client.query_one(&stmt, &[&JsonText(writes)]).await?;
    Ok(row.try_get(0)?)
}

/// After a commit in the request's transaction, read back `paths` (the documents whose
/// field transforms' results a gRPC Commit reports) as the session's role: the caller was
/// allowed the write, and what it learns is only its own transforms' results (as Firestore
/// answers them), so the `get` rule does not decide this read. The role is the session's for
/// the rest of the transaction: call it last, before the commit. Empty `paths`: no statement.
///
/// # Errors
/// Postgres errors.
///
/// # Cancel safety
/// As [`read`].
pub async fn read_written(
    tx: &RequestTx,
    database: &str,
    paths: &[ResourcePath],
) -> Result<Vec<Option<Document>>, PgError> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let client = tx.client()?;
    let stmt = client
        .prepare_cached("select set_config('role', 'none', true)")
        .await?;
    client.query_one(&stmt, &[]).await?;
    Ok(read_many(tx, database, &RunAs::Admin, paths)
        .await?
        .documents)
}

/// `docstore.commit(writes)`, then the read of `path` (as [`read`]), sent together: both
/// statements are prepared first, so their executions go out in this order in one round trip
/// (a statement still to be prepared would make its future wait, and the other one overtake
/// it). A failed commit aborts the transaction, so the read then fails too; the commit's error
/// is reported.
///
/// # Errors
/// The extension's errors; Postgres errors.
///
/// # Cancel safety
/// As [`read`].
pub async fn commit_and_read(
    tx: &RequestTx,
    writes: &str,
    database: &str,
    path: &ResourcePath,
) -> Result<Option<Document>, PgError> {
    let client = tx.client()?;
    let write = client
        .prepare_cached("select docstore.commit($1::jsonb)")
        .await?;
    let read = client.prepare_cached(READ_SQL).await?;
    let name = encode_name(path);
    let write_params: [&(dyn ToSql + Sync); 1] = [&JsonText(writes)];
    let read_params: [&(dyn ToSql + Sync); 2] = [&database, &name];
    let (written, row) = tokio::join!(
        client.query_one(&write, &write_params),
        client.query_opt(&read, &read_params),
    );
    written?;
    document_of(path, row?)
}

/// `docstore.add(collection, data)`: a new document with a random id; returns its path.
///
/// # Errors
/// The extension's errors.
///
/// # Cancel safety
/// As [`read`].
pub async fn add(tx: &RequestTx, collection: &str, data: &str) -> Result<String, PgError> {
    let client = tx.client()?;
    let stmt = client
        .prepare_cached("select docstore.add($1, $2::jsonb)")
        .await?;
    let row = client
        .query_one(&stmt, &[&collection, &JsonText(data)])
        .await?;
    Ok(row.try_get(0)?)
}

/// A create in one autocommit statement: the extension sets `docstore.database` for it, adds
/// the document as `docstore.add` does and returns it as stored (what reading it back returns).
const ADD_ONE_SQL: &str = "select path, data, create_time, update_time \
                           from docstore.add_document($1, $2::jsonb, $3)";

/// A client's create in one autocommit statement: the request's settings, then the add as
/// `docstore_client` (the `create` rule decides), as [`ADD_ONE_SQL`] otherwise.
const CLIENT_ADD_ONE_SQL: &str = "select path, data, create_time, update_time \
    from docstore.add_document_as_client($1, $2::jsonb, $3, $4, $5)";

/// Whether a create as `run_as` goes through `docstore.add_document` (admin) or
/// `docstore.add_document_as_client` (client): see [`one_statement`].
///
/// # Errors
/// No connection; Postgres errors.
///
/// # Cancel safety
/// Dropped before the answer, nothing is remembered; the next call asks again.
pub async fn adds_in_one_statement(db: &Db, run_as: &RunAs) -> Result<bool, PgError> {
    let bit = match run_as {
        RunAs::Admin => ADMIN_ADD,
        RunAs::Client { .. } => CLIENT_ADD,
    };
    let state = match one_statement_known(db) {
        Some(known) => known,
        None => one_statement(db, db.single().await?.client()).await?,
    };
    Ok(state & bit != 0)
}

/// Create a document with a random id in `collection` in one autocommit statement
/// (`docstore.add_document`, or `docstore.add_document_as_client` for a client, whose
/// `create` rule decides), returning it as stored. On a pooled connection, not a shared one:
/// a write waits for its commit's WAL flush, and Postgres flushes the commits of all the
/// backends waiting at once together, so writes need many backends, not a few pipelined
/// ones (four shared connections served 0.4x the creates of the pool when a flush took
/// milliseconds: BENCHMARKS.md, "Sidecar HTTP"). Only when [`adds_in_one_statement`] says
/// this role may.
///
/// # Errors
/// [`PgError::NoSuchDatabase`]; the extension's errors (42501 when the rule denies);
/// [`PgError::Decode`] for a returned path that is not a document's.
///
/// # Cancel safety
/// Dropped before the answer, the statement may or may not have committed, as with any lost
/// connection; nothing is left open (autocommit).
pub async fn add_one(
    db: &Db,
    database: &str,
    run_as: &RunAs,
    collection: &str,
    data: &str,
) -> Result<Document, PgError> {
    let client = db.pool.get().await?;
    db.databases.check(&client, database).await?;
    let row = match run_as {
        RunAs::Admin => {
            let stmt = client.prepare_cached(ADD_ONE_SQL).await?;
            let params: [&(dyn ToSql + Sync); 3] = [&collection, &JsonText(data), &database];
            client.query_one(&stmt, &params).await?
        }
        RunAs::Client { auth, request } => {
            let stmt = client.prepare_cached(CLIENT_ADD_ONE_SQL).await?;
            let params: [&(dyn ToSql + Sync); 5] =
                [&collection, &JsonText(data), auth, request, &database];
            client.query_one(&stmt, &params).await?
        }
    };
    let path: String = row.try_get(0)?;
    let resource = ResourcePath::parse_document(&path)
        .map_err(|e| PgError::Decode(format!("docstore.add_document returned {path:?}: {e}")))?;
    Ok(Document {
        path: resource.to_string(),
        data: row.try_get(1)?,
        create_time: row.try_get(2)?,
        update_time: row.try_get(3)?,
    })
}

/// `docstore.delete(path)`: whether the document existed.
///
/// # Errors
/// The extension's errors.
///
/// # Cancel safety
/// As [`read`].
pub async fn delete(tx: &RequestTx, path: &str) -> Result<bool, PgError> {
    let client = tx.client()?;
    let stmt = client.prepare_cached("select docstore.delete($1)").await?;
    let row = client.query_one(&stmt, &[&path]).await?;
    Ok(row.try_get(0)?)
}
