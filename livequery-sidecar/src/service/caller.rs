//! Who is calling: a bearer token, the admin key or a JWT, verified by the project's one JWT
//! verifier (the `docstore-jwt` crate, which SQL `docstore.authenticate` uses too:
//! docs/security.md): HS256 with the shared secret, or RS256/ES256 with a key of the JWKS
//! file or URL ([`super::jwks`]). A transport reads the token from its request
//! (`http/bearer.rs`: `Authorization: Bearer <token>`); no token is an unauthenticated caller
//! (claims `null`), not an error; a bad token is UNAUTHENTICATED.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use docstore_jwt::{ErrorKind, JwtError, Keys, Lifetime, Settings};
use serde_json::Value as Json;

use super::error::ServiceError;
use super::jwks::JwksUrl;
use crate::config::Config;

/// Clock skew allowed on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECONDS: u64 = docstore_jwt::DEFAULT_LEEWAY_SECONDS;

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

/// Verifies bearer tokens.
pub struct Verifier {
    admin_key: Option<Vec<u8>>,
    /// Secret, issuer, audience; the JWKS text of the file (the URL's replaces it).
    settings: Settings,
    /// The keys verified with; replaced when the JWKS URL is refetched.
    keys: RwLock<Arc<Keys>>,
    /// `--jwks-url`: refetched when a token names a `kid` the keys do not have.
    jwks_url: Option<JwksUrl>,
    /// Tokens verified before, by their exact text.
    verified: Mutex<HashMap<Box<str>, Verified>>,
}

/// A JWT that passed every check, remembered so that the next request with the same token
/// skips decoding and the signature (a client sends the same token for up to an hour; its
/// verification was about an eighth of the sidecar's CPU per JWT GET), as PostgREST's JWT
/// cache does. Exact: a token is remembered by its whole text, signature included; the
/// issuer and audience never change while the sidecar runs, and the memory is cleared when
/// the JWKS URL's keys change, so only the checks that depend on the time can change their
/// answer; [`Lifetime::check`] makes them again on every use, as for a token seen the first
/// time.
#[derive(Debug, Clone)]
struct Verified {
    claims: Json,
    lifetime: Lifetime,
}

