//! Wall-clock microseconds: the writer, the streams and Postgres's commit times are all read
//! from this machine's clock, so their differences are latencies.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix microseconds (0 if the clock is before 1970).
pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// An event's `commitTime` (`2026-11-23T05:00:00.123456Z`) in Unix microseconds.
pub fn parse_commit_time(text: &str) -> Option<i64> {
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.fZ")
        .ok()
        .map(|t| t.and_utc().timestamp_micros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_times_parse_to_micros() {
        assert_eq!(
            parse_commit_time("1970-01-01T00:00:01.000002Z"),
            Some(1_000_002)
        );
        assert_eq!(parse_commit_time("1970-01-01T00:00:01Z"), Some(1_000_000));
        assert_eq!(parse_commit_time("yesterday"), None);
    }
}
