//! TLS to the server: `sslmode` and `sslrootcert` with libpq's meaning,
//! through rustls (ring provider) over weft's sockets.
//!
//! | `sslmode` | TLS | certificate checked | host name checked |
//! |---|---|---|---|
//! | `disable` | never | – | – |
//! | `prefer` (default) | if the server offers it | no | no |
//! | `require` | always | no (yes, like `verify-ca`, when `sslrootcert` is given) | no |
//! | `verify-ca` | always | against `sslrootcert` | no |
//! | `verify-full` | always | against `sslrootcert` | yes |
//!
//! `sslrootcert` is a PEM file of trusted roots (libpq's default
//! `~/.postgresql/root.crt` is used when it exists and none is given), or
//! `system` for Mozilla's roots (`webpki-roots`, compiled in). Unix-socket
//! connections never use TLS, as in libpq.
//!
//! # Examples
//!
//! A pool that verifies the server's certificate and host name:
//!
//! ```no_run
//! let pool = weft_pg::Pool::new(weft_pg::Config::from_url(
//!     "postgres://app:secret@db.example.com/app?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem",
//! )?)?;
//! let row = pool.get()?.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])?;
//! assert!(row.get::<_, bool>(0));
//! # Ok::<(), weft_pg::Error>(())
//! ```

use std::fmt;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, TlsConnect};

use crate::drive::Stream;
use crate::error::{Error, Result};

/// libpq's `sslmode`, see the [module docs](self).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it, without verification (the default).
    #[default]
    Prefer,
    /// TLS or no connection; no verification unless a root certificate is
    /// given.
    Require,
    /// TLS, the certificate chain verified against the roots.
    VerifyCa,
    /// TLS, chain and host name verified.
    VerifyFull,
}

impl FromStr for SslMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<SslMode> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            // libpq's `allow` (plain first, TLS if refused) is not
            // supported: say so rather than guess.
            _ => {
                return Err(Error::Config(format!(
                    "invalid sslmode {s:?}: expected disable, prefer, require, verify-ca or verify-full"
                )));
            }
        })
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        })
    }
}

/// TLS settings of a connection: `sslmode` and `sslrootcert`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// `sslmode` (default `prefer`).
    pub mode: SslMode,
    /// `sslrootcert`: a PEM file of trusted roots, or `system` (default:
    /// `~/.postgresql/root.crt` if it exists).
    pub root_cert: Option<PathBuf>,
}

impl TlsOptions {
    pub(crate) fn to_pg(&self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as P;
        match self.mode {
            SslMode::Disable => P::Disable,
            SslMode::Prefer => P::Prefer,
            _ => P::Require,
        }
    }

    /// The rustls configuration these options call for (`None`:
    /// `disable`).
    pub(crate) fn client_config(&self) -> Result<Option<Arc<rustls::ClientConfig>>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let root_file = self.root_cert.clone().or_else(|| {
            let home = std::env::var_os("HOME")?;
            let p = PathBuf::from(home).join(".postgresql/root.crt");
            p.exists().then_some(p)
        });
        let verify = match self.mode {
            SslMode::Disable => return Ok(None),
            SslMode::Prefer => None,
            SslMode::Require => self.root_cert.as_ref().map(|_| false),
            SslMode::VerifyCa => Some(false),
            SslMode::VerifyFull => Some(true),
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Config(format!("TLS: {e}")))?;
        let cfg = match verify {
            None => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
                .with_no_client_auth(),
            Some(check_name) => {
                let Some(file) = root_file else {
                    return Err(Error::Config(format!(
                        "sslmode={} needs root certificates: set sslrootcert=<PEM file> (or \
                         sslrootcert=system), or put them in ~/.postgresql/root.crt",
                        self.mode
                    )));
                };
                let roots = load_roots(&file)?;
                let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .map_err(|e| Error::Config(format!("TLS root certificates: {e}")))?;
                let verifier: Arc<dyn ServerCertVerifier> = if check_name {
                    inner
                } else {
                    Arc::new(ChainOnly(inner))
                };
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(verifier)
                    .with_no_client_auth()
            }
        };
        Ok(Some(Arc::new(cfg)))
    }
}

fn load_roots(file: &std::path::Path) -> Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    if file.as_os_str() == "system" {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        return Ok(roots);
    }
    let certs = CertificateDer::pem_file_iter(file)
        .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| Error::Config(format!("sslrootcert {}: {e}", file.display())))?;
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(Error::Config(format!(
            "sslrootcert {}: no usable CERTIFICATE in the file",
            file.display()
        )));
    }
    Ok(roots)
}

