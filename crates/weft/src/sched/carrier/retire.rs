//! A spare carrier going off duty ([`Carrier::retire`]): it takes no new
//! work and hands off the threads bound to it that may move (they bind
//! where they next run: queued ones now, parked ones when woken), keeps
//! serving those that stay, and exits only once none is left and its
//! keep-alive has passed. Unbound threads (a runtime that allows
//! migration) are handed to the rest of the runtime.
//!
//! A core carrier the monitor rests (`sched/rest.rs`) goes off duty the
//! same way ([`Carrier::rest`]) until the monitor calls it back: it stays
//! counted on duty (no spare comes in for it), leaves the readiness
//! source to the others, and sleeps on its kick word in between.
//!
//! A carrier whose OS thread the monitor lowered during a hold
//! (`sched/demote.rs`) goes off duty the same way when the hold ends
//! ([`Carrier::leave`]), core or spare, but for good: no compensator
//! calls it back, it stops polling, and it exits as soon as no thread
//! that stays is left, without a keep-alive.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Carrier;
use crate::sched::timers::TimerEntry;
use crate::thread::NO_HOME;
use crate::unpoison::Unpoison;

impl Carrier {
    /// Whether more carriers run than the runtime's parallelism needs.
    pub(in crate::sched) fn surplus(&self) -> bool {
        let s = &self.shared;
        s.active.load(Ordering::SeqCst) > s.core + s.blocked.get()
    }

    /// Leaves the slot for good: the monitor lowered this OS thread's
    /// priority during the hold that just ended, and an unprivileged
    /// process cannot raise it back. Off duty as [`Carrier::retire`], not
    /// to be called back; a carrier comes in for it (compensation, whose
    /// new OS thread starts at the runtime's priority), and the caller,
    /// `run_carrier`, gives a core slot a new OS thread once this one is
    /// done with the threads that stay here.
    pub(in crate::sched) fn leave(&self) {
        self.retire(false);
    }

    /// Leaves duty, then waits in keep-alive (`recall`: a compensator may
    /// call it back) or until no thread that stays is left (not `recall`:
    /// [`Carrier::leave`]). Returns true if called back to duty (already
    /// counted active again by the caller of `compensate`), false if the
    /// keep-alive expired or the carrier left.
    ///
    /// Off duty a spare takes no new work. Threads bound to it that may
    /// move are handed off (`stall::Handoff`); those that stay can run nowhere
    /// else: it keeps running them, firing their timers, and sleeping in
    /// between, and its keep-alive only starts counting once none is left
    /// (a parked thread that may move still counts until it is woken and
    /// goes). Unbound threads (a runtime that
    /// allows migration) are handed over: timers to carrier 0, the `next`
    /// slot to the injector.
    pub(in crate::sched) fn retire(&self, recall: bool) -> bool {
        let shared = &*self.shared;
        let me = self.me();
        // Off duty it fetches no readiness for others.
        self.stop_polling();
        // Off duty, the threads that may move go elsewhere too (handoff):
        // woken ones and due sleepers as they come, queued ones now.
        me.handoff.set_off_duty(true);
        if me.hand_off_queued(|t| shared.injector.push(t)) > 0 {
            shared.notify_work();
        }
        self.hand_over_unbound();
        me.spare_wake.store(false, Ordering::SeqCst);
        shared.active.fetch_sub(1, Ordering::SeqCst);
        if recall {
            shared.idle_spares.lock().unpoison().push(self.index);
        } else {
            shared.compensate();
        }
        // Work may have arrived while we were leaving; let a compensator see
        // that we are available.
        shared.notify_work();
        let mut deadline = Instant::now() + shared.spare_keepalive;
        loop {
            let seen = me.bell.seen();
            if me.spare_wake.swap(false, Ordering::SeqCst) {
                me.handoff.set_off_duty(false);
                self.start_polling();
                return true;
            }
            if let Some(t) = self.find_home() {
                // Queued by a waker that read the flag before we raised it.
                if me.release(&t) {
                    shared.injector.push(t);
                    shared.notify_work();
                    continue;
                }
                self.run(t);
                deadline = Instant::now() + shared.spare_keepalive;
                continue;
            }
            let serving = me.homed.load(Ordering::Relaxed) > 0;
            if !serving && !recall {
                return false;
            }
            let now = Instant::now();
            if !serving && (now >= deadline || shared.shutdown.load(Ordering::SeqCst)) {
                let mut spares = shared.idle_spares.lock().unpoison();
                if let Some(pos) = spares.iter().position(|&i| i == self.index) {
                    spares.swap_remove(pos);
                    return false;
                }
                // A compensator picked us concurrently; its wake is coming.
                drop(spares);
                loop {
                    let seen = me.bell.seen();
                    if me.spare_wake.swap(false, Ordering::SeqCst) {
                        me.handoff.set_off_duty(false);
                        self.start_polling();
                        return true;
                    }
                    me.wait_kick(seen, None);
                }
            }
            me.sleeping.store(true, Ordering::SeqCst);
            if me.inbox.is_empty() {
                let wake_at = match (serving, self.me().next_timer()) {
                    (true, t) => t,
                    (false, Some(t)) => Some(t.min(deadline)),
                    (false, None) => Some(deadline),
                };
                me.wait_kick(seen, wake_at);
            }
            me.sleeping.store(false, Ordering::SeqCst);
        }
    }

