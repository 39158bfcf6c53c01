//! A carrier: an OS thread that mounts virtual threads, one at a time.
//!
//! [`Carrier`] is the carrier's own state, reachable only from its OS
//! thread (a thread-local points at it while [`run_carrier`] runs; see
//! [`carrier`]). Its loop ([`Carrier::main_loop`]) takes work in this
//! order: due timers, the `next` slot, the inbox and the stealable queue in
//! turn, the injector, then other carriers' queues (searching), and finally
//! sleeps. Every method of `Carrier` is in one of this module's files, one
//! concern each:
//!
//! - `mod.rs` (this file): the state, the thread-local pointer to it, the
//!   carrier thread's body and its loop, and the local queues (where a
//!   woken or yielding thread goes, what runs next, due timers).
//! - `mount.rs`: running one thread — mounting it, resuming it, and
//!   carrying out what it asked for when it suspends (the suspend protocol
//!   of `crate::park`), or ending it.
//! - `stack_cache.rs`: the stacks a carrier keeps for new threads.
//! - `steal.rs`: placement of new threads and stealing from others.
//! - `sleep.rs`: searching, watching the inbox, polling the readiness
//!   source, and sleeping (the carrier's side of `idle.rs`).
//! - `retire.rs`: a carrier off duty — a spare leaving, or a core
//!   carrier resting (`sched/rest.rs`) — serving only its own threads
//!   that stay.
//! - `sim.rs`: the loop of a simulated runtime's one carrier, in
//!   place of the main loop (`sched/sim.rs`).
//!
//! Who touches what: every field of [`Carrier`] belongs to the carrier's
//! own OS thread (`Cell`s, no atomics); what others may touch is in its
//! [`CarrierSlot`](super::slot::CarrierSlot).

mod mount;
mod retire;
mod sim;
mod sleep;
mod stack_cache;
mod steal;

use crate::thread::RecordArc;
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crossbeam_deque::Worker;

use super::shared::Shared;
use super::slot::CarrierSlot;
use crate::clock::ns_of;
use crate::thread::{NO_HOME, State, set_state_of};

/// How many times in a row the `next` slot may win (invariant 3 in
/// `sched/mod.rs`).
pub(super) const NEXT_STREAK_CAP: u32 = 16;
/// Every this many ticks a carrier looks at the injector (and the
/// readiness source) first (invariant 4).
pub(super) const GLOBAL_CHECK_INTERVAL: u32 = 61;
/// Rounds a searching carrier makes over the queues before it sleeps.
///
/// Back to back: it never yields its core (`sched_yield`) nor spins
/// waiting for work (ARCHITECTURE.md, "Sharing the cores"). Beside busy
/// processes a yield hands the core to one of them for the rest of its time
/// slice — with a yield between rounds, a cross-carrier ping-pong took
/// 1.05–4.8 ms per round trip beside two `yes` processes, 4.6–9.0 µs
/// without (Tokio 4.0–47 µs in the same run). On a quiet machine a spin
/// takes the core the producer needs: 16 rounds of 32 pauses before
/// sleeping made the same ping-pong 36 µs, where sleeping at once takes
/// 6–7 µs.
const SPIN_ROUNDS: u32 = 4;

