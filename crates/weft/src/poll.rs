//! The I/O poller: readiness of non-blocking file descriptors, and the
//! wait that turns "would block" into a parked thread.
//!
//! # Shape
//!
//! One `epoll` set per process (the *inner set* of [`crate::netpoll`],
//! which also decides who fetches its events). Every socket is registered
//! once, at creation, edge-triggered for both directions (`EPOLLIN |
//! EPOLLOUT | EPOLLRDHUP | EPOLLET`). Whoever polls hands the events to
//! [`handle`], which sets readiness bits on each socket's [`IoState`] and
//! unparks the threads waiting on that direction: from a carrier, its own
//! threads go to its queue without a wake-up; others go to their carrier's
//! inbox (a kick if it sleeps); OS threads are unparked.
//!
//! # Readiness protocol (no lost wake-ups)
//!
//! `readiness` packs direction bits and an event *tick*. An operation
//! snapshots the word and, only if its direction's bit is set, tries the
//! syscall; on `EAGAIN` it clears its bit only if the tick is unchanged (no
//! event arrived since the snapshot). A stream read or write that moved
//! fewer bytes than asked drained the socket at that moment, so it clears
//! the bit the same way: the next call parks at once instead of paying a
//! syscall for the `EAGAIN` it would get (Tokio does the same). Both bits
//! start set, so a new socket's first operation is tried at once.
//! A waiter pushes itself on the direction's waiter list under the state's
//! mutex and then re-reads readiness; the poller sets readiness *before*
//! taking the same mutex to drain the list. So either the poller sees the
//! waiter, or the waiter sees the readiness.
//!
//! # Freeing
//!
//! epoll hands back the raw `IoState` pointer. A deregistered state is not
//! freed at once: it goes to a graveyard, emptied only when no poll is in
//! progress ([`Source::quiescent`]), so no batch being handled can still
//! name it. Whoever closes the socket that fills the graveyard to
//! `GRAVEYARD_FREE_AT` tries; so does the poller thread before each wait.

use crate::unpoison::Unpoison;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::netpoll::{self, Source};
use crate::thread::{Thread, current, park_deadline, take_interrupt};

/// Which direction an operation waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interest {
    Read,
    Write,
}

const READABLE: usize = 1;
const WRITABLE: usize = 2;
const READ_CLOSED: usize = 4;
const WRITE_CLOSED: usize = 8;
const BITS: usize = 0xff;
const TICK_ONE: usize = 0x100;

impl Interest {
    fn ready_mask(self) -> usize {
        match self {
            Interest::Read => READABLE | READ_CLOSED,
            Interest::Write => WRITABLE | WRITE_CLOSED,
        }
    }
    fn bit(self) -> usize {
        match self {
            Interest::Read => READABLE,
            Interest::Write => WRITABLE,
        }
    }
}

enum Waiter {
    Thread(Thread),
    Waker(Waker),
}

impl Waiter {
    fn wake(self) {
        match self {
            Waiter::Thread(t) => t.unpark(),
            Waiter::Waker(w) => w.wake(),
        }
    }
}

/// Waiters taken off a list by an event, woken outside the lock.
enum Woken {
    None,
    One(Waiter),
    Many(Vec<Waiter>),
}

impl Woken {
    fn wake(self) {
        match self {
            Woken::None => {}
            Woken::One(w) => w.wake(),
            Woken::Many(v) => v.into_iter().for_each(Waiter::wake),
        }
    }
}

#[derive(Default)]
struct Waiters {
    read: Vec<Waiter>,
    write: Vec<Waiter>,
}

impl Waiters {
    fn list(&mut self, i: Interest) -> &mut Vec<Waiter> {
        match i {
            Interest::Read => &mut self.read,
            Interest::Write => &mut self.write,
        }
    }
}

/// Readiness and waiters of one registered descriptor.
pub(crate) struct IoState {
    readiness: AtomicUsize,
    waiters: Mutex<Waiters>,
    /// The descriptor (for dumps: what a parked thread waits on).
    pub(crate) fd: RawFd,
}

impl IoState {
    fn is_ready(&self, i: Interest) -> bool {
        self.readiness.load(Ordering::SeqCst) & i.ready_mask() != 0
    }

    /// Clears `i`'s readiness if no event arrived since `snapshot`.
    fn clear(&self, i: Interest, snapshot: usize) {
        let mut cur = self.readiness.load(Ordering::SeqCst);
        loop {
            if cur & !BITS != snapshot & !BITS {
                return; // a newer event: keep it
            }
            let new = cur & !i.bit();
            match self
                .readiness
                .compare_exchange(cur, new, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return,
                Err(a) => cur = a,
            }
        }
    }