    /// Rests while the monitor asks (the slot's `rest` flag): off duty as
    /// in [`Carrier::retire`] — the threads bound here that may move go
    /// elsewhere, queued ones now, parked ones when woken — serving only
    /// the threads that stay, and firing their timers. Its stealable
    /// queue (unstarted threads, and timers fired here for threads that
    /// move) goes to the injector, where the carriers on duty look.
    pub(in crate::sched) fn rest(&self) {
        let shared = &*self.shared;
        let me = self.me();
        self.stop_polling();
        me.handoff.set_off_duty(true);
        me.shed_to
            .store(crate::sched::slot::NO_SHED, Ordering::Relaxed);
        if me.hand_off_queued(|t| shared.injector.push(t)) > 0 {
            shared.notify_work();
        }
        self.hand_over_unbound();
        loop {
            self.give_up_local();
            let seen = me.bell.seen();
            if !me.rest.load(Ordering::SeqCst) || shared.shutdown.load(Ordering::SeqCst) {
                break;
            }
            if let Some(t) = self.find_home() {
                // Queued by a waker that read the flag before we raised it.
                if me.release(&t) {
                    shared.injector.push(t);
                    shared.notify_work();
                } else {
                    self.run(t);
                }
                continue;
            }
            me.sleeping.store(true, Ordering::SeqCst);
            if me.inbox.is_empty() && me.rest.load(Ordering::SeqCst) && self.local.is_empty() {
                me.wait_kick(seen, me.next_timer());
            }
            me.sleeping.store(false, Ordering::SeqCst);
        }
        me.handoff.set_off_duty(false);
        self.start_polling();
    }

    /// Moves this carrier's stealable queue to the injector (a carrier off
    /// duty takes no new work; those on duty look there).
    fn give_up_local(&self) {
        let shared = &*self.shared;
        let mut any = false;
        while let Some(t) = self.local.pop() {
            shared.injector.push(t);
            any = true;
        }
        if any {
            shared.notify_work();
        }
    }

    /// Gives unbound threads parked or queued here to the rest of the
    /// runtime (migration only; bound threads have none).
    pub(in crate::sched) fn hand_over_unbound(&self) {
        let shared = &*self.shared;
        let me = self.me();
        let timers = {
            let mut mine = me.timers.lock().unpoison();
            let (unbound, bound): (Vec<TimerEntry>, Vec<TimerEntry>) =
                mine.take_all().into_iter().partition(|t| {
                    t.thread
                        .upgrade()
                        .is_some_and(|t| t.home.load(Ordering::Relaxed) == NO_HOME)
                });
            mine.extend(bound);
            me.update_timer_next(&mine);
            unbound
        };
        if !timers.is_empty() {
            let heir = &shared.carriers[0];
            let mut h = heir.timers.lock().unpoison();
            h.extend(timers);
            heir.update_timer_next(&h);
            drop(h);
            // The heir may be asleep with a later deadline.
            shared.kick_carrier(0);
        }
        if let Some(t) = me.take_next() {
            if t.home.load(Ordering::Relaxed) == NO_HOME {
                shared.injector.push(t);
                shared.notify_work();
            } else {
                me.inbox.push(t);
            }
        }
    }
}
