//! The request a handler receives.

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use crate::tls::Stream;

use crate::budget::Budget;
use crate::error::HttpError;
use crate::wire::{Framing, InBuf, read_body};

/// A state value.
pub(crate) type Value = Arc<dyn Any + Send + Sync>;

/// Values given to [`Router::with_state`](crate::Router::with_state) /
/// [`Router::state`](crate::Router::state), found by type.
pub(crate) type States = Arc<Vec<Value>>;

/// HTTP protocol version of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// HTTP/1.0: no keep-alive unless asked for, no chunked responses.
    Http10,
    /// HTTP/1.1.
    Http11,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        })
    }
}

/// An HTTP request as a handler sees it: method, path, query, headers,
/// path parameters (from a [`Router`](crate::Router)) and a body reader.
///
/// The request borrows the connection's buffers; the handler gets it as
/// `&mut Request` and returns a [`Response`](crate::Response). A body the
/// handler leaves unread is drained by the server afterwards (up to the
/// body limit) so the connection can be reused.
pub struct Request<'a> {
    pub(crate) method: &'a str,
    /// The path the routing router sees (a nesting router's prefix
    /// stripped).
    pub(crate) path: &'a str,
    /// The path as received.
    pub(crate) original_path: &'a str,
    pub(crate) query: Option<&'a str>,
    pub(crate) version: Version,
    pub(crate) headers: &'a [httparse::Header<'a>],
    pub(crate) params: Vec<(String, String)>,
    /// The routing [`Router`](crate::Router)'s state values.
    pub(crate) states: Option<States>,
    pub(crate) remote: SocketAddr,
    pub(crate) body: RequestBody<'a>,
    /// The handler's last [`Request::set_activity`].
    pub(crate) activity: Option<String>,
}

impl<'a> Request<'a> {
    /// The method, e.g. `"GET"` (case-sensitive, as sent).
    pub fn method(&self) -> &str {
        self.method
    }

    /// The path of the request target, without the query (`/users/7`).
    /// Under a router mounted with [`Router::nest`](crate::Router::nest),
    /// the path after the prefix (`/users/7` of `/admin/users/7`).
    pub fn path(&self) -> &str {
        self.path
    }

    /// The path as received, with the prefixes of nesting routers.
    pub fn original_path(&self) -> &str {
        self.original_path
    }

    /// Says what the handler is doing, for thread dumps
    /// ([`weft::set_activity`]) and for the error hook
    /// ([`RequestInfo::activity`](crate::RequestInfo::activity)): when the
    /// request fails, the hook's log line can say at which step.
    ///
    /// ```
    /// use weft_http::{HttpError, Router};
    /// let router = Router::new().get("/pay", |req| -> Result<&str, HttpError> {
    ///     req.set_activity("charging the card");
    ///     Err(HttpError::bad_gateway("payment provider down"))
    /// });
    /// # drop(router);
    /// ```
    pub fn set_activity(&mut self, what: impl fmt::Display) {
        let mut s = self.activity.take().unwrap_or_default();
        s.clear();
        let _ = fmt::Write::write_fmt(&mut s, format_args!("{what}"));
        weft::set_activity(&s);
        self.activity = Some(s);
    }

    /// The raw query string after `?`, if any (`a=1&b=2`); see
    /// [`query_as`](Request::query_as) (feature `serde`) for a typed one.
    pub fn query(&self) -> Option<&str> {
        self.query
    }

