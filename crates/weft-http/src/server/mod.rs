//! The server: [`Server`] (bind, then serve with a handler), [`serve`],
//! and the state its threads share. One concept per file below:
//!
//! | file | concept |
//! |---|---|
//! | `config.rs` | [`ServerConfig`], [`ThreadMode`], [`WhenFull`]: settings and limits |
//! | `handle.rs` | [`ServerHandle`]: statistics, graceful shutdown, waiting, signals |
//! | `stats.rs` | [`ServerStats`], [`ErrorStats`] and the counters behind them |
//! | `accept.rs` | the accept loop and the `503` of a full server |
//! | `conn.rs` | one connection's loop (TLS handshake, request after request) |
//! | `idle.rs` | the idle set: connections that wait for a byte without a thread |
//! | `process.rs` | one request: frame, run the handler, respond |
//! | `head.rs` | a connection's stream and buffers; reading and parsing one request head |
//! | `respond.rs` | writing a response; the server's own error answers |
//! | `log.rs` | the error log: a line per `5xx` error answer |
//! | `pool.rs` | platform mode's pool of OS worker threads |
//!
//! The files call one way, down the table's order from `accept.rs`:
//! accept → conn → process → head, each of them → respond and stats;
//! none calls back up, but for the idle set, which starts connection
//! threads (`idle` → `conn`) and which a connection thread hands its
//! connection to (`conn` → `idle`).
//!
//! # A flood of connections
//!
//! Three things keep idle or slow clients from locking others out:
//!
//! - **Connections cost little while they wait.** A plain-HTTP connection
//!   that has sent nothing — a new one, or a keep-alive one whose thread
//!   waited [`ServerConfig::idle_thread_timeout`] in vain — waits in the
//!   idle set without a thread, a stack or a buffer (`idle.rs`); a thread
//!   starts again with its next byte.
//! - **The limit follows the descriptors.**
//!   [`ServerConfig::max_connections`] defaults to the soft
//!   `RLIMIT_NOFILE` less a reserve, so the server, not `accept`'s
//!   `EMFILE`, decides who gets in.
//! - **A full server sheds, it does not wait** ([`WhenFull::ShedIdle`], the
//!   default): a new connection closes the waiting connection nearest its
//!   deadline, else the oldest thread that waits for or receives a request
//!   head. Requests in progress are never shed; per-request budgets bound
//!   them ([`ServerConfig::body_read_timeout`],
//!   [`ServerConfig::write_timeout`], [`ServerConfig::min_data_rate`]), and
//!   a head has [`ServerConfig::header_read_timeout`] in all. So a client
//!   that connects and sends its request at once is served however many
//!   idle or slowloris connections are open. A shorter first-byte timeout
//!   under pressure was considered and left out: shedding already makes a
//!   waiting connection cost the newcomer nothing.
//!
//! Error answers: whatever the server answers by itself (`400`, `408`,
//! `413`, `414`, `417`, `431`, `501`, a panic's `500`, `503`) is an
//! [`HttpError`](crate::HttpError) rendered by the handler's
//! [`render_error`](crate::Handler::render_error) — for a
//! [`Router`](crate::Router), its `on_error` hook — and so is any response
//! still marked as an error when the handler returns it.

mod accept;
mod config;
mod conn;
mod handle;
mod head;
mod idle;
mod log;
mod pool;
mod process;
mod respond;
mod stats;

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use weft::net::TcpListener;
use weft::sync::{Condvar, Semaphore};

use crate::router::Handler;
use weft::sync::Unpoison;

pub use config::{ServerConfig, ThreadMode, WhenFull};
pub use handle::{ServerHandle, ShutdownReport};
pub use stats::{ErrorStats, ServerStats};

use accept::accept_loop;
use handle::Life;
use idle::IdleSet;
use pool::Pool;
use stats::Counters;

/// A bound HTTP server, ready to [`serve`](Server::serve).
///
/// ```
/// use weft_http::{Response, Server, ServerConfig};
/// let server = Server::bind("127.0.0.1:0", ServerConfig::default())?;
/// let handle = server.serve(|_req: &mut weft_http::Request<'_>| Response::text("hi"))?;
/// let addr = handle.local_addr();
/// let resp = weft_http::Client::new().get(&format!("http://{addr}/")).send()?;
/// assert_eq!(resp.text()?, "hi");
/// handle.shutdown(std::time::Duration::from_secs(5));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Server {
    listener: TcpListener,
    config: ServerConfig,
}

