//! One request, once its head is read: parse the head, work out body
//! framing and connection semantics, run the handler, write the response
//! and drain what the handler left unread. Called by the connection loop,
//! on the connection's thread or on a platform-mode pool worker.

use std::io::Read;
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::Shared;
use super::head::{Conn, SMALL_HEADERS, header_slots, parse_head};
use super::log::log_error;
use super::respond::{Reply, Wire, builtin_error, render_error, write_error, write_response};
use super::stats::inc;
use crate::budget::Budget;
use crate::error::HttpError;
use crate::request::{BodyError, Request, RequestBody, Version};
use crate::response::{IntoResponse, Response};
use crate::tls::Stream;
use crate::wire::{Framing, has_token, parse_content_length, valid_host};

/// Parses the head in `conn.head`, runs the handler, writes the response.
/// Returns whether the connection may serve another request.
pub(super) fn process(conn: &mut Conn, shared: &Shared) -> bool {
    let cfg = &shared.config;
    let Conn {
        stream,
        peer,
        input,
        head,
        out,
        scratch,
        linger,
    } = conn;
    let stream: &Stream = stream;
    let reject = |status: u16, out: &mut Vec<u8>, linger: &mut bool| {
        shared.stats.error_status(status);
        let mut scratch = Vec::new();
        let wire = Wire::new(stream, out, &mut scratch, cfg);
        let _ = write_error(wire, shared, status);
        *linger = true;
        false
    };
    // Uninitialised: no memset per request.
    let mut small = [const { MaybeUninit::uninit() }; SMALL_HEADERS];
    let mut big = Vec::new();
    let hdrs = header_slots(&mut small, &mut big, cfg.max_headers);
    let head = match parse_head(head, hdrs) {
        Ok(h) => h,
        Err(status) => return reject(status, out, linger),
    };
    if let Err(status) = check_target(head.method, head.target) {
        return reject(status, out, linger);
    }
    let sem = match semantics(head.headers, head.version, cfg.max_body_bytes) {
        Ok(s) => s,
        Err(status) => return reject(status, out, linger),
    };
    let (path, query) = split_target(head.target);
    let mut keep_alive = sem.keep_alive;
    inc(&shared.stats.started);

    let mut req = Request {
        method: head.method,
        path,
        original_path: path,
        query,
        version: head.version,
        headers: head.headers,
        params: Vec::new(),
        states: None,
        remote: *peer,
        body: RequestBody {
            framing: sem.framing,
            input,
            stream,
            continue_sent: sem.expect_continue.then_some(false),
            declared_len: sem.content_length,
            read: 0,
            limit: cfg.max_body_bytes,
            error: None,
            budget: Budget::new(cfg.body_read_timeout, cfg.min_data_rate),
        },
        activity: None,
    };

    // The request in progress, for thread dumps (cleared once answered).
    weft::set_activity(format_args!("{} {}", head.method, head.target));
    let Some(resp) = run_handler(shared, &mut req, &mut keep_alive, linger) else {
        return false;
    };
    respond(shared, stream, &mut req, resp, out, scratch, keep_alive)
}

/// What a request's headers say about its body and its connection.
struct Semantics {
    framing: Framing,
    content_length: Option<u64>,
    /// The client waits for `100 Continue` before sending the body.
    expect_continue: bool,
    /// The client asks to keep the connection open.
    keep_alive: bool,
}

