//! A stream's replay: the events it logged for resumes (docs/listen.md, "Positions, ids and
//! resuming"). A resume at a position the stream still holds is sent the logged events after
//! it. Events are kept while they are younger than the stream's grace
//! (`--listen-grace-seconds`, the time a disconnected stream waits for its resume), so that a
//! client away for less than the grace resumes without a reset however busy its stream is;
//! `--listen-replay` caps how many one stream keeps (a memory guard), the oldest going first;
//! `--listen-replay-bytes` bounds what every stream of the process keeps together
//! ([`Account`], [`shed`]), the oldest of all going first.
//! Whatever goes, by age, by the cap or by the budget, raises the floor to its position: a
//! resume at the floor or later is still sent exactly the events after it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::mem::size_of;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use docstore_core::path::ResourcePath;

use crate::changelog::map_bytes;
use crate::matcher::{DocChange, Document, TargetDelta, TargetResult};
use crate::session::events::{Event, EventKind, Frame};
use crate::source::Lsn;

/// How long and how many events a stream keeps for resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Keep {
    /// Events older than this go (the stream's grace).
    pub age: Duration,
    /// At most this many are kept (`--listen-replay`).
    pub events: usize,
}

/// How many events a trim let go of, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LetGo {
    /// Older than the grace.
    pub aged: u64,
    /// Young enough, but beyond the cap: a resume within the grace may reset.
    pub capped: u64,
    /// Young enough, but the oldest of the process when its streams kept more than
    /// `--listen-replay-bytes`: a resume within the grace may reset.
    pub shed: u64,
}

impl LetGo {
    /// Count them on `/metrics` (`docstore_session_replay_dropped_total`).
    pub(super) fn count(self) {
        for (by, n) in [
            ("age", self.aged),
            ("cap", self.capped),
            ("bytes", self.shed),
        ] {
            if n > 0 {
                metrics::counter!("docstore_session_replay_dropped_total", "by" => by).increment(n);
            }
        }
    }
}

/// The bytes the replays of every stream of the hub keep (a process runs one hub), as
/// [`frame_bytes`] estimates them: each [`Replay`] adds what it logs and takes away what it
/// lets go, and all it holds when it is dropped with its stream. Shared, so that no stream
/// removal can forget to take its part away; one relaxed atomic add per logged event.
#[derive(Debug, Clone, Default)]
pub(super) struct Account(Arc<AtomicUsize>);

impl Account {
    /// The bytes kept now.
    pub(super) fn bytes(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self, bytes: usize) {
        self.0.fetch_add(bytes, Ordering::Relaxed);
    }

