//! Server settings: [`ServerConfig`] with its defaults, setters and
//! validation, the [`ThreadMode`] that picks who runs requests, and the
//! [`WhenFull`] policy at the connection limit. Read by every other part of
//! the server; validated by [`Server::bind`](super::Server::bind) and
//! [`Server::from_std`](super::Server::from_std).

use std::fmt;
use std::io;
use std::str::FromStr;
use std::time::Duration;

/// Which threads run requests. One setting; the handler code is the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThreadMode {
    /// One weft virtual thread per connection (Helidon 4 "Níma"): a
    /// blocking handler parks only its own virtual thread.
    #[default]
    Virtual,
    /// A fixed pool of `threads` OS threads (Tomcat's
    /// `server.tomcat.threads.max`, default 200). A request occupies one of
    /// them from its first handled byte until its response is written; a
    /// blocking handler blocks that OS thread. Requests that find every
    /// thread busy wait in a FIFO of [`ServerConfig::accept_queue`] entries
    /// (and, when that is full, on their connection). Between keep-alive
    /// requests a connection holds no OS thread: it waits, like Tomcat's
    /// NIO poller, on a virtual thread that only reads request heads.
    Platform {
        /// Number of OS worker threads.
        threads: usize,
    },
}

impl ThreadMode {
    /// Tomcat's default `threads.max`.
    pub const DEFAULT_PLATFORM_THREADS: usize = 200;

    /// `Platform` with the default 200 threads.
    pub fn platform() -> ThreadMode {
        ThreadMode::Platform {
            threads: Self::DEFAULT_PLATFORM_THREADS,
        }
    }
}

impl fmt::Display for ThreadMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThreadMode::Virtual => f.write_str("virtual"),
            ThreadMode::Platform { threads } => write!(f, "platform:{threads}"),
        }
    }
}

impl FromStr for ThreadMode {
    type Err = String;
    /// `virtual`, `platform` (200 threads) or `platform:N`.
    fn from_str(s: &str) -> Result<ThreadMode, String> {
        match s {
            "virtual" => Ok(ThreadMode::Virtual),
            "platform" => Ok(ThreadMode::platform()),
            _ => match s.strip_prefix("platform:").map(str::parse::<usize>) {
                Some(Ok(n)) if n > 0 => Ok(ThreadMode::Platform { threads: n }),
                _ => Err(format!(
                    "invalid thread mode {s:?}: expected virtual, platform or platform:N (N > 0)"
                )),
            },
        }
    }
}

/// What happens to a new connection when [`ServerConfig::max_connections`]
/// are open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WhenFull {
    /// The server accepts the new connection and closes, to make room, the
    /// open connection that has no request in progress and is nearest its
    /// timeout: first those that sent nothing since they connected or since
    /// their last response (they wait for a byte without a thread: the
    /// idle set, oldest first by deadline), then those whose thread waits
    /// for a request or is receiving a request head (oldest connection
    /// first). They are closed silently, which HTTP allows for a
    /// connection without a request in progress; a client retries. Only
    /// when every connection has a request in progress does the new one
    /// wait for room (as with [`WhenFull::Wait`]).
    ///
    /// So a flood of idle or slow connections (slowloris) cannot keep a
    /// client out: each new connection pushes out the flood's oldest, and
    /// a client that sends its request at once is the newest. Requests
    /// already being handled are never cut; their own time budgets
    /// ([`ServerConfig::body_read_timeout`],
    /// [`ServerConfig::write_timeout`]) bound how long a slow client can
    /// keep one.
    #[default]
    ShedIdle,
    /// The server stops accepting until a connection closes: new
    /// connections wait in the kernel's listen backlog
    /// ([`ServerConfig::backlog`]), and the kernel refuses or drops them
    /// when that is full too. Nothing is lost while the backlog has room,
    /// but a flood of idle connections keeps new clients out until their
    /// timeouts.
    Wait,
    /// The server accepts the connection, answers `503 Service
    /// Unavailable` with `Retry-After: 1`, and closes it.
    Reject,
}

