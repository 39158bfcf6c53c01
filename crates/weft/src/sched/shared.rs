//! [`Shared`]: the scheduler state of one runtime, and the decisions that
//! involve every carrier — where a woken or new thread goes
//! ([`Shared::schedule`], [`Spawner`]), waking a carrier for new work,
//! bringing in spare carriers (compensation) — and the list of live
//! runtimes.
//!
//! Who touches what is written on each field: the queues and slots are
//! shared (atomics, locks, `crossbeam` deques), the counts are read
//! relaxed by metrics and the monitor, and the orderings that matter (the
//! idle protocol, compensation) are argued where they are used.

use crate::thread::RecordArc;
use crate::unpoison::Unpoison;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crossbeam_deque::{Injector, Stealer, Worker};
use crossbeam_utils::CachePadded;

use super::carrier::{carrier, run_carrier};
use super::idle::Idle;
use super::monitor::Monitor;
use super::slot::CarrierSlot;
use crate::stack::StackPool;
use crate::thread::{NO_HOME, State, VThread, set_state_of};

/// State shared by all carriers of one runtime.
pub(crate) struct Shared {
    pub(crate) injector: Injector<RecordArc>,
    pub(super) stealers: Box<[Stealer<RecordArc>]>,
    pub(super) carriers: Box<[CarrierSlot]>,
    pub(super) idle: Idle,
    pub(crate) shutdown: AtomicBool,
    pub(crate) stacks: &'static StackPool,
    /// Virtual threads ever started: counted by spawners, on a cache line
    /// of its own, so that a spawning loop and the carriers finishing its
    /// threads do not write one line by turns (as one `live` counter did,
    /// once per thread each way).
    pub(crate) started: CachePadded<AtomicUsize>,
    /// Virtual threads finished (or never to run): counted by carriers.
    pub(crate) finished: CachePadded<AtomicUsize>,
    /// Successful steals (batches).
    pub(crate) steals: AtomicUsize,
    /// New threads handed to another carrier at their first run
    /// (`Carrier::placement`).
    pub(crate) placed: AtomicUsize,
    pub(super) monitor: Monitor,
    /// Carriers that always run (the runtime's parallelism).
    pub(super) core: usize,
    /// Upper bound on carriers including spares (`max_pool_size`).
    pub(super) max: usize,
    /// Carriers in their main loop (core + spares on duty).
    pub(super) active: AtomicUsize,
    /// One past the highest slot a carrier has ever run in: the core
    /// carriers' at first, raised before a spare's thread starts. Searches
    /// look at these slots' queues only, not at all `max` of them (each
    /// look at a queue pins crossbeam's epoch, a locked instruction: with
    /// the default 256 slots a carrier going idle spent 40 % of a
    /// cross-carrier ping-pong pinning for queues no carrier ever had).
    /// Spare slots are handed out lowest first, so this stays at `core` +
    /// the most spares ever on duty at once.
    pub(super) slots_used: AtomicUsize,
    /// Carriers in a pinned wait, or counted as stalled by the monitor.
    /// `active - blocked` is what really runs (see `stall.rs`).
    pub(super) blocked: crate::stall::Blocked,
    /// Run queues of slots without a thread (spares not started or retired).
    pub(super) free_slots: Mutex<Vec<(usize, Worker<RecordArc>)>>,
    /// Spare slots whose threads wait in keep-alive for duty.
    pub(super) idle_spares: Mutex<Vec<usize>>,
    /// Carrier thread name prefix.
    pub(crate) name: String,
    /// How long one thread may hold a carrier before the monitor calls it a
    /// stall (WEFT_STALL_THRESHOLD).
    pub(crate) stall_threshold: Duration,
    /// How long an idle spare carrier waits for duty before it exits.
    pub(super) spare_keepalive: Duration,
    /// Spare carriers ever started (metrics).
    pub(crate) spares_started: AtomicUsize,
    /// The nice value the monitor lowers a held carrier's OS thread to
    /// (`demote.rs`); 0: never.
    pub(super) held_nice: u8,
    /// Carriers' OS threads lowered so far (metrics).
    pub(crate) demoted: AtomicUsize,
    /// Whether the monitor may rest core carriers (`sched/rest.rs`;
    /// `RuntimeBuilder::rest_carriers`).
    pub(super) rest_on: bool,
    /// The CPUs the runtime may use when it was built (affinity mask and
    /// CPU quota: `cpu_limit.rs`), for the rest rule.
    pub(super) cpus: usize,
    /// Core carriers resting now (written by the monitor).
    pub(crate) resting: AtomicUsize,
    /// Times a core carrier was sent to rest.
    pub(crate) rests: AtomicUsize,
    /// Whether the monitor may have carriers cover for each other
    /// (`sched/rest.rs`, rule 4; `RuntimeBuilder::cover_carriers`).
    pub(super) cover_on: bool,
    /// Whether they do now: a core carrier with nothing to do takes from
    /// the inbox of another (written by the monitor, read relaxed by
    /// searching carriers: a stale read costs one search a look, or
    /// skips one).
    pub(crate) covering: AtomicBool,
    /// `covering` was set by a test (`Runtime::set_covering_for_tests`):
    /// the monitor leaves it alone.
    pub(crate) covering_forced: AtomicBool,
    /// Times a carrier took threads from another's inbox.
    pub(crate) covers: AtomicUsize,
    /// Weak self-reference, so compensation can start carrier threads.
    pub(super) me_weak: OnceLock<std::sync::Weak<Shared>>,
    /// Started threads may move between carriers (the `unsafe` opt-in,
    /// `RuntimeBuilder::allow_migration`); otherwise each is bound to the
    /// carrier that first ran it.
    pub(crate) migrate: bool,
    /// Each virtual thread gets a thread-local area of its own (`tls/`),
    /// where the platform allows; never together with `migrate`.
    pub(crate) thread_local_areas: bool,
    /// Why this runtime's virtual threads share their carriers'
    /// thread-locals (`None`: each has an area of its own); set by the
    /// first carrier to start, which says it on stderr
    /// ([`Shared::note_thread_locals`]).
    pub(crate) shared_thread_locals: OnceLock<Option<&'static str>>,
    /// The simulation this runtime runs (`sched/sim.rs`): one
    /// carrier, no poller, no monitor, no spares.
    pub(crate) sim: Option<Arc<super::sim::Simulation>>,
}

