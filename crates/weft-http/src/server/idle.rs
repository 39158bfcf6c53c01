//! The idle set: plain-HTTP connections that wait for a byte without a
//! thread — new connections before their first byte, and keep-alive
//! connections whose thread waited
//! [`idle_thread_timeout`](super::ServerConfig::idle_thread_timeout) for
//! the next request in vain. A waiting connection is its socket, its
//! registration with weft's poller (which holds the waker below) and an
//! entry here: no virtual thread, no stack, no buffer.
//!
//! One virtual thread per server, the *driver*, sleeps until the nearest
//! deadline or a wake: a connection whose socket became readable gets its
//! bytes read into a fresh buffer and a connection thread started
//! ([`spawn_connection`]); one at its deadline, or at end of file, is
//! closed silently. The accept loop makes room here first when the server
//! is full ([`IdleSet::shed_one`]: the entry nearest its deadline).
//!
//! # Wakes
//!
//! Readiness is polled through the socket's `futures_io::AsyncRead`: a read
//! that would block leaves a waker with the poller. The waker marks its
//! entry (`fired`), queues its key and unparks the driver. An entry is
//! inserted *after* its poll, so a wake can come first and find no entry;
//! the one who inserts then reads `fired` and queues the key itself. Both
//! sides go through `inner`'s lock (the wake to queue, the insert and the
//! driver's look-up), so either the driver's look-up comes after the
//! insert, or the insert's read of `fired` comes after the wake's store:
//! no wake is lost.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use futures_io::AsyncRead;
use weft::net::TcpStream;
use weft::sync::{OwnedSemaphorePermit, Unpoison};

use super::Shared;
use super::conn::{connection_closed, spawn_connection};
use super::head::INPUT_BUF;
use super::stats::inc;
use crate::wire::InBuf;

/// A connection waiting for a byte: its socket, its peer and its permit of
/// `max_connections`. Closed by [`close_waiting`].
pub(super) struct Waiting {
    pub(super) tcp: TcpStream,
    pub(super) peer: SocketAddr,
    pub(super) permit: OwnedSemaphorePermit,
}

/// Closes a waiting connection: socket, permit, then the open count.
pub(super) fn close_waiting(shared: &Shared, w: Waiting) {
    drop(w);
    connection_closed(shared);
}

/// An entry's key: its deadline, then the order of arrival.
type Key = (Instant, u64);

struct Parked {
    conn: Waiting,
    wake: Arc<Wakes>,
}

/// The waker of one parked entry.
struct Wakes {
    key: Key,
    fired: AtomicBool,
    set: Weak<IdleSet>,
}

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::SeqCst);
        if let Some(set) = self.set.upgrade() {
            set.inner.lock().unpoison().woken.push(self.key);
            set.unpark_driver();
        }
    }
}

#[derive(Default)]
struct Inner {
    parked: BTreeMap<Key, Parked>,
    /// Keys whose sockets became readable (or whose entry may not be
    /// there yet: see "Wakes").
    woken: Vec<Key>,
    next_seq: u64,
    /// The deadline the driver sleeps until (None: no deadline).
    sleeping_until: Option<Instant>,
    /// Connections parked since the driver last gave freed memory back.
    since_trim: usize,
    /// When the last of those was parked.
    last_park: Option<Instant>,
    closed: bool,
}

/// Parked connections after which the driver gives the memory their threads
/// freed back to the OS, once they have been quiet for [`TRIM_QUIET`].
const TRIM_AFTER: usize = 256;

/// See [`TRIM_AFTER`].
const TRIM_QUIET: std::time::Duration = std::time::Duration::from_secs(1);

/// Gives the allocator's free pages back to the OS. A burst of connections
/// that go idle frees their threads' buffers all at once, amid the small
/// records of connections still open: glibc keeps such free chunks
/// resident (only the top of a heap shrinks by itself), 4–6 KiB per
/// connection at 10,000 in `weft-bench`'s idle row. `malloc_trim` walks
/// the heaps and `madvise`s their free pages away.
fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it only takes the
    // allocator's own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// See the module docs.
#[derive(Default)]
pub(super) struct IdleSet {
    inner: Mutex<Inner>,
    driver: Mutex<Option<weft::Thread>>,
}

impl IdleSet {
    fn unpark_driver(&self) {
        if let Some(t) = &*self.driver.lock().unpoison() {
            t.unpark();
        }
    }

    /// Waits for a byte on `conn` until `deadline` without a thread; when
    /// one is there already, starts the connection's thread at once.
    pub(super) fn park(self: &Arc<Self>, shared: &Arc<Shared>, conn: Waiting, deadline: Instant) {
        let key = {
            let mut inner = self.inner.lock().unpoison();
            if inner.closed {
                drop(inner);
                return close_waiting(shared, conn);
            }
            inner.next_seq += 1;
            (deadline, inner.next_seq)
        };
        let wake = Arc::new(Wakes {
            key,
            fired: AtomicBool::new(false),
            set: Arc::downgrade(self),
        });
        self.settle(shared, Parked { conn, wake });
    }

