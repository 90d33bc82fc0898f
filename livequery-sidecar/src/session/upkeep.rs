//! The hub's helper on a plain connection of its own: heartbeats (`source::heartbeat::emit`)
//! when no transaction was decoded for an interval, or at once when the hub kicks it (a new
//! target waits for a position past its snapshot); the snapshots that unpin the changelog;
//! and the slot's lag (`docstore_source_slot_lag_bytes`; not in a gateway, which has no slot:
//! its ingest reports it).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify};

use super::hub::Internal;
use super::Grant;
use crate::pg::snapshot::current_snapshot;
use crate::source::heartbeat;
use crate::source::Lsn;

/// Run until the hub is gone. Reconnects after a failure (Postgres restarting). `slot`: the
/// hub's own slot, whose lag it measures (`None` in a gateway).
///
/// # Cancel safety
/// Runs for the life of the process.
pub async fn run(
    postgres: crate::pg::tls::Postgres,
    slot: Option<String>,
    interval: Duration,
    mut activity: watch::Receiver<Lsn>,
    kick: Arc<Notify>,
    mut observe: mpsc::Receiver<Grant>,
    hub: mpsc::Sender<Internal>,
) {
    let mut client: Option<tokio_postgres::Client> = None;
    let mut lag_tick = tokio::time::interval(Duration::from_secs(5));
    // The next heartbeat is due this long after the last decoded transaction.
    let mut due = tokio::time::Instant::now() + interval;
    loop {
        if client.is_none() {
            match postgres.connect().await {
                Ok((c, connection)) => {
                    tokio::spawn(async move {
                        if let Err(e) = connection.await {
                            tracing::debug!(error = %e, "heartbeat connection ended");
                        }
                    });
                    client = Some(c);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "heartbeat connection failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
        }
        let Some(c) = client.as_ref() else {
            continue;
        };
        let mut emit = false;
        tokio::select! {
            changed = activity.changed() => match changed {
                Ok(()) => due = tokio::time::Instant::now() + interval,
                Err(_) => return,
            },
            () = tokio::time::sleep_until(due) => emit = true,
            () = kick.notified() => emit = true,
            grant = observe.recv() => {
                let Some(grant) = grant else { return };
                let snapshot = match current_snapshot(c).await {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::warn!(error = %e, "snapshot for the changelog failed");
                        client = None;
                        None
                    }
                };
                if hub.send(Internal::Observed(grant, snapshot)).await.is_err() {
                    return;
                }
            }
            _ = lag_tick.tick(), if slot.is_some() => {
                let lag = c
                    .query_opt(
                        "select (pg_current_wal_lsn() - confirmed_flush_lsn)::float8 \
                         from pg_replication_slots where slot_name = $1",
                        &[&slot.as_deref()],
                    )
                    .await;
                match lag {
                    Ok(Some(row)) => {
                        let bytes: Option<f64> = row.get(0);
                        metrics::gauge!("docstore_source_slot_lag_bytes").set(bytes.unwrap_or(0.0));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "slot lag query failed");
                        client = None;
                    }
                }
            }
        }
        if emit {
            due = tokio::time::Instant::now() + interval;
            if let Some(c) = client.as_ref() {
                if let Err(e) = heartbeat::emit(c, slot.as_deref().unwrap_or("gateway")).await {
                    tracing::warn!(error = %e, "heartbeat failed");
                    client = None;
                }
            }
        }
    }
}
