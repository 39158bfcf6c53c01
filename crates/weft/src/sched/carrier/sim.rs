//! A simulated carrier's loop ([`Carrier::simulate`]): the policy of
//! `sched/sim.rs` in place of the main loop.

use crate::thread::RecordArc;
use std::sync::atomic::Ordering;

use super::Carrier;
use crate::sched::sim::{End, Simulation};
use crate::unpoison::Unpoison;

impl Carrier {
    /// Runs the simulation `sim` to its end: every step gathers the
    /// runnable threads, lets the policy pick one and runs it; with
    /// nothing runnable, virtual time jumps to the earliest timer.
    pub(in crate::sched) fn simulate(&self, sim: &Simulation) {
        sim.wait_start(self.me().tid.load(Ordering::Relaxed));
        let mut runnable: Vec<RecordArc> = Vec::new();
        let end = loop {
            self.gather(&mut runnable);
            if runnable.is_empty() {
                self.flush_finished();
                if sim.wake_idle_waiters() {
                    continue;
                }
                // A deadline the clock cannot reach (584 years on) is
                // never due: its thread waits like one with no timer.
                if let Some(deadline) = self.next_live_timer() {
                    if !sim.within_time(deadline) {
                        break Some(End::TimeLimit);
                    }
                    if sim.clock.advance_to(deadline) {
                        self.fire_due_timers();
                        continue;
                    }
                }
                match self.shared.live_threads() {
                    0 => break Some(End::Finished),
                    parked => break Some(End::Deadlock { parked }),
                }
            }
            let Some(i) = sim.pick(&runnable) else {
                break Some(End::StepLimit);
            };
            let thread = runnable.swap_remove(i);
            self.run(thread);
            if sim.gave_up() {
                // The watchdog gave up on that step (`Simulation::wait_end`).
                break None;
            }
        };
        // Stopped with threads runnable (a limit, or the watchdog): they
        // never run again (like a deadlocked run's, they are leaked, not
        // unwound).
        for t in runnable.drain(..) {
            std::mem::forget(t);
        }
        if let Some(end) = end {
            sim.finish(end);
        }
    }

    /// The earliest deadline that would wake a thread. Stale entries at
    /// the front — a timed park that ended early, a thread that is gone —
    /// are dropped first: time must not jump to them (a run whose last
    /// thread got its message long before its 1 h timeout ended at 1 h),
    /// nor a deadlock be declared only after them.
    fn next_live_timer(&self) -> Option<std::time::Instant> {
        let me = self.me();
        let mut timers = me.timers.lock().unpoison();
        while timers.peek().is_some_and(|t| t.is_stale()) {
            timers.pop();
        }
        me.update_timer_next(&timers);
        timers.peek().map(|t| t.deadline)
    }

    /// Appends every runnable thread, in a fixed order: the `next` slot,
    /// the inbox, the local queue, the injector.
    fn gather(&self, into: &mut Vec<RecordArc>) {
        let me = self.me();
        into.extend(me.take_next());
        while let Some(t) = me.pop_home() {
            into.push(t);
        }
        loop {
            while let Some(t) = self.local.pop() {
                into.push(t);
            }
            match self.steal_injector() {
                Some(t) => into.push(t),
                None => break,
            }
        }
    }
}
