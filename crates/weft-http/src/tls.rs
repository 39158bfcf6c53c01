//! TLS (https) for the server and the client, through [rustls].
//!
//! The TLS layer runs over weft's own sockets: a read that needs more
//! bytes parks the calling virtual thread exactly like a plain read, so a
//! TLS connection costs a virtual thread and a few buffers, as a plain one.
//!
//! # Choices
//!
//! - **Provider: `ring`.** It builds with the C compiler alone (no cmake,
//!   no NASM, unlike `aws-lc-rs`), which keeps CI builds short. A full
//!   TLS 1.3 handshake (X25519 + ECDSA P-256) costs well under a
//!   millisecond of CPU on each side on the development machine (see
//!   `cargo run --release -p weft-http --example tls_handshake`), far
//!   below the default stall threshold (`WEFT_STALL_THRESHOLD`, 20 ms), so
//!   handshakes run on the connection's own virtual thread rather than
//!   through `weft::blocking`: an offload round trip would cost about as
//!   much as the handshake itself. An RSA-4096 server key is the slowest
//!   common case and still stays below the threshold.
//! - **Roots: `webpki-roots`.** The client trusts Mozilla's root set
//!   compiled into the binary, plus any roots in
//!   [`ClientConfig::tls_roots`](crate::ClientConfig::tls_roots). It works
//!   the same in a minimal container without a CA bundle, reads no files at
//!   start, and cannot be changed behind the program's back; the price is
//!   that a root update needs a crate update. A private CA goes in
//!   `tls_roots`, or supply a whole rustls configuration with
//!   [`ClientConfig::tls`](crate::ClientConfig::tls).
//!
//! # Examples
//!
//! An https server and a client that trusts its (test) certificate:
//!
//! ```
//! use std::sync::Arc;
//! use weft_http::{Client, ClientConfig, Response, Server, ServerConfig, TlsConfig};
//!
//! // A self-signed certificate for "localhost" (made with rcgen here; in
//! // production, PEM files from your CA: `TlsConfig::from_pem_files`).
//! let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()])?;
//! let tls = TlsConfig::from_pem(cert.cert.pem().as_bytes(), cert.signing_key.serialize_pem().as_bytes())?;
//! let server = Server::bind("127.0.0.1:0", ServerConfig::default().tls(tls))?
//!     .serve(|_req: &mut weft_http::Request<'_>| Response::text("secret"))?;
//!
//! let client = Client::with_config(ClientConfig {
//!     tls_roots: vec![cert.cert.der().clone()],
//!     ..ClientConfig::default()
//! });
//! let url = format!("https://localhost:{}/", server.local_addr().port());
//! assert_eq!(client.get(&url).send()?.text()?, "secret");
//! // The pool keys connections by scheme, host and port: the second
//! // request reuses the TLS connection.
//! assert_eq!(client.get(&url).send()?.text()?, "secret");
//! assert_eq!(server.stats().accepted_connections, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [rustls]: https://docs.rs/rustls

use std::fmt;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};
use weft::net::TcpStream;

use weft::sync::Unpoison;

