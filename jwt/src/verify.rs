//! Verification of one token against [`Keys`] at a given time.

use base64::Engine;
use jsonwebtoken::errors::ErrorKind as LibErrorKind;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde_json::Value as Json;

use crate::error::{ErrorKind, JwtError};
use crate::keys::Keys;

/// A token's `exp` (required) and `nbf`: NumericDates (RFC 7519), seconds since the epoch,
/// integer or fractional. Checked here rather than by jsonwebtoken, which reads the claims
/// with the workspace's serde_json `arbitrary_precision` and then refuses a fractional one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lifetime {
    /// `exp`, seconds since 1970.
    pub exp: f64,
    /// `nbf`, seconds since 1970.
    pub nbf: Option<f64>,
}

impl Lifetime {
    /// The lifetime of verified claims.
    ///
    /// # Errors
    /// [`ErrorKind::MissingClaim`] without `exp`; [`ErrorKind::BadDate`] when `exp` or `nbf`
    /// is not a number.
    pub fn of(claims: &Json) -> Result<Lifetime, JwtError> {
        let date = |key: &str| match claims.get(key) {
            None => Ok(None),
            Some(value) => value
                .as_f64()
                .filter(|f| f.is_finite())
                .map(Some)
                .ok_or_else(|| {
                    JwtError::new(
                        ErrorKind::BadDate,
                        "exp and nbf must be numbers of seconds (NumericDate)",
                    )
                }),
        };
        Ok(Lifetime {
            exp: date("exp")?.ok_or_else(|| {
                JwtError::new(
                    ErrorKind::MissingClaim,
                    "a required claim (exp, iss or aud) is missing",
                )
            })?,
            nbf: date("nbf")?,
        })
    }

    /// Whether the token is valid at `now` (Unix seconds), with `leeway` seconds either way:
    /// expired when `exp` < now - leeway, not yet valid when `nbf` > now + leeway (the
    /// comparisons jsonwebtoken makes).
    ///
    /// # Errors
    /// [`ErrorKind::Expired`] or [`ErrorKind::NotYetValid`].
    pub fn check(&self, now: u64, leeway: u64) -> Result<(), JwtError> {
        #[allow(clippy::cast_precision_loss)] // seconds since 1970 fit an f64 exactly
        let (now, leeway) = (now as f64, leeway as f64);
        if self.exp < now - leeway {
            return Err(JwtError::new(ErrorKind::Expired, "the token has expired"));
        }
        if self.nbf.is_some_and(|nbf| nbf > now + leeway) {
            return Err(JwtError::new(
                ErrorKind::NotYetValid,
                "the token is not valid yet (nbf)",
            ));
        }
        Ok(())
    }
}

/// The `alg` of a header jsonwebtoken could not read: a JSON object's string `alg`.
fn raw_algorithm(token: &str) -> Option<String> {
    let head = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(head)
        .ok()?;
    let header: Json = serde_json::from_slice(&bytes).ok()?;
    header.get("alg")?.as_str().map(str::to_owned)
}

fn validation(keys: &Keys, algorithm: Algorithm) -> Validation {
    let mut v = Validation::new(algorithm);
    // exp and nbf: [`Lifetime`], after the signature.
    v.validate_exp = false;
    v.validate_nbf = false;
    let mut required = Vec::new();
    if let Some(iss) = &keys.issuer {
        v.set_issuer(&[iss]);
        required.push("iss");
    }
    match &keys.audience {
        Some(aud) => {
            v.set_audience(&[aud]);
            required.push("aud");
        }
        None => v.validate_aud = false,
    }
    v.set_required_spec_claims(&required);
    v
}

/// The claims of `token` if it passes every check (see the crate's documentation) at `now`
/// (Unix seconds).
///
/// # Errors
/// Why the token is refused, as a [`JwtError`] of a stable [`ErrorKind`].
pub fn verify(token: &str, keys: &Keys, now: u64) -> Result<Json, JwtError> {
    let token = token.trim();
    let not_jwt = || {
        JwtError::new(
            ErrorKind::Malformed,
            "the token is not a JWT (three base64url parts separated by dots)",
        )
    };
    if token.split('.').count() != 3 {
        return Err(not_jwt());
    }
    let header = match decode_header(token) {
        Ok(header) => header,
        Err(_) => {
            return Err(match raw_algorithm(token) {
                Some(alg) => JwtError::new(
                    ErrorKind::UnsupportedAlgorithm,
                    format!("tokens signed with \"{alg}\" are not accepted"),
                ),
                None => not_jwt(),
            })
        }
    };
    let candidates: Vec<(&DecodingKey, Algorithm)> = match header.alg {
        Algorithm::HS256 => keys.secret.iter().map(|k| (k, Algorithm::HS256)).collect(),
        alg => keys
            .public
            .iter()
            .filter(|k| k.algorithm == alg)
            .filter(|k| match (&header.kid, &k.kid) {
                (Some(want), Some(have)) => want == have,
                (Some(_), None) => false,
                (None, _) => true,
            })
            .map(|k| (&k.key, k.algorithm))
            .collect(),
    };
    if candidates.is_empty() {
        let kind = match (&header.kid, header.alg) {
            (_, Algorithm::HS256) | (None, _) => ErrorKind::NoKey,
            (Some(kid), _) if keys.has_kid(kid) => ErrorKind::NoKey,
            (Some(_), _) => ErrorKind::UnknownKid,
        };
        return Err(JwtError::new(
            kind,
            format!(
                "no key verifies {:?} tokens{}",
                header.alg,
                header
                    .kid
                    .as_deref()
                    .map(|k| format!(" with kid \"{k}\""))
                    .unwrap_or_default()
            ),
        ));
    }
    let mut last = None;
    for (key, algorithm) in candidates {
        match decode::<Json>(token, key, &validation(keys, algorithm)) {
            Ok(data) => {
                if !data.claims.is_object() {
                    return Err(JwtError::new(
                        ErrorKind::Malformed,
                        "the claims are not a JSON object",
                    ));
                }
                Lifetime::of(&data.claims)?.check(now, keys.leeway_seconds)?;
                return Ok(data.claims);
            }
            Err(e) => last = Some(e),
        }
    }
    // Expiry and nbf are [`Lifetime`]'s, checked above once the signature holds.
    let (kind, why) = match last.as_ref().map(|e| e.kind()) {
        Some(LibErrorKind::InvalidIssuer) => (ErrorKind::WrongIssuer, "wrong issuer (iss)"),
        Some(LibErrorKind::InvalidAudience) => (ErrorKind::WrongAudience, "wrong audience (aud)"),
        Some(LibErrorKind::MissingRequiredClaim(_)) => (
            ErrorKind::MissingClaim,
            "a required claim (exp, iss or aud) is missing",
        ),
        Some(LibErrorKind::InvalidSignature) => (ErrorKind::BadSignature, "bad signature"),
        Some(LibErrorKind::Base64(_) | LibErrorKind::Json(_) | LibErrorKind::Utf8(_)) => (
            ErrorKind::Malformed,
            "the token is not a JWT (its parts do not decode)",
        ),
        _ => (ErrorKind::Invalid, "the token could not be verified"),
    };
    Err(JwtError::new(kind, why))
}
