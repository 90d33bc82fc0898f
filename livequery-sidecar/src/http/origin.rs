//! Who may address the sidecar: the `Host` check (against DNS rebinding) and CORS for the
//! browser origins of `--cors-origins` (docs/http.md, "Hosts and origins").
//!
//! - Host: when the sidecar listens on a loopback address, or `--allowed-hosts` is set, a
//!   request must name `localhost`, `127.0.0.1` or `[::1]` (any port) or a name of
//!   `--allowed-hosts` (`*`: any) in its `Host` header; any other is answered 400
//!   INVALID_ARGUMENT. A web page whose name was rebound to 127.0.0.1 sends its own name.
//! - CORS: none by default. A request whose `Origin` is listed gets
//!   `Access-Control-Allow-Origin` (and a preflight `OPTIONS` its answer, 204); an unlisted
//!   origin gets no `Access-Control-*` header, so the browser keeps the answer from its page.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::server::count_limited;

/// The names a loopback sidecar always answers.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The methods and request headers the API uses (a preflight's answer).
const ALLOW_METHODS: &str = "GET, POST, PUT, PATCH, DELETE";
const ALLOW_HEADERS: &str = "Authorization, Content-Type, Last-Event-ID";
/// The response headers a cross-origin page may read.
const EXPOSE_HEADERS: &str = "X-Docstore-Stream";
/// How long a browser may cache a preflight's answer, in seconds.
const MAX_AGE: &str = "600";

/// Which `Host` names are answered (`None`: any).
#[derive(Debug, Clone)]
pub struct HostPolicy {
    allowed: Option<Arc<Vec<String>>>,
}

impl HostPolicy {
    /// The policy of a sidecar listening on `listen` with `--allowed-hosts` `extra`.
    pub fn new(listen: SocketAddr, extra: &[String]) -> HostPolicy {
        let extra: Vec<String> = extra
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        if extra.iter().any(|h| h == "*") || (extra.is_empty() && !listen.ip().is_loopback()) {
            return HostPolicy { allowed: None };
        }
        let mut allowed: Vec<String> = LOOPBACK_NAMES.iter().map(|&n| n.to_owned()).collect();
        allowed.extend(extra);
        HostPolicy {
            allowed: Some(Arc::new(allowed)),
        }
    }

    /// Whether a request naming `host` (the `Host` header, or the URI's authority) is
    /// answered.
    pub fn allows(&self, host: Option<&str>) -> bool {
        let Some(allowed) = &self.allowed else {
            return true;
        };
        let Some(host) = host else {
            return false;
        };
        let name = host_name(host);
        allowed.contains(&name)
    }
}

/// The name of a `Host` value without its port, lowercased, without a final dot.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if host.starts_with('[') {
        // An IPv6 literal: "[::1]:8787" -> "[::1]".
        host.find(']').map_or(host, |end| &host[..=end])
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        }
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Refuse a request whose `Host` is not answered here.
pub async fn check_host(
    State(policy): State<HostPolicy>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .or_else(|| {
            request
                .headers()
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        });
    if policy.allows(host.as_deref()) {
        return next.run(request).await;
    }
    count_limited("host");
    let shown: String = host.as_deref().unwrap_or("").chars().take(100).collect();
    ApiError::invalid_argument(format!("this sidecar does not answer the Host \"{shown}\""))
        .with_hint("use localhost or 127.0.0.1, or list the name in --allowed-hosts")
        .into_response()
}

/// The origins of `--cors-origins` (`*`: any).
#[derive(Debug, Clone)]
pub struct CorsPolicy {
    origins: Arc<Vec<String>>,
}

impl CorsPolicy {
    /// The policy of `--cors-origins` (`None` when the list is empty: no CORS at all).
    pub fn new(origins: &[String]) -> Option<CorsPolicy> {
        let origins: Vec<String> = origins
            .iter()
            .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
            .filter(|o| !o.is_empty())
            .collect();
        (!origins.is_empty()).then(|| CorsPolicy {
            origins: Arc::new(origins),
        })
    }

    /// The `Access-Control-Allow-Origin` of a request's `Origin`, when it is listed.
    fn allow_origin(&self, headers: &HeaderMap) -> Option<HeaderValue> {
        let origin = headers.get(header::ORIGIN)?;
        let text = origin.to_str().ok()?.to_ascii_lowercase();
        if self.origins.contains(&text) {
            Some(origin.clone())
        } else if self.origins.iter().any(|o| o == "*") {
            Some(HeaderValue::from_static("*"))
        } else {
            None
        }
    }
}

/// Answer preflights of listed origins and mark the responses to them.
pub async fn cors(State(policy): State<CorsPolicy>, request: Request, next: Next) -> Response {
    let allow = policy.allow_origin(request.headers());
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = match (&allow, preflight) {
        (Some(_), true) => {
            let mut response = StatusCode::NO_CONTENT.into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static(ALLOW_METHODS),
            );
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(ALLOW_HEADERS),
            );
            headers.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static(MAX_AGE),
            );
            response
        }
        _ => next.run(request).await,
    };
    let headers = response.headers_mut();
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
    if let Some(origin) = allow {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        if !preflight {
            headers.insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static(EXPOSE_HEADERS),
            );
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> SocketAddr {
        "127.0.0.1:8787".parse().unwrap()
    }

    #[test]
    fn a_loopback_sidecar_answers_loopback_names_with_any_port() {
        let policy = HostPolicy::new(loopback(), &[]);
        for host in [
            "localhost",
            "localhost:8787",
            "LOCALHOST.",
            "127.0.0.1:1",
            "[::1]:8787",
            "[::1]",
        ] {
            assert!(policy.allows(Some(host)), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8787",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "",
        ] {
            assert!(!policy.allows(Some(host)), "{host}");
        }
        assert!(!policy.allows(None));
    }

    #[test]
    fn allowed_hosts_add_names_and_star_allows_any() {
        let policy = HostPolicy::new(loopback(), &["Sidecar".into()]);
        assert!(policy.allows(Some("sidecar:8787")));
        assert!(policy.allows(Some("localhost")));
        assert!(!policy.allows(Some("other")));
        assert!(HostPolicy::new(loopback(), &["*".into()]).allows(Some("other")));
        let public: SocketAddr = "0.0.0.0:8787".parse().unwrap();
        assert!(HostPolicy::new(public, &[]).allows(Some("other")));
        assert!(!HostPolicy::new(public, &["sidecar".into()]).allows(Some("other")));
    }
}
