//! The ingest role (`--role ingest`, docs/architecture.md "Processes"): the one reader of a
//! Postgres database's slot, publishing each committed transaction to a JetStream stream for
//! the gateways.
//!
//! - One active ingest per database: it holds a session advisory lock on a connection of its
//!   own ([`LOCK_SQL`]); another ingest waits as a standby (`/healthz` says so) and takes over
//!   when the holder's session ends (the process died, or its connection was cut).
//! - Its source is the `all` role's ([`SupervisedSource`]: reconnects, replaces a lost slot
//!   and reports it, which is published too so that gateways reset their streams).
//! - Each transaction is one message (or parts of at most the server's `max_payload`, each
//!   with the header `Docstore-Part: i/n`) in the format of `source::wire`, with the message
//!   id (`Nats-Msg-Id`) its commit LSN (`<lsn>.<i>` for parts), so a republished transaction
//!   within JetStream's duplicate window is stored once. A publish is retried with backoff
//!   until JetStream acknowledges it, and only then may the slot be confirmed past it (and no
//!   further than the write triggers' recorder allows: it runs here, never in a gateway).
//!   Before each retry the ingest checks that its lock's session still lives: once it lost
//!   the lock it publishes nothing more and stands by.
//! - Metrics: `docstore_ingest_published_transactions_total`,
//!   `docstore_ingest_published_bytes_total`, `docstore_ingest_publish_lag_seconds` (commit
//!   -> acknowledged), `docstore_source_slot_lag_bytes`, `docstore_ingest_active` (1 while
//!   it holds the lock), `docstore_ingest_stream_sequence` and `docstore_ingest_commit_lsn`
//!   (the stream sequence and commit LSN JetStream last acknowledged: gateways and matchers
//!   report theirs alike).

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, context::PublishAckFuture, message::PublishMessage};
use bytes::Bytes;

use crate::pg::tls::Postgres;
use crate::source::jetstream::{connect, open_stream, seconds_since, subject, RoleHealth};
use crate::source::wire::{self, WireEvent};
use crate::source::{
    Backoff, ChangeSource, Consumer, Lsn, ReplicationSettings, SourceEvent, SourceHealth,
    SupervisedSource,
};

/// The session advisory lock that makes one ingest active per database and slot.
pub const LOCK_SQL: &str = "select pg_try_advisory_lock(hashtext('pg_docstore ingest ' || $1))";

/// Room left in a message for its headers when a payload is split.
const HEADER_ROOM: usize = 1024;

/// What the ingest reads and where it publishes.
#[derive(Debug, Clone)]
pub struct Settings {
    pub postgres: Postgres,
    pub slot: String,
    pub nats_url: String,
    pub stream: String,
    /// What it waits for (`/healthz`): NATS, the lock (standby).
    pub health: RoleHealth,
    /// The slot's permanent failure cause (`/healthz`, as in the `all` role).
    pub source_health: SourceHealth,
}

/// Run for the life of the process.
///
/// # Cancel safety
/// Runs for the life of the process.
pub async fn run(settings: Settings, mut consumers: Vec<Box<dyn Consumer>>) {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        if let Err(e) = serve(&settings, &mut consumers, &mut backoff).await {
            metrics::gauge!("docstore_ingest_active").set(0.0);
            settings.health.set("ingest", Some(e));
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }
}

/// Connect to NATS, take the lock, stream the slot into JetStream until something fails.
async fn serve(
    settings: &Settings,
    consumers: &mut [Box<dyn Consumer>],
    backoff: &mut Backoff,
) -> Result<(), String> {
    let client = connect(
        &settings.nats_url,
        settings.health.clone(),
        "docstore_ingest_nats_reconnects_total",
    )
    .await?;
    let max_payload = client.server_info().max_payload;
    let js = jetstream::new(client);
    open_stream(&js, &settings.nats_url, &settings.stream).await?;
    let (lock, mut lock_connection) = lock(settings).await?;
    backoff.reset();
    settings.health.set("lock", None);
    settings.health.set("ingest", None);
    metrics::gauge!("docstore_ingest_active").set(1.0);
    tracing::info!(slot = %settings.slot, stream = %settings.stream, "this ingest is active: it owns the slot");
    let mut source = SupervisedSource::new(
        ReplicationSettings::new(settings.postgres.clone(), settings.slot.clone()),
        Backoff::new(Duration::from_millis(100), Duration::from_secs(5)),
        settings.source_health.clone(),
    );
    let publisher = Publisher {
        js,
        subject: subject(&settings.stream),
        part_size: max_payload.saturating_sub(HEADER_ROOM).max(1),
        health: settings.health.clone(),
    };
    let mut published = Lsn(0);
    let mut acked_end = Lsn(0);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut lag_tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            ended = &mut lock_connection => {
                return Err(format!("lost the ingest lock (its connection ended: {ended:?}); standing by"));
            }
            event = source.next_event() => match event {
                Ok(SourceEvent::SlotCreated { consistent_point }) => {
                    let payload = wire::encode(&WireEvent::SlotCreated(consistent_point));
                    publisher.publish(&format!("slot-{consistent_point}"), &payload, &lock).await?;
                }
                Ok(SourceEvent::Transaction(txn)) => {
                    // A reconnect of the source replays what was not confirmed.
                    if txn.commit_lsn <= published {
                        continue;
                    }
                    let txn = Arc::new(txn);
                    for consumer in consumers.iter_mut() {
                        consumer.on_transaction(&txn);
                    }
                    let payload = wire::encode(&WireEvent::Transaction((*txn).clone()));
                    publisher.publish(&txn.commit_lsn.to_string(), &payload, &lock).await?;
                    published = txn.commit_lsn;
                    acked_end = txn.end_lsn;
                    metrics::gauge!("docstore_ingest_commit_lsn").set(published.0 as f64);
                    metrics::counter!("docstore_ingest_published_transactions_total").increment(1);
                    metrics::counter!("docstore_ingest_published_bytes_total").increment(payload.len() as u64);
                    metrics::histogram!("docstore_ingest_publish_lag_seconds")
                        .record(seconds_since(txn.commit_time.postgres_micros()));
                }
                Ok(SourceEvent::KeepAlive { wal_end, reply_requested: true }) => {
                    // Everything received is acknowledged by JetStream already (publishing is
                    // sequential): confirm what the triggers allow, as the hub does.
                    source.confirm(confirmable(consumers, wal_end));
                }
                Ok(SourceEvent::Message(_) | SourceEvent::KeepAlive { .. }) => {}
                Err(e) => return Err(format!("change source failed: {e}")),
            },
            _ = tick.tick() => {
                if acked_end > Lsn(0) {
                    source.confirm(confirmable(consumers, acked_end));
                }
            }
            _ = lag_tick.tick() => slot_lag(&lock, &settings.slot).await,
        }
    }
}

