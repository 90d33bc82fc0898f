//! `docstore-core`: the single source of truth for pg_docstore's value semantics.
//!
//! Everything that decides what a value *is* lives here, with no pgrx and no I/O, so the
//! PostgreSQL extension, the live-query sidecar and the rules compiler can never disagree:
//!
//! Modules, bottom-up. Each imports only modules on lower lines (the module graph is a DAG;
//! `tests/module_graph.rs` checks it):
//!
//! 1. Leaves, importing nothing from core: [`error`] (the canonical codes and the one kind ->
//!    code -> SQLSTATE table), [`limits`] (every limit, as constants), [`reserved`] (the
//!    reserved names).
//! 2. [`path`]: document, collection and field paths.
//! 3. [`value`]: the Firestore value model ([`Value`]) and its timestamp and geopoint types.
//! 4. [`compare`]: the one total order over values ([`compare()`]).
//! 5. [`typed_json`]: the one text form of a value (parse and print), see `docs/typed-json.md`;
//!    [`encoding`]: the order-preserving byte encoding of values and document names, see
//!    `docs/encoding.md`; [`document`]: a document's storage size and its limit checks.
//! 6. [`mutation`]: writes (create, set, merge, update, transforms); [`index`]: index
//!    definitions and a document's index entries; [`query`]: the query model, its two front
//!    ends, the matcher and result shaping.
//! 7. [`commit`]: the commit format (a batch of mutations with preconditions); [`plan`]: the
//!    query planner over the index layout.
//! 8. [`proto`] (feature `firestore-proto`): the conversion between Firestore's protobuf
//!    values and ours, for the sidecar's gRPC front end (docs/grpc.md).
//!
//! Apart from the layers, importing nothing: [`commit_time`], the time a commit takes.
//!
//! Every error type reports an [`ErrorKind`] (`kind()`); the boundaries map kinds, never
//! variants.

pub mod commit;
pub mod commit_time;
pub mod compare;
pub mod document;
pub mod encoding;
pub mod error;
pub mod index;
pub mod limits;
pub mod mutation;
pub mod path;
pub mod path_pattern;
pub mod plan;
#[cfg(feature = "firestore-proto")]
pub mod proto;
#[cfg(feature = "firestore-proto")]
pub mod proto_query;
#[cfg(feature = "firestore-proto")]
pub mod proto_wire;
#[cfg(feature = "firestore-proto")]
pub mod proto_write;
pub mod query;
pub mod reserved;
#[cfg(feature = "test-env")]
pub mod test_env;
pub mod typed_json;
pub mod value;

pub use compare::compare;
pub use error::{Code, ErrorKind};
pub use path::{FieldPath, PathError, ResourcePath};
pub use typed_json::TypedJsonError;
pub use value::{GeoPoint, Timestamp, Value};