/// Compare without an early exit, so the time taken does not tell how much of a guess of
/// the admin key was right (the length may show).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Seconds since 1970 (0 if the clock is before it).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Verifier {
    /// The verifier of a configuration (reads the JWKS file). With `--jwks-url` it has no
    /// public keys until [`Verifier::start`] fetches them.
    ///
    /// # Errors
    /// An unreadable or invalid JWKS file, an empty secret or admin key, a bad JWKS URL.
    pub fn from_config(config: &Config) -> Result<Verifier, String> {
        let jwks = match &config.jwks_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("--jwks-file {}: {e}", path.display()))?,
            ),
            None => None,
        };
        if config.jwt_secret.as_deref() == Some("") {
            return Err("--jwt-secret is empty".into());
        }
        if config.admin_key.as_deref() == Some("") {
            return Err("--admin-key is empty".into());
        }
        let settings = Settings {
            secret: config.jwt_secret.clone(),
            jwks,
            issuer: config.jwt_issuer.clone(),
            audience: config.jwt_audience.clone(),
            ..Settings::default()
        };
        let keys = Keys::new(&settings).map_err(|e| match &config.jwks_file {
            Some(path) if e.kind == ErrorKind::Settings => {
                format!("--jwks-file {}: {e}", path.display())
            }
            _ => e.to_string(),
        })?;
        let jwks_url = match &config.jwks_url {
            Some(url) => Some(JwksUrl::new(
                url,
                std::time::Duration::from_secs(config.jwks_refetch_seconds),
            )?),
            None => None,
        };
        Ok(Verifier {
            admin_key: config.admin_key.as_ref().map(|k| k.as_bytes().to_vec()),
            settings,
            keys: RwLock::new(Arc::new(keys)),
            jwks_url,
            verified: Mutex::default(),
        })
    }

    /// [`Verifier::from_config`], then the first fetch of the JWKS URL, if any.
    ///
    /// # Errors
    /// Those of [`Verifier::from_config`]; a JWKS URL that does not answer with a JWKS.
    pub async fn start(config: &Config) -> Result<Verifier, String> {
        let verifier = Verifier::from_config(config)?;
        if let Some(url) = &verifier.jwks_url {
            let text = url.fetch().await?;
            verifier
                .use_jwks(text)
                .map_err(|e| format!("--jwks-url {}: {e}", url.url()))?;
        }
        Ok(verifier)
    }

    /// Verify with the keys of this JWKS text from now on.
    fn use_jwks(&self, text: String) -> Result<(), JwtError> {
        let keys = Keys::new(&Settings {
            jwks: Some(text),
            ..self.settings.clone()
        })?;
        if let Ok(mut current) = self.keys.write() {
            *current = Arc::new(keys);
        }
        // A key the issuer dropped no longer verifies: forget what it verified.
        if let Ok(mut verified) = self.verified.lock() {
            verified.clear();
        }
        Ok(())
    }

    fn keys(&self) -> Option<Arc<Keys>> {
        self.keys.read().ok().map(|k| Arc::clone(&k))
    }

    /// The claims of `token` if it was verified before and is valid at `now`.
    fn remembered(&self, token: &str, now: u64) -> Option<Json> {
        let verified = self.verified.lock().ok()?;
        let entry = verified.get(token)?;
        entry
            .lifetime
            .check(now, LEEWAY_SECONDS)
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

    /// The claims of a JWT, verified with the keys in hand, remembered when valid.
    fn verify_jwt(&self, token: &str, now: u64) -> Result<Json, JwtError> {
        if let Some(claims) = self.remembered(token, now) {
            return Ok(claims);
        }
        let keys = self.keys().ok_or_else(|| JwtError {
            kind: ErrorKind::Invalid,
            message: "the token could not be verified".into(),
        })?;
        let claims = docstore_jwt::verify(token, &keys, now)?;
        if let Ok(lifetime) = Lifetime::of(&claims) {
            self.remember(
                token,
                Verified {
                    claims: claims.clone(),
                    lifetime,
                },
            );
        }
        Ok(claims)
    }

    fn is_admin(&self, token: &str) -> bool {
        self.admin_key
            .as_ref()
            .is_some_and(|admin| constant_time_eq(token.as_bytes(), admin))
    }

    /// The caller presenting `token` (a bearer token: the admin key or a JWT), verified with
    /// the keys in hand (no refetch of a JWKS URL: [`Verifier::verify`] does that).
    ///
    /// # Errors
    /// As [`Verifier::verify`].
    pub fn verify_offline(&self, token: &str) -> Result<Principal, ServiceError> {
        if self.is_admin(token) {
            return Ok(Principal::Admin);
        }
        self.verify_jwt(token, unix_now())
            .map(Principal::User)
            .map_err(|e| invalid_credentials(&e.message))
    }

    /// The caller presenting `token` (a bearer token: the admin key or a JWT). A JWT naming
    /// a `kid` the JWKS URL's keys do not have makes the sidecar refetch the URL (at most
    /// once per `--jwks-refetch-seconds`) and verify again: how issuers rotate their keys.
    ///
    /// # Errors
    /// UNAUTHENTICATED for a token that is not the admin key and not a valid JWT (bad
    /// signature, expired, not yet valid, wrong algorithm or key, wrong issuer or audience).
    pub async fn verify(&self, token: &str) -> Result<Principal, ServiceError> {
        if self.is_admin(token) {
            return Ok(Principal::Admin);
        }
        let error = match self.verify_jwt(token, unix_now()) {
            Ok(claims) => return Ok(Principal::User(claims)),
            Err(e) => e,
        };
        if let (ErrorKind::UnknownKid, Some(url)) = (error.kind, &self.jwks_url) {
            url.refetch(|fetched| match fetched.map(|text| self.use_jwks(text)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(url = %url.url(), error = %e,
                    "the JWKS URL's new keys are unusable; keeping the old ones"),
                Err(e) => tracing::warn!(error = %e, "cannot refetch the JWKS URL"),
            })
            .await;
            // Refetched now, or recently (maybe by a concurrent request): verify again with
            // the keys in hand.
            return self
                .verify_jwt(token, unix_now())
                .map(Principal::User)
                .map_err(|e| invalid_credentials(&e.message));
        }
        Err(invalid_credentials(&error.message))
    }
}

/// The refusal of a credential: UNAUTHENTICATED, saying `why`.
pub fn invalid_credentials(why: &str) -> ServiceError {
    ServiceError::unauthenticated(format!("invalid credentials: {why}"))
        .with_hint("send Authorization: Bearer <JWT> or the admin key, or no Authorization header")
}