/// Removes `sslmode` and `sslrootcert` from a connection string (URL or
/// key=value), which tokio-postgres does not know in full, and returns
/// the rest with their values.
pub(crate) fn split_options(s: &str) -> Result<(String, TlsOptions)> {
    let mut opts = TlsOptions::default();
    let mut set = |k: &str, v: String| -> Result<bool> {
        match k {
            "sslmode" => opts.mode = v.parse()?,
            "sslrootcert" => opts.root_cert = Some(PathBuf::from(v)),
            _ => return Ok(false),
        }
        Ok(true)
    };
    if s.starts_with("postgres://") || s.starts_with("postgresql://") {
        let Some((base, query)) = s.split_once('?') else {
            return Ok((s.to_owned(), opts));
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_decode(v)
                .ok_or_else(|| Error::Config(format!("invalid percent-encoding in {pair:?}")))?;
            if !set(k, v)? {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return Ok((rest, opts));
    }
    // key=value pairs separated by spaces; values may be 'quoted' with \
    // escapes (libpq's syntax).
    let mut rest = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let start = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = &s[start..i];
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'=' {
            i += 1;
        }
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < b.len() && b[i] == b'\'' {
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                let ch = s[i..].chars().next().unwrap_or('\0');
                value.push(ch);
                i += ch.len_utf8();
            }
            i += 1;
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                let ch = s[i..].chars().next().unwrap_or('\0');
                value.push(ch);
                i += ch.len_utf8();
            }
        }
        let end = i.min(s.len());
        if !set(key, value)? {
            if !rest.is_empty() {
                rest.push(' ');
            }
            rest.push_str(&s[start..end]);
        }
    }
    Ok((rest, opts))
}

fn percent_decode(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Accepts any certificate (`prefer`, `require` without roots), still
/// checking handshake signatures.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain is verified, the host name is not.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError as C;
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                C::NotValidForName | C::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(m, c, d)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(m, c, d)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

// ---------------------------------------------------------------------------
// tokio-postgres glue

/// A `TlsConnect` for one server: rustls over a weft stream.
pub(crate) struct Connector {
    pub(crate) config: Option<Arc<rustls::ClientConfig>>,
    pub(crate) name: ServerName<'static>,
}

impl TlsConnect<Stream> for Connector {
    type Stream = TlsStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TlsStream>> + Send>>;

    fn connect(self, stream: Stream) -> Self::Future {
        let Some(config) = self.config else {
            return Box::pin(std::future::ready(Err(io::Error::other(
                "TLS is disabled (sslmode=disable)",
            ))));
        };
        let connect = tokio_rustls::TlsConnector::from(config).connect(self.name, stream);
        Box::pin(async move { connect.await.map(|s| TlsStream(Box::new(s))) })
    }
}

/// A TLS session with the server.
pub struct TlsStream(Box<tokio_rustls::client::TlsStream<Stream>>);

impl fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsStream").finish_non_exhaustive()
    }
}

impl tokio_postgres::tls::TlsStream for TlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

/// The rustls error behind a failed connect, if TLS failed.
pub(crate) fn tls_failure(e: &tokio_postgres::Error) -> Option<String> {
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(r) = s.downcast_ref::<rustls::Error>() {
            return Some(match r {
                rustls::Error::InvalidCertificate(c) => {
                    format!("TLS certificate verification failed: {c}")
                }
                other => format!("TLS handshake failed: {other}"),
            });
        }
        if let Some(io) = s.downcast_ref::<io::Error>()
            && let Some(r) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>())
        {
            return Some(match r {
                rustls::Error::InvalidCertificate(c) => {
                    format!("TLS certificate verification failed: {c}")
                }
                other => format!("TLS handshake failed: {other}"),
            });
        }
        src = s.source();
    }
    let msg = e.to_string();
    msg.contains("TLS").then_some(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_url_and_key_value_options() {
        let (rest, o) = split_options(
            "postgres://u:p@h:5/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fr.pem",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u:p@h:5/db?application_name=x");
        assert_eq!(o.mode, SslMode::VerifyFull);
        assert_eq!(o.root_cert, Some(PathBuf::from("/tmp/r.pem")));
        let (rest, o) =
            split_options("host=h sslmode = verify-ca sslrootcert='/a b/r.pem' user=u").unwrap();
        assert_eq!(rest, "host=h user=u");
        assert_eq!(o.mode, SslMode::VerifyCa);
        assert_eq!(o.root_cert, Some(PathBuf::from("/a b/r.pem")));
        let (rest, o) = split_options("postgres://h/db").unwrap();
        assert_eq!(
            (rest.as_str(), o),
            ("postgres://h/db", TlsOptions::default())
        );
        assert!(split_options("host=h sslmode=allow").is_err());
        assert!(split_options("postgres://h/db?sslmode=bogus").is_err());
    }

    #[test]
    fn verifying_modes_need_roots() {
        let o = TlsOptions {
            mode: SslMode::VerifyFull,
            root_cert: Some("/nonexistent/root.crt".into()),
        };
        let e = o.client_config().unwrap_err().to_string();
        assert!(e.contains("/nonexistent/root.crt"), "{e}");
        assert!(
            TlsOptions {
                mode: SslMode::Disable,
                root_cert: None
            }
            .client_config()
            .unwrap()
            .is_none()
        );
    }
}
