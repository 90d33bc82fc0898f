//! The checks behind the sidecar's fuzz targets. Run them with
//! `cd livequery-sidecar && RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz-http <routes|bodies|authorization|matcher_wire>`
//! (cargo-fuzz 0.13.2). A check fails when a parser panics (libFuzzer reports it) or refuses
//! input with anything but a 4xx canonical error.

use axum::http::{header, HeaderMap, HeaderValue};
use docstore_sidecar::config::Config;
use docstore_sidecar::http::body::{self, Commit, RunQuery};
use docstore_sidecar::http::error::ApiError;
use docstore_sidecar::http::listen;
use docstore_sidecar::http::resource::{self, Target};
use docstore_sidecar::service::caller::Verifier;

/// What a check reports when a property does not hold.
pub type Failure = String;

/// A parser's refusal must be a 4xx with a message.
pub fn client_error(e: &ApiError) -> Result<(), Failure> {
    let status = e.status().as_u16();
    if (400..500).contains(&status) && !e.message().is_empty() {
        Ok(())
    } else {
        Err(format!("a parser refused input with {status}: {e:?}"))
    }
}

/// Request paths (the bytes as text) and query strings (after the first `?`).
pub fn check_routes(data: &[u8]) -> Result<(), Failure> {
    let text = String::from_utf8_lossy(data);
    let (path, query) = text.split_once('?').unwrap_or((&text, ""));
    for candidate in [path.to_owned(), format!("/v1/databases/{path}")] {
        match resource::parse_target(&candidate) {
            Ok(Target::Path { path, .. }) if path.segments().is_empty() => {
                return Err(format!("accepted an empty document path in {candidate:?}"));
            }
            Ok(Target::Path { database, .. })
            | Ok(Target::RunQuery { database })
            | Ok(Target::Commit { database })
            | Ok(Target::BatchGet { database })
            | Ok(Target::ListCollectionIds { database })
            | Ok(Target::Explain { database })
            | Ok(Target::BeginTransaction { database })
            | Ok(Target::Rollback { database })
            | Ok(Target::Listen { database, .. }) => {
                if !docstore_core::path::is_valid_database_id(&database) {
                    return Err(format!("accepted database id {database:?}"));
                }
            }
            Err(e) => client_error(&e)?,
        }
        let _ = resource::route_label(&candidate);
    }
    if let Err(e) = resource::parse_params(Some(query)) {
        client_error(&e)?;
    }
    for post in [false, true] {
        if let Err(e) = listen::ListenParams::parse(Some(query), post, Some(path.to_owned())) {
            client_error(&e)?;
        }
    }
    Ok(())
}

/// Request bodies of every shape the API reads.
pub fn check_bodies(data: &[u8]) -> Result<(), Failure> {
    for result in [
        RunQuery::parse(data).map(|_| ()),
        Commit::parse(data).map(|_| ()),
        body::BatchGet::parse(data).map(|_| ()),
        body::BeginTransaction::parse(data).map(|_| ()),
        body::Rollback::parse(data).map(|_| ()),
        body::ListCollectionIds::parse(data).map(|_| ()),
        body::json_object_text(data, "data").map(|_| ()),
        body::masked_set("a/b", data, &["a.b".into(), "`x y`".into()], None).map(|_| ()),
        listen::body_targets(data).map(|_| ()),
    ] {
        if let Err(e) = result {
            client_error(&e)?;
        }
    }
    Ok(())
}

/// `Authorization` header values: only 401 may come back.
pub fn check_authorization(data: &[u8]) -> Result<(), Failure> {
    let Ok(value) = HeaderValue::from_bytes(data) else {
        return Ok(());
    };
    let config = Config {
        database_url: String::new(),
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        grpc_listen: None,
        dev_mode: false,
        tls_cert: None,
        tls_key: None,
        jwt_secret: Some("secret".into()),
        jwks_file: None,
        jwks_url: None,
        jwks_refetch_seconds: 30,
        jwt_issuer: Some("iss".into()),
        jwt_audience: Some("aud".into()),
        admin_key: Some("admin".into()),
        max_body_bytes: 100,
        pool_size: 1,
        shared_connections: 0,
        slot: "s".into(),
        role: docstore_sidecar::config::Role::All,
        matching: docstore_sidecar::config::Matching::Local,
        nats_url: None,
        nats_stream: "DOCSTORE_TX".into(),
        live: false,
        triggers: false,
        trigger_parallel: 16,
        trigger_attempts: 10,
        trigger_timeout_ms: 10_000,
        trigger_backoff_ms: 1_000,
        trigger_backoff_max_ms: 300_000,
        trigger_max_depth: 8,
        heartbeat_ms: 1000,
        listen_grace_seconds: 1,
        listen_queue: 1,
        listen_replay: 1,
        listen_replay_bytes: 1 << 20,
        statement_timeout_ms: 0,
        query_write_timeout_ms: 0,
        allowed_hosts: Vec::new(),
        cors_origins: Vec::new(),
        header_timeout_ms: 1000,
        body_timeout_ms: 1000,
        idle_timeout_ms: 1000,
        max_connections: 1,
        max_connections_per_client: 1,
        max_streams: 1,
        max_streams_per_caller: 1,
        max_targets_per_stream: 1,
        match_write_partitions: 1,
        match_query_partitions: 1,
        transaction_idle_seconds: 1,
        transaction_lifetime_seconds: 1,
        transaction_lock_timeout_ms: 1,
        max_transactions_per_caller: 1,
        max_transactions: None,
    };
    let verifier = Verifier::from_config(&config).map_err(|e| e.to_string())?;
    let mut headers = HeaderMap::new();
    headers.insert(header::AUTHORIZATION, value);
    // The header as bearer.rs reads it, the token as the verifier checks it (the keys in
    // hand: no JWKS URL here to refetch).
    let verified = docstore_sidecar::http::bearer::token(&headers).and_then(|token| {
        token.map_or(Ok(()), |token| {
            verifier
                .verify_offline(token)
                .map(|_| ())
                .map_err(ApiError::from)
        })
    });
    match verified {
        Ok(_) => Ok(()),
        Err(e) if e.status().as_u16() == 401 => Ok(()),
        Err(e) => Err(format!("authorization refused with {e:?}")),
    }
}

