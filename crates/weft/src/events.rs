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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// What to do about the blocking call that held a carrier, told from the
/// call itself ([`Event::cure`]): the innermost frame of the event's stack
/// that says what it waits for, or else the system call the carrier's OS
/// thread sleeps in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cure {
    /// A sleep (`std::thread::sleep`, `nanosleep`, `clock_nanosleep`): use
    /// `weft::sleep`.
    Sleep,
    /// Blocking I/O or another system call (`std::net`, `std::io`,
    /// `std::fs`, libc): the `transparent` feature, weft's own sockets and
    /// files, or `weft::blocking`.
    Transparent,
    /// An OS-level lock (a futex: `std::sync`, `parking_lot`, a condition
    /// variable, `pthread_mutex`): `weft::sync`.
    Lock,
}

impl Cure {
    /// The advice, in one sentence.
    pub fn advice(self) -> &'static str {
        match self {
            Cure::Sleep => {
                "use weft::sleep (std::thread::sleep blocks the carrier and every \
                 virtual thread bound to it; weft::sleep parks only this one)"
            }
            Cure::Transparent if transparent_off() => {
                "the `transparent` hooks are off (WEFT_TRANSPARENT=0): unset it, or use \
                 weft::net / weft::fs, or wrap the call in weft::blocking"
            }
            Cure::Transparent if cfg!(feature = "transparent") => {
                "use weft::net / weft::fs, or wrap the call in weft::blocking (the \
                 `transparent` hooks do not cover this call)"
            }
            Cure::Transparent => {
                "build weft with the `transparent` feature (blocking std::net, std::io \
                 and libc calls then park the virtual thread), or use weft::net / \
                 weft::fs, or wrap the call in weft::blocking"
            }
            Cure::Lock => {
                "use weft::sync locks and condition variables (a std::sync or parking_lot \
                 lock blocks the carrier, and one held across a weft blocking call can \
                 deadlock it)"
            }
        }
    }
}

/// Set by the `transparent` hooks when they find themselves turned off
/// (`WEFT_TRANSPARENT=0`): events is a sink that names nothing above it,
/// so the hooks tell it rather than it asking them.
static TRANSPARENT_OFF: AtomicBool = AtomicBool::new(false);

/// Records that the `transparent` hooks are built in and turned off at
/// run time: a cure that names them says so.
#[cfg_attr(not(feature = "transparent"), allow(dead_code))]
pub(crate) fn note_transparent_off() {
    TRANSPARENT_OFF.store(true, Ordering::Relaxed);
}

/// Built with the `transparent` hooks, and turned off at run time.
fn transparent_off() -> bool {
    TRANSPARENT_OFF.load(Ordering::Relaxed)
}

impl fmt::Display for Cure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.advice())
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
    /// How long the carrier was held. A stall or blocked-with-waiters
    /// event is recorded while the hold goes on, with the hold so far
    /// ([`Event::ongoing`]); when the thread gives its carrier back the
    /// monitor sets this to the whole hold (see [`Event::ongoing`]).
    pub duration: Duration,
    /// The hold this event reports had not ended when it was recorded and
    /// has not been seen to end since: [`Event::duration`] is the hold so
    /// far. The monitor sees a hold end at its next look at the carrier
    /// (every 10 ms at most) and then writes the whole hold into the event
    /// in [`recent`], from the last look that saw the carrier do something
    /// else to the first that saw it move on: never less than the hold,
    /// at most two looks more. Always false for pinned events (recorded
    /// when the pinned wait ends) and failed spawns.
    pub ongoing: bool,
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
    /// What the thread said it was doing ([`crate::set_activity`]; weft-http
    /// sets the request's method and path, e.g. `GET /orders/42`), read
    /// when the event was recorded.
    pub activity: Option<String>,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "weft: {} — virtual thread #{} '{}' {} its carrier for {:.1} ms",
            self.kind.name(),
            self.thread_id,
            self.thread_name.as_deref().unwrap_or(""),
            if self.ongoing { "has held" } else { "held" },
            self.duration.as_secs_f64() * 1e3
        )?;
        if let Some(d) = &self.detail {
            write!(f, " ({d})")?;
        }
        if let Some(site) = &self.call_site {
            write!(f, "; called from {site}")?;
        }
        if let Some(activity) = &self.activity {
            write!(f, "; activity: {activity}")?;
        }
        if let Some(cure) = self.cure() {
            write!(f, "; cure: {cure}")?;
        }
        Ok(())
    }
}

