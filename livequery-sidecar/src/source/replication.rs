//! The [`ChangeSource`] over a replication connection (pgwire-replication =0.5.0, pgoutput
//! protocol version 1) from a logical slot the sidecar owns.
//!
//! The slot is created here when missing (`pg_create_logical_replication_slot(slot,
//! 'pgoutput')`, through tokio-postgres). The publication (`docstore_changes` FOR TABLE
//! docstore.entities) belongs to the extension. The stream starts at the slot's
//! `confirmed_flush_lsn`, so after a restart transactions after the last confirmation are
//! delivered again: consumers skip what they hold by commit LSN. The slot is confirmed only
//! through [`ChangeSource::confirm`].

use std::time::Duration;

use pgwire_replication::{PgWireError, ReplicationClient, ReplicationEvent, TlsConfig};
use tokio_postgres::config::Host;

use crate::pg::tls::{Postgres, SslMode};

use super::pgoutput::{Begin, Commit, LogicalMessage, Lsn, Message};
use super::transaction::{Assembled, Assembler};
use super::{ChangeSource, SourceError, SourceEvent};

/// Session settings of the replication connection: values are rendered in text as the
/// decoders read them (UTC timestamps in ISO style, bytea in hex).
pub const SESSION_OPTIONS: &str = "-c TimeZone=UTC -c DateStyle=ISO,YMD -c bytea_output=hex";

/// Where and what to stream.
#[derive(Debug, Clone)]
pub struct ReplicationSettings {
    /// The database (host, port, user, password, dbname); the user needs REPLICATION.
    pub postgres: Postgres,
    /// The logical slot this source owns (created when missing).
    pub slot: String,
    /// The publication of `docstore.entities`.
    pub publication: String,
    /// How often the confirmed position is reported to the server at most.
    pub status_interval: Duration,
}

impl ReplicationSettings {
    /// Settings with the extension's publication `docstore_changes` and a one-second status
    /// interval.
    pub fn new(postgres: Postgres, slot: impl Into<String>) -> Self {
        ReplicationSettings {
            postgres,
            slot: slot.into(),
            publication: "docstore_changes".to_owned(),
            status_interval: Duration::from_secs(1),
        }
    }
}

/// A replication connection streaming committed transactions of `docstore.entities`.
pub struct ReplicationSource {
    client: ReplicationClient,
    assembler: Assembler,
    /// Created by [`ReplicationSource::connect`]: reported once as the first event.
    created_at: Option<Lsn>,
}

impl ReplicationSource {
    /// Ensure the slot exists, then open the replication connection and wait until the
    /// server has started streaming from the slot.
    ///
    /// # Errors
    /// [`SourceError::Postgres`] if the slot cannot be checked or created (including a slot of
    /// that name for another plugin or database: [`SourceError::SlotUnusable`]),
    /// [`SourceError::SlotMissing`] / [`SourceError::SlotInvalidated`] /
    /// [`SourceError::Replication`] if streaming does not start (a slot in use by another
    /// connection is SQLSTATE 55006 in the latter).
    ///
    /// # Cancel safety
    /// Not cancel-safe in effect: cancelled after the slot was created, the slot stays (it is
    /// found on the next call, but its creation is then not reported).
    pub async fn connect(settings: &ReplicationSettings) -> Result<Self, SourceError> {
        let created_at = ensure_slot(&settings.postgres, &settings.slot).await?;
        let config = replication_config(settings)?;
        let mut client = ReplicationClient::connect(config)
            .await
            .map_err(SourceError::from)?;
        client.wait_started().await.map_err(SourceError::from)?;
        Ok(ReplicationSource {
            client,
            assembler: Assembler::new(),
            created_at,
        })
    }

    /// Stop streaming and wait for the connection to end (the slot stays).
    ///
    /// # Errors
    /// [`SourceError::Replication`] if the connection had failed.
    ///
    /// # Cancel safety
    /// Cancel-safe: the stop has been requested; dropping the source ends the connection.
    pub async fn stop(mut self) -> Result<(), SourceError> {
        self.client.shutdown().await.map_err(SourceError::from)
    }
}

