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
//! knowledge), what the SDKs' emulator channel speaks, or over TLS with `--tls-cert` and
//! `--tls-key` (`http::tls`); each connection under [`transport::Coalescing`], so that a unary
//! answer goes out in one system call.

pub mod auth;
pub mod collections;
pub mod commit;
pub mod documents;
pub mod encoded;
pub mod error;
pub mod listen;
pub mod names;
pub mod query;
pub mod service;
pub mod transactions;
pub mod transport;

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

use futures_util::StreamExt as _;

/// `google.protobuf.Empty` as prost has it (the answer of DeleteDocument and Rollback).
pub type Empty = ();

pub use generated::firestore_server::FirestoreServer;
pub use service::FirestoreService;

/// Serve `service` on `listener` until `shutdown` completes: HTTP/2 cleartext, or over TLS
/// (ALPN `h2`) with `tls` (`--tls-cert` / `--tls-key`).
///
/// # Errors
/// The transport's error, as text.
pub async fn serve(
    service: FirestoreService,
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    // A request message is bounded as an HTTP request body is (--max-body-bytes); tonic
    // refuses a larger one with OUT_OF_RANGE before decoding it.
    let limit = service.max_message_bytes();
    let server = FirestoreServer::new(service).max_decoding_message_size(limit);
    let builder = tonic::transport::Server::builder();
    let served = match tls {
        None => {
            let incoming = tonic::transport::server::TcpIncoming::from(listener)
                .with_nodelay(Some(true))
                .map(|stream| stream.map(transport::Coalescing::new));
            builder
                .serve_with_incoming_shutdown(server, incoming, shutdown)
                .await
        }
        Some(acceptor) => {
            builder
                .serve_with_incoming_shutdown(
                    server,
                    tls_incoming(listener, acceptor)
                        .map(|stream| stream.map(transport::Coalescing::new)),
                    shutdown,
                )
                .await
        }
    };
    served.map_err(|e| format!("gRPC server: {e}"))
}

/// The connections of `listener` after their TLS handshake (each in a task of its own, bounded
/// by a time limit, so that a slow client holds up no other); failed handshakes are dropped.
fn tls_incoming(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
) -> impl futures_util::Stream<Item = Result<crate::http::tls::Transport, std::io::Error>> {
    /// How long a client may take to complete its handshake.
    const HANDSHAKE: std::time::Duration = std::time::Duration::from_secs(10);
    let (sender, receiver) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "gRPC: cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            if sender.is_closed() {
                return;
            }
            let _ = stream.set_nodelay(true);
            let acceptor = acceptor.clone();
            let sender = sender.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        let transport = crate::http::tls::Transport::Tls(Box::new(stream));
                        let _ = sender.send(Ok(transport)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(error = %e, "gRPC: TLS handshake failed"),
                    Err(_) => tracing::debug!("gRPC: TLS handshake timed out"),
                }
            });
        }
    });
    futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}