    /// The first value of query parameter `name`, percent-decoded (`+`
    /// decodes to a space).
    pub fn query_param(&self, name: &str) -> Option<Cow<'_, str>> {
        let q = self.query?;
        q.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k, true) == name).then(|| percent_decode(v, true))
        })
    }

    /// The protocol version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The first value of header `name` (case-insensitive), if present and
    /// valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_bytes(name)
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The first value of header `name` (case-insensitive) as raw bytes.
    pub fn header_bytes(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }

    /// All headers in the order received, as `(name, value)`.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.headers.iter().map(|h| (h.name, h.value))
    }

    /// A path parameter captured by the [`Router`](crate::Router) (`:id` in
    /// `/users/:id`), percent-decoded.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path parameter `name` parsed as `T` (`:id` in `/users/:id` as
    /// a number, say). A value that does not parse is a `400` naming the
    /// parameter; a name the route does not have is a `500` (a
    /// programming error).
    ///
    /// ```
    /// use weft_http::{HttpError, Router};
    /// let router = Router::new().get("/users/:id", |req| -> Result<String, HttpError> {
    ///     let id: u64 = req.param_as("id")?;
    ///     Ok(format!("user {id}"))
    /// });
    /// let server = weft_http::serve("127.0.0.1:0", router)?;
    /// let client = weft_http::Client::new();
    /// let base = format!("http://{}/users", server.local_addr());
    /// assert_eq!(client.get(&format!("{base}/7")).send()?.text()?, "user 7");
    /// assert_eq!(client.get(&format!("{base}/seven")).send()?.status(), 400);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn param_as<T: std::str::FromStr>(&self, name: &str) -> Result<T, HttpError>
    where
        T::Err: fmt::Display,
    {
        let Some(v) = self.param(name) else {
            return Err(HttpError::from_status(500).with_source(format!(
                "weft-http: the route has no path parameter `{name}`"
            )));
        };
        v.parse().map_err(|e| {
            HttpError::bad_request(format!("invalid path parameter `{name}`: {e}")).with_field(name)
        })
    }

    /// The state value of type `S` given to the routing
    /// [`Router`](crate::Router) ([`Router::with_state`](crate::Router::with_state)).
    /// An `Arc` (one reference-count increment): it does not borrow the
    /// request, so the handler may read the body afterwards.
    ///
    /// # Panics
    /// If the router has no state of type `S` — a programming error, not
    /// bad input; the server answers that request with a `500`. Use
    /// [`try_state`](Request::try_state) to check.
    ///
    /// ```
    /// use weft_http::{Client, Router};
    /// struct Greeting(String);
    /// let router = Router::with_state(Greeting("hello".into()))
    ///     .get("/", |req| req.state::<Greeting>().0.clone());
    /// let server = weft_http::serve("127.0.0.1:0", router)?;
    /// let text = Client::new().get(&format!("http://{}/", server.local_addr())).send()?.text()?;
    /// assert_eq!(text, "hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn state<S: Send + Sync + 'static>(&self) -> Arc<S> {
        match self.try_state::<S>() {
            Some(s) => s,
            None => panic!(
                "weft-http: no state of type {} (give it with Router::with_state)",
                std::any::type_name::<S>()
            ),
        }
    }

    /// The state value of type `S`, if the routing router has one.
    pub fn try_state<S: Send + Sync + 'static>(&self) -> Option<Arc<S>> {
        let s = self.states.as_ref()?.iter().find(|s| s.is::<S>())?;
        s.clone().downcast::<S>().ok()
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.remote
    }

    /// The declared `Content-Length` of the body, if the body has one.
    pub fn content_length(&self) -> Option<u64> {
        self.body.declared_len
    }

    /// The body as a reader. Reading it sends `100 Continue` first if the
    /// client asked for it.
    pub fn body(&mut self) -> &mut RequestBody<'a> {
        &mut self.body
    }

    /// Reads the whole body (bounded by the server's body limit).
    pub fn read_body(&mut self) -> io::Result<Vec<u8>> {
        let mut v = Vec::with_capacity(
            self.body
                .declared_len
                .map_or(0, |n| n.min(1 << 20) as usize),
        );
        self.body.read_to_end(&mut v)?;
        Ok(v)
    }

    /// Reads the whole body as UTF-8 text.
    pub fn body_string(&mut self) -> io::Result<String> {
        let v = self.read_body()?;
        String::from_utf8(v).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Adds the parameters of a matched route to those of the prefixes it
    /// is nested under.
    #[inline]
    pub(crate) fn set_params(&mut self, params: Vec<(String, String)>) {
        if self.params.is_empty() {
            self.params = params;
        } else {
            self.params.extend(params);
        }
    }

    /// What the error hook is told about this request.
    pub(crate) fn info(&self, route: Option<String>) -> crate::error::RequestInfo {
        let activity = match &self.activity {
            Some(a) => a.clone(),
            None => match self.query {
                Some(q) => format!("{} {}?{q}", self.method, self.original_path),
                None => format!("{} {}", self.method, self.original_path),
            },
        };
        crate::error::RequestInfo {
            method: self.method.to_owned(),
            path: self.original_path.to_owned(),
            query: self.query.map(str::to_owned),
            route,
            activity,
        }
    }
}

impl fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("query", &self.query)
            .field("version", &self.version)
            .field("headers", &self.headers.len())
            .field("params", &self.params)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

