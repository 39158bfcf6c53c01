//! [`Error`]: everything a query or a pool checkout can fail with.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::error::{DbError, SqlState};

/// The error of every fallible call in this crate.
///
/// Server errors keep their SQLSTATE ([`Error::code`]); pool errors say
/// what the pool looked like when they happened.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An error from the server or the protocol layer: a failed statement
    /// (with SQLSTATE), a lost connection, a type conversion.
    Db(tokio_postgres::Error),
    /// The connection was lost during the call: the server went away, the
    /// socket failed, or the server ended the session with a `FATAL`
    /// error (e.g. SQLSTATE `57P01`, shut down by an administrator). The
    /// cause is inside; the connection is broken and a pool discards it.
    ConnectionLost(tokio_postgres::Error),
    /// Reaching the server failed (no server listening, unreachable host).
    Connect {
        /// Which server address was tried last.
        target: String,
        /// Why it failed.
        source: io::Error,
    },
    /// No connection became available within `connection_timeout`.
    Timeout(Box<PoolTimeout>),
    /// The pool cannot reach its server: a checkout that needed a new
    /// connection failed at once because the pool's last attempt to open
    /// one failed, and none has opened since
    /// ([`Config::fail_fast_when_down`](crate::Config::fail_fast_when_down)).
    /// The pool keeps trying in the background.
    ServerDown(Arc<ServerDown>),
    /// A server round trip did not finish within its time limit (a
    /// validation, or a connection attempt).
    ServerTimeout {
        /// What was being waited for.
        what: &'static str,
        /// The limit that was hit.
        limit: Duration,
    },
    /// The calling thread was interrupted ([`weft::Thread::interrupt`])
    /// while it waited; the interrupt flag has been cleared, as weft's
    /// blocking calls do. A query interrupted this way was cancelled on the
    /// server.
    Interrupted,
    /// The pool was closed.
    PoolClosed,
    /// The connection was lost earlier (broken by a failed call, a
    /// cancelled call that did not end, or the server going away); it is
    /// discarded when returned to its pool.
    Broken,
    /// Invalid configuration.
    Config(String),
    /// The TLS handshake with the server failed: its certificate did not
    /// verify (`sslmode=verify-ca`/`verify-full`: unknown issuer, wrong
    /// host name, expired), or the server refused TLS that `sslmode`
    /// requires.
    Tls {
        /// The server address.
        target: String,
        /// What failed, e.g. `TLS certificate verification failed: …`.
        message: String,
        /// The error from the protocol layer.
        source: tokio_postgres::Error,
    },
    /// A system resource could not be had (e.g. the pool's housekeeper
    /// thread could not be spawned).
    Io(io::Error),
}

/// The details of a checkout that timed out, as HikariCP reports them.
#[derive(Debug, Clone)]
pub struct PoolTimeout {
    /// The pool's name.
    pub pool: String,
    /// How long the caller waited.
    pub waited: Duration,
    /// Connections open or being opened.
    pub total: usize,
    /// Connections in use.
    pub active: usize,
    /// Idle connections.
    pub idle: usize,
    /// Threads waiting for a connection when the time ran out (this one
    /// included).
    pub waiting: usize,
    /// Why the last attempt to open a connection failed, if one did.
    pub last_connect_error: Option<String>,
}

impl fmt::Display for PoolTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} - connection is not available, request timed out after {} ms \
             (total={}, active={}, idle={}, waiting={})",
            self.pool,
            self.waited.as_millis(),
            self.total,
            self.active,
            self.idle,
            self.waiting
        )?;
        if let Some(e) = &self.last_connect_error {
            write!(f, "; last connection error: {e}")?;
        }
        Ok(())
    }
}

