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
//!
//! This file is the protocol's shared state ([`Idle`], in `Shared`); the
//! carrier's side of it — searching and sleeping — is in
//! `carrier/sleep.rs`.

use crate::unpoison::Unpoison;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

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