/// Server settings. `ServerConfig::default()` gives the values listed on
/// each field; the setters chain.
///
/// ```
/// use std::time::Duration;
/// use weft_http::{ServerConfig, ThreadMode};
/// let cfg = ServerConfig::default()
///     .thread_mode(ThreadMode::Platform { threads: 50 })
///     .max_body_bytes(1 << 20)
///     .idle_timeout(Duration::from_secs(5));
/// assert_eq!(cfg.max_connections, ServerConfig::default_max_connections());
/// ```
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Virtual (default) or a fixed OS-thread pool.
    pub thread_mode: ThreadMode,
    /// The weft runtime for connection threads (and, in platform mode, for
    /// the threads that wait for request heads). `None`: the default
    /// runtime. Use e.g. `Runtime::builder().parallelism(1)` for a
    /// one-carrier server.
    pub runtime: Option<weft::Runtime>,
    /// Connections open at once; see [`WhenFull`]. Default: from the
    /// process's descriptor limit when the configuration is made
    /// ([`ServerConfig::default_max_connections`]: the soft
    /// `RLIMIT_NOFILE` less a sixteenth, at least 64, kept for files,
    /// database connections and the like), so that the limit, not
    /// `EMFILE`, is what a flood of connections meets. Raise the soft limit
    /// (`ulimit -n`) to serve more.
    pub max_connections: usize,
    /// Policy at `max_connections` (default [`WhenFull::ShedIdle`]).
    pub when_full: WhenFull,
    /// Listen backlog passed to `listen(2)` by
    /// [`Server::bind`](super::Server::bind) (default 1024; the kernel caps
    /// it at `net.core.somaxconn`).
    pub backlog: u32,
    /// Platform mode: requests waiting for a worker thread (default 100,
    /// like Tomcat's `acceptCount`).
    pub accept_queue: usize,
    /// Largest request head (request line + headers) in bytes; larger gets
    /// `431` and the connection is closed (default 16 KiB).
    pub max_header_bytes: usize,
    /// Most header fields in a request; more gets `431` (default 64, at
    /// most 256).
    pub max_headers: usize,
    /// Largest request body in bytes; larger gets `413` and the connection
    /// is closed (default 8 MiB). A `Content-Length` over the limit is
    /// refused before the handler runs (without `100 Continue`); a chunked
    /// body is cut off when it crosses the limit.
    pub max_body_bytes: u64,
    /// Time to receive a whole request head once its first byte arrived
    /// (and, on a new connection, for the first byte): a deadline for the
    /// head, not per read. A client still sending its head then gets `408`
    /// and is disconnected — slowloris clients are cut off here however
    /// slowly they trickle bytes (default 10 s). A new connection that
    /// sends nothing is closed silently at this deadline.
    pub header_read_timeout: Duration,
    /// How long a keep-alive connection may sit idle between requests
    /// before the server closes it, silently (default 60 s).
    pub idle_timeout: Duration,
    /// How long a keep-alive connection's virtual thread waits for the
    /// next request before it ends and leaves the connection to the
    /// server's idle set (default 500 ms). There the connection costs no
    /// thread, no stack and no buffers — a socket, its registration with
    /// the poller and a small record — and a thread is started again when
    /// its next request arrives. Shorter saves memory sooner; longer saves
    /// a thread start for clients that pause between requests. HTTPS
    /// connections, and servers inside a `weft::sim` simulation, keep their
    /// thread for the whole [`idle_timeout`](ServerConfig::idle_timeout).
    pub idle_thread_timeout: Duration,
    /// The time a client may keep a request's handler waiting for the
    /// body, in all — time spent blocked in reads, summed over the body —
    /// plus one second for every
    /// [`min_data_rate`](ServerConfig::min_data_rate) bytes received. On
    /// expiry the request gets `408` and the connection is closed
    /// (default 30 s). A budget per request, not a timeout per read: a
    /// client that trickles its body runs out however quick each read is.
    pub body_read_timeout: Duration,
    /// The time a client may keep the server waiting while it takes in a
    /// response, in all — time spent blocked in writes, summed over the
    /// response — plus one second for every
    /// [`min_data_rate`](ServerConfig::min_data_rate) bytes sent
    /// (default 30 s); on expiry the connection is closed. A handler that
    /// streams slowly is not charged for its own pauses; a client that
    /// reads one byte now and then runs out.
    pub write_timeout: Duration,
    /// The transfer rate, in bytes per second, that earns a client more
    /// time for a large body or response beyond
    /// [`body_read_timeout`](ServerConfig::body_read_timeout) and
    /// [`write_timeout`](ServerConfig::write_timeout) (default 16 KiB/s:
    /// an 8 MiB upload may keep the handler waiting 30 s + 512 s). Clients
    /// slower than this on average, over what they move, are cut off;
    /// `0` makes the two timeouts plain totals.
    pub min_data_rate: u64,
    /// Set `TCP_NODELAY` on accepted connections (default true).
    pub nodelay: bool,
    /// Serve https: certificate chain, key and TLS settings (default
    /// `None`: plain HTTP). The TLS handshake counts toward
    /// [`header_read_timeout`](ServerConfig::header_read_timeout): a new
    /// connection has that long for its handshake and its first request
    /// head together. A failed handshake closes that connection and is
    /// counted in
    /// [`ErrorStats::tls_handshake`](super::ErrorStats::tls_handshake); the
    /// server keeps serving.
    /// See the [`tls`](crate::tls) module for an example.
    pub tls: Option<crate::TlsConfig>,
    /// Write one line to stderr for every `5xx` error answer to a request
    /// (default true): method, route pattern (else the path), the
    /// request's activity, status, message and cause, as
    ///
    /// ```text
    /// weft-http: POST /links/:code (checking rs): 502 Bad Gateway: http client: connect …
    /// ```
    ///
    /// An error answer is an [`HttpError`](crate::HttpError) (or
    /// [`Response::error`](crate::Response::error)) a handler returned, or
    /// a panic's `500`; a plain response with a `5xx` status has no cause
    /// and is not logged, nor are the server's own `503`s to connections
    /// over the limit (they are counted in
    /// [`ServerStats`](super::ServerStats)). For a panic the line gives its
    /// location but not its message, which the panic hook has printed
    /// already. So an application needs no logging in its
    /// [`on_error`](crate::Router::on_error) hook; one that logs there, or
    /// elsewhere, turns this off.
    pub error_log: bool,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            thread_mode: ThreadMode::Virtual,
            runtime: None,
            max_connections: ServerConfig::default_max_connections(),
            when_full: WhenFull::ShedIdle,
            backlog: 1024,
            accept_queue: 100,
            max_header_bytes: 16 * 1024,
            max_headers: 64,
            max_body_bytes: 8 << 20,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            idle_thread_timeout: Duration::from_millis(500),
            body_read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            min_data_rate: 16 * 1024,
            nodelay: true,
            tls: None,
            error_log: true,
        }
    }
}

