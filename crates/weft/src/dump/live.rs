//! Cheap live views for dashboards (weft-http's `/debug/weft` page): what
//! each carrier is doing and how many threads are in each state. Read
//! without stopping or borrowing anyone — a pass over the registry and a
//! few atomics per carrier — so they can be polled every second.

use crate::thread::RecordArc;
use std::collections::HashMap;
use std::sync::Arc;

use crate::sched::{Shared, mounted_carriers, runtimes};
use crate::thread::registry::{all_threads, for_each_thread};
use crate::thread::{State, Thread, ThreadId, state_of};

/// What a carrier is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CarrierState {
    /// No virtual thread mounted: looking for work or asleep.
    Idle,
    /// Running a virtual thread.
    Busy,
    /// Held by one thread past the stall threshold (burning CPU, or
    /// blocked in the kernel outside weft): the threads bound to it wait.
    Stalled,
    /// Held by a thread in a pinned wait ([`crate::pinned`]).
    Pinned,
}

impl CarrierState {
    /// `"idle"`, `"busy"`, `"stalled"` or `"pinned"`.
    pub fn as_str(self) -> &'static str {
        match self {
            CarrierState::Idle => "idle",
            CarrierState::Busy => "busy",
            CarrierState::Stalled => "stalled",
            CarrierState::Pinned => "pinned",
        }
    }
}

/// One carrier of one runtime, as [`carriers`] saw it.
#[derive(Clone, Debug)]
pub struct CarrierInfo {
    /// The runtime: its position among the process's live runtimes, oldest
    /// first.
    pub runtime: usize,
    /// The runtime's name (`RuntimeBuilder::name`, the prefix of its
    /// carriers' OS thread names: `weft-carrier` by default).
    pub runtime_name: String,
    /// The carrier's index in its runtime (`carrier {index}` in dumps).
    pub index: usize,
    /// A spare carrier (beyond the runtime's parallelism, brought in while
    /// others are blocked).
    pub spare: bool,
    /// What it is doing.
    pub state: CarrierState,
    /// The virtual thread mounted on it, if any: id, name and state.
    pub thread: Option<(ThreadId, Option<String>, State)>,
    /// For a [`CarrierState::Stalled`] carrier, how long its thread has
    /// held it so far (from before the hold began, as the monitor saw it:
    /// never less than the hold). When the hold ends the stall's event
    /// gets the whole hold ([`crate::events::Event::ongoing`]).
    pub held: Option<std::time::Duration>,
    /// Live threads bound to it (its home population).
    pub homed: usize,
    /// Unstarted threads in its stealable run queue.
    pub queued: usize,
}

/// Live virtual threads by state, summed over every runtime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateCounts {
    /// Created or started, never run yet.
    pub new: usize,
    /// Waiting for a carrier (in a run queue, or yielding).
    pub runnable: usize,
    /// Mounted on a carrier.
    pub running: usize,
    /// Parked (or about to).
    pub parked: usize,
    /// Blocked while holding a carrier.
    pub pinned: usize,
}

impl StateCounts {
    /// Every live thread counted.
    pub fn total(&self) -> usize {
        self.new + self.runnable + self.running + self.parked + self.pinned
    }

    fn add(&mut self, s: State) {
        match s {
            State::New | State::Started => self.new += 1,
            State::Runnable | State::Yielding => self.runnable += 1,
            State::Running => self.running += 1,
            State::Parking | State::Parked => self.parked += 1,
            State::Pinned => self.pinned += 1,
            State::Terminated => {}
        }
    }
}

/// Live virtual threads by state: one pass over the registry reading one
/// atomic per thread (about a millisecond per 100,000 threads).
///
/// ```
/// let h = weft::spawn(|| weft::sleep(std::time::Duration::from_secs(30)));
/// while h.thread().state() != weft::State::Parked {
///     std::thread::yield_now();
/// }
/// assert!(weft::state_counts().parked >= 1);
/// # h.thread().interrupt(); let _ = h.join();
/// ```
pub fn state_counts() -> StateCounts {
    let mut c = StateCounts::default();
    for_each_thread(|t| c.add(state_of(t)));
    c
}

