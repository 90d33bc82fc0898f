//! TLS to Postgres (rustls): libpq's `sslmode` and `sslrootcert` in `--database-url`, for
//! every connection the sidecar opens (the pool, the shared connections, the slot's SQL
//! connections, the replication connection: docs/http.md, "Connecting to Postgres").
//!
//! tokio-postgres knows `sslmode=disable|prefer|require` only and no `sslrootcert`, so
//! [`Postgres::parse`] takes both out of the URL, hands tokio-postgres `disable`, `prefer` or
//! `require`, and keeps the verification to [`Tls`], the connector every connection is made
//! with:
//! - `disable`: no TLS; `prefer` (libpq's default): TLS when the server offers it, the
//!   certificate not checked; `require`: TLS or no connection, the certificate not checked;
//! - `verify-ca`: TLS, the server's chain checked against `sslrootcert`'s CAs;
//! - `verify-full`: as `verify-ca`, and the certificate must name the host of the URL.
//!
//! `verify-ca` and `verify-full` need `sslrootcert` (a PEM file): there is no default.

use std::fmt;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// libpq's `sslmode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<SslMode, String> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            // `allow` (plain first, TLS if refused) is not offered: prefer is safer.
            other => {
                return Err(format!(
                "--database-url: sslmode={other} is not one of disable, prefer, require, verify-ca, verify-full"
            ))
            }
        })
    }

    /// The name libpq and the replication client use.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// A database to connect to: tokio-postgres's settings and the TLS connector they go with.
#[derive(Clone, Debug)]
pub struct Postgres {
    pub config: tokio_postgres::Config,
    pub tls: Tls,
}

impl Postgres {
    /// `--database-url` (a `postgresql://` URL or libpq's `key=value` form).
    ///
    /// # Errors
    /// The URL's problem as text: a bad `sslmode`, `verify-*` without `sslrootcert`, a CA
    /// file that cannot be read or holds no certificate, or what tokio-postgres refuses.
    pub fn parse(url: &str) -> Result<Postgres, String> {
        let (rest, mode, root_cert) = split_tls(url)?;
        let mut config: tokio_postgres::Config =
            rest.parse().map_err(|e| format!("--database-url: {e}"))?;
        let mode = mode.unwrap_or(SslMode::Prefer);
        config.ssl_mode(match mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        });
        Ok(Postgres {
            config,
            tls: Tls::new(mode, root_cert)?,
        })
    }

    /// What the replication connection cannot do with these settings: pgwire-replication
    /// checks `verify-full` against a DNS name only, and refuses an IP address host.
    ///
    /// # Errors
    /// The problem and its fix, as text.
    pub fn check_replication(&self) -> Result<(), String> {
        if self.tls.mode != SslMode::VerifyFull {
            return Ok(());
        }
        for host in self.config.get_hosts() {
            if let tokio_postgres::config::Host::Tcp(name) = host {
                if name.parse::<std::net::IpAddr>().is_ok() {
                    return Err(format!(
                        "--database-url: sslmode=verify-full with the IP address {name}: the replication \
                         connection of live queries checks the certificate against a DNS name only; \
                         use the host name the certificate names, or sslmode=verify-ca"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Plain settings without TLS (tests, and callers that built a `Config` themselves).
    pub fn plain(mut config: tokio_postgres::Config) -> Postgres {
        config.ssl_mode(tokio_postgres::config::SslMode::Disable);
        let tls = Tls {
            mode: SslMode::Disable,
            root_cert: None,
            client: Arc::new(no_verification_config()),
        };
        Postgres { config, tls }
    }

    /// Open a connection (spawn the returned connection future).
    ///
    /// # Errors
    /// As tokio-postgres's `connect`; a refused certificate is an error of the TLS handshake
    /// naming rustls' reason.
    pub async fn connect(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio_postgres::Connection<
                tokio_postgres::Socket,
                RustlsStream<tokio_postgres::Socket>,
            >,
        ),
        tokio_postgres::Error,
    > {
        self.config.connect(self.tls.clone()).await
    }
}

/// The TLS side of a [`Postgres`]: its mode, CA file, and the rustls client made of them.
#[derive(Clone)]
pub struct Tls {
    pub mode: SslMode,
    pub root_cert: Option<PathBuf>,
    client: Arc<ClientConfig>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("mode", &self.mode)
            .field("root_cert", &self.root_cert)
            .finish_non_exhaustive()
    }
}

impl Tls {
    fn new(mode: SslMode, root_cert: Option<PathBuf>) -> Result<Tls, String> {
        let client = match mode {
            SslMode::Disable | SslMode::Prefer | SslMode::Require => no_verification_config(),
            SslMode::VerifyCa | SslMode::VerifyFull => {
                let path = root_cert.as_ref().ok_or_else(|| {
                    format!(
                        "--database-url: sslmode={} needs sslrootcert=<file of the CA certificates, PEM>",
                        mode.name()
                    )
                })?;
                let roots = read_roots(path)?;
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| format!("--database-url: sslrootcert {}: {e}", path.display()))?;
                let verifier: Arc<dyn ServerCertVerifier> = if mode == SslMode::VerifyCa {
                    Arc::new(ChainOnly(webpki))
                } else {
                    webpki
                };
                builder()
                    .dangerous()
                    .with_custom_certificate_verifier(verifier)
                    .with_no_client_auth()
            }
        };
        Ok(Tls {
            mode,
            root_cert,
            client: Arc::new(client),
        })
    }
}

fn builder() -> rustls::ConfigBuilder<ClientConfig, rustls::WantsVerifier> {
    // The ring provider named, not the process default (none is installed). Its safe default
    // protocol versions cannot be refused by the provider that defines them.
    ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|_| ClientConfig::builder_with_protocol_versions(rustls::DEFAULT_VERSIONS))
}

/// TLS without checking the certificate (`prefer`, `require`, as libpq without a CA file).
fn no_verification_config() -> ClientConfig {
    builder()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerification(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))))
        .with_no_client_auth()
}

