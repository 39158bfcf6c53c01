//! The readiness source: the process's one `epoll` set, and who may wait
//! on it.
//!
//! # Vocabulary
//!
//! - **inner set**: the epoll instance every socket is registered in
//!   (edge-triggered, by `poll`). Anyone may *poll* it: fetch what is
//!   ready without waiting (`epoll_wait` with timeout 0) and hand the
//!   events to the handler `poll` installed.
//! - **outer set**: an epoll instance holding two things, the inner set
//!   (level-triggered: it reads ready while the inner set has events) and
//!   a wake eventfd. Only the *waiter* blocks on it.
//! - **waiter role**: the right to block until an event arrives. At most
//!   one thread holds it at a time: a carrier that has nothing to run, or
//!   the `weft-poller` OS thread when no carrier polls.
//! - **section**: a poll in progress. `poll` frees a closed socket's state
//!   only when no section is in progress (see [`Source::quiescent`]).
//!
//! # Who polls
//!
//! In mode `carriers` (the default) and while a runtime's carriers are on
//! duty ([`carrier_joined`]; spares too, so that readiness does not wait
//! for the monitor's tick while every core carrier is held), the carriers
//! do, as Go's scheduler does:
//!
//! 1. a carrier whose queues are empty polls before it searches for work,
//!    and a busy one every 61st scheduling round, so readiness reaches
//!    threads without leaving the carrier that will run them;
//! 2. a carrier about to sleep takes the waiter role if it is free and
//!    blocks in the outer set instead of on its futex: an event, a kick
//!    (which writes the eventfd, see `sched/slot.rs`) or its next timer
//!    wakes it — once the process has registered a descriptor
//!    ([`Source::in_use`]; the first registration kicks the sleepers);
//! 3. a runtime's monitor polls on its tick if no one has since its last
//!    tick (every carrier is running one thread for a long time).
//!
//! The `weft-poller` OS thread takes the role only while no carrier polls:
//! no runtime is running (an OS-thread server, `weft-http`'s platform
//! mode), or `WEFT_NETPOLL=thread`. It then wakes the waiting threads from
//! outside, as Weft 0.1 always did.
//!
//! Why: with a dedicated poller thread every readiness event crossed
//! threads twice — the poller woke from `epoll_wait`, then woke the carrier
//! with a futex — and on a machine with as many carriers as cores the
//! poller thread competed with them for a core. The numbers behind the
//! choice are in `ARCHITECTURE.md` ("I/O readiness").
//!
//! Rejected: one epoll set per carrier (Weft's threads are bound to a
//! carrier, so this looks natural, but a socket's waiters are not: an
//! accepted socket read by one thread and written by another, or waited on
//! by an OS thread, would need its registration moved or duplicated);
//! `io_uring` (the hooks of the `transparent` feature and the `std` types
//! speak readiness, not completion).
//!
//! # No lost wake-ups
//!
//! A carrier that blocks in the outer set first raises its doorbell's flag
//! and re-reads its kick word; a kicker bumps the word and then reads the
//! flag, writing the eventfd if it is set (`crate::doorbell`, model-checked
//! with loom). So the carrier either sees the kick before it blocks or the
//! eventfd wakes it.
//! An event that arrives while no one holds the role is fetched by the
//! next poll: a carrier's (rule 1 or 2) or the monitor's (rule 3).
//!
//! A holder that gives the role up for good — a carrier whose runtime
//! ends, the poller thread stepping aside for carriers — hands it on: it
//! kicks every sleeping carrier, and one of them takes it
//! (`hand_on_waiter_role` in the scheduler). Without that, a carrier that
//! had found the role taken would sleep on its futex, its monitor (every
//! carrier asleep) would stop ticking, and the next event would reach no
//! one: the hang `tests/netpoll_handoff.rs` reproduces with two runtimes,
//! the first ending while the second waits for data.

use crate::fork::PerProcess;
use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Events fetched per poll.
const BATCH: usize = 256;

