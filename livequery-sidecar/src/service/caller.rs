//! Who is calling: a bearer token, the admin key or a JWT (HS256 with the shared secret, or
//! RS256/ES256 with a key of the JWKS file). A transport reads the token from its request
//! (`http/bearer.rs`: `Authorization: Bearer <token>`); no token is an unauthenticated caller
//! (claims `null`), not an error; a bad token is UNAUTHENTICATED.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm};
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde_json::Value as Json;

use super::error::ServiceError;
use crate::config::Config;

/// Clock skew allowed on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECONDS: u64 = 30;

/// How many verified JWTs [`Verifier`] remembers (see [`Verified`]); past this it starts over.
pub const VERIFIED_TOKENS: usize = 4096;

/// The caller of a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Principal {
    /// The admin key: runs as the sidecar's own role, bypasses rules.
    Admin,
    /// No credential (no `Authorization` header).
    Anonymous,
    /// A verified JWT's claims.
    User(Json),
}

impl Principal {
    /// `docstore.auth`: the claims as JSON text, `null` when unauthenticated.
    pub fn auth_json(&self) -> String {
        match self {
            Principal::User(claims) => claims.to_string(),
            Principal::Admin | Principal::Anonymous => "null".to_owned(),
        }
    }
}

/// Who calls one operation, as its transport established it.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    pub principal: Principal,
    /// The rules' `request.httpMethod`: the request's HTTP method, or the name another
    /// transport gives its call.
    pub method: String,
    /// The client's address, when the transport knows it (the per-caller stream cap of an
    /// anonymous caller).
    pub peer: Option<std::net::IpAddr>,
}

/// A public key of the JWKS file.
struct PublicKey {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

/// Verifies bearer tokens.
pub struct Verifier {
    admin_key: Option<Vec<u8>>,
    secret: Option<DecodingKey>,
    keys: Vec<PublicKey>,
    issuer: Option<String>,
    audience: Option<String>,
    /// Tokens verified before, by their exact text.
    verified: Mutex<HashMap<Box<str>, Verified>>,
}

/// A JWT that passed every check, remembered so that the next request with the same token
/// skips decoding and the signature (a client sends the same token for up to an hour; its
/// verification was about an eighth of the sidecar's CPU per JWT GET), as PostgREST's JWT
/// cache does. Exact: a token is remembered by its whole text, signature included, and the
/// verifier's keys, issuer and audience never change while it runs, so only the checks that
/// depend on the time can change their answer; [`Lifetime::check`] makes them again on every
/// use, as for a token seen the first time.
#[derive(Debug, Clone)]
struct Verified {
    claims: Json,
    lifetime: Lifetime,
}

/// A token's `exp` (required) and `nbf`: NumericDates (RFC 7519), seconds since the epoch,
/// integer or fractional. Checked here rather than by jsonwebtoken, which reads the claims
/// with the workspace's serde_json `arbitrary_precision` and then refuses a fractional one.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Lifetime {
    exp: f64,
    nbf: Option<f64>,
}

impl Lifetime {
    /// # Errors
    /// Why the claims have no usable lifetime: `exp` missing, or `exp`/`nbf` not a number.
    fn of(claims: &Json) -> Result<Lifetime, &'static str> {
        let date = |key: &str| match claims.get(key) {
            None => Ok(None),
            Some(value) => value
                .as_f64()
                .filter(|f| f.is_finite())
                .map(Some)
                .ok_or("exp and nbf must be numbers of seconds (NumericDate)"),
        };
        Ok(Lifetime {
            exp: date("exp")?.ok_or("a required claim (exp, iss or aud) is missing")?,
            nbf: date("nbf")?,
        })
    }

    /// Whether the token is valid at `now` (Unix seconds), with [`LEEWAY_SECONDS`] either way:
    /// expired when `exp` < now - leeway, not yet valid when `nbf` > now + leeway (the
    /// comparisons jsonwebtoken makes).
    ///
    /// # Errors
    /// Why it is not.
    fn check(&self, now: u64) -> Result<(), &'static str> {
        #[allow(clippy::cast_precision_loss)] // seconds since 1970 fit an f64 exactly
        let (now, leeway) = (now as f64, LEEWAY_SECONDS as f64);
        if self.exp < now - leeway {
            return Err("the token has expired");
        }
        if self.nbf.is_some_and(|nbf| nbf > now + leeway) {
            return Err("the token is not valid yet (nbf)");
        }
        Ok(())
    }
}