impl ChangeSource for ReplicationSource {
    /// # Cancel safety
    /// Cancel-safe: a partly received transaction stays in the source, and no event taken
    /// from the connection is held across an await.
    async fn next_event(&mut self) -> Result<SourceEvent, SourceError> {
        if let Some(consistent_point) = self.created_at.take() {
            return Ok(SourceEvent::SlotCreated { consistent_point });
        }
        loop {
            let event = self
                .client
                .recv()
                .await
                .map_err(SourceError::from)?
                .ok_or(SourceError::Closed)?;
            let assembled = match event {
                ReplicationEvent::Begin {
                    final_lsn,
                    xid,
                    commit_time_micros,
                } => self.assembler.push(&Message::Begin(Begin {
                    final_lsn: Lsn(final_lsn.as_u64()),
                    commit_time: commit_time_micros,
                    xid,
                }))?,
                ReplicationEvent::Commit {
                    lsn,
                    end_lsn,
                    commit_time_micros,
                } => self.assembler.push(&Message::Commit(Commit {
                    flags: 0,
                    commit_lsn: Lsn(lsn.as_u64()),
                    end_lsn: Lsn(end_lsn.as_u64()),
                    commit_time: commit_time_micros,
                }))?,
                ReplicationEvent::Message {
                    transactional,
                    lsn,
                    prefix,
                    content,
                } => self.assembler.push(&Message::Logical(LogicalMessage {
                    transactional,
                    lsn: Lsn(lsn.as_u64()),
                    prefix: &prefix,
                    content: &content,
                }))?,
                ReplicationEvent::XLogData { data, .. } => self.assembler.push_bytes(&data)?,
                ReplicationEvent::KeepAlive {
                    wal_end,
                    reply_requested,
                    ..
                } => {
                    if self.assembler.in_transaction() {
                        None
                    } else {
                        return Ok(SourceEvent::KeepAlive {
                            wal_end: Lsn(wal_end.as_u64()),
                            reply_requested,
                        });
                    }
                }
                ReplicationEvent::StoppedAt { .. } => return Err(SourceError::Closed),
            };
            match assembled {
                Some(Assembled::Transaction(txn)) => return Ok(SourceEvent::Transaction(txn)),
                Some(Assembled::Message(m)) => return Ok(SourceEvent::Message(m)),
                None => {}
            }
        }
    }

    fn confirm(&mut self, lsn: Lsn) {
        self.client
            .update_applied_lsn(pgwire_replication::Lsn::from_u64(lsn.0));
    }
}

/// Create the logical slot if it does not exist; returns its consistent point when created.
///
/// # Errors
/// [`SourceError::Postgres`] when Postgres refuses, [`SourceError::SlotUnusable`] for a
/// slot of that name that is not a pgoutput slot of this database.
pub async fn ensure_slot(postgres: &Postgres, slot: &str) -> Result<Option<Lsn>, SourceError> {
    let (client, connection) = postgres.connect().await?;
    let connection = tokio::spawn(connection);
    let result = async {
        let existing = client
            .query_opt(
                "select plugin, database = current_database(), slot_type, \
                        coalesce(wal_status, '') \
                 from pg_replication_slots where slot_name = $1",
                &[&slot],
            )
            .await?;
        if let Some(row) = existing {
            let plugin: Option<String> = row.get(0);
            let here: Option<bool> = row.get(1);
            let kind: String = row.get(2);
            let wal_status: String = row.get(3);
            if plugin.as_deref() != Some("pgoutput") || here != Some(true) || kind != "logical" {
                return Err(SourceError::SlotUnusable(slot.to_owned()));
            }
            if wal_status == "lost" {
                return Err(SourceError::SlotInvalidated(format!(
                    "replication slot \"{slot}\" is invalidated (wal_status lost)"
                )));
            }
            return Ok(None);
        }
        let created = client
            .query_one(
                "select lsn::text from pg_create_logical_replication_slot($1, 'pgoutput')",
                &[&slot],
            )
            .await;
        match created {
            Ok(row) => {
                let text: String = row.get(0);
                Lsn::parse(&text)
                    .map(Some)
                    .ok_or_else(|| SourceError::Protocol(format!("slot LSN {text:?}")))
            }
            // Created concurrently by another process: it exists now.
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_OBJECT) => {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }
    .await;
    drop(client);
    // The connection ends with the client; its own error, if any, is in `result` already.
    let _ = connection.await;
    result
}

/// Drop the slot (if it still exists) and create it again: what a supervisor does after
/// [`SourceError::SlotInvalidated`] or [`SourceError::SlotMissing`], before connecting again
/// and sending every stream a `reset` (what the old slot had not delivered is lost). Returns
/// the new slot's consistent point.
///
/// # Errors
/// [`SourceError::Postgres`] if Postgres refuses (a slot still in use: SQLSTATE 55006).
///
/// # Cancel safety
/// Not cancel-safe: cancelled between the drop and the create, the slot is missing (the
/// next [`ReplicationSource::connect`] creates it).
pub async fn replace_slot(postgres: &Postgres, slot: &str) -> Result<Lsn, SourceError> {
    let (client, connection) = postgres.connect().await?;
    let connection = tokio::spawn(connection);
    let result = async {
        // Only a pgoutput slot of this database: a slot of that name that another plugin took
        // meanwhile is not ours to drop (the create below then reports it).
        let dropped = client
            .execute(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots \
                 where slot_name = $1 and plugin = 'pgoutput' and database = current_database()",
                &[&slot],
            )
            .await;
        match dropped {
            Ok(_) => {}
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_OBJECT) => {}
            Err(e) => return Err(SourceError::from(e)),
        }
        let row = match client
            .query_one(
                "select lsn::text from pg_create_logical_replication_slot($1, 'pgoutput')",
                &[&slot],
            )
            .await
        {
            Ok(row) => row,
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_OBJECT) => {
                return Err(SourceError::SlotUnusable(slot.to_owned()))
            }
            Err(e) => return Err(e.into()),
        };
        let text: String = row.get(0);
        Lsn::parse(&text).ok_or_else(|| SourceError::Protocol(format!("slot LSN {text:?}")))
    }
    .await;
    drop(client);
    let _ = connection.await;
    result
}

