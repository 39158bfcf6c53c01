//! [`HttpError`]: the error a handler returns with `?`, and the one value
//! behind every error answer, built-in or not.
//!
//! # Design
//!
//! A handler that returns `Result<T, HttpError>` can use `?` on anything:
//! an [`HttpError`] passes through with its status (e.g. the `422` of
//! [`Request::json`](crate::Request::json)), and every other error type
//! becomes an answer whose message hides the cause from the client but
//! keeps it as [`HttpError::source`] for logging. This is anyhow's trick:
//! `HttpError` deliberately does not implement `std::error::Error`, so the
//! blanket `From` does not overlap with `From<HttpError> for HttpError`.
//!
//! The blanket `From` cannot be specialised per type, so the status of a
//! converted error is picked by looking at its `source()` chain: the first
//! error of a type weft-http knows decides (its client's: `502`/`504`;
//! with feature `pg`, weft-pg's: `409`/`503`/`500`), else `500`. Such an
//! error is marked as converted; a [`Router::map_error`](crate::Router::map_error)
//! of the application may answer it otherwise, when it leaves the router.
//! So the mapping of error types to answers lives in one place, with no
//! `map_err` at call sites. weft-http depends on weft-pg (optionally), not
//! the other way round.
//!
//! An error is turned into a response late: [`HttpError::into_response`]
//! and [`Response::error`] produce a response *marked* as an error, and
//! the server (or the innermost [`Router`](crate::Router) with a hook)
//! renders it through the hook of [`Router::on_error`](crate::Router::on_error)
//! — the same hook that renders the server's own answers (`400`, `404`,
//! `405`, `408`, `413`, `417`, `431`, `500`, `503`). So a JSON API answers
//! every error in JSON with one line, `.on_error(HttpError::json_response)`.
//! Without a hook, errors are plain text (`text/plain`, the message and a
//! newline), as before. Before the hook runs, the router (or the server)
//! names the request in the error ([`RequestInfo`]); a panic's `500` has
//! the panic ([`HandlerPanic`]) as its cause.

use std::borrow::Cow;
use std::fmt;

use crate::response::{IntoResponse, Response, reason};

type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An HTTP error answer: a status, a message for the client, optionally
/// the request field at fault, extra headers, and the cause (not sent).
///
/// ```
/// use weft_http::{HttpError, IntoResponse};
///
/// fn parse_id(s: &str) -> Result<u64, HttpError> {
///     s.parse().map_err(|_| HttpError::bad_request("id must be a number").with_field("id"))
/// }
/// let e = parse_id("x").unwrap_err();
/// assert_eq!((e.status(), e.message(), e.field()), (400, "id must be a number", Some("id")));
///
/// // Any other error becomes a 500 that keeps its cause for the logs
/// // (unless its type has a status of its own: see `Router::map_error`).
/// fn read() -> Result<String, HttpError> {
///     Ok(std::fs::read_to_string("/nonexistent/file")?)
/// }
/// let e = read().unwrap_err();
/// assert_eq!((e.status(), e.message()), (500, "Internal Server Error"));
/// assert!(e.source().is_some());
/// assert_eq!(e.into_response().status(), 500);
/// ```
pub struct HttpError {
    pub(crate) status: u16,
    message: Cow<'static, str>,
    field: Option<String>,
    pub(crate) headers: Vec<(Cow<'static, str>, Cow<'static, str>)>,
    pub(crate) source: Option<Source>,
    /// Made by the blanket `From` (`?`): the status was picked from the
    /// error's type, so [`Router::map_error`](crate::Router::map_error)
    /// may pick another.
    pub(crate) converted: bool,
    /// The request it answers, once known.
    pub(crate) request: Option<Box<RequestInfo>>,
}

impl HttpError {
    /// An error with `status` and a message for the client.
    pub fn new(status: u16, message: impl Into<Cow<'static, str>>) -> HttpError {
        HttpError {
            status,
            message: message.into(),
            field: None,
            headers: Vec::new(),
            source: None,
            converted: false,
            request: None,
        }
    }

    /// An error with `status` and its reason phrase as the message.
    pub fn from_status(status: u16) -> HttpError {
        HttpError::new(status, reason(status))
    }

    /// `400 Bad Request`.
    pub fn bad_request(message: impl Into<Cow<'static, str>>) -> HttpError {
        HttpError::new(400, message)
    }

    /// `401 Unauthorized`.
    pub fn unauthorized(message: impl Into<Cow<'static, str>>) -> HttpError {
        HttpError::new(401, message)
    }