/// The certificates of the PEM file `path`.
fn read_roots(path: &PathBuf) -> Result<RootCertStore, String> {
    let what =
        |e: &dyn fmt::Display| format!("--database-url: sslrootcert {}: {e}", path.display());
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| what(&e))? {
        roots
            .add(cert.map_err(|e| what(&e))?)
            .map_err(|e| what(&e))?;
    }
    if roots.is_empty() {
        return Err(what(&"the file holds no certificate"));
    }
    Ok(roots)
}

/// `sslmode` and `sslrootcert` taken out of a URL or `key=value` string: the rest, and both.
fn split_tls(url: &str) -> Result<(String, Option<SslMode>, Option<PathBuf>), String> {
    let mut mode = None;
    let mut root = None;
    let mut take = |key: &str, value: String| -> Result<bool, String> {
        match key {
            "sslmode" => mode = Some(SslMode::parse(&value)?),
            "sslrootcert" => root = Some(PathBuf::from(value)),
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_owned(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    if !take(key, percent_decode(value))? {
                        kept.push(pair);
                    }
                }
                if kept.is_empty() {
                    base.to_owned()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        let mut kept = Vec::new();
        for (key, value, text) in key_values(url)? {
            if !take(&key, value)? {
                kept.push(text);
            }
        }
        kept.join(" ")
    };
    Ok((rest, mode, root))
}

/// `%XX` escapes of a URL query value decoded (as tokio-postgres decodes the others).
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push(((hex(h).unwrap_or(0) << 4) | hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `key=value` pairs of libpq's keyword form: (key, unquoted value, the pair's text).
fn key_values(text: &str) -> Result<Vec<(String, String, String)>, String> {
    let mut pairs = Vec::new();
    let mut chars = text.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            return Err(format!(
                "--database-url: \"{key}\" has no value (key=value expected)"
            ));
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next() {
                    Some((_, '\\')) => {
                        if let Some((_, c)) = chars.next() {
                            value.push(c);
                        }
                    }
                    Some((_, '\'')) => break,
                    Some((_, c)) => value.push(c),
                    None => {
                        return Err(format!(
                            "--database-url: the value of {key} is not closed by '"
                        ))
                    }
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                value.push(c);
            }
        }
        let end = chars.peek().map_or(text.len(), |(i, _)| *i);
        pairs.push((key, value, text[start..end].trim_end().to_owned()));
    }
    Ok(pairs)
}

/// `verify-ca`: the chain is checked, the name is not (libpq's meaning).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require`: any certificate (the handshake's signatures still checked).
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

impl<S> MakeTlsConnect<S> for Tls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, io::Error> {
        let name = ServerName::try_from(domain.to_owned()).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("host {domain}: {e}"))
        })?;
        Ok(RustlsConnect {
            client: Arc::clone(&self.client),
            name,
            settings: Arc::from(format!(
                "sslmode={}{}",
                self.mode.name(),
                self.root_cert
                    .as_ref()
                    .map_or(String::new(), |p| format!(", sslrootcert={}", p.display()))
            )),
        })
    }
}

