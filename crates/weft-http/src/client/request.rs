//! Building and sending one request: [`RequestBuilder`] (query, headers,
//! body, timeout) and [`send`](RequestBuilder::send), which encodes the
//! head, takes a pooled or new connection, writes head and body, reads the
//! response head, and retries once on a pooled connection the server had
//! closed. Made by [`Client::request`](super::Client::request).

use std::fmt;
use std::io::{Read, Write};
use std::time::Duration;

use super::conn::{Connection, Head, Limits};
use super::encode::encode_head;
use super::error::{Error, ErrorKind};
use super::{Client, Response, Url};
use crate::wire::ChunkedWriter;

pub(super) enum ReqBody {
    None,
    Bytes(Vec<u8>),
    Reader(Box<dyn Read + Send>, Option<u64>),
}

/// A request being built; [`send`](RequestBuilder::send) sends it.
#[must_use = "a request does nothing until sent"]
pub struct RequestBuilder {
    pub(super) client: Client,
    pub(super) method: String,
    pub(super) url: Result<Url, Error>,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: ReqBody,
    pub(super) timeout: Option<Duration>,
}

impl fmt::Debug for RequestBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBuilder")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

impl RequestBuilder {
    /// Appends `key=value` pairs to the URL's query string, each key and
    /// value percent-encoded (everything but `A-Z a-z 0-9 - . _ ~`), so
    /// any text — a URL with its own `?` and `&`, non-ASCII, `+` — arrives
    /// as given. Repeated keys are kept in order.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = weft_http::serve("127.0.0.1:0", |req: &mut weft_http::Request<'_>| {
    ///     req.query_param("url").unwrap_or_default().into_owned()
    /// })?;
    /// let stored = "https://x.com/?a=1&b=2";
    /// let resp = weft_http::Client::new()
    ///     .get(&format!("http://{}/fetch", server.local_addr()))
    ///     .query(&[("url", stored)])
    ///     .send()?;
    /// assert_eq!(resp.text()?, stored); // not "https://x.com/?a=1" and a stray b=2
    /// # Ok(()) }
    /// ```
    pub fn query<K: AsRef<str>, V: AsRef<str>>(mut self, pairs: &[(K, V)]) -> RequestBuilder {
        if let Ok(url) = &mut self.url {
            url.append_query(pairs);
        }
        self
    }

