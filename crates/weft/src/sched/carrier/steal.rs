//! Where new threads go: placement at the first run (balancing the
//! carriers' populations), and stealing unstarted threads from other
//! carriers and the injector (balancing the work).
//!
//! Both read other carriers' slots and counters relaxed: a stale read
//! misplaces one thread or misses one steal, which the next round corrects.

use crate::thread::RecordArc;
use std::sync::atomic::Ordering;

use crossbeam_deque::Steal;

use super::Carrier;
use crate::sched::slot::outnumbers;

/// Placement (see [`Carrier::placement`]): a carrier home to fewer threads
/// than this starts every new thread itself.
const PLACE_MIN: usize = 16;

impl Carrier {
    /// Where a thread about to run for the first time should live.
    ///
    /// A started thread moves only off a stalled carrier (handoff), so the
    /// moment to balance the carriers' populations is its first run. Work stealing
    /// alone does not: a thread that spawns 500 short-lived-then-sleeping
    /// threads runs them all on its own carrier before an idle one wakes
    /// and steals (measured: 500 of 500 on one carrier of two), and
    /// they stay there, so after their sleep one carrier does all the work.
    ///
    /// The rule is "the power of two choices" (Mitzenmacher, *The Power of
    /// Two Choices in Randomized Load Balancing*, 2001): compare this
    /// carrier's bound population with one other core carrier's, picked at
    /// random, and hand the thread over if ours is clearly larger — more
    /// than `theirs + theirs/8 + 4` (`slot::outnumbers`), and at least
    /// `PLACE_MIN` (so
    /// fork-join of short threads, whose populations stay small, keeps its
    /// cache-warm local path). A carrier held by a blocking thread (stalled
    /// or in a pinned wait) is never chosen. The counts are read relaxed:
    /// a stale count misplaces one thread, which the next placements
    /// correct.
    pub(in crate::sched) fn placement(&self) -> Option<usize> {
        let core = self.shared.core;
        let mine = self.me().homed.load(Ordering::Relaxed);
        if core < 2 || mine < PLACE_MIN {
            return None;
        }
        let to = if self.index < core {
            // One of the other core - 1, uniformly.
            let k = (self.next_rand() % (core as u64 - 1)) as usize;
            if k >= self.index { k + 1 } else { k }
        } else {
            // A spare: any core carrier.
            (self.next_rand() % core as u64) as usize
        };
        let slot = &self.shared.carriers[to];
        if slot.stalled.is_set() || slot.pinned.load(Ordering::Relaxed) || slot.handing_off() {
            return None;
        }
        outnumbers(mine, slot.homed.load(Ordering::Relaxed)).then_some(to)
    }

    pub(in crate::sched) fn next_rand(&self) -> u64 {
        // xorshift64*
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(in crate::sched) fn steal_injector(&self) -> Option<RecordArc> {
        if self.shared.injector.is_empty() {
            return None;
        }
        loop {
            match self.shared.injector.steal_batch_and_pop(&self.local) {
                Steal::Success(t) => return Some(t),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// Steals half of a random victim's queue, or from the injector; with
    /// `take_next`, also a victim's `next` slot (only in the last spin
    /// round, so a carrier about to run its own `next` usually gets to).
    pub(in crate::sched) fn steal(&self, take_next: bool) -> Option<RecordArc> {
        let stealers = self.shared.used_stealers();
        let n = stealers.len();
        let start = (self.next_rand() % n as u64) as usize;
        for k in 0..n {
            let i = (start + k) % n;
            // `is_empty` reads two indices; a steal from an empty queue
            // would pin the epoch first (a locked instruction) to find the
            // same.
            if i == self.index || stealers[i].is_empty() {
                continue;
            }
            loop {
                match stealers[i].steal_batch_and_pop(&self.local) {
                    Steal::Success(t) => {
                        self.shared.steals.fetch_add(1, Ordering::Relaxed);
                        return Some(t);
                    }
                    Steal::Empty => break,
                    Steal::Retry => continue,
                }
            }
        }
        if let Some(t) = self.steal_injector() {
            return Some(t);
        }
        // A `next` slot holds a thread that has run: only a runtime that
        // allows migration lets another carrier take it.
        if take_next && self.shared.migrate {
            for k in 0..n {
                let i = (start + k) % n;
                if i != self.index
                    && let Some(t) = self.shared.carriers[i].take_next()
                {
                    self.shared.steals.fetch_add(1, Ordering::Relaxed);
                    return Some(t);
                }
            }
        }
        None
    }
}
