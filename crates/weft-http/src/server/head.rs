//! A connection's stream and buffers ([`Conn`]) and its request heads:
//! waiting for and reading one (idle and header timeouts, the
//! `max_header_bytes`/`max_headers` limits, early rejection of garbage),
//! then parsing it ([`parse_head`] into the header-slot array of
//! [`header_slots`]). The bottom of the server's files: the connection
//! loop ([`run_connection`](super::conn::run_connection)) reads heads
//! here before each request, and [`process`](super::process::process)
//! parses them; nothing here calls back up.

use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::time::Instant;

use super::stats::inc;
use super::{ACTIVE, ConnSlot, HEAD, IDLE, Shared};
use crate::request::Version;
use crate::tls::Stream;
use crate::wire::InBuf;

/// Initial input buffer per connection.
pub(super) const INPUT_BUF: usize = 4096;

/// A connection's stream and buffers; in platform mode it travels to a
/// pool worker for one request and comes back.
pub(super) struct Conn {
    pub(super) stream: Stream,
    pub(super) peer: SocketAddr,
    pub(super) input: InBuf,
    pub(super) head: Vec<u8>,
    pub(super) out: Vec<u8>,
    pub(super) scratch: Vec<u8>,
    /// Close with `linger_close` (an error response may be followed by
    /// unread input).
    pub(super) linger: bool,
}

/// Header slots kept on the stack; a larger `max_headers` uses the heap.
/// Why not always 256 on the stack: 256 slots are 8 KiB, and a stack page
/// touched once stays resident for the connection's life — at 10,000
/// connections that alone was 80 MB. Stack probes touch every page of a
/// frame even when the array is never written.
pub(super) const SMALL_HEADERS: usize = 64;

/// `max` uninitialised header slots: from `small` when they fit, else
/// from `big` (allocated here).
pub(super) fn header_slots<'s, 'h>(
    small: &'s mut [MaybeUninit<httparse::Header<'h>>; SMALL_HEADERS],
    big: &'s mut Vec<MaybeUninit<httparse::Header<'h>>>,
    max: usize,
) -> &'s mut [MaybeUninit<httparse::Header<'h>>] {
    if max <= SMALL_HEADERS {
        &mut small[..max]
    } else {
        big.resize_with(max, MaybeUninit::uninit);
        &mut big[..]
    }
}