/// The outer set's token for the wake eventfd (the inner set's is 1).
const WAKE_TOKEN: u64 = 0;

/// The waiter drains the wake eventfd at one wake in this many (see
/// `Source::wait_outer`).
const DRAIN_EVERY: u64 = 64;

/// What `poll` does with a batch of events from the inner set.
pub(crate) type Handler = fn(&[libc::epoll_event]);

/// The process's readiness source.
pub(crate) struct Source {
    inner: RawFd,
    outer: RawFd,
    wake_fd: RawFd,
    handler: OnceLock<Handler>,
    /// Held by the one thread allowed to block in the outer set.
    role: AtomicBool,
    /// Polls in progress.
    sections: AtomicUsize,
    /// Polls started (the monitor's "has anyone polled since my tick").
    polls: AtomicU64,
    /// Wakes by the eventfd (one in [`DRAIN_EVERY`] drains it).
    wakes: AtomicU64,
    /// A descriptor was ever registered (see [`Source::in_use`]).
    used: AtomicBool,
    /// Descriptors registered in the inner set (metrics; and no poll is
    /// worth a system call while it is zero).
    pub(crate) registered: AtomicUsize,
}

/// The source of this process copy: a `fork` child makes its own
/// (`fork.rs`). Its copies of the parent's descriptors name the parent's
/// epoll sets and wake eventfd, which both processes would then wait on:
/// each would drain the other's edge-triggered events and kicks, and read
/// the other's tokens (`IoState` addresses of the other address space).
static SOURCE: PerProcess<Source> = PerProcess::new();

/// Carriers that poll (see "Who polls"). A futex word: the poller
/// thread sleeps on it while it is not zero. Per process copy, as
/// [`SOURCE`]: a child's count starts from its own carriers.
fn carriers() -> &'static AtomicU32 {
    static CARRIERS: PerProcess<AtomicU32> = PerProcess::new();
    CARRIERS.get_or_init(|| AtomicU32::new(0))
}

/// The source if it has been created.
pub(crate) fn get() -> Option<&'static Source> {
    SOURCE.get()
}

/// The source, created on first use. A failed creation is not remembered
/// (a transient `EMFILE` must not disable sockets for good) and leaves no
/// descriptor behind.
pub(crate) fn source() -> io::Result<&'static Source> {
    SOURCE.get_or_try_init(|| {
        create().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("weft: cannot create the I/O readiness set: {e}"),
            )
        })
    })
}

/// Whether carriers poll (`WEFT_NETPOLL`, read once: `carriers`, the
/// default, or `thread`).
pub(crate) fn carriers_poll() -> bool {
    static MODE: OnceLock<bool> = OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("WEFT_NETPOLL") {
        Ok(v) if v == "thread" => false,
        Ok(v) if v == "carriers" || v.is_empty() => true,
        Ok(v) => {
            eprintln!("weft: WEFT_NETPOLL={v:?} is not `carriers` or `thread`; using `carriers`");
            true
        }
        Err(_) => true,
    })
}

/// A carrier starts polling (rules 1–2). The first one moves the
/// poller thread out of the outer set.
pub(crate) fn carrier_joined() {
    if carriers().fetch_add(1, Ordering::SeqCst) == 0
        && let Some(s) = get()
    {
        s.wake();
    }
}

/// A carrier stops polling (it exits or goes off duty). The last one hands the waiter
/// role back to the poller thread.
pub(crate) fn carrier_left() {
    if carriers().fetch_sub(1, Ordering::SeqCst) == 1 {
        crate::futex::futex_wake(carriers());
    }
}

/// Body of the poller thread's wait for its turn: returns once no carrier
/// polls.
pub(crate) fn wait_until_no_carrier_polls() {
    loop {
        let n = carriers().load(Ordering::SeqCst);
        if n == 0 {
            return;
        }
        crate::futex::futex_wait(carriers(), n, None);
    }
}

