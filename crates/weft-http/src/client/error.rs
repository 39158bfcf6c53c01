//! Client errors: [`Error`] with its [`ErrorKind`], the conversion to
//! `io::Error`, and the classification of a failed TLS connect. Made
//! everywhere in the client; returned by every fallible call.

use std::fmt;
use std::io;
use std::net::SocketAddr;

/// The class of a client error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The URL could not be parsed or is not `http://`.
    InvalidUrl,
    /// The connection could not be established (refused, unreachable,
    /// name not resolved).
    Connect,
    /// Sending the request failed.
    Write,
    /// Receiving the response failed (reset, closed early).
    Read,
    /// A connect, read or total timeout expired.
    Timeout,
    /// The response was not valid HTTP/1.x, or exceeded a size limit.
    Protocol,
    /// The server's TLS certificate failed verification: unknown issuer,
    /// expired, or not valid for the host name in the URL.
    Certificate,
    /// The TLS handshake or a TLS record failed for another reason (no
    /// common protocol version or cipher, an alert from the server, a
    /// server that does not speak TLS).
    Tls,
}

/// A client error: its [`ErrorKind`], a message, and the I/O error behind
/// it if any.
#[derive(Debug)]
pub struct Error {
    pub(super) kind: ErrorKind,
    msg: String,
    source: Option<io::Error>,
    /// Nothing of a response arrived (the request may be retried on a fresh
    /// connection if this one came from the pool).
    pub(super) no_response: bool,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, msg: impl Into<String>) -> Error {
        Error {
            kind,
            msg: msg.into(),
            source: None,
            no_response: false,
        }
    }

    pub(super) fn io(kind: ErrorKind, what: &str, e: io::Error) -> Error {
        let kind = if matches!(
            e.kind(),
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
        ) {
            ErrorKind::Timeout
        } else {
            kind
        };
        Error {
            kind,
            msg: format!("{what}: {e}"),
            source: Some(e),
            no_response: false,
        }
    }

    /// The class of the error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether a timeout expired.
    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http client: {}", self.msg)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match e.kind {
            ErrorKind::Timeout => io::ErrorKind::TimedOut,
            ErrorKind::InvalidUrl => io::ErrorKind::InvalidInput,
            ErrorKind::Protocol | ErrorKind::Certificate | ErrorKind::Tls => {
                io::ErrorKind::InvalidData
            }
            ErrorKind::Connect => io::ErrorKind::ConnectionRefused,
            ErrorKind::Read | ErrorKind::Write => e
                .source
                .as_ref()
                .map_or(io::ErrorKind::Other, io::Error::kind),
        };
        io::Error::new(kind, e)
    }
}

/// Classifies a failed TLS connect: certificate verification, other TLS
/// failure, timeout, or I/O.
pub(super) fn tls_connect_error(host: &str, addr: SocketAddr, e: io::Error) -> Error {
    match crate::tls::rustls_error(&e) {
        Some(rustls::Error::InvalidCertificate(c)) => {
            let msg = format!("TLS certificate verification failed for {host} ({addr}): {c}");
            Error {
                kind: ErrorKind::Certificate,
                msg,
                source: Some(e),
                no_response: false,
            }
        }
        Some(t) => {
            let msg = format!("TLS handshake with {host} ({addr}) failed: {t}");
            Error {
                kind: ErrorKind::Tls,
                msg,
                source: Some(e),
                no_response: false,
            }
        }
        None if e.kind() == io::ErrorKind::UnexpectedEof => Error::io(
            ErrorKind::Tls,
            &format!("TLS handshake with {host} ({addr})"),
            e,
        ),
        None => Error::io(
            ErrorKind::Connect,
            &format!("TLS handshake with {host} ({addr})"),
            e,
        ),
    }
}
