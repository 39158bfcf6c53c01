//! The runtime's monotonic clock as nanoseconds since a process epoch.
//!
//! Timers, blocker records and event rate limits store instants as `u64`
//! nanoseconds so that they fit in one atomic word; system calls with a
//! timeout take it as a `timespec` ([`timespec_ptr`]).

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
