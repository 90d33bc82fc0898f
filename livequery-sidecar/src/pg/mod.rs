//! The SQL the sidecar runs through tokio-postgres: a connection pool, one transaction per
//! request ([`RequestTx`]) that carries the caller's auth into Postgres, and the statements of
//! each endpoint ([`documents`], [`query`]). Values are always bound, never spliced.

pub mod collections;
pub mod databases;
pub mod documents;
pub mod preflight;
pub mod query;
pub mod shared;
pub mod snapshot;
pub mod tls;
pub mod triggers;
pub mod types;

use std::time::Duration;

use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use thiserror::Error;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use databases::{DatabaseCache, DEFAULT_DATABASE};
use shared::Shared;

/// The `application_name` of the sidecar's connections (find them in `pg_stat_activity`).
pub const APPLICATION_NAME: &str = "docstore-sidecar";

/// Default statement timeout of the pool's connections (`--statement-timeout-ms`): 30 s.
pub const DEFAULT_STATEMENT_TIMEOUT_MS: u64 = 30_000;

/// The role non-admin requests run as (created by the extension).
pub const CLIENT_ROLE: &str = "docstore_client";

/// The settings of a client request's transaction: `docstore.auth`, `docstore.request`,
/// `docstore.database`, then the role (`set local role`), all bound.
const SETTINGS_SQL: &str = "select set_config('docstore.auth', $1, true), \
                                   set_config('docstore.request', $2, true), \
                                   set_config('docstore.database', $3, true), \
                                   set_config('role', $4, true)";

/// The settings of one call in a held transaction: back to the session's role (a client
/// role may not set `docstore.auth`), `docstore.auth` and `docstore.request`, then the
/// client role again, in one statement (its calls run in order).
const CALL_SETTINGS_SQL: &str = "select set_config('role', 'none', true), \
                                        set_config('docstore.auth', $1, true), \
                                        set_config('docstore.request', $2, true), \
                                        set_config('role', $3, true)";

/// The settings of an admin request's transaction: `docstore.database` only.
const ADMIN_SETTINGS_SQL: &str = "select set_config('docstore.database', $1, true)";

/// What can fail talking to Postgres.
#[derive(Debug, Error)]
pub enum PgError {
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
    #[error("connection pool: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    /// A shared connection could not be opened ([`shared`]).
    #[error("connecting: {0}")]
    Connect(tokio_postgres::Error),
    #[error("database {0} does not exist")]
    NoSuchDatabase(String),
    #[error("unexpected answer: {0}")]
    Decode(String),
}

/// Who a request runs as.
#[derive(Debug, Clone, PartialEq)]
pub enum RunAs {
    /// The sidecar's own role; only `docstore.database` is set.
    Admin,
    /// `docstore_client`, with `docstore.auth` (JWT claims as JSON text, `null` when
    /// unauthenticated) and `docstore.request` (JSON text) set for the transaction.
    Client { auth: String, request: String },
}

/// The pool, the shared connections and the database-id cache.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
    /// Connections for the requests that are one autocommit statement (none: those take a
    /// pooled connection too).
    shared: Option<Arc<Shared>>,
    databases: DatabaseCache,
    /// Which requests this role may run in one statement (`docstore.get_document_as_client`,
    /// `add_document`, `add_document_as_client`): asked once, see `documents::one_statement`.
    one_statement: std::sync::Arc<std::sync::atomic::AtomicU8>,
    /// The TLS of the connections, for cancelling an abandoned request's statement.
    tls: Arc<tls::Tls>,
}

/// Pool sizes for `/metrics`.
#[derive(Debug, Clone, Copy)]
pub struct PoolStatus {
    pub max: usize,
    pub open: usize,
    pub idle: usize,
    pub waiting: usize,
    /// Shared connections ([`shared`]) and the requests in flight on them.
    pub shared: usize,
    pub shared_in_flight: usize,
}

impl Db {
    /// A pool of at most `size` connections to `url` (libpq URL or keyword string). Connects
    /// lazily: the first request (or `/healthz`) opens the first connection.
    ///
    /// # Errors
    /// A `url` tokio-postgres cannot parse, or a pool that cannot be built.
    pub fn connect(url: &str, size: usize) -> Result<Db, String> {
        Db::connect_with_timeout(
            url,
            size,
            shared::DEFAULT_SHARED_CONNECTIONS,
            Duration::from_millis(DEFAULT_STATEMENT_TIMEOUT_MS),
        )
    }

