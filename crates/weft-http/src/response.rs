//! The response a handler returns.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};

use crate::error::HttpError;

/// A streaming body writer: called once with the connection's writer after
/// the head has been sent.
pub type StreamFn = Box<dyn FnOnce(&mut dyn Write) -> io::Result<()> + Send + 'static>;

/// A response body.
pub enum Body {
    /// No body (`Content-Length: 0`, or nothing for 204/304).
    Empty,
    /// Bytes known up front, sent with `Content-Length`.
    Bytes(Cow<'static, [u8]>),
    /// A body produced by a writer after the head is sent. With a length,
    /// it is sent with `Content-Length` (writing more or less is an error
    /// that closes the connection); without, chunked (HTTP/1.1) or
    /// delimited by closing the connection (HTTP/1.0).
    Stream {
        /// The exact length, if known.
        len: Option<u64>,
        /// The writer.
        writer: StreamFn,
    },
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Empty => f.write_str("Empty"),
            Body::Bytes(b) => write!(f, "Bytes({} bytes)", b.len()),
            Body::Stream { len, .. } => f.debug_struct("Stream").field("len", len).finish(),
        }
    }
}

/// An HTTP response: status, headers, body.
///
/// ```
/// use weft_http::Response;
/// let r = Response::text("hello").with_header("x-id", "7");
/// assert_eq!(r.status(), 200);
/// let r = Response::json(r#"{"ok":true}"#).with_status(201);
/// assert_eq!(r.header("content-type"), Some("application/json"));
/// let r = Response::stream(|w| w.write_all(b"streamed"));
/// assert_eq!(r.status(), 200);
/// ```
///
/// The server adds `Date`, `Content-Length` / `Transfer-Encoding` and, when
/// the connection is closing, `Connection: close`; `Content-Length`,
/// `Transfer-Encoding` and `Date` set by the handler are ignored.
/// `Connection: close` set by the handler closes the connection after the
/// response. Headers with invalid names or values (CR/LF) are dropped.
#[derive(Debug)]
pub struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(Cow<'static, str>, Cow<'static, str>)>,
    pub(crate) body: Body,
    /// Set on error answers ([`Response::error`], [`HttpError`]): the
    /// error hook renders them (see [`crate::Router::on_error`]).
    pub(crate) error: Option<Box<HttpError>>,
    /// Once the error hook has rendered the answer (and `error` is
    /// `None`), the error it rendered: the server's error log
    /// ([`ServerConfig::error_log`](crate::ServerConfig::error_log)) reads
    /// it after the response is written.
    pub(crate) rendered: Option<Box<HttpError>>,
}

impl Response {
    /// A response with `status` and no body.
    pub fn new(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Body::Empty,
            error: None,
            rendered: None,
        }
    }

    /// `200 OK` with no body.
    pub fn ok() -> Response {
        Response::new(200)
    }

    /// `200 OK` with a `text/plain; charset=utf-8` body.
    pub fn text(body: impl Into<Cow<'static, str>>) -> Response {
        let body = match body.into() {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        };
        Response::new(200)
            .with_header("Content-Type", "text/plain; charset=utf-8")
            .with_body(Body::Bytes(body))
    }

    /// `200 OK` with an `application/json` body (the text is sent as is).
    pub fn json(body: impl Into<Cow<'static, str>>) -> Response {
        Response::text(body).with_header("Content-Type", "application/json")
    }

    /// `200 OK` with an `application/octet-stream` body.
    pub fn bytes(body: impl Into<Cow<'static, [u8]>>) -> Response {
        Response::new(200)
            .with_header("Content-Type", "application/octet-stream")
            .with_body(Body::Bytes(body.into()))
    }

    /// `200 OK` with a body written by `f` after the head, sent chunked
    /// (HTTP/1.1) or close-delimited (HTTP/1.0).
    pub fn stream<F>(f: F) -> Response
    where
        F: FnOnce(&mut dyn Write) -> io::Result<()> + Send + 'static,
    {
        Response::new(200).with_body(Body::Stream {
            len: None,
            writer: Box::new(f),
        })
    }

    /// `200 OK` with a body of exactly `len` bytes written by `f`.
    pub fn stream_sized<F>(len: u64, f: F) -> Response
    where
        F: FnOnce(&mut dyn Write) -> io::Result<()> + Send + 'static,
    {
        Response::new(200).with_body(Body::Stream {
            len: Some(len),
            writer: Box::new(f),
        })
    }

    /// An error response: `status` with its reason phrase as the
    /// message; plain text unless the error hook
    /// ([`Router::on_error`](crate::Router::on_error)) renders it
    /// otherwise. The same as `HttpError::from_status(status).into_response()`.
    pub fn error(status: u16) -> Response {
        HttpError::from_status(status).into_response()
    }

    /// Whether this is an error answer that the error hook will render
    /// ([`Response::error`], an [`HttpError`]).
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }

    /// Replaces the status.
    pub fn with_status(mut self, status: u16) -> Response {
        self.status = status;
        if let Some(e) = &mut self.error {
            e.status = status;
        }
        self
    }

    /// Sets header `name` (replacing earlier values of the same name).
    pub fn with_header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> Response {
        let name = name.into();
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
        self.headers.push((name, value.into()));
        self
    }

    /// Adds header `name` (keeping earlier values, as for `Set-Cookie`).
    pub fn append_header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> Response {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Replaces the body.
    pub fn with_body(mut self, body: Body) -> Response {
        self.body = body;
        self
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref())
    }

    /// All headers set by the handler.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.headers.iter().map(|(n, v)| (n.as_ref(), v.as_ref()))
    }

    /// The body.
    pub fn body(&self) -> &Body {
        &self.body
    }
}

