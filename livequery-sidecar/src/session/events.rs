//! The events of a listen stream (docs/listen.md): `snapshot`, `change`, `heartbeat` and
//! `reset`, each at a position of the stream, whose resume token is `<stream>.<position>`.
//! Typed: a transport renders them (`http/sse.rs` as `text/event-stream` frames).

use std::sync::Arc;

use docstore_core::path::ResourcePath;
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

    /// The reason [`ResetReason::as_str`] names.
    pub fn parse(name: &str) -> Option<ResetReason> {
        [
            ResetReason::Lagged,
            ResetReason::SlotLost,
            ResetReason::RetentionPassed,
            ResetReason::Restart,
            ResetReason::Permission,
        ]
        .into_iter()
        .find(|r| r.as_str() == name)
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
    /// The read time of the position (docs/storage.md, "Commit times"): never below the
    /// stream's previous one, nor below an update time the stream was sent up to here.
    pub read_time: Option<Timestamp>,
    /// The documents of the stream's database its transaction deleted (a transport that
    /// tells a deletion from a document leaving a query reads it).
    pub deleted: Arc<[ResourcePath]>,
    pub kind: EventKind,
}

/// When an event is: its transaction's commit time, the read time of its position, and the
/// documents of the stream's database the transaction deleted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct At {
    pub commit_time: Option<Timestamp>,
    pub read_time: Option<Timestamp>,
    pub deleted: Arc<[ResourcePath]>,
}

/// The read time of a position (docs/storage.md, "Commit times"): the largest of the previous
/// position's read time, the update times of the documents its transaction wrote, and
/// Postgres' commit time of the transaction. Positions come in commit order, so the read
/// times never go backwards and each covers every update time delivered up to it.
pub fn next_read_time(
    previous: Option<Timestamp>,
    commit_time: Timestamp,
    update_times: impl IntoIterator<Item = Timestamp>,
) -> Timestamp {
    update_times
        .into_iter()
        .chain(previous)
        .fold(commit_time, Ord::max)
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

fn frame(stream: &str, position: Lsn, at: At, kind: EventKind) -> Frame {
    Frame {
        position,
        commit_micros: at.commit_time.map(Timestamp::micros),
        event: Arc::new(Event {
            stream: stream.to_owned(),
            position,
            commit_time: at.commit_time,
            read_time: at.read_time,
            deleted: at.deleted,
            kind,
        }),
    }
}

/// A `snapshot` event: the full results of `results`' targets, and in the same event the
/// `changes` of the stream's other targets at this position.
pub fn snapshot(
    stream: &str,
    position: Lsn,
    at: At,
    results: Vec<(String, TargetResult)>,
    changes: Arc<[(String, TargetDelta)]>,
) -> Frame {
    frame(
        stream,
        position,
        at,
        EventKind::Snapshot { results, changes },
    )
}

/// A `change` event: what one transaction did to the targets it changed.
pub fn change(stream: &str, position: Lsn, at: At, changes: Arc<[(String, TargetDelta)]>) -> Frame {
    frame(stream, position, at, EventKind::Change { changes })
}

/// A `heartbeat` event: the position moved, no target changed.
pub fn heartbeat(stream: &str, position: Lsn, at: At) -> Frame {
    frame(stream, position, at, EventKind::Heartbeat)
}

/// A `reset` event: discard every target's state; a `snapshot` follows unless the reason is
/// [`ResetReason::Lagged`] (the stream then closes).
pub fn reset(stream: &str, position: Lsn, reason: ResetReason, message: &str) -> Frame {
    frame(
        stream,
        position,
        At::default(),
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

    fn t(micros: i64) -> Timestamp {
        Timestamp::from_micros(micros).unwrap_or_else(|| unreachable!("{micros}"))
    }

    #[test]
    fn read_times_never_go_back_and_cover_every_update_time() {
        // The commit time alone.
        assert_eq!(next_read_time(None, t(10), []), t(10));
        // An update time above the commit time (taken before COMMIT, raised by the
        // per-document and per-instance rules) wins.
        assert_eq!(next_read_time(None, t(10), [t(12), t(11)]), t(12));
        // A transaction that committed after another but took an earlier time (the window
        // of docs/storage.md) does not move the read time back.
        assert_eq!(next_read_time(Some(t(20)), t(15), [t(14)]), t(20));
        // Over a run of positions: monotonic, and never below an update time delivered.
        let mut read = None;
        let mut delivered = Vec::new();
        for (commit, updates) in [
            (5, vec![4]),
            (9, vec![11]),
            (8, vec![7]),
            (8, vec![]),
            (30, vec![29, 31]),
        ] {
            let updates: Vec<Timestamp> = updates.into_iter().map(t).collect();
            delivered.extend(updates.iter().copied());
            let next = next_read_time(read, t(commit), updates);
            assert!(read.is_none_or(|r| r <= next));
            assert!(delivered.iter().all(|u| *u <= next));
            read = Some(next);
        }
        assert_eq!(read, Some(t(31)));
    }
}