/// Per-carrier state, reachable from the carrier's own thread only.
pub(crate) struct Carrier {
    pub(super) index: usize,
    pub(super) shared: Arc<Shared>,
    pub(super) local: Worker<RecordArc>,
    pub(super) next_streak: Cell<u32>,
    pub(super) tick: Cell<u32>,
    pub(super) searching: Cell<bool>,
    pub(super) rng: Cell<u64>,
    /// Free stack slots of the default pool, kept here to avoid its lock.
    pub(super) stack_cache: RefCell<Vec<usize>>,
    /// The `dtv`s of areas whose threads ended here, for the next areas
    /// made here (`tls::init_area`; at most [`SPARE_DTVS`]).
    pub(super) spare_dtvs: RefCell<Vec<crate::tls::SpareDtv>>,
    /// Threads of this carrier suspended while unwinding a panic (each
    /// leaves the OS thread's panic count raised; see
    /// `crate::thread::panicking`).
    pub(super) suspended_unwinders: Cell<u32>,
    /// Threads that finished here and are still registered: they leave the
    /// registry in batches ([`Carrier::flush_finished`]), one lock per
    /// shard instead of one per thread (the shard's lock line otherwise
    /// bounces between the spawner and this carrier on every thread).
    pub(super) finished: RefCell<Vec<RecordArc>>,
    /// Whether this carrier polls the readiness source (`netpoll`, "Who
    /// polls"): while on duty ([`Carrier::start_polling`]), unless
    /// `WEFT_NETPOLL=thread`.
    pub(super) polls: Cell<bool>,
    /// The monitor lowered this OS thread's priority during a hold
    /// (`sched/demote.rs`): it leaves its slot ([`Carrier::leave`]).
    pub(super) leaving: Cell<bool>,
    /// The layout of virtual threads' own thread-local areas (`tls/`),
    /// or `None`: threads share this carrier's thread-locals.
    pub(super) areas: Option<&'static crate::tls::Layout>,
    /// Set while this carrier hands out readiness events: the threads they
    /// wake that run here are queued behind the others (`Shared::schedule`)
    /// instead of each taking the `next` slot.
    pub(super) polling: Cell<bool>,
}

/// Finished threads a carrier unregisters at once (see `Carrier::finished`);
/// it also flushes whenever it runs out of local work, so a terminated
/// thread stays registered (hidden from readers) only while its carrier is
/// busy, and never while it sleeps.
const FINISHED_BATCH: usize = 64;

/// Spare `dtv`s a carrier keeps ([`Carrier::spare_dtvs`]): as many as the
/// stacks it keeps, whose next threads they serve (80 bytes each with the
/// executable's and libc's thread-locals).
const SPARE_DTVS: usize = 64;

std::thread_local! {
    static CARRIER: Cell<*const Carrier> = const { Cell::new(std::ptr::null()) };
}

/// The carrier running on this OS thread, if any.
///
/// `#[inline(never)]`: virtual threads call this, and they may migrate to
/// another carrier at any suspension; the TLS address must be recomputed on
/// every call, never cached by the optimiser across a switch.
#[inline(never)]
pub(crate) fn carrier() -> Option<&'static Carrier> {
    let p = CARRIER.with(Cell::get);
    // SAFETY: the pointer is set by `run_carrier` to a Carrier that lives on
    // that function's stack for as long as the pointer is set (it is reset
    // before the Carrier is dropped), and only this OS thread reads it.
    unsafe { p.as_ref() }
}

impl Carrier {
    pub(super) fn me(&self) -> &CarrierSlot {
        &self.shared.carriers[self.index]
    }

    pub(super) fn push_next(&self, thread: RecordArc) {
        set_state_of(&thread, State::Runnable);
        let new = RecordArc::into_raw(thread).cast_mut();
        let old = self.me().next.swap(new, Ordering::AcqRel);
        if !old.is_null() {
            // SAFETY: see `CarrierSlot::take_next`.
            self.push_back(unsafe { RecordArc::from_raw(old) });
        }
    }

    /// Queues a thread woken on this carrier: in the `next` slot (it runs
    /// as soon as the current one suspends), or at the back while this
    /// carrier hands out readiness events (`polling`), so that a batch of
    /// them runs in order instead of each displacing the last.
    pub(super) fn push_woken(&self, thread: RecordArc) {
        if self.polling.get() {
            set_state_of(&thread, State::Runnable);
            self.push_back(thread);
        } else {
            self.push_next(thread);
        }
    }

    /// Queues a runnable thread at the back: a bound thread in this
    /// carrier's inbox (only this carrier may run it, so no one else is
    /// told), an unbound one in the stealable queue.
    pub(super) fn push_back(&self, thread: RecordArc) {
        if thread.home.load(Ordering::Relaxed) == NO_HOME {
            self.local.push(thread);
            self.shared.notify_work();
        } else {
            self.me().inbox.push(thread);
        }
    }