impl From<&'static str> for Response {
    fn from(s: &'static str) -> Response {
        Response::text(s)
    }
}

impl From<String> for Response {
    fn from(s: String) -> Response {
        Response::text(s)
    }
}

impl From<Vec<u8>> for Response {
    fn from(v: Vec<u8>) -> Response {
        Response::bytes(v)
    }
}

/// Anything a handler may return: a [`Response`] or a value that converts
/// into one. Axum's trait of the same name, without the `async`.
///
/// | type | response |
/// |---|---|
/// | [`Response`] | itself |
/// | `&'static str`, `String`, `Cow<'static, str>` | `200`, `text/plain; charset=utf-8` |
/// | `Vec<u8>` | `200`, `application/octet-stream` |
/// | `()` | `200`, empty body |
/// | `(u16, T)` | `T`'s response with that status |
/// | `Result<T, E>` | `T`'s or `E`'s response |
/// | [`HttpError`] | an error answer, rendered by the error hook |
/// | [`Json<T>`](crate::Json) (feature `json`) | `200`, `application/json` |
///
/// A route accepts any `Fn(&mut Request) -> impl IntoResponse`, so `?`
/// works in handlers that return `Result<_, HttpError>`:
///
/// ```
/// use weft_http::{HttpError, IntoResponse, Request, Router};
///
/// fn user(req: &mut Request<'_>) -> Result<String, HttpError> {
///     let id: u32 = req.param("id").unwrap_or("").parse()
///         .map_err(|_| HttpError::bad_request("id must be a number"))?;
///     Ok(format!("user {id}"))
/// }
/// let router = Router::new()
///     .get("/users/:id", user)
///     .get("/health", |_req| "ok")
///     .post("/users", |_req| (201, "created"));
/// # drop(router);
/// assert_eq!((404, "gone").into_response().status(), 404);
/// ```
pub trait IntoResponse {
    /// Converts `self` into a response.
    fn into_response(self) -> Response;
}

impl IntoResponse for Response {
    fn into_response(self) -> Response {
        self
    }
}

impl IntoResponse for &'static str {
    fn into_response(self) -> Response {
        Response::text(self)
    }
}

impl IntoResponse for String {
    fn into_response(self) -> Response {
        Response::text(self)
    }
}

impl IntoResponse for Cow<'static, str> {
    fn into_response(self) -> Response {
        Response::text(self)
    }
}

impl IntoResponse for Vec<u8> {
    fn into_response(self) -> Response {
        Response::bytes(self)
    }
}

impl IntoResponse for () {
    fn into_response(self) -> Response {
        Response::ok()
    }
}

/// `!`, the type of a handler that only panics (`|_req| panic!()`; the
/// 2024 edition infers `!` for it). `!` cannot be named on stable Rust;
/// `fn() -> !`'s output type can.
mod never {
    pub trait Output {
        type Type;
    }
    impl<T> Output for fn() -> T {
        type Type = T;
    }
    pub type Never = <fn() -> ! as Output>::Type;
}

impl IntoResponse for never::Never {
    fn into_response(self) -> Response {
        self
    }
}

impl<T: IntoResponse> IntoResponse for (u16, T) {
    fn into_response(self) -> Response {
        self.1.into_response().with_status(self.0)
    }
}

impl<T: IntoResponse, E: IntoResponse> IntoResponse for Result<T, E> {
    fn into_response(self) -> Response {
        match self {
            Ok(t) => t.into_response(),
            Err(e) => e.into_response(),
        }
    }
}

/// The standard reason phrase of `status` (`"Unknown"` if none).
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}