impl Event {
    /// What to do about the blocking call, for a thread that held its
    /// carrier blocked in the kernel ([`EventKind::StallBlocked`],
    /// [`EventKind::BlockedWithWaiters`]); `None` for other kinds, a
    /// pinned wait, or a call Weft cannot tell.
    ///
    /// Read from the stack (the frames between the blocking call and the
    /// first frame outside Weft and std), or else from the system call
    /// named in [`Event::detail`].
    pub fn cure(&self) -> Option<Cure> {
        if !matches!(
            self.kind,
            EventKind::StallBlocked | EventKind::BlockedWithWaiters
        ) {
            return None;
        }
        if let Some(stack) = &self.stack {
            let frames = crate::symbols::parse_stack(stack);
            // Up to the first frame outside Weft and std, that one
            // included (a third-party crate's lock is its own code).
            let end = crate::symbols::first_user_frame(&frames).map_or(frames.len(), |i| i + 1);
            if let Some(c) = frames[..end].iter().find_map(cure_of_frame) {
                return Some(c);
            }
        }
        let detail = self.detail.as_deref()?;
        if detail.contains("a pinned wait") {
            None
        } else if detail.contains("nanosleep") {
            Some(Cure::Sleep)
        } else if detail.contains("futex") {
            Some(Cure::Lock)
        } else if detail.contains(", in ") || detail.contains("is blocked in ") {
            // Some other system call.
            (!detail.contains("blocked in the kernel")).then_some(Cure::Transparent)
        } else {
            None
        }
    }
}

