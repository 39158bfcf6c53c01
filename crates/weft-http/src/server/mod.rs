//! The server: configuration, accept loop, connection loop, statistics and
//! graceful shutdown.
//!
//! Error answers: whatever the server answers by itself (`400`, `408`,
//! `413`, `417`, `431`, a panic's `500`, `503`) is an
//! [`HttpError`](crate::HttpError) rendered by the handler's
//! [`render_error`](crate::Handler::render_error) — for a
//! [`Router`](crate::Router), its `on_error` hook — and so is any response
//! still marked as an error when the handler returns it.
//!
//! Lifecycle: [`ServerHandle::shutdown`] does the drain once;
//! [`ServerHandle::wait`] parks until it has finished (on a `weft::sync`
//! condition variable, so it works on virtual and OS threads);
//! [`ServerHandle::serve_until_signal`] turns the first SIGINT/SIGTERM into
//! that shutdown (see `signal.rs` for how signals are caught).

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::mem::MaybeUninit;
use std::net::{SocketAddr, ToSocketAddrs};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft::net::{TcpListener, TcpStream};
use weft::sync::{Condvar, OwnedSemaphorePermit, Semaphore};

use crate::date::push_date;
use crate::error::{HttpError, render};
use crate::request::{BodyError, Request, RequestBody, Version};
use crate::response::reason;
use crate::response::{Body, IntoResponse, Response};
use crate::router::Handler;
use crate::tls::Stream;
use crate::unpoison::Unpoison;
mod config;
mod pool;
mod stats;

pub use config::{ServerConfig, ThreadMode, WhenFull};
pub use stats::{ErrorStats, ServerStats};

use pool::{Job, Pool};
use stats::{Counters, inc};

use crate::wire::{
    BufferedStream, ChunkedWriter, Framing, InBuf, LimitedWriter, has_token, parse_content_length,
    push_u64, valid_header_name, valid_header_value, write_all_vectored,
};

/// Header slots kept on the stack; a larger `max_headers` uses the heap.
/// Why not always 256 on the stack: 256 slots are 8 KiB, and a stack page
/// touched once stays resident for the connection's life — at 10,000
/// connections that alone was 80 MB. Stack probes touch every page of a
/// frame even when the array is never written.
const SMALL_HEADERS: usize = 64;

/// `max` uninitialised header slots: from `small` when they fit, else
/// from `big` (allocated here).
fn header_slots<'s, 'h>(
    small: &'s mut [MaybeUninit<httparse::Header<'h>>; SMALL_HEADERS],
    big: &'s mut Vec<MaybeUninit<httparse::Header<'h>>>,
    max: usize,
) -> &'s mut [MaybeUninit<httparse::Header<'h>>] {
    if max <= SMALL_HEADERS {
        &mut small[..max]
    } else {
        big.resize_with(max, MaybeUninit::uninit);
        &mut big[..]
    }
}
/// Initial input buffer per connection.
const INPUT_BUF: usize = 4096;
/// Response bodies up to this size are copied behind the head and sent with
/// one `write`.
const COPY_BODY: usize = 16 * 1024;

// ---------------------------------------------------------------------------
// Server and handle

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
                Ok(l) => {
                    return Ok(Server {
                        listener: TcpListener::from_std(l)?,
                        config,
                    });
                }
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
            None => weft::default_runtime()?,
        };
        let pool = match config.thread_mode {
            ThreadMode::Virtual => None,
            ThreadMode::Platform { threads } => Some(Pool::start(threads, config.accept_queue)?),
        };
        let shared = Arc::new(Shared {
            limit: Arc::new(Semaphore::new(config.max_connections)),
            config,
            handler: Box::new(handler),
            stats: Counters::default(),
            shutting_down: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            drain: weft::sync::Mutex::new(()),
            drained: Condvar::new(),
            pool,
            rt: rt.clone(),
        });
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

fn bind_one(addr: SocketAddr, backlog: u32) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    Ok(s.into())
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

/// What [`ServerHandle::shutdown`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Every connection finished within the grace period.
    pub drained: bool,
    /// Connections still open at the deadline, which were interrupted
    /// (their sockets shut down; a handler blocked in a weft call gets
    /// `ErrorKind::Interrupted`).
    pub forced: usize,
    /// Connections still open after the interrupt (handlers that ignore
    /// interrupts); they end on their own.
    pub remaining: usize,
}