fn replication_config(
    settings: &ReplicationSettings,
) -> Result<pgwire_replication::ReplicationConfig, SourceError> {
    let pg = &settings.postgres.config;
    let tls = &settings.postgres.tls;
    let host = match pg.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(dir)) => dir.to_string_lossy().into_owned(),
        None => "localhost".to_owned(),
    };
    let port = pg.get_ports().first().copied().unwrap_or(5432);
    let user = pg.get_user().unwrap_or("postgres").to_owned();
    let password = match pg.get_password() {
        Some(bytes) => String::from_utf8(bytes.to_vec())
            .map_err(|_| SourceError::Protocol("the password is not UTF-8".into()))?,
        None => String::new(),
    };
    let dbname = pg.get_dbname().unwrap_or(&user).to_owned();
    Ok(pgwire_replication::ReplicationConfig::new(
        host,
        user,
        password,
        dbname,
        settings.slot.clone(),
        settings.publication.clone(),
    )
    .with_port(port)
    .with_tls(TlsConfig {
        mode: match tls.mode {
            SslMode::Disable => pgwire_replication::SslMode::Disable,
            SslMode::Prefer => pgwire_replication::SslMode::Prefer,
            SslMode::Require => pgwire_replication::SslMode::Require,
            SslMode::VerifyCa => pgwire_replication::SslMode::VerifyCa,
            SslMode::VerifyFull => pgwire_replication::SslMode::VerifyFull,
        },
        ca_pem_path: tls.root_cert.clone(),
        ..TlsConfig::disabled()
    })
    .with_start_lsn(pgwire_replication::Lsn::ZERO)
    .with_status_interval(settings.status_interval)
    .with_options(SESSION_OPTIONS)
    .with_application_name(format!("docstore-sidecar {}", settings.slot)))
}

impl From<PgWireError> for SourceError {
    fn from(e: PgWireError) -> Self {
        match &e {
            PgWireError::Server(text) if text.contains("SQLSTATE 42704") => {
                SourceError::SlotMissing(text.clone())
            }
            PgWireError::Server(text)
                if text.contains("SQLSTATE 55000")
                    && text.contains("can no longer get changes from replication slot") =>
            {
                SourceError::SlotInvalidated(text.clone())
            }
            _ => SourceError::Replication(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_about_the_slot_are_typed() {
        let missing = PgWireError::Server(
            "ERROR: replication slot \"s\" does not exist (SQLSTATE 42704)".into(),
        );
        assert!(matches!(
            SourceError::from(missing),
            SourceError::SlotMissing(_)
        ));
        let lost = PgWireError::Server(
            "ERROR: can no longer get changes from replication slot \"s\" (SQLSTATE 55000)".into(),
        );
        assert!(matches!(
            SourceError::from(lost),
            SourceError::SlotInvalidated(_)
        ));
        let in_use = PgWireError::Server(
            "ERROR: replication slot \"s\" is active for PID 7 (SQLSTATE 55006)".into(),
        );
        assert!(matches!(
            SourceError::from(in_use),
            SourceError::Replication(_)
        ));
    }

    #[test]
    fn replication_config_from_a_connection_string() {
        let settings = ReplicationSettings::new(
            Postgres::plain(
                "host=127.0.0.1 port=5433 user=sidecar password=pw dbname=app"
                    .parse()
                    .unwrap(),
            ),
            "slot1",
        );
        let config = replication_config(&settings).unwrap();
        assert_eq!(
            (config.host.as_str(), config.port, config.user.as_str()),
            ("127.0.0.1", 5433, "sidecar")
        );
        assert_eq!(
            (config.password.as_str(), config.database.as_str()),
            ("pw", "app")
        );
        assert_eq!(config.slot, "slot1");
        assert_eq!(config.publication.names(), ["docstore_changes"]);
        assert_eq!(config.options.as_deref(), Some(SESSION_OPTIONS));
        assert_eq!(config.tls.mode, pgwire_replication::SslMode::Disable);
    }

    #[test]
    fn the_urls_sslmode_reaches_the_replication_connection() {
        let settings = ReplicationSettings::new(
            Postgres::parse("postgresql://sidecar@db.example:5433/app?sslmode=require").unwrap(),
            "slot1",
        );
        let config = replication_config(&settings).unwrap();
        assert_eq!(config.tls.mode, pgwire_replication::SslMode::Require);
        assert_eq!(config.host, "db.example");
    }
}
