//! `GET|POST /v1/databases/{db}:listen` -> `text/event-stream`, and the targets of a running
//! stream: `POST /v1/databases/{db}:listen/{stream}/targets` (add) and
//! `DELETE /v1/databases/{db}:listen/{stream}/targets/{id}` (remove). Spec: docs/listen.md.
//!
//! Everything that can be refused is checked before the stream opens (auth, targets, the
//! resume token, the initial reads), so those errors keep their HTTP status and canonical
//! code. Authentication is the other endpoints' (`Authorization: Bearer ...`), or
//! `?access_token=` for EventSource, which cannot set headers.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value as Json};

use super::bearer;
use super::body;
use super::error::ApiError;
use super::resource::{percent_decode, Target};
use super::sse;
use super::SharedState;
use crate::matcher::TargetSpec;
use crate::service::caller::{Caller, Principal};
use crate::service::listen;
use crate::session::events::parse_token;
use crate::session::hub::lag_seconds;
use crate::session::{Connection, Session, TargetRequest};

/// Set once the process is shutting down: every stream's response ends, so that the
/// graceful shutdown does not wait for streams that never finish (clients reconnect with
/// their Last-Event-ID).
static SHUTDOWN: std::sync::OnceLock<tokio::sync::watch::Sender<bool>> = std::sync::OnceLock::new();

/// Turns `true` once the process is shutting down (every stream, of any transport, ends).
pub fn shutdown_signal() -> tokio::sync::watch::Receiver<bool> {
    SHUTDOWN
        .get_or_init(|| tokio::sync::watch::channel(false).0)
        .subscribe()
}

/// End every stream's response (the process is shutting down).
pub fn shut_down() {
    SHUTDOWN
        .get_or_init(|| tokio::sync::watch::channel(false).0)
        .send_replace(true);
}

/// Most targets one request may name.
pub const MAX_TARGETS: usize = 100;

/// A keep-alive comment is written after this long without an event.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Every request under `:listen`.
///
/// # Cancel safety
/// Dropped before the stream opened, nothing is registered; after, the stream waits for a
/// resume for its grace period.
pub async fn route(
    state: SharedState,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let Target::Listen { database, rest } = target else {
        return Err(ApiError::invalid_argument("not a :listen route"));
    };
    let method = request.method().clone();
    let segments: Vec<&str> = rest
        .as_deref()
        .map(|r| r.split('/').collect())
        .unwrap_or_default();
    match (method, segments.as_slice()) {
        (Method::GET | Method::POST, []) => listen(state, database, request).await,
        (Method::POST, [stream, "targets"]) => {
            let stream = (*stream).to_owned();
            add_targets(state, database, stream, request).await
        }
        (Method::DELETE, [stream, "targets", id]) => {
            let stream = (*stream).to_owned();
            let id = percent_decode(id, false).map_err(ApiError::invalid_argument)?;
            remove_target(state, stream, id, request).await
        }
        (method, _) => Err(ApiError::not_found(format!(
            "no route {method} {}",
            request.uri().path()
        ))
        .with_hint(
            "GET|POST :listen, POST :listen/{stream}/targets, DELETE :listen/{stream}/targets/{id}",
        )),
    }
}

/// The query string's pairs, percent-decoded.
fn query_pairs(query: Option<&str>) -> Result<Vec<(String, String)>, ApiError> {
    let mut out = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        out.push((
            percent_decode(name, true).map_err(ApiError::invalid_argument)?,
            percent_decode(value, true).map_err(ApiError::invalid_argument)?,
        ));
    }
    Ok(out)
}

/// The caller: the `Authorization` header, or `access_token` (never both).
async fn authenticate(
    state: &SharedState,
    headers: &HeaderMap,
    access_token: Option<&str>,
) -> Result<Principal, ApiError> {
    match access_token {
        None => bearer::authenticate(&state.service.verifier, headers).await,
        Some(_) if headers.contains_key(header::AUTHORIZATION) => Err(ApiError::invalid_argument(
            "send either an Authorization header or ?access_token=, not both",
        )),
        Some(token) => {
            let mut synthetic = HeaderMap::new();
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                ApiError::unauthenticated(
                    "invalid credentials: the access token is not a header value",
                )
            })?;
            synthetic.insert(header::AUTHORIZATION, value);
            bearer::authenticate(&state.service.verifier, &synthetic).await
        }
    }
}