/// Controls a running server: address, statistics, shutdown, and waiting
/// for it to stop ([`wait`](ServerHandle::wait),
/// [`serve_until_signal`](ServerHandle::serve_until_signal)).
pub struct ServerHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    acceptor: Mutex<Option<weft::JoinHandle<()>>>,
    shut_down: AtomicBool,
    life: Arc<Life>,
}

/// Where the server is in its life, for [`ServerHandle::wait`] and
/// [`ServerHandle::serve_until_signal`].
#[derive(Default)]
struct Life {
    state: weft::sync::Mutex<LifeState>,
    changed: Condvar,
    /// Closes the signal watcher of a running `serve_until_signal`.
    signals: Mutex<Option<signal_hook::iterator::Handle>>,
}

#[derive(Default)]
struct LifeState {
    /// `shutdown` has begun.
    stopping: bool,
    /// SIGINT or SIGTERM arrived during `serve_until_signal`.
    signaled: bool,
    /// `shutdown` has finished.
    report: Option<ShutdownReport>,
}

impl Life {
    fn update(&self, f: impl FnOnce(&mut LifeState)) {
        let mut g = self.state.lock().unpoison();
        f(&mut g);
        self.changed.notify_all();
    }

    /// Waits until `f` returns `Some`.
    fn wait_for<T>(&self, mut f: impl FnMut(&LifeState) -> Option<T>) -> T {
        let mut g = self.state.lock().unpoison();
        loop {
            if let Some(t) = f(&g) {
                return t;
            }
            g = self.changed.wait(g).unpoison();
        }
    }

    fn close_signals(&self) {
        if let Some(h) = &*self.signals.lock().unpoison() {
            h.close();
        }
    }
}