    fn sub(&self, bytes: usize) {
        self.0.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// What one kept event costs beyond its strings and documents: its place in the log, the
/// `Event` allocation and the allocations of its slices (432 bytes on x86-64). With the names
/// below, a one-document `added` change of a four-segment name (scripts/bench_replay.py's)
/// comes to 753 bytes without its fields, against 0.72 KiB measured per stream with the
/// fields shared (BENCHMARKS.md, "What a stream's replay costs"), and 1,077 with its ~200
/// bytes of fields counted.
const ENTRY_BYTES: usize = 256 + size_of::<Kept>() + size_of::<Event>();

/// Estimated bytes a kept event holds: [`ENTRY_BYTES`], its stream id, the names of its
/// targets and documents, and the fields of the documents it carries (counted in full, as
/// if no other stream or target shared them: an upper bound of what letting it go frees).
pub(super) fn frame_bytes(frame: &Frame) -> usize {
    let event = &frame.event;
    let kind = match &event.kind {
        EventKind::Snapshot { results, changes } => {
            results
                .iter()
                .map(|(name, result)| {
                    size_of::<(String, TargetResult)>()
                        + name.len()
                        + match result {
                            TargetResult::Documents(docs) => docs.iter().map(document_bytes).sum(),
                            TargetResult::Aggregate(row) => map_bytes(row),
                        }
                })
                .sum::<usize>()
                + changes_bytes(changes)
        }
        EventKind::Change { changes } => changes_bytes(changes),
        EventKind::Heartbeat => 0,
        EventKind::Reset { message, .. } => message.len(),
    };
    ENTRY_BYTES + event.stream.len() + event.deleted.iter().map(path_bytes).sum::<usize>() + kind
}

fn changes_bytes(changes: &[(String, TargetDelta)]) -> usize {
    changes
        .iter()
        .map(|(name, delta)| {
            size_of::<(String, TargetDelta)>()
                + name.len()
                + match delta {
                    TargetDelta::Changes(changes) => changes
                        .iter()
                        .map(|c| match c {
                            DocChange::Added { doc, .. } | DocChange::Modified { doc, .. } => {
                                size_of::<DocChange>() + document_bytes(doc)
                            }
                            DocChange::Removed { path, .. } => {
                                size_of::<DocChange>() + path_bytes(path)
                            }
                        })
                        .sum(),
                    TargetDelta::Aggregate(row) => map_bytes(row),
                    TargetDelta::NeedsRequery => 0,
                }
        })
        .sum()
}

fn document_bytes(doc: &Document) -> usize {
    size_of::<Document>() + path_bytes(&doc.path) + map_bytes(&doc.fields)
}

fn path_bytes(path: &ResourcePath) -> usize {
    path.segments()
        .iter()
        .map(|s| size_of::<String>() + s.len())
        .sum()
}

/// One logged event: when it was logged and its estimated size.
#[derive(Debug)]
struct Kept {
    at: Instant,
    bytes: usize,
    frame: Frame,
}

/// The logged events of one stream and the oldest position a resume may name.
#[derive(Debug)]
pub(super) struct Replay {
    /// Each event with when it was logged, oldest first.
    log: VecDeque<Kept>,
    /// A resume at this position or later (up to the stream's) replays exactly the logged
    /// events after it: every event after it is still in `log`.
    floor: Lsn,
    /// The estimated bytes of `log`, counted in `account` too.
    bytes: usize,
    account: Account,
}

impl Drop for Replay {
    fn drop(&mut self) {
        self.account.sub(self.bytes);
    }
}

impl Replay {
    /// An empty replay whose oldest resumable position is `floor` (a new stream's `Lsn(0)`,
    /// an adopted stream's client position), whose events count in `account`.
    pub(super) fn new(floor: Lsn, account: Account) -> Replay {
        Replay {
            log: VecDeque::new(),
            floor,
            bytes: 0,
            account,
        }
    }

    /// The oldest position a resume may name.
    pub(super) fn floor(&self) -> Lsn {
        self.floor
    }

    /// How many events are kept.
    pub(super) fn len(&self) -> usize {
        self.log.len()
    }

    /// The estimated bytes of the kept events.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// When the oldest kept event was logged.
    fn oldest(&self) -> Option<Instant> {
        self.log.front().map(|k| k.at)
    }

    /// Log `frame`, logged at `now`, then let go of what `keep` no longer holds.
    pub(super) fn push(&mut self, frame: Frame, now: Instant, keep: Keep) -> LetGo {
        let bytes = frame_bytes(&frame);
        self.bytes += bytes;
        self.account.add(bytes);
        self.log.push_back(Kept {
            at: now,
            bytes,
            frame,
        });
        self.trim(now, keep)
    }

    /// Let go of the oldest event (if any): the floor rises to its position.
    fn let_go_oldest(&mut self) -> bool {
        let Some(kept) = self.log.pop_front() else {
            return false;
        };
        self.bytes -= kept.bytes;
        self.account.sub(kept.bytes);
        self.floor = self.floor.max(kept.frame.position);
        true
    }

    /// Let go of the events older than `keep.age` at `now` and of the oldest beyond
    /// `keep.events`; the floor rises to the newest position let go.
    pub(super) fn trim(&mut self, now: Instant, keep: Keep) -> LetGo {
        let mut let_go = LetGo::default();
        while let Some(oldest) = self.oldest() {
            if now.saturating_duration_since(oldest) > keep.age {
                let_go.aged += 1;
            } else if self.log.len() > keep.events {
                let_go.capped += 1;
            } else {
                break;
            }
            self.let_go_oldest();
        }
        let_go
    }

    /// The logged events after `position`.
    pub(super) fn after(&self, position: Lsn) -> Vec<Frame> {
        self.log
            .iter()
            .filter(|k| k.frame.position > position)
            .map(|k| k.frame.clone())
            .collect()
    }

    /// Let go of every event: only positions from `floor` on are held (a reset in place
    /// passes the one after the stream's, so that no older token is).
    pub(super) fn clear(&mut self, floor: Lsn) {
        self.log.clear();
        self.account.sub(std::mem::take(&mut self.bytes));
        self.floor = floor;
    }
}

/// Let go of the oldest events of `replays` (the streams of one [`Account`]), whichever
/// stream logged them, until the account holds at most `to` bytes; returns how many went.
/// Each stream that loses events has its floor raised as by its cap: a resume from before
/// them resets. Its cost is one pass over the streams and a heap step per event let go, so
/// the hub sheds to below its budget by a margin, not one event at a time.
pub(super) fn shed<'a>(
    replays: impl IntoIterator<Item = &'a mut Replay>,
    account: &Account,
    to: usize,
) -> u64 {
    if account.bytes() <= to {
        return 0;
    }
    let mut replays: Vec<&mut Replay> = replays.into_iter().filter(|r| r.len() > 0).collect();
    let mut oldest: BinaryHeap<Reverse<(Instant, usize)>> = replays
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some(Reverse((r.oldest()?, i))))
        .collect();
    let mut shed = 0;
    while account.bytes() > to {
        let Some(Reverse((_, i))) = oldest.pop() else {
            break;
        };
        let Some(replay) = replays.get_mut(i) else {
            continue;
        };
        if replay.let_go_oldest() {
            shed += 1;
        }
        if let Some(next) = replay.oldest() {
            oldest.push(Reverse((next, i)));
        }
    }
    shed
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::session::events::{self, At};

