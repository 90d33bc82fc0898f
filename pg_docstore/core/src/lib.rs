//! `docstore-core`: the single source of truth for pg_docstore's value semantics.
//!
//! Everything that decides what a value *is* lives here, with no pgrx and no I/O, so the
//! PostgreSQL extension, the live-query sidecar and the rules compiler can never disagree:
//!
//! - [`value`]: the Firestore value model ([`Value`]) and its timestamp and geopoint types.
//! - [`compare`]: the one total order over values ([`compare()`]).
//! - [`typed_json`]: the one text form of a value (parse and print), see `docs/typed-json.md`.
//! - [`path`]: document, collection and field paths.
//! - [`error`]: the canonical error codes and the one kind -> code -> SQLSTATE table.
//! - [`limits`]: Firestore's limits (document size, nesting, name lengths).
//! - [`encoding`]: the order-preserving byte encoding of values and document names, see
//!   `docs/encoding.md`.

pub mod commit;
pub mod compare;
pub mod encoding;
pub mod error;
pub mod index;
pub mod limits;
pub mod mutation;
pub mod path;
pub mod plan;
pub mod query;
pub mod typed_json;
pub mod value;

pub use compare::compare;
pub use error::{Code, ErrorKind};
pub use path::{FieldPath, PathError, ResourcePath};
pub use typed_json::TypedJsonError;
pub use value::{GeoPoint, Timestamp, Value};