/// What a pool that cannot reach its server knows
/// ([`Error::ServerDown`]).
#[derive(Debug, Clone)]
pub struct ServerDown {
    /// The pool's name.
    pub pool: String,
    /// Why the last attempt to open a connection failed.
    pub last_connect_error: String,
    /// Attempts that failed since the last connection opened (the
    /// checkouts' and the pool's own, in the background).
    pub attempts: u64,
    /// From the first of those failures to the last.
    pub failing_for: Duration,
}

impl fmt::Display for ServerDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} - cannot connect to the server: {} ({} failed attempt{} over {} ms; \
             the pool keeps trying in the background)",
            self.pool,
            self.last_connect_error,
            self.attempts,
            if self.attempts == 1 { "" } else { "s" },
            self.failing_for.as_millis()
        )
    }
}

impl Error {
    /// The SQLSTATE of a server error (e.g. [`SqlState::SYNTAX_ERROR`]).
    pub fn code(&self) -> Option<&SqlState> {
        match self {
            Error::Db(e) | Error::ConnectionLost(e) => e.code(),
            _ => None,
        }
    }

    /// The server's error report (message, detail, hint, position), if
    /// this is a server error.
    pub fn as_db_error(&self) -> Option<&DbError> {
        match self {
            Error::Db(e) | Error::ConnectionLost(e) => e.as_db_error(),
            _ => None,
        }
    }

    /// Whether this is a checkout timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_))
    }

    /// Whether the call was ended by an interrupt.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Error::Interrupted)
    }

    /// Whether the connection is unusable after this error (lost, closed,
    /// broken) as opposed to a statement that failed on a healthy
    /// connection.
    pub fn is_connection_error(&self) -> bool {
        match self {
            Error::Db(e) => e.is_closed() || e.as_db_error().is_some_and(is_fatal),
            Error::ConnectionLost(_)
            | Error::Connect { .. }
            | Error::Broken
            | Error::Tls { .. }
            | Error::ServerDown(_)
            | Error::ServerTimeout { .. } => true,
            _ => false,
        }
    }
}

/// `FATAL`/`PANIC` server errors end the session.
pub(crate) fn is_fatal(e: &DbError) -> bool {
    matches!(e.severity(), "FATAL" | "PANIC")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Db(e) => match e.as_db_error() {
                // tokio-postgres prints "db error: ..." without the code.
                Some(db) => write!(
                    f,
                    "{}: {} (SQLSTATE {})",
                    db.severity(),
                    db.message(),
                    db.code().code()
                ),
                None => write!(f, "{e}"),
            },
            Error::ConnectionLost(e) => match e.as_db_error() {
                Some(db) => write!(
                    f,
                    "connection lost: {}: {} (SQLSTATE {})",
                    db.severity(),
                    db.message(),
                    db.code().code()
                ),
                None => write!(f, "connection lost: {e}"),
            },
            Error::Connect { target, source } => write!(f, "cannot connect to {target}: {source}"),
            Error::Timeout(t) => t.fmt(f),
            Error::ServerDown(d) => d.fmt(f),
            Error::ServerTimeout { what, limit } => {
                write!(f, "{what} did not finish within {} ms", limit.as_millis())
            }
            Error::Interrupted => f.write_str("interrupted"),
            Error::PoolClosed => f.write_str("the pool is closed"),
            Error::Broken => f.write_str("the connection is broken"),
            Error::Config(m) => write!(f, "invalid configuration: {m}"),
            Error::Tls {
                target, message, ..
            } => write!(f, "{target}: {message}"),
            Error::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Db(e) | Error::ConnectionLost(e) => Some(e),
            Error::Tls { source, .. } => Some(source),
            Error::Connect { source, .. } | Error::Io(source) => Some(source),
            _ => None,
        }
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Error {
        Error::Db(e)
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match &e {
            Error::Interrupted => io::ErrorKind::Interrupted,
            Error::Timeout(_) | Error::ServerTimeout { .. } => io::ErrorKind::TimedOut,
            Error::Connect { source, .. } | Error::Io(source) => source.kind(),
            Error::Config(_) => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
