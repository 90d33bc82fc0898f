//! Wire forms of the Postgres values the sidecar reads and binds, in binary format: `jsonb`
//! as its text (typed JSON, written to clients as it is) and `timestamptz` as microseconds.

use std::error::Error;

use bytes::{BufMut, BytesMut};
use docstore_core::Timestamp;
use tokio_postgres::types::{accepts, to_sql_checked, FromSql, IsNull, ToSql, Type};

/// The binary `jsonb` format's version byte.
const JSONB_VERSION: u8 = 1;

type BoxError = Box<dyn Error + Sync + Send>;

/// JSON text bound as a `jsonb` (or `json`) parameter without parsing it again: the caller
/// validated it.
#[derive(Debug, Clone, Copy)]
pub struct JsonText<'a>(pub &'a str);

impl ToSql for JsonText<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        if *ty == Type::JSONB {
            out.put_u8(JSONB_VERSION);
        }
        out.put_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    accepts!(JSON, JSONB);
    to_sql_checked!();
}

/// A `jsonb` value as its text: typed JSON, ready to be written into a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawJson(pub String);

impl<'a> FromSql<'a> for RawJson {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        let text = if *ty == Type::JSONB {
            match raw.split_first() {
                Some((&JSONB_VERSION, rest)) => rest,
                _ => return Err("unsupported jsonb binary version".into()),
            }
        } else {
            raw
        };
        Ok(RawJson(std::str::from_utf8(text)?.to_owned()))
    }

    accepts!(JSON, JSONB);
}

/// A `timestamptz` in Postgres microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgTime(pub i64);

impl PgTime {
    /// RFC 3339 in UTC with six fractional digits (`2026-11-23T02:15:53.123456Z`), core's
    /// canonical form; `None` for a time outside years 1-9999 (`infinity`).
    pub fn to_rfc3339(self) -> Option<String> {
        Timestamp::from_postgres_micros(self.0).map(Timestamp::to_rfc3339)
    }
}

impl<'a> FromSql<'a> for PgTime {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        let bytes: [u8; 8] = raw.try_into().map_err(|_| "timestamptz is not 8 bytes")?;
        Ok(PgTime(i64::from_be_bytes(bytes)))
    }

    accepts!(TIMESTAMPTZ);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_in_core_form() {
        assert_eq!(
            PgTime(0).to_rfc3339().as_deref(),
            Some("2000-01-01T00:00:00.000000Z")
        );
        assert_eq!(
            PgTime(1).to_rfc3339().as_deref(),
            Some("2000-01-01T00:00:00.000001Z")
        );
        assert_eq!(PgTime(i64::MAX).to_rfc3339(), None);
    }

    #[test]
    fn jsonb_text_round_trip() {
        let mut out = BytesMut::new();
        JsonText("{\"a\": 1}")
            .to_sql(&Type::JSONB, &mut out)
            .unwrap();
        let back = RawJson::from_sql(&Type::JSONB, &out).unwrap();
        assert_eq!(back.0, "{\"a\": 1}");
        assert!(RawJson::from_sql(&Type::JSONB, &[2, b'1']).is_err());
        assert!(RawJson::from_sql(&Type::JSONB, &[]).is_err());
    }
}