/// Scheduler settings from the runtime builder.
pub(crate) struct SchedConfig {
    pub(crate) core: usize,
    pub(crate) max: usize,
    pub(crate) name: String,
    pub(crate) stall_threshold: Duration,
    pub(crate) spare_keepalive: Duration,
    /// See `Shared::held_nice`.
    pub(crate) held_nice: u8,
    pub(crate) migrate: bool,
    /// See `Shared::thread_local_areas`.
    pub(crate) thread_local_areas: bool,
    /// See `Shared::rest_on`.
    pub(crate) rest: bool,
    /// See `Shared::cover_on`.
    pub(crate) cover: bool,
    /// See `Shared::cpus`.
    pub(crate) cpus: usize,
    /// See `Shared::sim`.
    pub(crate) sim: Option<Arc<super::sim::Simulation>>,
}

impl Shared {
    /// Creates the shared state for `core` carriers and up to `max` in all.
    /// Returns the run queues of the core carriers.
    pub(crate) fn new(
        cfg: SchedConfig,
        stacks: &'static StackPool,
    ) -> (Arc<Shared>, Vec<Worker<RecordArc>>) {
        let SchedConfig {
            core,
            max,
            name,
            stall_threshold,
            spare_keepalive,
            held_nice,
            migrate,
            thread_local_areas,
            rest,
            cover,
            cpus,
            sim,
        } = cfg;
        let mut locals: Vec<Worker<RecordArc>> = (0..max).map(|_| Worker::new_fifo()).collect();
        let stealers = locals.iter().map(Worker::stealer).collect();
        let carriers = (0..max).map(|_| CarrierSlot::new()).collect();
        let spare_locals: Vec<Worker<RecordArc>> = locals.split_off(core);
        let free_slots = spare_locals
            .into_iter()
            .enumerate()
            .map(|(i, w)| (core + i, w))
            .rev()
            .collect();
        let shared = Arc::new(Shared {
            injector: Injector::new(),
            stealers,
            carriers,
            idle: Idle::new(core),
            shutdown: AtomicBool::new(false),
            stacks,
            started: CachePadded::new(AtomicUsize::new(0)),
            finished: CachePadded::new(AtomicUsize::new(0)),
            steals: AtomicUsize::new(0),
            placed: AtomicUsize::new(0),
            monitor: Monitor {
                thread: OnceLock::new(),
                deep_sleep: AtomicBool::new(false),
                poked: AtomicBool::new(false),
            },
            core,
            max,
            active: AtomicUsize::new(core),
            slots_used: AtomicUsize::new(core),
            blocked: crate::stall::Blocked::new(),
            free_slots: Mutex::new(free_slots),
            idle_spares: Mutex::new(Vec::new()),
            name,
            stall_threshold,
            spare_keepalive,
            spares_started: AtomicUsize::new(0),
            held_nice,
            demoted: AtomicUsize::new(0),
            rest_on: rest && sim.is_none(),
            cpus,
            resting: AtomicUsize::new(0),
            rests: AtomicUsize::new(0),
            cover_on: cover && sim.is_none(),
            covering: AtomicBool::new(false),
            covering_forced: AtomicBool::new(false),
            covers: AtomicUsize::new(0),
            me_weak: OnceLock::new(),
            migrate,
            thread_local_areas: thread_local_areas && !migrate,
            shared_thread_locals: OnceLock::new(),
            sim,
        });
        let _ = shared.me_weak.set(Arc::downgrade(&shared));
        (shared, locals)
    }

