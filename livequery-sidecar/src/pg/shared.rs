//! Connections that many requests use at once, for the reads that are one autocommit
//! statement (a GET of a document, the admin's or a client's through
//! `docstore.get_document_as_client`).
//!
//! A pooled connection serves one request at a time, so a request pays a whole round trip to
//! its own backend, and Postgres wakes one backend per statement. On a shared connection the
//! statements of all the requests in flight are pipelined: tokio-postgres writes every queued
//! request in one go and Postgres runs them in order, each in a transaction of its own (every
//! statement ends with its own Sync, so an error fails that statement only). A few backends
//! kept busy do the work of many that each wait for their next statement: on two cores,
//! `select docstore.get(..)` pipelined 8 deep over 4 connections ran 2.6x the statements per
//! second of 32 clients sending one at a time (pgbench, BENCHMARKS.md "Sidecar HTTP").
//!
//! Only statements that carry all their state in their parameters may run here: nothing is
//! set for the session, and a transaction's settings (`set_config(.., true)` inside the
//! extension's `*_as_client` functions) end with the statement. Requests that need a
//! transaction of their own take a pooled connection ([`super::Db::begin_with`]).
//!
//! Writes do not belong here: each waits for its commit's WAL flush before the backend takes
//! the next statement, and Postgres flushes the commits of all waiting backends together, so
//! a few shared backends would turn one flush per many writes into one per few.
//!
//! What sharing gives up, and why it is acceptable for these statements:
//! - a request whose client goes away cannot cancel its statement (a cancel would hit
//!   whichever statement the backend runs then); an autocommit read runs to its end and its
//!   answer is discarded, as a pooled autocommit statement's would be once sent;
//! - a slow statement delays the ones queued behind it on the same connection; requests go to
//!   the connection with the fewest in flight, and `statement_timeout` bounds every statement.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio_postgres::{Client, Statement};

use super::tls::Postgres;

use super::PgError;

/// Default `--shared-connections`. Each shared backend keeps one core busy when GETs queue on
/// it; on the two-core machine of BENCHMARKS.md two served more GETs than four or eight (the
/// fewer backends, the deeper each pipeline). Raise it where Postgres has more cores to give.
pub const DEFAULT_SHARED_CONNECTIONS: usize = 2;

/// A fixed set of shared connections, opened on first use and reopened after they fail.
pub struct Shared {
    config: Postgres,
    slots: Box<[Slot]>,
}

struct Slot {
    /// The open connection, if any (a closed one is replaced by the next request).
    current: Mutex<Option<Arc<Conn>>>,
    /// Held while (re)connecting, so one request connects and the others wait for it.
    connecting: tokio::sync::Mutex<()>,
    /// Requests holding a [`Lease`] on this slot.
    in_flight: AtomicUsize,
}

/// One shared connection and the statements prepared on it.
pub struct Conn {
    client: Client,
    statements: Mutex<HashMap<&'static str, Statement>>,
}

/// A request's use of a shared connection; dropping it ends the use.
pub struct Lease<'a> {
    _in_flight: InFlight<'a>,
    conn: Arc<Conn>,
}

struct InFlight<'a>(&'a Slot);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Shared {
    /// `count` shared connections to `config` (none: `None`, every request takes a pooled
    /// connection).
    pub fn new(config: Postgres, count: usize) -> Option<Shared> {
        (count > 0).then(|| Shared {
            config,
            slots: (0..count)
                .map(|_| Slot {
                    current: Mutex::new(None),
                    connecting: tokio::sync::Mutex::new(()),
                    in_flight: AtomicUsize::new(0),
                })
                .collect(),
        })
    }

    /// The connection with the fewest requests in flight, opened if it is not.
    ///
    /// # Errors
    /// [`PgError::Connect`]: the connection could not be opened.
    ///
    /// # Cancel safety
    /// Dropped while connecting, the connection is not opened; another request opens it.
    pub async fn get(&self) -> Result<Lease<'_>, PgError> {
        let slot = self
            .slots
            .iter()
            .min_by_key(|slot| slot.in_flight.load(Ordering::Relaxed))
            .ok_or_else(|| PgError::Decode("no shared connection is configured".into()))?;
        slot.in_flight.fetch_add(1, Ordering::Relaxed);
        let in_flight = InFlight(slot);
        let conn = slot.open(&self.config).await?;
        Ok(Lease {
            _in_flight: in_flight,
            conn,
        })
    }

    /// How many connections there are, and the requests in flight on them.
    pub fn status(&self) -> (usize, usize) {
        let in_flight = self
            .slots
            .iter()
            .map(|slot| slot.in_flight.load(Ordering::Relaxed))
            .sum();
        (self.slots.len(), in_flight)
    }
}

impl Slot {
    fn live(&self) -> Option<Arc<Conn>> {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        current
            .as_ref()
            .filter(|conn| !conn.client.is_closed())
            .cloned()
    }

    async fn open(&self, config: &Postgres) -> Result<Arc<Conn>, PgError> {
        if let Some(conn) = self.live() {
            return Ok(conn);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(conn) = self.live() {
            return Ok(conn);
        }
        let (client, connection) = config.connect().await.map_err(PgError::Connect)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a shared Postgres connection ended");
            }
        });
        let conn = Arc::new(Conn {
            client,
            statements: Mutex::new(HashMap::new()),
        });
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&conn));
        Ok(conn)
    }
}

impl Lease<'_> {
    /// The connection.
    pub fn client(&self) -> &Client {
        &self.conn.client
    }

    /// `sql` prepared on this connection (once; later calls reuse it).
    ///
    /// # Errors
    /// Postgres refused to prepare it.
    ///
    /// # Cancel safety
    /// Dropped before the answer, nothing is remembered; the next call prepares again.
    pub async fn prepare(&self, sql: &'static str) -> Result<Statement, PgError> {
        let cached = self
            .conn
            .statements
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(sql)
            .cloned();
        if let Some(statement) = cached {
            return Ok(statement);
        }
        let statement = self.conn.client.prepare(sql).await?;
        self.conn
            .statements
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sql, statement.clone());
        Ok(statement)
    }
}
