//! A blocking HTTP/1.1 client with per-host keep-alive pooling.
//!
//! ```
//! use std::time::Duration;
//! use weft_http::{Client, ClientConfig, Response};
//!
//! let server = weft_http::serve("127.0.0.1:0", |req: &mut weft_http::Request<'_>| {
//!     Response::text(format!("you sent {} bytes", req.read_body().unwrap().len()))
//! })?;
//! let url = format!("http://{}/upload", server.local_addr());
//!
//! let client = Client::with_config(ClientConfig {
//!     read_timeout: Some(Duration::from_secs(5)),
//!     ..ClientConfig::default()
//! });
//! let resp = client.post(&url).body("12345").send()?;
//! assert_eq!(resp.status(), 200);
//! assert_eq!(resp.text()?, "you sent 5 bytes");
//! // The connection went back to the pool and is reused.
//! let resp = client.get(&url).send()?;
//! assert_eq!(resp.text()?, "you sent 0 bytes");
//! assert_eq!(client.idle_connections(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Calls block the calling thread: on a weft virtual thread they park it
//! (the carrier runs other threads), on an OS thread they block it.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::pki_types::CertificateDer;
use weft::net::TcpStream;

use crate::tls::Stream;
use crate::unpoison::Unpoison;
use crate::wire::{
    Chunk, ChunkedWriter, Framing, InBuf, has_token, parse_content_length, read_body,
};

// ---------------------------------------------------------------------------
// Errors

/// The class of a client error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The URL could not be parsed or is not `http://`.
    InvalidUrl,
    /// The connection could not be established (refused, unreachable,
    /// name not resolved).
    Connect,
    /// Sending the request failed.
    Write,
    /// Receiving the response failed (reset, closed early).
    Read,
    /// A connect, read or total timeout expired.
    Timeout,
    /// The response was not valid HTTP/1.x, or exceeded a size limit.
    Protocol,
    /// The server's TLS certificate failed verification: unknown issuer,
    /// expired, or not valid for the host name in the URL.
    Certificate,
    /// The TLS handshake or a TLS record failed for another reason (no
    /// common protocol version or cipher, an alert from the server, a
    /// server that does not speak TLS).
    Tls,
}

/// A client error: its [`ErrorKind`], a message, and the I/O error behind
/// it if any.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    msg: String,
    source: Option<io::Error>,
    /// Nothing of a response arrived (the request may be retried on a fresh
    /// connection if this one came from the pool).
    no_response: bool,
}

impl Error {
    fn new(kind: ErrorKind, msg: impl Into<String>) -> Error {
        Error {
            kind,
            msg: msg.into(),
            source: None,
            no_response: false,
        }
    }

    fn io(kind: ErrorKind, what: &str, e: io::Error) -> Error {
        let kind = if matches!(
            e.kind(),
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
        ) {
            ErrorKind::Timeout
        } else {
            kind
        };
        Error {
            kind,
            msg: format!("{what}: {e}"),
            source: Some(e),
            no_response: false,
        }
    }

    /// The class of the error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether a timeout expired.
    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http client: {}", self.msg)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match e.kind {
            ErrorKind::Timeout => io::ErrorKind::TimedOut,
            ErrorKind::InvalidUrl => io::ErrorKind::InvalidInput,
            ErrorKind::Protocol | ErrorKind::Certificate | ErrorKind::Tls => {
                io::ErrorKind::InvalidData
            }
            ErrorKind::Connect => io::ErrorKind::ConnectionRefused,
            ErrorKind::Read | ErrorKind::Write => e
                .source
                .as_ref()
                .map_or(io::ErrorKind::Other, io::Error::kind),
        };
        io::Error::new(kind, e)
    }
}

// ---------------------------------------------------------------------------
// URLs

/// A parsed `http://` or `https://host[:port][/path][?query]` URL.
///
/// The client sends the path and query exactly as given, so a URL it
/// could not send unchanged is an error rather than a silent change: user
/// info (`user:pw@`, which would be dropped), characters outside RFC
/// 3986's set (spaces, non-ASCII, `"`, `<`, `{`, `|`, …: percent-encode
/// them) and malformed `%` escapes. The `#fragment`, which is never part
/// of a request, is removed. Build query strings with
/// [`RequestBuilder::query`], which encodes.
///
/// ```
/// use weft_http::Url;
/// assert_eq!(Url::parse("http://h/a%20b?x=1")?.path_and_query(), "/a%20b?x=1");
/// assert!(Url::parse("http://h/a b").is_err());
/// assert!(Url::parse("http://h/caf\u{e9}").is_err());
/// assert!(Url::parse("http://h/?q=100%").is_err());
/// assert!(Url::parse("http://user:pw@h/").is_err());
/// # Ok::<(), weft_http::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    https: bool,
    host: String,
    port: u16,
    path_and_query: String,
}

