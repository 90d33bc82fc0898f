//! The caller of a gRPC request: the service's [`Caller`], its principal from the
//! `authorization: Bearer <token>` metadata verified by the service's [`Verifier`] (the
//! HTTP API's rules: no entry is anonymous, several are INVALID_ARGUMENT), plus development
//! mode's `Bearer owner`.
//!
//! The SDKs talking to an emulator (`FIRESTORE_EMULATOR_HOST`, no credentials) send
//! `authorization: Bearer owner`. With `--dev-mode` that token is the admin, as the Firebase
//! emulator treats it; without it, `owner` is just a token that is not a JWT (UNAUTHENTICATED).

use tonic::metadata::MetadataMap;
use tonic::Status;

use super::error::from_service;
use crate::service::caller::{invalid_credentials, Caller, Principal, Verifier};
use crate::service::error::ServiceError;

/// The token the SDKs send to an emulator; the admin in development mode only.
pub const DEV_OWNER_TOKEN: &str = "owner";

/// The caller of an RPC with this metadata; `rpc` is the rules' `request.httpMethod` (the
/// RPC's name, as another transport names its call).
///
/// # Errors
/// UNAUTHENTICATED for a bad token, INVALID_ARGUMENT for several `authorization` entries.
pub async fn caller(
    verifier: &Verifier,
    dev_mode: bool,
    metadata: &MetadataMap,
    rpc: &str,
) -> Result<Caller, Status> {
    Ok(Caller {
        principal: principal(verifier, dev_mode, metadata)
            .await
            .map_err(from_service)?,
        method: rpc.to_owned(),
        peer: None,
    })
}

/// The principal of the request's `authorization` entries.
async fn principal(
    verifier: &Verifier,
    dev_mode: bool,
    metadata: &MetadataMap,
) -> Result<Principal, ServiceError> {
    let mut values = metadata.get_all("authorization").iter();
    let Some(value) = values.next() else {
        return Ok(Principal::Anonymous);
    };
    if values.next().is_some() {
        return Err(ServiceError::invalid_argument(
            "the request has more than one authorization entry",
        )
        .with_hint("send one authorization entry"));
    }
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty())
        .ok_or_else(|| invalid_credentials("expected authorization: Bearer <token>"))?;
    if dev_mode && token == DEV_OWNER_TOKEN {
        return Ok(Principal::Admin);
    }
    verifier.verify(token).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    async fn principal_of(v: &Verifier, dev: bool, m: &MetadataMap) -> Result<Principal, Status> {
        caller(v, dev, m, "GetDocument").await.map(|c| c.principal)
    }

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

    #[tokio::test]
    async fn owner_is_the_admin_in_development_mode_only() {
        let v = verifier();
        let owner = metadata(&["Bearer owner"]);
        assert_eq!(
            principal_of(&v, true, &owner).await.ok(),
            Some(Principal::Admin)
        );
        let refused = principal_of(&v, false, &owner)
            .await
            .err()
            .map(|s| s.code());
        assert_eq!(refused, Some(tonic::Code::Unauthenticated));
    }

    #[tokio::test]
    async fn the_http_rules_apply() {
        let v = verifier();
        assert_eq!(
            principal_of(&v, false, &metadata(&[])).await.ok(),
            Some(Principal::Anonymous)
        );
        assert_eq!(
            principal_of(&v, true, &metadata(&["Bearer the-admin-key"]))
                .await
                .ok(),
            Some(Principal::Admin)
        );
        let bad = principal_of(&v, true, &metadata(&["Bearer not-a-jwt"]))
            .await
            .err();
        assert_eq!(bad.map(|s| s.code()), Some(tonic::Code::Unauthenticated));
        let twice = principal_of(&v, true, &metadata(&["Bearer owner", "Bearer owner"]))
            .await
            .err();
        assert_eq!(twice.map(|s| s.code()), Some(tonic::Code::InvalidArgument));
    }
}
