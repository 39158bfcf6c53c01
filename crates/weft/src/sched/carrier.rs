//! A carrier: an OS thread that mounts virtual threads, one at a time.
//!
//! [`Carrier`] is the carrier's own state, reachable only from its OS
//! thread (a thread-local points at it while [`run_carrier`] runs): the
//! stealable run queue's owner end, the mounted thread, the stack cache.
//! Its loop takes work in this order: due timers, the `next` slot, the inbox
//! and the stealable queue in turn, the injector, then other carriers'
//! queues (searching), and finally sleeps (`idle.rs`). Mounting a thread and
//! carrying out what it asked for when it suspends (the suspend protocol of
//! `park.rs`) is [`Carrier::run`].

use crate::unpoison::Unpoison;
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use corosensei::CoroutineResult;
use crossbeam_deque::{Steal, Worker};

use super::slot::CarrierSlot;
use super::timers::TimerEntry;
use super::{Shared, set_state};
use crate::park::AfterSwitch;
use crate::stack::TRIM_DEPTH;
use crate::thread::{Kind, NO_HOME, State, Suspend, VThread};

pub(super) const NEXT_STREAK_CAP: u32 = 16;
pub(super) const GLOBAL_CHECK_INTERVAL: u32 = 61;
/// Rounds a searching carrier makes over the queues (yielding its core in
/// between) before it sleeps. Measured: a longer, time-based spin (50 µs)
/// made cross-runtime ping-pong 5x slower on 2 cores, because the spinner
/// takes the core the producer needs.
pub(super) const SPIN_ROUNDS: u32 = 4;
/// Rounds of [`Carrier::watch_home`] before an idle carrier sleeps.
pub(super) const HOME_WATCH_ROUNDS: u32 = 16;
/// Spin-loop hints per round.
pub(super) const HOME_WATCH_SPINS: u32 = 32;
/// Stacks a carrier keeps for itself before giving them back to the pool.
pub(super) const LOCAL_STACK_CACHE: usize = 64;
/// Placement (see [`Carrier::placement`]): a carrier home to fewer threads
/// than this starts every new thread itself.
const PLACE_MIN: usize = 16;
/// Placement: how many more threads than the other carrier (beyond an
/// eighth of its own) this one must be home to before it hands a new
/// thread over.
const PLACE_SLACK: usize = 4;

/// Per-carrier state, reachable from the carrier's own thread only.
pub(crate) struct Carrier {
    pub(super) index: usize,
    pub(super) shared: Arc<Shared>,
    pub(super) local: Worker<Arc<VThread>>,
    pub(super) next_streak: Cell<u32>,
    pub(super) tick: Cell<u32>,
    pub(super) searching: Cell<bool>,
    pub(super) rng: Cell<u64>,
    /// Free stack slots of the default pool, kept here to avoid its lock.
    pub(super) stack_cache: RefCell<Vec<usize>>,
    /// Threads of this carrier suspended while unwinding a panic (each
    /// leaves the OS thread's panic count raised; see
    /// `crate::thread::panicking`).
    pub(super) suspended_unwinders: Cell<u32>,
    /// Threads that finished here and are still registered: they leave the
    /// registry in batches ([`Carrier::flush_finished`]), one lock per
    /// shard instead of one per thread (the shard's lock line otherwise
    /// bounces between the spawner and this carrier on every thread).
    pub(super) finished: RefCell<Vec<Arc<VThread>>>,
    /// Whether this carrier polls the readiness source (`netpoll`, "Who
    /// polls"): a core carrier, unless `WEFT_NETPOLL=thread`.
    pub(super) polls: bool,
    /// The layout of virtual threads' own thread-local areas (`tls.rs`),
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

    pub(super) fn push_next(&self, task: Arc<VThread>) {
        set_state(&task, State::Runnable);
        let new = Arc::into_raw(task).cast_mut();
        let old = self.me().next.swap(new, Ordering::AcqRel);
        if !old.is_null() {
            // SAFETY: see `CarrierSlot::take_next`.
            self.push_back(unsafe { Arc::from_raw(old) });
        }
    }

