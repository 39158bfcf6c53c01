//! [`ClientConfig`]: the client's timeouts, pooling limits, size limits
//! and TLS roots, with their defaults. Read by the pooling client, the
//! request builder and the response.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;

/// Client settings.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Time to establish a connection (default 10 s).
    pub connect_timeout: Duration,
    /// Longest wait for each read of the response (default 30 s; `None`:
    /// no limit).
    pub read_timeout: Option<Duration>,
    /// Longest wait for each write of the request (default 30 s).
    pub write_timeout: Option<Duration>,
    /// Limit for a whole request: connect, send, and receive the head (and,
    /// with [`Response::bytes`](super::Response::bytes) or
    /// [`Response::text`](super::Response::text), the body). `None`
    /// (default): no overall limit.
    pub total_timeout: Option<Duration>,
    /// Reuse connections (default true). When false every request sends
    /// `Connection: close`.
    pub keep_alive: bool,
    /// Idle connections kept per `host:port` (default 32).
    pub max_idle_per_host: usize,
    /// Idle connections older than this are not reused (default 50 s).
    pub idle_timeout: Duration,
    /// Largest response head accepted (default 64 KiB).
    pub max_header_bytes: usize,
    /// Largest body [`Response::bytes`](super::Response::bytes) /
    /// [`Response::text`](super::Response::text) read (default 64 MiB).
    pub max_body_bytes: u64,
    /// `User-Agent` header sent when the request sets none.
    pub user_agent: Option<String>,
    /// Set `TCP_NODELAY` (default true).
    pub nodelay: bool,
    /// Roots trusted for `https://` in addition to the built-in Mozilla
    /// set (`webpki-roots`): e.g. a private CA, or a test server's
    /// self-signed certificate (default none). Host names are always
    /// verified.
    pub tls_roots: Vec<CertificateDer<'static>>,
    /// A complete rustls client configuration to use for `https://`
    /// instead of the built-in roots plus
    /// [`tls_roots`](ClientConfig::tls_roots) (client certificates, a
    /// custom verifier, [`tls::danger_accept_any_certificate`](crate::tls::danger_accept_any_certificate)
    /// for tests). Default `None`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Some(Duration::from_secs(30)),
            write_timeout: Some(Duration::from_secs(30)),
            total_timeout: None,
            keep_alive: true,
            max_idle_per_host: 32,
            idle_timeout: Duration::from_secs(50),
            max_header_bytes: 64 * 1024,
            max_body_bytes: 64 << 20,
            user_agent: Some(concat!("weft-http/", env!("CARGO_PKG_VERSION")).to_owned()),
            nodelay: true,
            tls_roots: Vec::new(),
            tls: None,
        }
    }
}