    /// `403 Forbidden`.
    pub fn forbidden(message: impl Into<Cow<'static, str>>) -> HttpError {
        HttpError::new(403, message)
    }

    /// `404 Not Found`.
    pub fn not_found(message: impl Into<Cow<'static, str>>) -> HttpError {
        HttpError::new(404, message)
    }

    /// `409 Conflict`.
    pub fn conflict(message: impl Into<Cow<'static, str>>) -> HttpError {
        HttpError::new(409, message)
    }

    /// `422 Unprocessable Content`.
    pub fn unprocessable(message: impl Into<Cow<'static, str>>) -> HttpError {
        HttpError::new(422, message)
    }

    /// `429 Too Many Requests` (add a `Retry-After` with
    /// [`with_header`](HttpError::with_header)).
    pub fn too_many_requests(message: impl Into<Cow<'static, str>>) -> HttpError {
        HttpError::new(429, message)
    }

    /// `502 Bad Gateway`: an upstream service failed or answered badly.
    pub fn bad_gateway(message: impl Into<Cow<'static, str>>) -> HttpError {
        HttpError::new(502, message)
    }

    /// `503 Service Unavailable` (add a `Retry-After` with
    /// [`with_header`](HttpError::with_header) when it is worth retrying).
    pub fn service_unavailable(message: impl Into<Cow<'static, str>>) -> HttpError {
        HttpError::new(503, message)
    }

    /// `504 Gateway Timeout`: an upstream service did not answer in time.
    pub fn gateway_timeout(message: impl Into<Cow<'static, str>>) -> HttpError {
        HttpError::new(504, message)
    }

    /// `500 Internal Server Error` with the generic message, keeping
    /// `source` for logging (it is not sent to the client).
    pub fn internal(source: impl Into<Source>) -> HttpError {
        HttpError::from_status(500).with_source(source)
    }

    /// Names the request field at fault (a JSON path such as
    /// `items[0].name`, or a query parameter).
    pub fn with_field(mut self, field: impl Into<String>) -> HttpError {
        self.field = Some(field.into());
        self
    }

