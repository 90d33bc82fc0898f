//! The [`ChangeSource`] the sidecar runs: a [`ReplicationSource`] that reconnects.
//!
//! - A connection lost (Postgres restarted, the walsender terminated, the network) is
//!   reconnected with jittered exponential backoff; the stream continues from the slot's
//!   confirmed position, so transactions after it come again (consumers skip them by commit
//!   LSN: `Changelog::push` does) and nothing is lost.
//! - A slot dropped or invalidated under us is replaced ([`replace_slot`]) and reported as
//!   [`SourceEvent::SlotCreated`]: every stream resets, never a silent loss.
//! - A cause that a retry cannot fix but an operator can (REPLICATION revoked, the password
//!   changed, a slot of our name taken by another plugin, `wal_level` lowered) is found with
//!   `pg::preflight`'s classifier and judge ([`diagnose`]), published in [`SourceHealth`]
//!   (`/healthz` answers 503 naming it and its fix), logged once per change of cause and
//!   shown in the gauge `docstore_source_failure{cause}` (retries: `docstore_source_retries_total`); the source keeps backing off meanwhile, and
//!   continues from the slot's confirmed position once the cause is fixed.
//! - What cannot be retried (a stream that does not decode) is returned as the error.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::replication::{replace_slot, ReplicationSettings, ReplicationSource};
use super::{ChangeSource, Lsn, SourceError, SourceEvent};
use crate::pg::preflight::{self, Cause};
use crate::pg::PgError;

/// The permanent cause the live path is failing on, shared with `/healthz`; `None` while it
/// streams or retries a transient failure.
#[derive(Debug, Clone, Default)]
pub struct SourceHealth(Arc<Mutex<Option<Cause>>>);

impl SourceHealth {
    /// Healthy.
    pub fn new() -> SourceHealth {
        SourceHealth::default()
    }

    /// The cause the live path is failing on now.
    pub fn cause(&self) -> Option<Cause> {
        match self.0.lock() {
            Ok(cause) => cause.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Record `cause`: a change is logged and counted, a repetition is not.
    fn set(&self, cause: Option<Cause>, slot: &str) {
        let mut current = match self.0.lock() {
            Ok(current) => current,
            Err(poisoned) => poisoned.into_inner(),
        };
        if *current == cause {
            return;
        }
        if let Some(old) = current.as_ref() {
            metrics::gauge!("docstore_source_failure", "cause" => old.label()).set(0.0);
        }
        match (&cause, current.as_ref()) {
            (Some(new), _) => {
                metrics::gauge!("docstore_source_failure", "cause" => new.label()).set(1.0);
                tracing::error!(%slot, "live queries stopped: {new}; retrying until it is fixed");
            }
            (None, Some(old)) => {
                tracing::info!(%slot, "live queries run again (the cause was: {old})");
            }
            (None, None) => {}
        }
        *current = cause;
    }
}

/// The permanent cause behind `error`, with `pg::preflight`'s one classifier: the error's
/// SQLSTATE ([`preflight::classify`]: password, `pg_hba.conf`, database), else the start-up
/// facts ([`preflight::judge`]: `wal_level`, REPLICATION, extension, slot plugin) read on a
/// new SQL connection (whose own failure is classified the same way). `None`: nothing a
/// retry cannot fix was found.
///
/// # Cancel safety
/// Cancel-safe: one read-only statement on a connection of its own.
pub async fn diagnose(settings: &ReplicationSettings, error: &SourceError) -> Option<Cause> {
    if let Some(cause) = error.sqlstate().and_then(preflight::classify) {
        return Some(cause);
    }
    let (client, connection) = match settings.postgres.connect().await {
        Ok(pair) => pair,
        Err(e) => return preflight::cause_of(&PgError::Connect(e)),
    };
    let connection = tokio::spawn(connection);
    let facts = preflight::facts(&client, &settings.slot).await;
    drop(client);
    let _ = connection.await;
    match facts {
        Ok(facts) => preflight::judge(&facts, &settings.slot, true),
        Err(e) => preflight::cause_of(&e),
    }
}

/// Delays between reconnection attempts: doubling from `first` to `max`, each with up to a
/// quarter of random jitter so that restarted sidecars do not reconnect in step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
    attempt: u32,
}

impl Backoff {
    /// Starting at `first`, never above `max`.
    pub fn new(first: Duration, max: Duration) -> Backoff {
        Backoff {
            first,
            max,
            attempt: 0,
        }
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let factor = 1u32 << self.attempt.min(16);
        self.attempt = self.attempt.saturating_add(1);
        let base = self.first.saturating_mul(factor).min(self.max);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        base + base / 4 * (nanos % 1_000) / 1_000
    }

    /// Back to `first` after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// What to do about an error of the replication connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Connect again after a delay.
    Reconnect,
    /// Replace the slot, then connect (streams reset).
    ReplaceSlot,
    /// Give up: the stream itself is broken.
    Fail,
}

/// How the supervisor treats `error`.
pub fn recovery(error: &SourceError) -> Recovery {
    match error {
        // A slot of our name that is not ours: an operator drops it or changes --slot.
        SourceError::Replication(_)
        | SourceError::Postgres(_)
        | SourceError::Closed
        | SourceError::SlotUnusable(_) => Recovery::Reconnect,
        SourceError::SlotMissing(_) | SourceError::SlotInvalidated(_) => Recovery::ReplaceSlot,
        SourceError::Stream(_) | SourceError::Protocol(_) => Recovery::Fail,
    }
}

/// A replication source that reconnects, and replaces a lost slot.
pub struct SupervisedSource {
    settings: ReplicationSettings,
    current: Option<ReplicationSource>,
    backoff: Backoff,
    confirmed: Lsn,
    /// A replaced slot's consistent point, reported as the next event.
    replaced: Option<Lsn>,
    health: SourceHealth,
}

impl SupervisedSource {
    /// A source that connects on its first [`ChangeSource::next_event`].
    /// A source that connects on its first [`ChangeSource::next_event`] and reports a
    /// permanent cause of failure in `health`.
    pub fn new(
        settings: ReplicationSettings,
        backoff: Backoff,
        health: SourceHealth,
    ) -> SupervisedSource {
        SupervisedSource {
            settings,
            current: None,
            backoff,
            confirmed: Lsn(0),
            replaced: None,
            health,
        }
    }