/// The crypto provider every configuration here uses.
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// A server's TLS settings: certificate chain, private key, protocol
/// versions. Cheap to clone (an `Arc` inside).
///
/// Made from PEM ([`from_pem_files`](TlsConfig::from_pem_files),
/// [`from_pem`](TlsConfig::from_pem)) or from a complete rustls
/// configuration ([`from_rustls`](TlsConfig::from_rustls)). ALPN offers
/// `http/1.1`.
#[derive(Clone)]
pub struct TlsConfig {
    pub(crate) inner: Arc<rustls::ServerConfig>,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("alpn", &self.inner.alpn_protocols)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// Reads a PEM certificate chain (leaf first) and a PEM private key
    /// (PKCS#8, PKCS#1 or SEC1) from files.
    pub fn from_pem_files(
        cert_chain: impl AsRef<std::path::Path>,
        key: impl AsRef<std::path::Path>,
    ) -> io::Result<TlsConfig> {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| {
                io::Error::new(e.kind(), format!("weft-http: reading {}: {e}", p.display()))
            })
        };
        TlsConfig::from_pem(&read(cert_chain.as_ref())?, &read(key.as_ref())?)
    }

    /// Parses a PEM certificate chain (leaf first) and a PEM private key.
    pub fn from_pem(cert_chain: &[u8], key: &[u8]) -> io::Result<TlsConfig> {
        let certs = CertificateDer::pem_slice_iter(cert_chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("weft-http: bad PEM certificate chain: {e}")))?;
        if certs.is_empty() {
            return Err(invalid(
                "weft-http: no CERTIFICATE block in the certificate chain".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| invalid(format!("weft-http: bad PEM private key: {e}")))?;
        let cfg = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("weft-http: TLS configuration: {e}")))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| invalid(format!("weft-http: certificate and key: {e}")))?;
        Ok(TlsConfig::from_rustls(Arc::new(cfg)))
    }

    /// Uses a complete rustls configuration (client authentication,
    /// certificate resolvers, …). When it sets no ALPN protocols, `http/1.1`
    /// is added.
    pub fn from_rustls(config: Arc<rustls::ServerConfig>) -> TlsConfig {
        let mut inner = config;
        if inner.alpn_protocols.is_empty() {
            Arc::make_mut(&mut inner).alpn_protocols = vec![b"http/1.1".to_vec()];
        }
        TlsConfig { inner }
    }

    /// The rustls configuration in use.
    pub fn rustls(&self) -> &Arc<rustls::ServerConfig> {
        &self.inner
    }
}

/// The client configuration [`Client`](crate::Client) uses for
/// `https://`: Mozilla's roots (`webpki-roots`) plus `extra_roots`, host
/// names verified, ALPN `http/1.1`.
pub fn default_client_config(extra_roots: &[CertificateDer<'static>]) -> Arc<rustls::ClientConfig> {
    Arc::new(client_config(extra_roots))
}

pub(crate) fn client_config(extra_roots: &[CertificateDer<'static>]) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for r in extra_roots {
        // A root that does not parse is reported at handshake time as an
        // unknown issuer; `add` only fails for malformed DER.
        let _ = roots.add(r.clone());
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    cfg
}

/// A client configuration that accepts **any** certificate, for load tests
/// against self-signed servers (`weft-load --insecure`): never use it to
/// talk to a server you do not control. Handshake signatures are still
/// checked, so a handshake costs what a verified one costs.
pub fn danger_accept_any_certificate() -> Arc<rustls::ClientConfig> {
    Arc::new(insecure_client_config())
}

fn insecure_client_config() -> rustls::ClientConfig {
    let provider = provider();
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    cfg
}

#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
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
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The server name to send (SNI) and verify for `host` (IPv6 brackets
/// removed; IP addresses are verified against the certificate's IP SANs).
pub(crate) fn server_name(host: &str) -> io::Result<ServerName<'static>> {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(h.to_owned())
        .map_err(|e| invalid(format!("invalid TLS server name {host:?}: {e}")))
}

// ---------------------------------------------------------------------------
// Streams

/// A connection's byte stream: plain TCP or TLS over TCP. `&Stream` reads
/// and writes like `&TcpStream` (the TLS state sits behind a lock that only
/// the connection's own thread takes).
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

pub(crate) struct TlsStream {
    tcp: TcpStream,
    conn: Mutex<rustls::Connection>,
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stream::Plain(s) => s.fmt(f),
            Stream::Tls(t) => f.debug_tuple("Tls").field(&t.tcp).finish(),
        }
    }
}

