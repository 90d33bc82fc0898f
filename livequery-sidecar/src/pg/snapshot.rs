//! The initial reads of live targets (docs/architecture.md, "Exact snapshot hand-off"): one
//! `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY` transaction under the caller's auth, in
//! which every target's rows are read and `pg_current_snapshot()` with the WAL insert
//! position are taken.
//!
//! The position is `pg_current_wal_insert_lsn()`, not `pg_current_wal_lsn()` (the *write*
//! position): a commit becomes visible only after its record was inserted, but with
//! `synchronous_commit = off` not necessarily after it was written, so only the insert
//! position is at or past the commit record of every transaction the snapshot sees.

use docstore_core::path::ResourcePath;
use docstore_core::value::Timestamp;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::types::{JsonText, PgTime, RawJson};
use super::{Db, PgError, RequestTx, RunAs, CLIENT_ROLE, SETTINGS_SQL};
use crate::changelog::Snapshot;
use crate::matcher::Document;
use crate::source::Lsn;

/// What one target reads: a query (structured JSON text, whole documents) or one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetch {
    /// `docstore.run_query($1::jsonb)`.
    Query(String),
    /// One document by name.
    Document(ResourcePath),
}

/// The snapshot the rows were read in, and the WAL insert position after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPoint {
    pub snapshot: Snapshot,
    pub lsn: Lsn,
}

impl Db {
    /// Begin a `REPEATABLE READ READ ONLY` transaction in `database` as `run_as` (the
    /// settings run inside it, after `begin`, so the snapshot is taken by the first read).
    ///
    /// # Errors
    /// [`PgError::NoSuchDatabase`]; Postgres errors.
    ///
    /// # Cancel safety
    /// As [`Db::begin`].
    pub async fn begin_snapshot(
        &self,
        database: &str,
        run_as: &RunAs,
    ) -> Result<RequestTx, PgError> {
        let client = self.pool.get().await?;
        let mut tx = RequestTx {
            client: Some(client),
            open: false,
            tls: std::sync::Arc::clone(&self.tls),
        };
        let client = tx.client()?;
        self.databases.check(client, database).await?;
        tx.open = true;
        let client = tx.client()?;
        client
            .batch_execute("begin isolation level repeatable read read only")
            .await?;
        match run_as {
            RunAs::Admin => {
                let stmt = client
                    .prepare_cached("select set_config('docstore.database', $1, true)")
                    .await?;
                client.execute(&stmt, &[&database]).await?;
            }
            RunAs::Client { auth, request } => {
                let stmt = client.prepare_cached(SETTINGS_SQL).await?;
                let params: [&(dyn ToSql + Sync); 4] = [auth, request, &database, &CLIENT_ROLE];
                client.execute(&stmt, &params).await?;
            }
        }
        Ok(tx)
    }
}

/// Read every target's rows and the read point in one snapshot transaction, then commit.
///
/// A query that needs a missing composite index (55000) in a database with automatic
/// composite indexes (docs/query.md) cannot create it here: the extension creates one only in
/// a READ COMMITTED transaction, whose backfill sees every committed document. So on a 55000
/// the database's setting is read from the catalog the extension reads it from
/// ([`creates_indexes`]); where it creates indexes, the queries run once in such a
/// transaction ([`create_missing_indexes`]) and the snapshot is read again. Where it does
/// not, the 55000 is the answer, with no second run.
///
/// # Errors
/// [`PgError`]: the extension's errors of a query (a missing index, a bad query), an unknown
/// database, a lost connection.
///
/// # Cancel safety
/// Dropped midway, the transaction is cancelled and its connection discarded.
pub async fn read_targets(
    db: &Db,
    database: &str,
    run_as: &RunAs,
    fetches: &[Fetch],
) -> Result<(Vec<Vec<Document>>, ReadPoint), PgError> {
    match read_snapshot(db, database, run_as, fetches).await {
        Err(PgError::Db(e))
            if e.code() == Some(&SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE)
                && fetches.iter().any(|f| matches!(f, Fetch::Query(_))) =>
        {
            if !creates_indexes(db, database).await? {
                return Err(PgError::Db(e));
            }
            create_missing_indexes(db, database, run_as, fetches).await?;
            read_snapshot(db, database, run_as, fetches).await
        }
        read => read,
    }
}

/// Whether `database` creates the composite indexes its queries need
/// (`auto_composite_indexes` in `docstore.databases`; false for a database the catalog does
/// not list, as the extension reads it).
///
/// # Errors
/// Postgres errors.
///
/// # Cancel safety
/// A single read outside any transaction.
async fn creates_indexes(db: &Db, database: &str) -> Result<bool, PgError> {
    let client = db.pool.get().await?;
    let stmt = client
        .prepare_cached(
            "select coalesce((select auto_composite_indexes from docstore.databases \
             where id = $1), false)",
        )
        .await?;
    let row = client.query_one(&stmt, &[&database]).await?;
    Ok(row.try_get(0)?)
}

