//! Timers: one min-heap per carrier.
//!
//! A timed park pushes an entry onto the heap of the carrier it suspended
//! on, *after* the switch (the suspend protocol). The carrier pops due
//! entries whenever it looks for work and before it sleeps, and puts the
//! woken threads on its own run queue: expired sleepers never run on a timer
//! thread, and an idle carrier sleeps exactly until its next deadline.
//!
//! Entries are not removed when a timed park ends early: the thread bumps
//! its `timer_seq`, and a due entry whose sequence no longer matches is
//! dropped without waking anyone. So that stale entries cannot pile up —
//! a keep-alive server parks with a 60 s read timeout per request, and at
//! 50,000 requests/s that would be millions of entries, each holding its
//! thread alive — a push that grows the heap to twice its size at the last
//! scan (and at least [`SCAN_MIN`]) counts the stale entries and, when they
//! are half or more, drops them all ([`compact`]). A scan of `n` entries
//! happens only after `n` pushes, so the cost stays O(1) per push, and the
//! heap holds at most about twice the live timers plus `SCAN_MIN`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Instant;

use crate::thread::Inner;

/// One pending wake-up.
pub(crate) struct TimerEntry {
    pub(crate) deadline: Instant,
    /// The thread's `timer_seq` when it parked.
    pub(crate) seq: u64,
    /// Held weakly: a thread owns its runtime, and a strong entry would keep
    /// a private runtime whose threads have all ended alive until the last
    /// deadline passed. A parked thread is kept alive by its park (the
    /// count its carrier leaks), not by its timer.
    pub(crate) task: std::sync::Weak<Inner>,
}

impl PartialEq for TimerEntry {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline
    }
}
impl Eq for TimerEntry {}
impl PartialOrd for TimerEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for TimerEntry {
    /// Reversed, so `BinaryHeap` (a max-heap) pops the earliest deadline.
    fn cmp(&self, other: &Self) -> Ordering {
        other.deadline.cmp(&self.deadline)
    }
}

/// Heap size below which stale entries are left for their deadline.
pub(crate) const SCAN_MIN: usize = 1024;

impl TimerEntry {
    /// Whether the park this entry would end has already ended.
    fn is_stale(&self) -> bool {
        self.task
            .upgrade()
            .is_none_or(|t| t.timer_seq.load(std::sync::atomic::Ordering::Relaxed) != self.seq)
    }
}

/// Drops every stale entry if at least half the heap is stale.
pub(crate) fn compact(heap: &mut BinaryHeap<TimerEntry>) {
    let stale = heap.iter().filter(|t| t.is_stale()).count();
    if stale * 2 >= heap.len() {
        heap.retain(|t| !t.is_stale());
    }
}