macro_rules! setters {
    ($($(#[$m:meta])* $name:ident: $t:ty),* $(,)?) => {$(
        $(#[$m])*
        pub fn $name(mut self, v: $t) -> ServerConfig {
            self.$name = v;
            self
        }
    )*};
}

impl ServerConfig {
    setters! {
        /// Sets [`ServerConfig::thread_mode`].
        thread_mode: ThreadMode,
        /// Sets [`ServerConfig::max_connections`].
        max_connections: usize,
        /// Sets [`ServerConfig::when_full`].
        when_full: WhenFull,
        /// Sets [`ServerConfig::backlog`].
        backlog: u32,
        /// Sets [`ServerConfig::accept_queue`].
        accept_queue: usize,
        /// Sets [`ServerConfig::max_header_bytes`].
        max_header_bytes: usize,
        /// Sets [`ServerConfig::max_headers`].
        max_headers: usize,
        /// Sets [`ServerConfig::max_body_bytes`].
        max_body_bytes: u64,
        /// Sets [`ServerConfig::header_read_timeout`].
        header_read_timeout: Duration,
        /// Sets [`ServerConfig::idle_timeout`].
        idle_timeout: Duration,
        /// Sets [`ServerConfig::idle_thread_timeout`].
        idle_thread_timeout: Duration,
        /// Sets [`ServerConfig::body_read_timeout`].
        body_read_timeout: Duration,
        /// Sets [`ServerConfig::write_timeout`].
        write_timeout: Duration,
        /// Sets [`ServerConfig::min_data_rate`].
        min_data_rate: u64,
        /// Sets [`ServerConfig::nodelay`].
        nodelay: bool,
        /// Sets [`ServerConfig::error_log`].
        error_log: bool,
    }

    /// Serves https with `tls` (see [`ServerConfig::tls`]).
    pub fn tls(mut self, tls: crate::TlsConfig) -> ServerConfig {
        self.tls = Some(tls);
        self
    }

    /// Runs connection threads on `rt` (see [`ServerConfig::runtime`]).
    pub fn runtime(mut self, rt: weft::Runtime) -> ServerConfig {
        self.runtime = Some(rt);
        self
    }

    /// The default [`max_connections`](ServerConfig::max_connections):
    /// the process's soft `RLIMIT_NOFILE` now, less a sixteenth of it (at
    /// least 64) for the descriptors that are not connections; at least
    /// 16. 1,024 descriptors give 960 connections, 20,000 give 18,750.
    pub fn default_max_connections() -> usize {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
            r.rlim_cur
        } else {
            1024
        };
        let soft = usize::try_from(soft.min(1 << 24)).unwrap_or(1 << 24);
        soft.saturating_sub((soft / 16).max(64)).max(16)
    }

    pub(super) fn validate(&self) -> io::Result<()> {
        let bad = |m: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, m.to_string()));
        if self.max_connections == 0 {
            return bad("weft-http: max_connections must be at least 1");
        }
        if let ThreadMode::Platform { threads: 0 } = self.thread_mode {
            return bad("weft-http: ThreadMode::Platform needs at least one thread");
        }
        if self.accept_queue == 0 {
            return bad("weft-http: accept_queue must be at least 1");
        }
        if self.max_header_bytes < 64 {
            return bad("weft-http: max_header_bytes must be at least 64");
        }
        if self.max_headers == 0 || self.max_headers > MAX_HEADERS {
            return bad("weft-http: max_headers must be between 1 and 256");
        }
        for d in [
            self.header_read_timeout,
            self.idle_timeout,
            self.idle_thread_timeout,
            self.body_read_timeout,
            self.write_timeout,
        ] {
            if d.is_zero() {
                return bad("weft-http: timeouts must be greater than zero");
            }
        }
        Ok(())
    }
}

/// Upper bound of `max_headers` (size of the parser's header array).
const MAX_HEADERS: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_mode_parse() {
        assert_eq!("virtual".parse(), Ok(ThreadMode::Virtual));
        assert_eq!(
            "platform".parse(),
            Ok(ThreadMode::Platform { threads: 200 })
        );
        assert_eq!(
            "platform:3".parse(),
            Ok(ThreadMode::Platform { threads: 3 })
        );
        assert!("platform:0".parse::<ThreadMode>().is_err());
        assert!("green".parse::<ThreadMode>().is_err());
        assert_eq!(
            ThreadMode::Platform { threads: 3 }.to_string(),
            "platform:3"
        );
    }

    #[test]
    fn config_validation() {
        assert!(ServerConfig::default().validate().is_ok());
        assert!(
            ServerConfig::default()
                .max_connections(0)
                .validate()
                .is_err()
        );
        assert!(
            ServerConfig::default()
                .max_headers(1000)
                .validate()
                .is_err()
        );
        assert!(
            ServerConfig::default()
                .idle_timeout(Duration::ZERO)
                .validate()
                .is_err()
        );
    }
}