/// Why reading a request body failed; the server answers accordingly
/// (replacing whatever the handler returned) and closes the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// Over the body limit: 413.
    TooLarge,
    /// Malformed chunked framing: 400.
    Malformed,
    /// A read timed out: 408.
    Timeout,
    /// The connection failed or closed early: no response possible.
    Io,
}

/// The request body: a [`Read`] over the connection that decodes
/// `Content-Length` and chunked framing and enforces the body limit.
///
/// Errors: a body over the limit fails with `InvalidData` (the server then
/// answers 413), malformed chunking with `InvalidData` (400), a client
/// slower than the body's time budget with `TimedOut` (408), a closed
/// connection with `UnexpectedEof`.
pub struct RequestBody<'a> {
    pub(crate) framing: Framing,
    pub(crate) input: &'a mut InBuf,
    pub(crate) stream: &'a Stream,
    /// `Some(false)`: the client sent `Expect: 100-continue` and we have not
    /// answered yet.
    pub(crate) continue_sent: Option<bool>,
    pub(crate) declared_len: Option<u64>,
    pub(crate) read: u64,
    pub(crate) limit: u64,
    pub(crate) error: Option<BodyError>,
    /// The time the client may keep the handler waiting for the body, in
    /// all ([`ServerConfig::body_read_timeout`](crate::ServerConfig::body_read_timeout)).
    pub(crate) budget: Budget,
}

impl RequestBody<'_> {
    /// Whether the whole body has been read.
    pub fn is_complete(&self) -> bool {
        self.framing == Framing::Done
    }

    /// Body bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    fn fail(&mut self, kind: BodyError, e: io::Error) -> io::Error {
        self.error.get_or_insert(kind);
        e
    }

    /// Sends `100 Continue` if the client is waiting for it.
    fn send_continue(&mut self) -> io::Result<()> {
        if self.continue_sent == Some(false) {
            self.continue_sent = Some(true);
            // Part of the body's wait: the socket's write timeout may still
            // be what the last response's budget left.
            let _ = self.stream.set_write_timeout(Some(self.budget.remaining()));
            (&*self.stream).write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        Ok(())
    }
}

impl Read for RequestBody<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.framing == Framing::Done || out.is_empty() {
            return Ok(0);
        }
        if let Some(e) = self.error {
            return Err(io::Error::other(format!(
                "request body already failed: {e:?}"
            )));
        }
        if let Err(e) = self.send_continue() {
            return Err(self.fail(BodyError::Io, e));
        }
        // One budget for the whole body: a client that trickles it runs
        // out, however quick each read.
        let (framing, input, stream) = (&mut self.framing, &mut *self.input, self.stream);
        let r = self.budget.run(
            |left| {
                let _ = stream.set_read_timeout(Some(left));
            },
            || read_body(framing, input, stream, out).map(|n| (n, n)),
        );
        match r {
            Ok(n) => {
                self.read += n as u64;
                if self.read > self.limit {
                    let limit = self.limit;
                    return Err(self.fail(
                        BodyError::TooLarge,
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("request body exceeds the limit of {limit} bytes"),
                        ),
                    ));
                }
                Ok(n)
            }
            Err(e) => {
                let kind = match e.kind() {
                    io::ErrorKind::InvalidData => BodyError::Malformed,
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => BodyError::Timeout,
                    _ => BodyError::Io,
                };
                Err(self.fail(kind, e))
            }
        }
    }
}

impl fmt::Debug for RequestBody<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBody")
            .field("framing", &self.framing)
            .field("read", &self.read)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

/// Percent-decodes `s` (and `+` as space when `plus` is set). Invalid
/// escapes are kept as they are; invalid UTF-8 is replaced.
pub(crate) fn percent_decode(s: &str, plus: bool) -> Cow<'_, str> {
    if !s.bytes().any(|b| b == b'%' || (plus && b == b'+')) {
        return Cow::Borrowed(s);
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' if plus => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn decode() {
        assert_eq!(percent_decode("a%20b", false), "a b");
        assert_eq!(percent_decode("a+b", true), "a b");
        assert_eq!(percent_decode("a+b", false), "a+b");
        assert_eq!(percent_decode("100%", false), "100%");
        assert_eq!(percent_decode("%4", false), "%4");
        assert_eq!(percent_decode("%41%42", false), "AB");
        assert_eq!(percent_decode("%zz", false), "%zz");
    }
}
