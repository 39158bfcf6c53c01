//! The runtime's clock: [`now`], what "now" is for every deadline.
//!
//! Every deadline Weft computes — timers, `sleep`, `park_timeout`, lock,
//! channel and socket timeouts — starts from [`now`], never from
//! `Instant::now()` directly, and so should a library's deadlines that it
//! hands to Weft's waits (weft-http's header and shutdown deadlines, say).
//! Outside a simulation the two are the same (one relaxed load says no
//! simulation is running). On the carrier of a simulation
//! ([`crate::sim`]) and its virtual threads, [`now`] is the simulation's
//! virtual clock: an `Instant` that moves only when the simulated carrier
//! has nothing to run and jumps to its next timer. Both kinds of instant
//! are `Instant`s and compare with each other, but only instants of one
//! kind are ever compared: a simulation's deadlines live on its own
//! carrier.
//!
//! Inside the crate: timers, blocker records and event rate limits store
//! instants as `u64` nanoseconds since a process epoch so that they fit in
//! one atomic word; system calls with a timeout take it as a `timespec`
//! (`timespec_ptr`). Diagnostics (how long a dump took, how long a
//! carrier has been held) measure real time and read `Instant::now()`.

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
///
/// `origin` is the real monotonic time when the simulation began, both as
/// an `Instant` and as the `CLOCK_MONOTONIC` reading it is made of
/// (`origin_mono`): the `transparent` hook of `clock_gettime` answers a
/// simulated thread `origin_mono + elapsed`, so `Instant::now()` there is
/// exactly [`VirtualClock::now`]. Its real-time clock starts at
/// [`SIM_REALTIME_ORIGIN`], the same in every run.
pub(crate) struct VirtualClock {
    origin: Instant,
    #[cfg_attr(not(feature = "transparent"), allow(dead_code))]
    origin_mono: Duration,
    elapsed_ns: AtomicU64,
}

/// What `SystemTime::now()` reads when a simulation begins (under
/// `transparent`): 2025-01-01T00:00:00Z, the same for every run.
#[cfg(feature = "transparent")]
pub(crate) const SIM_REALTIME_ORIGIN: Duration = Duration::from_secs(1_735_689_600);

thread_local! {
    /// A monotonic reading the `clock_gettime` hook returns on this thread
    /// instead of the real one, set only while [`VirtualClock::new`] makes
    /// its origin `Instant`.
    static FIXED: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// `CLOCK_MONOTONIC` from the kernel (a raw system call: never the hook).
fn real_monotonic() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into a local.
    unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_MONOTONIC,
            &mut ts as *mut libc::timespec,
        )
    };
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

impl VirtualClock {
    pub(crate) fn new() -> VirtualClock {
        let origin_mono = real_monotonic();
        // Under `transparent`, `Instant::now()` below is the hook, which
        // answers `FIXED`: the origin instant is exactly `origin_mono`.
        // Without it, the two differ by the nanoseconds between the reads,
        // and nothing compares them.
        FIXED.with(|f| f.set(Some(origin_mono)));
        INSTALLED.fetch_add(1, Ordering::SeqCst);
        let origin = Instant::now();
        INSTALLED.fetch_sub(1, Ordering::SeqCst);
        FIXED.with(|f| f.set(None));
        VirtualClock {
            origin,
            origin_mono,
            elapsed_ns: AtomicU64::new(0),
        }
    }

    /// The simulation's current instant.
    pub(crate) fn now(&self) -> Instant {
        self.origin + Duration::from_nanos(self.elapsed_ns.load(Ordering::Relaxed))
    }

    /// The instant the simulation began.
    pub(crate) fn origin(&self) -> Instant {
        self.origin
    }

    /// Virtual time since the simulation began.
    pub(crate) fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.elapsed_ns.load(Ordering::Relaxed))
    }

    /// Moves the clock forward to `t` (never back). False, and the clock
    /// unchanged, if `t` lies beyond what it can show (`u64::MAX`
    /// nanoseconds, 584 years, after the origin): such a deadline is never
    /// reached, like one too far for an `Instant` (a wait with no timer).
    #[must_use]
    pub(crate) fn advance_to(&self, t: Instant) -> bool {
        let ns = t.saturating_duration_since(self.origin).as_nanos();
        let Ok(ns) = u64::try_from(ns) else {
            return false;
        };
        self.elapsed_ns.fetch_max(ns, Ordering::Relaxed);
        true
    }
}

/// Now, for a deadline: the simulation's virtual time on a simulated
/// carrier and its virtual threads, else `Instant::now()`.
///
/// ```
/// let deadline = weft::clock::now() + std::time::Duration::from_millis(1);
/// weft::sleep_until(deadline)?;
/// assert!(weft::clock::now() >= deadline);
/// # Ok::<(), std::io::Error>(())
/// ```
#[inline]
pub fn now() -> Instant {
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

/// What `clock_gettime(clock)` reads on the calling thread if it runs in a
/// simulation (the `transparent` hook's answer): its virtual monotonic
/// time for the monotonic clocks (`MONOTONIC`, `_RAW`, `_COARSE`,
/// `BOOTTIME`), [`SIM_REALTIME_ORIGIN`] plus the virtual time elapsed for
/// the real-time ones; `None` (the real clock) for CPU-time clocks and on
/// other threads. Async-signal-safe: thread-local and atomic reads only.
#[cfg(feature = "transparent")]
pub(crate) fn virtual_reading(clock: libc::clockid_t) -> Option<Duration> {
    let monotonic = matches!(
        clock,
        libc::CLOCK_MONOTONIC
            | libc::CLOCK_MONOTONIC_RAW
            | libc::CLOCK_MONOTONIC_COARSE
            | libc::CLOCK_BOOTTIME
    );
    let realtime = matches!(clock, libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE);
    if !monotonic && !realtime {
        return None;
    }
    if let Some(fixed) = FIXED.with(Cell::get) {
        return monotonic.then_some(fixed);
    }
    let p = VIRTUAL.with(Cell::get);
    // SAFETY: as in `virtual_now`.
    let c = unsafe { p.as_ref() }?;
    let base = if monotonic {
        c.origin_mono
    } else {
        SIM_REALTIME_ORIGIN
    };
    Some(base + c.elapsed())
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
    any_virtual() && has_virtual()
}

/// Whether this OS thread has a virtual clock installed (see
/// `virtual_now` for why it is not inlined).
#[inline(never)]
fn has_virtual() -> bool {
    !VIRTUAL.with(Cell::get).is_null()
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

/// A socket's timeout, kept in its handle as one word: nanoseconds, 0
/// meaning none (`weft::net`'s sockets and the simulated ones of
/// `sim::net`; a handle's copy made by `try_clone` starts with the same).
#[derive(Default)]
pub(crate) struct Timeout(AtomicU64);

impl Timeout {
    pub(crate) const fn none() -> Timeout {
        Timeout(AtomicU64::new(0))
    }

    /// Sets it (`None`: no timeout); `Some(ZERO)` is `InvalidInput`, as
    /// std's.
    pub(crate) fn set(&self, dur: Option<Duration>) -> std::io::Result<()> {
        let nanos = match dur {
            None => 0,
            Some(d) if d.is_zero() => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "cannot set a 0 duration timeout",
                ));
            }
            Some(d) => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        };
        self.0.store(nanos, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn get(&self) -> Option<Duration> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    pub(crate) fn copy(&self) -> Timeout {
        Timeout(AtomicU64::new(self.0.load(Ordering::Relaxed)))
    }

    /// The deadline for an operation starting now (`None`: wait forever).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            n => now().checked_add(Duration::from_nanos(n)),
        }
    }
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
