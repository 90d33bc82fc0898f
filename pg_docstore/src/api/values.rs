//! Value functions: encoding and comparison, straight from docstore-core.

use pgrx::prelude::*;
use pgrx::JsonB;

use docstore_core::encoding::{encode_index_value, Direction};
use docstore_core::typed_json;

use crate::errors::DocstoreError;

/// The order-preserving encoding of a typed-JSON value (truncated to 1,500 bytes like an
/// index entry), ascending or descending.
///
/// ```sql
/// select docstore.encode_value('{"$timestamp": "2024-01-01T00:00:00Z"}');
/// select docstore.encode_value('1', descending => true);
/// ```
#[pg_extern(immutable, parallel_safe)]
fn encode_value(v: JsonB, descending: default!(bool, false)) -> Result<Vec<u8>, pgrx::pg_sys::panic::ErrorReport> {
    let value = typed_json::from_json(&v.0).map_err(DocstoreError::from)?;
    let direction = if descending { Direction::Descending } else { Direction::Ascending };
    Ok(encode_index_value(&value, direction))
}

/// Compare two typed-JSON values in Firestore's order: -1, 0 or 1.
///
/// ```sql
/// select docstore.compare_values('1', '1.0');          -- 0
/// select docstore.compare_values('"a"', '{"$bytes":""}'); -- -1
/// ```
#[pg_extern(immutable, parallel_safe)]
fn compare_values(a: JsonB, b: JsonB) -> Result<i32, pgrx::pg_sys::panic::ErrorReport> {
    let a = typed_json::from_json(&a.0).map_err(DocstoreError::from)?;
    let b = typed_json::from_json(&b.0).map_err(DocstoreError::from)?;
    Ok(docstore_core::compare(&a, &b) as i32)
}
