//! `/metrics` (Prometheus text) and the middleware that counts requests:
//! `docstore_http_requests_total{route,method,code}`,
//! `docstore_http_request_duration_seconds{route}` (a histogram; until the response head is
//! ready, so a streamed answer counts up to its first row), and the pool gauges
//! `docstore_pg_pool_connections{state="idle"|"in_use"}`,
//! `docstore_pg_pool_max_connections`, `docstore_pg_pool_waiting_requests`, and for the shared
//! connections of one-statement requests `docstore_pg_shared_connections` and
//! `docstore_pg_shared_in_flight_requests`.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};

use super::resource::route_label;
use super::SharedState;

/// Buckets of the request duration histogram, in seconds.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Install the process-wide Prometheus recorder.
///
/// # Errors
/// A recorder was installed already.
pub fn install() -> Result<PrometheusHandle, BuildError> {
    PrometheusBuilder::new()
        .set_buckets(&DURATION_BUCKETS)?
        .install_recorder()
}

fn method_label(method: &axum::http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "POST" => "POST",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

/// Count and time every request.
pub async fn track(request: Request, next: Next) -> Response {
    let route = route_label(request.uri().path());
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    let code = response.status().as_u16().to_string();
    metrics::counter!("docstore_http_requests_total", "route" => route, "method" => method, "code" => code)
        .increment(1);
    metrics::histogram!("docstore_http_request_duration_seconds", "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}

/// `GET /metrics`.
pub async fn render(State(state): State<SharedState>) -> Response {
    let status = state.service.db.status();
    let in_use = status.open.saturating_sub(status.idle);
    metrics::gauge!("docstore_pg_pool_connections", "state" => "idle").set(status.idle as f64);
    metrics::gauge!("docstore_pg_pool_connections", "state" => "in_use").set(in_use as f64);
    metrics::gauge!("docstore_pg_pool_max_connections").set(status.max as f64);
    metrics::gauge!("docstore_pg_pool_waiting_requests").set(status.waiting as f64);
    metrics::gauge!("docstore_pg_shared_connections").set(status.shared as f64);
    metrics::gauge!("docstore_pg_shared_in_flight_requests").set(status.shared_in_flight as f64);
    match &state.metrics {
        Some(handle) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            handle.render(),
        )
            .into_response(),
        None => (StatusCode::OK, "").into_response(),
    }
}