impl Stream {
    /// The TCP stream underneath.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &t.tcp,
        }
    }

    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    pub(crate) fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.tcp().set_read_timeout(d)
    }

    pub(crate) fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.tcp().set_write_timeout(d)
    }

    pub(crate) fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.tcp().set_nodelay(on)
    }

    /// Shuts down the writing half; on TLS, sends `close_notify` first.
    pub(crate) fn shutdown_write(&self) -> io::Result<()> {
        if let Stream::Tls(t) = self {
            let mut c = t.lock();
            c.send_close_notify();
            while c.wants_write() {
                if c.write_tls(&mut &t.tcp)? == 0 {
                    break;
                }
            }
        }
        self.tcp().shutdown(Shutdown::Write)
    }

    /// Whether the TLS layer holds data the HTTP layer has not read (or
    /// the peer sent `close_notify`): such a connection is not reusable.
    pub(crate) fn has_buffered(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(t) => {
                let mut c = t.lock();
                match c.process_new_packets() {
                    Ok(st) => st.plaintext_bytes_to_read() > 0 || st.peer_has_closed(),
                    Err(_) => true,
                }
            }
        }
    }

    /// Runs a server-side handshake on `tcp`, finishing before `deadline`.
    pub(crate) fn accept(
        tcp: TcpStream,
        config: &TlsConfig,
        deadline: Instant,
    ) -> Result<Stream, (TcpStream, io::Error)> {
        let conn = match rustls::ServerConnection::new(config.inner.clone()) {
            Ok(c) => c,
            Err(e) => return Err((tcp, io::Error::other(e))),
        };
        let mut conn = rustls::Connection::Server(conn);
        match handshake(&mut conn, &tcp, deadline) {
            Ok(()) => Ok(Stream::Tls(Box::new(TlsStream {
                tcp,
                conn: Mutex::new(conn),
            }))),
            Err(e) => Err((tcp, e)),
        }
    }

    /// Runs a client-side handshake with `name` on `tcp`, finishing before
    /// `deadline`.
    pub(crate) fn connect(
        tcp: TcpStream,
        config: Arc<rustls::ClientConfig>,
        name: ServerName<'static>,
        deadline: Instant,
    ) -> io::Result<Stream> {
        let conn = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
        let mut conn = rustls::Connection::Client(conn);
        handshake(&mut conn, &tcp, deadline)?;
        Ok(Stream::Tls(Box::new(TlsStream {
            tcp,
            conn: Mutex::new(conn),
        })))
    }
}

impl TlsStream {
    fn lock(&self) -> MutexGuard<'_, rustls::Connection> {
        self.conn.lock().unpoison()
    }
}

/// Wraps a TLS protocol error (bad certificate, alert, garbage) so that it
/// can be told apart from I/O errors: `InvalidData` with the rustls error
/// as its source.
fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// The rustls error inside an I/O error from a TLS stream, if any.
pub(crate) fn rustls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref()?.downcast_ref::<rustls::Error>()
}

fn handshake(conn: &mut rustls::Connection, tcp: &TcpStream, deadline: Instant) -> io::Result<()> {
    let mut io = tcp;
    loop {
        while conn.wants_write() {
            conn.write_tls(&mut io)?;
        }
        if !conn.is_handshaking() {
            return Ok(());
        }
        let left = deadline.saturating_duration_since(weft::clock::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            ));
        }
        tcp.set_read_timeout(Some(left))?;
        match conn.read_tls(&mut io) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed the connection during the TLS handshake",
                ));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "TLS handshake timed out",
                ));
            }
            Err(e) => return Err(e),
        }
        if let Err(e) = conn.process_new_packets() {
            // Send the alert that says why, then give up.
            while conn.wants_write() {
                if conn.write_tls(&mut io).is_err() {
                    break;
                }
            }
            return Err(tls_error(e));
        }
    }
}

impl TlsStream {
    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut c = self.lock();
        let mut io = &self.tcp;
        loop {
            match c.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // A peer that closes without close_notify: EOF for HTTP's
                // purposes (the framing tells a truncated message apart).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            while c.wants_write() {
                c.write_tls(&mut io)?;
            }
            c.read_tls(&mut io)?;
            if let Err(e) = c.process_new_packets() {
                while c.wants_write() {
                    if c.write_tls(&mut io).is_err() {
                        break;
                    }
                }
                return Err(tls_error(e));
            }
        }
    }

    fn write_with(
        &self,
        f: impl FnOnce(&mut rustls::Writer<'_>) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let mut c = self.lock();
        let mut io = &self.tcp;
        let n = f(&mut c.writer())?;
        while c.wants_write() {
            c.write_tls(&mut io)?;
        }
        Ok(n)
    }
}

impl Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => (&*s).read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for &Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => (&*s).write(buf),
            Stream::Tls(t) => t.write_with(|w| w.write(buf)),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => (&*s).write_vectored(bufs),
            Stream::Tls(t) => t.write_with(|w| w.write_vectored(bufs)),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => (&*s).flush(),
            // Every write is sent before it returns.
            Stream::Tls(_) => Ok(()),
        }
    }
}
