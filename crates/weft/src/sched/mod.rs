//! The scheduler: carriers, run queues, work stealing and idle sleep.
//!
//! # Shape (Go's `runtime/proc.go`, in small, with affinity)
//!
//! Each carrier (an OS thread) owns
//! - a FIFO run queue of threads that have *not started yet*
//!   (`crossbeam_deque::Worker`), which others may steal half of: this is
//!   where work is balanced;
//! - an inbox of runnable threads *bound* to it (a started thread runs on
//!   its home carrier, until a handoff moves it): only this carrier takes
//!   from it — and the monitor, to hand its threads off while it is stalled;
//!   anyone may push, kicking the carrier if it sleeps;
//! - a LIFO `next` slot: a thread woken by the running thread goes there and
//!   runs as soon as the current one suspends (hand-off latency of a
//!   ping-pong is one switch, and the partner's data is still in cache);
//! - a timer heap (`timers.rs`).
//!
//! A global injector takes new threads from outside the runtime.
//!
//! Since a started thread moves only off a stalled carrier (or one that
//! waits for a CPU, while carriers cover for each other), populations are
//! balanced at a thread's first run: a carrier about to start a thread
//! while home to clearly more threads than another core carrier (one
//! picked at random: the power of two choices) binds it to that carrier
//! and hands it over instead (`Carrier::placement`). Stealing spreads the
//! *work* of unstarted threads; placement spreads the *threads*, which
//! matters once they live long (connections, sleepers): stealing alone
//! left an accept loop's 1,000 threads all on its own carrier.
//!
//! Why affinity: a woken thread finds its stack and data in its carrier's
//! caches, and a move must refresh what of the OS thread its thread-local
//! area names (`tls::adopt`). Why handoff: a carrier held by one thread
//! (CPU-bound, blocked in the kernel, pinned) would otherwise strand every
//! thread homed there. A stalled carrier's threads that may move
//! (`thread::may_move`: they have an area of their own and changed no
//! kernel per-thread state) are released (`NO_HOME`) and bind where they
//! next run; ARCHITECTURE.md, "Affinity and handoff", has the three rules
//! and the soundness argument. A runtime built with the `unsafe`
//! `RuntimeBuilder::allow_migration` leaves every thread unbound, and
//! they flow through the stealable queues as before.
//!
//! # Invariants
//!
//! 1. A thread is in at most one place at a time: a run queue, an inbox, a
//!    `next` slot, mounted on one carrier, or nowhere (parked: then
//!    whoever moves its park state out of PARKED owns it, see `park.rs`).
//! 2. A bound thread is only ever queued on, or mounted by, its home
//!    carrier: stealable queues and the injector hold unbound threads only,
//!    and a `next` slot is stolen only on a runtime that allows migration
//!    (or emptied by the monitor's handoff, which releases what it moves).
//! 3. The `next` slot may win at most [`NEXT_STREAK_CAP`] times in a row;
//!    then the slot's occupant goes to the back of the queue, so two threads
//!    ping-ponging through it cannot starve the others. The inbox and the
//!    stealable queue take turns.
//! 4. Every [`GLOBAL_CHECK_INTERVAL`] ticks a carrier takes from the
//!    injector first, so outside work cannot starve behind local work.
//! 5. No lost wake-ups of carriers. For stealable work, the `Idle` protocol
//!    below (after Tokio's `idle.rs`): work is published *before* the
//!    searching/unparked counts are read (SeqCst), and the last searcher to
//!    give up re-checks every queue *after* publishing that it gave up. For
//!    a bound thread, the inbox handshake (`CarrierSlot::sleeping`): the
//!    pusher publishes, then reads `sleeping`; the carrier raises
//!    `sleeping`, then re-reads the inbox — so either the pusher kicks, or
//!    the carrier sees the work.
//! 6. An idle carrier sleeps in the kernel (zero CPU) with a timeout to its
//!    next timer, after a bounded spin.
//!
//! # Files
//!
//! - `mod.rs` (this file): what the rest of the crate may use, re-exported,
//!   and [`simulation`] (the simulation the calling thread runs in, for
//!   callers outside `sched`); no file of `sched` imports it.
//! - `shared.rs`: [`Shared`], the state of one runtime's scheduler, and
//!   the decisions that involve every carrier: where a woken or new thread
//!   goes ([`Shared::schedule`], [`Spawner`]), waking a carrier for new
//!   work, bringing in spare carriers (compensation).
//! - `schedule.rs`: `thread::Schedule` for [`Shared`]: what a record asks
//!   of its scheduler.
//! - `slot.rs`: [`CarrierSlot`](slot::CarrierSlot), the part of a carrier
//!   that other threads may touch (`next` slot, inbox, kick word, flags,
//!   the timer queue and its firing).
//! - `carrier/`: [`Carrier`](carrier::Carrier), a carrier's own state,
//!   and every one of its methods, a file per concern: its loop and local
//!   queues (`mod.rs`), running a thread (`mount.rs`), the stack cache,
//!   placement and stealing, searching and sleeping, a spare's retirement.
//! - `idle.rs`: the idle protocol's shared state (who searches, who
//!   sleeps).
//! - `timers.rs`: the per-carrier timer queue (a data structure).
//! - `unwinding.rs`: panics carried across a suspension.
//! - `monitor.rs`: the monitor thread (stalls, blocked carriers).
//! - `schedstat.rs`: a carrier's time on a CPU and waiting for one, as the
//!   kernel counts it (how the monitor tells held from descheduled).
//! - `rest.rs`: when core carriers rest on shared cores (the rule; the
//!   monitor measures and acts, `carrier/retire.rs` rests).
//! - `report.rs`: the monitor's reports, written up and recorded off the
//!   monitor (`weft-reports`).
//! - `blocked.rs`: a carrier's blocking section around a wait that holds
//!   it (a pinned park, a kernel futex wait, a C lock found taken).
//! - `demote.rs`: lowering the OS thread of a carrier a computation holds
//!   beside short threads (the monitor's judgement is in `monitor.rs`).
//! - `starter.rs`: Weft's `pthread_create`, and the starter thread that
//!   starts OS threads for a lowered carrier at the runtime's priority.
//! - `stats.rs`: a plain snapshot of the figures, for `metrics` to read.

mod blocked;
mod carrier;
mod demote;
mod idle;
mod monitor;
mod report;
mod rest;
mod schedstat;
mod schedule;
mod shared;
mod sim;
mod slot;
mod starter;
mod stats;
mod timers;
mod unwinding;

#[cfg(feature = "transparent")]
pub(crate) use blocked::hold_carrier_loop;
pub(crate) use carrier::{carrier, run_carrier};
pub(crate) use monitor::run_monitor;
pub(crate) use shared::{
    SchedConfig, Shared, Spawner, hand_on_waiter_role, mounted_carriers, register_runtime, runtimes,
};
#[cfg(feature = "transparent")]
pub(crate) use sim::refuses_real_socket;
pub(crate) use sim::{End, Limits, Panicked, Policy, Simulation, Stream};

/// The simulation the calling thread runs in: a thread of a simulated
/// runtime (or its carrier), else `None`.
pub(crate) fn simulation() -> Option<&'static Simulation> {
    if !crate::clock::any_virtual() {
        return None;
    }
    carrier().and_then(|c| c.shared.sim.as_deref())
}
