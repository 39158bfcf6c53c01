//! Where new threads go: placement at the first run (balancing the
//! carriers' populations), and stealing unstarted threads from other
//! carriers and the injector (balancing the work); and, while the cores
//! are busy with other processes, covering: taking started threads queued
//! for a carrier that waits for a CPU (`sched/rest.rs`, rule 4).
//!
//! All read other carriers' slots and counters relaxed: a stale read
//! misplaces one thread or misses one steal, which the next round corrects.

use crate::thread::RecordArc;
use std::sync::atomic::Ordering;

use crossbeam_deque::Steal;

use super::Carrier;
use crate::sched::slot::outnumbers;
use crate::thread::NO_HOME;

/// Placement (see [`Carrier::placement`]): a carrier home to fewer threads
/// than this starts every new thread itself.
const PLACE_MIN: usize = 16;

impl Carrier {
    /// Where a thread about to run for the first time should live.
    ///
    /// A started thread moves only off a stalled carrier (handoff) or one
    /// covered for (below), so the moment to balance the carriers'
    /// populations is its first run. Work stealing alone does not: a
    /// thread that spawns 500 short-lived-then-sleeping threads runs them
    /// all on its own carrier before an idle one wakes and steals
    /// (measured: 500 of 500 on one carrier of two), and
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
        if self.shared.covering.load(Ordering::Relaxed)
            && let Some(t) = self.cover(start)
        {
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

    /// Covering (`sched/rest.rs`, rule 4): takes half of the inbox of
    /// another core carrier on duty — the threads that may move, released
    /// from it so that they bind here (`CarrierSlot::release`, as a
    /// handoff releases them) — and returns the first to run; the others
    /// wait in this carrier's queue. If this carrier then outnumbers the
    /// other, its woken threads go back there until the two are level
    /// (`CarrierSlot::shed_target`): without that, every thread would
    /// gather on whichever carrier ran most, and the other, idle, would
    /// no longer be a claim on CPU time.
    ///
    /// A carrier that has nothing to do while another's inbox fills is, on
    /// cores shared with busy processes, one on a CPU beside one waiting
    /// for a CPU. The inbox is taken from without its owner: the owner
    /// kicked for a thread that was then taken finds its inbox empty and
    /// sleeps again (the inbox handshake only needs a kick to be seen).
    fn cover(&self, start: usize) -> Option<RecordArc> {
        let core = self.shared.core;
        let me = self.me();
        if self.index >= core || me.rest.load(Ordering::Relaxed) || me.handing_off() {
            return None;
        }
        for k in 0..core {
            let i = (start + k) % core;
            let slot = &self.shared.carriers[i];
            if i == self.index
                || slot.inbox.is_empty()
                || slot.handing_off()
                || slot.pinned.load(Ordering::Relaxed)
                || slot.rest.load(Ordering::Relaxed)
            {
                continue;
            }
            let mut first = None;
            let mut stay = Vec::new();
            for _ in 0..slot.inbox.len().div_ceil(2) {
                let Some(t) = slot.pop_home() else { break };
                // Unbound (placed there, never run) or released: ours.
                if t.home.load(Ordering::Relaxed) == NO_HOME || slot.release(&t) {
                    match first {
                        None => first = Some(t),
                        Some(_) => self.local.push(t),
                    }
                } else {
                    stay.push(t);
                }
            }
            for t in stay {
                slot.inbox.push(t);
            }
            if first.is_some() {
                self.shared.covers.fetch_add(1, Ordering::Relaxed);
                // `first` binds here when it runs: count it.
                if outnumbers(
                    me.homed.load(Ordering::Relaxed) + 1,
                    slot.homed.load(Ordering::Relaxed),
                ) {
                    me.shed_to.store(i as u32, Ordering::Relaxed);
                }
                return first;
            }
        }
        None
    }
}