/// The caller of a `:listen` request: its principal, method and client address.
fn caller(principal: Principal, request: &Request) -> Caller {
    Caller {
        principal,
        method: request.method().as_str().to_owned(),
        peer: request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip()),
    }
}

fn spec(kind: &str, value: &Json) -> Result<TargetSpec, ApiError> {
    let refused =
        |e: crate::matcher::MatcherError| ApiError::new(e.kind().code(), format!("{kind}: {e}"));
    match (kind, value) {
        ("sql", Json::String(text)) => TargetSpec::parse_text(text).map_err(refused),
        ("structuredQuery", q @ Json::Object(_)) => {
            TargetSpec::parse_structured(q).map_err(refused)
        }
        ("document", Json::String(path)) => TargetSpec::document(path).map_err(refused),
        ("sql" | "document", _) => Err(ApiError::invalid_argument(format!(
            "\"{kind}\" must be a string"
        ))),
        _ => Err(ApiError::invalid_argument(
            "\"structuredQuery\" must be a JSON object",
        )),
    }
}

/// Targets of a JSON body `{"targets": [{"id", "sql" | "structuredQuery" | "document"}]}`.
///
/// # Errors
/// 400 INVALID_ARGUMENT for any other shape, a target core refuses, repeated or bad ids.
pub fn body_targets(bytes: &[u8]) -> Result<Vec<TargetRequest>, ApiError> {
    let json = body::parse_json(bytes)?;
    let Some(obj) = json.as_object() else {
        return Err(ApiError::invalid_argument(
            "a :listen body must be a JSON object",
        ));
    };
    if let Some(key) = obj.keys().find(|k| k.as_str() != "targets") {
        return Err(ApiError::invalid_argument(format!(
            "unexpected key \"{key}\" in a :listen body (allowed: targets)"
        )));
    }
    let Some(Json::Array(items)) = obj.get("targets") else {
        return Err(ApiError::invalid_argument("\"targets\" must be an array"));
    };
    let mut out = Vec::new();
    for item in items {
        let Some(t) = item.as_object() else {
            return Err(ApiError::invalid_argument(
                "each target must be a JSON object",
            ));
        };
        let Some(Json::String(id)) = t.get("id") else {
            return Err(ApiError::invalid_argument(
                "each target needs a string \"id\"",
            ));
        };
        let kinds: Vec<&String> = t.keys().filter(|k| k.as_str() != "id").collect();
        let [kind] = kinds.as_slice() else {
            return Err(ApiError::invalid_argument(format!(
                "target \"{id}\" needs exactly one of \"sql\", \"structuredQuery\", \"document\""
            )));
        };
        if !["sql", "structuredQuery", "document"].contains(&kind.as_str()) {
            return Err(ApiError::invalid_argument(format!(
                "unexpected key \"{kind}\" in target \"{id}\""
            )));
        }
        let value = t.get(kind.as_str()).unwrap_or(&Json::Null);
        out.push(TargetRequest {
            id: id.clone(),
            spec: spec(kind, value)?,
        });
    }
    check_ids(&out)?;
    Ok(out)
}

fn check_ids(targets: &[TargetRequest]) -> Result<(), ApiError> {
    if targets.len() > MAX_TARGETS {
        return Err(ApiError::invalid_argument(format!(
            "at most {MAX_TARGETS} targets per request"
        )));
    }
    for (i, t) in targets.iter().enumerate() {
        if t.id.is_empty() || t.id.len() > 256 {
            return Err(ApiError::invalid_argument("a target id is 1-256 bytes"));
        }
        if targets[..i].iter().any(|o| o.id == t.id) {
            return Err(ApiError::invalid_argument(format!(
                "target id \"{}\" is given twice",
                t.id
            )));
        }
    }
    Ok(())
}

/// The query string of `:listen` (and its `Last-Event-ID`), parsed.
#[derive(Debug)]
pub struct ListenParams {
    pub access_token: Option<String>,
    /// The stream and position to resume after (`?resume=` wins over `Last-Event-ID`).
    pub resume: Option<(String, crate::source::Lsn)>,
    /// The targets of a GET (numbered `"0"`, `"1"`, ... in order).
    pub targets: Vec<TargetRequest>,
}