impl ServerHandle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The thread mode the server runs in.
    pub fn thread_mode(&self) -> ThreadMode {
        self.shared.config.thread_mode
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ServerStats {
        self.shared.stats.snapshot()
    }

    /// Graceful shutdown: stops accepting (the listener is closed), closes
    /// idle keep-alive connections at once, lets in-flight requests finish
    /// (their responses carry `Connection: close`), and waits up to `grace`
    /// for every connection to end. Connections still open at the deadline
    /// are interrupted. Idempotent; later calls return at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use weft_http::{Client, Request, Response};
    ///
    /// let server = weft_http::serve("127.0.0.1:0", |_req: &mut Request<'_>| {
    ///     weft::sleep(Duration::from_millis(200)).unwrap();
    ///     Response::text("finished")
    /// })?;
    /// let url = format!("http://{}/", server.local_addr());
    /// let in_flight = weft::spawn(move || Client::new().get(&url).send()?.text());
    /// while server.stats().in_flight == 0 {
    ///     weft::sleep(Duration::from_millis(1))?;
    /// }
    /// // The request in flight finishes; nothing new is accepted.
    /// let report = server.shutdown(Duration::from_secs(10));
    /// assert!(report.drained);
    /// assert_eq!(in_flight.join().unwrap()?, "finished");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown(&self, grace: Duration) -> ShutdownReport {
        if self.shut_down.swap(true, Ordering::SeqCst) {
            return ShutdownReport {
                drained: self.shared.stats.open.load(Ordering::SeqCst) == 0,
                forced: 0,
                remaining: self.shared.stats.open.load(Ordering::SeqCst) as usize,
            };
        }
        self.life.update(|s| s.stopping = true);
        self.life.close_signals();
        let report = self.drain(grace);
        self.life.update(|s| s.report = Some(report));
        report
    }

    /// Blocks until the server has been shut down — by
    /// [`shutdown`](ServerHandle::shutdown) on another thread or by a
    /// signal in [`serve_until_signal`](ServerHandle::serve_until_signal)
    /// — and returns the report of that shutdown. Works on a virtual
    /// thread (it parks) and on an OS thread.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let server = Arc::new(weft_http::serve("127.0.0.1:0", |_req: &mut weft_http::Request<'_>| "hi")?);
    /// let s = server.clone();
    /// let admin = std::thread::spawn(move || s.shutdown(Duration::from_secs(5)));
    /// let report = server.wait(); // returns once the other thread has shut it down
    /// assert!(report.drained);
    /// assert_eq!(admin.join().unwrap(), report);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn wait(&self) -> ShutdownReport {
        self.life.wait_for(|s| s.report)
    }

    /// Serves until the process gets SIGINT or SIGTERM, then shuts down
    /// gracefully: stops accepting, lets in-flight requests finish within
    /// `grace`, then interrupts what is left (see
    /// [`shutdown`](ServerHandle::shutdown)). Returns the report; a
    /// `main` that returns normally when `report.drained` exits with code
    /// 0. Also returns when the server is shut down some other way.
    ///
    /// While it waits, the two signals no longer terminate the process;
    /// a second signal during the drain does (as if uncaught), as do
    /// signals after it returns. Signals are caught with `signal-hook`
    /// (a self-pipe; a watcher thread turns them into the shutdown).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use weft_http::{Router, Server, ServerConfig};
    ///
    /// let router = Router::new().get("/", |_req| "hello");
    /// let server = Server::bind("0.0.0.0:8080", ServerConfig::default())?.serve(router)?;
    /// let report = server.serve_until_signal(Duration::from_secs(10))?;
    /// if !report.drained {
    ///     std::process::exit(1);
    /// }
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn serve_until_signal(&self, grace: Duration) -> io::Result<ShutdownReport> {
        crate::signal::install_default_fallback()?;
        let mut signals = signal_hook::iterator::Signals::new(crate::signal::SIGNALS)?;
        let waiting = Arc::new(crate::signal::Waiting::start());
        let handle = signals.handle();
        *self.life.signals.lock().unpoison() = Some(handle.clone());
        if self.shut_down.load(Ordering::SeqCst) {
            handle.close();
        }
        let (life, w) = (self.life.clone(), waiting.clone());
        let watcher = std::thread::Builder::new()
            .name("weft-http-signals".into())
            .spawn(move || {
                if signals.forever().next().is_some() {
                    // A second signal now has its default effect.
                    w.release();
                    life.update(|s| s.signaled = true);
                }
            });
        let watcher = match watcher {
            Ok(w) => w,
            Err(e) => {
                handle.close();
                return Err(e);
            }
        };
        let signaled = self
            .life
            .wait_for(|s| (s.signaled || s.stopping).then_some(s.signaled));
        handle.close();
        let _ = watcher.join();
        self.life.signals.lock().unpoison().take();
        waiting.release();
        if signaled {
            self.shutdown(grace);
        }
        Ok(self.wait())
    }

    /// The work of [`shutdown`](ServerHandle::shutdown), run once.
    fn drain(&self, grace: Duration) -> ShutdownReport {
        let shared = &self.shared;
        let deadline = Instant::now() + grace;
        shared.shutting_down.store(true, Ordering::SeqCst);
        // Stop the acceptor: an interrupt makes its accept (or permit wait)
        // fail and shuts the listener down.
        if let Some(acceptor) = self.acceptor.lock().unpoison().take() {
            acceptor.thread().interrupt();
            // Bounded: an acceptor that cannot run (its carrier is held,
            // e.g. by a handler blocked on an OS lock) is left behind
            // rather than hanging the shutdown.
            let limit = deadline.max(Instant::now() + Duration::from_secs(1));
            while !acceptor.is_finished() && Instant::now() < limit {
                weft::park_timeout(Duration::from_millis(1));
            }
            if acceptor.is_finished() {
                let _ = acceptor.join();
            }
        }
        // Close idle connections; busy ones see the flag when they finish.
        for slot in shared.slots() {
            if slot.state.load(Ordering::SeqCst) == IDLE {
                slot.thread.interrupt();
            }
        }
        let drained = shared.wait_closed(deadline);
        let mut forced = 0;
        let mut remaining = 0;
        if !drained {
            let slots = shared.slots();
            forced = slots.len();
            for slot in &slots {
                slot.interrupt();
            }
            if !shared.wait_closed(Instant::now() + Duration::from_secs(1)) {
                remaining = shared.stats.open.load(Ordering::SeqCst) as usize;
            }
        }
        if let Some(pool) = &shared.pool {
            pool.close();
        }
        ShutdownReport {
            drained,
            forced,
            remaining,
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown(Duration::ZERO);
    }
}

impl fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerHandle")
            .field("addr", &self.addr)
            .field("thread_mode", &self.shared.config.thread_mode)
            .field("stats", &self.stats())
            .finish()
    }
}

// ---------------------------------------------------------------------------
// Shared state

const IDLE: u8 = 0;
const ACTIVE: u8 = 1;