    /// Adds a header to the answer (e.g. `Retry-After`,
    /// `WWW-Authenticate`); kept whatever the hook renders.
    pub fn with_header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> HttpError {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Replaces the message for the client, keeping the status, the
    /// headers and the cause: the way to word an error whose status `?`
    /// picked (see [`ResultExt::message_on`](crate::ResultExt::message_on)).
    pub fn with_message(mut self, message: impl Into<Cow<'static, str>>) -> HttpError {
        self.message = message.into();
        self
    }

    /// Keeps `source` as the cause (not sent to the client).
    pub fn with_source(mut self, source: impl Into<Source>) -> HttpError {
        self.source = Some(source.into());
        self
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The message for the client.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The request field at fault, if known.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The cause, if any (for logging; never sent). A panic's `500` has a
    /// [`HandlerPanic`] here.
    pub fn source(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }

    /// The request this error answers: method, path, route and activity,
    /// for the error hook's log line. `None` for the server's answers
    /// before a request was read (`400`, `408`, `431`, a full server's
    /// `503`) and for an error not yet answered.
    pub fn request(&self) -> Option<&RequestInfo> {
        self.request.as_deref()
    }

    /// The default rendering: `text/plain`, the message and a newline.
    ///
    /// ```
    /// use weft_http::{Body, HttpError};
    /// let r = weft_http::HttpError::not_found("no such user").text_response();
    /// assert_eq!(r.status(), 404);
    /// assert!(matches!(r.body(), Body::Bytes(b) if &b[..] == b"no such user\n"));
    /// ```
    pub fn text_response(&self) -> Response {
        let mut msg = String::with_capacity(self.message.len() + 1);
        msg.push_str(&self.message);
        msg.push('\n');
        Response::text(msg).with_status(self.status)
    }

    /// A JSON rendering for APIs: `{"error": message, "status": status}`,
    /// plus `"field"` when known. Pass it to
    /// [`Router::on_error`](crate::Router::on_error) to answer every error
    /// in JSON.
    ///
    /// ```
    /// use weft_http::{Body, HttpError};
    /// let r = HttpError::unprocessable("missing field `title`").with_field("title").json_response();
    /// assert_eq!(r.header("content-type"), Some("application/json"));
    /// let Body::Bytes(b) = r.body() else { unreachable!() };
    /// assert_eq!(
    ///     std::str::from_utf8(b).unwrap(),
    ///     r#"{"error":"missing field `title`","status":422,"field":"title"}"#
    /// );
    /// ```
    #[cfg(feature = "json")]
    pub fn json_response(&self) -> Response {
        let mut body = String::with_capacity(self.message.len() + 40);
        body.push_str("{\"error\":");
        body.push_str(&serde_json::Value::from(&*self.message).to_string());
        body.push_str(",\"status\":");
        body.push_str(&self.status.to_string());
        if let Some(f) = &self.field {
            body.push_str(",\"field\":");
            body.push_str(&serde_json::Value::from(f.as_str()).to_string());
        }
        body.push('}');
        Response::json(body).with_status(self.status)
    }
}

impl<E> From<E> for HttpError
where
    E: std::error::Error + Send + Sync + 'static,
{
    /// Any error is a `500` whose cause is kept but not sent, unless its
    /// source chain holds an error type weft-http knows (see the module
    /// docs); a [`Router::map_error`](crate::Router::map_error) may map it
    /// again.
    fn from(e: E) -> HttpError {
        let mut err = classify(&e).unwrap_or_else(|| HttpError::from_status(500));
        err.source = Some(Box::new(e));
        err.converted = true;
        err
    }
}

/// The answer for an error type weft-http knows, found anywhere in
/// `e`'s source chain: its own client's errors (`502`, `504`) and, with
/// feature `pg`, weft-pg's.
fn classify(e: &(dyn std::error::Error + 'static)) -> Option<HttpError> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(c) = e.downcast_ref::<crate::client::Error>() {
            return Some(client_error(c));
        }
        #[cfg(feature = "pg")]
        if let Some(pg) = e.downcast_ref::<weft_pg::Error>() {
            return Some(pg_error(pg));
        }
        next = e.source();
    }
    None
}

/// An upstream call with weft-http's client failed: `504` on a timeout,
/// `500` for a URL the program built wrong, `502` otherwise.
fn client_error(e: &crate::client::Error) -> HttpError {
    use crate::client::ErrorKind;
    match e.kind() {
        ErrorKind::Timeout => HttpError::from_status(504),
        ErrorKind::InvalidUrl => HttpError::from_status(500),
        _ => HttpError::from_status(502),
    }
}

/// weft-pg's errors: a unique or foreign-key violation is `409`; no
/// connection within the pool's timeout, or a pool that cannot reach its
/// server (and keeps trying), is `503` with `Retry-After: 1`; a lost or
/// unreachable server, a closed pool or an interrupted call (the server
/// is stopping) is `503`; anything else `500`.
#[cfg(feature = "pg")]
fn pg_error(e: &weft_pg::Error) -> HttpError {
    use weft_pg::SqlState;
    if let Some(code) = e.code()
        && (*code == SqlState::UNIQUE_VIOLATION || *code == SqlState::FOREIGN_KEY_VIOLATION)
    {
        return HttpError::from_status(409);
    }
    if e.is_timeout() || matches!(e, weft_pg::Error::ServerDown(_)) {
        return HttpError::from_status(503).with_header("Retry-After", "1");
    }
    if e.is_connection_error() || e.is_interrupted() || matches!(e, weft_pg::Error::PoolClosed) {
        return HttpError::from_status(503);
    }
    HttpError::from_status(500)
}

/// The request an error answers, as the error hook sees it
/// ([`HttpError::request`]).
#[derive(Clone, Debug)]
pub struct RequestInfo {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: Option<String>,
    pub(crate) route: Option<String>,
    pub(crate) activity: String,
}

impl RequestInfo {
    /// The method, e.g. `"GET"`.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The path as received (not percent-decoded; a nested router's
    /// prefix included).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The raw query string, if any.
    pub fn query(&self) -> Option<&str> {
        self.query.as_deref()
    }

    /// The pattern of the route that matched, with the prefixes of the
    /// routers it is nested in (`/admin/links/:code`); `None` when no
    /// route matched (a `404`, a `405`), the handler is not a
    /// [`Router`](crate::Router), or for a panic whose location is not
    /// known either (see [`HandlerPanic`]).
    pub fn route(&self) -> Option<&str> {
        self.route.as_deref()
    }