impl ListenParams {
    /// Parse the query string of a GET (`post == false`: targets allowed) or POST.
    ///
    /// # Errors
    /// 400 INVALID_ARGUMENT: an unknown parameter, a target core refuses, a malformed resume
    /// token, too many targets.
    pub fn parse(
        query: Option<&str>,
        post: bool,
        last_event_id: Option<String>,
    ) -> Result<ListenParams, ApiError> {
        let mut access_token = None;
        let mut resume = last_event_id;
        let mut targets = Vec::new();
        for (name, value) in query_pairs(query)? {
            match name.as_str() {
                "access_token" => set_access_token(&mut access_token, value)?,
                "resume" => resume = Some(value),
                "sql" | "document" | "structuredQuery" if !post => {
                    let json = if name == "structuredQuery" {
                        serde_json::from_str(&value).map_err(|e| {
                            ApiError::invalid_argument(format!("structuredQuery is not JSON: {e}"))
                        })?
                    } else {
                        Json::String(value)
                    };
                    targets.push(TargetRequest {
                        id: targets.len().to_string(),
                        spec: spec(&name, &json)?,
                    });
                    if targets.len() > MAX_TARGETS {
                        break;
                    }
                }
                _ => {
                    return Err(ApiError::invalid_argument(format!(
                        "unknown parameter \"{name}\" of :listen"
                    ))
                    .with_hint("GET takes sql, structuredQuery, document (repeatable), resume, access_token; POST takes resume and access_token"))
                }
            }
        }
        check_ids(&targets)?;
        let resume = match resume.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
            None => None,
            Some(token) => Some(parse_token(token).ok_or_else(|| {
                let shown: String = token.chars().take(100).collect();
                ApiError::invalid_argument(format!("\"{shown}\" is not a resume token"))
                    .with_hint("a resume token is the id: of an event, <stream>.<16 hex digits>")
            })?),
        };
        Ok(ListenParams {
            access_token,
            resume,
            targets,
        })
    }
}

/// `GET|POST :listen`.
async fn listen(
    state: SharedState,
    database: String,
    request: Request,
) -> Result<Response, ApiError> {
    let session = running_session(&state)?;
    let last_event_id = request
        .headers()
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .map(str::to_owned)
                .map_err(|_| ApiError::invalid_argument("Last-Event-ID is not ASCII"))
        })
        .transpose()?;
    let post = request.method() == Method::POST;
    let params = ListenParams::parse(request.uri().query(), post, last_event_id)?;
    let principal = authenticate(&state, request.headers(), params.access_token.as_deref()).await?;
    let caller = caller(principal, &request);
    let targets = if post {
        body::require_json(request.headers())?;
        let (parts, raw) = request.into_parts();
        let bytes = body::read(&parts.headers, raw, state.max_body_bytes).await?;
        body_targets(&bytes)?
    } else {
        params.targets
    };
    let connection = listen::open(&session, &caller, &database, targets, params.resume).await?;
    Ok(sse(connection))
}

/// The session of the live queries (503 UNAVAILABLE when this sidecar runs without them).
fn running_session(state: &SharedState) -> Result<Session, ApiError> {
    Ok(listen::session(&state.service)?)
}

/// `POST :listen/{stream}/targets`.
async fn add_targets(
    state: SharedState,
    database: String,
    stream: String,
    request: Request,
) -> Result<Response, ApiError> {
    let session = running_session(&state)?;
    let access_token = access_token_only(request.uri().query())?;
    let principal = authenticate(&state, request.headers(), access_token.as_deref()).await?;
    let caller = caller(principal, &request);
    body::require_json(request.headers())?;
    let (parts, raw) = request.into_parts();
    let bytes = body::read(&parts.headers, raw, state.max_body_bytes).await?;
    let targets = body_targets(&bytes)?;
    let ids: Vec<String> = targets.iter().map(|t| t.id.clone()).collect();
    listen::add_targets(&session, &caller, &database, &stream, targets).await?;
    Ok(json_ok(&json!({"stream": stream, "targets": ids})))
}

/// `DELETE :listen/{stream}/targets/{id}`.
async fn remove_target(
    state: SharedState,
    stream: String,
    id: String,
    request: Request,
) -> Result<Response, ApiError> {
    let session = running_session(&state)?;
    let access_token = access_token_only(request.uri().query())?;
    let principal = authenticate(&state, request.headers(), access_token.as_deref()).await?;
    let caller = caller(principal, &request);
    listen::remove_target(&session, &caller, &stream, &id).await?;
    Ok(json_ok(&json!({"stream": stream, "removed": id})))
}

