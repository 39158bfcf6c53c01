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
/// | `Option<T>` | `T`'s response, or a `404` error answer for `None` |
/// | [`Redirect`] | `302`, `303`, `307` or `308` with `Location` |
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

/// `None` is a `404 Not Found` error answer (rendered by the error hook);
/// `Some(t)` is `t`'s response. So a handler that looks something up
/// returns the `Option` as it is:
///
/// ```
/// use weft_http::{HttpError, IntoResponse, Request, Router};
///
/// fn find(code: &str) -> Option<String> {
///     (code == "rs").then(|| "https://www.rust-lang.org".to_owned())
/// }
/// let router = Router::new().get("/links/:code", |req| find(req.param("code").unwrap_or("")));
/// # drop(router);
/// assert_eq!(find("rs").into_response().status(), 200);
/// assert_eq!(find("go").into_response().status(), 404);
/// ```
///
/// For a message of your own, [`OptionExt::or_not_found`](crate::OptionExt::or_not_found).
impl<T: IntoResponse> IntoResponse for Option<T> {
    fn into_response(self) -> Response {
        match self {
            Some(t) => t.into_response(),
            None => Response::error(404),
        }
    }
}

/// A redirect: a `3xx` status and a `Location` header (axum's type of the
/// same name).
///
/// | constructor | status | the client's next request |
/// |---|---|---|
/// | [`Redirect::to`] | `303 See Other` | `GET` (after a form's `POST`) |
/// | [`Redirect::temporary`] | `307 Temporary Redirect` | same method and body |
/// | [`Redirect::permanent`] | `308 Permanent Redirect` | same method and body, cacheable |
/// | [`Redirect::found`] | `302 Found` | `GET` in practice (the classic link redirect) |
///
/// A location with a CR, LF or NUL character cannot be sent in a
/// header: the response is then a `500` error answer whose cause names the
/// location, never a header with the character removed.
///
/// ```
/// use weft_http::{IntoResponse, Redirect};
/// let r = Redirect::temporary("/login?next=%2Fadmin").into_response();
/// assert_eq!((r.status(), r.header("location")), (307, Some("/login?next=%2Fadmin")));
/// assert_eq!(Redirect::found("https://example.com/").into_response().status(), 302);
/// assert_eq!(Redirect::to("/a\r\nSet-Cookie: x=1").into_response().status(), 500);
/// ```
#[derive(Clone, Debug)]
pub struct Redirect {
    status: u16,
    location: Cow<'static, str>,
}

impl Redirect {
    /// `303 See Other` to `location`: the client follows with a `GET`
    /// (the answer to a form's `POST`).
    pub fn to(location: impl Into<Cow<'static, str>>) -> Redirect {
        Redirect::with_status(303, location)
    }

    /// `307 Temporary Redirect` to `location`: the client repeats the
    /// request there, with its method and body.
    pub fn temporary(location: impl Into<Cow<'static, str>>) -> Redirect {
        Redirect::with_status(307, location)
    }

    /// `308 Permanent Redirect` to `location`: as
    /// [`temporary`](Redirect::temporary), and the client may remember it.
    pub fn permanent(location: impl Into<Cow<'static, str>>) -> Redirect {
        Redirect::with_status(308, location)
    }

    /// `302 Found` to `location`: what link shorteners answer (browsers
    /// follow it with a `GET`).
    pub fn found(location: impl Into<Cow<'static, str>>) -> Redirect {
        Redirect::with_status(302, location)
    }

    fn with_status(status: u16, location: impl Into<Cow<'static, str>>) -> Redirect {
        Redirect {
            status,
            location: location.into(),
        }
    }

    /// The status: `302`, `303`, `307` or `308`.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Where the client is sent.
    pub fn location(&self) -> &str {
        &self.location
    }
}

impl IntoResponse for Redirect {
    fn into_response(self) -> Response {
        if !crate::wire::valid_header_value(self.location.as_bytes()) {
            let cause = format!(
                "redirect location {:?} has a character a header cannot carry",
                self.location
            );
            return HttpError::internal(cause).into_response();
        }
        Response::new(self.status).with_header("Location", self.location)
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
