//! The running server's handle: [`ServerHandle`] (address, statistics,
//! graceful shutdown, waiting, serving until a signal) and the
//! [`ShutdownReport`] it returns. Made by
//! [`Server::serve`](super::Server::serve); held by the caller.
//!
//! Lifecycle: [`ServerHandle::shutdown`] does the drain once;
//! [`ServerHandle::wait`] parks until it has finished (on a `weft::sync`
//! condition variable, so it works on virtual and OS threads);
//! [`ServerHandle::serve_until_signal`] turns the first SIGINT/SIGTERM into
//! that shutdown (see `signal.rs` for how signals are caught).

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft::sync::Condvar;

use super::{IDLE, ServerStats, Shared, ThreadMode};
use weft::sync::Unpoison;

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
    pub(super) shared: Arc<Shared>,
    pub(super) addr: SocketAddr,
    pub(super) acceptor: Mutex<Option<weft::JoinHandle<()>>>,
    pub(super) shut_down: AtomicBool,
    pub(super) life: Arc<Life>,
}

/// Where the server is in its life, for [`ServerHandle::wait`] and
/// [`ServerHandle::serve_until_signal`].
#[derive(Default)]
pub(super) struct Life {
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
        let deadline = weft::clock::now() + grace;
        shared.shutting_down.store(true, Ordering::SeqCst);
        // Stop the acceptor: an interrupt makes its accept (or permit wait)
        // fail and shuts the listener down.
        if let Some(acceptor) = self.acceptor.lock().unpoison().take() {
            acceptor.thread().interrupt();
            // Bounded: an acceptor that cannot run (its carrier is held,
            // e.g. by a handler blocked on an OS lock) is left behind
            // rather than hanging the shutdown.
            let limit = deadline.max(weft::clock::now() + Duration::from_secs(1));
            while !acceptor.is_finished() && weft::clock::now() < limit {
                weft::park_timeout(Duration::from_millis(1));
            }
            if acceptor.is_finished() {
                let _ = acceptor.join();
            }
        }
        // Close idle connections; busy ones see the flag when they finish.
        if let Some(idle) = &shared.idle {
            idle.close(shared);
        }
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
            if !shared.wait_closed(weft::clock::now() + Duration::from_secs(1)) {
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
