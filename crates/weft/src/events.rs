//! Runtime events: pinned carriers, stalls, failed spawns — as `tracing`
//! events, optionally printed to stderr (`WEFT_TRACE_PINNED=short|full`, in
//! the spirit of `-Djdk.tracePinnedThreads`), and kept in a bounded ring
//! with counters for programs and thread dumps to read.
//!
//! ```
//! let before = weft::events::counters();
//! weft::spawn(|| weft::pinned(|| weft::sleep(std::time::Duration::from_millis(30)).unwrap()))
//!     .join()
//!     .unwrap();
//! let after = weft::events::counters();
//! assert!(after.pinned > before.pinned);
//! assert!(weft::events::recent().iter().any(|e| e.kind == weft::events::EventKind::Pinned));
//! ```

use crate::unpoison::Unpoison;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// A virtual thread blocked inside [`crate::pinned`] and held its
    /// carrier (Java's `VirtualThreadPinned`).
    Pinned,
    /// A virtual thread held its carrier past the stall threshold without
    /// yielding, blocked in the kernel (a syscall, a `std::sync` lock, FFI).
    StallBlocked,
    /// Same, but burning CPU.
    StallCpu,
    /// A carrier held past the stall threshold in the kernel (or in a
    /// pinned wait) while virtual threads bound to it were runnable: they
    /// can run nowhere else, so if the blocked thread waits for something
    /// one of them must do — an OS-level lock one of them holds across a
    /// weft blocking call — this is the pinning deadlock. The detail names
    /// the carrier, the call it is blocked in and the waiting threads.
    BlockedWithWaiters,
    /// `Builder::spawn` failed (out of memory or address space).
    SpawnFailed,
}

impl EventKind {
    fn name(self) -> &'static str {
        match self {
            EventKind::Pinned => "pinned",
            EventKind::StallBlocked => "stall (blocked)",
            EventKind::StallCpu => "stall (cpu)",
            EventKind::BlockedWithWaiters => "blocked with waiters (possible pinning deadlock)",
            EventKind::SpawnFailed => "spawn failed",
        }
    }
}

/// One recorded event.
#[derive(Clone, Debug)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// Id of the virtual thread involved (0 if none).
    pub thread_id: u64,
    /// Its name, if it has one.
    pub thread_name: Option<String>,
    /// How long the carrier was held (for stalls: as observed so far).
    pub duration: Duration,
    /// Wall-clock time of the event.
    pub at: SystemTime,
    /// The thread's stack where one could be had, innermost frame first,
    /// the first frame outside Weft and std marked: pinned events capture
    /// it at the blocking point, stalls sample the carrier (see
    /// `WEFT_SAMPLE_STACKS` in the crate docs).
    pub stack: Option<String>,
    /// The first frame of [`Event::stack`] outside Weft and std, as
    /// `function at file:line`: the user code that blocked.
    pub call_site: Option<String>,
    /// Extra detail (e.g. the error of a failed spawn).
    pub detail: Option<String>,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "weft: {} — virtual thread #{} '{}' held its carrier for {:.1} ms",
            self.kind.name(),
            self.thread_id,
            self.thread_name.as_deref().unwrap_or(""),
            self.duration.as_secs_f64() * 1e3
        )?;
        if let Some(d) = &self.detail {
            write!(f, " ({d})")?;
        }
        if let Some(site) = &self.call_site {
            write!(f, "; called from {site}")?;
        }
        Ok(())
    }
}

/// Event totals since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Pinned events.
    pub pinned: u64,
    /// Stalls (blocked and CPU).
    pub stalls: u64,
    /// Failed spawns.
    pub spawn_failures: u64,
    /// Blocked-with-waiters events (possible pinning deadlocks).
    pub blocked_with_waiters: u64,
    /// Sum of pinned durations, in microseconds.
    pub pinned_us: u64,
    /// Sum of stall durations (as first observed), in microseconds.
    pub stall_us: u64,
}

/// How many events the ring keeps.
pub const RING_CAPACITY: usize = 1024;

