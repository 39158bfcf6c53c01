//! [`Pool`]: a connection pool with HikariCP's semantics.
//!
//! # Shape
//!
//! One `weft::sync::Mutex` guards the pool's state: the idle connections
//! (a stack: the most recently returned is handed out first, so surplus
//! connections go idle long enough to be retired), the counts, the queue
//! of waiting threads and the leases of connections in use. Nothing slow
//! happens under it: connecting, validating and closing run outside.
//!
//! Fairness: waiting threads queue in FIFO order and park (`weft::park`:
//! the virtual thread, never the carrier). While anyone waits, a returned
//! connection (or room to open a new one) is *granted* to the head of the
//! queue, never taken by a newcomer: a newcomer that finds the queue
//! non-empty queues behind it. The grant is left in the waiter's own slot
//! and the waiter unparked; it reads the slot without touching the pool's
//! lock again, which matters when many threads contend for few
//! connections.
//!
//! Opening a connection: a caller that finds no idle connection but room
//! under `max_size` reserves a slot and opens the connection itself; the
//! housekeeper thread tops the pool up to `min_idle` in the background
//! and retires idle and expired connections.
//!
//! An outage: an attempt to open a connection that fails with an error
//! worth retrying marks the pool *down* (`State::down`) until a
//! connection opens. While it is down, a caller that would open a
//! connection fails at once with [`Error::ServerDown`] (with
//! `fail_fast_when_down`, the default; without it, it retries with
//! backoff until its deadline), and the housekeeper, woken by the first
//! failure, keeps trying — at least one connection, whatever `min_idle`
//! says — with backoff. So during an outage a request costs one refused
//! attempt at most, not `connection_timeout`, and the pool notices the
//! server's return within one backoff step.

use std::backtrace::Backtrace;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use weft::sync::Unpoison;

use weft::sync::{Condvar, Mutex, MutexGuard};

use crate::config::Config;
use crate::conn::Connection;
use crate::error::{Error, PoolTimeout, Result, ServerDown};
use crate::metrics::{Metrics, Timer};

/// A pool of PostgreSQL connections (HikariCP's semantics, weft's
/// blocking style). Cheap to clone: clones share one pool, which closes
/// when the last clone is dropped (or on [`close`](Pool::close)).
///
/// Usable from virtual threads and OS threads alike: a thread waiting for
/// a connection parks (virtual) or blocks (OS), in FIFO order.
///
/// # Examples
///
/// ```
/// // Needs a server: runs against WEFT_PG_URL (CI sets it) and returns
/// // early without one.
/// let Ok(url) = std::env::var("WEFT_PG_URL") else { return Ok(()) };
/// let pool = weft_pg::Pool::new(weft_pg::Config::from_url(&url)?)?;
/// let mut conn = pool.get()?;
/// let row = conn.query_one("SELECT $1::int4 * 2", &[&21i32])?;
/// assert_eq!(row.get::<_, i32>(0), 42);
/// # Ok::<(), weft_pg::Error>(())
/// ```
#[derive(Clone)]
pub struct Pool {
    handle: Arc<Handle>,
}

/// Closes the pool when the last `Pool` clone goes.
struct Handle {
    inner: Arc<Inner>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.inner.close();
    }
}

struct Inner {
    cfg: Config,
    min_idle: usize,
    state: Mutex<State>,
    /// Wakes the housekeeper early (leases with earlier leak deadlines,
    /// a connection retired under `min_idle`, close).
    hk_cv: Condvar,
    acquire: Timer,
    usage: Timer,
    creation: Timer,
    timeouts: AtomicU64,
    created: AtomicU64,
    closed: AtomicU64,
    connect_errors: AtomicU64,
    validation_failures: AtomicU64,
    leaks: AtomicU64,
    ids: AtomicU64,
}

/// A pooled connection and its history.
struct Slot {
    conn: Connection,
    id: u64,
    last_used: Instant,
    retire_at: Option<Instant>,
}

/// Who holds a connection (kept only with leak detection on).
struct Lease {
    thread: String,
    location: &'static Location<'static>,
    since: Instant,
    backtrace: Backtrace,
    reported: bool,
}

// Grants move a connection between threads once per hand-off; boxing it
// would add an allocation to every hand-off to save a memcpy.
#[allow(clippy::large_enum_variant)]
enum Grant {
    Conn(Slot),
    Create,
    Closed,
}

