//! The HTTP transport: routes, parsing, JSON rendering, SSE, statuses.
//!
//! Handlers are thin: parse ([`resource`], [`body`]), read the credential ([`bearer`]), call
//! one operation of `service/`, render its result (JSON, a streamed array, [`sse`]) or its
//! error ([`error`]). The API is specified in docs/http.md.

pub mod batch_get;
pub mod bearer;
pub mod body;
pub mod collections;
pub mod commit;
pub mod demo;
pub mod documents;
pub mod error;
pub mod explain;
pub mod listen;
pub mod metrics;
pub mod origin;
pub mod query;
pub mod resource;
pub mod server;
pub mod sse;
pub mod tls;
pub mod transactions;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::service::caller::{Caller, Principal};
use crate::service::Service;
use error::ApiError;
use resource::Target;

/// What every handler shares.
pub struct AppState {
    /// The operations, shared with any other transport.
    pub service: Arc<Service>,
    pub max_body_bytes: usize,
    /// `--query-write-timeout-ms` (`None`: no limit).
    pub query_write_timeout: Option<std::time::Duration>,
    /// The Prometheus recorder's handle (`None` when another recorder is installed, as in
    /// tests that build several routers in one process).
    pub metrics: Option<PrometheusHandle>,
    /// What this process's role waits for (`--role ingest|gateway`: NATS, the ingest lock);
    /// `/healthz` answers 503 with it meanwhile.
    pub role: Option<crate::source::jetstream::RoleHealth>,
    /// The permanent cause the slot of a process without a hub fails on (`--role ingest`);
    /// `/healthz` answers 503 with it, as with a hub's (`Session::failure`).
    pub source: Option<crate::source::SourceHealth>,
}

/// The shared state.
pub type SharedState = Arc<AppState>;

/// A `POST /v1/databases/{db}:verb` request read the way `:commit` and `:runQuery` share: it
/// has no query parameters, its caller is authenticated, and its JSON body is read within the
/// size limit.
pub struct JsonPost {
    pub principal: Principal,
    pub method: Method,
    pub body: Vec<u8>,
}

impl JsonPost {
    /// The caller of the request.
    pub fn caller(&self) -> Caller {
        Caller {
            principal: self.principal.clone(),
            method: self.method.as_str().to_owned(),
            peer: None,
        }
    }

    /// Read `request` for the `:verb` endpoint.
    ///
    /// # Errors
    /// 400 for query parameters or a body that is not JSON, 401 for a bad token, 413 for a body
    /// over the limit.
    ///
    /// # Cancel safety
    /// Dropped while reading, nothing has happened yet.
    pub async fn read(
        state: &AppState,
        verb: &str,
        request: Request,
    ) -> Result<JsonPost, ApiError> {
        if request.uri().query().is_some_and(|q| !q.is_empty()) {
            return Err(ApiError::invalid_argument(format!(
                ":{verb} takes no query parameters"
            )));
        }
        let principal = bearer::authenticate(&state.service.verifier, request.headers()).await?;
        body::require_json(request.headers())?;
        let (parts, raw) = request.into_parts();
        let body = body::read(&parts.headers, raw, state.max_body_bytes).await?;
        Ok(JsonPost {
            principal,
            method: parts.method,
            body,
        })
    }
}

/// The router of the whole API.
pub fn router(state: SharedState) -> Router {
    Router::new()
        .route("/healthz", get(health))
        .route("/metrics", get(metrics::render))
        .route("/demo", get(demo::page))
        .route("/v1/databases/{*rest}", any(dispatch))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(metrics::track))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// The router of a process that serves no client (`--role matcher`).
pub fn health_router(state: SharedState) -> Router {
    Router::new()
        .route("/healthz", get(health))
        .route("/metrics", get(metrics::render))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(metrics::track))
        .with_state(state)
}

async fn not_found(request: Request) -> ApiError {
    ApiError::not_found(format!(
        "no route {} {}",
        request.method(),
        request.uri().path()
    ))
}

/// `GET /healthz`: `select 1` on the pool; 503 UNAVAILABLE when the database does not answer,
/// with the cause and its fix when retrying cannot help (`pg::preflight`), and when the live
/// path's replication connection fails on such a cause (`source::supervisor`; an ingest's
/// too), and while the
/// process's role waits (NATS unreachable, a standby ingest: `source::jetstream::RoleHealth`).
async fn health(State(state): State<SharedState>) -> Response {
    if let Some(waiting) = state.role.as_ref().and_then(|r| r.waiting()) {
        return ApiError::new(docstore_core::Code::Unavailable, waiting).into_response();
    }
    match state.service.db.health().await {
        Ok(()) => match state
            .service
            .session
            .as_ref()
            .and_then(|s| s.failure())
            .or_else(|| state.source.as_ref().and_then(|s| s.cause()))
        {
            // The pool answers but the live path cannot stream (REPLICATION revoked, ...).
            Some(cause) => {
                ApiError::new(docstore_core::Code::Unavailable, cause.to_string()).into_response()
            }
            None => (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                "{\"status\":\"ok\"}",
            )
                .into_response(),
        },
        Err(e) => match crate::pg::preflight::cause_of(&e) {
            // A permanent cause (the password changed, the role lost its pg_hba.conf entry):
            // say which, and its fix.
            Some(cause) => {
                ApiError::new(docstore_core::Code::Unavailable, cause.to_string()).into_response()
            }
            None => {
                let mut error = ApiError::from(e);
                error.error.code = docstore_core::Code::Unavailable;
                error.into_response()
            }
        },
    }
}