impl Url {
    /// Parses `s`: `http://` (default port 80) or `https://` (443).
    pub fn parse(s: &str) -> Result<Url, Error> {
        let bad = |m: &str| Error::new(ErrorKind::InvalidUrl, format!("{m}: {s:?}"));
        let (https, rest) = if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else {
            return Err(bad("URL must start with http:// or https://"));
        };
        let default_port = if https { 443 } else { 80 };
        let (authority, pq) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err(bad(
                "user info in URLs is not supported (send an Authorization header)",
            ));
        }
        let (host, port) = if let Some(r) = authority.strip_prefix('[') {
            let (h, after) = r.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse().map_err(|_| bad("invalid port"))?,
                None if after.is_empty() => default_port,
                None => return Err(bad("invalid authority")),
            };
            (format!("[{h}]"), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), p.parse().map_err(|_| bad("invalid port"))?),
                None => (authority.to_owned(), default_port),
            }
        };
        if host.is_empty()
            || host
                .bytes()
                .any(|b| !b.is_ascii_graphic() || b"\"<>\\^`{|}/?#".contains(&b))
        {
            return Err(bad("invalid host"));
        }
        let mut path_and_query = if pq.starts_with('?') {
            format!("/{pq}")
        } else {
            pq.to_owned()
        };
        if let Some(i) = path_and_query.find('#') {
            path_and_query.truncate(i);
        }
        if let Err(m) = check_target(&path_and_query) {
            return Err(bad(m));
        }
        Ok(Url {
            https,
            host,
            port,
            path_and_query,
        })
    }

    /// The host (IPv6 addresses keep their brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port (80 or 443 if not given).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `"http"` or `"https"`.
    pub fn scheme(&self) -> &'static str {
        if self.https { "https" } else { "http" }
    }

    /// Whether the URL is `https://`.
    pub fn is_https(&self) -> bool {
        self.https
    }

    /// `host:port` (the port left out when it is the scheme's default):
    /// the `Host` header value.
    pub fn authority(&self) -> String {
        if self.port == if self.https { 443 } else { 80 } {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The request target: path and query (`/a/b?c=d`).
    pub fn path_and_query(&self) -> &str {
        &self.path_and_query
    }

    /// Resolves the host to socket addresses (DNS through weft's blocking
    /// offload; literal addresses directly).
    pub fn socket_addrs(&self) -> Result<Vec<SocketAddr>, Error> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        weft::net::lookup_host((host, self.port))
            .map(Iterator::collect)
            .map_err(|e| Error::io(ErrorKind::Connect, &format!("resolving {}", self.host), e))
    }
}

/// Characters a query component keeps as they are: RFC 3986's
/// unreserved set. Everything else is percent-encoded (space as `%20`),
/// which every decoder reads back unchanged, `+`-as-space or not.
const QUERY_COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Checks that `pq` (path and query) can be sent as is: RFC 3986's
/// `pchar`s, `/` and `?`, and `%` only in `%XX` escapes.
fn check_target(pq: &str) -> Result<(), &'static str> {
    let b = pq.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                if !(i + 2 < b.len()
                    && b[i + 1].is_ascii_hexdigit()
                    && b[i + 2].is_ascii_hexdigit())
                {
                    return Err("'%' must start a %XX escape (write a literal % as %25)");
                }
                i += 3;
                continue;
            }
            c if c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?".contains(&c) => {}
            c if c.is_ascii() => {
                return Err("character not allowed in a URL path or query (percent-encode it)");
            }
            _ => return Err("non-ASCII character in URL (percent-encode it)"),
        }
        i += 1;
    }
    Ok(())
}

impl Url {
    /// Appends `key=value` pairs to the query, percent-encoding both.
    fn append_query<K: AsRef<str>, V: AsRef<str>>(&mut self, pairs: &[(K, V)]) {
        for (k, v) in pairs {
            let pq = &mut self.path_and_query;
            match pq.find('?') {
                None => pq.push('?'),
                Some(i) if i + 1 == pq.len() || pq.ends_with('&') => {}
                Some(_) => pq.push('&'),
            }
            pq.extend(percent_encoding::utf8_percent_encode(
                k.as_ref(),
                QUERY_COMPONENT,
            ));
            pq.push('=');
            pq.extend(percent_encoding::utf8_percent_encode(
                v.as_ref(),
                QUERY_COMPONENT,
            ));
        }
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme(),
            self.authority(),
            self.path_and_query
        )
    }
}

// ---------------------------------------------------------------------------
// Configuration

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
    /// with [`Response::bytes`]/[`Response::text`], the body). `None`
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
    /// Largest body [`Response::bytes`] / [`Response::text`] read (default
    /// 64 MiB).
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

// ---------------------------------------------------------------------------
// A single connection

/// Deadlines of one request.
#[derive(Clone, Copy, Debug)]
struct Limits {
    read: Option<Duration>,
    write: Option<Duration>,
    deadline: Option<Instant>,
}

impl Limits {
    /// The timeout for the next operation: the per-operation timeout capped
    /// by what is left until the deadline.
    fn next(&self, per_op: Option<Duration>) -> Result<Option<Duration>, Error> {
        match self.deadline {
            None => Ok(per_op),
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::new(ErrorKind::Timeout, "total timeout expired"));
                }
                Ok(Some(per_op.map_or(left, |p| p.min(left))))
            }
        }
    }
}

/// What [`Connection::exchange`] learned about a response whose body it
/// discarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// The status code.
    pub status: u16,
    /// Body bytes received (and discarded).
    pub body_bytes: u64,
    /// Whether the connection can carry another request.
    pub keep_alive: bool,
}

