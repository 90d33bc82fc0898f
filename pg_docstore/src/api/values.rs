//! Value functions: encoding and comparison, straight from docstore-core.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use docstore_core::encoding::{encode_index_value, Direction};

use crate::errors::DocstoreError;
use crate::pg::jsonb::TypedJsonb;

/// The order-preserving encoding of a typed-JSON value (truncated to 1,500 bytes like an
/// index entry), ascending or descending.
///
/// ```sql
/// select docstore.encode_value('{"$timestamp": "2024-01-01T00:00:00Z"}');
/// select docstore.encode_value('1', descending => true);
/// ```
#[pg_extern(immutable, parallel_safe)]
fn encode_value(v: TypedJsonb, descending: default!(bool, false)) -> Result<Vec<u8>, ErrorReport> {
    let value = v.value().map_err(DocstoreError::from)?;
    let direction = if descending {
        Direction::Descending
    } else {
        Direction::Ascending
    };
    Ok(encode_index_value(&value, direction))
}

/// Compare two typed-JSON values in Firestore's order: -1, 0 or 1.
///
/// ```sql
/// select docstore.compare_values('1', '1.0');             -- 0
/// select docstore.compare_values('"a"', '{"$bytes":""}'); -- -1
/// ```
#[pg_extern(immutable, parallel_safe)]
fn compare_values(a: TypedJsonb, b: TypedJsonb) -> Result<i32, ErrorReport> {
    let a = a.value().map_err(DocstoreError::from)?;
    let b = b.value().map_err(DocstoreError::from)?;
    Ok(docstore_core::compare(&a, &b) as i32)
}

/// Normalise a typed-JSON value to its canonical text (what every docstore function prints).
///
/// ```sql
/// select docstore.typed_json('{"$timestamp": "2024-01-01T02:00:00+02:00"}');
/// ```
#[pg_extern(immutable, parallel_safe)]
fn typed_json(v: TypedJsonb) -> Result<TypedJsonb, ErrorReport> {
    let value = v.value().map_err(DocstoreError::from)?;
    Ok(TypedJsonb::from_value(&value))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn compare_values_crosses_types() {
        let r = Spi::get_one::<i32>(
            "select docstore.compare_values('9007199254740993', '9007199254740992.0')",
        );
        assert_eq!(r, Ok(Some(1)));
        let r = Spi::get_one::<i32>(
            "select docstore.compare_values('{\"$double\":\"NaN\"}', '-1e300')",
        );
        assert_eq!(r, Ok(Some(-1)));
    }

    #[pg_test]
    fn doubles_survive_jsonb() {
        for text in [
            "1e18",
            "1.0",
            "-0.000001",
            "1e300",
            "123456789.125",
            "{\"$double\":\"-0.0\"}",
        ] {
            let once =
                Spi::get_one::<String>(&format!("select docstore.typed_json('{text}')::text"))
                    .ok()
                    .flatten()
                    .unwrap_or_default();
            let twice =
                Spi::get_one::<String>(&format!("select docstore.typed_json('{once}')::text"))
                    .ok()
                    .flatten()
                    .unwrap_or_default();
            assert_eq!(once, twice, "{text}");
            let same = Spi::get_one::<i32>(&format!(
                "select docstore.compare_values('{text}', '{twice}')"
            ));
            assert_eq!(same, Ok(Some(0)), "{text}");
        }
    }

    #[pg_test(
        error = "invalid $timestamp at <root>: \"yesterday\" is not an RFC 3339 time between years 1 and 9999 with at most microsecond precision"
    )]
    fn bad_typed_json_is_an_error() {
        let _ = Spi::get_one::<Vec<u8>>(
            "select docstore.encode_value('{\"$timestamp\":\"yesterday\"}')",
        );
    }
}
