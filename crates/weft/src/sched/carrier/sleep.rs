//! A carrier with nothing to run: it searches other carriers' queues (the
//! idle protocol of `idle.rs`, after Tokio's), polls the readiness source,
//! and sleeps at once — in the readiness source if it takes the waiter
//! role (`netpoll`), on its kick word otherwise (`doorbell`), until work,
//! a kick or its next timer. It never spins waiting for work nor yields
//! its core with `sched_yield` (ARCHITECTURE.md, "Sharing the cores").
//!
//! The inbox handshake (invariant 5 in `sched/mod.rs`): a sleeping carrier
//! raises its slot's `sleeping` flag before it looks at its inbox, and a
//! pusher publishes before it reads the flag (both SeqCst), so either the
//! pusher kicks or the carrier sees the work.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Carrier;

impl Carrier {
    pub(in crate::sched) fn become_searching(&self) -> bool {
        if !self.searching.get() && self.shared.idle.try_start_searching() {
            self.searching.set(true);
        }
        self.searching.get()
    }

    pub(in crate::sched) fn stop_searching(&self) {
        if self.searching.replace(false) && self.shared.idle.stop_searching() {
            // We were the last searcher and found work: let another carrier
            // look for the rest.
            self.shared.notify_work();
        }
    }

    pub(in crate::sched) fn sleep(&self) {
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
            let timer_due = self.me().next_timer().is_some_and(|d| d <= Instant::now());
            let polled = !me.inbox.is_empty() || !self.local.is_empty();
            // Asked to rest: leave the sleeper list, off duty instead.
            let rest = me.rest.load(Ordering::SeqCst);
            if (timer_due || polled || rest) && shared.idle.wake_self(self.index) {
                break;
            }
            let scavenge = shared.stacks.scavenge(Instant::now());
            let wake_at = match (self.me().next_timer(), scavenge) {
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

    /// Polls the readiness source (`netpoll`, rule 1); true if it woke
    /// anything.
    pub(in crate::sched) fn poll_io(&self) -> bool {
        if !self.polls.get() {
            return false;
        }
        let Some(source) = crate::netpoll::get() else {
            return false;
        };
        self.polling.set(true);
        let n = source.poll();
        self.polling.set(false);
        n > 0
    }

    /// Sleeps in the readiness source rather than on the kick word, if this
    /// carrier polls and the waiter role is free (`netpoll`, rule 2): woken
    /// by an event, a kick (`crate::doorbell`) or `until`. False if it did
    /// not.
    pub(in crate::sched) fn poll_wait(&self, seen: u32, until: Option<Instant>) -> bool {
        if !self.polls.get() {
            return false;
        }
        // Not before a descriptor is registered: until then a futex wake
        // is the cheaper kick (`netpoll::Source::in_use`).
        let Some(role) = crate::netpoll::get()
            .filter(|s| s.in_use())
            .and_then(|s| s.try_role())
        else {
            return false;
        };
        let bell = &self.me().bell;
        let timeout = until.map(|d| d.saturating_duration_since(Instant::now()));
        self.polling.set(true);
        role.block(timeout, || bell.enter_source(seen));
        bell.leave_source();
        self.polling.set(false);
        true
    }
}