#[cfg(test)]
mod tests {
    use super::*;
    use docstore_core::Code;
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};

    fn with(settings: Settings) -> Verifier {
        Verifier {
            admin_key: Some(b"admin-key".to_vec()),
            keys: RwLock::new(Arc::new(Keys::new(&settings).unwrap())),
            settings,
            jwks_url: None,
            verified: Mutex::default(),
        }
    }

    fn verifier() -> Verifier {
        with(Settings {
            secret: Some("secret".into()),
            ..Settings::default()
        })
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
        assert_eq!(v.verify_offline("admin-key").unwrap(), Principal::Admin);
        let claims =
            serde_json::json!({"sub": "u1", "exp": now() + 600, "n": 12345678901234567890u64});
        let t = token(claims.clone(), b"secret");
        assert_eq!(v.verify_offline(&t).unwrap(), Principal::User(claims));
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
            let e = v.verify_offline(&value).unwrap_err();
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
            let e = v.verify_offline(t).unwrap_err();
            assert!(e.message.contains(why), "{why}: {e:?}");
        }
        assert_eq!(remembered_count(&v), 0);
    }

    #[test]
    fn issuer_and_audience_are_checked_when_set() {
        let v = with(Settings {
            secret: Some("secret".into()),
            issuer: Some("me".into()),
            audience: Some("app".into()),
            ..Settings::default()
        });
        let ok = token(
            serde_json::json!({"exp": now() + 600, "iss": "me", "aud": "app"}),
            b"secret",
        );
        assert!(v.verify_offline(&ok).is_ok());
        for claims in [
            serde_json::json!({"exp": now() + 600, "iss": "you", "aud": "app"}),
            serde_json::json!({"exp": now() + 600, "iss": "me", "aud": "other"}),
            serde_json::json!({"exp": now() + 600, "aud": "app"}),
        ] {
            let t = token(claims, b"secret");
            assert!(v.verify_offline(&t).is_err());
        }
        // Without a configured audience, a token's aud is accepted as it is.
        let v = verifier();
        let t = token(
            serde_json::json!({"exp": now() + 600, "aud": "x"}),
            b"secret",
        );
        assert!(v.verify_offline(&t).is_ok());
    }

    fn remembered_count(v: &Verifier) -> usize {
        v.verified.lock().unwrap().len()
    }

    #[test]
    fn verified_tokens_are_remembered_exactly() {
        let v = verifier();
        let exp = now() + 600;
        let good = token(serde_json::json!({"sub": "u1", "exp": exp}), b"secret");
        let user = v.verify_offline(&good).unwrap();
        assert_eq!(remembered_count(&v), 1);
        assert_eq!(v.verify_offline(&good).unwrap(), user);
        // Another signature over the same claims is a different token: verified in full.
        let mut tampered = good.clone();
        tampered.pop();
        tampered.push(if good.ends_with('A') { 'B' } else { 'A' });
        let e = v.verify_offline(&tampered).unwrap_err();
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
        assert!(v.verify_offline(&early).is_ok());
        assert!(v.remembered(&early, nbf - LEEWAY_SECONDS).is_some());
        assert!(v.remembered(&early, nbf - LEEWAY_SECONDS - 1).is_none());
        // A fractional exp (a NumericDate may be one) is checked and remembered the same way.
        let float = token(serde_json::json!({"exp": now() as f64 + 600.5}), b"secret");
        assert!(v.verify_offline(&float).is_ok());
        assert_eq!(remembered_count(&v), 3);
        assert!(v.verify_offline(&float).is_ok());
    }

    #[test]
    fn a_remembered_token_expires() {
        let v = verifier();
        // Valid for two more seconds (the leeway included), then expired.
        let t = token(
            serde_json::json!({"exp": now() - LEEWAY_SECONDS as i64 + 2}),
            b"secret",
        );
        assert!(v.verify_offline(&t).is_ok());
        assert_eq!(remembered_count(&v), 1);
        std::thread::sleep(std::time::Duration::from_millis(3100));
        let e = v.verify_offline(&t).unwrap_err();
        assert_eq!(e.code, Code::Unauthenticated);
        assert!(e.message.contains("expired"), "{e:?}");
    }

    #[test]
    fn remembered_tokens_are_bounded() {
        let v = verifier();
        for i in 0..=VERIFIED_TOKENS {
            let t = token(serde_json::json!({"exp": now() + 600, "i": i}), b"secret");
            assert!(v.verify_offline(&t).is_ok());
        }
        assert!(remembered_count(&v) <= VERIFIED_TOKENS);
        assert!(remembered_count(&v) >= 1);
    }

    /// Every case of the shared token table (tests/vectors/jwt.json), through the
    /// sidecar's verifier and its cache: accepted with the claims, or UNAUTHENTICATED.
    #[test]
    fn the_shared_token_table() {
        let now = unix_now();
        for case in docstore_jwt::vectors::cases(now).unwrap() {
            let v = with(case.settings.clone());
            let got = v.verify_offline(&case.token);
            let want = docstore_jwt::verify(&case.token, &Keys::new(&case.settings).unwrap(), now);
            match (got, case.expect.as_str()) {
                (Ok(Principal::User(claims)), "ok") => assert_eq!(Ok(claims), want),
                (Err(e), expect) if expect != "ok" => {
                    assert_eq!(e.code, Code::Unauthenticated, "{}", case.name);
                    if let Err(why) = want {
                        assert_eq!(why.kind.name(), expect, "{}", case.name);
                        if !case.token.is_empty() {
                            assert!(e.message.contains(&why.message), "{}: {e:?}", case.name);
                        }
                    }
                    assert_eq!(remembered_count(&v), 0, "{}", case.name);
                }
                (got, expect) => panic!("{}: expected {expect}, got {got:?}", case.name),
            }
        }
    }

    fn rsa_or_ec_token(kid: &str, key: &str) -> String {
        let table: Json = serde_json::from_str(docstore_jwt::vectors::TEXT).unwrap();
        let pem = table["keys"][key]["private_pem"]
            .as_str()
            .unwrap()
            .as_bytes();
        let (algorithm, key) = if key.starts_with("ec") {
            (Algorithm::ES256, EncodingKey::from_ec_pem(pem).unwrap())
        } else {
            (Algorithm::RS256, EncodingKey::from_rsa_pem(pem).unwrap())
        };
        let mut header = Header::new(algorithm);
        header.kid = Some(kid.into());
        let claims = serde_json::json!({"sub": kid, "exp": now() + 600});
        encode(&header, &claims, &key).unwrap()
    }

    /// An issuer that rotates its keys: a local HTTP server answering its first request
    /// with the JWKS of kid "a", the second with kid "b", every later one with kid "c".
    async fn rotating_issuer() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let table: Json = serde_json::from_str(docstore_jwt::vectors::TEXT).unwrap();
        let set = |key: &str, kid: &str| {
            let mut jwk = table["keys"][key]["jwk"].clone();
            jwk["kid"] = kid.into();
            serde_json::json!({ "keys": [jwk] }).to_string()
        };
        let sets = [set("rsa1", "a"), set("rsa2", "b"), set("ec1", "c")];
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        let served = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&served);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let n = count.fetch_add(1, Ordering::SeqCst);
                let body = &sets[n.min(sets.len() - 1)];
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
        (url, served)
    }

    #[tokio::test]
    async fn a_jwks_url_is_refetched_for_an_unknown_kid_at_most_once_per_interval() {
        use clap::Parser;
        use std::sync::atomic::Ordering;
        let (url, served) = rotating_issuer().await;
        let config = Config::try_parse_from([
            "docstore-sidecar",
            "--jwks-url",
            &url,
            "--jwks-refetch-seconds",
            "3600",
        ])
        .unwrap();
        let v = Verifier::start(&config).await.unwrap();
        assert_eq!(served.load(Ordering::SeqCst), 1);
        let a = rsa_or_ec_token("a", "rsa1");
        assert!(v.verify(&a).await.is_ok());
        // The issuer rotated to kid "b": the first token naming it makes the sidecar refetch.
        let b = rsa_or_ec_token("b", "rsa2");
        let user = v.verify(&b).await.unwrap();
        assert!(
            matches!(&user, Principal::User(c) if c["sub"] == "b"),
            "{user:?}"
        );
        assert_eq!(served.load(Ordering::SeqCst), 2);
        // The dropped key no longer verifies, even a token verified (and remembered) before.
        let e = v.verify(&a).await.unwrap_err();
        assert_eq!(e.code, Code::Unauthenticated);
        // Kid "c" would be served next, but within the interval nothing is fetched: 401.
        let c = rsa_or_ec_token("c", "ec1");
        let e = v.verify(&c).await.unwrap_err();
        assert_eq!(e.code, Code::Unauthenticated);
        assert!(e.message.contains("kid \"c\""), "{e:?}");
        assert_eq!(served.load(Ordering::SeqCst), 2);
        assert!(v.verify(&b).await.is_ok());
    }
}