    /// Local work: timers, the next slot, the local queue, the injector.
    pub(super) fn find_local(&self) -> Option<RecordArc> {
        let tick = self.tick.get().wrapping_add(1);
        self.tick.set(tick);
        if tick.is_multiple_of(GLOBAL_CHECK_INTERVAL) {
            // Readiness must not wait behind a long queue (`netpoll`, rule 1).
            self.poll_io();
            if let Some(t) = self.steal_injector() {
                return Some(t);
            }
        }
        self.fire_due_timers();
        let me = self.me();
        if let Some(t) = me.take_next() {
            let streak = self.next_streak.get();
            if streak < NEXT_STREAK_CAP {
                self.next_streak.set(streak + 1);
                return Some(t);
            }
            self.push_back(t);
        }
        self.next_streak.set(0);
        // Bound threads (inbox) and new ones (stealable queue) take turns,
        // so neither kind can starve the other.
        let t = if tick & 1 == 0 {
            me.pop_home().or_else(|| self.local.pop())
        } else {
            self.local.pop().or_else(|| me.pop_home())
        };
        t.or_else(|| self.steal_injector())
    }

    /// Runnable work bound to this carrier: due timers, `next`, the inbox.
    pub(super) fn find_home(&self) -> Option<RecordArc> {
        self.fire_due_timers();
        let me = self.me();
        me.take_next().or_else(|| me.pop_home())
    }

    /// Fires this carrier's due timers (`CarrierSlot::fire_timers`): bound
    /// threads go to its inbox, unbound ones to its stealable queue, and
    /// other carriers are told if any went there.
    pub(super) fn fire_due_timers(&self) {
        let me = self.me();
        if me.timer_next.load(Ordering::Relaxed) == u64::MAX {
            return;
        }
        let now = crate::clock::now();
        if !me.timer_due(ns_of(now)) {
            return;
        }
        if me.fire_timers_home(now, |t| self.local.push(t)) > 0 {
            self.shared.notify_work();
        }
    }

    pub(super) fn is_spare(&self) -> bool {
        self.index >= self.shared.core
    }

    /// Unregisters the threads that finished here (see `finished`).
    pub(super) fn flush_finished(&self) {
        let mut batch = self.finished.take();
        if !batch.is_empty() {
            crate::thread::registry::unregister_batch(&mut batch);
            // Keep the allocation for the next batch.
            *self.finished.borrow_mut() = batch;
        }
    }

    pub(super) fn main_loop(&self) {
        loop {
            if self.leaving.get() {
                self.leave();
                return;
            }
            if self.me().rest.load(Ordering::Relaxed) {
                self.stop_searching();
                self.rest();
                continue;
            }
            if let Some(t) = self.find_local() {
                self.stop_searching();
                self.run(t);
                continue;
            }
            if self.poll_io() {
                continue;
            }
            self.flush_finished();
            if self.become_searching() {
                let mut found = None;
                for round in 0..SPIN_ROUNDS {
                    // Our own bound threads first: no one else may run them.
                    if let Some(t) = self.me().pop_home() {
                        found = Some(t);
                        break;
                    }
                    // Take another carrier's `next` only in the last round,
                    // so a carrier about to run its own usually gets to.
                    if let Some(t) = self.steal(round + 1 == SPIN_ROUNDS) {
                        found = Some(t);
                        break;
                    }
                }
                if let Some(t) = found {
                    self.stop_searching();
                    self.run(t);
                    continue;
                }
            } else if let Some(t) = self.steal_injector() {
                self.run(t);
                continue;
            }
            // Timers that are due are local work; look again before sleeping.
            if self
                .me()
                .next_timer()
                .is_some_and(|d| d <= crate::clock::now())
            {
                continue;
            }
            if self.shared.shutdown.load(Ordering::SeqCst) && !self.me().has_home_work() {
                if self.local.is_empty() {
                    self.stop_searching();
                    return;
                }
                continue;
            }
            if self.is_spare() && self.surplus() {
                self.stop_searching();
                if !self.retire(true) {
                    return; // keep-alive expired: the thread exits
                }
                continue;
            }
            if self.me().handoff.is_demoted() {
                // Lowered, and the end of the hold did not say so (the
                // mark went up as it ended): leave now, not lowered for good.
                self.stop_searching();
                self.leaving.set(true);
                continue;
            }
            self.sleep();
        }
    }

    /// Starts polling the readiness source (`netpoll`, "Who polls"): every
    /// carrier on duty does, spares too (when every core carrier is held,
    /// readiness would otherwise wait for the monitor's tick), unless
    /// `WEFT_NETPOLL=thread`.
    pub(super) fn start_polling(&self) {
        if !self.polls.get() && crate::netpoll::carriers_poll() && crate::netpoll::source().is_ok()
        {
            self.polls.set(true);
            crate::netpoll::carrier_joined();
        }
    }

