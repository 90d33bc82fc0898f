//! The Firestore value model.

use std::collections::BTreeMap;
use std::fmt;

use crate::path::ResourcePath;

/// A Firestore map: field names in UTF-8 byte order (the order maps compare in).
pub type Map = BTreeMap<String, Value>;

/// One Firestore value.
///
/// `PartialEq` is *identity* (same type, same bits), not Firestore equality: `Integer(1)` and
/// `Double(1.0)` are different values that compare equal under [`crate::compare()`], `-0.0` is
/// not `0.0`, and every NaN is identical to every other (NaN payloads carry no meaning in
/// Firestore and typed JSON has one spelling for them). Use [`crate::compare()`] for query
/// semantics.
#[derive(Debug, Clone)]
pub enum Value {
    Null,
    Boolean(bool),
    Integer(i64),
    Double(f64),
    Timestamp(Timestamp),
    String(String),
    Bytes(Vec<u8>),
    /// A reference to a document in the same database.
    Reference(ResourcePath),
    GeoPoint(GeoPoint),
    Array(Vec<Value>),
    Vector(Vec<f64>),
    Map(Map),
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        use Value::*;
        match (self, other) {
            (Null, Null) => true,
            (Boolean(a), Boolean(b)) => a == b,
            (Integer(a), Integer(b)) => a == b,
            (Double(a), Double(b)) => same_double(*a, *b),
            (Timestamp(a), Timestamp(b)) => a == b,
            (String(a), String(b)) => a == b,
            (Bytes(a), Bytes(b)) => a == b,
            (Reference(a), Reference(b)) => a == b,
            (GeoPoint(a), GeoPoint(b)) => {
                a.latitude.to_bits() == b.latitude.to_bits()
                    && a.longitude.to_bits() == b.longitude.to_bits()
            }
            (Array(a), Array(b)) => a == b,
            (Vector(a), Vector(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_double(*x, *y))
            }
            (Map(a), Map(b)) => a == b,
            _ => false,
        }
    }
}

/// Identity of doubles: the same bits, or both NaN.
fn same_double(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// The type of a value, in Firestore's cross-type order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TypeOrder {
    Null,
    Boolean,
    Number,
    Timestamp,
    String,
    Bytes,
    Reference,
    GeoPoint,
    Array,
    Vector,
    Map,
}

impl Value {
    /// Where this value's type sits in Firestore's cross-type order.
    pub fn type_order(&self) -> TypeOrder {
        match self {
            Value::Null => TypeOrder::Null,
            Value::Boolean(_) => TypeOrder::Boolean,
            Value::Integer(_) | Value::Double(_) => TypeOrder::Number,
            Value::Timestamp(_) => TypeOrder::Timestamp,
            Value::String(_) => TypeOrder::String,
            Value::Bytes(_) => TypeOrder::Bytes,
            Value::Reference(_) => TypeOrder::Reference,
            Value::GeoPoint(_) => TypeOrder::GeoPoint,
            Value::Array(_) => TypeOrder::Array,
            Value::Vector(_) => TypeOrder::Vector,
            Value::Map(_) => TypeOrder::Map,
        }
    }

    /// The name of the value's type as error messages and docs spell it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Boolean(_) => "boolean",
            Value::Integer(_) => "integer",
            Value::Double(_) => "double",
            Value::Timestamp(_) => "timestamp",
            Value::String(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::Reference(_) => "reference",
            Value::GeoPoint(_) => "geopoint",
            Value::Array(_) => "array",
            Value::Vector(_) => "vector",
            Value::Map(_) => "map",
        }
    }
}

/// A point on Earth. Latitude in [-90, 90], longitude in [-180, 180], never NaN.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoPoint {
    pub latitude: f64,
    pub longitude: f64,
}

/// A UTC instant with microsecond precision, between 0001-01-01T00:00:00Z and
/// 9999-12-31T23:59:59.999999Z (Firestore's range).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    micros: i64,
}

/// Microseconds since the Unix epoch of 0001-01-01T00:00:00Z.
pub const MIN_TIMESTAMP_MICROS: i64 = -62_135_596_800_000_000;
/// Microseconds since the Unix epoch of 9999-12-31T23:59:59.999999Z.
pub const MAX_TIMESTAMP_MICROS: i64 = 253_402_300_799_999_999;
/// Microseconds between the Unix epoch and the Postgres epoch (2000-01-01T00:00:00Z), the
/// origin of `timestamptz` values, of pgoutput's commit times and of replication messages.
pub const POSTGRES_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;

impl Timestamp {
    /// A timestamp from microseconds since the Unix epoch; `None` outside Firestore's range.
    pub fn from_micros(micros: i64) -> Option<Self> {
        (MIN_TIMESTAMP_MICROS..=MAX_TIMESTAMP_MICROS)
            .contains(&micros)
            .then_some(Timestamp { micros })
    }

    /// Microseconds since the Unix epoch.
    pub fn micros(self) -> i64 {
        self.micros
    }

    /// A timestamp from Postgres microseconds (since 2000-01-01, as `timestamptz` and
    /// pgoutput hold them); `None` outside Firestore's range (or on overflow).
    pub fn from_postgres_micros(pg_micros: i64) -> Option<Self> {
        Self::from_micros(pg_micros.checked_add(POSTGRES_EPOCH_UNIX_MICROS)?)
    }

    /// Microseconds since the Postgres epoch (never overflows: the range is within years 1-9999).
    pub fn postgres_micros(self) -> i64 {
        self.micros - POSTGRES_EPOCH_UNIX_MICROS
    }

    /// Parse RFC 3339 (`2022-09-01T13:23:22.123456Z`, any offset). Digits beyond the sixth
    /// fractional digit must be zero: a timestamp is never silently rounded.
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        let parsed = chrono::DateTime::parse_from_rfc3339(text).ok()?;
        if parsed.timestamp_subsec_nanos() % 1_000 != 0 {
            return None;
        }
        Self::from_micros(parsed.timestamp_micros())
    }

    /// The canonical text form: UTC, `Z`, always six fractional digits.
    pub fn to_rfc3339(self) -> String {
        match chrono::DateTime::from_timestamp_micros(self.micros) {
            // chrono's RFC 3339 writer, not a `format` string parsed on every call (that was
            // 2% of the sidecar's CPU per request): the same text for years 1-9999.
            Some(dt) => dt.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            // Unreachable: the constructor keeps micros inside chrono's range.
            None => format!("{}us", self.micros),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_micros_are_counted_from_2000() {
        let y2k = Timestamp::from_postgres_micros(0).unwrap();
        assert_eq!(y2k.to_rfc3339(), "2000-01-01T00:00:00.000000Z");
        assert_eq!(y2k.postgres_micros(), 0);
        let t = Timestamp::parse_rfc3339("1970-01-01T00:00:00.000001Z").unwrap();
        assert_eq!(t.postgres_micros(), 1 - POSTGRES_EPOCH_UNIX_MICROS);
        assert_eq!(
            Timestamp::from_postgres_micros(t.postgres_micros()),
            Some(t)
        );
        // `infinity` and anything past year 9999 is no timestamp, and never overflows.
        assert_eq!(Timestamp::from_postgres_micros(i64::MAX), None);
        assert_eq!(Timestamp::from_postgres_micros(i64::MIN), None);
    }
}