    /// Called by the poller: records an event and wakes its waiters.
    fn set_ready(&self, bits: usize) {
        // Usually one waiter per direction: pop it without giving up the
        // list's allocation (a `take` would cost a malloc per wait).
        fn drain(list: &mut Vec<Waiter>) -> Woken {
            match list.len() {
                0 => Woken::None,
                1 => Woken::One(list.pop().expect("len 1")),
                _ => Woken::Many(std::mem::take(list)),
            }
        }
        let mut cur = self.readiness.load(Ordering::SeqCst);
        loop {
            let new = (cur & !BITS).wrapping_add(TICK_ONE) | (cur & BITS) | bits;
            match self
                .readiness
                .compare_exchange(cur, new, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => break,
                Err(a) => cur = a,
            }
        }
        let (r, w) = {
            let mut ws = self.waiters.lock().unpoison();
            let r = if bits & Interest::Read.ready_mask() != 0 {
                drain(&mut ws.read)
            } else {
                Woken::None
            };
            let w = if bits & Interest::Write.ready_mask() != 0 {
                drain(&mut ws.write)
            } else {
                Woken::None
            };
            (r, w)
        };
        r.wake();
        w.wake();
    }

    /// Marks both directions closed and wakes their waiters (a hooked
    /// descriptor being closed: their retried call fails with `EBADF`).
    #[cfg_attr(not(feature = "transparent"), allow(dead_code))]
    pub(crate) fn set_closed(&self) {
        self.set_ready(READ_CLOSED | WRITE_CLOSED);
    }

    /// Wakes every waiter of both directions (used when a socket is shut
    /// down under a blocked thread).
    pub(crate) fn wake_all(&self) {
        self.set_ready(0);
        let ws = std::mem::take(&mut *self.waiters.lock().unpoison());
        for x in ws.read.into_iter().chain(ws.write) {
            x.wake();
        }
    }
}

/// Why a wait for readiness ended without readiness.
pub(crate) enum WaitError {
    TimedOut,
    Interrupted,
}

/// A descriptor registered with the poller. Deregisters on drop (the
/// descriptor itself is owned and closed by the caller, *after* this), or
/// earlier with [`Registration::deregister`].
pub(crate) struct Registration {
    state: Arc<IoState>,
    /// Set once `EPOLL_CTL_DEL` was issued: it must be issued while the
    /// descriptor is still open, at most once.
    deleted: AtomicBool,
    /// The process copy it was made in (`fork.rs`). In a `fork` child a
    /// registration of the parent's is in the parent's readiness set, not
    /// the child's: the child neither deletes it from its own set nor
    /// counts it off, and leaves its state alone (the parent's waiters in
    /// it do not exist here).
    generation: u32,
}