fn confirmable(consumers: &mut [Box<dyn Consumer>], lsn: Lsn) -> Lsn {
    consumers
        .iter_mut()
        .fold(lsn, |lsn, consumer| consumer.confirmable(lsn))
}

/// Wait for the advisory lock on a connection of its own; returns the connection's client
/// and its task (which ends when the session does).
async fn lock(
    settings: &Settings,
) -> Result<
    (
        tokio_postgres::Client,
        tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
    ),
    String,
> {
    let (client, connection) = settings
        .postgres
        .connect()
        .await
        .map_err(|e| format!("the lock connection failed: {e}"))?;
    let connection = tokio::spawn(connection);
    loop {
        let held: bool = client
            .query_one(LOCK_SQL, &[&settings.slot])
            .await
            .map_err(|e| format!("the ingest lock failed: {e}"))?
            .get(0);
        if held {
            return Ok((client, connection));
        }
        settings.health.set(
            "lock",
            Some(format!(
                "standby: another ingest holds the lock of slot {}; taking over when its session ends",
                settings.slot
            )),
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn slot_lag(client: &tokio_postgres::Client, slot: &str) {
    let lag = client
        .query_opt(
            "select (pg_current_wal_lsn() - confirmed_flush_lsn)::float8 \
             from pg_replication_slots where slot_name = $1",
            &[&slot],
        )
        .await;
    match lag {
        Ok(Some(row)) => {
            let bytes: Option<f64> = row.get(0);
            metrics::gauge!("docstore_source_slot_lag_bytes").set(bytes.unwrap_or(0.0));
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "slot lag query failed"),
    }
}

struct Publisher {
    js: jetstream::Context,
    subject: String,
    part_size: usize,
    health: RoleHealth,
}

impl Publisher {
    /// Publish `payload` with message id `id` (split into parts when it is bigger than a
    /// message), each part retried until JetStream acknowledges it, while this ingest holds
    /// the lock on `lock`.
    ///
    /// # Errors
    /// The lock was lost while a part waited for a retry: nothing more is published.
    async fn publish(
        &self,
        id: &str,
        payload: &[u8],
        lock: &tokio_postgres::Client,
    ) -> Result<(), String> {
        let parts = wire::split(payload, self.part_size);
        let n = parts.len();
        for (i, part) in parts.into_iter().enumerate() {
            let mut message = PublishMessage::build().payload(Bytes::copy_from_slice(part));
            message = if n == 1 {
                message.message_id(id)
            } else {
                message
                    .message_id(format!("{id}.{}", i + 1))
                    .header(wire::PART_HEADER, format!("{}/{n}", i + 1).as_str())
            };
            self.until_acked(message, lock).await?;
        }
        Ok(())
    }

    /// Publish `message` until JetStream acknowledges it. Before each retry the lock's
    /// session is asked whether it still lives (a session advisory lock lasts as long as its
    /// session): once it ended another ingest may own the slot and publish, so this one
    /// stops before sending again.
    async fn until_acked(
        &self,
        message: PublishMessage,
        lock: &tokio_postgres::Client,
    ) -> Result<(), String> {
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
        loop {
            let sent: Result<PublishAckFuture, _> = self
                .js
                .send_publish(self.subject.clone(), message.clone())
                .await;
            let error = match sent {
                Ok(ack) => match ack.await {
                    Ok(acked) => {
                        metrics::gauge!("docstore_ingest_stream_sequence")
                            .set(acked.sequence as f64);
                        self.health.set("publish", None);
                        return Ok(());
                    }
                    Err(e) => e.to_string(),
                },
                Err(e) => e.to_string(),
            };
            metrics::counter!("docstore_ingest_publish_retries_total").increment(1);
            self.health.set(
                "publish",
                Some(format!("JetStream does not acknowledge: {error}; retrying")),
            );
            tokio::time::sleep(backoff.next_delay()).await;
            if let Err(e) = lock.simple_query("select 1").await {
                self.health.set("publish", None);
                return Err(format!(
                    "lost the ingest lock while retrying a publish (its session ended: {e}); \
                     publishing nothing more, standing by"
                ));
            }
        }
    }
}
