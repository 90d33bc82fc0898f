//! The credential of an HTTP request: `Authorization: Bearer <token>`, verified by the
//! service's [`Verifier`]. No header is an unauthenticated caller, not an error.

use axum::http::{header, HeaderMap, Method};

use super::error::ApiError;
use crate::service::caller::{invalid_credentials, Caller, Principal, Verifier};

/// The caller of a request with these headers and method.
///
/// # Errors
/// As [`authenticate`].
pub async fn caller(
    verifier: &Verifier,
    headers: &HeaderMap,
    method: &Method,
) -> Result<Caller, ApiError> {
    Ok(Caller {
        principal: authenticate(verifier, headers).await?,
        method: method.as_str().to_owned(),
        peer: None,
    })
}

/// The caller of a request with these headers (the verifier may refetch a JWKS URL first:
/// [`Verifier::verify`]).
///
/// # Errors
/// As [`token`]; 401 UNAUTHENTICATED for a token the verifier refuses.
pub async fn authenticate(verifier: &Verifier, headers: &HeaderMap) -> Result<Principal, ApiError> {
    match token(headers)? {
        None => Ok(Principal::Anonymous),
        Some(token) => Ok(verifier.verify(token).await?),
    }
}

/// The bearer token of a request with these headers: none without an `Authorization` header.
///
/// # Errors
/// 401 UNAUTHENTICATED for a header that is not `Bearer <token>`; 400 INVALID_ARGUMENT for
/// more than one `Authorization` header (one credential per request, never one of them
/// chosen).
pub fn token(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::invalid_argument(
            "the request has more than one Authorization header",
        )
        .with_hint("send one Authorization header"));
    }
    let value = value
        .to_str()
        .map_err(|_| invalid_credentials("the Authorization header is not ASCII"))?;
    let token = value
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty())
        .ok_or_else(|| invalid_credentials("expected Authorization: Bearer <token>"))?;
    Ok(Some(token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use clap::Parser;

    fn verifier() -> Verifier {
        let config = Config::try_parse_from([
            "docstore-sidecar",
            "--admin-key",
            "admin-key",
            "--jwt-secret",
            "secret",
        ])
        .unwrap();
        Verifier::from_config(&config).unwrap()
    }

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for value in values {
            h.append(
                header::AUTHORIZATION,
                axum::http::HeaderValue::from_bytes(value).unwrap(),
            );
        }
        h
    }

    #[tokio::test]
    async fn the_bearer_token_of_the_header() {
        let v = verifier();
        assert_eq!(
            authenticate(&v, &HeaderMap::new()).await.unwrap(),
            Principal::Anonymous
        );
        for value in ["Bearer admin-key", "bearer admin-key", "BEARER  admin-key "] {
            assert_eq!(
                authenticate(&v, &headers(&[value.as_bytes()]))
                    .await
                    .unwrap(),
                Principal::Admin,
                "{value}"
            );
        }
        for value in [
            &b"Bearer "[..],
            b"Basic abc",
            b"admin-key",
            b"Bearer admin-keyx",
            b"Bearer a.b.c",
            b"Bearer \xe9",
        ] {
            let e = authenticate(&v, &headers(&[value])).await.unwrap_err();
            assert_eq!(e.status().as_u16(), 401, "{value:?}");
        }
        let e = authenticate(&v, &headers(&[b"Bearer admin-key", b"Bearer admin-key"]))
            .await
            .unwrap_err();
        assert_eq!(e.status().as_u16(), 400);
    }
}
