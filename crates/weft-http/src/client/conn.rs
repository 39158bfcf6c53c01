//! One HTTP/1.1 connection without pooling ([`Connection`]): connecting
//! (plain or TLS), writing a request, reading and parsing response heads
//! and their framing, the allocation-free [`exchange`](Connection::exchange)
//! of the load generator, and the reuse check. Used by the pooling client,
//! the request builder, the response, and directly by `weft-load`.

use std::fmt;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft::net::TcpStream;

use super::error::{Error, ErrorKind, tls_connect_error};
use crate::tls::Stream;
use crate::wire::{Chunk, Framing, InBuf, has_token, parse_content_length, read_body};

/// Deadlines of one request.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    pub(super) read: Option<Duration>,
    pub(super) write: Option<Duration>,
    pub(super) deadline: Option<Instant>,
}

impl Limits {
    /// The timeout for the next operation: the per-operation timeout capped
    /// by what is left until the deadline.
    pub(super) fn next(&self, per_op: Option<Duration>) -> Result<Option<Duration>, Error> {
        match self.deadline {
            None => Ok(per_op),
            Some(d) => {
                // weft's clock: virtual time inside a simulation.
                let left = d.saturating_duration_since(weft::clock::now());
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
/// [`Client`](super::Client) and of the load generator's virtual users.
pub struct Connection {
    pub(super) stream: Stream,
    handshake: Option<Duration>,
    pub(super) input: InBuf,
    /// Scratch space for discarded bodies.
    sink: Vec<u8>,
    pub(super) requests: u64,
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
pub(super) struct Head {
    pub(super) status: u16,
    pub(super) reason: String,
    pub(super) version: u8,
    pub(super) head: Vec<u8>,
    /// (name, value) ranges into `head`.
    pub(super) fields: Vec<(usize, usize, usize, usize)>,
    pub(super) framing: Framing,
    pub(super) keep_alive: bool,
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

    /// Sends a complete, already encoded request (see
    /// [`encode_request`](super::encode_request)) and reads the response,
    /// discarding its body. `head_request` must be true for `HEAD` requests
    /// (their responses have no body). `timeout` bounds each read and write.
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

    pub(super) fn write_request(&mut self, bytes: &[u8], limits: &Limits) -> Result<(), Error> {
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
    pub(super) fn read_head(
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
    pub(super) fn is_reusable(&self) -> bool {
        if !self.input.is_empty() || self.stream.has_buffered() {
            return false;
        }
        // A non-blocking peek: WouldBlock means open and quiet. The byte
        // itself is not read.
        match self.stream.tcp().try_peek(&mut [0u8; 1]) {
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