/// One HTTP/1.1 connection, without pooling: the building block of
/// [`Client`] and of the load generator's virtual users.
pub struct Connection {
    stream: Stream,
    handshake: Option<Duration>,
    input: InBuf,
    /// Scratch space for discarded bodies.
    sink: Vec<u8>,
    requests: u64,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("stream", &self.stream)
            .field("requests", &self.requests)
            .finish()
    }
}

/// Parsed response head.
struct Head {
    status: u16,
    reason: String,
    version: u8,
    head: Vec<u8>,
    /// (name, value) ranges into `head`.
    fields: Vec<(usize, usize, usize, usize)>,
    framing: Framing,
    keep_alive: bool,
}

const MAX_RESPONSE_HEADERS: usize = 128;

impl Connection {
    /// Connects to `addr` within `timeout`.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Connection, Error> {
        let stream = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| Error::io(ErrorKind::Connect, &format!("connecting to {addr}"), e))?;
        Ok(Connection {
            stream: Stream::Plain(stream),
            handshake: None,
            input: InBuf::with_capacity(8 * 1024),
            sink: Vec::new(),
            requests: 0,
        })
    }

    /// Connects to `addr` and runs a TLS handshake for `host` (sent as
    /// SNI and verified against the certificate unless `config` says
    /// otherwise), all within `timeout`. A certificate that fails
    /// verification gives [`ErrorKind::Certificate`]; another handshake
    /// failure [`ErrorKind::Tls`].
    pub fn connect_tls(
        addr: SocketAddr,
        host: &str,
        config: Arc<rustls::ClientConfig>,
        timeout: Duration,
    ) -> Result<Connection, Error> {
        let deadline = Instant::now() + timeout;
        let name = crate::tls::server_name(host)
            .map_err(|e| Error::io(ErrorKind::InvalidUrl, "TLS server name", e))?;
        let tcp = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| Error::io(ErrorKind::Connect, &format!("connecting to {addr}"), e))?;
        let start = Instant::now();
        let stream = Stream::connect(tcp, config, name, deadline)
            .map_err(|e| tls_connect_error(host, addr, e))?;
        Ok(Connection {
            stream,
            handshake: Some(start.elapsed()),
            input: InBuf::with_capacity(8 * 1024),
            sink: Vec::new(),
            requests: 0,
        })
    }

    /// How long the TLS handshake took (`None` for plain HTTP).
    pub fn handshake_time(&self) -> Option<Duration> {
        self.handshake
    }

    /// Whether this is a TLS connection.
    pub fn is_tls(&self) -> bool {
        self.stream.is_tls()
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.stream.set_nodelay(on)
    }

    /// The underlying TCP stream (below TLS, for an https connection).
    pub fn stream(&self) -> &TcpStream {
        self.stream.tcp()
    }

    /// Requests sent on this connection.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Sends a complete, already encoded request (see [`encode_request`])
    /// and reads the response, discarding its body. `head_request` must be
    /// true for `HEAD` requests (their responses have no body). `timeout`
    /// bounds each read and write.
    ///
    /// This is the allocation-free path the load generator uses.
    pub fn exchange(
        &mut self,
        request: &[u8],
        head_request: bool,
        timeout: Option<Duration>,
    ) -> Result<Exchange, Error> {
        let limits = Limits {
            read: timeout,
            write: timeout,
            deadline: None,
        };
        self.write_request(request, &limits)?;
        let (status, mut framing, keep_alive) = self.read_head_fast(head_request, &limits)?;
        let mut body_bytes = 0;
        if self.sink.is_empty() {
            self.sink = vec![0; 8192];
        }
        loop {
            let _ = self.stream.set_read_timeout(limits.next(limits.read)?);
            match read_body(&mut framing, &mut self.input, &self.stream, &mut self.sink) {
                Ok(0) => break,
                Ok(n) => body_bytes += n as u64,
                Err(e) => return Err(Error::io(ErrorKind::Read, "reading response body", e)),
            }
        }
        Ok(Exchange {
            status,
            body_bytes,
            keep_alive,
        })
    }

    fn write_request(&mut self, bytes: &[u8], limits: &Limits) -> Result<(), Error> {
        self.requests += 1;
        let _ = self.stream.set_write_timeout(limits.next(limits.write)?);
        (&self.stream).write_all(bytes).map_err(|e| {
            let mut err = Error::io(ErrorKind::Write, "sending request", e);
            err.no_response = true;
            err
        })
    }

    /// Fills the input until a complete response head is buffered; returns
    /// its length.
    fn buffer_head(&mut self, limits: &Limits, max: usize) -> Result<usize, Error> {
        let mut scanned = 0;
        loop {
            if let Some(end) = self.input.find_head_end(scanned) {
                return Ok(end);
            }
            scanned = self.input.len();
            if scanned > max {
                return Err(Error::new(ErrorKind::Protocol, "response head too large"));
            }
            let _ = self.stream.set_read_timeout(limits.next(limits.read)?);
            match self.input.fill(&self.stream, max + 1) {
                Ok(0) => {
                    let mut e = Error::new(
                        ErrorKind::Read,
                        "connection closed before the response head was complete",
                    );
                    e.no_response = scanned == 0;
                    return Err(e);
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::OutOfMemory => {
                    return Err(Error::new(ErrorKind::Protocol, "response head too large"));
                }
                Err(e) => {
                    let mut err = Error::io(ErrorKind::Read, "reading response", e);
                    err.no_response = scanned == 0 && err.kind != ErrorKind::Timeout;
                    return Err(err);
                }
            }
        }
    }

    /// Reads a response head without keeping the headers: status, framing,
    /// keep-alive. Skips 1xx interim responses.
    fn read_head_fast(
        &mut self,
        head_request: bool,
        limits: &Limits,
    ) -> Result<(u16, Framing, bool), Error> {
        loop {
            let end = self.buffer_head(limits, 64 * 1024)?;
            let mut hdrs = [const { std::mem::MaybeUninit::uninit() }; MAX_RESPONSE_HEADERS];
            let mut resp = httparse::Response::new(&mut []);
            let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
                &mut resp,
                &self.input.data()[..end],
                &mut hdrs,
            );
            let (status, framing, keep_alive) = match parsed {
                Ok(httparse::Status::Complete(_)) => {
                    let status = resp.code.unwrap_or(0);
                    let v = resp.version.unwrap_or(1);
                    let (f, k) = response_framing(status, v, resp.headers, head_request)?;
                    (status, f, k)
                }
                _ => return Err(Error::new(ErrorKind::Protocol, "malformed response head")),
            };
            self.input.consume(end);
            if (100..200).contains(&status) && status != 101 {
                continue;
            }
            return Ok((status, framing, keep_alive));
        }
    }

    /// Reads a response head and keeps its headers.
    fn read_head(
        &mut self,
        head_request: bool,
        limits: &Limits,
        max: usize,
    ) -> Result<Head, Error> {
        loop {
            let end = self.buffer_head(limits, max)?;
            let data = &self.input.data()[..end];
            let mut hdrs = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
            let mut resp = httparse::Response::new(&mut hdrs);
            match resp.parse(data) {
                Ok(httparse::Status::Complete(_)) => {}
                _ => return Err(Error::new(ErrorKind::Protocol, "malformed response head")),
            }
            let status = resp.code.unwrap_or(0);
            if (100..200).contains(&status) && status != 101 {
                self.input.consume(end);
                continue;
            }
            let version = resp.version.unwrap_or(1);
            let (framing, keep_alive) =
                response_framing(status, version, resp.headers, head_request)?;
            let base = data.as_ptr() as usize;
            let fields = resp
                .headers
                .iter()
                .map(|h| {
                    let n = h.name.as_ptr() as usize - base;
                    let v = h.value.as_ptr() as usize - base;
                    (n, n + h.name.len(), v, v + h.value.len())
                })
                .collect();
            let head = Head {
                status,
                reason: resp.reason.unwrap_or("").to_owned(),
                version,
                head: data.to_vec(),
                fields,
                framing,
                keep_alive,
            };
            self.input.consume(end);
            return Ok(head);
        }
    }

    /// Whether the connection looks reusable: no unexpected bytes buffered
    /// and the peer has not closed it.
    fn is_reusable(&self) -> bool {
        if !self.input.is_empty() || self.stream.has_buffered() {
            return false;
        }
        // A non-blocking peek (the socket is non-blocking underneath):
        // WouldBlock means open and quiet. The byte itself is not read.
        let mut b = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        match socket2::SockRef::from(self.stream.tcp()).peek(&mut b) {
            Err(e) => e.kind() == io::ErrorKind::WouldBlock,
            Ok(_) => false, // EOF or unexpected data
        }
    }
}