/// What one frame of a blocked stack waits for, if it says.
fn cure_of_frame(f: &crate::symbols::Frame) -> Option<Cure> {
    let name = f.function.as_str();
    let file = f.file.as_deref().unwrap_or("");
    let std_file = file.contains("/library/std/src/") || file.starts_with("/rustc/");
    // `__GI___libc_read`, `__libc_recv`, `__nanosleep` → `read`, `recv`, …
    let mut call = crate::symbols::last_segment(name);
    loop {
        let next = call
            .trim_start_matches('_')
            .trim_start_matches("GI_")
            .trim_start_matches('_')
            .trim_start_matches("libc_");
        if next == call {
            break;
        }
        call = next;
    }
    if name.contains("nanosleep")
        || (call.starts_with("sleep") && (std_file || name.starts_with("std::")))
    {
        return Some(Cure::Sleep);
    }
    const LOCKS: [&str; 9] = [
        "futex",
        "pthread_mutex",
        "pthread_cond",
        "pthread_rwlock",
        "parking_lot",
        "std::sync::",
        "sys::sync::",
        "lock_contended",
        "sem_wait",
    ];
    if LOCKS.iter().any(|l| name.contains(l))
        || file.contains("/std/src/sync/")
        || file.contains("/std/src/sys/sync/")
        || file.contains("/parking_lot")
    {
        return Some(Cure::Lock);
    }
    const CALLS: [&str; 24] = [
        "read",
        "readv",
        "pread64",
        "recv",
        "recvfrom",
        "recvmsg",
        "write",
        "writev",
        "pwrite64",
        "send",
        "sendto",
        "sendmsg",
        "accept",
        "accept4",
        "connect",
        "poll",
        "ppoll",
        "select",
        "pselect6",
        "epoll_wait",
        "epoll_pwait",
        "wait4",
        "waitpid",
        "getaddrinfo",
    ];
    const STD_IO: [&str; 5] = [
        "std::net::",
        "std::io::",
        "std::fs::",
        "std::process::",
        "sys::net",
    ];
    if CALLS.contains(&call)
        || STD_IO.iter().any(|m| name.contains(m))
        || [
            "/std/src/net/",
            "/std/src/io/",
            "/std/src/fs",
            "/std/src/process",
            "/sys/net/",
        ]
        .iter()
        .any(|d| file.contains(d))
    {
        return Some(Cure::Transparent);
    }
    None
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
    /// Stalls seen to end (their whole hold is in [`duration_histogram`]).
    pub stalls_ended: u64,
    /// Sum of the whole holds of the stalls seen to end, in microseconds.
    pub stall_hold_us: u64,
    /// Stalls inside Weft's own diagnostics (a dump symbolizing on a
    /// carrier, say): not recorded as events, only counted here.
    pub own_stalls: u64,
    /// Stall and blocked-with-waiters reports the monitor dropped because
    /// the thread that writes them up was that far behind
    /// (`WEFT_REPORT_QUEUE` reports, 4,096 by default): a `tracing`
    /// subscriber or stderr blocked for good. (The end of a hold is never
    /// dropped.)
    pub reports_dropped: u64,
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
static OWN_STALLS: AtomicU64 = AtomicU64::new(0);
static REPORTS_DROPPED: AtomicU64 = AtomicU64::new(0);
static STALLS_ENDED: AtomicU64 = AtomicU64::new(0);
static STALL_HOLD_US: AtomicU64 = AtomicU64::new(0);

/// How many buckets the hold histogram has.
pub const HISTOGRAM_BUCKETS: usize = 13;

/// Buckets (upper bounds, ms) of the hold histogram: from the default
/// stall threshold (20 ms) to a minute, so that a stall of seconds lands in
/// a bucket of its own size.
pub const HISTOGRAM_BOUNDS_MS: [u64; HISTOGRAM_BUCKETS] = [
    20,
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    30_000,
    60_000,
    300_000,
    u64::MAX,
];
static HISTOGRAM: [AtomicU64; HISTOGRAM_BUCKETS] = [const { AtomicU64::new(0) }; HISTOGRAM_BUCKETS];

/// How long carriers were held, one count per bucket of
/// [`HISTOGRAM_BOUNDS_MS`] (non-cumulative): each pinned wait when it
/// ends, each stall when the monitor sees it end (its whole hold, not the
/// part seen when it was reported).
pub fn duration_histogram() -> [u64; HISTOGRAM_BUCKETS] {
    std::array::from_fn(|i| HISTOGRAM[i].load(Ordering::Relaxed))
}

/// The bucket of a hold: the first whose bound it does not pass
/// (Prometheus' `le`).
pub fn histogram_bucket(d: Duration) -> usize {
    HISTOGRAM_BOUNDS_MS
        .iter()
        .position(|&hi| d <= Duration::from_millis(hi))
        .unwrap_or(HISTOGRAM_BUCKETS - 1)
}

fn observe_hold(d: Duration) {
    HISTOGRAM[histogram_bucket(d)].fetch_add(1, Ordering::Relaxed);
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
        own_stalls: OWN_STALLS.load(Ordering::Relaxed),
        reports_dropped: REPORTS_DROPPED.load(Ordering::Relaxed),
        stalls_ended: STALLS_ENDED.load(Ordering::Relaxed),
        stall_hold_us: STALL_HOLD_US.load(Ordering::Relaxed),
    }
}

/// The most recent events, in the order they were recorded (at most
/// [`RING_CAPACITY`]). A stall is recorded when it has been written up,
/// off the monitor, so a pinned event with a later [`Event::at`] can come
/// before it.
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

/// What a stall event saw of a hold of a carrier, kept for the
/// blocked-with-waiters event of the same hold (which the monitor raises
/// without sampling again), and until the hold ends.
struct Hold {
    thread_id: u64,
    /// When the event was recorded.
    at: SystemTime,
    /// When the hold began, as far as the monitor knows (`at` less the
    /// hold so far).
    began: SystemTime,
    stack: Option<String>,
    call_site: Option<String>,
    /// The stall was Weft's own diagnostics at work (not recorded).
    own: bool,
    /// The monitor has not seen the hold end yet.
    open: bool,
}

/// The last stalls seen, newest last (a few: only the hold a
/// blocked-with-waiters event belongs to is looked up).
static HOLDS: Mutex<VecDeque<Hold>> = Mutex::new(VecDeque::new());
const HOLDS_KEPT: usize = 64;