    /// Stops polling the readiness source, if it did (`netpoll`): the last
    /// carrier to stop hands the waiter role back to the poller thread.
    pub(super) fn stop_polling(&self) {
        if self.polls.replace(false) {
            crate::netpoll::carrier_left();
            super::hand_on_waiter_role();
        }
    }

    /// Whether this carrier belongs to the runtime owning `shared`.
    pub(crate) fn owned_by(&self, shared: &Arc<Shared>) -> bool {
        Arc::ptr_eq(&self.shared, shared)
    }
}

/// Body of a carrier OS thread.
pub(crate) fn run_carrier(shared: Arc<Shared>, index: usize, local: Worker<RecordArc>) {
    let w = &shared.carriers[index];
    // A slot a spare left off duty starts serving again.
    w.handoff.reset();
    // SAFETY: gettid has no preconditions.
    w.tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
    crate::stack::ensure_altstack();
    let shared_areas = shared.thread_local_areas;
    let shared_sim = shared.sim.clone();
    let carrier = Carrier {
        index,
        shared,
        local,
        next_streak: Cell::new(0),
        tick: Cell::new(0),
        searching: Cell::new(false),
        rng: Cell::new(
            0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
        ),
        stack_cache: RefCell::new(Vec::new()),
        spare_dtvs: RefCell::new(Vec::new()),
        suspended_unwinders: Cell::new(0),
        finished: RefCell::new(Vec::new()),
        polls: Cell::new(false),
        leaving: Cell::new(false),
        polling: Cell::new(false),
        areas: match shared_areas {
            true => crate::tls::layout(),
            false => None,
        },
    };
    carrier.shared.note_thread_locals(carrier.areas.is_some());
    if carrier.areas.is_some() {
        // Before this carrier makes its first area: how `tls`'s `dlopen`
        // pins a virtual thread (once per carrier, not per spawn).
        crate::tls::set_pin(pin_mounted);
    }
    if shared_sim.is_none() {
        carrier.start_polling();
    }
    CARRIER.with(|c| c.set(&carrier));
    match &carrier.shared.sim {
        Some(sim) => {
            // SAFETY: `sim` (and its clock) lives in `Shared`, which this
            // function holds until after `uninstall` below, and the areas
            // seeded with it belong to this runtime's threads, which hold
            // it too (through their runtime handle).
            unsafe { crate::clock::install(&sim.clock) };
            carrier.simulate(sim);
            // Ended (or deadlocked: then still serving dumps and late
            // unparks) until the runtime shuts down.
            carrier.main_loop();
            crate::clock::uninstall();
        }
        None => carrier.main_loop(),
    }
    carrier.stop_polling();
    carrier.flush_finished();
    CARRIER.with(|c| c.set(std::ptr::null()));
    let mut cache = carrier.stack_cache.take();
    carrier.shared.stacks.release_batch(&mut cache);
    carrier.spare_dtvs.take();
    let left = carrier.leaving.get();
    let Carrier { shared, local, .. } = carrier;
    if index >= shared.core {
        shared.return_slot(index, local);
    } else if left {
        // A core slot whose lowered OS thread left: a new one serves it
        // (started by the starter, at the runtime's priority).
        shared.restart_core(index, local);
    }
    // Lowered or not (a runtime may shut down during a lowered hold): this
    // OS thread starts nothing more.
    // (Its own id: a core slot's new OS thread may have stored its own in
    // the slot already.)
    // SAFETY: gettid has no preconditions.
    super::starter::exited(unsafe { libc::gettid() });
}

/// Pins (`true`) or unpins the calling virtual thread, as a `weft::pinned`
/// section does: for `tls`'s `dlopen`, which runs glibc's load on the
/// carrier's TCB and must not be unmounted meanwhile (`tls::set_pin`, set
/// by every carrier that makes areas before it makes one).
fn pin_mounted(on: bool) {
    if let Some(t) = crate::thread::current_virtual() {
        let d = t.pin_depth.get();
        t.pin_depth
            .set(if on { d + 1 } else { d.saturating_sub(1) });
    }
}