/// Determines the body framing and keep-alive from a response head.
fn response_framing(
    status: u16,
    version: u8,
    headers: &[httparse::Header<'_>],
    head_request: bool,
) -> Result<(Framing, bool), Error> {
    let mut cl: Option<u64> = None;
    let mut chunked = false;
    let mut close = false;
    let mut keep = false;
    for h in headers {
        if h.name.eq_ignore_ascii_case("content-length") {
            match parse_content_length(h.value) {
                Some(n) if cl.is_none_or(|c| c == n) => cl = Some(n),
                _ => return Err(Error::new(ErrorKind::Protocol, "invalid Content-Length")),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            close |= has_token(h.value, "close");
            keep |= has_token(h.value, "keep-alive");
        }
    }
    let mut keep_alive = if version == 0 { keep && !close } else { !close };
    let framing = if head_request || status == 204 || status == 304 || (100..200).contains(&status)
    {
        Framing::Done
    } else if chunked {
        Framing::Chunked(Chunk::Size)
    } else if let Some(n) = cl {
        if n == 0 {
            Framing::Done
        } else {
            Framing::Length(n)
        }
    } else {
        keep_alive = false;
        Framing::Eof
    };
    Ok((framing, keep_alive))
}

/// Encodes a request: request line, `Host`, the given headers,
/// `Content-Length` for a body (if `headers` has no framing header),
/// `Connection: close` when `keep_alive` is false, and the body.
///
/// ```
/// let url = weft_http::Url::parse("http://127.0.0.1:8080/x?y=1").unwrap();
/// let req = weft_http::client::encode_request("GET", &url, &[("Accept", "*/*")], b"", true);
/// assert_eq!(req, b"GET /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\n\r\n");
/// ```
pub fn encode_request(
    method: &str,
    url: &Url,
    headers: &[(&str, &str)],
    body: &[u8],
    keep_alive: bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + body.len());
    encode_head(
        &mut out,
        method,
        url,
        headers.iter().copied(),
        Some(body.len() as u64),
        keep_alive,
        None,
    );
    out.extend_from_slice(body);
    out
}

fn encode_head<'h>(
    out: &mut Vec<u8>,
    method: &str,
    url: &Url,
    headers: impl Iterator<Item = (&'h str, &'h str)>,
    body_len: Option<u64>,
    keep_alive: bool,
    user_agent: Option<&str>,
) {
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(url.path_and_query.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut has_host = false;
    let mut has_framing = false;
    let mut has_ua = false;
    let mut has_conn = false;
    let mut rest = Vec::new();
    for (n, v) in headers {
        if !crate::wire::valid_header_name(n) || !crate::wire::valid_header_value(v.as_bytes()) {
            continue;
        }
        has_host |= n.eq_ignore_ascii_case("host");
        has_framing |=
            n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding");
        has_ua |= n.eq_ignore_ascii_case("user-agent");
        has_conn |= n.eq_ignore_ascii_case("connection");
        rest.extend_from_slice(n.as_bytes());
        rest.extend_from_slice(b": ");
        rest.extend_from_slice(v.as_bytes());
        rest.extend_from_slice(b"\r\n");
    }
    if !has_host {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(url.authority().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let (Some(ua), false) = (user_agent, has_ua) {
        out.extend_from_slice(b"User-Agent: ");
        out.extend_from_slice(ua.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(&rest);
    if !has_framing {
        match body_len {
            Some(0) => {
                if !matches!(method, "GET" | "HEAD" | "DELETE" | "OPTIONS" | "TRACE") {
                    out.extend_from_slice(b"Content-Length: 0\r\n");
                }
            }
            Some(n) => {
                out.extend_from_slice(b"Content-Length: ");
                crate::wire::push_u64(out, n);
                out.extend_from_slice(b"\r\n");
            }
            None => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        }
    }
    if !keep_alive && !has_conn {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

// ---------------------------------------------------------------------------
// The pooling client

/// A blocking HTTP/1.1 client with per-host keep-alive pooling. Cheap to
/// clone (clones share the pool); safe to use from many threads.
///
/// # Examples
///
/// ```
/// use weft_http::{Client, Request, Response};
///
/// let server = weft_http::serve("127.0.0.1:0", |req: &mut Request<'_>| {
///     Response::text(req.header("x-name").unwrap_or("nobody").to_string())
/// })?;
/// let url = format!("http://{}/", server.local_addr());
///
/// let client = Client::new();
/// for _ in 0..3 {
///     let resp = client.get(&url).header("x-name", "weft").send()?;
///     assert_eq!(resp.status(), 200);
///     assert_eq!(resp.text()?, "weft");
/// }
/// // The three requests shared one pooled keep-alive connection.
/// assert_eq!(client.idle_connections(), 1);
/// assert_eq!(server.stats().accepted_connections, 1);
///
/// // Failures are errors with a kind, never panics.
/// let err = client.get("not a url").send().unwrap_err();
/// assert_eq!(err.kind(), weft_http::ErrorKind::InvalidUrl);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    config: ClientConfig,
    /// Made on the first `https://` request.
    tls: std::sync::OnceLock<Arc<rustls::ClientConfig>>,
    pool: Mutex<HashMap<String, Vec<(Connection, Instant)>>>,
}

impl Default for Client {
    fn default() -> Client {
        Client::new()
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("config", &self.inner.config)
            .field("idle_connections", &self.idle_connections())
            .finish()
    }
}

impl Client {
    /// A client with the default configuration.
    pub fn new() -> Client {
        Client::with_config(ClientConfig::default())
    }

    /// A client with `config`.
    pub fn with_config(config: ClientConfig) -> Client {
        Client {
            inner: Arc::new(ClientInner {
                config,
                tls: std::sync::OnceLock::new(),
                pool: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Idle pooled connections, over all hosts.
    pub fn idle_connections(&self) -> usize {
        self.inner
            .pool
            .lock()
            .unpoison()
            .values()
            .map(Vec::len)
            .sum()
    }

    /// A request with `method` to `url`.
    pub fn request(&self, method: &str, url: &str) -> RequestBuilder {
        RequestBuilder {
            client: self.clone(),
            method: method.to_owned(),
            url: Url::parse(url),
            headers: Vec::new(),
            body: ReqBody::None,
            timeout: None,
        }
    }

    /// A `GET` request.
    pub fn get(&self, url: &str) -> RequestBuilder {
        self.request("GET", url)
    }

    /// A `POST` request.
    pub fn post(&self, url: &str) -> RequestBuilder {
        self.request("POST", url)
    }

    /// A `PUT` request.
    pub fn put(&self, url: &str) -> RequestBuilder {
        self.request("PUT", url)
    }

    /// A `DELETE` request.
    pub fn delete(&self, url: &str) -> RequestBuilder {
        self.request("DELETE", url)
    }

    /// A `HEAD` request.
    pub fn head(&self, url: &str) -> RequestBuilder {
        self.request("HEAD", url)
    }

    fn tls_config(&self) -> Arc<rustls::ClientConfig> {
        let cfg = &self.inner.config;
        self.inner
            .tls
            .get_or_init(|| {
                cfg.tls
                    .clone()
                    .unwrap_or_else(|| Arc::new(crate::tls::client_config(&cfg.tls_roots)))
            })
            .clone()
    }

    fn checkout(&self, key: &str) -> Option<Connection> {
        let mut pool = self.inner.pool.lock().unpoison();
        let list = pool.get_mut(key)?;
        let now = Instant::now();
        while let Some((conn, since)) = list.pop() {
            if now.duration_since(since) < self.inner.config.idle_timeout && conn.is_reusable() {
                return Some(conn);
            }
        }
        None
    }

    fn checkin(&self, key: &str, conn: Connection) {
        if !self.inner.config.keep_alive || !conn.is_reusable() {
            return;
        }
        let mut pool = self.inner.pool.lock().unpoison();
        let list = pool.entry(key.to_owned()).or_default();
        if list.len() < self.inner.config.max_idle_per_host {
            list.push((conn, Instant::now()));
        }
    }

    fn connect(&self, url: &Url, limits: &Limits) -> Result<Connection, Error> {
        let addrs = url.socket_addrs()?;
        let mut last = None;
        for a in addrs {
            let t = limits
                .next(Some(self.inner.config.connect_timeout))?
                .unwrap_or(self.inner.config.connect_timeout);
            let c = if url.https {
                Connection::connect_tls(a, &url.host, self.tls_config(), t)
            } else {
                Connection::connect(a, t)
            };
            match c {
                Ok(c) => {
                    let _ = c.set_nodelay(self.inner.config.nodelay);
                    return Ok(c);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            Error::new(ErrorKind::Connect, format!("no address for {}", url.host))
        }))
    }
}

enum ReqBody {
    None,
    Bytes(Vec<u8>),
    Reader(Box<dyn Read + Send>, Option<u64>),
}

/// A request being built; [`send`](RequestBuilder::send) sends it.
#[must_use = "a request does nothing until sent"]
pub struct RequestBuilder {
    client: Client,
    method: String,
    url: Result<Url, Error>,
    headers: Vec<(String, String)>,
    body: ReqBody,
    timeout: Option<Duration>,
}

impl fmt::Debug for RequestBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBuilder")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

impl RequestBuilder {
    /// Appends `key=value` pairs to the URL's query string, each key and
    /// value percent-encoded (everything but `A-Z a-z 0-9 - . _ ~`), so
    /// any text — a URL with its own `?` and `&`, non-ASCII, `+` — arrives
    /// as given. Repeated keys are kept in order.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = weft_http::serve("127.0.0.1:0", |req: &mut weft_http::Request<'_>| {
    ///     req.query_param("url").unwrap_or_default().into_owned()
    /// })?;
    /// let stored = "https://x.com/?a=1&b=2";
    /// let resp = weft_http::Client::new()
    ///     .get(&format!("http://{}/fetch", server.local_addr()))
    ///     .query(&[("url", stored)])
    ///     .send()?;
    /// assert_eq!(resp.text()?, stored); // not "https://x.com/?a=1" and a stray b=2
    /// # Ok(()) }
    /// ```
    pub fn query<K: AsRef<str>, V: AsRef<str>>(mut self, pairs: &[(K, V)]) -> RequestBuilder {
        if let Ok(url) = &mut self.url {
            url.append_query(pairs);
        }
        self
    }

    /// Sets a JSON body (`Content-Type: application/json`) serialized from
    /// `value`; a value that cannot be serialized makes
    /// [`send`](RequestBuilder::send) fail with [`ErrorKind::Write`].
    #[cfg(feature = "json")]
    pub fn json<T: serde::Serialize + ?Sized>(mut self, value: &T) -> RequestBuilder {
        match serde_json::to_vec(value) {
            Ok(v) => {
                self.body = ReqBody::Bytes(v);
                self.headers
                    .retain(|(n, _)| !n.eq_ignore_ascii_case("content-type"));
                self.headers
                    .push(("Content-Type".to_owned(), "application/json".to_owned()));
            }
            Err(e) => {
                self.url = Err(Error::new(
                    ErrorKind::Write,
                    format!("serializing the JSON body: {e}"),
                ));
            }
        }
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> RequestBuilder {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Sets the body (sent with `Content-Length`).
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> RequestBuilder {
        self.body = ReqBody::Bytes(body.into());
        self
    }

    /// Streams the body from `reader`: with `Content-Length: len` if
    /// given, chunked otherwise. Such a request is never retried.
    pub fn body_reader(
        mut self,
        reader: impl Read + Send + 'static,
        len: Option<u64>,
    ) -> RequestBuilder {
        self.body = ReqBody::Reader(Box::new(reader), len);
        self
    }

    /// Overrides the client's total timeout for this request.
    pub fn timeout(mut self, total: Duration) -> RequestBuilder {
        self.timeout = Some(total);
        self
    }

    /// Sends the request and reads the response head. The body is read
    /// from the returned [`Response`].
    ///
    /// A pooled connection that turns out to have been closed by the
    /// server before it answered is replaced by a fresh one once (unless
    /// the body is a reader).
    pub fn send(self) -> Result<Response, Error> {
        let RequestBuilder {
            client,
            method,
            url,
            headers,
            mut body,
            timeout,
        } = self;
        let url = url?;
        let cfg = &client.inner.config;
        let limits = Limits {
            read: cfg.read_timeout,
            write: cfg.write_timeout,
            deadline: timeout.or(cfg.total_timeout).map(|t| Instant::now() + t),
        };
        // Pool key: scheme, host and port.
        let key = format!("{}://{}:{}", url.scheme(), url.host, url.port);
        let body_len = match &body {
            ReqBody::None => Some(0),
            ReqBody::Bytes(b) => Some(b.len() as u64),
            ReqBody::Reader(_, len) => *len,
        };
        let mut head = Vec::with_capacity(256);
        encode_head(
            &mut head,
            &method,
            &url,
            headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
            body_len,
            cfg.keep_alive,
            cfg.user_agent.as_deref(),
        );
        let head_request = method == "HEAD";
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (mut conn, reused) = match client.checkout(&key) {
                Some(c) => (c, true),
                None => (client.connect(&url, &limits)?, false),
            };
            match send_on(
                &mut conn,
                &head,
                &mut body,
                &limits,
                head_request,
                cfg.max_header_bytes,
            ) {
                Ok(h) => {
                    return Ok(Response {
                        head: h,
                        conn: Some(conn),
                        client: client.clone(),
                        key,
                        limits,
                    });
                }
                Err(e) => {
                    let replayable = !matches!(body, ReqBody::Reader(..));
                    if reused && e.no_response && replayable && attempt == 1 {
                        continue;
                    }
                    return Err(e);
                }
            }
        }
    }
}

fn send_on(
    conn: &mut Connection,
    head: &[u8],
    body: &mut ReqBody,
    limits: &Limits,
    head_request: bool,
    max_header: usize,
) -> Result<Head, Error> {
    match body {
        ReqBody::None => conn.write_request(head, limits)?,
        ReqBody::Bytes(b) => {
            conn.requests += 1;
            let _ = conn.stream.set_write_timeout(limits.next(limits.write)?);
            crate::wire::write_all_vectored(&conn.stream, head, b).map_err(|e| {
                let mut err = Error::io(ErrorKind::Write, "sending request", e);
                err.no_response = true;
                err
            })?;
        }
        ReqBody::Reader(r, len) => {
            conn.write_request(head, limits)?;
            let werr = |e| Error::io(ErrorKind::Write, "sending request body", e);
            let mut buf = vec![0u8; 16 * 1024];
            match len {
                Some(n) => {
                    let mut left = *n;
                    while left > 0 {
                        let want = left.min(buf.len() as u64) as usize;
                        let k = r.read(&mut buf[..want]).map_err(werr)?;
                        if k == 0 {
                            return Err(Error::new(
                                ErrorKind::Write,
                                "request body reader ended early",
                            ));
                        }
                        let _ = conn.stream.set_write_timeout(limits.next(limits.write)?);
                        (&conn.stream).write_all(&buf[..k]).map_err(werr)?;
                        left -= k as u64;
                    }
                }
                None => {
                    let mut scratch = Vec::new();
                    let mut w = ChunkedWriter::new(&conn.stream, &mut scratch, 16 * 1024);
                    loop {
                        let k = r.read(&mut buf).map_err(werr)?;
                        if k == 0 {
                            break;
                        }
                        let _ = conn.stream.set_write_timeout(limits.next(limits.write)?);
                        w.write_all(&buf[..k]).map_err(werr)?;
                    }
                    w.finish().map_err(werr)?;
                }
            }
        }
    }
    conn.read_head(head_request, limits, max_header)
}

/// A response: status, headers, and the body as a [`Read`].
///
/// The connection returns to the pool when the body has been read to the
/// end (or there was none) and the response is dropped; a response dropped
/// with unread body closes its connection.
pub struct Response {
    head: Head,
    conn: Option<Connection>,
    client: Client,
    key: String,
    limits: Limits,
}

impl fmt::Debug for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.head.status)
            .field("headers", &self.headers().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Response {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.head.status
    }

    /// The reason phrase as sent.
    pub fn reason(&self) -> &str {
        &self.head.reason
    }

    /// `0` for HTTP/1.0, `1` for HTTP/1.1.
    pub fn version_minor(&self) -> u8 {
        self.head.version
    }

    /// The first value of header `name` (case-insensitive), if valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// All headers (values that are not UTF-8 are skipped).
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        let h = &self.head.head;
        self.head.fields.iter().filter_map(move |&(a, b, c, d)| {
            Some((
                std::str::from_utf8(&h[a..b]).ok()?,
                std::str::from_utf8(&h[c..d]).ok()?,
            ))
        })
    }

    /// Whether the body was sent chunked.
    pub fn is_chunked(&self) -> bool {
        matches!(self.head.framing, Framing::Chunked(_))
    }

    /// Whether the connection will be reused after this response.
    pub fn is_keep_alive(&self) -> bool {
        self.head.keep_alive
    }

    /// Reads the whole body (bounded by `max_body_bytes`).
    pub fn bytes(mut self) -> Result<Vec<u8>, Error> {
        let max = self.client.inner.config.max_body_bytes;
        let mut v = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match self.read_inner(&mut buf) {
                Ok(0) => return Ok(v),
                Ok(n) => {
                    if v.len() as u64 + n as u64 > max {
                        return Err(Error::new(
                            ErrorKind::Protocol,
                            format!("response body exceeds {max} bytes"),
                        ));
                    }
                    v.extend_from_slice(&buf[..n]);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the whole body as UTF-8 text.
    pub fn text(self) -> Result<String, Error> {
        let v = self.bytes()?;
        String::from_utf8(v)
            .map_err(|_| Error::new(ErrorKind::Protocol, "response body is not UTF-8"))
    }

    /// Reads the whole body and deserializes it as JSON; a body that is
    /// not valid JSON for `T` is an [`ErrorKind::Protocol`] error.
    #[cfg(feature = "json")]
    pub fn json<T: serde::de::DeserializeOwned>(self) -> Result<T, Error> {
        let v = self.bytes()?;
        serde_json::from_slice(&v).map_err(|e| {
            Error::new(
                ErrorKind::Protocol,
                format!("response body is not the expected JSON: {e}"),
            )
        })
    }

    /// Reads and discards the body; returns its length.
    pub fn discard(mut self) -> Result<u64, Error> {
        let mut n = 0;
        let mut buf = [0u8; 8192];
        loop {
            match self.read_inner(&mut buf)? {
                0 => return Ok(n),
                k => n += k as u64,
            }
        }
    }

    fn read_inner(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(0);
        };
        if self.head.framing == Framing::Done {
            return Ok(0);
        }
        let _ = conn
            .stream
            .set_read_timeout(self.limits.next(self.limits.read)?);
        let r = read_body(&mut self.head.framing, &mut conn.input, &conn.stream, out);
        match r {
            Ok(n) => {
                if self.head.framing == Framing::Done {
                    self.release();
                }
                Ok(n)
            }
            Err(e) => {
                self.conn = None;
                let kind = if e.kind() == io::ErrorKind::InvalidData {
                    ErrorKind::Protocol
                } else {
                    ErrorKind::Read
                };
                Err(Error::io(kind, "reading response body", e))
            }
        }
    }

    /// Returns the connection to the pool if the exchange is complete.
    fn release(&mut self) {
        if self.head.framing == Framing::Done
            && self.head.keep_alive
            && let Some(conn) = self.conn.take()
        {
            self.client.checkin(&self.key, conn);
        }
    }
}

impl Read for Response {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.read_inner(out).map_err(io::Error::from)
    }
}

impl Drop for Response {
    fn drop(&mut self) {
        self.release();
    }
}

/// Classifies a failed TLS connect: certificate verification, other TLS
/// failure, timeout, or I/O.
fn tls_connect_error(host: &str, addr: SocketAddr, e: io::Error) -> Error {
    match crate::tls::rustls_error(&e) {
        Some(rustls::Error::InvalidCertificate(c)) => {
            let msg = format!("TLS certificate verification failed for {host} ({addr}): {c}");
            Error {
                kind: ErrorKind::Certificate,
                msg,
                source: Some(e),
                no_response: false,
            }
        }
        Some(t) => {
            let msg = format!("TLS handshake with {host} ({addr}) failed: {t}");
            Error {
                kind: ErrorKind::Tls,
                msg,
                source: Some(e),
                no_response: false,
            }
        }
        None if e.kind() == io::ErrorKind::UnexpectedEof => Error::io(
            ErrorKind::Tls,
            &format!("TLS handshake with {host} ({addr})"),
            e,
        ),
        None => Error::io(
            ErrorKind::Connect,
            &format!("TLS handshake with {host} ({addr})"),
            e,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = Url::parse("http://example.com/a?b=c#frag").unwrap();
        assert_eq!(
            (u.host(), u.port(), u.path_and_query()),
            ("example.com", 80, "/a?b=c")
        );
        assert_eq!(u.authority(), "example.com");
        let u = Url::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!((u.port(), u.path_and_query()), (8080, "/"));
        assert_eq!(u.to_string(), "http://127.0.0.1:8080/");
        let u = Url::parse("http://[::1]:81?x").unwrap();
        assert_eq!(
            (u.host(), u.port(), u.path_and_query()),
            ("[::1]", 81, "/?x")
        );
        let u = Url::parse("https://x/a").unwrap();
        assert_eq!(
            (u.scheme(), u.port(), u.authority()),
            ("https", 443, "x".into())
        );
        assert_eq!(u.to_string(), "https://x/a");
        let u = Url::parse("https://x:8443").unwrap();
        assert_eq!((u.port(), u.authority()), (8443, "x:8443".into()));
        assert_eq!(Url::parse("http://x:443/").unwrap().authority(), "x:443");
        assert_eq!(
            Url::parse("ftp://x/").unwrap_err().kind(),
            ErrorKind::InvalidUrl
        );
        assert_eq!(
            Url::parse("http://x:99999/").unwrap_err().kind(),
            ErrorKind::InvalidUrl
        );
        assert_eq!(
            Url::parse("http:///").unwrap_err().kind(),
            ErrorKind::InvalidUrl
        );
    }

    #[test]
    fn encoding() {
        let u = Url::parse("http://h:1/p").unwrap();
        let r = encode_request("POST", &u, &[("X-A", "1")], b"hey", false);
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "POST /p HTTP/1.1\r\nHost: h:1\r\nX-A: 1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nhey"
        );
        let r = encode_request(
            "GET",
            &u,
            &[("Bad\r\nName", "x"), ("X", "a\r\nb")],
            b"",
            true,
        );
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "GET /p HTTP/1.1\r\nHost: h:1\r\n\r\n"
        );
    }
}