/// The matcher wire format (`session/wire.rs`): calls, answers and forwarded frames from NATS.
/// Whatever decodes must encode to a message that decodes to the same value.
pub fn check_matcher_wire(data: &[u8]) -> Result<(), Failure> {
    use docstore_sidecar::session::wire;
    if let Ok(request) = wire::decode_request(data) {
        let again = wire::decode_request(&wire::encode_request(&request));
        if again.as_ref() != Ok(&request) {
            return Err(format!(
                "a call does not round-trip: {request:?} -> {again:?}"
            ));
        }
    }
    if let Ok(answer) = wire::decode_answer(data) {
        let again = wire::decode_answer(&wire::encode_answer(&answer));
        if again.as_ref() != Ok(&answer) {
            return Err(format!(
                "an answer does not round-trip: {answer:?} -> {again:?}"
            ));
        }
    }
    if let Ok(forwarded) = wire::decode_forwarded(data) {
        let again = wire::decode_forwarded(&wire::encode_forwarded(&forwarded));
        if again.as_ref() != Ok(&forwarded) {
            return Err(format!(
                "a frame does not round-trip: {forwarded:?} -> {again:?}"
            ));
        }
        // Split into parts of 64 bytes, it is put back together as it was.
        let bytes = wire::encode_forwarded(&forwarded);
        let max = 1024 + forwarded.route.len() + 64;
        let parts = wire::split_forwarded(&forwarded.route, forwarded.seq, &bytes, max)
            .map_err(|e| format!("a frame was not split: {e}"))?;
        let mut gatherer = wire::Gatherer::default();
        let mut whole = None;
        for (header, part) in parts {
            whole = match header {
                None => Some(forwarded.clone()),
                Some(header) => gatherer
                    .push(header, part)
                    .map_err(|e| format!("a part of a frame was refused: {e}"))?,
            };
        }
        if whole.as_ref() != Some(&forwarded) {
            return Err(format!("parts of {forwarded:?} gave {whole:?}"));
        }
    }
    check_matcher_parts(data)
}

/// Split `data` into NATS messages with part headers: each is a big-endian u16 length and that
/// many bytes (a short last one takes what is left): a byte choosing the route (`r` when even,
/// `q` when odd), the text `<seq>/<bytes> <i>/<n>` and a newline, then the part's payload.
pub fn part_messages(data: &[u8]) -> Vec<(&'static str, String, String, &[u8])> {
    let mut out = Vec::new();
    let mut rest = data;
    while let [high, low, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*high, *low])).min(tail.len());
        let (message, next) = tail.split_at(len);
        rest = next;
        let [route, message @ ..] = message else {
            continue;
        };
        let route = if route % 2 == 0 { "r" } else { "q" };
        let cut = message
            .iter()
            .position(|b| *b == b'\n')
            .unwrap_or(message.len());
        let (head, payload) = message.split_at(cut);
        let head = String::from_utf8_lossy(head);
        let (frame, part) = head.split_once(' ').unwrap_or((&head, ""));
        out.push((
            route,
            frame.to_owned(),
            part.to_owned(),
            payload.get(1..).unwrap_or(&[]),
        ));
    }
    out
}

/// The parts of [`part_messages`] through a gateway's gatherer: refused or gathered, never a
/// panic; what it hands on decodes to a frame of the parts' route and number, and it never
/// holds more than its messages' declared sizes.
pub fn check_matcher_parts(data: &[u8]) -> Result<(), Failure> {
    use docstore_sidecar::session::wire;
    let mut gatherer = wire::Gatherer::default();
    for (route, frame, part, bytes) in part_messages(data) {
        let Ok(header) = wire::PartHeader::parse(route, &frame, &part) else {
            continue;
        };
        let seq = header.seq;
        if let Ok(Some(forwarded)) = gatherer.push(header, bytes) {
            if forwarded.route != route || forwarded.seq != seq {
                return Err(format!("parts of {route} #{seq} gave {forwarded:?}"));
            }
        }
        if gatherer.held() > data.len().min(2 * wire::MAX_MESSAGE) {
            return Err(format!("the gatherer holds {} bytes", gatherer.held()));
        }
    }
    Ok(())
}
