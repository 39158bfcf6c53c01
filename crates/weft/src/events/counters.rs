//! Event totals since the process started, and the histogram of holds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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

pub(super) static PINNED: AtomicU64 = AtomicU64::new(0);

pub(super) static STALLS: AtomicU64 = AtomicU64::new(0);

pub(super) static SPAWN_FAILURES: AtomicU64 = AtomicU64::new(0);

pub(super) static BLOCKED_WITH_WAITERS: AtomicU64 = AtomicU64::new(0);

pub(super) static PINNED_US: AtomicU64 = AtomicU64::new(0);

pub(super) static STALL_US: AtomicU64 = AtomicU64::new(0);

pub(super) static OWN_STALLS: AtomicU64 = AtomicU64::new(0);

pub(super) static REPORTS_DROPPED: AtomicU64 = AtomicU64::new(0);

pub(super) static STALLS_ENDED: AtomicU64 = AtomicU64::new(0);

pub(super) static STALL_HOLD_US: AtomicU64 = AtomicU64::new(0);

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

pub(super) static HISTOGRAM: [AtomicU64; HISTOGRAM_BUCKETS] =
    [const { AtomicU64::new(0) }; HISTOGRAM_BUCKETS];

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

pub(super) fn observe_hold(d: Duration) {
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

/// Counts a report the monitor dropped ([`Counters::reports_dropped`]).
pub(crate) fn report_dropped() {
    REPORTS_DROPPED.fetch_add(1, Ordering::Relaxed);
}
