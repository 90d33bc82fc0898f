//! The settings of verification and the keys built from them: the HS256 secret, the public
//! keys of a JWKS document, the issuer and audience required, the leeway.

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey};

use crate::error::{ErrorKind, JwtError};

/// Clock skew allowed on `exp` and `nbf`, in seconds (both sides use it).
pub const DEFAULT_LEEWAY_SECONDS: u64 = 30;

/// What verification is configured with: the sidecar's `--jwt-secret`, `--jwks-file` /
/// `--jwks-url`, `--jwt-issuer`, `--jwt-audience`; the extension's `docstore.jwt_secret`,
/// `docstore.jwt_jwks`, `docstore.jwt_issuer`, `docstore.jwt_audience`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The HS256 shared secret.
    pub secret: Option<String>,
    /// A JWKS document (`{"keys": [...]}`) with the RSA and EC public keys.
    pub jwks: Option<String>,
    /// When set, `iss` must be present and equal.
    pub issuer: Option<String>,
    /// When set, `aud` must be present and be it or an array containing it.
    pub audience: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    pub leeway_seconds: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            secret: None,
            jwks: None,
            issuer: None,
            audience: None,
            leeway_seconds: DEFAULT_LEEWAY_SECONDS,
        }
    }
}

/// A public key of the JWKS.
#[derive(Clone)]
pub(crate) struct PublicKey {
    pub(crate) kid: Option<String>,
    pub(crate) algorithm: Algorithm,
    pub(crate) key: DecodingKey,
}

/// [`Settings`] made ready to verify with (keys decoded once).
#[derive(Clone)]
pub struct Keys {
    pub(crate) secret: Option<DecodingKey>,
    pub(crate) public: Vec<PublicKey>,
    pub(crate) issuer: Option<String>,
    pub(crate) audience: Option<String>,
    pub(crate) leeway_seconds: u64,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("secret", &self.secret.is_some())
            .field(
                "public",
                &self
                    .public
                    .iter()
                    .map(|k| (k.kid.as_deref(), k.algorithm))
                    .collect::<Vec<_>>(),
            )
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("leeway_seconds", &self.leeway_seconds)
            .finish()
    }
}

impl Keys {
    /// The keys of `settings`.
    ///
    /// # Errors
    /// [`ErrorKind::Settings`]: an empty secret, a JWKS that is not one, or one of its keys
    /// that cannot be used.
    pub fn new(settings: &Settings) -> Result<Keys, JwtError> {
        let secret = match settings.secret.as_deref() {
            Some("") => {
                return Err(JwtError::new(
                    ErrorKind::Settings,
                    "the HS256 secret is empty",
                ))
            }
            Some(s) => Some(DecodingKey::from_secret(s.as_bytes())),
            None => None,
        };
        let public = match settings.jwks.as_deref() {
            Some(text) => parse_jwks(text)?,
            None => Vec::new(),
        };
        Ok(Keys {
            secret,
            public,
            issuer: settings.issuer.clone(),
            audience: settings.audience.clone(),
            leeway_seconds: settings.leeway_seconds,
        })
    }

    /// Whether any key verifies anything (a secret or a public key).
    pub fn is_empty(&self) -> bool {
        self.secret.is_none() && self.public.is_empty()
    }

    /// Whether the JWKS has a key with this `kid`.
    pub fn has_kid(&self, kid: &str) -> bool {
        self.public.iter().any(|k| k.kid.as_deref() == Some(kid))
    }

    /// The leeway on `exp` and `nbf`, in seconds.
    pub fn leeway_seconds(&self) -> u64 {
        self.leeway_seconds
    }
}

fn algorithm_of(key: &Jwk) -> Option<Algorithm> {
    match key.common.key_algorithm {
        Some(KeyAlgorithm::RS256) => Some(Algorithm::RS256),
        Some(KeyAlgorithm::RS384) => Some(Algorithm::RS384),
        Some(KeyAlgorithm::RS512) => Some(Algorithm::RS512),
        Some(KeyAlgorithm::PS256) => Some(Algorithm::PS256),
        Some(KeyAlgorithm::ES256) => Some(Algorithm::ES256),
        Some(KeyAlgorithm::ES384) => Some(Algorithm::ES384),
        Some(_) => None,
        None => match &key.algorithm {
            AlgorithmParameters::RSA(_) => Some(Algorithm::RS256),
            AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => {
                Some(Algorithm::ES256)
            }
            AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P384 => {
                Some(Algorithm::ES384)
            }
            _ => None,
        },
    }
}

/// The public keys of a JWKS document (`{"keys": [...]}`); symmetric keys are not taken
/// from it (HS256 uses the secret).
fn parse_jwks(text: &str) -> Result<Vec<PublicKey>, JwtError> {
    let bad = |why: String| JwtError::new(ErrorKind::Settings, why);
    let set: JwkSet = serde_json::from_str(text).map_err(|e| bad(format!("not a JWKS: {e}")))?;
    let mut out = Vec::new();
    for (i, jwk) in set.keys.iter().enumerate() {
        let Some(algorithm) = algorithm_of(jwk) else {
            return Err(bad(format!(
                "JWKS key {i}: only RSA and EC (P-256, P-384) public keys are supported"
            )));
        };
        let key = DecodingKey::from_jwk(jwk).map_err(|e| bad(format!("JWKS key {i}: {e}")))?;
        out.push(PublicKey {
            kid: jwk.common.key_id.clone(),
            algorithm,
            key,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn jwks_keys() {
        let jwks = r#"{"keys": [{"kty": "EC", "crv": "P-256", "kid": "k1",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;
        let keys = parse_jwks(jwks).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].algorithm, Algorithm::ES256);
        assert_eq!(parse_jwks("{}").err().unwrap().kind, ErrorKind::Settings);
        assert!(parse_jwks(r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).is_err());
        let empty = Settings {
            secret: Some(String::new()),
            ..Settings::default()
        };
        assert_eq!(Keys::new(&empty).err().unwrap().kind, ErrorKind::Settings);
    }
}
