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

use crate::unpoison::Unpoison;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::time::Instant;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::carrier::Carrier;
use super::set_state;
use super::slot::CarrierSlot;
use crate::clock::ns_of;
use crate::thread::{NO_HOME, State, VThread};

/// One pending wake-up.
pub(crate) struct TimerEntry {
    pub(crate) deadline: Instant,
    /// The thread's `timer_seq` when it parked.
    pub(crate) seq: u64,
    /// Held weakly: a thread owns its runtime, and a strong entry would keep
    /// a private runtime whose threads have all ended alive until the last
    /// deadline passed. A parked thread is kept alive by its park (the
    /// count its carrier leaks), not by its timer.
    pub(crate) task: std::sync::Weak<VThread>,
}

impl PartialEq for TimerEntry {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline
    }
}
impl Eq for TimerEntry {}
impl PartialOrd for TimerEntry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for TimerEntry {
    /// Reversed, so `BinaryHeap` (a max-heap) pops the earliest deadline.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        other.deadline.cmp(&self.deadline)
    }
}

/// Heap size below which stale entries are left for their deadline.
pub(crate) const SCAN_MIN: usize = 1024;

impl TimerEntry {
    /// Whether the park this entry would end has already ended.
    pub(super) fn is_stale(&self) -> bool {
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

impl CarrierSlot {
    pub(super) fn push_timer(&self, e: TimerEntry) {
        let mut timers = self.timers.lock().unpoison();
        timers.push(e);
        if timers.len() >= self.timer_scan_at.load(Ordering::Relaxed) {
            super::timers::compact(&mut timers);
            self.timer_scan_at.store(
                (2 * timers.len()).max(super::timers::SCAN_MIN),
                Ordering::Relaxed,
            );
        }
        self.update_timer_next(&timers);
    }

    pub(super) fn update_timer_next(&self, timers: &BinaryHeap<TimerEntry>) {
        let next = timers.peek().map_or(u64::MAX, |t| ns_of(t.deadline));
        self.timer_next.store(next, Ordering::Relaxed);
    }

    /// Whether a timer is due at `now` (ns), without locking.
    pub(super) fn timer_due(&self, now: u64) -> bool {
        self.timer_next.load(Ordering::Relaxed) <= now
    }

    /// Pops due timers, handing each woken thread to `wake`.
    pub(super) fn fire_timers(&self, now: Instant, mut wake: impl FnMut(Arc<VThread>)) -> usize {
        let mut timers = self.timers.lock().unpoison();
        let mut n = 0;
        while let Some(t) = timers.peek() {
            if t.deadline > now {
                break;
            }
            let t = timers.pop().expect("peeked");
            // A thread that is gone (the entry holds it weakly) has nothing
            // to wake.
            let Some(task) = t.task.upgrade() else {
                continue;
            };
            if task.timer_seq.load(Ordering::Relaxed) == t.seq
                && task.park.unpark() == crate::park::Unpark::Schedule
            {
                // SAFETY: a PARKED thread carries one strong count leaked by
                // its carrier (`after_park`); we moved it out of PARKED, so
                // that count is ours. We run it with the upgraded count.
                unsafe { Arc::decrement_strong_count(Arc::as_ptr(&task)) };
                set_state(&task, State::Runnable);
                wake(task);
                n += 1;
            }
        }
        self.update_timer_next(&timers);
        n
    }

    /// Fires due timers: bound threads go to this carrier's inbox (they run
    /// only here), unbound ones to `unbound`. Returns how many went there.
    pub(super) fn fire_timers_home(
        &self,
        now: Instant,
        mut unbound: impl FnMut(Arc<VThread>),
    ) -> usize {
        let mut n = 0;
        self.fire_timers(now, |t| {
            if t.home.load(Ordering::Relaxed) == NO_HOME {
                unbound(t);
                n += 1;
            } else {
                self.inbox.push(t);
            }
        });
        n
    }

    pub(super) fn next_timer(&self) -> Option<Instant> {
        self.timers.lock().unpoison().peek().map(|t| t.deadline)
    }
}

impl Carrier {
    pub(super) fn fire_timers(&self) {
        let me = self.me();
        if me.timer_next.load(Ordering::Relaxed) == u64::MAX {
            return;
        }
        let now = Instant::now();
        if !me.timer_due(ns_of(now)) {
            return;
        }
        if me.fire_timers_home(now, |t| self.local.push(t)) > 0 {
            self.shared.notify_work();
        }
    }

    pub(super) fn next_timer(&self) -> Option<Instant> {
        self.me().next_timer()
    }
}
