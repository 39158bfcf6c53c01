//! A received [`Response`]: status, headers, and the body as a `Read`
//! (whole-body helpers bounded by `max_body_bytes`); the connection goes
//! back to the pool once the body is read to the end. Returned by
//! [`RequestBuilder::send`](super::RequestBuilder::send).

use std::fmt;
use std::io::{self, Read};

use super::Client;
use super::conn::{Connection, Head, Limits};
use super::error::{Error, ErrorKind};
use crate::wire::{Framing, read_body};

/// A response: status, headers, and the body as a [`Read`].
///
/// The connection returns to the pool when the body has been read to the
/// end (or there was none) and the response is dropped; a response dropped
/// with unread body closes its connection.
pub struct Response {
    pub(super) head: Head,
    pub(super) conn: Option<Connection>,
    pub(super) client: Client,
    pub(super) key: String,
    pub(super) limits: Limits,
}

impl fmt::Debug for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.head.status)
            .field("headers", &self.headers().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Response {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.head.status
    }

    /// The reason phrase as sent.
    pub fn reason(&self) -> &str {
        &self.head.reason
    }

    /// `0` for HTTP/1.0, `1` for HTTP/1.1.
    pub fn version_minor(&self) -> u8 {
        self.head.version
    }

    /// The first value of header `name` (case-insensitive), if valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// All headers (values that are not UTF-8 are skipped).
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        let h = &self.head.head;
        self.head.fields.iter().filter_map(move |&(a, b, c, d)| {
            Some((
                std::str::from_utf8(&h[a..b]).ok()?,
                std::str::from_utf8(&h[c..d]).ok()?,
            ))
        })
    }

    /// Whether the body was sent chunked.
    pub fn is_chunked(&self) -> bool {
        matches!(self.head.framing, Framing::Chunked(_))
    }

    /// Whether the connection will be reused after this response.
    pub fn is_keep_alive(&self) -> bool {
        self.head.keep_alive
    }

    /// Reads the whole body (bounded by `max_body_bytes`).
    pub fn bytes(mut self) -> Result<Vec<u8>, Error> {
        let max = self.client.inner.config.max_body_bytes;
        let mut v = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match self.read_inner(&mut buf) {
                Ok(0) => return Ok(v),
                Ok(n) => {
                    if v.len() as u64 + n as u64 > max {
                        return Err(Error::new(
                            ErrorKind::Protocol,
                            format!("response body exceeds {max} bytes"),
                        ));
                    }
                    v.extend_from_slice(&buf[..n]);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the whole body as UTF-8 text.
    pub fn text(self) -> Result<String, Error> {
        let v = self.bytes()?;
        String::from_utf8(v)
            .map_err(|_| Error::new(ErrorKind::Protocol, "response body is not UTF-8"))
    }

    /// Reads the whole body and deserializes it as JSON; a body that is
    /// not valid JSON for `T` is an [`ErrorKind::Protocol`] error.
    #[cfg(feature = "json")]
    pub fn json<T: serde::de::DeserializeOwned>(self) -> Result<T, Error> {
        let v = self.bytes()?;
        serde_json::from_slice(&v).map_err(|e| {
            Error::new(
                ErrorKind::Protocol,
                format!("response body is not the expected JSON: {e}"),
            )
        })
    }

    /// Reads and discards the body; returns its length.
    pub fn discard(mut self) -> Result<u64, Error> {
        let mut n = 0;
        let mut buf = [0u8; 8192];
        loop {
            match self.read_inner(&mut buf)? {
                0 => return Ok(n),
                k => n += k as u64,
            }
        }
    }

    fn read_inner(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(0);
        };
        if self.head.framing == Framing::Done {
            return Ok(0);
        }
        let _ = conn
            .stream
            .set_read_timeout(self.limits.next(self.limits.read)?);
        let r = read_body(&mut self.head.framing, &mut conn.input, &conn.stream, out);
        match r {
            Ok(n) => {
                if self.head.framing == Framing::Done {
                    self.release();
                }
                Ok(n)
            }
            Err(e) => {
                self.conn = None;
                let kind = if e.kind() == io::ErrorKind::InvalidData {
                    ErrorKind::Protocol
                } else {
                    ErrorKind::Read
                };
                Err(Error::io(kind, "reading response body", e))
            }
        }
    }

    /// Returns the connection to the pool if the exchange is complete.
    fn release(&mut self) {
        if self.head.framing == Framing::Done
            && self.head.keep_alive
            && let Some(conn) = self.conn.take()
        {
            self.client.checkin(&self.key, conn);
        }
    }
}

impl Read for Response {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.read_inner(out).map_err(io::Error::from)
    }
}

impl Drop for Response {
    fn drop(&mut self) {
        self.release();
    }
}