/// Per-connection record for shutdown.
struct ConnSlot {
    /// The connection's virtual thread.
    thread: weft::Thread,
    /// `IDLE` while waiting for the first byte of a request.
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
}

struct Shared {
    config: ServerConfig,
    handler: Box<dyn Handler>,
    stats: Counters,
    shutting_down: AtomicBool,
    conns: Mutex<HashMap<u64, Arc<ConnSlot>>>,
    next_id: AtomicU64,
    drain: weft::sync::Mutex<()>,
    drained: Condvar,
    limit: Arc<Semaphore>,
    pool: Option<Pool>,
    rt: weft::Runtime,
}

impl Shared {
    fn slots(&self) -> Vec<Arc<ConnSlot>> {
        self.conns.lock().unpoison().values().cloned().collect()
    }

    /// Waits until no connection is open or `deadline` passes.
    fn wait_closed(&self, deadline: Instant) -> bool {
        let mut g = self.drain.lock().unpoison();
        loop {
            if self.stats.open.load(Ordering::SeqCst) == 0 {
                return true;
            }
            let now = Instant::now();
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

// ---------------------------------------------------------------------------
// Accepting

fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let cfg = &shared.config;
    loop {
        if shared.is_shutting_down() {
            break;
        }
        let permit = match cfg.when_full {
            WhenFull::Wait => match shared.limit.clone().acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => break, // interrupted: shutting down
            },
            WhenFull::Reject => None,
        };
        let (stream, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => break,
            Err(e) => {
                inc(&shared.stats.accept);
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                ) {
                    // Out of resources: back off instead of spinning.
                    if weft::sleep(Duration::from_millis(20)).is_err() {
                        break;
                    }
                }
                continue;
            }
        };
        let permit = match permit {
            Some(p) => p,
            None => match shared.limit.clone().try_acquire_owned() {
                Some(p) => p,
                None => {
                    inc(&shared.stats.rejected);
                    shared.stats.response(503);
                    let s = shared.clone();
                    let _ = weft::Builder::new().spawn_on(&shared.rt, move || reject(&s, stream));
                    continue;
                }
            },
        };
        inc(&shared.stats.accepted);
        shared.stats.open.fetch_add(1, Ordering::SeqCst);
        let s = shared.clone();
        // Named for dumps, stall events and panic messages.
        let spawned =
            weft::Builder::new()
                .name(format!("http {peer}"))
                .spawn_on(&shared.rt, move || {
                    run_connection(&s, stream, peer, permit);
                });
        if spawned.is_err() {
            inc(&shared.stats.accept);
            connection_closed(&shared);
        }
    }
}

/// Answers 503 (rendered by the error hook; counted by the caller) to a
/// connection over the limit and closes it.
fn reject(shared: &Shared, tcp: TcpStream) {
    let _ = tcp.set_write_timeout(Some(Duration::from_secs(1)));
    let stream = match &shared.config.tls {
        None => Stream::Plain(tcp),
        Some(tls) => match Stream::accept(tcp, tls, Instant::now() + Duration::from_secs(1)) {
            Ok(s) => s,
            Err(_) => {
                inc(&shared.stats.tls_handshake);
                return;
            }
        },
    };
    let resp = render_error(shared, builtin_error(503, &shared.config).into_response());
    let (mut out, mut scratch) = (Vec::new(), Vec::new());
    let _ = write_response(
        &stream,
        &mut out,
        &mut scratch,
        resp,
        Version::Http11,
        false,
        false,
    );
    linger_close(&stream);
}

/// Half-closes and discards what the client still sends for a short while,
/// so that unread input does not turn our close into a reset that destroys
/// the response we just wrote.
fn linger_close(stream: &Stream) {
    let _ = stream.shutdown_write();
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 4096];
    let mut total = 0usize;
    while total < (1 << 20) {
        match (&*stream).read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
}

fn connection_closed(shared: &Shared) {
    if shared.stats.open.fetch_sub(1, Ordering::SeqCst) == 1 && shared.is_shutting_down() {
        let _g = shared.drain.lock();
        shared.drained.notify_all();
    }
}

// ---------------------------------------------------------------------------
// One connection

struct Conn {
    stream: Stream,
    peer: SocketAddr,
    input: InBuf,
    head: Vec<u8>,
    out: Vec<u8>,
    scratch: Vec<u8>,
    /// Close with `linger_close` (an error response may be followed by
    /// unread input).
    linger: bool,
}

