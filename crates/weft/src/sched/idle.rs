//! The idle protocol: which carriers search for work and which sleep.
//!
//! After Tokio's `idle.rs`. A carrier that finds no local work becomes a
//! *searcher* (at most half the carriers search at once) and steals; one
//! that finds nothing sleeps on its kick word. No lost wake-ups (invariant
//! 5 in `mod.rs`): a producer publishes its work and then reads the
//! searching/sleeping counts (SeqCst) to decide whether to wake someone;
//! the last searcher to give up re-checks every queue *after* announcing
//! that it gave up. The sleeper list is under a lock; the counts are read
//! without it. A carrier's own work (a due timer, a bound thread in its
//! inbox) wakes it without going through this list.

use crate::unpoison::Unpoison;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::carrier::Carrier;

/// Core carriers only: spares never sleep in this list (they retire).
pub(super) struct Idle {
    pub(super) searching: AtomicUsize,
    pub(super) num_sleepers: AtomicUsize,
    pub(super) sleepers: Mutex<Vec<usize>>,
    pub(super) core: usize,
}

impl Idle {
    pub(super) fn new(core: usize) -> Idle {
        Idle {
            searching: AtomicUsize::new(0),
            num_sleepers: AtomicUsize::new(0),
            sleepers: Mutex::new(Vec::with_capacity(core)),
            core,
        }
    }

    /// At most half the carriers search at once (each search costs a pass
    /// over every queue); the rest sleep.
    pub(super) fn try_start_searching(&self) -> bool {
        let s = self.searching.load(Ordering::SeqCst);
        if 2 * s >= self.core.max(2) {
            return false;
        }
        self.searching.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// Returns true if this was the last searcher.
    pub(super) fn stop_searching(&self) -> bool {
        self.searching.fetch_sub(1, Ordering::SeqCst) == 1
    }

    /// A sleeper to wake for new work, already counted as searching; None
    /// if someone is searching (it will find the work) or nobody sleeps.
    pub(super) fn carrier_to_notify(&self) -> Option<usize> {
        if self.searching.load(Ordering::SeqCst) != 0
            || self.num_sleepers.load(Ordering::SeqCst) == 0
        {
            return None;
        }
        let mut sleepers = self.sleepers.lock().unpoison();
        if self.searching.load(Ordering::SeqCst) != 0 {
            return None;
        }
        let i = sleepers.pop()?;
        self.num_sleepers.fetch_sub(1, Ordering::SeqCst);
        self.searching.fetch_add(1, Ordering::SeqCst);
        Some(i)
    }

    pub(super) fn pop_any_sleeper(&self) -> Option<usize> {
        let mut sleepers = self.sleepers.lock().unpoison();
        let i = sleepers.pop()?;
        self.num_sleepers.fetch_sub(1, Ordering::SeqCst);
        self.searching.fetch_add(1, Ordering::SeqCst);
        Some(i)
    }

    /// Records that carrier `i` goes to sleep. Returns true if it was the
    /// last searcher (it must then re-check the queues).
    pub(super) fn to_sleep(&self, i: usize, was_searching: bool) -> bool {
        let mut sleepers = self.sleepers.lock().unpoison();
        sleepers.push(i);
        self.num_sleepers.fetch_add(1, Ordering::SeqCst);
        was_searching && self.searching.fetch_sub(1, Ordering::SeqCst) == 1
    }

    /// A sleeper woke by its own timer: take it off the list. False if a
    /// notifier already did (its `notified` flag is then about to be set).
    pub(super) fn wake_self(&self, i: usize) -> bool {
        let mut sleepers = self.sleepers.lock().unpoison();
        let Some(pos) = sleepers.iter().position(|&w| w == i) else {
            return false;
        };
        sleepers.swap_remove(pos);
        self.num_sleepers.fetch_sub(1, Ordering::SeqCst);
        true
    }
}

impl Carrier {
    pub(super) fn become_searching(&self) -> bool {
        if !self.searching.get() && self.shared.idle.try_start_searching() {
            self.searching.set(true);
        }
        self.searching.get()
    }

    pub(super) fn stop_searching(&self) {
        if self.searching.replace(false) && self.shared.idle.stop_searching() {
            // We were the last searcher and found work: let another carrier
            // look for the rest.
            self.shared.notify_work();
        }
    }

    pub(super) fn sleep(&self) {
        let shared = &*self.shared;
        let was_searching = self.searching.replace(false);
        let last = shared.idle.to_sleep(self.index, was_searching);
        if last && shared.has_visible_work() {
            shared.notify_work();
        }
        let me = &shared.carriers[self.index];
        // Before the inbox is looked at below (see `sleeping`).
        me.sleeping.store(true, Ordering::SeqCst);
        loop {
            // Snapshot the event count *before* looking at the flags: a
            // notifier sets its flag, then bumps the count.
            let seen = me.bell.seen();
            if shared.shutdown.load(Ordering::SeqCst) {
                me.sleeping.store(false, Ordering::SeqCst);
                return;
            }
            if me.notified.swap(false, Ordering::SeqCst) {
                self.searching.set(true);
                break;
            }
            // Our own work — a due timer, or a bound thread woken from
            // elsewhere — wakes us without the idle protocol. If a notifier
            // already took us off the sleeper list, its flag is coming:
            // loop and take it.
            let timer_due = self.next_timer().is_some_and(|d| d <= Instant::now());
            let polled = !me.inbox.is_empty() || !self.local.is_empty();
            if (timer_due || polled) && shared.idle.wake_self(self.index) {
                break;
            }
            let scavenge = shared.stacks.scavenge(Instant::now());
            let wake_at = match (self.next_timer(), scavenge) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if !self.poll_wait(seen, wake_at) {
                me.wait_kick(seen, wake_at);
            }
        }
        me.sleeping.store(false, Ordering::SeqCst);
        // We left the sleeper count (SeqCst) before this load: a monitor
        // that decided to sleep because every carrier slept is woken here.
        if shared.monitor.deep_sleep.load(Ordering::SeqCst) {
            shared.wake_monitor();
        }
    }
}