/// A queued `get()`: the grant is put here under the pool lock, then the
/// thread is unparked; it reads its grant without taking the pool lock
/// again (only a timeout or an interrupt does).
struct Waiter {
    thread: weft::Thread,
    granted: AtomicBool,
    grant: Mutex<Option<Grant>>,
}

impl Waiter {
    fn take(&self) -> Grant {
        self.grant.lock().unpoison().take().expect("granted")
    }
}

#[derive(Default)]
struct State {
    /// Back = most recently returned.
    idle: VecDeque<Slot>,
    /// idle + active + creating.
    total: usize,
    active: usize,
    creating: usize,
    waiters: VecDeque<Arc<Waiter>>,
    leases: HashMap<u64, Lease>,
    closed: bool,
    last_error: Option<String>,
    /// Set while the pool is down: the last attempt to open a connection
    /// failed with an error worth retrying, and none opened since. What a
    /// checkout that fails fast answers (shared: one allocation per failed
    /// attempt, not per checkout).
    down: Option<Arc<ServerDown>>,
    /// When the first failure of the current outage happened.
    down_since: Option<Instant>,
    /// When the housekeeper plans to wake (None: it is not waiting).
    hk_wake: Option<Instant>,
}

impl Pool {
    /// Starts a pool. Unless [`Config::fail_fast`] is off, opens one
    /// connection first and fails if it cannot; the housekeeper thread
    /// (a virtual thread named `<pool_name>-housekeeper`) then fills the
    /// pool up to `min_idle` in the background.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for invalid settings; the connection error if the
    /// first connection fails.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// // Nothing listens on port 1: with `fail_fast` (the default) the
    /// // pool says so at once instead of failing on the first `get`.
    /// let config = weft_pg::Config::from_url("postgres://app@127.0.0.1:1/app")?
    ///     .connection_timeout(Duration::from_millis(500));
    /// let err = weft_pg::Pool::new(config).err().unwrap();
    /// assert!(err.is_connection_error() || matches!(err, weft_pg::Error::Timeout(_)), "{err}");
    /// # Ok::<(), weft_pg::Error>(())
    /// ```
    pub fn new(config: Config) -> Result<Pool> {
        config.check()?;
        let inner = Arc::new(Inner {
            min_idle: config.effective_min_idle(),
            cfg: config,
            state: Mutex::new(State::default()),
            hk_cv: Condvar::new(),
            acquire: Timer::new(),
            usage: Timer::new(),
            creation: Timer::new(),
            timeouts: AtomicU64::new(0),
            created: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            connect_errors: AtomicU64::new(0),
            validation_failures: AtomicU64::new(0),
            leaks: AtomicU64::new(0),
            ids: AtomicU64::new(1),
        });
        if inner.cfg.fail_fast {
            let deadline = deadline_after(inner.cfg.connection_timeout);
            let slot = inner.open(deadline)?;
            let mut st = inner.lock();
            st.total += 1;
            st.idle.push_back(slot);
        }
        let hk = Arc::clone(&inner);
        weft::Builder::new()
            .name(format!("{}-housekeeper", inner.cfg.pool_name))
            .spawn(move || hk.housekeep())
            .map_err(Error::Io)?;
        let published = Arc::downgrade(&inner);
        crate::metrics::publish(&inner.cfg.pool_name, move || {
            let inner = published.upgrade().filter(|i| !i.lock().closed)?;
            let (max, min) = (inner.cfg.get_max_size(), inner.min_idle);
            Some((inner.metrics(), max, min))
        });
        Ok(Pool {
            handle: Arc::new(Handle { inner }),
        })
    }

