//! Which database ids exist: the extension's catalog `docstore.databases`, with positive
//! answers cached briefly (a request to an existing database costs no extra query).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_postgres::Client;

use super::PgError;

/// How long an id found in the catalog is believed to exist.
pub const POSITIVE_TTL: Duration = Duration::from_secs(10);

/// The default database, which always exists.
pub use docstore_core::path::DEFAULT_DATABASE;

/// Ids seen in the catalog, with when.
#[derive(Clone, Default)]
pub struct DatabaseCache {
    seen: Arc<Mutex<HashMap<String, Instant>>>,
}

impl DatabaseCache {
    pub fn new() -> DatabaseCache {
        DatabaseCache::default()
    }

    fn cached(&self, id: &str) -> bool {
        let Ok(seen) = self.seen.lock() else {
            return false;
        };
        seen.get(id).is_some_and(|at| at.elapsed() < POSITIVE_TTL)
    }

    fn remember(&self, id: &str) {
        if let Ok(mut seen) = self.seen.lock() {
            // Only existing ids are kept, so the map is as large as the catalog; drop stale
            // entries now and then all the same.
            if seen.len() > 10_000 {
                seen.retain(|_, at| at.elapsed() < POSITIVE_TTL);
            }
            seen.insert(id.to_owned(), Instant::now());
        }
    }

    /// Whether database `id` exists (the default one always does).
    ///
    /// # Errors
    /// [`PgError::NoSuchDatabase`], or the catalog query failed.
    ///
    /// # Cancel safety
    /// A single read outside any transaction: dropping the future leaves nothing behind.
    pub async fn check(&self, client: &Client, id: &str) -> Result<(), PgError> {
        if id == DEFAULT_DATABASE || self.cached(id) {
            return Ok(());
        }
        // Asked at most once per id per POSITIVE_TTL: not worth a statement kept prepared.
        let found = client
            .query_opt("select 1 from docstore.databases where id = $1", &[&id])
            .await?;
        if found.is_some() {
            self.remember(id);
            Ok(())
        } else {
            Err(PgError::NoSuchDatabase(id.to_owned()))
        }
    }
}

/// Create database `id` unless it exists, with automatic composite indexes on
/// (`docstore.create_database_for_dev`, one statement, so one transaction): how
/// development mode treats a database a request names (docs/grpc.md, "Names"). An id found or
/// created is remembered as [`DatabaseCache::check`] remembers it, so a database costs this
/// query once per [`POSITIVE_TTL`]. Concurrent first requests are safe: the catalog's key
/// makes the second creation wait for the first to commit, then fail with 23505, which means
/// the database exists.
///
/// # Errors
/// The catalog's answers failed, or the sidecar's role may not create databases (42501: the
/// function is revoked from everyone; sql/sidecar_role.sql grants it to the sidecar's login
/// only with `-v dev_mode=on`).
///
/// # Cancel safety
/// Dropped mid-way, the one statement commits whole or not at all; a later request checks the
/// catalog again.
pub async fn create_on_first_use(db: &super::Db, id: &str) -> Result<(), PgError> {
    if id == DEFAULT_DATABASE || db.databases.cached(id) {
        return Ok(());
    }
    let client = db.pool.get().await?;
    match db.databases.check(&client, id).await {
        Err(PgError::NoSuchDatabase(_)) => {}
        other => return other,
    }
    let created = client
        .execute("select docstore.create_database_for_dev($1)", &[&id])
        .await;
    match created {
        Ok(_) => {}
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
            // Created meanwhile by another request.
        }
        Err(e) => return Err(e.into()),
    }
    db.databases.remember(id);
    Ok(())
}