    /// What the request's thread was doing: the last
    /// [`Request::set_activity`](crate::Request::set_activity) of the
    /// handler, else what the server set (`GET /links/x?full=1`, as a
    /// thread dump shows it).
    pub fn activity(&self) -> &str {
        &self.activity
    }
}

/// The cause of the `500` answering a request whose handler panicked:
/// the panic's message and, when known, where it happened. The error hook
/// finds it as [`HttpError::source`]; the client gets only `Internal
/// Server Error`.
///
/// The location is recorded by a panic hook that the server installs
/// (once per process, wrapping the one in place) when it starts; with
/// `WEFT_PANIC_HOOK=0`, or if the program replaces the hook afterwards, it
/// is `None`.
#[derive(Clone, Debug)]
pub struct HandlerPanic {
    pub(crate) message: String,
    pub(crate) location: Option<String>,
}

impl HandlerPanic {
    /// The panic's message (`Box<dyn Any>` for a payload that is not a
    /// string).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where the panic happened: `src/main.rs:42:9`.
    pub fn location(&self) -> Option<&str> {
        self.location.as_deref()
    }
}

impl fmt::Display for HandlerPanic {
    /// `handler panicked at src/main.rs:42:9: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(l) => write!(f, "handler panicked at {l}: {}", self.message),
            None => write!(f, "handler panicked: {}", self.message),
        }
    }
}

impl std::error::Error for HandlerPanic {}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let mut r = self.text_response();
        r.headers.extend(self.headers.iter().cloned());
        r.error = Some(Box::new(self));
        r
    }
}

impl fmt::Debug for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("HttpError");
        d.field("status", &self.status)
            .field("message", &self.message);
        if let Some(field) = &self.field {
            d.field("field", field);
        }
        if let Some(s) = &self.source {
            d.field("source", s);
        }
        d.finish()
    }
}

