//! Timers: one queue per carrier — an in-order lane and a min-heap.
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
//!
//! # The in-order lane
//!
//! Most deadlines arrive in order: threads that sleep or time out for the
//! same duration park one after another, so each deadline is no earlier
//! than the one before. Those go to a FIFO *lane* (a `VecDeque`, pushed at
//! the back, popped at the front, O(1) and sequential in memory); only an
//! entry earlier than the lane's last goes to the heap. The earliest timer
//! is the earlier of the two fronts. A heap pop costs a sift-down through
//! log₂ n levels, each a likely cache miss: with 500,000 sleepers per
//! carrier (`weft-bench`'s 1M × sleep) that was 5.5 % of the run's samples
//! in `fire_timers` (`perf record`); from the lane the same pop is a read
//! of the next slot.

use crate::thread::RecordWeak;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

/// One pending wake-up.
pub(crate) struct TimerEntry {
    pub(crate) deadline: Instant,
    /// The thread's `timer_seq` when it parked.
    pub(crate) seq: u32,
    /// Held weakly: a thread owns its runtime, and a strong entry would keep
    /// a private runtime whose threads have all ended alive until the last
    /// deadline passed. A parked thread is kept alive by its park (the
    /// count its carrier leaks), not by its timer.
    pub(crate) thread: RecordWeak,
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
        self.thread
            .upgrade()
            .is_none_or(|t| t.timer_seq.load(std::sync::atomic::Ordering::Relaxed) != self.seq)
    }
}

/// A carrier's pending timers (see "The in-order lane").
#[derive(Default)]
pub(crate) struct TimerQueue {
    /// Entries in deadline order, each pushed no earlier than the last.
    lane: VecDeque<TimerEntry>,
    /// The entries that arrived out of order.
    heap: BinaryHeap<TimerEntry>,
}

impl TimerQueue {
    pub(crate) fn push(&mut self, e: TimerEntry) {
        match self.lane.back() {
            Some(last) if e.deadline < last.deadline => self.heap.push(e),
            _ => self.lane.push_back(e),
        }
    }

    /// Whether the lane's front is due before the heap's top.
    fn lane_first(&self) -> bool {
        match (self.lane.front(), self.heap.peek()) {
            (Some(l), Some(h)) => l.deadline <= h.deadline,
            (l, _) => l.is_some(),
        }
    }

    /// The entry with the earliest deadline.
    pub(crate) fn peek(&self) -> Option<&TimerEntry> {
        if self.lane_first() {
            self.lane.front()
        } else {
            self.heap.peek()
        }
    }

    pub(crate) fn pop(&mut self) -> Option<TimerEntry> {
        if self.lane_first() {
            self.lane.pop_front()
        } else {
            self.heap.pop()
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.lane.len() + self.heap.len()
    }

    /// Keeps the entries for which `keep` holds (the lane stays in order).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&TimerEntry) -> bool) {
        self.lane.retain(&mut keep);
        self.heap.retain(keep);
    }

    /// Takes every entry out, in no particular order.
    pub(crate) fn take_all(&mut self) -> Vec<TimerEntry> {
        let mut all: Vec<TimerEntry> = std::mem::take(&mut self.lane).into();
        all.extend(std::mem::take(&mut self.heap));
        all
    }

    fn iter(&self) -> impl Iterator<Item = &TimerEntry> {
        self.lane.iter().chain(self.heap.iter())
    }
}

impl Extend<TimerEntry> for TimerQueue {
    fn extend<I: IntoIterator<Item = TimerEntry>>(&mut self, entries: I) {
        for e in entries {
            self.push(e);
        }
    }
}

/// Drops every stale entry if at least half the queue is stale.
pub(crate) fn compact(timers: &mut TimerQueue) {
    let stale = timers.iter().filter(|t| t.is_stale()).count();
    if stale * 2 >= timers.len() {
        timers.retain(|t| !t.is_stale());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn entry(base: Instant, ms: u64, seq: u32) -> TimerEntry {
        TimerEntry {
            deadline: base + Duration::from_millis(ms),
            seq,
            thread: RecordWeak::gone(),
        }
    }

    /// Pushes and pops interleaved, deadlines mostly in order with
    /// stragglers and ties: every pop is the earliest pending deadline (a
    /// sorted reference list says which), and nothing is lost.
    #[test]
    fn pops_come_out_earliest_first_whatever_the_push_order() {
        let base = Instant::now();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut q = TimerQueue::default();
        let mut reference: Vec<u64> = Vec::new();
        let mut clock = 0u64;
        for seq in 0..20_000u32 {
            let r = next();
            // 80 % in order (the lane), 20 % earlier than the last (the heap).
            let ms = if r % 5 == 0 {
                clock.saturating_sub(r % 500)
            } else {
                clock += r % 3; // ties included
                clock
            };
            q.push(entry(base, ms, seq));
            reference.push(ms);
            if next() % 3 == 0 {
                reference.sort_unstable();
                let want = reference.remove(0);
                let got = q.pop().expect("an entry is pending");
                assert_eq!(got.deadline, base + Duration::from_millis(want));
            }
            assert_eq!(q.len(), reference.len());
        }
        reference.sort_unstable();
        for want in reference {
            assert_eq!(
                q.peek().map(|e| e.deadline),
                Some(base + Duration::from_millis(want))
            );
            assert_eq!(
                q.pop().map(|e| e.deadline),
                Some(base + Duration::from_millis(want))
            );
        }
        assert!(q.pop().is_none() && q.peek().is_none());
    }

    #[test]
    fn retain_take_all_and_extend_keep_every_entry() {
        let base = Instant::now();
        let mut q = TimerQueue::default();
        q.extend([5, 1, 7, 7, 3, 9].map(|ms| entry(base, ms, ms as u32)));
        q.retain(|e| e.seq != 7);
        assert_eq!(q.len(), 4);
        let mut all: Vec<u32> = q.take_all().into_iter().map(|e| e.seq).collect();
        all.sort_unstable();
        assert_eq!(all, [1, 3, 5, 9]);
        assert_eq!(q.len(), 0);
    }
}