/// Whether no carrier polls now (the poller thread then holds the role).
pub(crate) fn no_carrier_polls() -> bool {
    carriers().load(Ordering::SeqCst) == 0
}

fn create() -> io::Result<Source> {
    use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
    let new_epoll = || {
        // SAFETY: a plain system call creating a new descriptor.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is new and owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let inner = new_epoll()?;
    let outer = new_epoll()?;
    // SAFETY: as above.
    let wake_fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if wake_fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let wake_fd = unsafe { OwnedFd::from_raw_fd(wake_fd) };
    let add = |fd: RawFd, events: i32, token: u64| {
        let mut ev = libc::epoll_event {
            events: events as u32,
            u64: token,
        };
        // SAFETY: adding a descriptor we own to the outer set we own.
        if unsafe { libc::epoll_ctl(outer.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    add(
        wake_fd.as_raw_fd(),
        libc::EPOLLIN | libc::EPOLLET,
        WAKE_TOKEN,
    )?;
    add(inner.as_raw_fd(), libc::EPOLLIN, 1)?;
    // From here the descriptors live as long as the process.
    Ok(Source {
        inner: inner.into_raw_fd(),
        outer: outer.into_raw_fd(),
        wake_fd: wake_fd.into_raw_fd(),
        handler: OnceLock::new(),
        role: AtomicBool::new(false),
        sections: AtomicUsize::new(0),
        polls: AtomicU64::new(0),
        wakes: AtomicU64::new(0),
        used: AtomicBool::new(false),
        registered: AtomicUsize::new(0),
    })
}

/// The waiter role, held (see [`Source::try_role`]).
pub(crate) struct Role<'a> {
    source: &'a Source,
}

impl Role<'_> {
    /// Blocks in the outer set until an event, [`Source::wake`] or
    /// `timeout` — unless `still_idle` (called after the role is held and
    /// the caller has raised its doorbell, `crate::doorbell`) says no — then gives up
    /// the role and polls. Returns the events handled.
    pub(crate) fn block(
        self,
        timeout: Option<Duration>,
        still_idle: impl FnOnce() -> bool,
    ) -> usize {
        let s = self.source;
        if still_idle() {
            s.wait_outer(timeout);
        }
        drop(self);
        // Not a system call for nothing: a process without sockets still
        // has a source, and its carriers sleep here.
        s.poll()
    }
}

impl Drop for Role<'_> {
    fn drop(&mut self) {
        self.source.role.store(false, Ordering::SeqCst);
    }
}

impl Source {
    /// The inner set, where `poll` registers sockets.
    pub(crate) fn inner_fd(&self) -> RawFd {
        self.inner
    }

    /// Installs what polls do with events (once; later calls are ignored).
    pub(crate) fn set_handler(&self, h: Handler) {
        let _ = self.handler.set(h);
    }

    /// The waiter role, if no one holds it.
    pub(crate) fn try_role(&self) -> Option<Role<'_>> {
        // SeqCst: a carrier that fails here is asleep-to-be, and whoever
        // gives the role up for good must see it (`sched::hand_on_waiter_role`).
        if self.role.load(Ordering::SeqCst) {
            return None;
        }
        self.role
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .ok()
            .map(|_| Role { source: self })
    }

    /// Whether a descriptor was ever registered. Until then carriers
    /// sleep on their futex rather than in the outer set (rule 2): a
    /// process without sockets — a computation, channels between threads —
    /// pays a futex wake per kick, not an eventfd write and an epoll
    /// wake-up. SeqCst: a carrier raises its `sleeping` flag before it
    /// reads this, and [`Source::mark_used`]'s caller reads the flags
    /// after it (`sched::hand_on_waiter_role`), so a sleeper that read
    /// `false` is kicked and takes the role.
    pub(crate) fn in_use(&self) -> bool {
        self.used.load(Ordering::SeqCst)
    }

    /// Records a registration; true the first time (the caller then hands
    /// the waiter role on, see [`Source::in_use`]).
    pub(crate) fn mark_used(&self) -> bool {
        !self.used.load(Ordering::Relaxed) && !self.used.swap(true, Ordering::SeqCst)
    }

    /// Polls, unless nothing is registered. Returns the events handled.
    ///
    /// Also while someone holds the waiter role: that holder is woken by
    /// the same events, but it may be a runnable thread waiting for a core
    /// (on a busy machine, for milliseconds), and an event fetched here
    /// first does not wake it at all (the outer set reads ready only while
    /// the inner set holds events).
    pub(crate) fn poll(&self) -> usize {
        if self.registered.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        self.poll_inner()
    }

    /// Polls started so far.
    pub(crate) fn polls(&self) -> u64 {
        self.polls.load(Ordering::Relaxed)
    }

    /// Makes the role's holder return from the outer set.
    pub(crate) fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to our eventfd. A raw system call: a
        // kick may come from a virtual thread, and with the `transparent`
        // feature libc's `write` is Weft's own hook.
        unsafe {
            libc::syscall(
                libc::SYS_write,
                self.wake_fd,
                (&one as *const u64).cast::<u8>(),
                8usize,
            );
        }
    }

    /// Whether no poll is in progress. A state deregistered from the inner
    /// set before a call that returns true can no longer be named by any
    /// event being handled: a batch that held it was fetched before the
    /// deregistration, by a section that began before it (the kernel's
    /// epoll lock orders the fetch and the deregistration) and that this
    /// SeqCst load would count had it not ended.
    pub(crate) fn quiescent(&self) -> bool {
        self.sections.load(Ordering::SeqCst) == 0
    }

    fn wait_outer(&self, timeout: Option<Duration>) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 2];
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let tsp = crate::clock::timespec_ptr(timeout, &mut ts);
        // SAFETY: `events` has room for 2 entries, `tsp` is null or points
        // at a live timespec, no signal mask.
        let mut n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.outer,
                events.as_mut_ptr(),
                2,
                tsp,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        } as i32;
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            // Before Linux 5.11: millisecond timeouts, rounded up.
            let ms = timeout.map_or(-1, |d| {
                d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
            });
            // SAFETY: as above.
            n = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait,
                    self.outer,
                    events.as_mut_ptr(),
                    2,
                    ms,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            } as i32;
        }
        for ev in events.iter().take(n.max(0) as usize) {
            // Edge-triggered, the eventfd reports every write, drained or
            // not: draining it is only hygiene (its count would take
            // millennia of kicks to fill its 64 bits), so one wake in
            // DRAIN_EVERY pays for the read, not every kick's wake-up.
            if ev.u64 == WAKE_TOKEN
                && self
                    .wakes
                    .fetch_add(1, Ordering::Relaxed)
                    .is_multiple_of(DRAIN_EVERY)
            {
                let mut buf = 0u64;
                // SAFETY: draining our eventfd into an 8-byte buffer (raw,
                // as in `wake`).
                unsafe {
                    libc::syscall(
                        libc::SYS_read,
                        self.wake_fd,
                        (&mut buf as *mut u64).cast::<u8>(),
                        8usize,
                    );
                }
            }
        }
    }

    /// Fetches and handles what is ready in the inner set, in a section.
    fn poll_inner(&self) -> usize {
        let Some(&handler) = self.handler.get() else {
            return 0;
        };
        self.sections.fetch_add(1, Ordering::SeqCst);
        self.polls.fetch_add(1, Ordering::Relaxed);
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; BATCH];
        // SAFETY: `events` has room for BATCH entries; the kernel fills
        // the first `n`. Raw system calls here and below: with the
        // `transparent` feature, libc's `epoll_wait` is Weft's own hook.
        let n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait,
                self.inner,
                events.as_mut_ptr(),
                BATCH as i32,
                0,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        };
        let n = n.max(0) as usize;
        if n > 0 {
            handler(&events[..n]);
        }
        self.sections.fetch_sub(1, Ordering::SeqCst);
        n
    }
}