impl fmt::Display for HttpError {
    /// `404 no such user`, then `: cause` if there is one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.message)?;
        if let Some(field) = &self.field {
            write!(f, " (field `{field}`)")?;
        }
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

/// Renders a response marked as an error through `hook`: the hook shapes
/// the body and headers, the status stays the error's, and the headers of
/// the marked response (e.g. `Allow` on a `405`) are kept unless the hook
/// set them. A response that is not marked is returned as is; a hook that
/// panics falls back to [`HttpError::text_response`]. The rendered error
/// stays with the response (`Response::rendered`) for the server's error
/// log.
pub(crate) fn render(mut resp: Response, hook: impl FnOnce(&HttpError) -> Response) -> Response {
    let Some(err) = resp.error.take() else {
        return resp;
    };
    let rendered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&err)));
    let mut out = rendered.unwrap_or_else(|_| err.text_response());
    out.error = None;
    out.status = err.status;
    out.rendered = Some(err);
    let own = out.headers.len();
    for (n, v) in resp.headers {
        let set_by_hook = out.headers[..own]
            .iter()
            .any(|(m, _)| m.eq_ignore_ascii_case(&n));
        if !set_by_hook && !n.eq_ignore_ascii_case("content-type") {
            out.headers.push((n, v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_keeps_status_and_unset_headers() {
        let resp = HttpError::new(405, "no")
            .with_header("Allow", "GET")
            .with_header("Set-Cookie", "a=1")
            .with_header("Set-Cookie", "b=2")
            .with_header("X-Both", "from error")
            .into_response();
        assert!(resp.is_error());
        let out = render(resp, |e| {
            assert_eq!((e.status(), e.message()), (405, "no"));
            // A hook that forgets the status or sets its own headers.
            Response::text("custom").with_header("X-Both", "from hook")
        });
        assert!(!out.is_error());
        assert_eq!(out.status(), 405);
        assert_eq!(
            out.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(out.header("allow"), Some("GET"));
        assert_eq!(out.header("x-both"), Some("from hook"));
        let cookies: Vec<_> = out
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
            .map(|(_, v)| v)
            .collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
    }

    #[test]
    fn render_leaves_normal_responses_and_survives_a_panicking_hook() {
        let out = render(Response::text("fine"), |_| unreachable!());
        assert_eq!(out.status(), 200);
        let out = render(Response::error(404), |_| panic!("hook panic (expected)"));
        assert_eq!(out.status(), 404);
        assert!(matches!(out.body(), crate::Body::Bytes(b) if &b[..] == b"Not Found\n"));
    }

    /// An application error wrapping another, as `thiserror`'s `#[from]`
    /// would: the mapping finds the inner one in the source chain.
    #[derive(Debug)]
    struct Wrapped<E>(E);
    impl<E: std::error::Error + 'static> fmt::Display for Wrapped<E> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "wrapped: {}", self.0)
        }
    }
    impl<E: std::error::Error + 'static> std::error::Error for Wrapped<E> {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn new_constructors_have_their_status() {
        for (e, status) in [
            (HttpError::too_many_requests("x"), 429),
            (HttpError::bad_gateway("x"), 502),
            (HttpError::service_unavailable("x"), 503),
            (HttpError::gateway_timeout("x"), 504),
        ] {
            assert_eq!((e.status(), e.message()), (status, "x"));
            assert!(!e.converted);
        }
    }

    #[test]
    fn client_errors_are_502_or_504_even_when_wrapped() {
        use crate::client::{Error, ErrorKind};
        let e: HttpError = Error::new(ErrorKind::Connect, "refused").into();
        assert_eq!((e.status(), e.message()), (502, "Bad Gateway"));
        assert!(e.to_string().contains("refused"), "{e}");
        let e: HttpError = Error::new(ErrorKind::Timeout, "slow").into();
        assert_eq!(e.status(), 504);
        let e: HttpError = Wrapped(Error::new(ErrorKind::Read, "reset")).into();
        assert_eq!(e.status(), 502);
        let e: HttpError = Error::new(ErrorKind::InvalidUrl, "bad url").into();
        assert_eq!(e.status(), 500);
    }

    #[cfg(feature = "pg")]
    #[test]
    fn pg_errors_map_to_503_409_or_500_without_a_database() {
        use std::time::Duration;
        use weft_pg::{Error, PoolTimeout};
        let timeout = || {
            Error::Timeout(Box::new(PoolTimeout {
                pool: "test".into(),
                waited: Duration::from_millis(10),
                total: 1,
                active: 1,
                idle: 0,
                waiting: 1,
                last_connect_error: None,
            }))
        };
        let e: HttpError = timeout().into();
        assert_eq!((e.status(), e.message()), (503, "Service Unavailable"));
        assert_eq!(e.headers, [("Retry-After".into(), "1".into())]);
        assert!(e.to_string().contains("connection is not available"), "{e}");
        let e: HttpError = Wrapped(timeout()).into();
        assert_eq!(e.status(), 503);
        let down = Error::ServerDown(std::sync::Arc::new(weft_pg::ServerDown {
            pool: "test".into(),
            last_connect_error: "cannot connect to 127.0.0.1:1: refused".into(),
            attempts: 3,
            failing_for: Duration::from_millis(40),
        }));
        let e: HttpError = down.into();
        assert_eq!((e.status(), e.message()), (503, "Service Unavailable"));
        assert_eq!(e.headers, [("Retry-After".into(), "1".into())]);
        assert!(e.to_string().contains("refused"), "{e}");
        let lost = [
            Error::Broken,
            Error::PoolClosed,
            Error::Interrupted,
            Error::Connect {
                target: "db:5432".into(),
                source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
            },
            Error::ServerTimeout {
                what: "validation",
                limit: Duration::from_secs(1),
            },
        ];
        for pg in lost {
            let what = pg.to_string();
            let e: HttpError = pg.into();
            assert_eq!(e.status(), 503, "{what}");
            assert!(e.headers.is_empty(), "{what}");
        }
        for pg in [
            Error::Config("bad".into()),
            Error::Io(std::io::Error::other("x")),
        ] {
            let e: HttpError = pg.into();
            assert_eq!(e.status(), 500);
        }
        // Built by the handler: left alone.
        assert_eq!(HttpError::internal(timeout()).status(), 500);
    }

    #[test]
    fn panic_display_names_the_location() {
        let p = HandlerPanic {
            message: "boom".into(),
            location: Some("src/x.rs:1:2".into()),
        };
        assert_eq!(p.to_string(), "handler panicked at src/x.rs:1:2: boom");
        let e = HttpError::from_status(500).with_source(p);
        assert_eq!(
            e.to_string(),
            "500 Internal Server Error: handler panicked at src/x.rs:1:2: boom"
        );
        assert!(
            matches!(e.text_response().body(), crate::Body::Bytes(b) if &b[..] == b"Internal Server Error\n")
        );
    }

    #[test]
    fn any_error_is_a_500_that_hides_its_cause() {
        let e: HttpError = std::io::Error::other("disk on fire").into();
        assert_eq!((e.status(), e.message()), (500, "Internal Server Error"));
        assert_eq!(e.to_string(), "500 Internal Server Error: disk on fire");
        assert!(
            matches!(e.text_response().body(), crate::Body::Bytes(b) if !String::from_utf8_lossy(b).contains("fire"))
        );
    }
}
