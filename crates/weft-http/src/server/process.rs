//! One request, once its head is read: parse the head, work out body
//! framing and connection semantics, run the handler, write the response
//! and drain what the handler left unread. Called by the connection loop,
//! on the connection's thread or on a platform-mode pool worker.

use std::io::Read;
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::Shared;
use super::conn::Conn;
use super::head::{SMALL_HEADERS, header_slots};
use super::respond::{builtin_error, render_error, write_error, write_response};
use super::stats::inc;
use crate::request::{BodyError, Request, RequestBody, Version};
use crate::response::{IntoResponse, Response};
use crate::tls::Stream;
use crate::wire::{Framing, has_token, parse_content_length};

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
    // Uninitialised: no memset per request.
    let mut small = [const { MaybeUninit::uninit() }; SMALL_HEADERS];
    let mut big = Vec::new();
    let hdrs = header_slots(&mut small, &mut big, cfg.max_headers);
    let mut parsed = httparse::Request::new(&mut []);
    let reject = |status: u16, out: &mut Vec<u8>, linger: &mut bool| {
        shared.stats.error_status(status);
        let _ = write_error(stream, out, &mut Vec::new(), shared, status);
        *linger = true;
        false
    };
    match parsed.parse_with_uninit_headers(head, hdrs) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return reject(400, out, linger),
        Err(httparse::Error::TooManyHeaders) => return reject(431, out, linger),
        Err(_) => return reject(400, out, linger),
    }
    let (Some(method), Some(target), Some(v)) = (parsed.method, parsed.path, parsed.version) else {
        return reject(400, out, linger);
    };
    let version = if v == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    let headers: &[httparse::Header<'_>] = parsed.headers;

    // Framing and connection semantics from the headers.
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding: Option<&[u8]> = None;
    let mut conn_close = false;
    let mut conn_keep_alive = false;
    let mut expect: Option<&[u8]> = None;
    for h in headers {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            match parse_content_length(h.value) {
                Some(n) if content_length.is_none_or(|c| c == n) => content_length = Some(n),
                _ => return reject(400, out, linger),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if transfer_encoding.is_some() {
                return reject(400, out, linger);
            }
            transfer_encoding = Some(h.value);
        } else if name.eq_ignore_ascii_case("connection") {
            conn_close |= has_token(h.value, "close");
            conn_keep_alive |= has_token(h.value, "keep-alive");
        } else if name.eq_ignore_ascii_case("expect") {
            expect = Some(h.value);
        }
    }
    let framing = match (transfer_encoding, content_length) {
        (Some(_), Some(_)) => return reject(400, out, linger), // smuggling risk
        (Some(te), None) => {
            let last = te.rsplit(|&b| b == b',').next().unwrap_or(b"").trim_ascii();
            if version == Version::Http10 || !last.eq_ignore_ascii_case(b"chunked") {
                return reject(400, out, linger);
            }
            Framing::Chunked(crate::wire::Chunk::Size)
        }
        (None, Some(0)) | (None, None) => Framing::Done,
        (None, Some(n)) => {
            if n > cfg.max_body_bytes {
                return reject(413, out, linger);
            }
            Framing::Length(n)
        }
    };
    let mut expect_continue = false;
    if let Some(e) = expect {
        if e.trim_ascii().eq_ignore_ascii_case(b"100-continue") {
            expect_continue = version == Version::Http11 && framing != Framing::Done;
        } else {
            return reject(417, out, linger);
        }
    }
    let (path, query) = split_target(target);

    let mut keep_alive = match version {
        Version::Http11 => !conn_close,
        Version::Http10 => conn_keep_alive && !conn_close,
    };
    let head_only = method == "HEAD";
    inc(&shared.stats.started);

    let mut req = Request {
        method,
        path,
        query,
        version,
        headers,
        params: Vec::new(),
        states: None,
        remote: *peer,
        body: RequestBody {
            framing,
            input,
            stream,
            continue_sent: expect_continue.then_some(false),
            declared_len: content_length,
            read: 0,
            limit: cfg.max_body_bytes,
            error: None,
            timeout: cfg.body_read_timeout,
        },
    };

    // The request in progress, for thread dumps (cleared once answered).
    weft::set_activity(format_args!("{method} {target}"));
    let result = catch_unwind(AssertUnwindSafe(|| shared.handler.handle(&mut req)));
    let mut resp = match result {
        Ok(r) => r,
        Err(_) => {
            inc(&shared.stats.handler_panic);
            keep_alive = false;
            Response::error(500)
        }
    };
    if let Some(err) = req.body.error {
        keep_alive = false;
        *linger = true;
        let status = match err {
            BodyError::TooLarge => 413,
            BodyError::Malformed => 400,
            BodyError::Timeout => 408,
            BodyError::Io => {
                inc(&shared.stats.io);
                inc(&shared.stats.finished);
                return false;
            }
        };
        shared.stats.error_status(status);
        resp = builtin_error(status, cfg).into_response();
    }
    let resp = render_error(shared, resp);
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
    let written = write_response(stream, out, scratch, resp, version, keep_alive, head_only);
    weft::set_activity("");
    keep_alive = match written {
        Ok(k) => k,
        Err(_) => {
            inc(&shared.stats.io);
            false
        }
    };
    if keep_alive && !body_done {
        // Drain what the handler left unread so the next request can be
        // parsed; give up (close) on any problem.
        let mut sink = [0u8; 4096];
        loop {
            match req.body.read(&mut sink) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => {
                    keep_alive = false;
                    break;
                }
            }
        }
    }
    keep_alive
}

/// Splits a request target into path and query; an absolute-form target
/// (`http://host/p?q`) yields its path.
pub(super) fn split_target(target: &str) -> (&str, Option<&str>) {
    let mut t = target;
    if let Some(rest) = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
    {
        t = rest.find('/').map_or("/", |i| &rest[i..]);
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
    }
}