/// Compare without an early exit, so the time taken does not tell how much of a guess of
/// the admin key was right (the length may show).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn algorithm_of(key: &jsonwebtoken::jwk::Jwk) -> Option<Algorithm> {
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
/// from it (HS256 uses `--jwt-secret`).
///
/// # Errors
/// Text that is not a JWKS, or a key that cannot be used.
pub fn parse_jwks(text: &str) -> Result<Vec<(Option<String>, Algorithm, DecodingKey)>, String> {
    let set: JwkSet = serde_json::from_str(text).map_err(|e| format!("not a JWKS: {e}"))?;
    let mut out = Vec::new();
    for (i, jwk) in set.keys.iter().enumerate() {
        let Some(algorithm) = algorithm_of(jwk) else {
            return Err(format!(
                "key {i}: only RSA and EC (P-256, P-384) public keys are supported"
            ));
        };
        let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("key {i}: {e}"))?;
        out.push((jwk.common.key_id.clone(), algorithm, key));
    }
    Ok(out)
}

impl Verifier {
    /// The verifier of a configuration (reads the JWKS file).
    ///
    /// # Errors
    /// An unreadable or invalid JWKS file, an empty secret or admin key.
    pub fn from_config(config: &Config) -> Result<Verifier, String> {
        let keys = match &config.jwks_file {
            Some(path) => read_jwks(path)?,
            None => Vec::new(),
        };
        if config.jwt_secret.as_deref() == Some("") {
            return Err("--jwt-secret is empty".into());
        }
        if config.admin_key.as_deref() == Some("") {
            return Err("--admin-key is empty".into());
        }
        Ok(Verifier {
            admin_key: config.admin_key.as_ref().map(|k| k.as_bytes().to_vec()),
            secret: config
                .jwt_secret
                .as_ref()
                .map(|s| DecodingKey::from_secret(s.as_bytes())),
            keys,
            issuer: config.jwt_issuer.clone(),
            audience: config.jwt_audience.clone(),
            verified: Mutex::default(),
        })
    }

    /// The claims of `token` if it was verified before and is valid at `now`.
    fn remembered(&self, token: &str, now: u64) -> Option<Json> {
        let verified = self.verified.lock().ok()?;
        let entry = verified.get(token)?;
        entry
            .lifetime
            .check(now)
            .is_ok()
            .then(|| entry.claims.clone())
    }

    fn remember(&self, token: &str, entry: Verified) {
        if let Ok(mut verified) = self.verified.lock() {
            if verified.len() >= VERIFIED_TOKENS {
                verified.clear();
            }
            verified.insert(token.into(), entry);
        }
    }

    fn validation(&self, algorithm: Algorithm) -> Validation {
        let mut v = Validation::new(algorithm);
        // exp and nbf: [`Lifetime`], after the signature.
        v.validate_exp = false;
        v.validate_nbf = false;
        let mut required = Vec::new();
        if let Some(iss) = &self.issuer {
            v.set_issuer(&[iss]);
            required.push("iss");
        }
        match &self.audience {
            Some(aud) => {
                v.set_audience(&[aud]);
                required.push("aud");
            }
            None => v.validate_aud = false,
        }
        v.set_required_spec_claims(&required);
        v
    }

    /// The caller presenting `token` (a bearer token: the admin key or a JWT).
    ///
    /// # Errors
    /// UNAUTHENTICATED for a token that is not the admin key and not a valid JWT (bad
    /// signature, expired, not yet valid, wrong algorithm or key, wrong issuer or audience).
    pub fn verify(&self, token: &str) -> Result<Principal, ServiceError> {
        let bad = invalid_credentials;
        if let Some(admin) = &self.admin_key {
            if constant_time_eq(token.as_bytes(), admin) {
                return Ok(Principal::Admin);
            }
        }
        let now = jsonwebtoken::get_current_timestamp();
        if let Some(claims) = self.remembered(token, now) {
            return Ok(Principal::User(claims));
        }
        let header = decode_header(token).map_err(|_| bad("the token is not a JWT"))?;
        let candidates: Vec<(&DecodingKey, Algorithm)> = match header.alg {
            Algorithm::HS256 => self.secret.iter().map(|k| (k, Algorithm::HS256)).collect(),
            alg => self
                .keys
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
            return Err(bad(&format!(
                "no key of this sidecar verifies {:?} tokens{}",
                header.alg,
                header
                    .kid
                    .as_deref()
                    .map(|k| format!(" with kid \"{k}\""))
                    .unwrap_or_default()
            )));
        }
        let mut last = None;
        for (key, algorithm) in candidates {
            match decode::<Json>(token, key, &self.validation(algorithm)) {
                Ok(data) => {
                    let lifetime = Lifetime::of(&data.claims).map_err(bad)?;
                    lifetime.check(now).map_err(bad)?;
                    self.remember(
                        token,
                        Verified {
                            claims: data.claims.clone(),
                            lifetime,
                        },
                    );
                    return Ok(Principal::User(data.claims));
                }
                Err(e) => last = Some(e),
            }
        }
        // Expiry and nbf are [`Lifetime`]'s, checked above once the signature holds.
        let why = match last.as_ref().map(|e| e.kind()) {
            Some(jsonwebtoken::errors::ErrorKind::InvalidIssuer) => "wrong issuer (iss)",
            Some(jsonwebtoken::errors::ErrorKind::InvalidAudience) => "wrong audience (aud)",
            Some(jsonwebtoken::errors::ErrorKind::MissingRequiredClaim(_)) => {
                "a required claim (exp, iss or aud) is missing"
            }
            Some(jsonwebtoken::errors::ErrorKind::InvalidSignature) => "bad signature",
            _ => "the token could not be verified",
        };
        Err(bad(why))
    }
}

