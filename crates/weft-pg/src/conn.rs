//! [`Connection`]: one PostgreSQL session with a blocking API.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Config as PgConfig, Row, SimpleQueryMessage, Statement, ToStatement};

use crate::drive::{Stop, Stream, run};
use crate::error::{Error, Result, is_fatal};
use crate::tls::{Connector, TlsOptions, TlsStream};
use crate::transaction::Transaction;

type PgConnection = tokio_postgres::Connection<Stream, TlsStream>;

/// How long an interrupted query may take to end after the cancel request
/// before its connection is given up as broken.
const CANCEL_GRACE: Duration = Duration::from_secs(5);
/// How long a clean close waits for the server.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Where a connection goes: also where its cancel requests go.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp(a) => write!(f, "tcp {a}"),
            Target::Unix(p) => write!(f, "unix socket {}", p.display()),
        }
    }
}

impl Target {
    fn open(&self, deadline: Option<Instant>) -> std::io::Result<Stream> {
        match self {
            Target::Tcp(addr) => {
                let s = match deadline {
                    Some(d) => {
                        let left = d.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            return Err(std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                "connect timed out",
                            ));
                        }
                        weft::net::TcpStream::connect_timeout(addr, left)?
                    }
                    None => weft::net::TcpStream::connect(addr)?,
                };
                s.set_nodelay(true)?;
                Ok(Stream::Tcp(s))
            }
            Target::Unix(path) => Ok(Stream::Unix(weft::net::UnixStream::connect(path)?)),
        }
    }
}

/// The TLS connector for one connection attempt (`None`: plain).
fn connector(tls: &Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>) -> Connector {
    match tls {
        Some((c, n)) => Connector {
            config: Some(c.clone()),
            name: n.clone(),
        },
        None => Connector {
            config: None,
            name: ServerName::try_from("localhost").expect("valid name"),
        },
    }
}

/// Polls a future inside [`weft::blocking`]: for the connection handshake,
/// whose SCRAM-SHA-256 step is a few milliseconds of CPU (PBKDF2, 4096
/// rounds; far more in a debug build). Each poll runs on an offload
/// thread while the calling virtual thread parks, so the other virtual
/// threads of its carrier keep running and the stall watchdog does not
/// report it. (The waker is `Send`; the poll's context is rebuilt there.)
struct Offload<F>(std::pin::Pin<Box<F>>);

impl<F: Future + Send> Future for Offload<F>
where
    F::Output: Send,
{
    type Output = F::Output;
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let waker = cx.waker().clone();
        let fut = self.0.as_mut();
        weft::blocking(move || fut.poll(&mut Context::from_waker(&waker)))
    }
}