impl Server {
    /// Binds a listener on `addr` (with `SO_REUSEADDR` and
    /// [`ServerConfig::backlog`]).
    ///
    /// # Errors
    ///
    /// `InvalidInput` naming the setting when `config` is invalid (a zero
    /// limit or timeout); the OS error when no address can be bound.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use weft_http::{Server, ServerConfig, ThreadMode};
    ///
    /// let server = Server::bind("127.0.0.1:0", ServerConfig::default())?;
    /// assert_ne!(server.local_addr()?.port(), 0); // port 0: the OS picked one
    ///
    /// let config = ServerConfig::default().thread_mode(ThreadMode::Platform { threads: 0 });
    /// let err = Server::bind("127.0.0.1:0", config).err().unwrap();
    /// assert_eq!(err.kind(), ErrorKind::InvalidInput);
    /// assert!(err.to_string().contains("at least one thread"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind(addr: impl ToSocketAddrs, config: ServerConfig) -> io::Result<Server> {
        config.validate()?;
        let mut last = None;
        for a in addr.to_socket_addrs()? {
            match bind_one(a, config.backlog) {
                Ok(listener) => return Ok(Server { listener, config }),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "no address to bind to")
        }))
    }

    /// Uses an already bound and listening `std` listener.
    pub fn from_std(listener: std::net::TcpListener, config: ServerConfig) -> io::Result<Server> {
        config.validate()?;
        Ok(Server {
            listener: TcpListener::from_std(listener)?,
            config,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Starts serving with `handler` and returns at once. The server runs
    /// until [`ServerHandle::shutdown`] (or until the handle is dropped,
    /// which shuts it down without a grace period).
    pub fn serve(self, handler: impl Handler) -> io::Result<ServerHandle> {
        let Server { listener, config } = self;
        let addr = listener.local_addr()?;
        let rt = match &config.runtime {
            Some(rt) => rt.clone(),
            // Inside a simulation, its runtime: the default one is real.
            None => match weft::sim::net::runtime() {
                Some(rt) => rt,
                None => weft::default_runtime()?,
            },
        };
        // After the runtime's start, which wraps the hook in place first.
        crate::panic::install_hook();
        let pool = match config.thread_mode {
            ThreadMode::Virtual => None,
            ThreadMode::Platform { threads } => Some(Pool::start(threads, config.accept_queue)?),
        };
        // The idle set holds plain connections on real sockets; TLS ones
        // and simulated ones keep their threads.
        let idle = (config.tls.is_none() && !weft::sim::is_simulated())
            .then(|| Arc::new(IdleSet::default()));
        let shared = Arc::new(Shared {
            limit: Arc::new(Semaphore::new(config.max_connections)),
            idle,
            config,
            handler: Box::new(handler),
            stats: Counters::default(),
            shutting_down: AtomicBool::new(false),
            conns: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
            drain: weft::sync::Mutex::new(()),
            drained: Condvar::new(),
            pool,
            rt: rt.clone(),
        });
        stats::publish(addr, &shared);
        if let Some(idle) = &shared.idle {
            let (i, s) = (idle.clone(), shared.clone());
            weft::Builder::new()
                .name("weft-http-idle")
                .spawn_on(&rt, move || i.drive(&s))?;
        }
        let s = shared.clone();
        let acceptor = weft::Builder::new()
            .name("weft-http-acceptor")
            .spawn_on(&rt, move || accept_loop(s, listener))?;
        Ok(ServerHandle {
            shared,
            addr,
            acceptor: Mutex::new(Some(acceptor)),
            shut_down: AtomicBool::new(false),
            life: Arc::new(Life::default()),
        })
    }
}

/// A listener on `addr`; inside a simulation (`weft::sim`), a simulated
/// one (which has no backlog to set).
fn bind_one(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    if weft::sim::is_simulated() {
        return TcpListener::bind(addr);
    }
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    TcpListener::from_std(s.into())
}

/// Starts a server with the default configuration on `addr`.
///
/// # Examples
///
/// ```
/// let h = weft_http::serve("127.0.0.1:0", |_req: &mut weft_http::Request<'_>| {
///     weft_http::Response::text("hello")
/// })?;
/// assert_eq!(h.stats().requests, 0);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn serve(addr: impl ToSocketAddrs, handler: impl Handler) -> io::Result<ServerHandle> {
    Server::bind(addr, ServerConfig::default())?.serve(handler)
}

/// [`ConnSlot::state`]: waiting for a request (shutdown closes it now; a
/// full server may shed it).
const IDLE: u8 = 0;
/// [`ConnSlot::state`]: a request is being handled or answered.
const ACTIVE: u8 = 1;
/// [`ConnSlot::state`]: receiving a request head (or the TLS handshake);
/// a full server may shed it.
const HEAD: u8 = 2;
/// [`ConnSlot::state`]: shed by a full server; the thread closes the
/// connection at its next step.
const SHED: u8 = 3;

/// Per-connection record for shutdown and shedding.
struct ConnSlot {
    /// The connection's virtual thread.
    thread: weft::Thread,
    /// `IDLE`, `HEAD`, `ACTIVE` or `SHED`.
    state: AtomicU8,
    /// Platform mode: the OS worker running this connection's request.
    worker: Mutex<Option<weft::Thread>>,
}

impl ConnSlot {
    fn interrupt(&self) {
        self.thread.interrupt();
        if let Some(w) = &*self.worker.lock().unpoison() {
            w.interrupt();
        }
    }

    /// Moves to `to`; false, and nothing changed, once shed.
    fn set_state(&self, to: u8) -> bool {
        self.state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                (s != SHED).then_some(to)
            })
            .is_ok()
    }

    /// Marks the connection shed if it has no request in progress (`IDLE`
    /// or `HEAD`) and interrupts its thread, whose read then fails.
    fn shed(&self) -> bool {
        let shed = self
            .state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                (s == IDLE || s == HEAD).then_some(SHED)
            })
            .is_ok();
        if shed {
            self.thread.interrupt();
        }
        shed
    }
}

