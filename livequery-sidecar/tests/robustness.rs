//! Robustness of the parsers of outside input (URL paths, query strings, request bodies,
//! Authorization headers): arbitrary input never panics, and every refusal is a 4xx error
//! with a canonical code. Property tests over random bytes and over strings built from the
//! characters that matter to each parser, run through the same checks as the fuzz targets
//! (`fuzz-http/checks.rs`, compiled in here unchanged).

#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../fuzz-http/checks.rs"]
mod checks;

use docstore_sidecar::http::body;
use docstore_sidecar::http::resource;
use proptest::prelude::*;

/// Panics with the check's failure, so proptest shrinks the input.
fn holds(result: Result<(), checks::Failure>) {
    if let Err(failure) = result {
        panic!("{failure}");
    }
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn targets_never_panic(path in path_like()) {
        holds(checks::check_routes(path.as_bytes()));
    }

    #[test]
    fn targets_of_any_text_never_panic(path in "\\PC{0,60}") {
        holds(checks::check_routes(path.as_bytes()));
    }

    #[test]
    fn params_never_panic(query in query_like()) {
        if let Err(e) = resource::parse_params(Some(&query)) {
            holds(checks::client_error(&e));
        }
    }

    #[test]
    fn bodies_never_panic(bytes in body_like()) {
        holds(checks::check_bodies(&bytes));
        // The matcher wire format is a version byte then JSON: the same JSON-like bodies.
        holds(checks::check_matcher_wire(&[&[1u8][..], &bytes].concat()));
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        holds(checks::check_bodies(&bytes));
        holds(checks::check_matcher_wire(&bytes));
        let _ = resource::percent_decode(&String::from_utf8_lossy(&bytes), true);
        holds(checks::check_routes(&bytes));
    }

    #[test]
    fn masks_never_panic(mask in prop::collection::vec("[a-z.`\\\\$ ]{0,8}", 0..5), bytes in body_like()) {
        if let Err(e) = body::masked_set("a/b", &bytes, &mask, None) {
            holds(checks::client_error(&e));
        }
    }

    #[test]
    fn authorization_headers_never_panic(value in "[ -~]{0,80}", dots in "[A-Za-z0-9_=-]{0,20}(\\.[A-Za-z0-9_=-]{0,30}){0,3}") {
        for candidate in [value, format!("Bearer {dots}")] {
            holds(checks::check_authorization(candidate.as_bytes()));
        }
    }
}
