//! [`HttpError`]: the error a handler returns with `?`, and the one value
//! behind every error answer, built-in or not.
//!
//! # Design
//!
//! A handler that returns `Result<T, HttpError>` can use `?` on anything:
//! an [`HttpError`] passes through with its status (e.g. the `422` of
//! [`Request::json`](crate::Request::json)), and every other error type
//! (`io::Error`, a database error, …) becomes a `500` whose message hides
//! the cause from the client but keeps it as [`HttpError::source`] for
//! logging. This is anyhow's trick: `HttpError` deliberately does not
//! implement `std::error::Error`, so the blanket `From` does not overlap
//! with `From<HttpError> for HttpError`.
//!
//! An error is turned into a response late: [`HttpError::into_response`]
//! and [`Response::error`] produce a response *marked* as an error, and
//! the server (or the innermost [`Router`](crate::Router) with a hook)
//! renders it through the hook of [`Router::on_error`](crate::Router::on_error)
//! — the same hook that renders the server's own answers (`400`, `404`,
//! `405`, `408`, `413`, `417`, `431`, `500`, `503`). So a JSON API answers
//! every error in JSON with one line, `.on_error(HttpError::json_response)`.
//! Without a hook, errors are plain text (`text/plain`, the message and a
//! newline), as before.

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
/// // Any other error becomes a 500 that keeps its cause for the logs.
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
    source: Option<Source>,
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

    /// The cause, if any (for logging; never sent).
    pub fn source(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
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
    /// Any error is a `500` whose cause is kept but not sent.
    fn from(e: E) -> HttpError {
        HttpError::internal(e)
    }
}

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
/// panics falls back to [`HttpError::text_response`].
pub(crate) fn render(mut resp: Response, hook: impl FnOnce(&HttpError) -> Response) -> Response {
    let Some(err) = resp.error.take() else {
        return resp;
    };
    let rendered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&err)));
    let mut out = rendered.unwrap_or_else(|_| err.text_response());
    out.error = None;
    out.status = err.status;
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