    /// As [`Db::connect`], with `shared` shared connections ([`shared`]; zero: none) and
    /// Postgres' `statement_timeout` set to `statement_timeout` on every connection (zero: no
    /// limit). It is a startup option of the connection, so it
    /// bounds every statement of every request (an autocommit read as well as a transaction's
    /// statements) without a statement of its own; a statement that runs longer fails with
    /// SQLSTATE 57014, which the API answers 504 DEADLINE_EXCEEDED. A `statement_timeout` in
    /// the URL's own `options` is overridden.
    ///
    /// # Errors
    /// As [`Db::connect`].
    pub fn connect_with_timeout(
        url: &str,
        size: usize,
        shared: usize,
        statement_timeout: Duration,
    ) -> Result<Db, String> {
        let tls::Postgres { mut config, tls } = tls::Postgres::parse(url)?;
        if config.get_application_name().is_none() {
            config.application_name(APPLICATION_NAME);
        }
        // Later `-c` options win in Postgres, so these go last. `docstore.database` is
        // `(default)` for the whole session (a client's startup option outranks ALTER ROLE or
        // DATABASE ... SET), so an admin request to the default database needs no settings
        // statement; every other request sets it for its transaction only.
        let timeout = format!(
            "-c statement_timeout={} -c docstore.database={DEFAULT_DATABASE}",
            statement_timeout.as_millis()
        );
        let options = match config.get_options() {
            Some(given) if !given.trim().is_empty() => format!("{given} {timeout}"),
            _ => timeout,
        };
        config.options(&options);
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        let shared = Shared::new(
            tls::Postgres {
                config: config.clone(),
                tls: tls.clone(),
            },
            shared,
        )
        .map(Arc::new);
        let cancel_tls = Arc::new(tls.clone());
        let manager = Manager::from_config(
            config,
            tls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(5)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| format!("connection pool: {e}"))?;
        Ok(Db {
            pool,
            shared,
            databases: DatabaseCache::new(),
            one_statement: std::sync::Arc::new(std::sync::atomic::AtomicU8::new(
                documents::ONE_STATEMENT_UNKNOWN,
            )),
            tls: cancel_tls,
        })
    }

    /// `select 1` on a pooled connection.
    ///
    /// # Errors
    /// No connection, or the query failed.
    ///
    /// # Cancel safety
    /// Dropping the future mid-query drops the connection's pool slot normally; a `select 1`
    /// leaves no transaction behind.
    pub async fn health(&self) -> Result<(), PgError> {
        let client = self.pool.get().await?;
        client.simple_query("select 1").await?;
        Ok(())
    }

    /// Sizes of the pool.
    pub fn status(&self) -> PoolStatus {
        let s = self.pool.status();
        let (shared, shared_in_flight) = self.shared.as_ref().map_or((0, 0), |s| s.status());
        PoolStatus {
            max: s.max_size,
            open: s.size,
            idle: s.available,
            waiting: s.waiting,
            shared,
            shared_in_flight,
        }
    }