impl Registration {
    /// Registers `fd` (which must be non-blocking) for both directions.
    pub(crate) fn new(fd: RawFd) -> io::Result<Registration> {
        if crate::sched::simulation().is_some() {
            // No poller there, nor may one start (a thread of its own).
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "weft::sim: a real descriptor cannot be waited on inside a simulation",
            ));
        }
        let p = poller()?;
        let state = Arc::new(IoState {
            // Optimistic: the first operation in each direction is tried.
            readiness: AtomicUsize::new(READABLE | WRITABLE),
            waiters: Mutex::new(Waiters::default()),
            fd,
        });
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: Arc::as_ptr(&state) as u64,
        };
        // SAFETY: epoll_ctl with a valid epoll fd and event struct; the data
        // pointer stays valid until the state leaves the graveyard (module
        // docs), which happens only after EPOLL_CTL_DEL.
        let r = unsafe { libc::epoll_ctl(p.source.inner_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        p.source.registered.fetch_add(1, Ordering::Relaxed);
        if p.source.mark_used() {
            // Carriers asleep on their futex: one takes the waiter role
            // (`netpoll`, rule 2).
            crate::sched::hand_on_waiter_role();
        }
        Ok(Registration {
            state,
            deleted: AtomicBool::new(false),
            generation: crate::fork::generation(),
        })
    }

    pub(crate) fn state(&self) -> &Arc<IoState> {
        &self.state
    }

    /// The readiness word, for [`Registration::clear_if`] (see "Readiness
    /// protocol"): whether `i` looked ready, and the snapshot.
    #[cfg_attr(not(feature = "transparent"), allow(dead_code))]
    pub(crate) fn snapshot(&self, i: Interest) -> (bool, usize) {
        let s = self.state.readiness.load(Ordering::SeqCst);
        (s & i.ready_mask() != 0, s)
    }

    /// Clears `i`'s readiness if no event arrived since `snap`.
    #[cfg_attr(not(feature = "transparent"), allow(dead_code))]
    pub(crate) fn clear_if(&self, i: Interest, snap: usize) {
        self.state.clear(i, snap)
    }

    /// Runs `op` until it does not return `WouldBlock`, parking between
    /// attempts until the descriptor is ready in direction `i`.
    ///
    /// Errors: `TimedOut` past `deadline`; `Interrupted` (flag cleared) if
    /// the thread is interrupted while it waits.
    pub(crate) fn do_io<R>(
        &self,
        i: Interest,
        deadline: Option<Instant>,
        op: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R> {
        self.do_io_then(i, deadline, op, |_| false)
    }

    /// [`Registration::do_io`] for a stream read or write of `want` bytes:
    /// a short transfer means the socket was drained (or filled), so the
    /// direction's readiness is cleared (see "Readiness protocol").
    pub(crate) fn do_stream_io(
        &self,
        i: Interest,
        deadline: Option<Instant>,
        want: usize,
        op: impl FnMut() -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.do_io_then(i, deadline, op, |&n| n > 0 && n < want)
    }

    fn do_io_then<R>(
        &self,
        i: Interest,
        deadline: Option<Instant>,
        mut op: impl FnMut() -> io::Result<R>,
        drained: impl Fn(&R) -> bool,
    ) -> io::Result<R> {
        loop {
            let snap = self.state.readiness.load(Ordering::SeqCst);
            if snap & i.ready_mask() != 0 {
                match op() {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.state.clear(i, snap),
                    Ok(r) => {
                        if drained(&r) {
                            self.state.clear(i, snap);
                        }
                        return Ok(r);
                    }
                    Err(e) => return Err(e),
                }
            }
            match self.wait(i, deadline) {
                Ok(()) => {}
                Err(WaitError::TimedOut) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "weft: socket operation timed out",
                    ));
                }
                Err(WaitError::Interrupted) => return Err(crate::thread::interrupted_error()),
            }
        }
    }

    /// Parks until `i` is ready, the deadline passes, or an interrupt.
    pub(crate) fn wait(&self, i: Interest, deadline: Option<Instant>) -> Result<(), WaitError> {
        let b = crate::thread::Blocker::Io {
            fd: self.state.fd,
            read: i == Interest::Read,
        };
        self.wait_as(i, deadline, b)
    }

    /// [`Registration::wait`], shown in dumps as blocked on `b`.
    pub(crate) fn wait_as(
        &self,
        i: Interest,
        deadline: Option<Instant>,
        b: crate::thread::Blocker,
    ) -> Result<(), WaitError> {
        let st = &*self.state;
        let mut me: Option<Thread> = None;
        loop {
            if st.is_ready(i) {
                return Ok(());
            }
            if take_interrupt() {
                return Err(WaitError::Interrupted);
            }
            if deadline.is_some_and(|d| crate::clock::now() >= d) {
                return Err(WaitError::TimedOut);
            }
            let t = me.get_or_insert_with(current).clone();
            let id = t.id();
            st.waiters.lock().unpoison().list(i).push(Waiter::Thread(t));
            if !st.is_ready(i) {
                crate::thread::with_blocker(b.clone(), || park_deadline(deadline));
            }
            // Leave the list if we are still on it (timeout, interrupt,
            // spurious wake-up), so it cannot grow without bound.
            let mut ws = st.waiters.lock().unpoison();
            ws.list(i)
                .retain(|w| !matches!(w, Waiter::Thread(t) if t.id() == id));
        }
    }

    /// The async form of [`Registration::do_io`]: registers `cx`'s waker
    /// instead of parking.
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        i: Interest,
        mut op: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            let snap = self.state.readiness.load(Ordering::SeqCst);
            match op() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return Poll::Ready(r),
            }
            self.state.clear(i, snap);
            let mut ws = self.state.waiters.lock().unpoison();
            let list = ws.list(i);
            if !list
                .iter()
                .any(|w| matches!(w, Waiter::Waker(k) if k.will_wake(cx.waker())))
            {
                list.push(Waiter::Waker(cx.waker().clone()));
            }
            drop(ws);
            if !self.state.is_ready(i) {
                return Poll::Pending;
            }
        }
    }

    /// Removes the descriptor from the poller now. Call it before the
    /// descriptor is closed when the registration may outlive the close
    /// (a waiter still holds it): once closed, the number can be reused at
    /// once, and a later `EPOLL_CTL_DEL` by number would remove the *new*
    /// file's registration, whose waiters would then never wake.
    /// Idempotent; keeps `errno` (the transparent hooks call it between a
    /// system call and their return). True if this call removed the
    /// registration (`EPOLL_CTL_DEL` succeeded): the `transparent` hooks
    /// free a state only then (see `transparent`'s module docs, "Freeing
    /// poller states").
    pub(crate) fn deregister(&self) -> bool {
        if self.deleted.swap(true, Ordering::AcqRel) || self.inherited() {
            return false;
        }
        let Some(p) = POLLER.get() else {
            return false;
        };
        // errno is saved around the call: a failure here is not the
        // caller's to see.
        let saved = crate::errno::get();
        // SAFETY: deleting a registration we added, on a descriptor the
        // caller still holds open (a failure, already closed, is harmless).
        let r = unsafe {
            libc::epoll_ctl(
                p.source.inner_fd(),
                libc::EPOLL_CTL_DEL,
                self.state.fd,
                std::ptr::null_mut(),
            )
        };
        crate::errno::set(saved);
        p.source.registered.fetch_sub(1, Ordering::Relaxed);
        r == 0
    }

    /// Made in the parent of this `fork` child (see `generation`).
    fn inherited(&self) -> bool {
        self.generation != crate::fork::generation()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.inherited() {
            // Its state may hold the parent's waiters: never dropped here.
            std::mem::forget(self.state.clone());
            return;
        }
        let Some(p) = POLLER.get() else {
            return;
        };
        self.deregister();
        let mut g = p.graveyard.lock().unpoison();
        g.push(self.state.clone());
        if g.len() >= GRAVEYARD_FREE_AT {
            drop(g);
            p.free_graveyard();
        }
    }
}

