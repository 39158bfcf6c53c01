//! Writing responses: serialising a [`Response`] onto the connection (head,
//! framing, copied, vectored or streamed body) and the server's own error
//! answers (`400`, `408`, `413`, `414`, `417`, `431`, `501`, `503`) rendered through the
//! handler's error hook. Called by request processing, the connection loop
//! and the accept loop's `503`.

use std::io::{self, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::{ServerConfig, Shared};
use crate::budget::{Budget, Timed};
use crate::date::push_date;
use crate::error::{HttpError, render};
use crate::request::Version;
use crate::response::{Body, IntoResponse, Response, reason};
use crate::tls::Stream;
use crate::wire::{
    BufferedStream, ChunkedWriter, LimitedWriter, has_token, push_u64, valid_header_name,
    valid_header_value, write_all_vectored,
};

/// Response bodies up to this size are copied behind the head and sent with
/// one `write`.
pub(super) const COPY_BODY: usize = 16 * 1024;

/// The server's own error answer for `status`, with a message that says
/// which limit was hit.
pub(super) fn builtin_error(status: u16, cfg: &ServerConfig) -> HttpError {
    match status {
        400 => HttpError::new(400, "malformed request"),
        408 => HttpError::new(408, "timed out waiting for the request"),
        413 => HttpError::new(
            413,
            format!(
                "request body exceeds the limit of {} bytes",
                cfg.max_body_bytes
            ),
        ),
        414 => HttpError::new(
            414,
            format!(
                "request line exceeds the limit of {} bytes",
                cfg.max_header_bytes
            ),
        ),
        417 => HttpError::new(417, "only Expect: 100-continue is supported"),
        431 => HttpError::new(
            431,
            format!(
                "request head exceeds {} bytes or {} header fields",
                cfg.max_header_bytes, cfg.max_headers
            ),
        ),
        501 => HttpError::new(501, "transfer coding not implemented (only chunked is)"),
        503 => HttpError::from_status(503).with_header("Retry-After", "1"),
        s => HttpError::from_status(s),
    }
}

/// Renders a response marked as an error through the handler's error hook.
pub(super) fn render_error(shared: &Shared, resp: Response) -> Response {
    if resp.error.is_none() {
        return resp;
    }
    render(resp, |e| shared.handler.render_error(e))
}

/// Writes the server's own error answer for `status` (rendered by the
/// error hook) and closes the connection.
pub(super) fn write_error(wire: Wire<'_>, shared: &Shared, status: u16) -> io::Result<()> {
    shared.stats.response(status);
    let resp = render_error(
        shared,
        builtin_error(status, &shared.config).into_response(),
    );
    write_response(wire, resp, Reply::CLOSE).map(|_| ())
}

/// Where a response goes: the connection's stream, the buffers it is
/// serialised in (`out` for the head and small bodies, `scratch` for
/// chunked framing) and the time the client may take to receive it.
pub(super) struct Wire<'a> {
    pub(super) stream: &'a Stream,
    pub(super) out: &'a mut Vec<u8>,
    pub(super) scratch: &'a mut Vec<u8>,
    /// In all, for this response
    /// ([`ServerConfig::write_timeout`], [`ServerConfig::min_data_rate`]).
    pub(super) budget: Budget,
}

impl<'a> Wire<'a> {
    pub(super) fn new(
        stream: &'a Stream,
        out: &'a mut Vec<u8>,
        scratch: &'a mut Vec<u8>,
        cfg: &ServerConfig,
    ) -> Wire<'a> {
        Wire {
            stream,
            out,
            scratch,
            budget: Budget::new(cfg.write_timeout, cfg.min_data_rate),
        }
    }
}

/// How a response answers its request.
#[derive(Clone, Copy)]
pub(super) struct Reply {
    /// The request's HTTP version (an HTTP/1.0 client gets no chunks).
    pub(super) version: Version,
    /// The connection may stay open (the response may still close it).
    pub(super) keep_alive: bool,
    /// A `HEAD` request: the head only, framed as the body would be.
    pub(super) head_only: bool,
}

impl Reply {
    /// The server's own answers outside a request (a full server's `503`,
    /// a rejected head): HTTP/1.1, with a body, then close.
    pub(super) const CLOSE: Reply = Reply {
        version: Version::Http11,
        keep_alive: false,
        head_only: false,
    };
}

/// Writes `resp`; returns whether the connection stays open.
pub(super) fn write_response(wire: Wire<'_>, resp: Response, reply: Reply) -> io::Result<bool> {
    let Wire {
        stream,
        out,
        scratch,
        budget,
    } = wire;
    let mut sink = Timed { stream, budget };
    let Reply {
        version,
        mut keep_alive,
        head_only,
    } = reply;
    let Response {
        status,
        headers,
        body,
        error: _,
        rendered: _,
    } = resp;
    for (n, v) in &headers {
        if n.eq_ignore_ascii_case("connection") && has_token(v.as_bytes(), "close") {
            keep_alive = false;
        }
    }
    let no_body = (100..200).contains(&status) || status == 204 || status == 304;
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    push_u64(out, u64::from(status));
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    push_date(out);
    out.extend_from_slice(b"\r\n");
    for (n, v) in &headers {
        if n.eq_ignore_ascii_case("content-length")
            || n.eq_ignore_ascii_case("transfer-encoding")
            || n.eq_ignore_ascii_case("date")
            || n.eq_ignore_ascii_case("connection")
            || !valid_header_name(n)
            || !valid_header_value(v.as_bytes())
        {
            continue;
        }
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let mut chunked = false;
    if !no_body {
        match &body {
            Body::Empty => out.extend_from_slice(b"Content-Length: 0\r\n"),
            Body::Bytes(b) => {
                out.extend_from_slice(b"Content-Length: ");
                push_u64(out, b.len() as u64);
                out.extend_from_slice(b"\r\n");
            }
            Body::Stream { len: Some(n), .. } => {
                out.extend_from_slice(b"Content-Length: ");
                push_u64(out, *n);
                out.extend_from_slice(b"\r\n");
            }
            Body::Stream { len: None, .. } => {
                if version == Version::Http11 {
                    out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                    chunked = true;
                } else if !head_only {
                    keep_alive = false; // close-delimited
                }
            }
        }
    }
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if version == Version::Http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if head_only || no_body {
        sink.write_all(out)?;
        return Ok(keep_alive);
    }
    match body {
        Body::Empty => sink.write_all(out)?,
        Body::Bytes(b) => {
            if b.len() <= COPY_BODY {
                out.extend_from_slice(&b);
                sink.write_all(out)?;
            } else {
                write_all_vectored(&mut sink, out, &b)?;
            }
        }
        Body::Stream { len, writer } => {
            let buffered = BufferedStream {
                inner: &mut sink,
                buf: out,
                limit: COPY_BODY,
            };
            let r = catch_unwind(AssertUnwindSafe(move || -> io::Result<()> {
                if chunked {
                    let mut w = ChunkedWriter::new(buffered, scratch, 8 * 1024);
                    writer(&mut w)?;
                    w.finish()?.flush()
                } else if let Some(n) = len {
                    let mut w = LimitedWriter {
                        inner: buffered,
                        remaining: n,
                    };
                    writer(&mut w)?;
                    if w.remaining != 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "streamed body is shorter than its declared length",
                        ));
                    }
                    w.inner.flush()
                } else {
                    let mut w = buffered;
                    writer(&mut w)?;
                    w.flush()
                }
            }));
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(io::Error::other("response body writer panicked")),
            }
        }
    }
    Ok(keep_alive)
}