    /// A connection for a request that is one autocommit statement: a shared one
    /// ([`shared`]), or a pooled one when there are none.
    ///
    /// # Errors
    /// No connection.
    ///
    /// # Cancel safety
    /// Dropping the future takes no connection.
    pub async fn single(&self) -> Result<Single<'_>, PgError> {
        Ok(match &self.shared {
            Some(shared) => Single::Shared(shared.get().await?),
            None => Single::Pooled(Box::new(self.pool.get().await?)),
        })
    }

    /// Begin the transaction of one request in database `database` (its id already
    /// validated), running as `run_as`.
    ///
    /// # Errors
    /// [`PgError::NoSuchDatabase`] for an id the catalog does not hold; Postgres errors.
    ///
    /// # Cancel safety
    /// As [`Db::begin_with`].
    pub async fn begin(&self, database: &str, run_as: &RunAs) -> Result<RequestTx, PgError> {
        let (tx, ()) = self
            .begin_with(
                database,
                run_as,
                async |_: &RequestTx| Ok::<(), PgError>(()),
            )
            .await?;
        Ok(tx)
    }

    /// Begin the transaction of one request in database `database` (its id already
    /// validated), running as `run_as`, and run `first` in it. `begin`, the settings and the
    /// statements `first` sends before it first waits go out together (tokio-postgres
    /// pipelines requests polled at once and Postgres runs them in order): one round trip.
    /// The settings run only inside the transaction, and a failed statement aborts it, so
    /// `first`'s statements never run without the request's role and settings; `first`'s
    /// result is used only when `begin` and the settings succeeded.
    ///
    /// # Errors
    /// [`PgError::NoSuchDatabase`] for an id the catalog does not hold; Postgres errors of
    /// `begin` or the settings; `first`'s error. On an error the transaction is rolled back.
    ///
    /// # Cancel safety
    /// Dropping the future is safe: a half-opened [`RequestTx`] is dropped with it, which
    /// cancels its statement and discards its connection.
    pub async fn begin_with<T, E>(
        &self,
        database: &str,
        run_as: &RunAs,
        first: impl AsyncFnOnce(&RequestTx) -> Result<T, E>,
    ) -> Result<(RequestTx, T), E>
    where
        E: From<PgError>,
    {
        self.begin_as("begin", database, run_as, first).await
    }

    /// [`Db::begin_with`] with a `REPEATABLE READ, READ ONLY` transaction: every statement of
    /// the request reads the one snapshot taken by its first statement (a function that runs
    /// several queries, as `docstore.get_document` for a client, included).
    ///
    /// # Errors
    /// As [`Db::begin_with`].
    ///
    /// # Cancel safety
    /// As [`Db::begin_with`].
    pub async fn begin_snapshot_with<T, E>(
        &self,
        database: &str,
        run_as: &RunAs,
        first: impl AsyncFnOnce(&RequestTx) -> Result<T, E>,
    ) -> Result<(RequestTx, T), E>
    where
        E: From<PgError>,
    {
        self.begin_as(
            "begin isolation level repeatable read, read only",
            database,
            run_as,
            first,
        )
        .await
    }

    /// Begin a held transaction (`service/transactions.rs`) in `database` as `run_as`: READ
    /// WRITE at READ COMMITTED, or `read_only` REPEATABLE READ READ ONLY (its snapshot is taken
    /// by the settings statement, at the begin).
    ///
    /// # Errors
    /// As [`Db::begin_with`].
    ///
    /// # Cancel safety
    /// As [`Db::begin_with`].
    pub async fn begin_held(
        &self,
        database: &str,
        run_as: &RunAs,
        read_only: bool,
    ) -> Result<RequestTx, PgError> {
        let begin = if read_only {
            "begin isolation level repeatable read, read only"
        } else {
            "begin isolation level read committed, read write"
        };
        let (tx, ()) = self
            .begin_as(begin, database, run_as, async |_: &RequestTx| {
                Ok::<(), PgError>(())
            })
            .await?;
        Ok(tx)
    }

    /// [`Db::begin_with`], beginning with the statement `begin`.
    async fn begin_as<T, E>(
        &self,
        begin: &'static str,
        database: &str,
        run_as: &RunAs,
        first: impl AsyncFnOnce(&RequestTx) -> Result<T, E>,
    ) -> Result<(RequestTx, T), E>
    where
        E: From<PgError>,
    {
        let client = self.pool.get().await.map_err(PgError::from)?;
        let mut tx = RequestTx {
            client: Some(client),
            open: false,
            tls: Arc::clone(&self.tls),
        };
        let client = tx.client()?;
        self.databases.check(client, database).await?;
        let settings = match run_as {
            // The session's value already (see `connect_with_timeout`).
            RunAs::Admin if database == DEFAULT_DATABASE => None,
            RunAs::Admin => Some(client.prepare_cached(ADMIN_SETTINGS_SQL).await),
            RunAs::Client { .. } => Some(client.prepare_cached(SETTINGS_SQL).await),
        }
        .transpose()
        .map_err(PgError::from)?;
        tx.open = true;
        let client = tx.client()?;
        let admin_params: [&(dyn ToSql + Sync); 1] = [&database];
        let client_params: [&(dyn ToSql + Sync); 4];
        let params: &[&(dyn ToSql + Sync)] = match run_as {
            RunAs::Admin => &admin_params,
            RunAs::Client { auth, request } => {
                client_params = [auth, request, &database, &CLIENT_ROLE];
                &client_params
            }
        };
        let set_settings = async {
            match &settings {
                Some(settings) => client.execute(settings, params).await.map(|_| ()),
                None => Ok(()),
            }
        };
        let (began, set, outcome) =
            tokio::join!(client.batch_execute(begin), set_settings, first(&tx));
        let outcome = match (began, set) {
            (Err(e), _) | (Ok(()), Err(e)) => Err(E::from(PgError::from(e))),
            (Ok(()), Ok(())) => outcome,
        };
        match outcome {
            Ok(value) => Ok((tx, value)),
            Err(error) => {
                if let Err(e) = tx.rollback().await {
                    tracing::debug!(error = %e, "rollback after a failed first statement");
                }
                Err(error)
            }
        }
    }
}

/// The connection of a request that is one autocommit statement ([`Db::single`]).
pub enum Single<'a> {
    Shared(shared::Lease<'a>),
    Pooled(Box<Object>),
}