/// What one runtime's carriers are doing, gathered from its figures and
/// one pass over the threads.
#[derive(Default)]
struct Carriers {
    core: usize,
    /// Spare carriers on duty (listed even when idle).
    spares: usize,
    queued: Vec<usize>,
    homed: Vec<usize>,
    running: Vec<Option<(ThreadId, Option<String>, State)>>,
}

fn slot<T: Default + Clone>(v: &mut Vec<T>, i: usize) -> &mut T {
    if v.len() <= i {
        v.resize(i + 1, T::default());
    }
    &mut v[i]
}

/// Every carrier of every runtime: busy, idle, stalled or pinned, the
/// thread it runs, its home population and run queue. Core carriers are
/// always listed; spares as many as are on duty (a runtime counts them,
/// the slots are taken lowest first) and any other slot that runs, is
/// held, or has threads bound to it or queued.
///
/// ```
/// let rt = weft::default_runtime().unwrap();
/// let all = weft::carriers();
/// assert!(all.iter().filter(|c| !c.spare).count() >= rt.parallelism());
/// ```
pub fn carriers() -> Vec<CarrierInfo> {
    let rts = runtimes();
    let which: HashMap<usize, usize> = rts
        .iter()
        .enumerate()
        .map(|(i, r)| (Arc::as_ptr(r) as usize, i))
        .collect();
    let mut views: Vec<Carriers> = rts
        .iter()
        .map(|r| {
            let s = r.stats();
            Carriers {
                core: s.carriers_active.saturating_sub(s.carriers_spare),
                spares: s.carriers_spare,
                queued: s.run_queue_local,
                ..Carriers::default()
            }
        })
        .collect();
    let mounted = mounted_carriers();
    for t in all_threads() {
        let Some(sched) = t.runtime_shared() else {
            continue;
        };
        let sched: &Shared = sched;
        let Some(v) = which
            .get(&(sched as *const Shared as usize))
            .and_then(|&r| views.get_mut(r))
        else {
            continue;
        };
        let state = state_of(&t);
        if state == State::Terminated {
            continue;
        }
        if let Some(h) = t.home_carrier() {
            *slot(&mut v.homed, h) += 1;
        }
        if let (State::Running | State::Pinned, Some(&i)) =
            (state, mounted.get(&(RecordArc::as_ptr(&t) as usize)))
            && sched.carrier_running(i, &t).is_some()
        {
            let th = Thread { inner: t.clone() };
            *slot(&mut v.running, i) = Some((th.id(), th.name().map(str::to_owned), state));
        }
    }
    let mut out = Vec::new();
    for (r, (rt, v)) in rts.iter().zip(views).enumerate() {
        let slots = v
            .core
            .max(v.queued.len())
            .max(v.homed.len())
            .max(v.running.len());
        for i in 0..slots {
            let thread = v.running.get(i).cloned().flatten();
            let state = match (rt.carrier_held(i), &thread) {
                (true, Some((_, _, State::Pinned))) => CarrierState::Pinned,
                (true, _) => CarrierState::Stalled,
                (false, Some(_)) => CarrierState::Busy,
                (false, None) => CarrierState::Idle,
            };
            let held = match (&state, &thread) {
                (CarrierState::Stalled, Some((id, _, _))) => {
                    crate::events::holding(id.as_u64().get())
                }
                _ => None,
            };
            let info = CarrierInfo {
                held,
                runtime: r,
                runtime_name: rt.name.clone(),
                index: i,
                spare: i >= v.core,
                state,
                thread,
                homed: v.homed.get(i).copied().unwrap_or(0),
                queued: v.queued.get(i).copied().unwrap_or(0),
            };
            if i < v.core + v.spares
                || info.state != CarrierState::Idle
                || info.homed > 0
                || info.queued > 0
            {
                out.push(info);
            }
        }
    }
    out
}