/// The server addresses named by `config`, in order.
/// The server addresses named by `config`, in order, each with its host
/// name (for TLS).
fn targets(config: &PgConfig) -> Result<Vec<(Target, String)>> {
    let hosts = config.get_hosts();
    if hosts.is_empty() {
        return Err(Error::Config(
            "no host given (host=... or postgres://user@HOST/db)".into(),
        ));
    }
    let ports = config.get_ports();
    let addrs = config.get_hostaddrs();
    let mut out = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        let port = match ports.len() {
            0 => 5432,
            1 => ports[0],
            _ => *ports
                .get(i)
                .ok_or_else(|| Error::Config("fewer ports than hosts".into()))?,
        };
        match host {
            tokio_postgres::config::Host::Unix(dir) => {
                out.push((
                    Target::Unix(dir.join(format!(".s.PGSQL.{port}"))),
                    String::new(),
                ));
            }
            tokio_postgres::config::Host::Tcp(name) => {
                if let Some(ip) = addrs.get(i) {
                    out.push((Target::Tcp(SocketAddr::new(*ip, port)), name.clone()));
                } else {
                    match weft::net::lookup_host((name.as_str(), port)) {
                        Ok(it) => out.extend(it.map(|a| (Target::Tcp(a), name.clone()))),
                        Err(e) => {
                            return Err(Error::Connect {
                                target: format!("{name}:{port}"),
                                source: e,
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Sends a cancel request for the statement running on `client`'s session
/// and waits until the server has acted on it: false if that could not be
/// confirmed by `deadline`.
///
/// The server acts on a cancel request asynchronously: a process it starts
/// for the request's connection signals the session's backend (SIGINT;
/// PostgreSQL 15, for one, sends it twice: to the backend, then to its
/// process group, see `signal_child` in `postmaster.c`) and then exits,
/// closing the connection. A signal that arrives while the backend runs a
/// statement cancels that statement; one that arrives while it waits for
/// the next command is dropped. So only once the cancel connection is
/// closed is it safe to send the session anything more: every signal has
/// been sent by then, and the backend takes it before it reads our next
/// message. Sending the request alone (`cancel_query_raw` returns once it
/// is written) is not enough: a statement that ended before the signal
/// came (it completed on its own, or the first of the two signals ended
/// it) leaves the signal to cancel the session's next statement.
fn cancel(
    client: &Client,
    target: &Target,
    tls: &Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    deadline: Instant,
) -> bool {
    let Ok(mut stream) = target.open(Some(deadline)) else {
        return false;
    };
    // `cancel_query_raw` consumes (and closes) its stream; the request's
    // end is watched on a second handle to the same socket.
    let Ok(request) = stream.try_clone() else {
        return false;
    };
    let token = client.cancel_token();
    let confirmed = pin!(async {
        token
            .cancel_query_raw(request, connector(tls))
            .await
            .is_ok()
            && stream.until_closed().await.is_ok()
    });
    matches!(run(confirmed, &mut |_| {}, Some(deadline), false), Ok(true))
}

/// One PostgreSQL session, used with plain blocking calls.
///
/// Every call parks the calling virtual thread while it waits for the
/// server (its carrier runs other virtual threads meanwhile); on an OS
/// thread it blocks that thread. Most programs get connections from a
/// [`Pool`](crate::Pool); `Connection::connect` opens one directly.
///
/// The statement argument of the query calls is SQL text or a prepared
/// [`Statement`]; parameters are `&[&(dyn ToSql + Sync)]`, as in the
/// `postgres` crate: `conn.query_one("SELECT $1::int4 + 1", &[&41i32])`.
///
/// # Interrupts
///
/// A query call is interruptible ([`weft::Thread::interrupt`]): the
/// server is sent a cancel request, the call returns
/// [`Error::Interrupted`] once the server has acted on the request (it
/// closed the request's connection) and the statement has ended with its
/// "canceling statement" error, and the connection stays usable: the
/// cancel never reaches a later statement. If the query completes before
/// the cancel takes effect, the call returns its result (again only after
/// the server has acted on the request) and the interrupt stays pending.
/// If the server does not act on the request within a few seconds, the
/// call returns [`Error::Interrupted`] and the connection is marked
/// broken.
pub struct Connection {
    client: Client,
    conn: Option<PgConnection>,
    conn_error: Option<tokio_postgres::Error>,
    broken: bool,
    target: Target,
    /// For cancel requests: the TLS configuration and server name.
    tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("target", &self.target)
            .field("broken", &self.is_broken())
            .finish_non_exhaustive()
    }
}

/// Polls the connection half; records how it ended if it did.
fn poll_conn(
    conn: &mut Option<PgConnection>,
    err: &mut Option<tokio_postgres::Error>,
    cx: &mut Context<'_>,
) {
    if let Some(c) = conn {
        match std::pin::Pin::new(c).poll(cx) {
            Poll::Pending => {}
            Poll::Ready(Ok(())) => *conn = None,
            Poll::Ready(Err(e)) => {
                *err = Some(e);
                *conn = None;
            }
        }
    }
}

impl Connection {
    /// Opens a session as `config` says (host and port or Unix socket
    /// directory, user, password, database, `connect_timeout`,
    /// `application_name`, `options`, `sslmode` as far as
    /// tokio-postgres's `Config` holds it: `disable`, `prefer`, `require`).
    /// Password authentication with SCRAM-SHA-256 and MD5 is supported.
    /// For `verify-ca`/`verify-full` use
    /// [`connect_url`](Connection::connect_url) or
    /// [`connect_with_tls`](Connection::connect_with_tls).
    ///
    /// # Errors
    ///
    /// [`Error::Connect`] if no server address could be reached,
    /// [`Error::Db`] if the server refused the session (e.g. SQLSTATE
    /// `28P01`, wrong password), [`Error::ServerTimeout`] past
    /// `connect_timeout`, [`Error::Interrupted`].
    pub fn connect(config: &PgConfig) -> Result<Connection> {
        let deadline = config
            .get_connect_timeout()
            .and_then(|t| Instant::now().checked_add(*t));
        let tls = TlsOptions {
            mode: match config.get_ssl_mode() {
                tokio_postgres::config::SslMode::Disable => crate::SslMode::Disable,
                tokio_postgres::config::SslMode::Require => crate::SslMode::Require,
                _ => crate::SslMode::Prefer,
            },
            root_cert: None,
        };
        Connection::connect_until(config, &tls, deadline)
    }

    /// Opens a session with `tls` settings (`sslmode`, `sslrootcert`; see
    /// [`tls`](crate::tls)) in place of `config`'s `sslmode`.
    ///
    /// # Errors
    ///
    /// As [`connect`](Connection::connect), and [`Error::Tls`] when the
    /// TLS handshake fails (e.g. the certificate does not verify).
    pub fn connect_with_tls(config: &PgConfig, tls: &TlsOptions) -> Result<Connection> {
        let deadline = config
            .get_connect_timeout()
            .and_then(|t| Instant::now().checked_add(*t));
        Connection::connect_until(config, tls, deadline)
    }

    /// Parses a URL (`postgres://user:pass@host:port/db`) or a key=value
    /// string and connects.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a string that does not parse, else as
    /// [`connect`](Connection::connect).
    pub fn connect_url(url: &str) -> Result<Connection> {
        let (rest, tls) = crate::tls::split_options(url)?;
        let config: PgConfig = rest.parse().map_err(|e| Error::Config(format!("{e}")))?;
        Connection::connect_with_tls(&config, &tls)
    }

    pub(crate) fn connect_until(
        config: &PgConfig,
        tls: &TlsOptions,
        deadline: Option<Instant>,
    ) -> Result<Connection> {
        let tls_config = tls.client_config()?;
        let mut last = None;
        for (target, host) in targets(config)? {
            let mut cfg = config.clone();
            let name = match (&target, &tls_config) {
                // As libpq: no TLS over Unix sockets.
                (Target::Unix(_), _) | (_, None) => {
                    cfg.ssl_mode(tokio_postgres::config::SslMode::Disable);
                    None
                }
                (Target::Tcp(addr), Some(c)) => {
                    cfg.ssl_mode(tls.to_pg());
                    let name = ServerName::try_from(host.clone())
                        .unwrap_or_else(|_| ServerName::IpAddress(addr.ip().into()));
                    Some((c.clone(), name))
                }
            };
            match Connection::connect_target(&cfg, target, name, deadline) {
                Ok(c) => return Ok(c),
                Err(e @ (Error::Interrupted | Error::Db(_) | Error::Tls { .. })) => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Config("the host names resolved to no address".into())))
    }

    fn connect_target(
        config: &PgConfig,
        target: Target,
        tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
        deadline: Option<Instant>,
    ) -> Result<Connection> {
        let stream = target.open(deadline).map_err(|e| {
            if e.kind() == std::io::ErrorKind::Interrupted {
                Error::Interrupted
            } else {
                Error::Connect {
                    target: target.to_string(),
                    source: e,
                }
            }
        })?;
        let fut = pin!(Offload(Box::pin(
            config.connect_raw(stream, connector(&tls))
        )));
        match run(fut, &mut |_| {}, deadline, true) {
            Ok(Ok((client, conn))) => Ok(Connection {
                client,
                conn: Some(conn),
                conn_error: None,
                broken: false,
                target,
                tls,
            }),
            Ok(Err(e)) => match crate::tls::tls_failure(&e) {
                Some(message) => Err(Error::Tls {
                    target: target.to_string(),
                    message,
                    source: e,
                }),
                None => Err(Error::Db(e)),
            },
            Err(Stop::Interrupted) => Err(Error::Interrupted),
            Err(Stop::TimedOut) => Err(Error::ServerTimeout {
                what: "connecting",
                limit: config.get_connect_timeout().copied().unwrap_or_default(),
            }),
        }
    }

    /// Whether the connection is known to be unusable (lost, or broken by
    /// an earlier failure). A pool discards such connections.
    pub fn is_broken(&self) -> bool {
        self.broken || self.conn.is_none() || self.client.is_closed()
    }

    pub(crate) fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// Runs one client call to completion, interruptibly.
    fn call<'a, T, F>(&'a mut self, make: impl FnOnce(&'a Client) -> F) -> Result<T>
    where
        F: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        if self.broken {
            return Err(Error::Broken);
        }
        let Connection {
            client,
            conn,
            conn_error,
            broken,
            target,
            tls,
        } = self;
        let client: &'a Client = client;
        let mut side = |cx: &mut Context<'_>| poll_conn(conn, conn_error, cx);
        let mut fut = pin!(make(client));
        let first = run(fut.as_mut(), &mut side, None, true);
        let res = match first {
            Ok(r) => r,
            Err(Stop::TimedOut) => unreachable!("no deadline"),
            Err(Stop::Interrupted) => {
                // Have the server cancel, then wait for the call to end
                // (with the server's "canceling statement" error, usually).
                let deadline = Instant::now() + CANCEL_GRACE;
                let second = if cancel(client, target, tls, deadline) {
                    run(fut.as_mut(), &mut side, Some(deadline), false)
                } else {
                    // Not known whether or when the server will signal
                    // the session: a late signal would cancel whatever
                    // statement runs next on it.
                    Err(Stop::TimedOut)
                };
                match second {
                    Ok(Err(e)) if e.code() == Some(&SqlState::QUERY_CANCELED) => {
                        return Err(Error::Interrupted);
                    }
                    Ok(r) => {
                        // Finished on its own: the interrupt stays pending.
                        weft::current().interrupt();
                        r
                    }
                    Err(_) => {
                        *broken = true;
                        return Err(Error::Interrupted);
                    }
                }
            }
        };
        res.map_err(|e| {
            let lost = e.is_closed() || e.as_db_error().is_some_and(is_fatal);
            if lost {
                *broken = true;
                // The connection half knows why (e.g. the server's FATAL
                // "terminating connection due to administrator command").
                return Error::ConnectionLost(conn_error.take().unwrap_or(e));
            }
            Error::Db(e)
        })
    }

    /// Executes a statement, returning the rows it produced.
    ///
    /// # Errors
    ///
    /// A server error keeps its SQLSTATE ([`Error::code`]); see also the
    /// type's notes on interrupts.
    pub fn query<T>(&mut self, statement: &T, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>>
    where
        T: ?Sized + ToStatement,
    {
        self.call(|c| c.query(statement, params))
    }

    /// Executes a statement that returns exactly one row.
    ///
    /// # Errors
    ///
    /// As [`query`](Connection::query), and an error if the statement
    /// returned no row or more than one.
    pub fn query_one<T>(&mut self, statement: &T, params: &[&(dyn ToSql + Sync)]) -> Result<Row>
    where
        T: ?Sized + ToStatement,
    {
        self.call(|c| c.query_one(statement, params))
    }

    /// Executes a statement that returns zero or one row.
    ///
    /// # Errors
    ///
    /// As [`query`](Connection::query), and an error for more than one row.
    pub fn query_opt<T>(
        &mut self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>>
    where
        T: ?Sized + ToStatement,
    {
        self.call(|c| c.query_opt(statement, params))
    }

    /// Like [`query`](Connection::query) with the parameter types given
    /// explicitly instead of prepared first (one round trip, no statement
    /// left on the server).
    ///
    /// # Errors
    ///
    /// As [`query`](Connection::query).
    pub fn query_typed(
        &mut self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>> {
        self.call(|c| c.query_typed(sql, params))
    }

    /// Executes a statement, returning the number of rows it modified.
    ///
    /// # Errors
    ///
    /// As [`query`](Connection::query).
    pub fn execute<T>(&mut self, statement: &T, params: &[&(dyn ToSql + Sync)]) -> Result<u64>
    where
        T: ?Sized + ToStatement,
    {
        self.call(|c| c.execute(statement, params))
    }

    /// Prepares a statement (extended protocol); reuse it with the query
    /// calls. It is closed on the server when the last clone is dropped.
    ///
    /// # Errors
    ///
    /// As [`query`](Connection::query).
    pub fn prepare(&mut self, sql: &str) -> Result<Statement> {
        self.call(|c| c.prepare(sql))
    }

    /// Prepares a statement with some parameter types given explicitly.
    ///
    /// # Errors
    ///
    /// As [`query`](Connection::query).
    pub fn prepare_typed(&mut self, sql: &str, types: &[Type]) -> Result<Statement> {
        self.call(|c| c.prepare_typed(sql, types))
    }

    /// Runs one or more `;`-separated statements with the simple query
    /// protocol, discarding rows. No parameters: never build SQL from
    /// untrusted input.
    ///
    /// # Errors
    ///
    /// As [`query`](Connection::query); statements after a failing one do
    /// not run.
    pub fn batch_execute(&mut self, sql: &str) -> Result<()> {
        self.call(|c| c.batch_execute(sql))
    }

    /// Runs statements with the simple query protocol, returning rows as
    /// text.
    ///
    /// # Errors
    ///
    /// As [`batch_execute`](Connection::batch_execute).
    pub fn simple_query(&mut self, sql: &str) -> Result<Vec<SimpleQueryMessage>> {
        self.call(|c| c.simple_query(sql))
    }

    /// Begins a transaction. It rolls back when dropped unless
    /// [`Transaction::commit`] was called.
    ///
    /// # Errors
    ///
    /// As [`batch_execute`](Connection::batch_execute).
    ///
    /// # Examples
    ///
    /// ```
    /// // Needs a server: runs against WEFT_PG_URL (CI sets it) and returns
    /// // early without one.
    /// let Ok(url) = std::env::var("WEFT_PG_URL") else { return Ok(()) };
    /// let pool = weft_pg::Pool::new(weft_pg::Config::from_url(&url)?)?;
    /// let mut conn = pool.get()?;
    /// conn.batch_execute("CREATE TEMP TABLE doc_tx (n int4)")?;
    /// {
    ///     let mut tx = conn.transaction()?;
    ///     tx.execute("INSERT INTO doc_tx VALUES (1)", &[])?;
    ///     // dropped without commit: rolled back
    /// }
    /// let mut tx = conn.transaction()?;
    /// tx.execute("INSERT INTO doc_tx VALUES (2)", &[])?;
    /// tx.commit()?;
    /// let n: i64 = conn.query_one("SELECT count(*) FROM doc_tx", &[])?.get(0);
    /// assert_eq!(n, 1);
    /// # Ok::<(), weft_pg::Error>(())
    /// ```
    pub fn transaction(&mut self) -> Result<Transaction<'_>> {
        self.batch_execute("BEGIN")?;
        Ok(Transaction::new(self, 0))
    }

    /// The value of a server parameter reported at startup or since
    /// (`server_version`, `TimeZone`, `application_name`, …).
    pub fn parameter(&self, name: &str) -> Option<&str> {
        self.conn.as_ref().and_then(|c| c.parameter(name))
    }

    /// Checks the connection with one round trip (a protocol `Sync`, or
    /// `test_query` if given), within `timeout`. Not interruptible.
    /// A failure marks the connection broken.
    ///
    /// # Errors
    ///
    /// [`Error::ServerTimeout`] if the server did not answer in time, or
    /// the error of the round trip.
    pub fn validate(&mut self, timeout: Duration, test_query: Option<&str>) -> Result<()> {
        if self.is_broken() {
            return Err(Error::Broken);
        }
        let deadline = Instant::now().checked_add(timeout);
        let Connection {
            client,
            conn,
            conn_error,
            broken,
            ..
        } = self;
        let mut side = |cx: &mut Context<'_>| poll_conn(conn, conn_error, cx);
        let r = match test_query {
            None => run(pin!(client.check_connection()), &mut side, deadline, false),
            Some(q) => run(pin!(client.batch_execute(q)), &mut side, deadline, false),
        };
        match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                *broken = true;
                Err(Error::ConnectionLost(conn_error.take().unwrap_or(e)))
            }
            Err(_) => {
                *broken = true;
                Err(Error::ServerTimeout {
                    what: "connection validation",
                    limit: timeout,
                })
            }
        }
    }

    /// Runs `sql` without interrupts (commit, rollback, also from `Drop`).
    /// A failure other than a server error marks the connection broken.
    pub(crate) fn batch_uninterruptible(&mut self, sql: &str) -> Result<()> {
        if self.broken {
            return Err(Error::Broken);
        }
        let Connection {
            client,
            conn,
            conn_error,
            broken,
            ..
        } = self;
        let mut side = |cx: &mut Context<'_>| poll_conn(conn, conn_error, cx);
        let deadline = Instant::now().checked_add(CANCEL_GRACE);
        match run(pin!(client.batch_execute(sql)), &mut side, deadline, false) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                if e.is_closed() || e.as_db_error().is_some_and(is_fatal) {
                    *broken = true;
                    return Err(Error::ConnectionLost(conn_error.take().unwrap_or(e)));
                }
                Err(Error::Db(e))
            }
            Err(_) => {
                *broken = true;
                Err(Error::ServerTimeout {
                    what: "ending a transaction",
                    limit: CANCEL_GRACE,
                })
            }
        }
    }

    /// Ends the session: tells the server (`Terminate`) and closes the
    /// socket. Dropping a `Connection` closes the socket without telling.
    pub fn close(self) {
        let Connection {
            client,
            conn,
            broken,
            ..
        } = self;
        drop(client);
        if let Some(mut conn) = conn
            && !broken
        {
            let deadline = Instant::now().checked_add(CLOSE_GRACE);
            let _ = run(pin!(&mut conn), &mut |_| {}, deadline, false);
        }
    }
}