    /// Takes a connection, waiting up to `connection_timeout` for one. The
    /// connection goes back to the pool when dropped.
    ///
    /// A connection that sat idle for longer than `alive_bypass_window` is
    /// validated first; one that fails is closed and replaced.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] (with the pool's counts) when none became
    /// available in time; [`Error::Interrupted`] if the thread was
    /// interrupted while waiting; [`Error::PoolClosed`]; a connection error
    /// that retrying cannot fix (e.g. wrong password).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// // Needs a server: runs against WEFT_PG_URL (CI sets it) and returns
    /// // early without one.
    /// let Ok(url) = std::env::var("WEFT_PG_URL") else { return Ok(()) };
    /// let pool = weft_pg::Pool::new(
    ///     weft_pg::Config::from_url(&url)?
    ///         .max_size(1)
    ///         .connection_timeout(Duration::from_millis(200)),
    /// )?;
    /// let held = pool.get()?;
    /// // The only connection is taken: the next `get` waits, then times out
    /// // with the pool's counts in the error.
    /// let err = pool.get().err().unwrap();
    /// assert!(matches!(err, weft_pg::Error::Timeout(_)), "{err}");
    /// drop(held); // back to the pool
    /// assert_eq!(pool.get()?.query_one("SELECT 1", &[])?.get::<_, i32>(0), 1);
    /// # Ok::<(), weft_pg::Error>(())
    /// ```
    #[track_caller]
    pub fn get(&self) -> Result<PooledConnection> {
        let inner = &self.handle.inner;
        inner.get(inner.cfg.connection_timeout, Location::caller())
    }

    /// Like [`get`](Pool::get) with a timeout for this call only.
    ///
    /// # Errors
    ///
    /// As [`get`](Pool::get).
    #[track_caller]
    pub fn get_timeout(&self, timeout: Duration) -> Result<PooledConnection> {
        self.handle.inner.get(timeout, Location::caller())
    }

    /// The pool's gauges and timings (also in the Prometheus exposition,
    /// `weft::metrics::prometheus`, while the pool is open).
    pub fn metrics(&self) -> Metrics {
        self.handle.inner.metrics()
    }

    /// The pool's settings.
    pub fn config(&self) -> &Config {
        &self.handle.inner.cfg
    }

    /// Closes the pool: idle connections are closed now, connections in
    /// use when they are returned; waiting and later `get` calls fail with
    /// [`Error::PoolClosed`]. Also done when the last clone is dropped.
    pub fn close(&self) {
        self.handle.inner.close();
    }

    /// Whether [`close`](Pool::close) was called.
    pub fn is_closed(&self) -> bool {
        self.handle.inner.lock().closed
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.metrics();
        f.debug_struct("Pool")
            .field("name", &self.handle.inner.cfg.pool_name)
            .field("total", &m.total)
            .field("active", &m.active)
            .field("idle", &m.idle)
            .field("pending", &m.pending)
            .finish()
    }
}

fn deadline_after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or(now + Duration::from_secs(86400 * 365))
}

/// Server errors worth retrying a connection for: the server is starting
/// or stopping, or out of connection slots.
fn retryable(e: &Error) -> bool {
    match e {
        Error::Db(db) => match db.code() {
            Some(code) => {
                let c = code.code();
                c.starts_with("57") || c.starts_with("08") || c.starts_with("53")
            }
            None => true,
        },
        Error::Interrupted | Error::Config(_) => false,
        _ => true,
    }
}

/// A cheap pseudo-random fraction in `[0, 1)` (max_lifetime variance).
fn jitter(id: u64) -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ nanos;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

fn thread_label() -> String {
    let t = weft::current();
    let kind = if t.is_virtual() {
        "virtual thread"
    } else {
        "thread"
    };
    match t.name() {
        Some(n) => format!("{kind} '{n}' (#{})", t.id().as_u64()),
        None => format!("unnamed {kind} #{}", t.id().as_u64()),
    }
}

impl Inner {
    /// The pool's gauges and timings.
    fn metrics(&self) -> Metrics {
        let inner = self;
        let mut m = {
            let st = inner.lock();
            Metrics {
                total: st.total,
                active: st.active,
                idle: st.idle.len(),
                creating: st.creating,
                pending: st.waiters.len(),
                ..Metrics::default()
            }
        };
        m.acquire = inner.acquire.snapshot();
        m.usage = inner.usage.snapshot();
        m.creation = inner.creation.snapshot();
        m.timeouts = inner.timeouts.load(Ordering::Relaxed);
        m.created = inner.created.load(Ordering::Relaxed);
        m.closed = inner.closed.load(Ordering::Relaxed);
        m.connect_errors = inner.connect_errors.load(Ordering::Relaxed);
        m.validation_failures = inner.validation_failures.load(Ordering::Relaxed);
        m.leaks = inner.leaks.load(Ordering::Relaxed);
        m
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unpoison()
    }