static RING: Mutex<VecDeque<Event>> = Mutex::new(VecDeque::new());
static PINNED: AtomicU64 = AtomicU64::new(0);
static STALLS: AtomicU64 = AtomicU64::new(0);
static SPAWN_FAILURES: AtomicU64 = AtomicU64::new(0);
static BLOCKED_WITH_WAITERS: AtomicU64 = AtomicU64::new(0);
static PINNED_US: AtomicU64 = AtomicU64::new(0);
static STALL_US: AtomicU64 = AtomicU64::new(0);

/// Buckets (upper bounds, ms) of the pinned/stall duration histogram.
pub const HISTOGRAM_BOUNDS_MS: [u64; 8] = [20, 50, 100, 250, 500, 1000, 5000, u64::MAX];
static HISTOGRAM: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

/// Counts of pinned and stall events by duration, one per bucket of
/// [`HISTOGRAM_BOUNDS_MS`] (non-cumulative).
pub fn duration_histogram() -> [u64; 8] {
    std::array::from_fn(|i| HISTOGRAM[i].load(Ordering::Relaxed))
}

/// Current totals.
pub fn counters() -> Counters {
    Counters {
        pinned: PINNED.load(Ordering::Relaxed),
        stalls: STALLS.load(Ordering::Relaxed),
        spawn_failures: SPAWN_FAILURES.load(Ordering::Relaxed),
        blocked_with_waiters: BLOCKED_WITH_WAITERS.load(Ordering::Relaxed),
        pinned_us: PINNED_US.load(Ordering::Relaxed),
        stall_us: STALL_US.load(Ordering::Relaxed),
    }
}

/// The most recent events, oldest first (at most [`RING_CAPACITY`]).
pub fn recent() -> Vec<Event> {
    RING.lock().unpoison().iter().cloned().collect()
}

/// `WEFT_TRACE_PINNED`: print events to stderr.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Trace {
    Off,
    Short,
    Full,
}

fn trace_mode() -> Trace {
    static MODE: OnceLock<Trace> = OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("WEFT_TRACE_PINNED").as_deref() {
        Ok("short") => Trace::Short,
        Ok("full") | Ok("1") | Ok("true") => Trace::Full,
        Ok("") | Ok("0") | Ok("off") | Err(_) => Trace::Off,
        Ok(other) => {
            eprintln!("weft: WEFT_TRACE_PINNED={other:?} is not one of short|full; tracing off");
            Trace::Off
        }
    })
}

/// Records an event everywhere it should go.
pub(crate) fn record(ev: Event) {
    let us = ev.duration.as_micros() as u64;
    match ev.kind {
        EventKind::Pinned => {
            PINNED.fetch_add(1, Ordering::Relaxed);
            PINNED_US.fetch_add(us, Ordering::Relaxed);
        }
        EventKind::StallBlocked | EventKind::StallCpu => {
            STALLS.fetch_add(1, Ordering::Relaxed);
            STALL_US.fetch_add(us, Ordering::Relaxed);
        }
        EventKind::SpawnFailed => {
            SPAWN_FAILURES.fetch_add(1, Ordering::Relaxed);
        }
        EventKind::BlockedWithWaiters => {
            BLOCKED_WITH_WAITERS.fetch_add(1, Ordering::Relaxed);
        }
    }
    if matches!(
        ev.kind,
        EventKind::Pinned | EventKind::StallBlocked | EventKind::StallCpu
    ) {
        let ms = ev.duration.as_millis() as u64;
        let b = HISTOGRAM_BOUNDS_MS
            .iter()
            .position(|&hi| ms < hi)
            .unwrap_or(HISTOGRAM_BOUNDS_MS.len() - 1);
        HISTOGRAM[b].fetch_add(1, Ordering::Relaxed);
    }
    // Through `tracing`, at most one warning per kind and call site per
    // second: a stalled service can record thousands of stalls a second,
    // and a log that repeats one line that often hides everything else.
    // The first warning after a quiet spell says how many were held back.
    if let Some(suppressed) = LIMITERS[limiter_index(ev.kind, ev.call_site.as_deref())]
        .admit(crate::clock::ns_of(std::time::Instant::now()))
    {
        tracing::warn!(
            target: "weft::events",
            kind = ev.kind.name(),
            thread_id = ev.thread_id,
            thread_name = ev.thread_name.as_deref().unwrap_or(""),
            duration_ms = ev.duration.as_secs_f64() * 1e3,
            suppressed,
            "{}{}",
            ev,
            if suppressed > 0 {
                format!(" ({suppressed} more like it in the last second not logged)")
            } else {
                String::new()
            }
        );
    }
    match trace_mode() {
        Trace::Off => {}
        Trace::Short => {
            let top = ev.stack.as_deref().map(short_stack).unwrap_or_default();
            eprintln!("{ev}\n{top}");
        }
        Trace::Full => match &ev.stack {
            Some(st) => eprintln!("{ev}\n{st}"),
            None => eprintln!(
                "{ev}\n    <no stack: the carrier could not be sampled (moved on, or WEFT_SAMPLE_STACKS=0)>"
            ),
        },
    }
    let mut ring = RING.lock().unpoison();
    if ring.len() == RING_CAPACITY {
        ring.pop_front();
    }
    ring.push_back(ev);
}