/// Every route under `/v1/databases/`: parse the target from the raw path, then hand the
/// request to the handler of its method.
async fn dispatch(State(state): State<SharedState>, request: Request) -> Response {
    match route(state, request).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Document,
    Collection,
    RunQuery,
    Commit,
    BatchGet,
    ListCollectionIds,
    Explain,
    Listen,
    BeginTransaction,
    Rollback,
}

async fn route(state: SharedState, request: Request) -> Result<Response, ApiError> {
    let target = resource::parse_target(request.uri().path())?;
    let kind = match &target {
        Target::Path { path, .. } if path.is_document() => Kind::Document,
        Target::Path { .. } => Kind::Collection,
        Target::RunQuery { .. } => Kind::RunQuery,
        Target::Commit { .. } => Kind::Commit,
        Target::BatchGet { .. } => Kind::BatchGet,
        Target::ListCollectionIds { .. } => Kind::ListCollectionIds,
        Target::Explain { .. } => Kind::Explain,
        Target::Listen { .. } => Kind::Listen,
        Target::BeginTransaction { .. } => Kind::BeginTransaction,
        Target::Rollback { .. } => Kind::Rollback,
    };
    let method = request.method().clone();
    match (kind, method) {
        (Kind::Document, Method::GET) => documents::get(state, target, request).await,
        (Kind::Document, Method::PUT) => documents::put(state, target, request).await,
        (Kind::Document, Method::PATCH) => documents::patch(state, target, request).await,
        (Kind::Document, Method::DELETE) => documents::delete(state, target, request).await,
        (Kind::Collection, Method::GET) => query::list(state, target, request).await,
        (Kind::Collection, Method::POST) => documents::add(state, target, request).await,
        (Kind::Document | Kind::Collection, method) => {
            let (is, needs) = if kind == Kind::Document {
                ("document", "collection")
            } else {
                ("collection", "document")
            };
            let shown = match &target {
                Target::Path { path, .. } => path.to_string(),
                _ => String::new(),
            };
            Err(ApiError::invalid_argument(format!(
                "{method} needs a {needs} path; \"{shown}\" is a {is} path"
            ))
            .with_hint(
                "a document path has an even number of segments (GET, PUT, PATCH, DELETE); a collection path an odd number (GET lists, POST adds)",
            ))
        }
        (Kind::RunQuery, Method::POST) => query::run_query(state, target, request).await,
        (Kind::Commit, Method::POST) => commit::commit(state, target, request).await,
        (Kind::BatchGet, Method::POST) => batch_get::batch_get(state, target, request).await,
        (Kind::ListCollectionIds, Method::POST) => {
            collections::list_collection_ids(state, target, request).await
        }
        (Kind::Explain, Method::POST) => explain::explain(state, target, request).await,
        (Kind::Listen, _) => listen::route(state, target, request).await,
        (Kind::BeginTransaction, Method::POST) => {
            transactions::begin(state, target, request).await
        }
        (Kind::Rollback, Method::POST) => transactions::rollback(state, target, request).await,
        (_, method) => Err(ApiError::not_found(format!(
            "no route {method} {}",
            request.uri().path()
        ))
        .with_hint(
            ":runQuery, :commit, :batchGet, :listCollectionIds, :explain, :beginTransaction and :rollback take POST",
        )),
    }
}

/// How the server is exposed: its time limits and caps, the `Host` names it answers and
/// the browser origins it allows.
#[derive(Clone)]
pub struct Exposure {
    pub limits: server::ServerLimits,
    pub hosts: origin::HostPolicy,
    /// `None`: no CORS headers at all.
    pub cors: Option<origin::CorsPolicy>,
    /// `--tls-cert` / `--tls-key`: the listener speaks TLS (ALPN `http/1.1`).
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Whether the API is served; `false` (`--role matcher`): `/healthz` and `/metrics` only.
    pub api: bool,
}

impl std::fmt::Debug for Exposure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exposure")
            .field("limits", &self.limits)
            .field("hosts", &self.hosts)
            .field("cors", &self.cors)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// Serve until SIGTERM or SIGINT, then finish the requests in flight.
///
/// # Errors
/// The listener failed.
///
/// # Cancel safety
/// Runs for the life of the process; dropping it stops serving at once.
pub async fn serve(
    state: SharedState,
    listener: tokio::net::TcpListener,
    exposure: Exposure,
) -> std::io::Result<()> {
    let mut app = if exposure.api {
        router(state)
    } else {
        health_router(state)
    };
    if let Some(cors) = exposure.cors {
        app = app.layer(axum::middleware::from_fn_with_state(cors, origin::cors));
    }
    // Outermost: a request to a name this sidecar does not answer reaches nothing else.
    let app = app.layer(axum::middleware::from_fn_with_state(
        exposure.hosts,
        origin::check_host,
    ));
    server::serve(
        app,
        listener,
        exposure.limits,
        exposure.tls,
        shutdown_signal(),
    )
    .await
}

async fn shutdown_signal() {
    let interrupt = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutting down: finishing the requests in flight");
    listen::shut_down();
}
