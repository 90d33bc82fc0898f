//! Every limit pg_docstore enforces, as constants, in one place. This module imports nothing
//! from the rest of core, so every other module may read it (it is the bottom of the module
//! graph, see the crate docs). The checks live with what they check: document limits in
//! [`crate::document`], names and paths in [`crate::path`], index entries in
//! [`crate::index`], queries in [`crate::query`], commits in [`crate::commit`].

// Names and paths.

/// Longest document ID, collection ID or field name, in UTF-8 bytes (Firestore's 1,500).
pub const MAX_NAME_BYTES: usize = 1_500;
/// Deepest path: at most this many collections on the way to a document.
pub const MAX_COLLECTION_DEPTH: usize = 100;
/// Longest field path (all segments, dotted), in bytes.
pub const MAX_FIELD_PATH_BYTES: usize = 1_500;

// Documents.

/// Largest document, in storage-size bytes (1 MiB).
pub const MAX_DOCUMENT_BYTES: usize = 1_048_576;
/// Deepest nesting of maps and arrays in a document: a top-level field is at depth 1.
pub const MAX_DEPTH: usize = 20;
/// Longest vector Firestore accepts.
pub const MAX_VECTOR_DIMENSIONS: usize = 2_048;
/// Deepest nesting the value decoder (and typed JSON) accepts: documents are at most
/// [`MAX_DEPTH`] deep; headroom for non-document values such as query literals.
pub const MAX_DECODE_DEPTH: usize = 64;

// Indexes.

/// Longest indexed value encoding; longer encodings are truncated (Firestore's 1,500 bytes).
pub const MAX_INDEXED_VALUE_BYTES: usize = 1_500;
/// Most index entries one document may have (Firestore's limit).
pub const MAX_ENTRIES_PER_DOCUMENT: usize = 40_000;
/// Most fields in one composite index.
pub const MAX_INDEX_FIELDS: usize = 100;
/// Longest index key, in bytes. A btree row holds at most 2,704 bytes (a third of a page), and
/// index keys are stored uncompressed (`storage external`, docs/storage.md), so the limit is the
/// same for every key: 2,600 leaves room for the row's header and a database id (at most 63
/// bytes). Firestore allows 7.5 KiB per entry; only very long field paths or document names
/// next to a long indexed value come near this.
pub const MAX_ENTRY_KEY_BYTES: usize = 2_600;

// Queries.

/// Largest number of values in an `in` or `array_contains_any` list (and of DNF disjunctions).
pub const MAX_DISJUNCTIONS: usize = 30;
/// Largest number of values in a `not in` list.
pub const MAX_NOT_IN_VALUES: usize = 10;
/// Largest number of aggregations in one query.
pub const MAX_AGGREGATIONS: usize = 5;
/// Largest `limit` and `offset` (Firestore's are 32-bit signed integers).
pub const MAX_LIMIT: u32 = i32::MAX as u32;

// Writes.

/// Most writes in one commit (Firestore's limit).
pub const MAX_WRITES: usize = 500;