/// Rate limiters, one per (kind, call site) up to hash collisions: two
/// sites that share a slot share its budget.
static LIMITERS: [Limiter; LIMITER_SLOTS] = [const { Limiter::new(RATE_WINDOW_NS) }; LIMITER_SLOTS];
const LIMITER_SLOTS: usize = 64;

fn limiter_index(kind: EventKind, site: Option<&str>) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (kind as usize).hash(&mut h);
    site.hash(&mut h);
    (h.finish() % LIMITER_SLOTS as u64) as usize
}

/// How often a kind of event may be logged through `tracing`.
const RATE_WINDOW_NS: u64 = 1_000_000_000;

/// Lets one event through per window and counts the ones it holds back.
pub(crate) struct Limiter {
    window_ns: u64,
    /// When the last admitted event was (ns on the scheduler's clock),
    /// `u64::MAX` before the first.
    last: AtomicU64,
    held_back: AtomicU64,
}

impl Limiter {
    pub(crate) const fn new(window_ns: u64) -> Limiter {
        Limiter {
            window_ns,
            last: AtomicU64::new(u64::MAX),
            held_back: AtomicU64::new(0),
        }
    }

    /// `Some(n)`: log this one, `n` were held back since the last one;
    /// `None`: hold it back.
    pub(crate) fn admit(&self, now_ns: u64) -> Option<u64> {
        let last = self.last.load(Ordering::Relaxed);
        let due = last == u64::MAX || now_ns.saturating_sub(last) >= self.window_ns;
        if due
            && self
                .last
                .compare_exchange(last, now_ns, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.held_back.swap(0, Ordering::Relaxed));
        }
        self.held_back.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// The frames of a backtrace that are not weft's or std's own plumbing.
fn short_stack(full: &str) -> String {
    full.lines()
        .filter(|l| {
            let t = l.trim_start();
            !(t.contains("std::")
                || t.contains("core::")
                || t.contains("weft::")
                || t.contains("corosensei"))
        })
        .take(16)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether stacks should be captured for pinned events. Capture costs a
/// few microseconds (symbols are resolved only when printed), paid only
/// when a pinned section actually blocks.
pub(crate) fn capture_stacks() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::Limiter;

    #[test]
    fn one_per_window_and_a_count_of_the_rest() {
        let l = Limiter::new(1_000);
        assert_eq!(l.admit(5), Some(0));
        for t in 6..1_005 {
            assert_eq!(l.admit(t), None, "at {t}");
        }
        assert_eq!(l.admit(1_005), Some(999));
        assert_eq!(l.admit(1_006), None);
        assert_eq!(l.admit(5_000), Some(1));
        assert_eq!(l.admit(9_000), Some(0));
    }
}
