//! The accept loop: hyper's HTTP/1 connections with time limits and connection caps, the
//! router as their service, and graceful shutdown (docs/http.md, "Limits").
//!
//! - Headers: hyper's header read timeout, which runs from the moment a connection waits
//!   for a request (after the accept, and after each response on a keep-alive connection)
//!   to the end of the request's headers; the connection is then closed without an answer.
//! - Body: a request's body must arrive within the body timeout, counted from the end of
//!   its headers; a late body is answered 408 DEADLINE_EXCEEDED and the connection closed.
//! - Idle: a connection on which nothing is read or written for the idle timeout while
//!   hyper waits on it (a silent socket, a client that sends no more of its body or stops
//!   reading its answer) is closed.
//! - Caps: connections in total and per client address. A connection over a cap is answered
//!   429 RESOURCE_EXHAUSTED to its first request and closed.
//! - Unread bodies: an answer given before its request's body was read to the end (a 400,
//!   401 or 413 decided from the path, the query or the headers) carries `Connection: close`,
//!   and the connection closes after it (see [`close_unless_read`]).
//!
//! Each refusal is counted in `docstore_http_limited_total{limit}`; the open connections are
//! the gauge `docstore_http_connections`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderValue, Request};
use axum::response::{IntoResponse, Response};
use axum::Router;
use bytes::Bytes;
use docstore_core::Code;
use http_body::Frame;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

use super::error::ApiError;
use super::tls::Transport;
use tokio_rustls::TlsAcceptor;

/// The time limits and connection caps of the server (flags of `config`).
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    pub max_connections_per_client: usize,
}

/// Count a refusal by a limit.
pub fn count_limited(limit: &'static str) {
    metrics::counter!("docstore_http_limited_total", "limit" => limit).increment(1);
}

/// The connections open in total and per client address.
#[derive(Default)]
struct Connections {
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// A connection admitted under the caps; dropping it gives its place back.
struct Admitted {
    connections: Arc<Connections>,
    client: IpAddr,
}

impl Connections {
    /// Admit a connection of `client`, or name the cap it is over.
    fn admit(
        self: &Arc<Self>,
        client: IpAddr,
        limits: &ServerLimits,
    ) -> Result<Admitted, &'static str> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, per_client) = &mut *open;
        if *total >= limits.max_connections {
            return Err("connections");
        }
        let mine = per_client.entry(client).or_insert(0);
        if *mine >= limits.max_connections_per_client {
            return Err("connections_per_client");
        }
        *mine += 1;
        *total += 1;
        metrics::gauge!("docstore_http_connections").set(*total as f64);
        Ok(Admitted {
            connections: Arc::clone(self),
            client,
        })
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self
            .connections
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (total, per_client) = &mut *open;
        *total = total.saturating_sub(1);
        if let Some(mine) = per_client.get_mut(&self.client) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                per_client.remove(&self.client);
            }
        }
        metrics::gauge!("docstore_http_connections").set(*total as f64);
    }
}

/// A socket closed when nothing is read or written on it for `idle` while it is polled.
struct Idle<S> {
    inner: S,
    idle: Duration,
    last: Instant,
    timer: Pin<Box<Sleep>>,
}

impl<S> Idle<S> {
    fn new(inner: S, idle: Duration) -> Idle<S> {
        let now = Instant::now();
        Idle {
            inner,
            idle,
            last: now,
            timer: Box::pin(tokio::time::sleep_until(now + idle)),
        }
    }

    /// Whether the connection has been idle too long (registers the waker otherwise).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return false;
            }
            let deadline = self.last + self.idle;
            if deadline <= Instant::now() {
                return true;
            }
            self.timer.as_mut().reset(deadline);
        }
    }

    /// A write poll of the inner stream: bytes written move the idle clock; a write still
    /// pending past the idle time fails.
    fn wrote(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match poll {
            Poll::Ready(result) => {
                if result.as_ref().is_ok_and(|n| *n > 0) {
                    self.last = Instant::now();
                }
                Poll::Ready(result)
            }
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(Self::timed_out())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn timed_out() -> io::Error {
        count_limited("idle_timeout");
        io::Error::new(io::ErrorKind::TimedOut, "the connection was idle too long")
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Idle<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    self.last = Instant::now();
                }
                Poll::Ready(result)
            }
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(Self::timed_out())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Idle<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(Self::timed_out())),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The error of a request body that did not arrive within the body timeout.
#[derive(Debug)]
pub struct BodyTimeout(Duration);

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body did not arrive within {} ms (--body-timeout-ms)",
            self.0.as_millis()
        )
    }
}

impl std::error::Error for BodyTimeout {}

impl BodyTimeout {
    /// The answer to a late body: 408 DEADLINE_EXCEEDED.
    pub fn to_api_error(&self) -> ApiError {
        ApiError::new(Code::DeadlineExceeded, self.to_string())
            .with_status(axum::http::StatusCode::REQUEST_TIMEOUT)
    }
}

