//! The runtime's clock: what "now" is for every deadline, and instants as
//! nanoseconds since a process epoch.
//!
//! Every deadline Weft computes — timers, `sleep`, `park_timeout`, lock,
//! channel and socket timeouts — starts from [`now`], never from
//! `Instant::now()` directly. Outside a simulation the two are the same
//! (one relaxed load says no simulation is running). On the carrier of a
//! simulation (`crate::sim`) and its virtual threads, [`now`] is the
//! simulation's [`VirtualClock`]: an `Instant` that moves only when the
//! simulated carrier has nothing to run and jumps to its next timer. Both
//! kinds of instant are `Instant`s and compare with each other, but only
//! instants of one kind are ever compared: a simulation's deadlines live on
//! its own carrier.
//!
//! Timers, blocker records and event rate limits store instants as `u64`
//! nanoseconds so that they fit in one atomic word; system calls with a
//! timeout take it as a `timespec` ([`timespec_ptr`]). Diagnostics (how
//! long a dump took, how long a carrier has been held) measure real time
//! and read `Instant::now()`.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Virtual clocks installed on some carrier: while 0, [`now`] is one
/// relaxed load and `Instant::now()`.
static INSTALLED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The virtual clock of the simulation this OS thread carries, or null.
    /// `const` and plain: seeded into each virtual thread's thread-local
    /// area (`tls::seed`) like the carrier pointer.
    static VIRTUAL: Cell<*const VirtualClock> = const { Cell::new(std::ptr::null()) };
}

/// A simulation's clock: `origin` plus the virtual time elapsed, which only
/// its carrier advances ([`VirtualClock::advance_to`]).
pub(crate) struct VirtualClock {
    origin: Instant,
    elapsed_ns: AtomicU64,
}

impl VirtualClock {
    pub(crate) fn new() -> VirtualClock {
        VirtualClock {
            origin: Instant::now(),
            elapsed_ns: AtomicU64::new(0),
        }
    }

    /// The simulation's current instant.
    pub(crate) fn now(&self) -> Instant {
        self.origin + Duration::from_nanos(self.elapsed_ns.load(Ordering::Relaxed))
    }

    /// Virtual time since the simulation began.
    pub(crate) fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.elapsed_ns.load(Ordering::Relaxed))
    }

    /// Moves the clock forward to `t` (never back).
    pub(crate) fn advance_to(&self, t: Instant) {
        let ns = t.saturating_duration_since(self.origin).as_nanos();
        let ns = u64::try_from(ns).unwrap_or(u64::MAX);
        self.elapsed_ns.fetch_max(ns, Ordering::Relaxed);
    }
}

/// Now, for a deadline: the simulation's virtual time on a simulated
/// carrier and its virtual threads, else `Instant::now()`.
#[inline]
pub(crate) fn now() -> Instant {
    if INSTALLED.load(Ordering::Relaxed) == 0 {
        return Instant::now();
    }
    virtual_now().unwrap_or_else(Instant::now)
}

/// The virtual clock's reading, if this OS thread carries a simulation.
///
/// `#[inline(never)]`: virtual threads call it, and the thread-local's
/// address must be computed afresh after every switch.
#[inline(never)]
pub(crate) fn virtual_now() -> Option<Instant> {
    let p = VIRTUAL.with(Cell::get);
    // SAFETY: `install` points the cell at a clock that outlives the
    // installation (the caller of `install` keeps it until `uninstall`),
    // and areas seeded from it belong to threads of that carrier.
    unsafe { p.as_ref() }.map(VirtualClock::now)
}

/// Whether [`now`] may be virtual on some thread (a cheap pre-check for
/// hooks that would otherwise not look at the clock).
#[inline]
pub(crate) fn any_virtual() -> bool {
    INSTALLED.load(Ordering::Relaxed) != 0
}

/// Whether the calling thread reads a virtual clock (runs in a
/// simulation).
#[inline]
pub(crate) fn is_virtual() -> bool {
    any_virtual() && virtual_now().is_some()
}

/// Makes `clock` this OS thread's clock until [`uninstall`].
///
/// # Safety
///
/// `clock` stays alive until [`uninstall`] is called on this same thread,
/// and until every thread-local area seeded with it ([`cell`]) is gone.
pub(crate) unsafe fn install(clock: &VirtualClock) {
    INSTALLED.fetch_add(1, Ordering::Relaxed);
    VIRTUAL.with(|c| c.set(clock));
}

/// Undoes [`install`] on this OS thread.
pub(crate) fn uninstall() {
    if !VIRTUAL.with(|c| c.replace(std::ptr::null())).is_null() {
        INSTALLED.fetch_sub(1, Ordering::Relaxed);
    }
}

/// This OS thread's cell and its value (for seeding a thread-local area:
/// `tls::seed`).
pub(crate) fn cell() -> (*const Cell<*const VirtualClock>, *const VirtualClock) {
    VIRTUAL.with(|c| (c as *const _, c.get()))
}

static EPOCH: OnceLock<Instant> = OnceLock::new();

fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

/// The instant `ns` nanoseconds after the epoch.
pub(crate) fn instant_of(ns: u64) -> Instant {
    epoch() + Duration::from_nanos(ns)
}

/// `t` as nanoseconds since the epoch (0 for instants before it).
pub(crate) fn ns_of(t: Instant) -> u64 {
    t.saturating_duration_since(epoch()).as_nanos() as u64
}

/// An optional timeout as the kernel takes it: `None` → a null pointer
/// (wait forever), else a pointer into `buf`, which must outlive the call.
pub(crate) fn timespec_ptr(
    timeout: Option<Duration>,
    buf: &mut libc::timespec,
) -> *const libc::timespec {
    match timeout {
        None => std::ptr::null(),
        Some(d) => {
            *buf = libc::timespec {
                tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            };
            buf
        }
    }
}
