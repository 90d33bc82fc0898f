//! `docstore-sidecar`: pg_docstore's HTTP API and live queries, next to Postgres.
//!
//! Layers (docs/architecture.md): transports (`http/`: routes, parsing, JSON, SSE, statuses)
//! -> `service/` (the caller, the operations with typed requests and results, the canonical
//! error) -> `pg/` (the SQL the sidecar runs through tokio-postgres) and, for live queries,
//! the stages of the change stream: `source/` (replication connection, pgoutput decoding) ->
//! `changelog/` (committed transactions, retention, snapshot visibility) -> `matcher/`
//! (targets matched with docstore-core's matcher) -> `session/` (listen streams, positions,
//! resume, typed events). `grpc/` is a second transport, Firestore's own gRPC protocol
//! (docs/grpc.md). `config` holds its flags and environment. `ingest` is the role that
//! publishes the slot's transactions to NATS JetStream for gateways (`--role`,
//! docs/architecture.md "Processes").

pub mod changelog;
pub mod config;
pub mod grpc;
pub mod http;
pub mod ingest;
pub mod matcher;
pub mod pg;
pub mod service;
pub mod session;
pub mod source;
pub mod triggers;