/// The process-wide poller: the readiness source (`netpoll`), the states
/// waiting to be freed, and the `weft-poller` thread.
pub(crate) struct Poller {
    source: &'static Source,
    graveyard: Mutex<Vec<Arc<IoState>>>,
}

/// The poller of this process copy (a `fork` child starts its own, on its
/// own readiness source: `netpoll.rs`).
static POLLER: crate::fork::PerProcess<Poller> = crate::fork::PerProcess::new();

/// Dead states kept before a closing socket tries to free them.
const GRAVEYARD_FREE_AT: usize = 256;

/// The poller, started on first use. A failed start is not remembered: the
/// next call tries again (a transient `EMFILE` must not disable sockets for
/// the life of the process), and it leaves no descriptor or thread behind.
pub(crate) fn poller() -> io::Result<&'static Poller> {
    POLLER.get_or_try_init(start_poller)
}

/// [`poller`]'s one-time start (run by one caller at a time; see there).
fn start_poller() -> io::Result<Poller> {
    let source = netpoll::source()?;
    source.set_handler(handle);
    std::thread::Builder::new()
        .name("weft-poller".into())
        .spawn(move || run(source))
        .map_err(|e| io::Error::new(e.kind(), format!("weft: cannot start the I/O poller: {e}")))?;
    Ok(Poller {
        source,
        graveyard: Mutex::new(Vec::new()),
    })
}

impl Poller {
    /// Frees the dead states if no poll is in progress (see
    /// [`Source::quiescent`]): every state in the graveyard was
    /// deregistered before it was put there.
    fn free_graveyard(&self) {
        let mut g = self.graveyard.lock().unpoison();
        if g.is_empty() || !self.source.quiescent() {
            return;
        }
        let dead = std::mem::take(&mut *g);
        drop(g);
        drop(dead);
    }
}

/// Body of the `weft-poller` thread: the waiter while no carrier polls
/// (`netpoll`, "Who polls").
fn run(source: &'static Source) {
    let p = loop {
        if let Some(p) = POLLER.get() {
            break p;
        }
        std::thread::yield_now();
    };
    loop {
        p.free_graveyard();
        if !netpoll::no_carrier_polls() {
            // A carrier that joined may have found the role still ours.
            crate::sched::hand_on_waiter_role();
            netpoll::wait_until_no_carrier_polls();
            continue;
        }
        match source.try_role() {
            Some(role) => {
                role.block(None, netpoll::no_carrier_polls);
            }
            // A carrier that is leaving still holds it, for a moment.
            None => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
}

/// The handler of every poll: records each event on its socket's state and
/// wakes the waiters.
fn handle(events: &[libc::epoll_event]) {
    for ev in events {
        let e = ev.events as i32;
        let mut bits = 0;
        if e & (libc::EPOLLIN | libc::EPOLLPRI) != 0 {
            bits |= READABLE;
        }
        if e & libc::EPOLLOUT != 0 {
            bits |= WRITABLE;
        }
        if e & libc::EPOLLRDHUP != 0 {
            bits |= READ_CLOSED;
        }
        if e & (libc::EPOLLHUP | libc::EPOLLERR) != 0 {
            bits |= READ_CLOSED | WRITE_CLOSED;
        }
        // SAFETY: the token is `Arc::as_ptr` of a registered state, kept
        // alive by its Registration or by the graveyard until no poll that
        // began before its deregistration is in progress (module docs).
        let st = unsafe { &*(ev.u64 as *const IoState) };
        st.set_ready(bits);
    }
}