    fn get(
        self: &Arc<Self>,
        timeout: Duration,
        location: &'static Location<'static>,
    ) -> Result<PooledConnection> {
        let start = Instant::now();
        let deadline = deadline_after(timeout);
        let mut grant = {
            let mut st = self.lock();
            if st.closed {
                return Err(Error::PoolClosed);
            }
            if !st.waiters.is_empty() {
                self.wait(st, start, deadline)?
            } else if let Some(slot) = st.idle.pop_back() {
                st.active += 1;
                Grant::Conn(slot)
            } else if st.total < self.cfg.max_size {
                if let Some(down) = self.fails_fast(&st) {
                    return Err(Error::ServerDown(down));
                }
                st.total += 1;
                st.creating += 1;
                Grant::Create
            } else {
                self.wait(st, start, deadline)?
            }
        };
        loop {
            grant = match grant {
                Grant::Closed => return Err(Error::PoolClosed),
                Grant::Create => self.create_for_caller(start, deadline)?,
                Grant::Conn(mut slot) => {
                    let now = Instant::now();
                    let expired = slot.retire_at.is_some_and(|t| now >= t);
                    let usable = !expired
                        && !slot.conn.is_broken()
                        && (now.saturating_duration_since(slot.last_used)
                            <= self.cfg.alive_bypass_window
                            || self.validate(&mut slot));
                    if usable {
                        return Ok(self.lend(slot, start, location));
                    }
                    // Keep the slot: replace the connection in it.
                    {
                        let mut st = self.lock();
                        st.active -= 1;
                        st.creating += 1;
                    }
                    self.close_conn(slot);
                    Grant::Create
                }
            };
        }
    }

    /// What a caller that would open a connection answers at once: the
    /// outage, while the pool is down and `fail_fast_when_down` is on.
    fn fails_fast(&self, st: &State) -> Option<Arc<ServerDown>> {
        st.down.clone().filter(|_| self.cfg.fail_fast_when_down)
    }

