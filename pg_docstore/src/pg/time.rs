//! Time: Postgres `timestamptz` (microseconds since 2000-01-01) <-> docstore timestamps
//! (microseconds since 1970-01-01).

use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys;

use docstore_core::Timestamp;

use crate::errors::DocstoreError;

/// The current transaction's start time (`now()`), in Postgres microseconds.
pub fn transaction_start() -> i64 {
    // SAFETY: reads a field of the current transaction state; always valid inside a call.
    unsafe { pg_sys::GetCurrentTransactionStartTimestamp() }
}

pub fn to_timestamp(pg_micros: i64) -> Result<Timestamp, DocstoreError> {
    Timestamp::from_postgres_micros(pg_micros).ok_or_else(|| {
        DocstoreError::InvalidArgument(format!("time {pg_micros} is outside years 1-9999"))
    })
}

pub fn from_timestamp(t: Timestamp) -> i64 {
    t.postgres_micros()
}

pub fn to_timestamptz(pg_micros: i64) -> Result<TimestampWithTimeZone, DocstoreError> {
    TimestampWithTimeZone::try_from(pg_micros)
        .map_err(|_| DocstoreError::InvalidArgument(format!("time {pg_micros} is out of range")))
}

pub fn from_timestamptz(t: TimestampWithTimeZone) -> i64 {
    pg_sys::TimestampTz::from(t)
}
