//! The runtime's monotonic clock as nanoseconds since a process epoch.
//!
//! Timers, blocker records and event rate limits store instants as `u64`
//! nanoseconds so that they fit in one atomic word.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

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
