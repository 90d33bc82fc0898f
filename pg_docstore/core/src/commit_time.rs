//! The time a commit takes (docs/storage.md, "Commit times"), in microseconds of any one epoch
//! (the extension passes Postgres microseconds).
//!
//! A commit's time is taken when its writes are applied, not when its transaction began, and
//! is the largest of three lower bounds:
//! - the clock at that moment, so times follow the wall clock;
//! - one microsecond after the newest update time of the documents it writes, so each
//!   document's update times strictly increase whatever the clock does;
//! - one microsecond after the last time assigned on this Postgres instance, so commits taken
//!   one after the other (one client's consecutive commits above all) get strictly increasing
//!   times even when the clock gives the same microsecond twice or steps back.
//!
//! A later write call in the same SQL transaction keeps the transaction's time
//! ([`within_transaction`]): one atomic commit, one time.

/// The time of a commit whose writes are applied now: the largest of `clock`, `latest + 1`
/// (`latest`: the newest update time of the documents written, `i64::MIN` when none exists)
/// and `last_assigned + 1` (`i64::MIN` when nothing was assigned, or the instance keeps no
/// shared record).
#[must_use]
pub fn commit_time(clock: i64, latest: i64, last_assigned: i64) -> i64 {
    clock
        .max(latest.saturating_add(1))
        .max(last_assigned.saturating_add(1))
}

/// The time of a later write call of a transaction that already took `taken`: the same time,
/// unless a document it writes was updated at or after it (by a transaction that committed
/// in between), then one microsecond after that document's time.
#[must_use]
pub fn within_transaction(taken: i64, latest: i64) -> i64 {
    taken.max(latest.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_when_it_is_ahead() {
        assert_eq!(commit_time(1_000, 500, 900), 1_000);
        assert_eq!(commit_time(1_000, i64::MIN, i64::MIN), 1_000);
    }

    #[test]
    fn consecutive_commits_in_one_microsecond_strictly_increase() {
        // The clock reads the same microsecond for three commits in a row.
        let first = commit_time(1_000, i64::MIN, 999);
        let second = commit_time(1_000, i64::MIN, first);
        let third = commit_time(1_000, i64::MIN, second);
        assert_eq!((first, second, third), (1_000, 1_001, 1_002));
    }

    #[test]
    fn a_clock_that_steps_back_does_not_take_times_back() {
        let first = commit_time(5_000, i64::MIN, i64::MIN);
        let second = commit_time(4_000, i64::MIN, first);
        assert_eq!(second, 5_001);
    }

    #[test]
    fn after_every_document_written() {
        // A document stamped ahead of the clock (by an earlier commit of the same
        // microsecond) and no shared record (the library was not preloaded).
        assert_eq!(commit_time(1_000, 1_000, i64::MIN), 1_001);
        assert_eq!(commit_time(1_000, 3_000, 2_000), 3_001);
    }

    #[test]
    fn a_transaction_keeps_its_time_unless_a_document_is_newer() {
        assert_eq!(within_transaction(1_000, 900), 1_000);
        assert_eq!(within_transaction(1_000, i64::MIN), 1_000);
        // Its own earlier write of the same document.
        assert_eq!(within_transaction(1_000, 1_000), 1_001);
        // A commit of another transaction since.
        assert_eq!(within_transaction(1_000, 1_500), 1_501);
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        assert_eq!(commit_time(0, i64::MAX, i64::MAX), i64::MAX);
        assert_eq!(within_transaction(0, i64::MAX), i64::MAX);
    }
}