/// A request body that fails with [`BodyTimeout`] once its deadline passes, and records
/// whether it was read to its end.
struct Deadline {
    inner: hyper::body::Incoming,
    limit: Duration,
    timer: Pin<Box<Sleep>>,
    ended: Arc<AtomicBool>,
}

impl http_body::Body for Deadline {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let failed = matches!(frame, Some(Err(_)));
                if !failed && (frame.is_none() || self.inner.is_end_stream()) {
                    self.ended.store(true, Ordering::Release);
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                if self.timer.as_mut().poll(cx).is_ready() {
                    count_limited("body_timeout");
                    return Poll::Ready(Some(Err(Box::new(BodyTimeout(self.limit)))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The answer of a connection over a cap: 429, then the connection closes.
fn over_cap(limit: &'static str) -> Response {
    let message = match limit {
        "connections" => "the sidecar has too many open connections (--max-connections)",
        _ => "this client address has too many open connections (--max-connections-per-client)",
    };
    let mut response = ApiError::new(Code::ResourceExhausted, message)
        .with_status(axum::http::StatusCode::TOO_MANY_REQUESTS)
        .with_hint("close idle connections, or retry later")
        .into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Serve `router` on `listener` until `shutdown` completes, then finish the requests in
/// flight.
///
/// # Errors
/// Never today: accept errors (out of file descriptors) are logged and retried.
///
/// # Cancel safety
/// Runs for the life of the process; dropping it stops accepting (connections in flight
/// run on in their tasks).
pub async fn serve(
    router: Router,
    listener: tokio::net::TcpListener,
    limits: ServerLimits,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let connections = Arc::new(Connections::default());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait for connections to close.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // TCP_NODELAY: a streamed answer's chunks (and a response written in two parts) go
        // out at once instead of waiting for the client's ACK of the previous segment.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
        }
        let admission = connections.admit(peer.ip(), &limits);
        let watcher = graceful.watcher();
        let builder = builder.clone();
        let router = router.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            // The TLS handshake counts as part of the headers' time.
            let transport = match tls {
                None => Transport::Plain(stream),
                Some(acceptor) => {
                    match tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)).await
                    {
                        Ok(Ok(stream)) => Transport::Tls(Box::new(stream)),
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, %peer, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            count_limited("header_timeout");
                            return;
                        }
                    }
                }
            };
            let io = TokioIo::new(Idle::new(transport, limits.idle_timeout));
            match admission {
                Ok(admitted) => {
                    let service = connection_service(router, peer, limits.body_timeout);
                    let connection = watcher.watch(builder.serve_connection(io, service));
                    if let Err(e) = connection.await {
                        if e.is_timeout() {
                            count_limited("header_timeout");
                        }
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    drop(admitted);
                }
                Err(limit) => {
                    count_limited(limit);
                    let service = hyper::service::service_fn(move |_request| async move {
                        Ok::<_, Infallible>(over_cap(limit))
                    });
                    let mut refusing = builder;
                    refusing.keep_alive(false);
                    let _ = watcher.watch(refusing.serve_connection(io, service)).await;
                }
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// The service of one connection: the router, with the client's address
/// ([`ConnectInfo`]) and the body deadline on each request.
fn connection_service(
    router: Router,
    peer: SocketAddr,
    body_timeout: Duration,
) -> impl hyper::service::Service<
    Request<hyper::body::Incoming>,
    Response = Response,
    Error = Infallible,
    Future = impl Future<Output = Result<Response, Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
        let router = router.clone();
        let ended = Arc::new(AtomicBool::new(http_body::Body::is_end_stream(
            request.body(),
        )));
        let mut request = request.map(|inner| {
            Body::new(Deadline {
                inner,
                limit: body_timeout,
                timer: Box::pin(tokio::time::sleep(body_timeout)),
                ended: Arc::clone(&ended),
            })
        });
        request.extensions_mut().insert(ConnectInfo(peer));
        async move {
            let response = router.oneshot(request).await?;
            Ok(close_unless_read(response, &ended))
        }
    })
}

/// Mark `response` `Connection: close` when its request's body was not read to its end.
///
/// hyper does not reuse a connection whose request body is left unread (the rest of it is
/// still on the wire, ahead of the next request): it closes the connection after the answer.
/// Unless the answer says so, a client sends its next request on that connection as on any
/// keep-alive connection, and that request races the close (a reset, or no answer at all).
/// So the answer says it (RFC 9112 section 9.6: a server that closes after a response sends
/// `close` in it), as Go's net/http does when it does not drain a body its handler left.
/// The alternative, reading on through the rest before answering (nginx's discard), would
/// make an early 401 or 400 read whatever a client cares to send; the answers given before
/// the body is read are errors, for which a new connection is cheap.
fn close_unless_read(mut response: Response, ended: &AtomicBool) -> Response {
    if !ended.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