/// Body framing and connection semantics from the header fields, with
/// the checks RFC 9112 and RFC 9110 make a server's duty. `Err`: the status
/// to answer:
///
/// - `400`: no `Host` in an HTTP/1.1 request, more than one, or an invalid
///   one (RFC 9112 §3.2); `Content-Length` invalid or given twice with
///   different values (§6.3, RFC 9110 §8.6); `Transfer-Encoding` together
///   with `Content-Length` (§6.1: we reject rather than let one override
///   the other), in an HTTP/1.0 request (§6.1), given twice, with
///   `chunked` not last (§6.3), applied twice (§6.1) or with parameters
///   (§7);
/// - `501`: a transfer coding other than `chunked` before it, which this
///   server does not implement (§6.1);
/// - `413`: a `Content-Length` over `max_body`;
/// - `417`: an `Expect` other than `100-continue` (RFC 9110 §10.1.1).
fn semantics(
    headers: &[httparse::Header<'_>],
    version: Version,
    max_body: u64,
) -> Result<Semantics, u16> {
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding: Option<&[u8]> = None;
    let mut hosts = 0usize;
    let mut conn_close = false;
    let mut conn_keep_alive = false;
    let mut expect: Option<&[u8]> = None;
    for h in headers {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            match parse_content_length(h.value) {
                Some(n) if content_length.is_none_or(|c| c == n) => content_length = Some(n),
                _ => return Err(400),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if transfer_encoding.is_some() {
                return Err(400);
            }
            transfer_encoding = Some(h.value);
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
            if hosts > 1 || !valid_host(h.value) {
                return Err(400);
            }
        } else if name.eq_ignore_ascii_case("connection") {
            conn_close |= has_token(h.value, "close");
            conn_keep_alive |= has_token(h.value, "keep-alive");
        } else if name.eq_ignore_ascii_case("expect") {
            expect = Some(h.value);
        }
    }
    if hosts == 0 && version == Version::Http11 {
        return Err(400);
    }
    let framing = match (transfer_encoding, content_length) {
        (Some(_), Some(_)) => return Err(400), // smuggling risk
        (Some(_), None) if version == Version::Http10 => return Err(400),
        (Some(te), None) => {
            check_codings(te)?;
            Framing::Chunked(crate::wire::Chunk::Size)
        }
        (None, Some(0)) | (None, None) => Framing::Done,
        (None, Some(n)) => {
            if n > max_body {
                return Err(413);
            }
            Framing::Length(n)
        }
    };
    let mut expect_continue = false;
    if let Some(e) = expect {
        if e.trim_ascii().eq_ignore_ascii_case(b"100-continue") {
            expect_continue = version == Version::Http11 && framing != Framing::Done;
        } else {
            return Err(417);
        }
    }
    let keep_alive = match version {
        Version::Http11 => !conn_close,
        Version::Http10 => conn_keep_alive && !conn_close,
    };
    Ok(Semantics {
        framing,
        content_length,
        expect_continue,
        keep_alive,
    })
}

/// A request's `Transfer-Encoding` list: `chunked` exactly once, last and
/// without parameters (else `400`); nothing before it, as this server
/// implements no other transfer coding (else `501`). Empty list elements
/// are ignored (RFC 9110 §5.6.1.2).
fn check_codings(te: &[u8]) -> Result<(), u16> {
    let mut codings = te
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|c| !c.is_empty());
    let Some(last) = codings.next_back() else {
        return Err(400);
    };
    if !last.eq_ignore_ascii_case(b"chunked") {
        return Err(400);
    }
    let mut unknown = false;
    for c in codings {
        let name = c.split(|&b| b == b';').next().unwrap_or(c).trim_ascii();
        if name.eq_ignore_ascii_case(b"chunked") {
            return Err(400);
        }
        unknown = true;
    }
    if unknown { Err(501) } else { Ok(()) }
}

/// The request-target's form against the method (RFC 9112 §3.2):
/// origin-form (`/path`) for any method, absolute-form (`http://` or
/// `https://`, any case) for any method, authority-form (`host:port`) only
/// for `CONNECT`, asterisk-form (`*`) only for `OPTIONS`; anything else is
/// an invalid request-line (`400`).
fn check_target(method: &str, target: &str) -> Result<(), u16> {
    let ok = if target.starts_with('/') {
        true
    } else if target == "*" {
        method == "OPTIONS"
    } else if method == "CONNECT" {
        target.contains(':') && valid_host(target.as_bytes())
    } else {
        strip_scheme(target).is_some_and(|rest| {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            end > 0 && valid_host(&rest.as_bytes()[..end])
        })
    };
    if ok { Ok(()) } else { Err(400) }
}