/// What [`Shared::shed`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shed {
    /// Closed a waiting connection: its permit is free.
    Freed,
    /// Interrupted a connection's thread: its permit frees when it ends.
    Pending,
    /// Every connection has a request in progress.
    Nothing,
}

/// What the acceptor, the connection threads, the pool workers and the
/// handle share: settings, handler, counters, open connections and the
/// shutdown flag.
struct Shared {
    config: ServerConfig,
    handler: Box<dyn Handler>,
    stats: Counters,
    shutting_down: AtomicBool,
    /// Connections with a thread, by id: oldest first.
    conns: Mutex<BTreeMap<u64, Arc<ConnSlot>>>,
    /// Connections without a thread (`None`: TLS or simulated server).
    idle: Option<Arc<IdleSet>>,
    next_id: AtomicU64,
    drain: weft::sync::Mutex<()>,
    drained: Condvar,
    limit: Arc<Semaphore>,
    pool: Option<Pool>,
    rt: weft::Runtime,
}

impl Shared {
    /// The open connections with a thread, oldest first (a fixed order, so
    /// a shutdown interrupts them in the same order in every run of a
    /// simulation).
    fn slots(&self) -> Vec<Arc<ConnSlot>> {
        self.conns.lock().unpoison().values().cloned().collect()
    }

    /// Makes room for a new connection ([`WhenFull::ShedIdle`]): closes the
    /// waiting connection nearest its deadline, else sheds the oldest
    /// connection whose thread has no request in progress.
    fn shed(&self) -> Shed {
        if let Some(idle) = &self.idle
            && idle.shed_one(self)
        {
            return Shed::Freed;
        }
        let conns = self.conns.lock().unpoison();
        if conns.values().any(|s| s.shed()) {
            stats::inc(&self.stats.shed);
            Shed::Pending
        } else {
            Shed::Nothing
        }
    }

    /// Waits until no connection is open or `deadline` passes.
    fn wait_closed(&self, deadline: Instant) -> bool {
        let mut g = self.drain.lock().unpoison();
        loop {
            if self.stats.open.load(Ordering::SeqCst) == 0 {
                return true;
            }
            let now = weft::clock::now();
            if now >= deadline {
                return false;
            }
            g = match self.drained.wait_timeout(g, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }

    fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}
