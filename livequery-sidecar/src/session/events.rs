//! The events of a listen stream (docs/listen.md): `snapshot`, `change`, `heartbeat` and
//! `reset`, each at a position of the stream, whose resume token is `<stream>.<position>`.
//! Typed: a transport renders them (`http/sse.rs` as `text/event-stream` frames).

use std::sync::Arc;

use docstore_core::value::Timestamp;

use crate::matcher::{TargetDelta, TargetResult};
use crate::source::Lsn;

/// Why a stream's state was discarded (the `reason` of a `reset` event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResetReason {
    /// The client read too slowly: its queue overflowed; the stream is closed.
    Lagged,
    /// The replication slot was lost (dropped or invalidated): changes may be missing.
    SlotLost,
    /// The position to resume from is no longer retained.
    RetentionPassed,
    /// The stream is unknown to this sidecar (it restarted, or the stream expired).
    Restart,
    /// The caller may no longer read a target.
    Permission,
}

impl ResetReason {
    /// The name in events and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetReason::Lagged => "lagged",
            ResetReason::SlotLost => "slot_lost",
            ResetReason::RetentionPassed => "retention_passed",
            ResetReason::Restart => "restart",
            ResetReason::Permission => "permission",
        }
    }
}

/// What an event says.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// The full results of `results`' targets, and in the same event the `changes` of the
    /// stream's other targets at this position.
    Snapshot {
        results: Vec<(String, TargetResult)>,
        changes: Arc<[(String, TargetDelta)]>,
    },
    /// What one transaction did to the targets it changed.
    Change {
        changes: Arc<[(String, TargetDelta)]>,
    },
    /// The position moved, no target changed.
    Heartbeat,
    /// Discard every target's state; a snapshot follows unless the reason is
    /// [`ResetReason::Lagged`] (the stream then closes).
    Reset {
        reason: ResetReason,
        message: String,
    },
}

/// One event of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The stream's id (the first part of the resume token).
    pub stream: String,
    /// The commit position the event is at.
    pub position: Lsn,
    /// The commit time of the position's transaction, when known.
    pub commit_time: Option<Timestamp>,
    pub kind: EventKind,
}

impl Event {
    /// The resume token of the event's position.
    pub fn token(&self) -> String {
        token(&self.stream, self.position)
    }
}

/// One event as the hub queues and logs it: shared, never copied, rendered by the transport
/// that writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The commit position the event is at.
    pub position: Lsn,
    pub event: Arc<Event>,
    /// The commit time of the position's transaction (Unix microseconds), for the
    /// commit-to-send lag.
    pub commit_micros: Option<i64>,
}

/// The resume token of a position of a stream.
pub fn token(stream: &str, position: Lsn) -> String {
    format!("{stream}.{:016x}", position.0)
}

/// Parse a resume token `<stream>.<16 hex digits>`.
pub fn parse_token(text: &str) -> Option<(String, Lsn)> {
    let (stream, position) = text.trim().rsplit_once('.')?;
    if stream.is_empty()
        || stream.len() > 64
        || !stream
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        || position.len() != 16
    {
        return None;
    }
    let position = u64::from_str_radix(position, 16).ok()?;
    Some((stream.to_owned(), Lsn(position)))
}

fn frame(stream: &str, position: Lsn, commit_time: Option<Timestamp>, kind: EventKind) -> Frame {
    Frame {
        position,
        commit_micros: commit_time.map(Timestamp::micros),
        event: Arc::new(Event {
            stream: stream.to_owned(),
            position,
            commit_time,
            kind,
        }),
    }
}

/// A `snapshot` event: the full results of `results`' targets, and in the same event the
/// `changes` of the stream's other targets at this position.
pub fn snapshot(
    stream: &str,
    position: Lsn,
    commit_time: Option<Timestamp>,
    results: Vec<(String, TargetResult)>,
    changes: Arc<[(String, TargetDelta)]>,
) -> Frame {
    frame(
        stream,
        position,
        commit_time,
        EventKind::Snapshot { results, changes },
    )
}

/// A `change` event: what one transaction did to the targets it changed.
pub fn change(
    stream: &str,
    position: Lsn,
    commit_time: Option<Timestamp>,
    changes: Arc<[(String, TargetDelta)]>,
) -> Frame {
    frame(stream, position, commit_time, EventKind::Change { changes })
}

/// A `heartbeat` event: the position moved, no target changed.
pub fn heartbeat(stream: &str, position: Lsn, commit_time: Option<Timestamp>) -> Frame {
    frame(stream, position, commit_time, EventKind::Heartbeat)
}

/// A `reset` event: discard every target's state; a `snapshot` follows unless the reason is
/// [`ResetReason::Lagged`] (the stream then closes).
pub fn reset(stream: &str, position: Lsn, reason: ResetReason, message: &str) -> Frame {
    frame(
        stream,
        position,
        None,
        EventKind::Reset {
            reason,
            message: message.to_owned(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_refuse_garbage() {
        let t = token("ab12-3", Lsn(0x16_B374_D848));
        assert_eq!(t, "ab12-3.00000016b374d848");
        assert_eq!(
            parse_token(&t),
            Some(("ab12-3".to_owned(), Lsn(0x16_B374_D848)))
        );
        for bad in [
            "",
            ".",
            "x.",
            ".0000000000000001",
            "a b.0000000000000001",
            "a.12",
            "a.zzzzzzzzzzzzzzzz",
        ] {
            assert_eq!(parse_token(bad), None, "{bad:?}");
        }
    }
}