    /// Queues a thread woken on this carrier: in the `next` slot (it runs
    /// as soon as the current one suspends), or at the back while this
    /// carrier hands out readiness events (`polling`), so that a batch of
    /// them runs in order instead of each displacing the last.
    pub(super) fn push_woken(&self, task: Arc<VThread>) {
        if self.polling.get() {
            set_state(&task, State::Runnable);
            self.push_back(task);
        } else {
            self.push_next(task);
        }
    }

    /// Queues a runnable thread at the back: a bound thread in this
    /// carrier's inbox (only this carrier may run it, so no one else is
    /// told), an unbound one in the stealable queue.
    pub(super) fn push_back(&self, task: Arc<VThread>) {
        if task.home.load(Ordering::Relaxed) == NO_HOME {
            self.local.push(task);
            self.shared.notify_work();
        } else {
            self.me().inbox.push(task);
        }
    }

    /// Takes a stack slot for a new thread, from this carrier's cache.
    pub(crate) fn alloc_default_stack(&self) -> std::io::Result<crate::stack::Stack> {
        let pool = self.shared.stacks;
        let mut cache = self.stack_cache.borrow_mut();
        if cache.is_empty() {
            pool.alloc_batch(&mut cache, LOCAL_STACK_CACHE / 2)?;
        }
        let slot = cache.pop().expect("alloc_batch returned at least one slot");
        Ok(pool.adopt(slot))
    }

    pub(super) fn recycle_stack(&self, stack: crate::stack::Stack, deep: bool) {
        if !std::ptr::eq(stack.pool(), self.shared.stacks) {
            stack.release(deep);
            return;
        }
        if deep {
            stack.trim();
        }
        let slot = stack.into_slot();
        let mut cache = self.stack_cache.borrow_mut();
        cache.push(slot);
        if cache.len() > LOCAL_STACK_CACHE {
            let mut spill: Vec<usize> = cache.drain(LOCAL_STACK_CACHE / 2..).collect();
            self.shared.stacks.release_batch(&mut spill);
        }
    }

    /// Where a thread about to run for the first time should live.
    ///
    /// A started thread never moves (affinity), so the only moment to
    /// balance the carriers' populations is its first run. Work stealing
    /// alone does not: a thread that spawns 500 short-lived-then-sleeping
    /// threads runs them all on its own carrier before an idle one wakes
    /// and steals (measured: 500 of 500 on one carrier of two), and
    /// they stay there, so after their sleep one carrier does all the work.
    ///
    /// The rule is "the power of two choices" (Mitzenmacher, *The Power of
    /// Two Choices in Randomized Load Balancing*, 2001): compare this
    /// carrier's bound population with one other core carrier's, picked at
    /// random, and hand the thread over if ours is clearly larger — more
    /// than `theirs + theirs/8 + PLACE_SLACK`, and at least `PLACE_MIN` (so
    /// fork-join of short threads, whose populations stay small, keeps its
    /// cache-warm local path). A carrier held by a blocking thread (stalled
    /// or in a pinned wait) is never chosen. The counts are read relaxed:
    /// a stale count misplaces one thread, which the next placements
    /// correct.
    pub(super) fn placement(&self) -> Option<usize> {
        let core = self.shared.core;
        let mine = self.me().homed.load(Ordering::Relaxed);
        if core < 2 || mine < PLACE_MIN {
            return None;
        }
        let to = if self.index < core {
            // One of the other core - 1, uniformly.
            let k = (self.next_rand() % (core as u64 - 1)) as usize;
            if k >= self.index { k + 1 } else { k }
        } else {
            // A spare: any core carrier.
            (self.next_rand() % core as u64) as usize
        };
        let slot = &self.shared.carriers[to];
        if slot.stalled.is_set() || slot.in_blocking.load(Ordering::Relaxed) {
            return None;
        }
        let theirs = slot.homed.load(Ordering::Relaxed);
        (theirs + theirs / 8 + PLACE_SLACK < mine).then_some(to)
    }

