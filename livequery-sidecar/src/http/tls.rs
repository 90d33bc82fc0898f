//! TLS on the sidecar's own listeners (`--tls-cert`, `--tls-key`; docs/http.md, "TLS"): a
//! rustls server (ring, as `pg::tls`) for deployments without a proxy in front. The HTTP
//! listener offers ALPN `http/1.1` (the server speaks HTTP/1.1), the gRPC listener `h2`.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

/// The certificate chain and key of the listeners, read and checked at start.
#[derive(Debug, Clone)]
pub struct ServerTls {
    certs: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
}

impl ServerTls {
    /// Read the PEM files: `cert` holds the certificate chain (the server's first), `key` its
    /// private key (PKCS#8, PKCS#1 or SEC1).
    ///
    /// # Errors
    /// A file missing, without a certificate or key, or a key that does not match.
    pub fn load(cert: &Path, key: &Path) -> Result<ServerTls, String> {
        let bad = |flag: &str, path: &Path, e: &dyn std::fmt::Display| {
            format!("{flag} {}: {e}", path.display())
        };
        let certs = CertificateDer::pem_file_iter(cert)
            .map_err(|e| bad("--tls-cert", cert, &e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad("--tls-cert", cert, &e))?;
        if certs.is_empty() {
            return Err(bad("--tls-cert", cert, &"no PEM certificate in it"));
        }
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| bad("--tls-key", key, &format!("no PEM private key in it ({e})")))?;
        let tls = ServerTls {
            certs,
            key: Arc::new(key),
        };
        // The key must match the certificate: checked now rather than at the first client.
        tls.acceptor(&[])?;
        Ok(tls)
    }

    /// An acceptor offering the ALPN protocols `alpn`.
    ///
    /// # Errors
    /// The key does not match the certificate.
    pub fn acceptor(&self, alpn: &[&[u8]]) -> Result<TlsAcceptor, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_no_client_auth()
            .with_single_cert(self.certs.clone(), self.key.clone_key())
            .map_err(|e| format!("--tls-cert / --tls-key: {e}"))?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// A connection of a listener: plain TCP, or TLS over it.
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Transport {
    /// The TCP socket under it.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(s) => s.get_ref().0,
        }
    }
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Plain(s) => s.is_write_vectored(),
            Transport::Tls(s) => s.is_write_vectored(),
        }
    }
}

impl tonic::transport::server::Connected for Transport {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.tcp().connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_empty_files_are_refused_naming_the_flag() {
        let dir = std::env::temp_dir().join(format!("docstore-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not pem\n").unwrap();
        let missing = dir.join("missing.pem");
        let e = ServerTls::load(&missing, &empty).unwrap_err();
        assert!(e.starts_with("--tls-cert "), "{e}");
        let e = ServerTls::load(&empty, &empty).unwrap_err();
        assert!(e.contains("no PEM certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
