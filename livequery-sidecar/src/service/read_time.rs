//! The read time of a held read-only transaction (Firestore's `read_only.read_time`,
//! docs/grpc.md "Transactions and read times"), judged against its snapshot: a time at or
//! after the newest commit is the snapshot's own, an earlier one needs the version history
//! (the transaction's reads then use the extension's `*_at` functions, which refuse a time
//! older than the history: docs/storage.md, "Version history"). Reads at a `read_time`
//! outside a transaction go to those functions directly.
//!
//! The newest commit time is `docstore.last_commit_time()`: the extension's shared-memory
//! record of the last time it assigned (one atomic load; the server's start time when no
//! commit was made since). It is asked inside the transaction, after its snapshot, so a commit
//! that could have changed what the snapshot sees has already advanced it. Times are
//! instance-wide, so a commit in another database also makes an older time a past one.

use docstore_core::{Code, Timestamp};

use super::error::ServiceError;
use crate::pg::types::PgTime;

/// Why a read time is not the snapshot's.
const RETENTION: &str = "a read at it needs the version history";

/// Whether a read whose snapshot was taken before the newest commit time `latest` was read
/// answers for `read_time`.
///
/// # Errors
/// FAILED_PRECONDITION when a commit after `read_time` exists (or the newest commit time is
/// not known: the library is not preloaded): the caller reads from the version history
/// instead; INVALID_ARGUMENT for a time after both the clock and the newest commit.
pub fn judge(read_time: Timestamp, latest: Option<PgTime>) -> Result<(), ServiceError> {
    let Some(latest) = latest.and_then(|t| Timestamp::from_postgres_micros(t.0)) else {
        return Err(ServiceError::new(
            Code::FailedPrecondition,
            format!(
                "read_time {} cannot be checked: the newest commit time is not known (pg_docstore \
                 is not in shared_preload_libraries); {RETENTION}",
                read_time.to_rfc3339()
            ),
        ));
    };
    if read_time < latest {
        return Err(ServiceError::new(
            Code::FailedPrecondition,
            format!(
                "read_time {} is before the newest commit ({}): {RETENTION}",
                read_time.to_rfc3339(),
                latest.to_rfc3339()
            ),
        )
        .with_hint("read without a read_time, or at a time at or after the newest commit"));
    }
    // A time past both the clock and the newest commit: a later commit could still take a
    // time at or before it, so the read would not be repeatable.
    if super::context::now_timestamp().is_some_and(|now| read_time > now) && read_time > latest {
        return Err(ServiceError::invalid_argument(format!(
            "read_time {} is in the future",
            read_time.to_rfc3339()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(micros: i64) -> Timestamp {
        Timestamp::from_micros(micros).unwrap()
    }

    fn pg(t: Timestamp) -> Option<PgTime> {
        Some(PgTime(
            t.micros() - docstore_core::value::POSTGRES_EPOCH_UNIX_MICROS,
        ))
    }

    #[test]
    fn a_read_time_at_or_after_the_newest_commit_is_current() {
        let newest = at(1_700_000_000_000_000);
        assert_eq!(judge(newest, pg(newest)), Ok(()));
        assert_eq!(judge(at(newest.micros() + 1), pg(newest)), Ok(()));
    }

    #[test]
    fn an_older_read_time_needs_history() {
        let newest = at(1_700_000_000_000_000);
        let e = judge(at(newest.micros() - 1), pg(newest)).unwrap_err();
        assert_eq!(e.code, Code::FailedPrecondition);
        assert!(e.message.contains("version history"), "{}", e.message);
        let e = judge(newest, None).unwrap_err();
        assert_eq!(e.code, Code::FailedPrecondition);
        assert!(
            e.message.contains("shared_preload_libraries"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_read_time_past_the_clock_and_the_newest_commit_is_refused() {
        let newest = at(1_700_000_000_000_000);
        let e = judge(at(253_402_300_799_999_999), pg(newest)).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
    }
}