/// An absolute-form target without its `http://` or `https://` (any case).
fn strip_scheme(target: &str) -> Option<&str> {
    let (scheme, rest) = target.split_once("://")?;
    (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")).then_some(rest)
}

/// Runs the handler with a panic caught (answered `500`, connection
/// closed). A request body that failed while the handler read it
/// replaces the handler's response with the server's own error answer.
/// `None`: the connection broke while the body was read (counted); close
/// without an answer.
fn run_handler(
    shared: &Shared,
    req: &mut Request<'_>,
    keep_alive: &mut bool,
    linger: &mut bool,
) -> Option<Response> {
    let result = catch_unwind(AssertUnwindSafe(|| shared.handler.handle(req)));
    let mut resp = match result {
        Ok(r) => r,
        Err(payload) => {
            inc(&shared.stats.handler_panic);
            *keep_alive = false;
            panicked(req, &*payload)
        }
    };
    if let Some(err) = req.body.error {
        *keep_alive = false;
        *linger = true;
        let status = match err {
            BodyError::TooLarge => 413,
            BodyError::Malformed => 400,
            BodyError::Timeout => 408,
            BodyError::Io => {
                inc(&shared.stats.io);
                inc(&shared.stats.finished);
                return None;
            }
        };
        shared.stats.error_status(status);
        resp = builtin_error(status, &shared.config).into_response();
    }
    Some(resp)
}

/// The `500` for a handler that panicked with `payload`: its message and
/// location, and the route the router saw panic, for the error hook.
#[cold]
fn panicked(req: &mut Request<'_>, payload: &(dyn std::any::Any + Send)) -> Response {
    let (panic, route) = crate::panic::caught(payload);
    let mut err = HttpError::from_status(500).with_source(panic);
    err.request = Some(Box::new(req.info(route)));
    err.into_response()
}

/// Renders and writes the response (counted just before the write; no
/// body for `HEAD`), logs it if it is a `5xx` error answer
/// ([`ServerConfig::error_log`](super::ServerConfig::error_log)), then
/// drains what the handler left of the body so the next request can be
/// parsed. Returns whether the connection stays open.
fn respond(
    shared: &Shared,
    stream: &Stream,
    req: &mut Request<'_>,
    resp: Response,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    mut keep_alive: bool,
) -> bool {
    let head_only = req.method == "HEAD";
    let mut resp = if resp.error.is_some() {
        render_error(shared, with_request(resp, req))
    } else {
        resp
    };
    let to_log = resp
        .rendered
        .take()
        .filter(|_| resp.status >= 500 && shared.config.error_log);
    let body_done = req.body.framing == Framing::Done;
    if !body_done && req.body.continue_sent == Some(false) {
        // The client is waiting for 100 Continue and will not send the
        // body: answer, then close rather than guess where the next request
        // starts.
        keep_alive = false;
    }
    if shared.is_shutting_down() {
        keep_alive = false;
    }
    // Counted before the write, so that a client that has its response
    // also sees it in the statistics.
    shared.stats.response(resp.status);
    inc(&shared.stats.finished);
    let wire = Wire::new(stream, out, scratch, &shared.config);
    let reply = Reply {
        version: req.version,
        keep_alive,
        head_only,
    };
    let written = write_response(wire, resp, reply);
    weft::set_activity("");
    if let Some(err) = to_log {
        log_error(&err);
    }
    keep_alive = match written {
        Ok(k) => k,
        Err(_) => {
            inc(&shared.stats.io);
            false
        }
    };
    if keep_alive && !body_done {
        keep_alive = drain_body(&mut req.body);
    }
    keep_alive
}

/// Names `req` in the error of `resp` unless a router did.
#[cold]
fn with_request(mut resp: Response, req: &Request<'_>) -> Response {
    if let Some(err) = &mut resp.error
        && err.request.is_none()
    {
        err.request = Some(Box::new(req.info(None)));
    }
    resp
}

/// Reads and discards the rest of a request body; `false` on any problem
/// (the connection must close).
fn drain_body(body: &mut RequestBody<'_>) -> bool {
    let mut sink = [0u8; 4096];
    loop {
        match body.read(&mut sink) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
}

/// Splits a request target into path and query; an absolute-form target
/// (`http://host/p?q`) yields its path.
pub(super) fn split_target(target: &str) -> (&str, Option<&str>) {
    let mut t = target;
    if !t.starts_with('/')
        && let Some(rest) = strip_scheme(t)
    {
        t = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => &rest[i..],
            // `http://h?q`: the path is `/`; the query follows.
            Some(i) => return ("/", Some(&rest[i + 1..])),
            None => "/",
        };
    }
    match t.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (t, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(split_target("/a?b=1"), ("/a", Some("b=1")));
        assert_eq!(split_target("/a"), ("/a", None));
        assert_eq!(split_target("http://h:1/x?y"), ("/x", Some("y")));
        assert_eq!(split_target("http://h:1"), ("/", None));
        assert_eq!(split_target("HTTP://h/x"), ("/x", None));
        assert_eq!(split_target("http://h?a=/b"), ("/", Some("a=/b")));
    }

    #[test]
    fn target_forms() {
        assert_eq!(check_target("GET", "/a"), Ok(()));
        assert_eq!(check_target("GET", "http://h:1/a"), Ok(()));
        assert_eq!(check_target("GET", "HTTPS://h"), Ok(()));
        assert_eq!(check_target("OPTIONS", "*"), Ok(()));
        assert_eq!(check_target("GET", "*"), Err(400));
        assert_eq!(check_target("CONNECT", "h:443"), Ok(()));
        assert_eq!(check_target("GET", "h:443"), Err(400));
        assert_eq!(check_target("GET", "a"), Err(400));
        assert_eq!(check_target("GET", "ftp://h/a"), Err(400));
        assert_eq!(check_target("GET", "http:///a"), Err(400));
    }

    #[test]
    fn transfer_codings() {
        assert_eq!(check_codings(b"chunked"), Ok(()));
        assert_eq!(check_codings(b" , Chunked"), Ok(()));
        assert_eq!(check_codings(b"gzip, chunked"), Err(501));
        assert_eq!(check_codings(b"chunked, gzip"), Err(400));
        assert_eq!(check_codings(b"chunked, chunked"), Err(400));
        assert_eq!(check_codings(b"chunked;q=1"), Err(400));
        assert_eq!(check_codings(b""), Err(400));
        assert_eq!(check_codings(b"xchunked"), Err(400));
    }
}
