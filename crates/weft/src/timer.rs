//! Timers: one min-heap per carrier.
//!
//! A timed park pushes an entry onto the heap of the carrier it suspended
//! on, *after* the switch (the suspend protocol). The carrier pops due
//! entries whenever it looks for work and before it sleeps, and puts the
//! woken threads on its own run queue: expired sleepers never run on a timer
//! thread, and an idle carrier sleeps exactly until its next deadline.
//!
//! Entries are never removed early. When a timed park ends for another
//! reason the thread bumps its `timer_seq`; a due entry whose sequence no
//! longer matches is dropped without waking anyone. A stale entry costs one
//! heap slot until its deadline.

use std::cmp::Ordering;
use std::time::Instant;

use crate::sched::Task;

/// One pending wake-up.
pub(crate) struct TimerEntry {
    pub(crate) deadline: Instant,
    /// The thread's `timer_seq` when it parked.
    pub(crate) seq: u64,
    pub(crate) task: Task,
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