/// Outcome of waiting for a request head.
enum Head {
    /// A complete head is in `conn.head`.
    Ready,
    /// Close without a response (EOF, idle timeout, shutdown, I/O error).
    Close,
    /// Answer with this error status and close.
    Reject(u16),
}

fn run_connection(
    shared: &Arc<Shared>,
    tcp: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
) {
    let cfg = &shared.config;
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let slot = Arc::new(ConnSlot {
        thread: weft::current(),
        state: AtomicU8::new(ACTIVE),
        worker: Mutex::new(None),
    });
    shared.conns.lock().unpoison().insert(id, slot.clone());

    let _ = tcp.set_nodelay(cfg.nodelay);
    let _ = tcp.set_write_timeout(Some(cfg.write_timeout));
    // The handshake and the first request head share the header timeout.
    let first_deadline = Instant::now() + cfg.header_read_timeout;
    let stream = match &cfg.tls {
        None => Stream::Plain(tcp),
        Some(tls) => match Stream::accept(tcp, tls, first_deadline) {
            Ok(s) => s,
            Err((tcp, _)) => {
                inc(&shared.stats.tls_handshake);
                drop(tcp);
                shared.conns.lock().unpoison().remove(&id);
                drop(permit);
                connection_closed(shared);
                return;
            }
        },
    };
    let mut conn = Some(Conn {
        stream,
        peer,
        input: InBuf::with_capacity(INPUT_BUF),
        head: Vec::new(),
        out: Vec::with_capacity(256),
        scratch: Vec::new(),
        linger: false,
    });
    // Platform mode: a one-slot channel to get the connection back from
    // the worker that ran its request.
    let back = shared
        .pool
        .as_ref()
        .map(|_| weft::channel::bounded::<(Conn, bool)>(1));
    let mut first = Some(first_deadline);
    while let Some(mut c) = conn.take() {
        match read_head(&mut c, shared, &slot, first) {
            Head::Ready => {}
            Head::Close => {
                conn = Some(c);
                break;
            }
            Head::Reject(status) => {
                shared.stats.error_status(status);
                let _ = write_error(&c.stream, &mut c.out, &mut c.scratch, shared, status);
                c.linger = true;
                conn = Some(c);
                break;
            }
        }
        first = None;
        let keep = match (&shared.pool, &back) {
            (Some(pool), Some((tx, rx))) => {
                let Some(jobs) = pool.sender() else {
                    conn = Some(c);
                    break;
                };
                let (tx, s, sl) = (tx.clone(), shared.clone(), slot.clone());
                let job: Job = Box::new(move || {
                    *sl.worker.lock().unpoison() = Some(weft::current());
                    let keep = process(&mut c, &s);
                    *sl.worker.lock().unpoison() = None;
                    let _ = tx.send((c, keep));
                });
                if jobs.send(job).is_err() {
                    break;
                }
                match rx.recv() {
                    Ok((c, keep)) => {
                        conn = Some(c);
                        keep
                    }
                    Err(_) => break,
                }
            }
            _ => {
                let keep = process(&mut c, shared);
                conn = Some(c);
                keep
            }
        };
        if !keep || shared.is_shutting_down() {
            break;
        }
    }
    if let Some(c) = conn {
        if c.linger {
            linger_close(&c.stream);
        }
        drop(c);
    }
    shared.conns.lock().unpoison().remove(&id);
    drop(permit);
    connection_closed(shared);
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// Waits for a complete request head and moves it into `conn.head`.
/// `first`: on a new connection, the deadline for its first byte.
fn read_head(conn: &mut Conn, shared: &Shared, slot: &ConnSlot, first: Option<Instant>) -> Head {
    let cfg = &shared.config;
    if conn.input.is_empty() {
        conn.input.shrink_if_idle(INPUT_BUF);
        // Idle: no request in progress. Shutdown closes us here.
        slot.state.store(IDLE, Ordering::SeqCst);
        if shared.is_shutting_down() {
            return Head::Close;
        }
        let idle = match first {
            Some(d) => d.saturating_duration_since(Instant::now()),
            None => cfg.idle_timeout,
        };
        if idle.is_zero() {
            return Head::Close;
        }
        let _ = conn.stream.set_read_timeout(Some(idle));
        let r = conn.input.fill(&conn.stream, cfg.max_header_bytes + 1);
        slot.state.store(ACTIVE, Ordering::SeqCst);
        match r {
            Ok(0) | Err(_) => return Head::Close,
            Ok(_) => {}
        }
        // An interrupt that raced with the data (shutdown) must not hit the
        // handler; the shutting_down flag still closes the connection
        // after this request.
        let _ = weft::interrupted();
    }
    // The head deadline starts with its first byte; computed only when the
    // head did not arrive in one piece.
    let mut deadline: Option<Instant> = None;
    let mut scanned = 0;
    loop {
        if let Some(end) = conn.input.find_head_end(scanned) {
            if end > cfg.max_header_bytes {
                return Head::Reject(431);
            }
            conn.head.clear();
            conn.head.extend_from_slice(&conn.input.data()[..end]);
            conn.input.consume(end);
            return Head::Ready;
        }
        let len = conn.input.len();
        if len > cfg.max_header_bytes {
            return Head::Reject(431);
        }
        // Incomplete: reject garbage early rather than waiting for more.
        let mut small = [const { MaybeUninit::uninit() }; SMALL_HEADERS];
        let mut big = Vec::new();
        let hdrs = header_slots(&mut small, &mut big, cfg.max_headers);
        let mut req = httparse::Request::new(&mut []);
        match req.parse_with_uninit_headers(conn.input.data(), hdrs) {
            Ok(_) => {}
            Err(httparse::Error::TooManyHeaders) => return Head::Reject(431),
            Err(_) => return Head::Reject(400),
        }
        scanned = len;
        let now = Instant::now();
        let deadline = *deadline.get_or_insert(now + cfg.header_read_timeout);
        if now >= deadline {
            return Head::Reject(408);
        }
        let _ = conn.stream.set_read_timeout(Some(deadline - now));
        match conn.input.fill(&conn.stream, cfg.max_header_bytes + 1) {
            Ok(0) => {
                inc(&shared.stats.io);
                return Head::Close;
            }
            Ok(_) => {}
            Err(e) if is_timeout(&e) => return Head::Reject(408),
            Err(e) if e.kind() == io::ErrorKind::OutOfMemory => return Head::Reject(431),
            Err(_) => {
                inc(&shared.stats.io);
                return Head::Close;
            }
        }
    }
}

/// The server's own error answer for `status`, with a message that says
/// which limit was hit.
fn builtin_error(status: u16, cfg: &ServerConfig) -> HttpError {
    match status {
        400 => HttpError::new(400, "malformed request"),
        408 => HttpError::new(408, "timed out waiting for the request"),
        413 => HttpError::new(
            413,
            format!(
                "request body exceeds the limit of {} bytes",
                cfg.max_body_bytes
            ),
        ),
        417 => HttpError::new(417, "only Expect: 100-continue is supported"),
        431 => HttpError::new(
            431,
            format!(
                "request head exceeds {} bytes or {} header fields",
                cfg.max_header_bytes, cfg.max_headers
            ),
        ),
        503 => HttpError::from_status(503).with_header("Retry-After", "1"),
        s => HttpError::from_status(s),
    }
}

/// Renders a response marked as an error through the handler's error hook.
fn render_error(shared: &Shared, resp: Response) -> Response {
    if resp.error.is_none() {
        return resp;
    }
    render(resp, |e| shared.handler.render_error(e))
}

/// Writes the server's own error answer for `status` (rendered by the
/// error hook) and closes the connection.
fn write_error(
    stream: &Stream,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    shared: &Shared,
    status: u16,
) -> io::Result<()> {
    shared.stats.response(status);
    let resp = render_error(
        shared,
        builtin_error(status, &shared.config).into_response(),
    );
    write_response(stream, out, scratch, resp, Version::Http11, false, false).map(|_| ())
}

/// Parses the head in `conn.head`, runs the handler, writes the response.
/// Returns whether the connection may serve another request.
fn process(conn: &mut Conn, shared: &Shared) -> bool {
    let cfg = &shared.config;
    let Conn {
        stream,
        peer,
        input,
        head,
        out,
        scratch,
        linger,
    } = conn;
    let stream: &Stream = stream;
    // Uninitialised: no memset per request.
    let mut small = [const { MaybeUninit::uninit() }; SMALL_HEADERS];
    let mut big = Vec::new();
    let hdrs = header_slots(&mut small, &mut big, cfg.max_headers);
    let mut parsed = httparse::Request::new(&mut []);
    let reject = |status: u16, out: &mut Vec<u8>, linger: &mut bool| {
        shared.stats.error_status(status);
        let _ = write_error(stream, out, &mut Vec::new(), shared, status);
        *linger = true;
        false
    };
    match parsed.parse_with_uninit_headers(head, hdrs) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return reject(400, out, linger),
        Err(httparse::Error::TooManyHeaders) => return reject(431, out, linger),
        Err(_) => return reject(400, out, linger),
    }
    let (Some(method), Some(target), Some(v)) = (parsed.method, parsed.path, parsed.version) else {
        return reject(400, out, linger);
    };
    let version = if v == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    let headers: &[httparse::Header<'_>] = parsed.headers;

    // Framing and connection semantics from the headers.
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding: Option<&[u8]> = None;
    let mut conn_close = false;
    let mut conn_keep_alive = false;
    let mut expect: Option<&[u8]> = None;
    for h in headers {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            match parse_content_length(h.value) {
                Some(n) if content_length.is_none_or(|c| c == n) => content_length = Some(n),
                _ => return reject(400, out, linger),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if transfer_encoding.is_some() {
                return reject(400, out, linger);
            }
            transfer_encoding = Some(h.value);
        } else if name.eq_ignore_ascii_case("connection") {
            conn_close |= has_token(h.value, "close");
            conn_keep_alive |= has_token(h.value, "keep-alive");
        } else if name.eq_ignore_ascii_case("expect") {
            expect = Some(h.value);
        }
    }
    let framing = match (transfer_encoding, content_length) {
        (Some(_), Some(_)) => return reject(400, out, linger), // smuggling risk
        (Some(te), None) => {
            let last = te.rsplit(|&b| b == b',').next().unwrap_or(b"").trim_ascii();
            if version == Version::Http10 || !last.eq_ignore_ascii_case(b"chunked") {
                return reject(400, out, linger);
            }
            Framing::Chunked(crate::wire::Chunk::Size)
        }
        (None, Some(0)) | (None, None) => Framing::Done,
        (None, Some(n)) => {
            if n > cfg.max_body_bytes {
                return reject(413, out, linger);
            }
            Framing::Length(n)
        }
    };
    let mut expect_continue = false;
    if let Some(e) = expect {
        if e.trim_ascii().eq_ignore_ascii_case(b"100-continue") {
            expect_continue = version == Version::Http11 && framing != Framing::Done;
        } else {
            return reject(417, out, linger);
        }
    }
    let (path, query) = split_target(target);

    let mut keep_alive = match version {
        Version::Http11 => !conn_close,
        Version::Http10 => conn_keep_alive && !conn_close,
    };
    let head_only = method == "HEAD";
    inc(&shared.stats.started);

    let mut req = Request {
        method,
        path,
        query,
        version,
        headers,
        params: Vec::new(),
        states: None,
        remote: *peer,
        body: RequestBody {
            framing,
            input,
            stream,
            continue_sent: expect_continue.then_some(false),
            declared_len: content_length,
            read: 0,
            limit: cfg.max_body_bytes,
            error: None,
            timeout: cfg.body_read_timeout,
        },
    };

    // The request in progress, for thread dumps (cleared once answered).
    weft::set_activity(format_args!("{method} {target}"));
    let result = catch_unwind(AssertUnwindSafe(|| shared.handler.handle(&mut req)));
    let mut resp = match result {
        Ok(r) => r,
        Err(_) => {
            inc(&shared.stats.handler_panic);
            keep_alive = false;
            Response::error(500)
        }
    };
    if let Some(err) = req.body.error {
        keep_alive = false;
        *linger = true;
        let status = match err {
            BodyError::TooLarge => 413,
            BodyError::Malformed => 400,
            BodyError::Timeout => 408,
            BodyError::Io => {
                inc(&shared.stats.io);
                inc(&shared.stats.finished);
                return false;
            }
        };
        shared.stats.error_status(status);
        resp = builtin_error(status, cfg).into_response();
    }
    let resp = render_error(shared, resp);
    let body_done = req.body.framing == Framing::Done;
    if !body_done && req.body.continue_sent == Some(false) {
        // The client is waiting for 100 Continue and will not send the
        // body: answer, then close rather than guess where the next request
        // starts.
        keep_alive = false;
    }
    if shared.is_shutting_down() {
        keep_alive = false;
    }
    // Counted before the write, so that a client that has its response
    // also sees it in the statistics.
    shared.stats.response(resp.status);
    inc(&shared.stats.finished);
    let written = write_response(stream, out, scratch, resp, version, keep_alive, head_only);
    weft::set_activity("");
    keep_alive = match written {
        Ok(k) => k,
        Err(_) => {
            inc(&shared.stats.io);
            false
        }
    };
    if keep_alive && !body_done {
        // Drain what the handler left unread so the next request can be
        // parsed; give up (close) on any problem.
        let mut sink = [0u8; 4096];
        loop {
            match req.body.read(&mut sink) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => {
                    keep_alive = false;
                    break;
                }
            }
        }
    }
    keep_alive
}

