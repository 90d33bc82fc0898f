//! A stream's replay: the events it logged for resumes (docs/listen.md, "Positions, ids and
//! resuming"). A resume at a position the stream still holds is sent the logged events after
//! it. Events are kept while they are younger than the stream's grace
//! (`--listen-grace-seconds`, the time a disconnected stream waits for its resume), so that a
//! client away for less than the grace resumes without a reset however busy its stream is;
//! `--listen-replay` caps how many one stream keeps (a memory guard), the oldest going first.
//! Whatever goes, by age or by the cap, raises the floor to its position: a resume at the
//! floor or later is still sent exactly the events after it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::session::events::Frame;
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
}

impl LetGo {
    /// Count them on `/metrics` (`docstore_session_replay_dropped_total`).
    pub(super) fn count(self) {
        for (by, n) in [("age", self.aged), ("cap", self.capped)] {
            if n > 0 {
                metrics::counter!("docstore_session_replay_dropped_total", "by" => by).increment(n);
            }
        }
    }
}

/// The logged events of one stream and the oldest position a resume may name.
#[derive(Debug)]
pub(super) struct Replay {
    /// Each event with when it was logged, oldest first.
    log: VecDeque<(Instant, Frame)>,
    /// A resume at this position or later (up to the stream's) replays exactly the logged
    /// events after it: every event after it is still in `log`.
    floor: Lsn,
}

impl Replay {
    /// An empty replay whose oldest resumable position is `floor` (a new stream's `Lsn(0)`,
    /// an adopted stream's client position).
    pub(super) fn new(floor: Lsn) -> Replay {
        Replay {
            log: VecDeque::new(),
            floor,
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

    /// Log `frame`, logged at `now`, then let go of what `keep` no longer holds.
    pub(super) fn push(&mut self, frame: Frame, now: Instant, keep: Keep) -> LetGo {
        self.log.push_back((now, frame));
        self.trim(now, keep)
    }

    /// Let go of the events older than `keep.age` at `now` and of the oldest beyond
    /// `keep.events`; the floor rises to the newest position let go.
    pub(super) fn trim(&mut self, now: Instant, keep: Keep) -> LetGo {
        let mut let_go = LetGo::default();
        while let Some((at, _)) = self.log.front() {
            let old = now.saturating_duration_since(*at) > keep.age;
            if old {
                let_go.aged += 1;
            } else if self.log.len() > keep.events {
                let_go.capped += 1;
            } else {
                break;
            }
            if let Some((_, frame)) = self.log.pop_front() {
                self.floor = self.floor.max(frame.position);
            }
        }
        let_go
    }

    /// The logged events after `position`.
    pub(super) fn after(&self, position: Lsn) -> Vec<Frame> {
        self.log
            .iter()
            .filter(|(_, f)| f.position > position)
            .map(|(_, f)| f.clone())
            .collect()
    }

    /// Let go of every event: only positions from `floor` on are held (a reset in place
    /// passes the one after the stream's, so that no older token is).
    pub(super) fn clear(&mut self, floor: Lsn) {
        self.log.clear();
        self.floor = floor;
    }
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
        let mut replay = Replay::new(Lsn(0));
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
        let mut replay = Replay::new(Lsn(0));
        replay.push(frame(10), start, KEEP);
        replay.push(frame(20), start + Duration::from_secs(30), KEEP);
        replay.push(frame(30), start + Duration::from_secs(50), KEEP);
        // Exactly the grace old: still kept.
        replay.trim(start + Duration::from_secs(60), KEEP);
        assert_eq!((replay.len(), replay.floor()), (3, Lsn(0)));
        // The first is older than the grace; a tick lets it go.
        let let_go = replay.trim(start + Duration::from_secs(61), KEEP);
        assert_eq!(let_go, LetGo { aged: 1, capped: 0 });
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
        let mut replay = Replay::new(Lsn(0));
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
        let mut replay = Replay::new(Lsn(500));
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
        let mut replay = Replay::new(Lsn(0));
        replay.push(frame(10), now, KEEP);
        replay.clear(Lsn(11));
        assert_eq!((replay.len(), replay.floor()), (0, Lsn(11)));
    }
}