    fn validate(&self, slot: &mut Slot) -> bool {
        let ok = slot
            .conn
            .validate(
                self.cfg.validation_timeout,
                self.cfg.connection_test_query.as_deref(),
            )
            .is_ok();
        if !ok {
            self.validation_failures.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Queues the caller and parks until it is granted something, the
    /// deadline passes, or it is interrupted.
    fn wait(
        &self,
        mut st: MutexGuard<'_, State>,
        start: Instant,
        deadline: Instant,
    ) -> Result<Grant> {
        let me = Arc::new(Waiter {
            thread: weft::current(),
            granted: AtomicBool::new(false),
            grant: Mutex::new(None),
        });
        st.waiters.push_back(Arc::clone(&me));
        drop(st);
        loop {
            if me.granted.load(Ordering::Acquire) {
                return Ok(me.take());
            }
            let now = Instant::now();
            let timed_out = now >= deadline;
            // Clears the flag (weft's convention for interrupted waits).
            let interrupted = !timed_out && weft::interrupted();
            if timed_out || interrupted {
                let mut st = self.lock();
                if me.granted.load(Ordering::Acquire) {
                    // Granted at the same moment: keep it; an interrupt
                    // stays pending.
                    if interrupted {
                        weft::current().interrupt();
                    }
                    return Ok(me.take());
                }
                let err = if interrupted {
                    Error::Interrupted
                } else {
                    self.timeout_error(&st, start)
                };
                st.waiters.retain(|w| !Arc::ptr_eq(w, &me));
                return Err(err);
            }
            weft::park_timeout(deadline - now);
        }
    }

    fn timeout_error(&self, st: &State, start: Instant) -> Error {
        self.timeouts.fetch_add(1, Ordering::Relaxed);
        Error::Timeout(Box::new(PoolTimeout {
            pool: self.cfg.pool_name.clone(),
            waited: start.elapsed(),
            total: st.total,
            active: st.active,
            idle: st.idle.len(),
            waiting: st.waiters.len().max(1),
            last_connect_error: st.last_error.clone(),
        }))
    }

    /// The caller holds a reserved slot (`creating`): open a connection
    /// for it, retrying while the server refuses, until `deadline`.
    /// Returns the connection as an active grant, or gives the slot back.
    fn create_for_caller(&self, start: Instant, deadline: Instant) -> Result<Grant> {
        let mut backoff = Duration::from_millis(10);
        loop {
            let err = match self.open(deadline) {
                Ok(slot) => {
                    let mut st = self.lock();
                    st.creating -= 1;
                    st.active += 1;
                    return Ok(Grant::Conn(slot));
                }
                Err(e) => e,
            };
            let mut st = self.lock();
            if st.closed {
                self.release_reserved(&mut st);
                return Err(Error::PoolClosed);
            }
            if !retryable(&err) {
                self.release_reserved(&mut st);
                return Err(err);
            }
            // Someone returned a connection meanwhile: take it instead.
            if let Some(slot) = st.idle.pop_back() {
                st.creating -= 1;
                st.total -= 1;
                st.active += 1;
                return Ok(Grant::Conn(slot));
            }
            // The failure just marked the pool down: answer now and leave
            // the retrying to the housekeeper.
            if let Some(down) = self.fails_fast(&st) {
                self.release_reserved(&mut st);
                return Err(Error::ServerDown(down));
            }
            let now = Instant::now();
            if now >= deadline {
                let e = self.timeout_error(&st, start);
                self.release_reserved(&mut st);
                return Err(e);
            }
            drop(st);
            if weft::sleep(backoff.min(deadline - now)).is_err() {
                let mut st = self.lock();
                self.release_reserved(&mut st);
                return Err(Error::Interrupted);
            }
            backoff = (backoff * 2).min(Duration::from_millis(250));
            if Instant::now() >= deadline {
                // Out of time: report the last real failure rather than
                // an attempt with no time left.
                let mut st = self.lock();
                let e = self.timeout_error(&st, start);
                self.release_reserved(&mut st);
                return Err(e);
            }
        }
    }

    /// Gives a reserved creation slot back.
    fn release_reserved(&self, st: &mut State) {
        st.creating -= 1;
        st.total -= 1;
        self.dispatch(st);
    }

    /// Opens a connection (not yet counted anywhere).
    fn open(&self, deadline: Instant) -> Result<Slot> {
        let t0 = Instant::now();
        let connect_deadline = match self.cfg.pg.get_connect_timeout() {
            Some(t) => deadline.min(deadline_after(*t)),
            None => deadline,
        };
        let res = Connection::connect_until(&self.cfg.pg, &self.cfg.tls, Some(connect_deadline))
            .and_then(|mut conn| {
                if let Some(sql) = &self.cfg.connection_init_sql
                    && let Err(e) = conn.batch_execute(sql)
                {
                    conn.close();
                    return Err(e);
                }
                Ok(conn)
            });
        match res {
            Ok(conn) => {
                self.up();
                let now = Instant::now();
                self.creation.record(now - t0);
                self.created.fetch_add(1, Ordering::Relaxed);
                let id = self.ids.fetch_add(1, Ordering::Relaxed);
                let retire_at = self.cfg.max_lifetime.map(|l| {
                    let variance = l.mul_f64(0.025 * jitter(id));
                    now + (l - variance)
                });
                Ok(Slot {
                    conn,
                    id,
                    last_used: now,
                    retire_at,
                })
            }
            Err(e) => {
                self.connect_errors.fetch_add(1, Ordering::Relaxed);
                let text = e.to_string();
                tracing::debug!(target: "weft_pg::pool", pool = %self.cfg.pool_name, "cannot open a connection: {text}");
                let mut st = self.lock();
                if retryable(&e) {
                    self.mark_down(&mut st, &text);
                }
                st.last_error = Some(text);
                Err(e)
            }
        }
    }

    /// A connection attempt failed with `error`, worth retrying: the pool
    /// is down (the first failure wakes the housekeeper, which retries
    /// from now on).
    fn mark_down(&self, st: &mut State, error: &str) {
        let now = Instant::now();
        let since = *st.down_since.get_or_insert(now);
        let attempts = st.down.as_ref().map_or(0, |d| d.attempts) + 1;
        if st.down.is_none() {
            tracing::warn!(target: "weft_pg::pool", pool = %self.cfg.pool_name, "cannot connect to the server, retrying in the background: {error}");
            self.hk_cv.notify_one();
        }
        st.down = Some(Arc::new(ServerDown {
            pool: self.cfg.pool_name.clone(),
            last_connect_error: error.to_owned(),
            attempts,
            failing_for: now - since,
        }));
    }

    /// A connection opened: the outage, if any, is over.
    fn up(&self) {
        let mut st = self.lock();
        if let Some(d) = st.down.take() {
            tracing::info!(target: "weft_pg::pool", pool = %self.cfg.pool_name, "connected again after {} failed attempts", d.attempts);
        }
        st.down_since = None;
    }

    /// Hands waiting threads what is available, in FIFO order.
    fn dispatch(&self, st: &mut State) {
        while !st.waiters.is_empty() {
            let g = if st.closed {
                Grant::Closed
            } else if let Some(slot) = st.idle.pop_back() {
                st.active += 1;
                Grant::Conn(slot)
            } else if st.total < self.cfg.max_size {
                st.total += 1;
                st.creating += 1;
                Grant::Create
            } else {
                break;
            };
            let w = st.waiters.pop_front().expect("checked non-empty");
            *w.grant.lock().unpoison() = Some(g);
            w.granted.store(true, Ordering::Release);
            w.thread.unpark();
        }
    }

    fn lend(
        self: &Arc<Self>,
        slot: Slot,
        start: Instant,
        location: &'static Location<'static>,
    ) -> PooledConnection {
        let now = Instant::now();
        self.acquire.record(now - start);
        if let Some(threshold) = self.cfg.leak_detection_threshold {
            let lease = Lease {
                thread: thread_label(),
                location,
                since: now,
                backtrace: Backtrace::force_capture(),
                reported: false,
            };
            let mut st = self.lock();
            st.leases.insert(slot.id, lease);
            if st.hk_wake.is_some_and(|w| w > now + threshold) {
                self.hk_cv.notify_one();
            }
        }
        PooledConnection {
            pool: Arc::clone(self),
            slot: Some(slot),
            taken: now,
        }
    }

    fn give_back(&self, mut slot: Slot, taken: Instant) {
        let now = Instant::now();
        self.usage.record(now - taken);
        let retire = slot.conn.is_broken() || slot.retire_at.is_some_and(|t| now >= t);
        slot.last_used = now;
        let (to_close, unleaked) = {
            let mut st = self.lock();
            let unleaked = st.leases.remove(&slot.id).filter(|l| l.reported);
            st.active -= 1;
            let to_close = if retire || st.closed {
                st.total -= 1;
                if st.total < self.min_idle && !st.closed {
                    self.hk_cv.notify_one();
                }
                Some(slot)
            } else {
                st.idle.push_back(slot);
                None
            };
            self.dispatch(&mut st);
            (to_close, unleaked)
        };
        if let Some(l) = unleaked {
            tracing::info!(
                target: "weft_pg::leak",
                pool = %self.cfg.pool_name,
                "{} - previously reported leaked connection taken by {} at {} was returned after {} ms",
                self.cfg.pool_name,
                l.thread,
                l.location,
                l.since.elapsed().as_millis()
            );
        }
        if let Some(slot) = to_close {
            self.close_conn(slot);
        }
    }

    fn close_conn(&self, slot: Slot) {
        self.closed.fetch_add(1, Ordering::Relaxed);
        slot.conn.close();
    }

    fn close(&self) {
        let idle: Vec<Slot> = {
            let mut st = self.lock();
            if st.closed {
                return;
            }
            st.closed = true;
            let idle: Vec<Slot> = st.idle.drain(..).collect();
            st.total -= idle.len();
            self.dispatch(&mut st);
            self.hk_cv.notify_all();
            idle
        };
        for slot in idle {
            self.close_conn(slot);
        }
    }

    /// The housekeeper: retires idle and expired connections, tops the
    /// pool up to `min_idle`, reports leaks. Ends when the pool closes.
    /// Each round decides under the lock what to do, then does it without.
    fn housekeep(self: Arc<Self>) {
        let period = self.cfg.housekeeping_period;
        let mut hk = Housekeeping {
            next_tick: Instant::now(),
            fill_retry_at: Instant::now(),
            fill_backoff: FIRST_FILL_RETRY,
        };
        loop {
            let chores = {
                let Some(mut st) = self.wait_for_chores(&hk) else {
                    return;
                };
                let now = Instant::now();
                let tick = now >= hk.next_tick;
                if tick {
                    hk.next_tick = now + period;
                }
                Chores {
                    to_close: self.retire_idle(&mut st, now, tick),
                    leaks: self.find_leaks(&mut st, now),
                    fill: self.reserve_fill(&mut st, now >= hk.fill_retry_at),
                }
            };
            self.report_leaks(chores.leaks);
            for slot in chores.to_close {
                self.close_conn(slot);
            }
            if self.fill(chores.fill) {
                hk.fill_backoff = FIRST_FILL_RETRY;
            } else {
                // Try again after the backoff, which doubles up to the
                // next tick or half a second, whichever is sooner.
                hk.fill_retry_at = Instant::now() + hk.fill_backoff;
                hk.fill_backoff = (hk.fill_backoff * 2).min(period.min(Duration::from_millis(500)));
            }
        }
    }

    /// Waits (on `hk_cv`, which `hk_wake` tells others when to signal)
    /// until a chore is due; `None` once the pool is closed.
    fn wait_for_chores(&self, hk: &Housekeeping) -> Option<MutexGuard<'_, State>> {
        let mut st = self.lock();
        loop {
            if st.closed {
                return None;
            }
            let now = Instant::now();
            let wake = self.next_chore(&st, hk, now);
            if now >= wake {
                return Some(st);
            }
            st.hk_wake = Some(wake);
            st = match self.hk_cv.wait_timeout(st, wake - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
            st.hk_wake = None;
        }
    }

    /// When the next chore is due: the next tick, the first unreported
    /// lease's leak deadline, the first idle connection's retirement, or
    /// now when the pool is below `min_idle` (or down, see [`to_open`])
    /// with room to grow (unless a top-up just failed: then at
    /// `fill_retry_at`).
    ///
    /// [`to_open`]: Inner::to_open
    fn next_chore(&self, st: &State, hk: &Housekeeping, now: Instant) -> Instant {
        let mut wake = hk.next_tick;
        if let Some(t) = self.cfg.leak_detection_threshold {
            for l in st.leases.values().filter(|l| !l.reported) {
                wake = wake.min(l.since + t);
            }
        }
        for s in &st.idle {
            if let Some(r) = s.retire_at {
                wake = wake.min(r);
            }
        }
        if self.to_open(st) > 0 {
            if now >= hk.fill_retry_at {
                return now;
            }
            wake = wake.min(hk.fill_retry_at);
        }
        wake
    }

    /// Takes out of the idle list the connections past `max_lifetime`
    /// (any time) and, on a tick, those idle past `idle_timeout` while the
    /// pool is above `min_idle`; returns them to be closed.
    fn retire_idle(&self, st: &mut State, now: Instant, tick: bool) -> Vec<Slot> {
        let idle_cut = match self.cfg.idle_timeout {
            Some(t) if tick && self.min_idle < self.cfg.max_size => Some(t),
            _ => None,
        };
        let mut to_close = Vec::new();
        let mut keep = VecDeque::with_capacity(st.idle.len());
        let mut total = st.total;
        // Front = least recently used.
        while let Some(s) = st.idle.pop_front() {
            let expired = s.retire_at.is_some_and(|r| now >= r);
            let idle_long = idle_cut.is_some_and(|t| {
                total > self.min_idle && now.saturating_duration_since(s.last_used) >= t
            });
            if expired || idle_long {
                total -= 1;
                to_close.push(s);
            } else {
                keep.push_back(s);
            }
        }
        st.idle = keep;
        st.total = total;
        to_close
    }

    /// Marks the leases out longer than `leak_detection_threshold` as
    /// reported; returns their warnings.
    fn find_leaks(&self, st: &mut State, now: Instant) -> Vec<String> {
        let Some(t) = self.cfg.leak_detection_threshold else {
            return Vec::new();
        };
        let mut leaks = Vec::new();
        for (id, l) in st.leases.iter_mut() {
            if !l.reported && now.saturating_duration_since(l.since) >= t {
                l.reported = true;
                leaks.push(format!(
                    "{} - connection leak detection triggered: connection #{id} taken by {} at {} \
                     has been out of the pool for {} ms (leak_detection_threshold {} ms); \
                     stack of the checkout:\n{}",
                    self.cfg.pool_name,
                    l.thread,
                    l.location,
                    now.saturating_duration_since(l.since).as_millis(),
                    t.as_millis(),
                    l.backtrace
                ));
            }
        }
        leaks
    }

    /// How many connections the housekeeper should open: those that bring
    /// the pool up to `min_idle`, within `max_size`; while the pool is
    /// down, at least one (unless one is being opened or is idle), so that
    /// someone keeps trying when `min_idle` is met or `0`.
    fn to_open(&self, st: &State) -> usize {
        let want = self.min_idle.saturating_sub(st.idle.len() + st.creating);
        let probe = usize::from(st.down.is_some() && st.creating == 0 && st.idle.is_empty());
        want.max(probe).min(self.cfg.max_size - st.total)
    }

    /// Reserves (counts as creating) the connections [`Inner::to_open`]
    /// asks for; none when `may` is false.
    fn reserve_fill(&self, st: &mut State, may: bool) -> usize {
        let fill = if may { self.to_open(st) } else { 0 };
        st.total += fill;
        st.creating += fill;
        fill
    }

    fn report_leaks(&self, leaks: Vec<String>) {
        for msg in leaks {
            self.leaks.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(target: "weft_pg::leak", pool = %self.cfg.pool_name, "{msg}");
        }
    }

    /// Opens the `n` reserved connections into the idle list, handing them
    /// to waiters; false when one failed (this and the remaining
    /// reservations are given back).
    fn fill(&self, n: usize) -> bool {
        for i in 0..n {
            match self.open(deadline_after(self.cfg.connection_timeout)) {
                Ok(slot) => {
                    let mut st = self.lock();
                    st.creating -= 1;
                    if st.closed {
                        st.total -= 1;
                        drop(st);
                        self.close_conn(slot);
                        continue;
                    }
                    st.idle.push_back(slot);
                    self.dispatch(&mut st);
                }
                Err(_) => {
                    let mut st = self.lock();
                    let left = n - i;
                    st.creating -= left;
                    st.total -= left;
                    self.dispatch(&mut st);
                    return false;
                }
            }
        }
        true
    }
}

/// The housekeeper's clock.
struct Housekeeping {
    /// When the next periodic tick (idle timeouts) is due.
    next_tick: Instant,
    /// After a failed top-up, when to try again.
    fill_retry_at: Instant,
    /// The wait before the next retry if this one fails too.
    fill_backoff: Duration,
}

/// The housekeeper's first wait after a failed top-up.
const FIRST_FILL_RETRY: Duration = Duration::from_millis(20);

/// What a round of housekeeping decided under the lock, done after it.
struct Chores {
    to_close: Vec<Slot>,
    leaks: Vec<String>,
    /// Connections reserved to open.
    fill: usize,
}

/// A connection on loan from a [`Pool`]; it derefs to [`Connection`] and
/// goes back to the pool when dropped — or is closed instead if it broke
/// (lost connection, failed rollback) or outlived `max_lifetime`.
pub struct PooledConnection {
    pool: Arc<Inner>,
    slot: Option<Slot>,
    taken: Instant,
}

impl PooledConnection {
    /// Closes this connection instead of returning it (HikariCP's
    /// `evictConnection`): the pool opens a new one when needed.
    pub fn discard(mut self) {
        if let Some(s) = &mut self.slot {
            s.conn.mark_broken();
        }
    }
}

impl Deref for PooledConnection {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.slot.as_ref().expect("present until drop").conn
    }
}

impl DerefMut for PooledConnection {
    fn deref_mut(&mut self) -> &mut Connection {
        &mut self.slot.as_mut().expect("present until drop").conn
    }
}

impl fmt::Debug for PooledConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledConnection")
            .field("pool", &self.pool.cfg.pool_name)
            .field("id", &self.slot.as_ref().map(|s| s.id))
            .finish_non_exhaustive()
    }
}

impl Drop for PooledConnection {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.pool.give_back(slot, self.taken);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_postgres::error::SqlState;

    #[test]
    fn retryable_errors() {
        assert!(retryable(&Error::Connect {
            target: "x".into(),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused)
        }));
        assert!(!retryable(&Error::Interrupted));
        assert!(!retryable(&Error::Config("x".into())));
        let _ = SqlState::ADMIN_SHUTDOWN;
    }

    #[test]
    fn jitter_in_range() {
        for i in 0..1000 {
            let j = jitter(i);
            assert!((0.0..1.0).contains(&j));
        }
    }
}