    /// Polls `p`'s socket: data starts its thread, end of file or an error
    /// closes it, nothing yet (re)inserts it.
    fn settle(&self, shared: &Arc<Shared>, p: Parked) {
        let waker = Waker::from(p.wake.clone());
        let mut cx = Context::from_waker(&waker);
        let mut input = InBuf::with_capacity(INPUT_BUF);
        let mut tcp = &p.conn.tcp;
        let polled = input.poll_fill(|buf| Pin::new(&mut tcp).poll_read(&mut cx, buf));
        match polled {
            Poll::Ready(Ok(n)) if n > 0 => {
                let Waiting { tcp, peer, permit } = p.conn;
                spawn_connection(shared, tcp, peer, permit, Some(input));
            }
            Poll::Ready(_) => close_waiting(shared, p.conn),
            Poll::Pending => {
                let key = p.wake.key;
                let wake = p.wake.clone();
                let mut inner = self.inner.lock().unpoison();
                if inner.closed {
                    drop(inner);
                    return close_waiting(shared, p.conn);
                }
                inner.parked.insert(key, p);
                inner.since_trim += 1;
                inner.last_park = Some(weft::clock::now());
                shared.stats.idle.fetch_add(1, Ordering::Relaxed);
                let fired = wake.fired.load(Ordering::SeqCst);
                if fired {
                    inner.woken.push(key);
                }
                let sooner = inner.sleeping_until.is_none_or(|t| key.0 < t);
                drop(inner);
                if fired || sooner {
                    self.unpark_driver();
                }
            }
        }
    }

    /// Closes the waiting connection nearest its deadline to make room;
    /// false when none waits.
    pub(super) fn shed_one(&self, shared: &Shared) -> bool {
        let p = self.inner.lock().unpoison().parked.pop_first();
        match p {
            Some((_, p)) => {
                shared.stats.idle.fetch_sub(1, Ordering::Relaxed);
                inc(&shared.stats.shed);
                close_waiting(shared, p.conn);
                true
            }
            None => false,
        }
    }

    /// Closes every waiting connection and stops the driver (shutdown).
    pub(super) fn close(&self, shared: &Shared) {
        let parked = {
            let mut inner = self.inner.lock().unpoison();
            inner.closed = true;
            inner.woken.clear();
            std::mem::take(&mut inner.parked)
        };
        for (_, p) in parked {
            shared.stats.idle.fetch_sub(1, Ordering::Relaxed);
            close_waiting(shared, p.conn);
        }
        self.unpark_driver();
    }

    /// The driver's loop (see the module docs); returns after
    /// [`close`](IdleSet::close).
    pub(super) fn drive(self: &Arc<Self>, shared: &Arc<Shared>) {
        *self.driver.lock().unpoison() = Some(weft::current());
        loop {
            let now = weft::clock::now();
            let mut expired = Vec::new();
            let mut trim = false;
            let (woken, next) = {
                let mut inner = self.inner.lock().unpoison();
                if inner.closed {
                    return;
                }
                // A burst of parked connections, quiet for a while: give
                // their threads' memory back (below, outside the lock).
                let mut trim_at = None;
                if inner.since_trim >= TRIM_AFTER
                    && let Some(last) = inner.last_park
                {
                    if now >= last + TRIM_QUIET {
                        inner.since_trim = 0;
                        trim = true;
                    } else {
                        trim_at = Some(last + TRIM_QUIET);
                    }
                }
                while let Some(e) = inner.parked.first_entry() {
                    if e.key().0 > now {
                        break;
                    }
                    expired.push(e.remove());
                }
                let next = inner.parked.first_key_value().map(|(k, _)| k.0);
                let next = match (next, trim_at) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                inner.sleeping_until = next;
                (std::mem::take(&mut inner.woken), next)
            };
            if trim {
                give_back_memory();
            }
            let busy = !expired.is_empty() || !woken.is_empty();
            for p in expired {
                shared.stats.idle.fetch_sub(1, Ordering::Relaxed);
                close_waiting(shared, p.conn);
            }
            for key in woken {
                let p = self.inner.lock().unpoison().parked.remove(&key);
                if let Some(p) = p {
                    shared.stats.idle.fetch_sub(1, Ordering::Relaxed);
                    p.wake.fired.store(false, Ordering::SeqCst);
                    self.settle(shared, p);
                }
            }
            if busy {
                continue;
            }
            match next {
                Some(d) => weft::park_timeout(d.saturating_duration_since(now)),
                None => weft::park(),
            }
            // An interrupt (shutdown) only wakes us; `closed` says when to go.
            let _ = weft::interrupted();
        }
    }
}
