//! A plain snapshot of a runtime's scheduler figures.
//!
//! The scheduler exposes [`SchedStats`] and knows nothing of who reads it
//! (`metrics` sums it over runtimes). Every field is read with relaxed
//! loads: a snapshot of counters that keep moving, not a consistent cut.

use crate::unpoison::Unpoison;
use std::sync::atomic::Ordering;

use crossbeam_deque::Stealer;

use super::shared::Shared;

/// One runtime's scheduler figures at one moment.
#[derive(Debug, Default, Clone)]
pub(crate) struct SchedStats {
    /// Carriers on duty (core + spares).
    pub(crate) carriers_active: usize,
    /// Carriers with a thread mounted.
    pub(crate) carriers_busy: usize,
    /// Carriers on duty beyond the parallelism (spares).
    pub(crate) carriers_spare: usize,
    /// Carriers blocked or stalled.
    pub(crate) carriers_blocked: usize,
    /// Carriers searching for work.
    pub(crate) carriers_searching: usize,
    /// Carriers asleep in the idle protocol.
    pub(crate) carriers_sleeping: usize,
    /// Spare carriers ever started.
    pub(crate) spares_started: usize,
    /// Threads in the global injector.
    pub(crate) run_queue_global: usize,
    /// Length of each carrier's stealable queue.
    pub(crate) run_queue_local: Vec<usize>,
    /// Virtual threads started and not finished.
    pub(crate) threads_live: usize,
    /// Virtual threads ever started.
    pub(crate) threads_started: usize,
    /// Successful steals.
    pub(crate) steals: usize,
    /// New threads handed to a less loaded carrier at their first run.
    pub(crate) placed: usize,
    /// Started threads moved off a stalled carrier (handoff).
    pub(crate) moved: usize,
    /// Carriers' OS threads lowered in priority during a hold (`demote.rs`).
    pub(crate) lowered: usize,
    /// Core carriers resting now (`rest.rs`).
    pub(crate) resting: usize,
    /// Times a core carrier was sent to rest.
    pub(crate) rests: usize,
    /// Times a core carrier took threads queued for another (`rest.rs`,
    /// rule 4).
    pub(crate) covers: usize,
    /// Entries in the carriers' timer heaps.
    pub(crate) timers_pending: usize,
    /// Why the runtime's threads share their carriers' thread-locals
    /// (`None`: each has its own; see `Shared::note_thread_locals`).
    pub(crate) shared_thread_locals: Option<&'static str>,
}

impl Shared {
    /// This runtime's figures right now.
    pub(crate) fn stats(&self) -> SchedStats {
        let active = self.active.load(Ordering::Relaxed);
        let busy = self
            .carriers
            .iter()
            .filter(|w| !w.mounted.load(Ordering::Relaxed).is_null())
            .count();
        SchedStats {
            carriers_active: active,
            carriers_busy: busy,
            carriers_spare: active.saturating_sub(self.core),
            carriers_blocked: self.blocked.get(),
            carriers_searching: self.idle.searching.load(Ordering::Relaxed),
            carriers_sleeping: self.idle.num_sleepers.load(Ordering::Relaxed),
            spares_started: self.spares_started.load(Ordering::Relaxed),
            run_queue_global: self.injector.len(),
            run_queue_local: self
                .stealers
                .iter()
                .take(active.max(self.core))
                .map(Stealer::len)
                .collect(),
            threads_live: self.live_threads(),
            threads_started: self.started.load(Ordering::Relaxed),
            steals: self.steals.load(Ordering::Relaxed),
            placed: self.placed.load(Ordering::Relaxed),
            moved: self.threads_moved(),
            lowered: self.demoted.load(Ordering::Relaxed),
            resting: self.resting.load(Ordering::Relaxed),
            rests: self.rests.load(Ordering::Relaxed),
            covers: self.covers.load(Ordering::Relaxed),
            timers_pending: self
                .carriers
                .iter()
                .map(|w| w.timers.lock().unpoison().len())
                .sum(),
            shared_thread_locals: self.shared_thread_locals.get().copied().flatten(),
        }
    }
}