    /// Records whether this runtime's threads have areas of their own
    /// (`areas`: the layout the calling carrier found, `None` if it found
    /// none or areas are off), and, the first time, says on stderr when
    /// they do not: never a silent fallback to the carriers'
    /// thread-locals. Also in the metrics (`RuntimeCarriers::shared_thread_locals`).
    pub(crate) fn note_thread_locals(&self, areas: bool) {
        let why = if areas {
            None
        } else if self.migrate {
            Some("the runtime allows migration (RuntimeBuilder::allow_migration)")
        } else if !self.thread_local_areas {
            Some("asked for with RuntimeBuilder::carrier_thread_locals")
        } else if std::env::var_os("WEFT_THREAD_LOCALS").is_some_and(|v| v == "carrier") {
            Some("asked for with WEFT_THREAD_LOCALS=carrier")
        } else {
            Some(
                "this platform has no thread-local areas (x86_64 Linux with glibc only, \
                 and glibc's layout must be recognised)",
            )
        };
        if self.shared_thread_locals.set(why).is_ok()
            && let Some(why) = why
        {
            eprintln!(
                "weft: runtime `{}`: virtual threads share their carriers' thread-locals ({why}): \
                 a thread_local! value is per carrier, not per virtual thread",
                self.name
            );
        }
    }

    /// Whether this runtime runs a simulation that has not ended: its
    /// threads must not be touched from outside (a dump holding one would
    /// change the run).
    pub(crate) fn simulation_running(&self) -> bool {
        self.sim.as_ref().is_some_and(|s| s.running())
    }

    /// Called by a finishing thread just before it completes its join, so
    /// that whoever joins it never still counts it live.
    pub(crate) fn thread_finished(&self) {
        self.finished.fetch_add(1, Ordering::Relaxed);
    }

    /// Virtual threads started and not yet finished. Reads the finished
    /// count first: a thread finishes after it started, so a count that
    /// includes its finish, read before the started count, never makes the
    /// difference negative for a reader ordered after both (one that
    /// joined the thread); for the others it is a snapshot, clamped at 0.
    pub(crate) fn live_threads(&self) -> usize {
        let finished = self.finished.load(Ordering::SeqCst);
        self.started.load(Ordering::SeqCst).saturating_sub(finished)
    }