    /// Back off after `error`, having found and published its permanent cause, if any.
    async fn back_off(&mut self, error: &SourceError, what: &str) {
        let cause = diagnose(&self.settings, error).await;
        metrics::counter!("docstore_source_retries_total").increment(1);
        let delay = self.backoff.next_delay();
        if cause.is_some() {
            // Logged once by `SourceHealth::set`, not at every retry.
            tracing::debug!(%error, ?delay, slot = %self.settings.slot, "change source: {what}");
        } else {
            tracing::warn!(%error, ?delay, slot = %self.settings.slot, "change source: {what}");
        }
        self.health.set(cause, &self.settings.slot);
        tokio::time::sleep(delay).await;
    }

    /// Stop streaming (the slot stays).
    ///
    /// # Errors
    /// [`SourceError::Replication`] if the connection had failed.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the source ends the connection.
    pub async fn stop(mut self) -> Result<(), SourceError> {
        match self.current.take() {
            Some(source) => source.stop().await,
            None => Ok(()),
        }
    }

    async fn recover(&mut self, error: SourceError) -> Result<(), SourceError> {
        match recovery(&error) {
            Recovery::Fail => Err(error),
            Recovery::Reconnect => {
                self.back_off(&error, "reconnecting").await;
                Ok(())
            }
            Recovery::ReplaceSlot => {
                tracing::error!(%error, slot = %self.settings.slot, "change source: replacing the slot; every stream resets");
                match replace_slot(&self.settings.postgres, &self.settings.slot).await {
                    Ok(lsn) => {
                        self.replaced = Some(lsn);
                        self.confirmed = Lsn(0);
                        Ok(())
                    }
                    Err(e) => {
                        // Still held by the old walsender, Postgres is away, or a cause an
                        // operator must fix: try again.
                        self.back_off(&e, "slot replacement failed").await;
                        Ok(())
                    }
                }
            }
        }
    }
}

impl ChangeSource for SupervisedSource {
    /// # Cancel safety
    /// Cancel-safe: the connection, the assembled part of a transaction and a pending slot
    /// report stay in the source; a cancelled backoff sleep is simply taken again.
    async fn next_event(&mut self) -> Result<SourceEvent, SourceError> {
        loop {
            let Some(source) = self.current.as_mut() else {
                match ReplicationSource::connect(&self.settings).await {
                    Ok(mut source) => {
                        if self.confirmed > Lsn(0) {
                            source.confirm(self.confirmed);
                        }
                        self.current = Some(source);
                        self.backoff.reset();
                        self.health.set(None, &self.settings.slot);
                        if let Some(consistent_point) = self.replaced.take() {
                            return Ok(SourceEvent::SlotCreated { consistent_point });
                        }
                    }
                    Err(e) => self.recover(e).await?,
                }
                continue;
            };
            match source.next_event().await {
                Ok(event) => return Ok(event),
                Err(e) => {
                    self.current = None;
                    self.recover(e).await?;
                }
            }
        }
    }

    fn confirm(&mut self, lsn: Lsn) {
        self.confirmed = self.confirmed.max(lsn);
        if let Some(source) = self.current.as_mut() {
            source.confirm(lsn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_bound_with_jitter() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let mut last = Duration::ZERO;
        for _ in 0..10 {
            let d = b.next_delay();
            assert!(d >= Duration::from_millis(100) && d <= Duration::from_millis(2_500));
            assert!(d + d / 4 >= last || d >= Duration::from_secs(2));
            last = d;
        }
        assert!(last >= Duration::from_secs(2));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(125));
    }

    #[test]
    fn sqlstates_are_read_from_both_connections_messages() {
        let revoked = SourceError::Replication(
            "server error: FATAL: must be superuser or replication role to start walsender \
             (SQLSTATE 42501)"
                .into(),
        );
        assert_eq!(revoked.sqlstate(), Some("42501"));
        let password = SourceError::Postgres("db error: FATAL: x (SQLSTATE 28P01)".into());
        assert_eq!(password.sqlstate(), Some("28P01"));
        assert_eq!(
            password.sqlstate().and_then(preflight::classify),
            Some(Cause::BadPassword)
        );
        let refused = SourceError::Replication("io error: connection refused".into());
        assert_eq!(refused.sqlstate(), None);
        assert_eq!(SourceError::Closed.sqlstate(), None);
        assert_eq!(
            SourceError::Postgres("cut short (SQLSTATE 28".into()).sqlstate(),
            None
        );
    }

    #[test]
    fn errors_map_to_recoveries() {
        use Recovery::*;
        assert_eq!(recovery(&SourceError::Closed), Reconnect);
        assert_eq!(recovery(&SourceError::Replication("io".into())), Reconnect);
        assert_eq!(recovery(&SourceError::SlotMissing("s".into())), ReplaceSlot);
        assert_eq!(
            recovery(&SourceError::SlotInvalidated("s".into())),
            ReplaceSlot
        );
        assert_eq!(recovery(&SourceError::SlotUnusable("s".into())), Reconnect);
        assert_eq!(
            recovery(&SourceError::Stream(
                super::super::transaction::AssembleError::OutsideTransaction("Commit")
            )),
            Fail
        );
    }
}