impl Single<'_> {
    /// The connection.
    pub fn client(&self) -> &Client {
        match self {
            Single::Shared(lease) => lease.client(),
            Single::Pooled(object) => object,
        }
    }

    /// `sql` prepared on this connection, once per connection.
    ///
    /// # Errors
    /// Postgres refused to prepare it.
    ///
    /// # Cancel safety
    /// Dropped before the answer, nothing is remembered.
    pub async fn prepare(&self, sql: &'static str) -> Result<Statement, PgError> {
        Ok(match self {
            Single::Shared(lease) => lease.prepare(sql).await?,
            Single::Pooled(object) => object.prepare_cached(sql).await?,
        })
    }
}

/// The newest commit time of the instance (docs/storage.md, "Commit times").
const LAST_COMMIT_TIME_SQL: &str = "select docstore.last_commit_time()";

/// The transaction of one request on a pooled connection.
///
/// [`RequestTx::commit`] ends it. Dropped while open (the client went away, the handler
/// failed or its future was dropped) it leaves nothing behind: the running statement is
/// cancelled and the connection is taken out of the pool and closed, so Postgres rolls the
/// transaction back and no backend stays `idle in transaction` or waits on a lock for a
/// request nobody awaits.
pub struct RequestTx {
    client: Option<Object>,
    open: bool,
    /// The connections' TLS: the cancel request opens a connection of its own.
    tls: Arc<tls::Tls>,
}

impl RequestTx {
    /// The connection.
    ///
    /// # Errors
    /// [`PgError::Decode`] if the transaction was already ended (a bug).
    pub fn client(&self) -> Result<&Object, PgError> {
        self.client
            .as_ref()
            .ok_or_else(|| PgError::Decode("the request's transaction has ended".into()))
    }

    /// Set `docstore.auth` and `docstore.request` for the rest of the transaction: the
    /// settings of one call of a held transaction of a client.
    ///
    /// # Errors
    /// Postgres errors.
    ///
    /// # Cancel safety
    /// As [`RequestTx::commit`].
    pub async fn set_call(&self, auth: &str, request: &str) -> Result<(), PgError> {
        let client = self.client()?;
        let stmt = client.prepare_cached(CALL_SETTINGS_SQL).await?;
        client
            .execute(&stmt, &[&auth, &request, &CLIENT_ROLE])
            .await?;
        Ok(())
    }

    /// Set Postgres' `lock_timeout` for the rest of the transaction.
    ///
    /// # Errors
    /// Postgres errors.
    ///
    /// # Cancel safety
    /// As [`RequestTx::commit`].
    pub async fn set_lock_timeout(&self, timeout: Duration) -> Result<(), PgError> {
        let client = self.client()?;
        let stmt = client
            .prepare_cached("select set_config('lock_timeout', $1, true)")
            .await?;
        let millis = format!("{}ms", timeout.as_millis());
        client.execute(&stmt, &[&millis]).await?;
        Ok(())
    }

    /// [`Db::last_commit_time`] in this transaction: a statement of it, so its snapshot (a
    /// REPEATABLE READ one's) is taken before the time is read.
    ///
    /// # Errors
    /// Postgres errors.
    ///
    /// # Cancel safety
    /// As [`RequestTx::commit`].
    pub async fn last_commit_time(&self) -> Result<Option<types::PgTime>, PgError> {
        let client = self.client()?;
        let stmt = client.prepare_cached(LAST_COMMIT_TIME_SQL).await?;
        Ok(client.query_one(&stmt, &[]).await?.try_get(0)?)
    }

    /// Commit and give the connection back to the pool.
    ///
    /// # Errors
    /// The commit failed (the transaction is then rolled back by Postgres).
    ///
    /// # Cancel safety
    /// If the future is dropped before `commit` was answered, the drop handler cancels and
    /// discards the connection; the outcome of the commit is then unknown to the client, as
    /// with any lost connection.
    pub async fn commit(mut self) -> Result<(), PgError> {
        self.client()?.batch_execute("commit").await?;
        self.open = false;
        Ok(())
    }

    /// Roll back and give the connection back to the pool.
    ///
    /// # Errors
    /// The connection failed.
    ///
    /// # Cancel safety
    /// As [`RequestTx::commit`].
    pub async fn rollback(mut self) -> Result<(), PgError> {
        self.client()?.batch_execute("rollback").await?;
        self.open = false;
        Ok(())
    }
}

impl Drop for RequestTx {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let Some(object) = self.client.take() else {
            return;
        };
        let token = object.cancel_token();
        let tls = tls::Tls::clone(&self.tls);
        // Out of the pool: closing it ends the backend, which rolls back.
        let client = Object::take(object);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(e) = token.cancel_query(tls).await {
                        tracing::debug!(error = %e, "cancel of an abandoned request's statement");
                    }
                    drop(client);
                });
            }
            Err(_) => drop(client),
        }
    }
}
