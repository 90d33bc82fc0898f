//! The gRPC front end: Firestore's own protocol, `google.firestore.v1.Firestore`, so that
//! Google's SDKs connect unchanged with `FIRESTORE_EMULATOR_HOST` (docs/grpc.md).
//!
//! A thin adapter, like `http/`: parse the request (names in [`names`], values with
//! docstore-core's `proto` conversion), authenticate the caller ([`auth`]), call the
//! operation, render the answer or the error ([`error`]). The RPCs are declared in
//! `build.rs`; [`service`] implements them (GetDocument and BatchGetDocuments, [`documents`];
//! Commit and the single-document writes, [`commit`]; RunQuery, [`query`]; ListCollectionIds,
//! [`collections`]; BeginTransaction, Rollback and the reads' transactions and read times,
//! [`transactions`]; Listen, [`listen`], the session hub's live queries rendered as protobuf;
//! the others answer UNIMPLEMENTED for now). [`serve`]
//! runs the server on its own listener (`--grpc-listen`): HTTP/2 without TLS (h2c with prior
//! knowledge), what the SDKs' emulator channel speaks.

pub mod auth;
pub mod collections;
pub mod commit;
pub mod documents;
pub mod error;
pub mod listen;
pub mod names;
pub mod query;
pub mod service;
pub mod transactions;

/// tonic's generated server of `google.firestore.v1.Firestore` (build.rs).
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs
)]
pub mod generated {
    include!(concat!(
        env!("OUT_DIR"),
        "/google.firestore.v1.Firestore.rs"
    ));
}

use std::future::Future;

/// `google.protobuf.Empty` as prost has it (the answer of DeleteDocument and Rollback).
pub type Empty = ();

pub use generated::firestore_server::FirestoreServer;
pub use service::FirestoreService;

/// Serve `service` on `listener` (HTTP/2 cleartext) until `shutdown` completes.
///
/// # Errors
/// The transport's error, as text.
pub async fn serve(
    service: FirestoreService,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    // A request message is bounded as an HTTP request body is (--max-body-bytes); tonic
    // refuses a larger one with OUT_OF_RANGE before decoding it.
    let limit = service.max_message_bytes();
    let server = FirestoreServer::new(service).max_decoding_message_size(limit);
    tonic::transport::Server::builder()
        .serve_with_incoming_shutdown(server, incoming, shutdown)
        .await
        .map_err(|e| format!("gRPC server: {e}"))
}