/// Whether a stack (as an event keeps it) runs inside Weft's own
/// diagnostics: a dump, a stack sample, symbol lookup.
fn inside_own_diagnostics(stack: Option<&str>) -> bool {
    stack.is_some_and(|s| {
        crate::symbols::parse_stack(s)
            .iter()
            .any(crate::symbols::is_own_diagnostics)
    })
}

/// Records an event everywhere it should go.
///
/// Two kinds are completed or held back here, where every source of
/// events passes:
/// - a stall (or blocked-with-waiters) whose stack runs inside Weft's own
///   diagnostics — a dump symbolizing on a carrier, say — is Weft looking,
///   not the program blocking: it is not recorded (a debug-level trace
///   says it happened), and never names Weft's frames as the culprit;
/// - a blocked-with-waiters event that comes without a stack takes the
///   stack and call site of the stall of the same hold, sampled while the
///   carrier was blocked.
pub(crate) fn record(mut ev: Event) {
    match ev.kind {
        EventKind::StallBlocked | EventKind::StallCpu => {
            let own = inside_own_diagnostics(ev.stack.as_deref());
            let mut holds = HOLDS.lock().unpoison();
            if holds.len() == HOLDS_KEPT {
                holds.pop_front();
            }
            holds.push_back(Hold {
                thread_id: ev.thread_id,
                at: ev.at,
                began: ev.at.checked_sub(ev.duration).unwrap_or(ev.at),
                stack: ev.stack.clone(),
                call_site: ev.call_site.clone(),
                own,
                open: ev.ongoing,
            });
            drop(holds);
            if own {
                OWN_STALLS.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: "weft::events", "{ev} (Weft's own diagnostics: not recorded)");
                return;
            }
        }
        EventKind::BlockedWithWaiters if ev.stack.is_none() => {
            // The stall of this hold: same thread, recorded since the hold
            // began.
            let began = ev.at.checked_sub(ev.duration).unwrap_or(ev.at);
            let holds = HOLDS.lock().unpoison();
            if let Some(h) = holds
                .iter()
                .rev()
                .find(|h| h.thread_id == ev.thread_id && h.at >= began && h.at <= ev.at)
            {
                if h.own {
                    return;
                }
                ev.stack = h.stack.clone();
                ev.call_site = h.call_site.clone();
            }
        }
        EventKind::BlockedWithWaiters if inside_own_diagnostics(ev.stack.as_deref()) => return,
        _ => {}
    }
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
    // A stall goes into the histogram when it ends (`hold_ended`), with
    // its whole hold; one that was over when recorded goes in now.
    if !ev.ongoing
        && matches!(
            ev.kind,
            EventKind::Pinned | EventKind::StallBlocked | EventKind::StallCpu
        )
    {
        observe_hold(ev.duration);
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

/// The monitor saw thread `thread_id` give back the carrier it held for
/// `held` (the whole hold): the events of that hold that are still in
/// [`recent`] (its stall, its blocked-with-waiters event) get the whole
/// hold as their duration, the stall goes into [`duration_histogram`],
/// and a line with the total is logged (`tracing`, and stderr under
/// `WEFT_TRACE_PINNED`).
///
/// The events of the hold are the ongoing ones of this thread recorded
/// since the hold began (`held` before `now`, when the monitor saw it
/// end): a thread holds at most one carrier at a time.
pub(crate) fn hold_ended(thread_id: u64, held: Duration, now: SystemTime) {
    let began = now.checked_sub(held).unwrap_or(now);
    let mut stall = None;
    {
        let mut holds = HOLDS.lock().unpoison();
        for h in holds
            .iter_mut()
            .filter(|h| h.open && h.thread_id == thread_id && h.at >= began)
        {
            h.open = false;
            if !h.own {
                stall = Some(h.began);
            }
        }
    }
    if stall.is_some() {
        STALLS_ENDED.fetch_add(1, Ordering::Relaxed);
        STALL_HOLD_US.fetch_add(held.as_micros() as u64, Ordering::Relaxed);
        observe_hold(held);
    }
    let mut ended = None;
    for ev in RING.lock().unpoison().iter_mut().rev() {
        if ev.ongoing && ev.thread_id == thread_id && ev.at >= began {
            ev.ongoing = false;
            ev.duration = ev.duration.max(held);
            if ended.is_none() || ev.kind != EventKind::BlockedWithWaiters {
                ended = Some(ev.clone());
            }
        }
    }
    let Some(ev) = ended else { return };
    if LIMITERS[limiter_index(ev.kind, ev.call_site.as_deref())]
        .admit(crate::clock::ns_of(std::time::Instant::now()))
        .is_some()
    {
        tracing::warn!(
            target: "weft::events",
            kind = ev.kind.name(),
            thread_id = ev.thread_id,
            duration_ms = ev.duration.as_secs_f64() * 1e3,
            "{ev} (ended)"
        );
    }
    if trace_mode() != Trace::Off {
        eprintln!("{ev} (ended)");
    }
}

/// Counts a report the monitor dropped ([`Counters::reports_dropped`]).
pub(crate) fn report_dropped() {
    REPORTS_DROPPED.fetch_add(1, Ordering::Relaxed);
}

/// How long thread `thread_id` has held its carrier, if it holds one in a
/// stall the monitor reported and has not seen end (for the live page's
/// carriers table).
pub(crate) fn holding(thread_id: u64) -> Option<Duration> {
    let holds = HOLDS.lock().unpoison();
    let h = holds
        .iter()
        .rev()
        .find(|h| h.open && h.thread_id == thread_id)?;
    Some(
        SystemTime::now()
            .duration_since(h.began)
            .unwrap_or_default(),
    )
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
    use super::*;
    use crate::symbols::{Frame, format_stack};

    fn fr(function: &str, file: Option<&str>) -> Frame {
        Frame {
            function: function.into(),
            file: file.map(Into::into),
            line: file.map(|_| 17),
        }
    }

    fn event(kind: EventKind, frames: Option<&[Frame]>, detail: &str) -> Event {
        Event {
            kind,
            thread_id: 7,
            thread_name: None,
            duration: Duration::from_millis(30),
            at: SystemTime::now(),
            stack: frames.map(format_stack),
            call_site: frames.and_then(|f| {
                crate::symbols::first_user_frame(f).map(|i| crate::symbols::describe(&f[i]))
            }),
            detail: Some(detail.into()),
            activity: Some("GET /exp/std-sleep".into()),
            ongoing: true,
        }
    }

    const STD: &str = "/rustc/x/library/std/src";

    #[test]
    fn the_cure_follows_the_blocking_call() {
        let user = fr("app::handler::{{closure}}", Some("src/experiments.rs"));
        let sleep = [
            fr(
                "__GI___clock_nanosleep",
                Some("./sysdeps/clock_nanosleep.c"),
            ),
            fr("sleep", Some(&format!("{STD}/thread/functions.rs"))),
            user.clone(),
        ];
        let lock = [
            fr("syscall", None),
            fr(
                "std::sys::sync::mutex::futex::Mutex::lock_contended",
                Some(&format!("{STD}/sys/sync/mutex/futex.rs")),
            ),
            user.clone(),
        ];
        let read = [
            fr("__libc_recv", None),
            fr(
                "<std::net::tcp::TcpStream as std::io::Read>::read",
                Some(&format!("{STD}/net/tcp.rs")),
            ),
            user.clone(),
        ];
        // A sleep further out than the call site does not count: the
        // frames between the blocking call and the user's code decide.
        let spin_lock_then_sleep = [
            fr("syscall", None),
            fr("std::sync::poison::mutex::Mutex<T>::lock", None),
            user.clone(),
            fr("std::thread::sleep", None),
        ];
        for (frames, cure) in [
            (&sleep[..], Cure::Sleep),
            (&lock[..], Cure::Lock),
            (&read[..], Cure::Transparent),
            (&spin_lock_then_sleep[..], Cure::Lock),
        ] {
            for kind in [EventKind::StallBlocked, EventKind::BlockedWithWaiters] {
                let ev = event(kind, Some(frames), "carrier 0, tid 1");
                assert_eq!(ev.cure(), Some(cure), "{frames:?}");
                let text = ev.to_string();
                assert!(
                    text.contains(&format!("; cure: {}", cure.advice())),
                    "{text}"
                );
                assert!(
                    text.contains(
                        "called from app::handler::{{closure}} at src/experiments.rs:17; \
                         activity: GET /exp/std-sleep; cure: "
                    ),
                    "{text}"
                );
            }
        }
        // A third-party lock is where the call site points; it still
        // names the cure.
        let parking_lot = [
            fr("syscall", None),
            fr(
                "lock_slow",
                Some("/home/u/.cargo/registry/src/index/parking_lot-0.12.3/src/raw_mutex.rs"),
            ),
            user.clone(),
        ];
        let ev = event(
            EventKind::StallBlocked,
            Some(&parking_lot),
            "carrier 0, tid 1",
        );
        assert_eq!(ev.cure(), Some(Cure::Lock));
        assert!(Cure::Sleep.advice().contains("weft::sleep"));
        assert!(Cure::Lock.advice().contains("weft::sync"));
        assert!(Cure::Transparent.advice().contains("weft::blocking"));
        // CPU stalls and pinned events get none.
        assert_eq!(event(EventKind::StallCpu, Some(&sleep), "").cure(), None);
        assert_eq!(event(EventKind::Pinned, Some(&lock), "").cure(), None);
    }

    #[test]
    fn without_a_stack_the_system_call_decides() {
        let cure = |detail: &str| event(EventKind::BlockedWithWaiters, None, detail).cure();
        assert_eq!(
            cure("carrier 0 (tid 9) is blocked in clock_nanosleep (std::thread::sleep) while …"),
            Some(Cure::Sleep)
        );
        assert_eq!(
            cure("carrier 0 (tid 9) is blocked in futex (a std::sync/parking_lot lock, …) while …"),
            Some(Cure::Lock)
        );
        assert_eq!(
            cure("carrier 0 (tid 9) is blocked in recvfrom while …"),
            Some(Cure::Transparent)
        );
        assert_eq!(
            cure("carrier 0 (tid 9) is blocked in a pinned wait (weft::pinned) while …"),
            None
        );
        assert_eq!(
            cure("carrier 0 (tid 9) is blocked in the kernel while …"),
            None
        );
        let stall = event(EventKind::StallBlocked, None, "carrier 1, tid 4, in read");
        assert_eq!(stall.cure(), Some(Cure::Transparent));
    }

    #[test]
    fn weft_s_own_diagnostics_are_not_recorded_and_a_hold_s_stack_is_shared() {
        // A stall inside a dump's symbol lookup: not an event.
        let own = [
            fr("gimli::read::abbrev::Abbreviations::insert", None),
            fr(
                "frames",
                Some("/home/u/.cargo/registry/src/index/weft-0.1.0/src/symbols.rs"),
            ),
            fr("weft::dump::dump", None),
            fr("app::debug_page", Some("src/debug.rs")),
        ];
        let mut ev = event(EventKind::StallBlocked, Some(&own), "carrier 0, tid 1");
        ev.thread_id = 1_000_001;
        record(ev.clone());
        // Its blocked-with-waiters twin goes the same way.
        let mut bww = event(
            EventKind::BlockedWithWaiters,
            None,
            "carrier 0 (tid 1) is …",
        );
        bww.thread_id = 1_000_001;
        record(bww);
        assert!(recent().iter().all(|e| e.thread_id != 1_000_001));
        assert!(counters().own_stalls >= 1);

        // A user's stall is recorded, and the blocked-with-waiters event of
        // the same hold gets its stack and call site.
        let user = [
            fr("clock_nanosleep", None),
            fr("app::handler", Some("src/experiments.rs")),
        ];
        let mut ev = event(EventKind::StallBlocked, Some(&user), "carrier 0, tid 1");
        ev.thread_id = 1_000_002;
        record(ev);
        let mut bww = event(
            EventKind::BlockedWithWaiters,
            None,
            "carrier 0 (tid 1) is …",
        );
        bww.thread_id = 1_000_002;
        record(bww);
        let got: Vec<Event> = recent()
            .into_iter()
            .filter(|e| e.thread_id == 1_000_002)
            .collect();
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[1].call_site.as_deref(),
            Some("app::handler at src/experiments.rs:17")
        );
        assert_eq!(got[1].cure(), Some(Cure::Sleep));
    }

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
