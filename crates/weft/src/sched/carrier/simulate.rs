//! A simulated carrier's loop ([`Carrier::simulate`]): the policy of
//! `sched/simulate.rs` in place of the main loop.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Carrier;
use crate::sched::simulate::{End, Simulation};
use crate::thread::VThread;

impl Carrier {
    /// Runs the simulation `sim` to its end: every step gathers the
    /// runnable threads, lets the policy pick one and runs it; with
    /// nothing runnable, virtual time jumps to the earliest timer.
    pub(in crate::sched) fn simulate(&self, sim: &Simulation) {
        sim.wait_start();
        let mut runnable: Vec<Arc<VThread>> = Vec::new();
        let end = loop {
            self.gather(&mut runnable);
            if runnable.is_empty() {
                self.flush_finished();
                if sim.wake_idle_waiters() {
                    continue;
                }
                if let Some(deadline) = self.me().next_timer() {
                    sim.clock.advance_to(deadline);
                    self.fire_due_timers();
                    continue;
                }
                match self.shared.live.load(Ordering::SeqCst) {
                    0 => break End::Finished,
                    parked => break End::Deadlock { parked },
                }
            }
            let i = sim.pick(&runnable);
            let thread = runnable.swap_remove(i);
            self.run(thread);
        };
        sim.finish(end);
    }

    /// Appends every runnable thread, in a fixed order: the `next` slot,
    /// the inbox, the local queue, the injector.
    fn gather(&self, into: &mut Vec<Arc<VThread>>) {
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