    /// Sets a JSON body (`Content-Type: application/json`) serialized from
    /// `value`; a value that cannot be serialized makes
    /// [`send`](RequestBuilder::send) fail with [`ErrorKind::Write`].
    #[cfg(feature = "json")]
    pub fn json<T: serde::Serialize + ?Sized>(mut self, value: &T) -> RequestBuilder {
        match serde_json::to_vec(value) {
            Ok(v) => {
                self.body = ReqBody::Bytes(v);
                self.headers
                    .retain(|(n, _)| !n.eq_ignore_ascii_case("content-type"));
                self.headers
                    .push(("Content-Type".to_owned(), "application/json".to_owned()));
            }
            Err(e) => {
                self.url = Err(Error::new(
                    ErrorKind::Write,
                    format!("serializing the JSON body: {e}"),
                ));
            }
        }
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> RequestBuilder {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Sets the body (sent with `Content-Length`).
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> RequestBuilder {
        self.body = ReqBody::Bytes(body.into());
        self
    }

    /// Streams the body from `reader`: with `Content-Length: len` if
    /// given, chunked otherwise. Such a request is never retried.
    pub fn body_reader(
        mut self,
        reader: impl Read + Send + 'static,
        len: Option<u64>,
    ) -> RequestBuilder {
        self.body = ReqBody::Reader(Box::new(reader), len);
        self
    }

    /// Overrides the client's total timeout for this request.
    pub fn timeout(mut self, total: Duration) -> RequestBuilder {
        self.timeout = Some(total);
        self
    }

    /// Sends the request and reads the response head. The body is read
    /// from the returned [`Response`].
    ///
    /// A pooled connection that turns out to have been closed by the
    /// server before it answered is replaced by a fresh one once (unless
    /// the body is a reader).
    pub fn send(self) -> Result<Response, Error> {
        let RequestBuilder {
            client,
            method,
            url,
            headers,
            mut body,
            timeout,
        } = self;
        let url = url?;
        let cfg = &client.inner.config;
        let limits = Limits {
            read: cfg.read_timeout,
            write: cfg.write_timeout,
            deadline: timeout
                .or(cfg.total_timeout)
                .map(|t| weft::clock::now() + t),
        };
        // Pool key: scheme, host and port.
        let key = format!("{}://{}:{}", url.scheme(), url.host, url.port);
        let body_len = match &body {
            ReqBody::None => Some(0),
            ReqBody::Bytes(b) => Some(b.len() as u64),
            ReqBody::Reader(_, len) => *len,
        };
        let mut head = Vec::with_capacity(256);
        encode_head(
            &mut head,
            &method,
            &url,
            headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
            body_len,
            cfg.keep_alive,
            cfg.user_agent.as_deref(),
        );
        let head_request = method == "HEAD";
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (mut conn, reused) = match client.checkout(&key) {
                Some(c) => (c, true),
                None => (client.connect(&url, &limits)?, false),
            };
            match send_on(
                &mut conn,
                &head,
                &mut body,
                &limits,
                head_request,
                cfg.max_header_bytes,
            ) {
                Ok(h) => {
                    return Ok(Response {
                        head: h,
                        conn: Some(conn),
                        client: client.clone(),
                        key,
                        limits,
                    });
                }
                Err(e) => {
                    let replayable = !matches!(body, ReqBody::Reader(..));
                    if reused && e.no_response && replayable && attempt == 1 {
                        continue;
                    }
                    return Err(e);
                }
            }
        }
    }
}

fn send_on(
    conn: &mut Connection,
    head: &[u8],
    body: &mut ReqBody,
    limits: &Limits,
    head_request: bool,
    max_header: usize,
) -> Result<Head, Error> {
    match body {
        ReqBody::None => conn.write_request(head, limits)?,
        ReqBody::Bytes(b) => {
            conn.requests += 1;
            let _ = conn.stream.set_write_timeout(limits.next(limits.write)?);
            crate::wire::write_all_vectored(&conn.stream, head, b).map_err(|e| {
                let mut err = Error::io(ErrorKind::Write, "sending request", e);
                err.no_response = true;
                err
            })?;
        }
        ReqBody::Reader(r, len) => {
            conn.write_request(head, limits)?;
            let werr = |e| Error::io(ErrorKind::Write, "sending request body", e);
            let mut buf = vec![0u8; 16 * 1024];
            match len {
                Some(n) => {
                    let mut left = *n;
                    while left > 0 {
                        let want = left.min(buf.len() as u64) as usize;
                        let k = r.read(&mut buf[..want]).map_err(werr)?;
                        if k == 0 {
                            return Err(Error::new(
                                ErrorKind::Write,
                                "request body reader ended early",
                            ));
                        }
                        let _ = conn.stream.set_write_timeout(limits.next(limits.write)?);
                        (&conn.stream).write_all(&buf[..k]).map_err(werr)?;
                        left -= k as u64;
                    }
                }
                None => {
                    let mut scratch = Vec::new();
                    let mut w = ChunkedWriter::new(&conn.stream, &mut scratch, 16 * 1024);
                    loop {
                        let k = r.read(&mut buf).map_err(werr)?;
                        if k == 0 {
                            break;
                        }
                        let _ = conn.stream.set_write_timeout(limits.next(limits.write)?);
                        w.write_all(&buf[..k]).map_err(werr)?;
                    }
                    w.finish().map_err(werr)?;
                }
            }
        }
    }
    conn.read_head(head_request, limits, max_header)
}
