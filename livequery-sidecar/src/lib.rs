//! `docstore-sidecar`: pg_docstore's HTTP API and live queries, next to Postgres.
//!
//! Folders are the stages of the pipeline (docs/architecture.md):
//! `source/` (replication connection, pgoutput decoding) -> `changelog/` (committed
//! transactions, retention, snapshot visibility) -> `matcher/` (targets matched with
//! docstore-core's matcher) -> `session/` (listen streams, positions, resume) -> `http/`
//! (routes, auth, errors, SSE). `pg/` holds the SQL the sidecar runs through tokio-postgres;
//! `config` its flags and environment.

pub mod changelog;
pub mod config;
pub mod http;
pub mod matcher;
pub mod pg;
pub mod service;
pub mod session;
pub mod source;