/// Run each query of `fetches` in a READ COMMITTED transaction as `run_as` (its first row
/// only): a database with automatic composite indexes creates and builds the indexes they
/// need, committed with it.
///
/// # Errors
/// The queries' errors (55000 where the index cannot be created).
///
/// # Cancel safety
/// Dropped midway, the transaction is cancelled and nothing is created.
async fn create_missing_indexes(
    db: &Db,
    database: &str,
    run_as: &RunAs,
    fetches: &[Fetch],
) -> Result<(), PgError> {
    let tx = db.begin(database, run_as).await?;
    let client = tx.client()?;
    for fetch in fetches {
        if let Fetch::Query(structured) = fetch {
            let stmt = client
                .prepare_cached("select 1 from docstore.run_query($1::jsonb) limit 1")
                .await?;
            client.query(&stmt, &[&JsonText(structured)]).await?;
        }
    }
    tx.commit().await
}

/// [`read_targets`]' one snapshot transaction.
async fn read_snapshot(
    db: &Db,
    database: &str,
    run_as: &RunAs,
    fetches: &[Fetch],
) -> Result<(Vec<Vec<Document>>, ReadPoint), PgError> {
    let tx = db.begin_snapshot(database, run_as).await?;
    let client = tx.client()?;
    // The snapshot is taken by this first statement of the transaction.
    let row = client
        .query_one(
            "select pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text",
            &[],
        )
        .await?;
    let snapshot: String = row.try_get(0)?;
    let lsn: String = row.try_get(1)?;
    let snapshot = Snapshot::parse(&snapshot).map_err(|e| PgError::Decode(e.to_string()))?;
    let lsn = Lsn::parse(&lsn).ok_or_else(|| PgError::Decode(format!("WAL position {lsn:?}")))?;
    let mut out = Vec::with_capacity(fetches.len());
    for fetch in fetches {
        out.push(match fetch {
            Fetch::Query(structured) => {
                let stmt = client
                    .prepare_cached(
                        "select path, data, create_time, update_time \
                         from docstore.run_query($1::jsonb)",
                    )
                    .await?;
                let rows = client.query(&stmt, &[&JsonText(structured)]).await?;
                let mut docs = Vec::with_capacity(rows.len());
                for row in rows {
                    let path: String = row.try_get(0)?;
                    let data: RawJson = row.try_get(1)?;
                    let created: Option<PgTime> = row.try_get(2)?;
                    let time: Option<PgTime> = row.try_get(3)?;
                    let path = ResourcePath::parse_document(&path)
                        .map_err(|e| PgError::Decode(format!("result path {path:?}: {e}")))?;
                    docs.push(document(path, &data, created, time)?);
                }
                docs
            }
            Fetch::Document(path) => {
                match super::documents::read_as(&tx, database, run_as, path).await? {
                    Some(doc) => vec![document(
                        path.clone(),
                        &doc.data,
                        Some(doc.create_time),
                        Some(doc.update_time),
                    )?],
                    None => Vec::new(),
                }
            }
        });
    }
    tx.commit().await?;
    Ok((out, ReadPoint { snapshot, lsn }))
}

/// `pg_current_snapshot()` alone (for the changelog's unpinning), on a plain connection.
///
/// # Errors
/// Postgres errors, or text that is not a snapshot.
///
/// # Cancel safety
/// Cancel-safe: a single read.
pub async fn current_snapshot(client: &tokio_postgres::Client) -> Result<Snapshot, PgError> {
    let row = client
        .query_one("select pg_current_snapshot()::text", &[])
        .await?;
    let text: String = row.try_get(0)?;
    Snapshot::parse(&text).map_err(|e| PgError::Decode(e.to_string()))
}

fn document(
    path: ResourcePath,
    data: &RawJson,
    created: Option<PgTime>,
    time: Option<PgTime>,
) -> Result<Document, PgError> {
    let fields = docstore_core::typed_json::parse(&data.0)
        .map_err(|e| PgError::Decode(format!("data of {path}: {e}")))?;
    let docstore_core::value::Value::Map(fields) = fields else {
        return Err(PgError::Decode(format!("data of {path} is not a map")));
    };
    let time = time
        .and_then(|t| Timestamp::from_postgres_micros(t.0))
        .ok_or_else(|| PgError::Decode(format!("update time of {path}")))?;
    let created = created
        .and_then(|t| Timestamp::from_postgres_micros(t.0))
        .ok_or_else(|| PgError::Decode(format!("create time of {path}")))?;
    Ok(Document::new(path, fields, created, time))
}
