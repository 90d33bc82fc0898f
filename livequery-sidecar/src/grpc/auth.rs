//! The caller of a gRPC request: the same [`Principal`] as over HTTP, from the same
//! `authorization: Bearer <token>` metadata and the same verifier (`http::auth`), plus
//! development mode's `Bearer owner`.
//!
//! The SDKs talking to an emulator (`FIRESTORE_EMULATOR_HOST`, no credentials) send
//! `authorization: Bearer owner`. With `--dev-mode` that token is the admin, as the Firebase
//! emulator treats it; without it, `owner` is just a token that is not a JWT (UNAUTHENTICATED).

use tonic::metadata::MetadataMap;
use tonic::Status;

use super::error::from_api;
use crate::http::auth::{Principal, Verifier};

/// The token the SDKs send to an emulator; the admin in development mode only.
pub const DEV_OWNER_TOKEN: &str = "owner";

/// The caller of a request with this metadata.
///
/// # Errors
/// UNAUTHENTICATED for a bad token, INVALID_ARGUMENT for several `authorization` entries
/// (the HTTP API's rules, from its verifier).
pub fn caller(
    verifier: &Verifier,
    dev_mode: bool,
    metadata: &MetadataMap,
) -> Result<Principal, Status> {
    if dev_mode && is_dev_owner(metadata) {
        return Ok(Principal::Admin);
    }
    verify(verifier, metadata)
}

/// Whether the request carries exactly `authorization: Bearer owner`.
fn is_dev_owner(metadata: &MetadataMap) -> bool {
    let mut values = metadata.get_all("authorization").iter();
    let first = values.next().and_then(|v| v.to_str().ok());
    values.next().is_none()
        && first
            .and_then(|v| v.split_once(' '))
            .is_some_and(|(scheme, token)| {
                scheme.eq_ignore_ascii_case("bearer") && token.trim() == DEV_OWNER_TOKEN
            })
}

/// The HTTP API's verifier on the request's `authorization` entries: the one place the gRPC
/// front end calls it.
fn verify(verifier: &Verifier, metadata: &MetadataMap) -> Result<Principal, Status> {
    let mut headers = axum::http::HeaderMap::new();
    for value in metadata.get_all("authorization") {
        if let Ok(value) = axum::http::HeaderValue::from_bytes(value.as_encoded_bytes()) {
            headers.append(axum::http::header::AUTHORIZATION, value);
        }
    }
    verifier.authenticate(&headers).map_err(from_api)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn verifier() -> Verifier {
        let config =
            crate::config::Config::parse_from(["docstore-sidecar", "--admin-key", "the-admin-key"]);
        Verifier::from_config(&config).unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn metadata(values: &[&'static str]) -> MetadataMap {
        let mut m = MetadataMap::new();
        for v in values {
            m.append(
                "authorization",
                tonic::metadata::MetadataValue::from_static(v),
            );
        }
        m
    }

    #[test]
    fn owner_is_the_admin_in_development_mode_only() {
        let v = verifier();
        let owner = metadata(&["Bearer owner"]);
        assert_eq!(caller(&v, true, &owner).ok(), Some(Principal::Admin));
        let refused = caller(&v, false, &owner).err().map(|s| s.code());
        assert_eq!(refused, Some(tonic::Code::Unauthenticated));
    }

    #[test]
    fn the_http_rules_apply() {
        let v = verifier();
        assert_eq!(
            caller(&v, false, &metadata(&[])).ok(),
            Some(Principal::Anonymous)
        );
        assert_eq!(
            caller(&v, true, &metadata(&["Bearer the-admin-key"])).ok(),
            Some(Principal::Admin)
        );
        let bad = caller(&v, true, &metadata(&["Bearer not-a-jwt"])).err();
        assert_eq!(bad.map(|s| s.code()), Some(tonic::Code::Unauthenticated));
        let twice = caller(&v, true, &metadata(&["Bearer owner", "Bearer owner"])).err();
        assert_eq!(twice.map(|s| s.code()), Some(tonic::Code::InvalidArgument));
    }
}
