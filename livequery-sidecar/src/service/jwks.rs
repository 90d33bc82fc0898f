//! `--jwks-url`: the issuer's JSON Web Key Set, fetched at start and refetched when a token
//! names a `kid` the keys in hand do not have (how Firebase Auth, Auth0 and Supabase rotate
//! their keys), at most once per `--jwks-refetch-seconds` so that a flood of tokens with
//! made-up `kid`s cannot make the sidecar hammer the issuer. The verifier
//! ([`super::caller::Verifier`]) uses it whatever the transport of the request; the fetch is
//! the sidecar's own HTTP client, not a transport of its API.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::{header, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Largest JWKS document read (a real one is a few KiB).
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// How long one fetch may take, connection included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// A JWKS URL and when it was last refetched.
pub struct JwksUrl {
    url: Uri,
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    min_interval: Duration,
    /// When the last refetch started; held during a refetch, so concurrent requests with
    /// the new `kid` wait for it rather than fetching again.
    last_refetch: tokio::sync::Mutex<Option<Instant>>,
}

impl JwksUrl {
    /// A JWKS URL (`https://...`, or `http://...` for an issuer on a trusted network),
    /// refetched at most once per `min_interval`.
    ///
    /// # Errors
    /// A URL that is not http(s), or no TLS configuration.
    pub fn new(url: &str, min_interval: Duration) -> Result<JwksUrl, String> {
        let bad = |why: String| format!("--jwks-url {url}: {why}");
        let uri: Uri = url.parse().map_err(|e| bad(format!("{e}")))?;
        if !matches!(uri.scheme_str(), Some("https" | "http")) || uri.host().is_none() {
            return Err(bad("expected an https:// (or http://) URL".into()));
        }
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| bad(format!("TLS: {e}")))?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(JwksUrl {
            url: uri,
            client: Client::builder(TokioExecutor::new()).build(connector),
            min_interval,
            last_refetch: tokio::sync::Mutex::new(None),
        })
    }

    /// The URL.
    pub fn url(&self) -> &Uri {
        &self.url
    }

    /// The JWKS text the URL serves now.
    ///
    /// # Errors
    /// No answer within [`FETCH_TIMEOUT`], a status other than 200, a body over
    /// [`MAX_JWKS_BYTES`] or not UTF-8.
    pub async fn fetch(&self) -> Result<String, String> {
        let url = &self.url;
        let request = Request::get(url.clone())
            .header(header::ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("--jwks-url {url}: {e}"))?;
        let fetch = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("--jwks-url {url}: {e}"))?;
            if response.status() != StatusCode::OK {
                return Err(format!("--jwks-url {url}: answered {}", response.status()));
            }
            let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
                .collect()
                .await
                .map_err(|e| format!("--jwks-url {url}: {e}"))?
                .to_bytes();
            String::from_utf8(body.to_vec()).map_err(|_| format!("--jwks-url {url}: not UTF-8"))
        };
        tokio::time::timeout(FETCH_TIMEOUT, fetch)
            .await
            .map_err(|_| format!("--jwks-url {url}: no answer within {FETCH_TIMEOUT:?}"))?
    }

    /// Refetch and hand the result to `apply`, unless a refetch started less than the
    /// interval ago (then false: the keys in hand are the newest there will be for now).
    /// `apply` runs before any concurrent caller's refetch returns, so they verify with
    /// the new keys.
    pub async fn refetch(&self, apply: impl FnOnce(Result<String, String>)) -> bool {
        let mut last = self.last_refetch.lock().await;
        if last.is_some_and(|at| at.elapsed() < self.min_interval) {
            return false;
        }
        *last = Some(Instant::now());
        apply(self.fetch().await);
        true
    }
}