/// The `access_token` of a query string that may carry nothing else (the routes that change
/// a stream's targets).
///
/// # Errors
/// 400 INVALID_ARGUMENT: any other parameter, or `access_token` given twice.
fn access_token_only(query: Option<&str>) -> Result<Option<String>, ApiError> {
    let mut access_token = None;
    for (name, value) in query_pairs(query)? {
        if name != "access_token" {
            return Err(
                ApiError::invalid_argument(format!("unknown parameter \"{name}\""))
                    .with_hint("this route takes only access_token"),
            );
        }
        set_access_token(&mut access_token, value)?;
    }
    Ok(access_token)
}

/// Take an `access_token` parameter: one credential per request, so a second is refused
/// rather than one of them silently chosen.
///
/// # Errors
/// 400 INVALID_ARGUMENT when one was given already.
fn set_access_token(slot: &mut Option<String>, value: String) -> Result<(), ApiError> {
    if slot.is_some() {
        return Err(ApiError::invalid_argument(
            "access_token is given more than once",
        ));
    }
    *slot = Some(value);
    Ok(())
}

fn json_ok(body: &Json) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The `retry:` of a stream: 1-2 seconds, jittered so that clients of a restarted sidecar do
/// not reconnect in step.
fn retry_millis() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    1_000 + u64::from(nanos % 1_000)
}

/// The response of a connected stream: `retry:`, the first frames, then the queue, with a
/// keep-alive comment after [`KEEP_ALIVE`] of silence; a closing reset ends it.
fn sse(connection: Connection) -> Response {
    let Connection {
        stream,
        first,
        frames,
        closed,
        sizes: _,
    } = connection;
    let mut opening = format!("retry: {}\n\n", retry_millis());
    for frame in &first {
        opening.push_str(&sse::text(frame));
    }
    enum Next {
        Closed(Option<crate::session::Frame>),
        Frame(Option<crate::session::Frame>),
        KeepAlive,
    }
    struct State {
        frames: tokio::sync::mpsc::Receiver<crate::session::Frame>,
        closed: Option<tokio::sync::oneshot::Receiver<crate::session::Frame>>,
        shutdown: tokio::sync::watch::Receiver<bool>,
        opening: Option<String>,
        done: bool,
    }
    let state = State {
        frames,
        closed: Some(closed),
        shutdown: shutdown_signal(),
        opening: Some(opening),
        done: false,
    };
    let body = futures_util::stream::unfold(state, |mut s| async move {
        if let Some(opening) = s.opening.take() {
            return Some((Ok(Bytes::from(opening)), s));
        }
        if s.done {
            return None;
        }
        let State {
            frames,
            closed,
            shutdown,
            ..
        } = &mut s;
        if *shutdown.borrow() {
            return None;
        }
        let closing = async {
            match closed.as_mut() {
                Some(rx) => rx.await.ok(),
                None => std::future::pending().await,
            }
        };
        let next = tokio::select! {
            biased;
            last = closing => Next::Closed(last),
            _ = shutdown.changed() => Next::Frame(None),
            frame = frames.recv() => Next::Frame(frame),
            () = tokio::time::sleep(KEEP_ALIVE) => Next::KeepAlive,
        };
        let chunk = match next {
            Next::Closed(Some(frame)) => {
                s.done = true;
                Bytes::from(sse::text(&frame))
            }
            // The hub let the closer go (the stream was taken over or expired): the queue
            // says the rest.
            Next::Closed(None) => {
                s.closed = None;
                Bytes::new()
            }
            Next::Frame(Some(frame)) => {
                let mut text = String::new();
                let mut next = Some(frame);
                while let Some(frame) = next {
                    if let Some(lag) = lag_seconds(&frame) {
                        metrics::histogram!("docstore_session_commit_to_send_seconds").record(lag);
                    }
                    text.push_str(&sse::text(&frame));
                    next = s.frames.try_recv().ok();
                }
                Bytes::from(text)
            }
            Next::Frame(None) => return None,
            Next::KeepAlive => Bytes::from_static(b": keep-alive\n\n"),
        };
        Some((Ok::<Bytes, Infallible>(chunk), s))
    });
    let mut response = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&stream) {
        response.headers_mut().insert("x-docstore-stream", value);
    }
    response
}