    fn frame(position: u64) -> Frame {
        events::change("s", Lsn(position), At::default(), Vec::new().into())
    }

    fn positions(frames: &[Frame]) -> Vec<u64> {
        frames.iter().map(|f| f.position.0).collect()
    }

    const KEEP: Keep = Keep {
        age: Duration::from_secs(60),
        events: 16_384,
    };

    #[test]
    fn events_younger_than_the_grace_are_kept_beyond_the_old_count() {
        let start = Instant::now();
        let mut replay = Replay::new(Lsn(0), Account::default());
        // 100 events a second for 40 s: 4,000 events, more than the 1,024 that used to be kept.
        for i in 1..=4_000u64 {
            replay.push(frame(i), start + Duration::from_millis(i * 10), KEEP);
        }
        assert_eq!(replay.len(), 4_000);
        assert_eq!(replay.floor(), Lsn(0));
        assert_eq!(
            positions(&replay.after(Lsn(1))),
            (2..=4_000).collect::<Vec<_>>()
        );
    }

    #[test]
    fn age_lets_go_of_old_events_and_the_floor_rises_to_the_newest_let_go() {
        let start = Instant::now();
        let mut replay = Replay::new(Lsn(0), Account::default());
        replay.push(frame(10), start, KEEP);
        replay.push(frame(20), start + Duration::from_secs(30), KEEP);
        replay.push(frame(30), start + Duration::from_secs(50), KEEP);
        // Exactly the grace old: still kept.
        replay.trim(start + Duration::from_secs(60), KEEP);
        assert_eq!((replay.len(), replay.floor()), (3, Lsn(0)));
        // The first is older than the grace; a tick lets it go.
        let let_go = replay.trim(start + Duration::from_secs(61), KEEP);
        assert_eq!(
            let_go,
            LetGo {
                aged: 1,
                ..LetGo::default()
            }
        );
        assert_eq!((replay.len(), replay.floor()), (2, Lsn(10)));
        // A resume at the floor is sent exactly what followed it.
        assert_eq!(positions(&replay.after(replay.floor())), vec![20, 30]);
        // A push lets go of what is old too, before it is counted.
        replay.push(frame(40), start + Duration::from_secs(115), KEEP);
        assert_eq!((replay.len(), replay.floor()), (1, Lsn(30)));
        assert_eq!(positions(&replay.after(Lsn(30))), vec![40]);
        // A quiet stream lets go of everything: only its newest position is held.
        replay.trim(start + Duration::from_secs(200), KEEP);
        assert_eq!((replay.len(), replay.floor()), (0, Lsn(40)));
        assert!(replay.after(Lsn(40)).is_empty());
    }

    #[test]
    fn the_cap_lets_go_of_the_oldest_however_young() {
        let now = Instant::now();
        let keep = Keep { events: 2, ..KEEP };
        let mut replay = Replay::new(Lsn(0), Account::default());
        let mut capped = 0;
        for p in [10, 20, 30, 40] {
            capped += replay.push(frame(p), now, keep).capped;
        }
        assert_eq!(capped, 2);
        assert_eq!((replay.len(), replay.floor()), (2, Lsn(20)));
        assert_eq!(positions(&replay.after(Lsn(20))), vec![30, 40]);
    }

    #[test]
    fn an_adopted_floor_holds_until_an_event_is_let_go() {
        let start = Instant::now();
        // An adopted stream's floor is its client's position: nothing logged yet.
        let mut replay = Replay::new(Lsn(500), Account::default());
        replay.trim(start + Duration::from_secs(3_600), KEEP);
        assert_eq!(replay.floor(), Lsn(500));
        replay.push(frame(600), start, KEEP);
        assert_eq!(positions(&replay.after(Lsn(500))), vec![600]);
        replay.trim(start + Duration::from_secs(61), KEEP);
        assert_eq!((replay.len(), replay.floor()), (0, Lsn(600)));
    }