/// Outcome of waiting for a request head.
pub(super) enum Head {
    /// A complete head is in `conn.head`.
    Ready,
    /// Close without a response (EOF, idle timeout, shutdown, shed, I/O
    /// error).
    Close,
    /// No request within `idle_thread_timeout`: hand the connection to the
    /// idle set.
    Idle,
    /// Answer with this error status and close.
    Reject(u16),
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// Waits for a complete request head and moves it into `conn.head`.
/// `first`: on a new connection, the deadline for its first byte.
///
/// The slot's state says what a shutdown or a full server may do to the
/// connection: `IDLE` while waiting for a request, `HEAD` while receiving
/// one (both may be shed), `ACTIVE` once the head is complete. Each move
/// fails once the connection was shed, and the connection then closes.
pub(super) fn read_head(
    conn: &mut Conn,
    shared: &Shared,
    slot: &ConnSlot,
    first: Option<Instant>,
) -> Head {
    let cfg = &shared.config;
    if conn.input.is_empty() {
        conn.input.shrink_if_idle(INPUT_BUF);
        // Idle: no request in progress. Shutdown closes us here.
        if !slot.set_state(IDLE) || shared.is_shutting_down() {
            return Head::Close;
        }
        // Between requests, a plain connection waits on this thread only
        // for `idle_thread_timeout`, then in the idle set.
        let handoff = first.is_none()
            && shared.idle.is_some()
            && !conn.stream.is_tls()
            && cfg.idle_thread_timeout < cfg.idle_timeout;
        let idle = match first {
            Some(d) => d.saturating_duration_since(weft::clock::now()),
            None if handoff => cfg.idle_thread_timeout,
            None => cfg.idle_timeout,
        };
        if idle.is_zero() {
            return Head::Close;
        }
        let _ = conn.stream.set_read_timeout(Some(idle));
        let r = conn.input.fill(&conn.stream, cfg.max_header_bytes + 1);
        match r {
            Ok(0) => return Head::Close,
            Err(e) if handoff && is_timeout(&e) && slot.set_state(ACTIVE) => return Head::Idle,
            Err(_) => return Head::Close,
            Ok(_) => {}
        }
        if !slot.set_state(HEAD) {
            return Head::Close;
        }
        // An interrupt that raced with the data (shutdown) must not hit the
        // handler; the shutting_down flag still closes the connection
        // after this request.
        let _ = weft::interrupted();
    }
    // The head deadline starts with its first byte; computed only when the
    // head did not arrive in one piece.
    let mut deadline: Option<Instant> = None;
    let mut scanned = 0;
    loop {
        if let Some(end) = conn.input.find_head_end(scanned) {
            if end > cfg.max_header_bytes {
                return Head::Reject(too_large(conn.input.data(), cfg.max_header_bytes));
            }
            if !slot.set_state(ACTIVE) {
                return Head::Close;
            }
            conn.head.clear();
            conn.head.extend_from_slice(&conn.input.data()[..end]);
            conn.input.consume(end);
            return Head::Ready;
        }
        let len = conn.input.len();
        if len > cfg.max_header_bytes {
            return Head::Reject(too_large(conn.input.data(), cfg.max_header_bytes));
        }
        // Incomplete: reject garbage early rather than waiting for more.
        let mut small = [const { MaybeUninit::uninit() }; SMALL_HEADERS];
        let mut big = Vec::new();
        let hdrs = header_slots(&mut small, &mut big, cfg.max_headers);
        let mut req = httparse::Request::new(&mut []);
        match req.parse_with_uninit_headers(conn.input.data(), hdrs) {
            Ok(_) => {}
            Err(httparse::Error::TooManyHeaders) => return Head::Reject(431),
            Err(_) => return Head::Reject(400),
        }
        scanned = len;
        let now = weft::clock::now();
        let deadline = *deadline.get_or_insert(now + cfg.header_read_timeout);
        if now >= deadline {
            return Head::Reject(408);
        }
        let _ = conn.stream.set_read_timeout(Some(deadline - now));
        match conn.input.fill(&conn.stream, cfg.max_header_bytes + 1) {
            Ok(0) => {
                inc(&shared.stats.io);
                return Head::Close;
            }
            Ok(_) => {}
            Err(e) if is_timeout(&e) => return Head::Reject(408),
            Err(e) if e.kind() == io::ErrorKind::OutOfMemory => return Head::Reject(431),
            Err(_) => {
                inc(&shared.stats.io);
                return Head::Close;
            }
        }
    }
}

/// The status for a head over `max` bytes: `414 URI Too Long` when the
/// request line alone is (RFC 9112 §3: a server MUST answer 414 to a
/// request-target longer than it wishes to parse), else `431`.
fn too_large(data: &[u8], max: usize) -> u16 {
    let line = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    if line >= max { 414 } else { 431 }
}

/// A parsed request head: the request line and the header fields.
pub(super) struct RequestHead<'h, 'b> {
    pub(super) method: &'b str,
    pub(super) target: &'b str,
    pub(super) version: Version,
    pub(super) headers: &'h [httparse::Header<'b>],
}

/// Parses a complete request head into `slots`. `Err`: the status to
/// answer (`400` malformed, `431` too many header fields).
pub(super) fn parse_head<'h, 'b>(
    head: &'b [u8],
    slots: &'h mut [MaybeUninit<httparse::Header<'b>>],
) -> Result<RequestHead<'h, 'b>, u16> {
    let mut parsed = httparse::Request::new(&mut []);
    match parsed.parse_with_uninit_headers(head, slots) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(400),
        Err(httparse::Error::TooManyHeaders) => return Err(431),
        Err(_) => return Err(400),
    }
    let (Some(method), Some(target), Some(v)) = (parsed.method, parsed.path, parsed.version) else {
        return Err(400);
    };
    let version = if v == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    Ok(RequestHead {
        method,
        target,
        version,
        headers: parsed.headers,
    })
}
