//! Robustness of the parsers of outside input (URL paths, query strings, request bodies,
//! Authorization headers): arbitrary input never panics, and every refusal is a 4xx error
//! with a canonical code. Property tests over random bytes and over strings built from the
//! characters that matter to each parser.

#![allow(clippy::unwrap_used, clippy::panic)]

use axum::http::{header, HeaderMap, HeaderValue};
use docstore_core::Code;
use docstore_sidecar::config::Config;
use docstore_sidecar::http::auth::Verifier;
use docstore_sidecar::http::body::{self, Commit, RunQuery};
use docstore_sidecar::http::error::ApiError;
use docstore_sidecar::http::resource::{self, Target};
use proptest::prelude::*;

fn client_error(e: &ApiError) {
    let status = e.status().as_u16();
    assert!(
        (400..500).contains(&status),
        "{status} for a parser refusal: {e:?}"
    );
    assert!(!e.message.is_empty());
}

/// Paths made of the characters the route parser looks at.
fn path_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("/".to_owned()),
        Just("%2F".to_owned()),
        Just("%".to_owned()),
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just(":".to_owned()),
        Just("documents".to_owned()),
        Just("(default)".to_owned()),
        Just("runQuery".to_owned()),
        Just("commit".to_owned()),
        Just("__x__".to_owned()),
        Just("%C3%A9".to_owned()),
        Just("%FF".to_owned()),
        "[a-z0-9-]{1,6}",
        "\\PC{0,3}",
    ];
    prop::collection::vec(piece, 0..16)
        .prop_map(|pieces| format!("/v1/databases/{}", pieces.concat()))
}

fn query_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("&".to_owned()),
        Just("=".to_owned()),
        Just("+".to_owned()),
        Just("%".to_owned()),
        Just("%60".to_owned()),
        Just("merge".to_owned()),
        Just("updateMask".to_owned()),
        Just("exists".to_owned()),
        Just("updateTime".to_owned()),
        Just("pageSize".to_owned()),
        Just("true".to_owned()),
        "[a-z0-9.`]{1,6}",
        "\\PC{0,3}",
    ];
    prop::collection::vec(piece, 0..12).prop_map(|p| p.concat())
}

/// JSON-ish bodies: fragments of the shapes the body parsers expect.
fn body_like() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just(",".to_owned()),
        Just(":".to_owned()),
        Just("\"sql\"".to_owned()),
        Just("\"structuredQuery\"".to_owned()),
        Just("\"writes\"".to_owned()),
        Just("\"transaction\"".to_owned()),
        Just("\"$map\"".to_owned()),
        Just("true".to_owned()),
        Just("1e999".to_owned()),
        Just("\"\\u0000\"".to_owned()),
        "[a-z0-9\" ]{0,5}",
    ];
    prop::collection::vec(piece, 0..24).prop_map(|p| p.concat().into_bytes())
}

fn verifier() -> Verifier {
    let config = Config {
        database_url: String::new(),
        listen: "127.0.0.1:0".parse().unwrap(),
        jwt_secret: Some("secret".into()),
        jwks_file: None,
        jwt_issuer: Some("iss".into()),
        jwt_audience: Some("aud".into()),
        admin_key: Some("admin".into()),
        max_body_bytes: 100,
        pool_size: 1,
    };
    Verifier::from_config(&config).unwrap()
}

fn check_target(path: &str) {
    match resource::parse_target(path) {
        Ok(Target::Path { database, path }) => {
            assert!(docstore_core::path::is_valid_database_id(&database));
            assert!(!path.segments().is_empty());
        }
        Ok(Target::RunQuery { database } | Target::Commit { database }) => {
            assert!(docstore_core::path::is_valid_database_id(&database));
        }
        Err(e) => client_error(&e),
    }
    let _ = resource::route_label(path);
}

fn check_body(bytes: &[u8]) {
    for result in [
        RunQuery::parse(bytes).map(|_| ()),
        Commit::parse(bytes).map(|_| ()),
        body::json_object_text(bytes, "data").map(|_| ()),
        body::masked_set("a/b", bytes, &["a.b".into(), "`x`".into()], None).map(|_| ()),
    ] {
        if let Err(e) = result {
            client_error(&e);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn targets_never_panic(path in path_like()) {
        check_target(&path);
    }

    #[test]
    fn targets_of_any_text_never_panic(path in "\\PC{0,60}") {
        check_target(&format!("/v1/databases/{path}"));
        check_target(&path);
    }

    #[test]
    fn params_never_panic(query in query_like()) {
        if let Err(e) = resource::parse_params(Some(&query)) {
            client_error(&e);
        }
    }

    #[test]
    fn bodies_never_panic(bytes in body_like()) {
        check_body(&bytes);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        check_body(&bytes);
        let text = String::from_utf8_lossy(&bytes);
        let _ = resource::percent_decode(&text, true);
        check_target(&text);
    }

    #[test]
    fn masks_never_panic(mask in prop::collection::vec("[a-z.`\\\\$ ]{0,8}", 0..5), bytes in body_like()) {
        if let Err(e) = body::masked_set("a/b", &bytes, &mask, None) {
            client_error(&e);
        }
    }

    #[test]
    fn authorization_headers_never_panic(value in "[ -~]{0,80}", dots in "[A-Za-z0-9_=-]{0,20}(\\.[A-Za-z0-9_=-]{0,30}){0,3}") {
        let v = verifier();
        for candidate in [value, format!("Bearer {dots}")] {
            let mut headers = HeaderMap::new();
            if let Ok(h) = HeaderValue::from_str(&candidate) {
                headers.insert(header::AUTHORIZATION, h);
                if let Err(e) = v.authenticate(&headers) {
                    assert_eq!(e.code, Code::Unauthenticated);
                }
            }
        }
    }
}