/// One connection's handshake.
pub struct RustlsConnect {
    client: Arc<ClientConfig>,
    name: ServerName<'static>,
    /// `sslmode=..., sslrootcert=...`, for the log line of a refused handshake.
    settings: Arc<str>,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<RustlsStream<S>, io::Error>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let host = self.name.to_str().into_owned();
            tokio_rustls::TlsConnector::from(self.client)
                .connect(self.name, stream)
                .await
                .map(RustlsStream)
                .map_err(|e| {
                    // tokio-postgres prints "error performing TLS handshake" without its cause:
                    // the cause is said here, once per refused connection.
                    let message = format!(
                        "TLS handshake with Postgres at {host} failed: {e} ({})",
                        self.settings
                    );
                    tracing::warn!("{message}");
                    io::Error::new(e.kind(), message)
                })
        })
    }
}

/// A connection over TLS.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        // SCRAM channel binding is not offered (SCRAM-SHA-256 without -PLUS still works).
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_leave_the_url() {
        let (rest, mode, root) = split_tls(
            "postgresql://u@h:5/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca.pem",
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(rest, "postgresql://u@h:5/db?application_name=x");
        assert_eq!(mode, Some(SslMode::VerifyFull));
        assert_eq!(root, Some(PathBuf::from("/tmp/ca.pem")));
        let (rest, mode, root) =
            split_tls("host=h sslmode = 'verify-ca' sslrootcert='/a b/ca.pem' dbname=d")
                .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(rest, "host=h dbname=d");
        assert_eq!(mode, Some(SslMode::VerifyCa));
        assert_eq!(root, Some(PathBuf::from("/a b/ca.pem")));
    }

    #[test]
    fn bad_settings_are_refused_with_their_fix() {
        let bad = Postgres::parse("postgresql://u@h/db?sslmode=sometimes").err();
        assert!(bad.is_some_and(|e| e.contains("not one of disable")));
        let no_ca = Postgres::parse("postgresql://u@h/db?sslmode=verify-full").err();
        assert!(no_ca.is_some_and(|e| e.contains("needs sslrootcert")));
        let missing =
            Postgres::parse("postgresql://u@h/db?sslmode=verify-ca&sslrootcert=/nonexistent.pem")
                .err();
        assert!(missing.is_some_and(|e| e.contains("/nonexistent.pem")));
        let plain = Postgres::parse("postgresql://u@h/db")
            .map(|p| p.tls.mode)
            .ok();
        assert_eq!(plain, Some(SslMode::Prefer));
    }
}