    /// Carriers in their main loop right now (core + spares on duty).
    pub(crate) fn active_carriers(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Whether carrier `i` is stalled: held by one thread past the stall threshold
    /// (the monitor's mark) or in a pinned wait: the threads bound to it
    /// wait.
    pub(crate) fn carrier_held(&self, i: usize) -> bool {
        self.carriers
            .get(i)
            .is_some_and(|w| w.stalled.is_set() || w.pinned.load(Ordering::Relaxed))
    }

    /// Carrier `i`'s kernel thread id and switch count, if it is running
    /// `thread` right now (for a dump to sample its stack, and to check
    /// afterwards that it was still the same thread).
    pub(crate) fn carrier_running(&self, i: usize, thread: &VThread) -> Option<(i32, u64)> {
        let w = self.carriers.get(i)?;
        let sw = w.switches.load(Ordering::SeqCst);
        std::ptr::eq(w.mounted.load(Ordering::SeqCst), thread)
            .then(|| (w.tid.load(Ordering::Relaxed), sw))
    }

    /// Started threads moved off a stalled carrier so far (handoff).
    pub(crate) fn threads_moved(&self) -> usize {
        self.carriers
            .iter()
            .map(|w| w.moved.load(Ordering::Relaxed))
            .sum()
    }

    /// Carriers blocked or stalled right now.
    pub(crate) fn blocked_carriers(&self) -> usize {
        self.blocked.get()
    }

    /// Makes `thread`, a thread that has run before, runnable again.
    ///
    /// A thread bound to a carrier (affinity, the default) goes back to that
    /// carrier: to its `next` slot when the waker runs there (it runs as
    /// soon as the current thread suspends), to its inbox otherwise,
    /// kicking the carrier if it sleeps — unless that carrier hands its
    /// threads off (held past the stall threshold, or a spare off duty) and
    /// the thread may move: then it goes where an unbound thread goes. An
    /// unbound thread (moved, or on a runtime that allows migration) goes
    /// to the waker's `next` slot on one of this runtime's carriers that is
    /// not held, to the injector from anywhere else.
    pub(crate) fn schedule(&self, thread: RecordArc) {
        let home = thread.home.load(Ordering::Relaxed);
        let here = carrier().filter(|c| std::ptr::eq(Arc::as_ptr(&c.shared), self));
        if home != NO_HOME {
            let slot = &self.carriers[home as usize];
            // Handoff rule 2 (ARCHITECTURE.md): a stale read of `handoff`
            // queues the thread behind a carrier that has just been found
            // held, where the monitor's next tick takes it.
            if !(slot.handing_off() && slot.release(&thread)) {
                // A carrier back from rest takes threads off this one
                // until their populations are level (`sched/rest.rs`).
                if let Some(to) = slot.shed_target(&self.carriers)
                    && slot.release(&thread)
                {
                    set_state_of(&thread, State::Runnable);
                    self.carriers[to].push_home(thread);
                    return;
                }
                match here {
                    Some(c) if c.index == home as usize => c.push_woken(thread),
                    _ => {
                        set_state_of(&thread, State::Runnable);
                        slot.push_home(thread);
                    }
                }
                return;
            }
        }
        if let Some(c) = here
            && !c.me().pinned.load(Ordering::Relaxed)
            && !c.me().handing_off()
        {
            c.push_woken(thread);
            return;
        }
        self.injector.push(thread);
        self.notify_work();
    }

    /// Rests core carrier `i` (`sched/rest.rs`; the monitor rests the
    /// highest-numbered carrier on duty, so the resting ones are always
    /// the last `resting` core slots).
    pub(super) fn rest_carrier(&self, i: usize) {
        let w = &self.carriers[i];
        if !w.rest.swap(true, Ordering::SeqCst) {
            self.resting.fetch_add(1, Ordering::Relaxed);
            self.rests.fetch_add(1, Ordering::Relaxed);
            w.kick();
        }
    }

    /// Calls core carrier `i` back from rest; with `shed`, the core
    /// carriers below it hand it woken threads until their populations
    /// are level (`CarrierSlot::shed_target`).
    pub(super) fn end_rest(&self, i: usize, shed: bool) {
        let w = &self.carriers[i];
        if w.rest.swap(false, Ordering::SeqCst) {
            self.resting.fetch_sub(1, Ordering::Relaxed);
            if shed {
                for other in &self.carriers[..i] {
                    other.shed_to.store(i as u32, Ordering::Relaxed);
                }
            }
            w.kick();
        }
    }

    /// Rests the last `n` core carriers now and calls the others back
    /// (at least one stays on duty): the monitor's two moves, at a
    /// test's command (`Runtime::set_resting_for_tests`).
    pub(crate) fn set_resting(&self, n: usize) {
        let n = n.min(self.core - 1);
        for i in 0..self.core - n {
            self.end_rest(i, true);
        }
        for i in (self.core - n..self.core).rev() {
            self.rest_carrier(i);
        }
    }

    /// Wakes a sleeping carrier if no carrier is searching for work.
    pub(crate) fn notify_work(&self) {
        // The idle protocol (invariant 5 in `mod.rs`; ARCHITECTURE.md, "The
        // three no-lost-wake-up protocols", 2): the work our caller
        // published must be visible before we read the searching and
        // sleeper counts in `Idle::carrier_to_notify`. Pairs with the SeqCst
        // read-modify-writes of a carrier going to sleep (`Idle::to_sleep`,
        // then `has_visible_work` in `Carrier::sleep`): either we see it
        // searching or asleep and wake someone, or the last searcher sees
        // our work when it re-checks the queues.
        fence(Ordering::SeqCst);
        if let Some(i) = self.idle.carrier_to_notify() {
            self.wake_carrier(i);
        } else if self.blocked.get() > 0 {
            // Every awake carrier may be blocked: bring in a spare.
            self.compensate();
        }
    }

    /// Puts one more carrier on duty if blocked carriers leave fewer than
    /// `core` running, within `max`: wakes a spare in keep-alive or starts
    /// a new one.
    pub(crate) fn compensate(self: &Shared) {
        self.compensate_up_to(self.max);
    }

    /// [`Shared::compensate`] with at most `limit` carriers on duty.
    pub(super) fn compensate_up_to(self: &Shared, limit: usize) {
        let limit = limit.min(self.max);
        let mut active = self.active.load(Ordering::SeqCst);
        loop {
            let blocked = self.blocked.get();
            if active.saturating_sub(blocked) >= self.core
                || active >= limit
                || self.shutdown.load(Ordering::SeqCst)
            {
                return;
            }
            match self.active.compare_exchange(
                active,
                active + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => break,
                Err(a) => active = a,
            }
        }
        let spare = self.idle_spares.lock().unpoison().pop();
        if let Some(i) = spare {
            let w = &self.carriers[i];
            w.spare_wake.store(true, Ordering::SeqCst);
            w.kick();
            return;
        }
        let slot = self.free_slots.lock().unpoison().pop();
        let Some((i, local)) = slot else {
            self.active.fetch_sub(1, Ordering::SeqCst);
            return;
        };
        let Some(me) = self.self_arc() else {
            self.return_slot(i, local);
            self.active.fetch_sub(1, Ordering::SeqCst);
            return;
        };
        self.spares_started.fetch_add(1, Ordering::Relaxed);
        // Before the spare can queue anything: a search that reads the
        // old value misses this queue for one round, as any stale read of
        // another carrier's queue does.
        self.slots_used.fetch_max(i + 1, Ordering::Release);
        let spawned = std::thread::Builder::new()
            .name(format!("{}-{i}", self.name))
            .spawn(move || run_carrier(me, i, local));
        if spawned.is_err() {
            // The slot's queue went down with the closure; make a new one is
            // impossible (its stealer is fixed), so the slot stays unused.
            self.active.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Starts a new OS thread for core slot `i`, whose lowered one left it
    /// (`demote.rs`): counted on duty again, so a spare that came in for it
    /// goes off duty when it runs out of work. Not while shutting down.
    pub(super) fn restart_core(&self, i: usize, local: Worker<RecordArc>) {
        if self.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let Some(me) = self.self_arc() else {
            return;
        };
        self.active.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name(format!("{}-{i}", self.name))
            .spawn(move || run_carrier(me, i, local));
        if spawned.is_err() {
            // As in `compensate_up_to`: the slot stays unused, and a spare
            // serves in its place.
            self.active.fetch_sub(1, Ordering::SeqCst);
        }
    }

    pub(super) fn return_slot(&self, i: usize, local: Worker<RecordArc>) {
        self.free_slots.lock().unpoison().push((i, local));
    }

    /// An owning handle to this Shared, from the registry kept by the
    /// monitor (compensation may run on any thread, holding only `&Shared`).
    pub(super) fn self_arc(&self) -> Option<Arc<Shared>> {
        self.me_weak.get().and_then(std::sync::Weak::upgrade)
    }

    pub(super) fn wake_carrier(&self, i: usize) {
        let w = &self.carriers[i];
        w.notified.store(true, Ordering::SeqCst);
        self.kick_carrier(i);
    }

    /// Unparks carrier `i`'s OS thread without claiming it for work (it
    /// re-reads its timers and goes back to sleep if there is nothing).
    pub(super) fn kick_carrier(&self, i: usize) {
        self.carriers[i].kick();
    }

    /// Wakes every carrier (shutdown).
    pub(crate) fn wake_all(&self) {
        while let Some(i) = self.idle.pop_any_sleeper() {
            self.wake_carrier(i);
        }
        for w in self.carriers.iter() {
            w.spare_wake.store(false, Ordering::SeqCst);
            w.kick();
        }
        self.monitor.deep_sleep.store(true, Ordering::SeqCst);
        self.wake_monitor();
    }

    pub(super) fn has_visible_work(&self) -> bool {
        // `next` slots are not counted: their carriers are awake and will
        // run them; one stuck in a long-running thread is the monitor's job.
        !self.injector.is_empty() || self.used_stealers().iter().any(|s| !s.is_empty())
    }

    /// The queues of the slots a carrier has ever run in (see `slots_used`).
    pub(super) fn used_stealers(&self) -> &[Stealer<RecordArc>] {
        &self.stealers[..self.slots_used.load(Ordering::Acquire)]
    }
}

/// Handle to spawn work into this module's queues from `runtime.rs`.
pub(crate) struct Spawner<'a>(pub(crate) &'a Arc<Shared>);

impl Spawner<'_> {
    pub(crate) fn spawn(&self, thread: RecordArc) {
        let shared = self.0;
        shared.started.fetch_add(1, Ordering::Relaxed);
        set_state_of(&thread, State::Runnable);
        if let Some(c) = carrier()
            && Arc::ptr_eq(&c.shared, shared)
            && !c.me().pinned.load(Ordering::Relaxed)
        {
            // New threads go to the back of the local queue (stealable), so a
            // spawning loop keeps running and idle carriers help.
            c.push_back(thread);
            return;
        }
        shared.injector.push(thread);
        shared.notify_work();
    }
}

/// Every runtime in the process (for dumps and metrics).
static RUNTIMES: Mutex<Vec<std::sync::Weak<Shared>>> = Mutex::new(Vec::new());

/// Lists a new runtime.
pub(crate) fn register_runtime(shared: &Arc<Shared>) {
    let mut r = RUNTIMES.lock().unpoison();
    r.retain(|w| w.strong_count() > 0);
    r.push(Arc::downgrade(shared));
}

/// Live runtimes.
pub(crate) fn runtimes() -> Vec<Arc<Shared>> {
    RUNTIMES
        .lock()
        .unpoison()
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect()
}

/// Hands the waiter role (`netpoll`) on: kicks every sleeping carrier that
/// polls, in every runtime. Called by a holder that gave the role up and
/// will not take it again — a carrier leaving (its runtime ends), the
/// `weft-poller` thread stepping aside for carriers — because a carrier
/// that found the role taken sleeps on its futex, and its monitor stops
/// ticking once every carrier sleeps: with no holder, an event would reach
/// no one. Kicked, each looks for work and, finding none, tries the role
/// again; one gets it.
///
/// No sleeper is missed: a carrier raises `sleeping` before it tries the
/// role, and the caller lowered the role before it reads `sleeping` (all
/// SeqCst), so one that failed because the caller still held the role is
/// seen here. Rare (a runtime starting or ending, a spare going off
/// duty), so every sleeper is kicked rather than chosen.
pub(crate) fn hand_on_waiter_role() {
    if !crate::netpoll::carriers_poll() {
        return;
    }
    for rt in runtimes() {
        for w in rt
            .carriers
            .iter()
            .take(rt.slots_used.load(Ordering::Acquire))
        {
            if w.sleeping.load(Ordering::SeqCst) {
                w.kick();
            }
        }
    }
}

/// Mounted threads (as `VThread` addresses) and the carrier index they run on.
pub(crate) fn mounted_carriers() -> std::collections::HashMap<usize, usize> {
    let mut m = std::collections::HashMap::new();
    for rt in runtimes() {
        for (i, w) in rt.carriers.iter().enumerate() {
            let p = w.mounted.load(Ordering::Relaxed);
            if !p.is_null() {
                m.insert(p as usize, i);
            }
        }
    }
    m
}
