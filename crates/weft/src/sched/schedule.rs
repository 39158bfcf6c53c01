//! The scheduler's side of `thread::Schedule`: what a record asks of the
//! runtime that carries it, answered by [`Shared`] (the runtime's handle,
//! which the record holds, hands each call here).

use crate::thread::RecordArc;
use std::sync::Arc;

use super::blocked::{enter_blocking, exit_blocking};
use super::shared::Shared;
use super::unwinding;
use crate::thread::{Kind, Schedule, VThread};

/// What a record asks of its scheduler (see `thread/schedule.rs`).
impl Schedule for Shared {
    fn schedule(&self, thread: RecordArc) {
        Shared::schedule(self, thread)
    }

    fn finished(&self) {
        self.thread_finished()
    }

    fn suspend_unwinding(&self, thread: &VThread) -> bool {
        unwinding::suspend_unwinding(thread)
    }

    fn resume_unwinding(&self) {
        unwinding::resume_unwinding()
    }

    fn suspended_unwinders(&self) -> u32 {
        unwinding::suspended_unwinders()
    }

    fn block_carrier(&self, pinned_park: bool) -> bool {
        enter_blocking(pinned_park)
    }

    fn unblock_carrier(&self) {
        exit_blocking()
    }

    fn panicked(&self, thread: &VThread, payload: &(dyn std::any::Any + Send)) {
        if let Some(sim) = super::simulation() {
            sim.thread_panicked(thread, payload);
        }
    }

    fn unjoined_panic(&self, payload: &(dyn std::any::Any + Send)) {
        if let Some(sim) = super::simulation() {
            sim.panic_lost(payload);
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

impl VThread {
    /// The scheduler of a virtual thread's runtime, as the scheduler's own
    /// type (for dumps and the monitor; the record itself knows it only as
    /// a [`Schedule`]).
    pub(crate) fn runtime_shared(&self) -> Option<&Shared> {
        match &self.kind {
            Kind::Virtual { sched, .. } => sched.as_any().downcast_ref::<Shared>(),
            Kind::Os(_) => None,
        }
    }
}