/// The refusal of a credential: UNAUTHENTICATED, saying `why`.
pub fn invalid_credentials(why: &str) -> ServiceError {
    ServiceError::unauthenticated(format!("invalid credentials: {why}"))
        .with_hint("send Authorization: Bearer <JWT> or the admin key, or no Authorization header")
}

fn read_jwks(path: &Path) -> Result<Vec<PublicKey>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--jwks-file {}: {e}", path.display()))?;
    let keys = parse_jwks(&text).map_err(|e| format!("--jwks-file {}: {e}", path.display()))?;
    Ok(keys
        .into_iter()
        .map(|(kid, algorithm, key)| PublicKey {
            kid,
            algorithm,
            key,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use docstore_core::Code;
    use jsonwebtoken::{encode, EncodingKey, Header};

    fn verifier() -> Verifier {
        Verifier {
            admin_key: Some(b"admin-key".to_vec()),
            secret: Some(DecodingKey::from_secret(b"secret")),
            keys: Vec::new(),
            issuer: None,
            audience: None,
            verified: Mutex::default(),
        }
    }

    fn now() -> i64 {
        jsonwebtoken::get_current_timestamp() as i64
    }

    fn token(claims: Json, secret: &[u8]) -> String {
        encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(secret),
        )
        .unwrap()
    }

    #[test]
    fn admin_and_user() {
        let v = verifier();
        assert_eq!(v.verify("admin-key").unwrap(), Principal::Admin);
        let claims =
            serde_json::json!({"sub": "u1", "exp": now() + 600, "n": 12345678901234567890u64});
        let t = token(claims.clone(), b"secret");
        assert_eq!(v.verify(&t).unwrap(), Principal::User(claims));
    }

    #[test]
    fn bad_tokens_are_401() {
        let v = verifier();
        let expired = token(serde_json::json!({"exp": now() - 3600}), b"secret");
        let future = token(
            serde_json::json!({"exp": now() + 7200, "nbf": now() + 3600}),
            b"secret",
        );
        let wrong_key = token(serde_json::json!({"exp": now() + 600}), b"other");
        let no_exp = token(serde_json::json!({"sub": "x"}), b"secret");
        let text_exp = token(
            serde_json::json!({"exp": (now() + 600).to_string()}),
            b"secret",
        );
        let expired_float = token(serde_json::json!({"exp": now() as f64 - 3600.5}), b"secret");
        let future_float = token(
            serde_json::json!({"exp": now() + 7200, "nbf": now() as f64 + 3600.5}),
            b"secret",
        );
        let good = token(serde_json::json!({"exp": now() + 600}), b"secret");
        let mut tampered = good.clone();
        tampered.pop();
        tampered.push(if good.ends_with('A') { 'B' } else { 'A' });
        for value in [
            expired.clone(),
            future.clone(),
            wrong_key,
            no_exp.clone(),
            text_exp.clone(),
            expired_float.clone(),
            future_float.clone(),
            tampered,
            "admin-keyx".into(),
            "a.b.c".into(),
        ] {
            let e = v.verify(&value).unwrap_err();
            assert_eq!(e.code, Code::Unauthenticated, "{value}");
        }
        for (t, why) in [
            (&expired, "expired"),
            (&expired_float, "expired"),
            (&future, "not valid yet"),
            (&future_float, "not valid yet"),
            (&no_exp, "missing"),
            (&text_exp, "NumericDate"),
        ] {
            let e = v.verify(t).unwrap_err();
            assert!(e.message.contains(why), "{why}: {e:?}");
        }
        assert_eq!(remembered_count(&v), 0);
    }

    #[test]
    fn issuer_and_audience_are_checked_when_set() {
        let mut v = verifier();
        v.issuer = Some("me".into());
        v.audience = Some("app".into());
        let ok = token(
            serde_json::json!({"exp": now() + 600, "iss": "me", "aud": "app"}),
            b"secret",
        );
        assert!(v.verify(&ok).is_ok());
        for claims in [
            serde_json::json!({"exp": now() + 600, "iss": "you", "aud": "app"}),
            serde_json::json!({"exp": now() + 600, "iss": "me", "aud": "other"}),
            serde_json::json!({"exp": now() + 600, "aud": "app"}),
        ] {
            let t = token(claims, b"secret");
            assert!(v.verify(&t).is_err());
        }
        // Without a configured audience, a token's aud is accepted as it is.
        let v = verifier();
        let t = token(
            serde_json::json!({"exp": now() + 600, "aud": "x"}),
            b"secret",
        );
        assert!(v.verify(&t).is_ok());
    }

    fn remembered_count(v: &Verifier) -> usize {
        v.verified.lock().unwrap().len()
    }

    #[test]
    fn verified_tokens_are_remembered_exactly() {
        let v = verifier();
        let exp = now() + 600;
        let good = token(serde_json::json!({"sub": "u1", "exp": exp}), b"secret");
        let user = v.verify(&good).unwrap();
        assert_eq!(remembered_count(&v), 1);
        assert_eq!(v.verify(&good).unwrap(), user);
        // Another signature over the same claims is a different token: verified in full.
        let mut tampered = good.clone();
        tampered.pop();
        tampered.push(if good.ends_with('A') { 'B' } else { 'A' });
        let e = v.verify(&tampered).unwrap_err();
        assert_eq!(e.code, Code::Unauthenticated);
        // The time checks are made again on every use, with jsonwebtoken's leeway.
        let exp = u64::try_from(exp).unwrap();
        assert!(v.remembered(&good, exp + LEEWAY_SECONDS).is_some());
        assert!(v.remembered(&good, exp + LEEWAY_SECONDS + 1).is_none());
        let nbf = u64::try_from(now() - 10).unwrap();
        let early = token(
            serde_json::json!({"exp": now() + 600, "nbf": nbf}),
            b"secret",
        );
        assert!(v.verify(&early).is_ok());
        assert!(v.remembered(&early, nbf - LEEWAY_SECONDS).is_some());
        assert!(v.remembered(&early, nbf - LEEWAY_SECONDS - 1).is_none());
        // A fractional exp (a NumericDate may be one) is checked and remembered the same way.
        let float = token(serde_json::json!({"exp": now() as f64 + 600.5}), b"secret");
        assert!(v.verify(&float).is_ok());
        assert_eq!(remembered_count(&v), 3);
        assert!(v.verify(&float).is_ok());
    }

    #[test]
    fn a_remembered_token_expires() {
        let v = verifier();
        // Valid for two more seconds (the leeway included), then expired.
        let t = token(
            serde_json::json!({"exp": now() - LEEWAY_SECONDS as i64 + 2}),
            b"secret",
        );
        assert!(v.verify(&t).is_ok());
        assert_eq!(remembered_count(&v), 1);
        std::thread::sleep(std::time::Duration::from_millis(3100));
        let e = v.verify(&t).unwrap_err();
        assert_eq!(e.code, Code::Unauthenticated);
        assert!(e.message.contains("expired"), "{e:?}");
    }

    #[test]
    fn remembered_tokens_are_bounded() {
        let v = verifier();
        for i in 0..=VERIFIED_TOKENS {
            let t = token(serde_json::json!({"exp": now() + 600, "i": i}), b"secret");
            assert!(v.verify(&t).is_ok());
        }
        assert!(remembered_count(&v) <= VERIFIED_TOKENS);
        assert!(remembered_count(&v) >= 1);
    }

    #[test]
    fn jwks_keys() {
        let jwks = r#"{"keys": [{"kty": "EC", "crv": "P-256", "kid": "k1",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;
        let keys = parse_jwks(jwks).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].1, Algorithm::ES256);
        assert!(parse_jwks("{}").is_err());
        assert!(parse_jwks(r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).is_err());
    }
}
