//! The [`ChangeSource`] the sidecar runs: a [`ReplicationSource`] that reconnects.
//!
//! - A connection lost (Postgres restarted, the walsender terminated, the network) is
//!   reconnected with jittered exponential backoff; the stream continues from the slot's
//!   confirmed position, so transactions after it come again (consumers skip them by commit
//!   LSN: `Changelog::push` does) and nothing is lost.
//! - A slot dropped or invalidated under us is replaced ([`replace_slot`]) and reported as
//!   [`SourceEvent::SlotCreated`]: every stream resets, never a silent loss.
//! - What cannot be retried (a stream that does not decode, a slot of that name that is not
//!   ours) is returned as the error.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::replication::{replace_slot, ReplicationSettings, ReplicationSource};
use super::{ChangeSource, Lsn, SourceError, SourceEvent};

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
    /// Give up: retrying cannot help.
    Fail,
}

/// How the supervisor treats `error`.
pub fn recovery(error: &SourceError) -> Recovery {
    match error {
        SourceError::Replication(_) | SourceError::Postgres(_) | SourceError::Closed => {
            Recovery::Reconnect
        }
        SourceError::SlotMissing(_) | SourceError::SlotInvalidated(_) => Recovery::ReplaceSlot,
        SourceError::Stream(_) | SourceError::SlotUnusable(_) | SourceError::Protocol(_) => {
            Recovery::Fail
        }
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
}

impl SupervisedSource {
    /// A source that connects on its first [`ChangeSource::next_event`].
    pub fn new(settings: ReplicationSettings, backoff: Backoff) -> SupervisedSource {
        SupervisedSource {
            settings,
            current: None,
            backoff,
            confirmed: Lsn(0),
            replaced: None,
        }
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
                let delay = self.backoff.next_delay();
                tracing::warn!(%error, ?delay, slot = %self.settings.slot, "change source: reconnecting");
                tokio::time::sleep(delay).await;
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
                        // Still held by the old walsender, or Postgres is away: try again.
                        let delay = self.backoff.next_delay();
                        tracing::warn!(error = %e, ?delay, "change source: slot replacement failed");
                        tokio::time::sleep(delay).await;
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
    fn errors_map_to_recoveries() {
        use Recovery::*;
        assert_eq!(recovery(&SourceError::Closed), Reconnect);
        assert_eq!(recovery(&SourceError::Replication("io".into())), Reconnect);
        assert_eq!(recovery(&SourceError::SlotMissing("s".into())), ReplaceSlot);
        assert_eq!(
            recovery(&SourceError::SlotInvalidated("s".into())),
            ReplaceSlot
        );
        assert_eq!(recovery(&SourceError::SlotUnusable("s".into())), Fail);
    }
}