    pub(super) fn next_rand(&self) -> u64 {
        // xorshift64*
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Local work: timers, the next slot, the local queue, the injector.
    pub(super) fn find_local(&self) -> Option<Arc<VThread>> {
        let tick = self.tick.get().wrapping_add(1);
        self.tick.set(tick);
        if tick.is_multiple_of(GLOBAL_CHECK_INTERVAL) {
            // Readiness must not wait behind a long queue (`netpoll`, rule 1).
            self.poll_io();
            if let Some(t) = self.steal_injector() {
                return Some(t);
            }
        }
        self.fire_timers();
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

    pub(super) fn steal_injector(&self) -> Option<Arc<VThread>> {
        loop {
            match self.shared.injector.steal_batch_and_pop(&self.local) {
                Steal::Success(t) => return Some(t),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// Steals half of a random victim's queue, or from the injector; with
    /// `take_next`, also a victim's `next` slot (only in the last spin
    /// round, so a carrier about to run its own `next` usually gets to).
    pub(super) fn steal(&self, take_next: bool) -> Option<Arc<VThread>> {
        let n = self.shared.stealers.len();
        let start = (self.next_rand() % n as u64) as usize;
        for k in 0..n {
            let i = (start + k) % n;
            if i == self.index {
                continue;
            }
            loop {
                match self.shared.stealers[i].steal_batch_and_pop(&self.local) {
                    Steal::Success(t) => {
                        self.shared.steals.fetch_add(1, Ordering::Relaxed);
                        return Some(t);
                    }
                    Steal::Empty => break,
                    Steal::Retry => continue,
                }
            }
        }
        if let Some(t) = self.steal_injector() {
            return Some(t);
        }
        // A `next` slot holds a thread that has run: only a runtime that
        // allows migration lets another carrier take it.
        if take_next && self.shared.migrate {
            for k in 0..n {
                let i = (start + k) % n;
                if i != self.index
                    && let Some(t) = self.shared.carriers[i].take_next()
                {
                    self.shared.steals.fetch_add(1, Ordering::Relaxed);
                    return Some(t);
                }
            }
        }
        None
    }

    /// Runs `task` until it suspends or finishes, then carries out what it
    /// asked for (the suspend protocol).
    pub(super) fn run(&self, task: Arc<VThread>) {
        let Kind::Virtual { coro, .. } = &task.kind else {
            unreachable!("OS thread in a run queue")
        };
        // SAFETY: this carrier owns the task exclusively (invariant 1), so no
        // one else touches its coroutine while it runs or until it is
        // published below.
        let coro_ref = unsafe { &mut *coro.get() };
        // First run: take a stack from this carrier's cache (see `CoroSlot`).
        let first_stack = || {
            self.shared.stacks.fulfil();
            self.alloc_default_stack()
        };
        let first_run = matches!(coro_ref, crate::thread::CoroSlot::Pending(..));
        let bind =
            first_run && !self.shared.migrate && task.home.load(Ordering::Relaxed) == NO_HOME;
        if bind && let Some(to) = self.placement() {
            // Started there, it will live there: hand it over (its inbox
            // and kick, as for any wake-up of a bound thread). Still
            // unbound: it binds where it first runs, and until then the
            // monitor may move it on if that carrier stalls (an unbound
            // thread in an inbox has never run; `run_monitor`).
            self.shared.placed.fetch_add(1, Ordering::Relaxed);
            self.shared.carriers[to].push_home(task);
            return;
        }
        let area = self.areas.map_or(0, crate::tls::Layout::reserve);
        match coro_ref.get(first_stack, area) {
            Err(e) => {
                self.fail_start(&task, coro_ref, e);
                return;
            }
            Ok((_, Some(top))) => task.tls_tp.set(self.make_area(top, &task)),
            Ok(_) => {}
        }
        let me = self.me();
        if bind {
            // Affinity: from now on this thread runs on this carrier only.
            task.home.store(self.index as u32, Ordering::Relaxed);
            me.homed.fetch_add(1, Ordering::Relaxed);
        }
        set_state(&task, State::Running);
        crate::thread::set_mounted(Arc::as_ptr(&task));
        me.mounted
            .store(Arc::as_ptr(&task).cast_mut(), Ordering::Relaxed);
        // Single writer: a plain increment, no locked instruction.
        me.switches.store(
            me.switches.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );

        // Between stacks from here until the thread lowers the flag (see
        // `sample.rs`); lowered again below when the thread comes back.
        crate::switching::set_switching(true);
        let tp = task.tls_tp.get();
        let result = match (&mut *coro_ref, self.areas) {
            (crate::thread::CoroSlot::Running(c), Some(l)) if tp != 0 => {
                // SAFETY: `tp` is the thread's area, made on this carrier by
                // `make_area` (a started thread never changes carrier: areas
                // are off on runtimes that allow migration); resuming touches
                // no thread-local of the carrier.
                unsafe { crate::tls::run_on(l, tp, || c.resume(())) }
            }
            (crate::thread::CoroSlot::Running(c), _) => c.resume(()),
            _ => unreachable!("started above"),
        };
        crate::switching::set_switching(false);
        crate::thread::set_mounted(std::ptr::null());
        me.mounted.swap(std::ptr::null_mut(), Ordering::SeqCst);
        // The monitor may be reading through `mounted`: keep the thread
        // alive until it is done (see `CarrierSlot::mounted_identity`).
        while me.inspect.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        if me.stalled.is_set() {
            // The monitor counted us as blocked while the thread held us.
            self.shared.blocked.clear(&me.stalled);
        }
        match result {
            CoroutineResult::Yield(Suspend::Park) => self.after_park(task),
            CoroutineResult::Yield(Suspend::ParkUntil(deadline)) => {
                let seq = task.timer_seq.load(Ordering::Relaxed);
                me.push_timer(TimerEntry {
                    deadline,
                    seq,
                    task: Arc::downgrade(&task),
                });
                self.after_park(task);
            }
            CoroutineResult::Yield(Suspend::Yield) => {
                set_state(&task, State::Runnable);
                self.push_back(task);
            }
            CoroutineResult::Return(()) => {
                set_state(&task, State::Terminated);
                if task.home.load(Ordering::Relaxed) != NO_HOME {
                    me.homed.fetch_sub(1, Ordering::Relaxed);
                }
                let crate::thread::CoroSlot::Running(coro) =
                    std::mem::replace(coro_ref, crate::thread::CoroSlot::Empty)
                else {
                    unreachable!("finished thread without a coroutine")
                };
                let stack = coro.into_stack();
                let low_sp = task.low_sp.load(Ordering::Relaxed);
                let deep = stack.base_addr().saturating_sub(low_sp) > TRIM_DEPTH;
                self.recycle_stack(stack, deep);
                // `live` was decremented by the thread itself, before it
                // completed its join packet (`Runtime::thread_finished`).
                let mut finished = self.finished.borrow_mut();
                finished.push(task);
                if finished.len() >= FINISHED_BATCH {
                    drop(finished);
                    self.flush_finished();
                }
            }
        }
    }

    /// Makes the thread-local area of a thread about to start here, at the
    /// top of its stack (`top`), and returns its thread pointer. The area
    /// gets this carrier's values of the scheduler's own thread-locals:
    /// code on the thread that asks "which carrier am I on" reads them; and
    /// names `thread` as the mounted record (the only one that ever runs on
    /// this area).
    fn make_area(&self, top: usize, thread: &Arc<VThread>) -> usize {
        let l = self.areas.expect("areas are on");
        // SAFETY: this carrier runs the thread for its whole life, and the
        // `reserve()` bytes below `top` were kept out of its stack
        // (`CoroSlot::get`). The seeded thread-locals are `const` Cells of
        // this crate; the thread has not run yet. It starts "between
        // stacks" (its body lowers the flag first thing; see `switching`).
        unsafe {
            let tp = crate::tls::init_area(l, top);
            crate::tls::seed(
                tp,
                CARRIER.with(|c| c as *const _),
                Cell::new(self as *const Carrier),
            );
            crate::tls::seed(tp, crate::switching::flag(), Cell::new(true));
            crate::tls::seed(
                tp,
                crate::thread::mounted_cell(),
                Cell::new(Arc::as_ptr(thread)),
            );
            tp
        }
    }

    /// A thread that cannot get a stack ends without running: its body is
    /// dropped, which completes its join packet with `Err(why)`.
    #[cold]
    pub(super) fn fail_start(
        &self,
        task: &Arc<VThread>,
        slot: &mut crate::thread::CoroSlot,
        e: std::io::Error,
    ) {
        let why = format!(
            "weft: virtual thread #{} could not start: no stack: {e}",
            crate::thread::Thread::peek_name_id(task).1
        );
        eprintln!("{why}");
        set_state(task, State::Terminated);
        if task.home.load(Ordering::Relaxed) != NO_HOME {
            // Bound by placement before its first run (on this carrier).
            self.me().homed.fetch_sub(1, Ordering::Relaxed);
        }
        crate::thread::registry::unregister(task);
        crate::thread::set_never_ran_reason(why);
        // Dropping the body runs user `Drop`s: never unwind into the carrier.
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            *slot = crate::thread::CoroSlot::Empty;
        }));
        if dropped.is_err() {
            crate::thread::abort_after_drop_panic(task);
        }
        self.shared.live.fetch_sub(1, Ordering::Relaxed);
    }

    pub(super) fn after_park(&self, task: Arc<VThread>) {
        set_state(&task, State::Parked);
        match task.park.publish_parked() {
            // Whoever unparks it owns it now: our strong count goes with it
            // (taken back by `Thread::unpark` or the timer that fires), which
            // saves a clone and a drop on every hand-off.
            AfterSwitch::Parked => std::mem::forget(task),
            AfterSwitch::Reschedule => self.push_next(task),
        }
    }
}

/// Body of a carrier OS thread.
pub(crate) fn run_carrier(shared: Arc<Shared>, index: usize, local: Worker<Arc<VThread>>) {
    let w = &shared.carriers[index];
    let _ = w.os_thread.set(std::thread::current());
    // SAFETY: gettid has no preconditions.
    w.tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
    crate::stack::ensure_altstack();
    let shared_core = shared.core;
    let shared_areas = shared.thread_local_areas;
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
        suspended_unwinders: Cell::new(0),
        finished: RefCell::new(Vec::new()),
        polls: index < shared_core
            && crate::netpoll::carriers_poll()
            && crate::netpoll::source().is_ok(),
        polling: Cell::new(false),
        areas: match shared_areas {
            true => crate::tls::layout(),
            false => None,
        },
    };
    if carrier.polls {
        crate::netpoll::carrier_joined();
    }
    CARRIER.with(|c| c.set(&carrier));
    carrier.main_loop();
    if carrier.polls {
        crate::netpoll::carrier_left();
        super::hand_on_waiter_role();
    }
    carrier.flush_finished();
    CARRIER.with(|c| c.set(std::ptr::null()));
    let mut cache = carrier.stack_cache.take();
    carrier.shared.stacks.release_batch(&mut cache);
    if index >= carrier.shared.core {
        let Carrier { shared, local, .. } = carrier;
        shared.return_slot(index, local);
    }
}

impl Carrier {
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
                    if round + 1 < SPIN_ROUNDS {
                        std::thread::yield_now();
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
            if self.next_timer().is_some_and(|d| d <= Instant::now()) {
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
                if !self.retire() {
                    return; // keep-alive expired: the thread exits
                }
                continue;
            }
            if self.watch_home() {
                continue;
            }
            self.sleep();
        }
    }

