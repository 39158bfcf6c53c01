//! At most one `tracing` warning per kind and call site per second.

use super::event::EventKind;
use std::sync::atomic::{AtomicU64, Ordering};

/// Rate limiters, one per (kind, call site) up to hash collisions: two
/// sites that share a slot share its budget.
pub(super) static LIMITERS: [Limiter; LIMITER_SLOTS] =
    [const { Limiter::new(RATE_WINDOW_NS) }; LIMITER_SLOTS];

pub(super) const LIMITER_SLOTS: usize = 64;

pub(super) fn limiter_index(kind: EventKind, site: Option<&str>) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (kind as usize).hash(&mut h);
    site.hash(&mut h);
    (h.finish() % LIMITER_SLOTS as u64) as usize
}

/// How often a kind of event may be logged through `tracing`.
pub(super) const RATE_WINDOW_NS: u64 = 1_000_000_000;

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