    #[test]
    fn clear_holds_only_positions_from_the_new_floor() {
        let now = Instant::now();
        let mut replay = Replay::new(Lsn(0), Account::default());
        replay.push(frame(10), now, KEEP);
        replay.clear(Lsn(11));
        assert_eq!((replay.len(), replay.floor()), (0, Lsn(11)));
    }

    #[test]
    fn the_account_holds_what_every_replay_keeps_until_it_is_let_go() {
        let now = Instant::now();
        let account = Account::default();
        let mut a = Replay::new(Lsn(0), account.clone());
        let mut b = Replay::new(Lsn(0), account.clone());
        a.push(frame(10), now, KEEP);
        a.push(frame(20), now, KEEP);
        b.push(frame(15), now, KEEP);
        let one = frame_bytes(&frame(10));
        assert!(one > 0);
        assert_eq!((a.bytes(), b.bytes()), (2 * one, one));
        assert_eq!(account.bytes(), 3 * one);
        // Aged out, capped, cleared or dropped with its stream: taken away from the account.
        a.trim(now + Duration::from_secs(61), KEEP);
        assert_eq!((a.bytes(), account.bytes()), (0, one));
        a.push(frame(30), now, KEEP);
        a.push(frame(40), now, Keep { events: 1, ..KEEP });
        assert_eq!(account.bytes(), 2 * one);
        a.clear(Lsn(41));
        assert_eq!(account.bytes(), one);
        drop(b);
        assert_eq!(account.bytes(), 0);
    }

    #[test]
    fn a_frame_counts_its_names_and_fields() {
        use crate::matcher::{DocChange, Document, TargetDelta};
        use docstore_core::value::{Map, Timestamp, Value};
        let doc = |text: &str| {
            let mut fields = Map::new();
            fields.insert("text".to_owned(), Value::String(text.to_owned()));
            let path = ResourcePath::parse("rooms/r1/messages/m1").unwrap();
            let t = Timestamp::from_micros(0).unwrap();
            let added = DocChange::Added {
                doc: Document::new(path, fields, t, t),
                new_index: 0,
            };
            let changes = vec![("t".to_owned(), TargetDelta::Changes(vec![added]))];
            events::change("s", Lsn(1), At::default(), changes.into())
        };
        let empty = frame_bytes(&frame(1));
        let small = frame_bytes(&doc("x"));
        let large = frame_bytes(&doc(&"x".repeat(4_000)));
        assert!(empty < small);
        assert_eq!(large - small, 3_999);
    }

    #[test]
    fn shedding_lets_go_of_the_oldest_of_every_stream_and_raises_their_floors() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let account = Account::default();
        let mut a = Replay::new(Lsn(0), account.clone());
        let mut b = Replay::new(Lsn(0), account.clone());
        let mut quiet = Replay::new(Lsn(7), account.clone());
        // One stream's events at 0, 2, 4 s, the other's at 1, 3, 5 s, all the same size.
        for (p, s) in [(10, 0), (30, 2), (50, 4)] {
            a.push(frame(p), at(s), KEEP);
        }
        for (p, s) in [(11, 1), (31, 3), (51, 5)] {
            b.push(frame(p), at(s), KEEP);
        }
        let one = frame_bytes(&frame(10));
        assert_eq!(account.bytes(), 6 * one);
        // Within the budget: nothing goes.
        assert_eq!(shed([&mut a, &mut b, &mut quiet], &account, 6 * one), 0);
        // Down to three events: the three oldest of all go (0 s and 2 s of one, 1 s of the other).
        assert_eq!(shed([&mut a, &mut b, &mut quiet], &account, 3 * one), 3);
        assert_eq!(account.bytes(), 3 * one);
        assert_eq!((a.len(), a.floor()), (1, Lsn(30)));
        assert_eq!((b.len(), b.floor()), (2, Lsn(11)));
        assert_eq!(quiet.floor(), Lsn(7));
        // A resume at a floor is still sent exactly what followed it.
        assert_eq!(positions(&a.after(a.floor())), vec![50]);
        assert_eq!(positions(&b.after(b.floor())), vec![31, 51]);
        // A budget of nothing keeps nothing; every floor is then the newest position.
        assert_eq!(shed([&mut a, &mut b, &mut quiet], &account, 0), 3);
        assert_eq!(
            (a.floor(), b.floor(), account.bytes()),
            (Lsn(50), Lsn(51), 0)
        );
    }
}