    /// Polls the readiness source (`netpoll`, rule 1); true if it woke
    /// anything.
    pub(super) fn poll_io(&self) -> bool {
        if !self.polls {
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
    pub(super) fn poll_wait(&self, seen: u32, until: Option<Instant>) -> bool {
        if !self.polls {
            return false;
        }
        let Some(role) = crate::netpoll::get().and_then(|s| s.try_role()) else {
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

    /// Watches the inbox for a moment before sleeping; true if work came.
    ///
    /// Threads bound here can run nowhere else, and their wakers are often
    /// one hop away (a producer on another carrier, the poller): a wake-up
    /// that finds us awake costs a queue push, one that finds us asleep a
    /// futex wake and a context switch. Measured on 2 cores with a bounded
    /// channel between two carriers: 4.9 M msg/s when the carrier sleeps
    /// at once (the figure with the watch is not recorded). Bounded (about
    /// [`HOME_WATCH_ROUNDS`] short spins, yielding the core in between),
    /// and skipped when no thread is bound here.
    pub(super) fn watch_home(&self) -> bool {
        let me = self.me();
        if me.homed.load(Ordering::Relaxed) == 0 {
            return false;
        }
        for round in 0..HOME_WATCH_ROUNDS {
            // Readiness is what a carrier that polls mostly waits for.
            if !me.inbox.is_empty() || !self.local.is_empty() {
                return true;
            }
            for _ in 0..HOME_WATCH_SPINS {
                std::hint::spin_loop();
            }
            if round % 4 == 3 {
                std::thread::yield_now();
            }
        }
        false
    }

    /// Whether more carriers run than the runtime's parallelism needs.
    pub(super) fn surplus(&self) -> bool {
        let s = &self.shared;
        s.active.load(Ordering::SeqCst) > s.core + s.blocked.get()
    }

    /// Leaves duty, then waits in keep-alive. Returns true if called back
    /// to duty (already counted active again by the caller of
    /// `compensate`), false if the keep-alive expired.
    ///
    /// Off duty a spare takes no new work, but threads bound to it (it ran
    /// them first) can run nowhere else: it keeps running them, firing
    /// their timers, and sleeping in between, and its keep-alive only
    /// starts counting once none is left. Unbound threads (a runtime that
    /// allows migration) are handed over: timers to carrier 0, the `next`
    /// slot to the injector.
    pub(super) fn retire(&self) -> bool {
        let shared = &*self.shared;
        let me = self.me();
        self.hand_over_unbound();
        me.spare_wake.store(false, Ordering::SeqCst);
        shared.active.fetch_sub(1, Ordering::SeqCst);
        shared.idle_spares.lock().unpoison().push(self.index);
        // Work may have arrived while we were leaving; let a compensator see
        // that we are available.
        shared.notify_work();
        let mut deadline = Instant::now() + shared.spare_keepalive;
        loop {
            let seen = me.bell.seen();
            if me.spare_wake.swap(false, Ordering::SeqCst) {
                return true;
            }
            if let Some(t) = self.find_home() {
                self.run(t);
                deadline = Instant::now() + shared.spare_keepalive;
                continue;
            }
            let serving = me.homed.load(Ordering::Relaxed) > 0;
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
                        return true;
                    }
                    me.wait_kick(seen, None);
                }
            }
            me.sleeping.store(true, Ordering::SeqCst);
            if me.inbox.is_empty() {
                let wake_at = match (serving, self.next_timer()) {
                    (true, t) => t,
                    (false, Some(t)) => Some(t.min(deadline)),
                    (false, None) => Some(deadline),
                };
                me.wait_kick(seen, wake_at);
            }
            me.sleeping.store(false, Ordering::SeqCst);
        }
    }

    /// Runnable work bound to this carrier: due timers, `next`, the inbox.
    pub(super) fn find_home(&self) -> Option<Arc<VThread>> {
        self.fire_timers();
        let me = self.me();
        me.take_next().or_else(|| me.pop_home())
    }

    /// Gives unbound threads parked or queued here to the rest of the
    /// runtime (migration only; bound threads have none).
    pub(super) fn hand_over_unbound(&self) {
        let shared = &*self.shared;
        let me = self.me();
        let timers = {
            let mut mine = me.timers.lock().unpoison();
            let (unbound, bound): (Vec<TimerEntry>, Vec<TimerEntry>) =
                mine.take_all().into_iter().partition(|t| {
                    t.task
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

impl Carrier {
    /// Whether this carrier belongs to the runtime owning `shared`.
    pub(crate) fn owned_by(&self, shared: &Arc<Shared>) -> bool {
        Arc::ptr_eq(&self.shared, shared)
    }
}