/// Splits a request target into path and query; an absolute-form target
/// (`http://host/p?q`) yields its path.
fn split_target(target: &str) -> (&str, Option<&str>) {
    let mut t = target;
    if let Some(rest) = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
    {
        t = rest.find('/').map_or("/", |i| &rest[i..]);
    }
    match t.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (t, None),
    }
}

/// Writes `resp`; returns whether the connection stays open.
fn write_response(
    stream: &Stream,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    resp: Response,
    version: Version,
    mut keep_alive: bool,
    head_only: bool,
) -> io::Result<bool> {
    let Response {
        status,
        headers,
        body,
        error: _,
    } = resp;
    for (n, v) in &headers {
        if n.eq_ignore_ascii_case("connection") && has_token(v.as_bytes(), "close") {
            keep_alive = false;
        }
    }
    let no_body = (100..200).contains(&status) || status == 204 || status == 304;
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    push_u64(out, u64::from(status));
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    push_date(out);
    out.extend_from_slice(b"\r\n");
    for (n, v) in &headers {
        if n.eq_ignore_ascii_case("content-length")
            || n.eq_ignore_ascii_case("transfer-encoding")
            || n.eq_ignore_ascii_case("date")
            || n.eq_ignore_ascii_case("connection")
            || !valid_header_name(n)
            || !valid_header_value(v.as_bytes())
        {
            continue;
        }
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let mut chunked = false;
    if !no_body {
        match &body {
            Body::Empty => out.extend_from_slice(b"Content-Length: 0\r\n"),
            Body::Bytes(b) => {
                out.extend_from_slice(b"Content-Length: ");
                push_u64(out, b.len() as u64);
                out.extend_from_slice(b"\r\n");
            }
            Body::Stream { len: Some(n), .. } => {
                out.extend_from_slice(b"Content-Length: ");
                push_u64(out, *n);
                out.extend_from_slice(b"\r\n");
            }
            Body::Stream { len: None, .. } => {
                if version == Version::Http11 {
                    out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                    chunked = true;
                } else if !head_only {
                    keep_alive = false; // close-delimited
                }
            }
        }
    }
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if version == Version::Http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if head_only || no_body {
        (&*stream).write_all(out)?;
        return Ok(keep_alive);
    }
    match body {
        Body::Empty => (&*stream).write_all(out)?,
        Body::Bytes(b) => {
            if b.len() <= COPY_BODY {
                out.extend_from_slice(&b);
                (&*stream).write_all(out)?;
            } else {
                write_all_vectored(stream, out, &b)?;
            }
        }
        Body::Stream { len, writer } => {
            let buffered = BufferedStream {
                stream,
                buf: out,
                limit: COPY_BODY,
            };
            let r = catch_unwind(AssertUnwindSafe(move || -> io::Result<()> {
                if chunked {
                    let mut w = ChunkedWriter::new(buffered, scratch, 8 * 1024);
                    writer(&mut w)?;
                    w.finish()?.flush()
                } else if let Some(n) = len {
                    let mut w = LimitedWriter {
                        inner: buffered,
                        remaining: n,
                    };
                    writer(&mut w)?;
                    if w.remaining != 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "streamed body is shorter than its declared length",
                        ));
                    }
                    w.inner.flush()
                } else {
                    let mut w = buffered;
                    writer(&mut w)?;
                    w.flush()
                }
            }));
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(io::Error::other("response body writer panicked")),
            }
        }
    }
    Ok(keep_alive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(split_target("/a?b=1"), ("/a", Some("b=1")));
        assert_eq!(split_target("/a"), ("/a", None));
        assert_eq!(split_target("http://h:1/x?y"), ("/x", Some("y")));
        assert_eq!(split_target("http://h:1"), ("/", None));
    }
}
