//! The scheduler: carriers, run queues, work stealing and idle sleep.
//!
//! # Shape (Go's `runtime/proc.go`, in small)
//!
//! Each carrier (an OS thread) owns
//! - a FIFO run queue (`crossbeam_deque::Worker`) that others may steal
//!   half of,
//! - a LIFO `next` slot: a thread woken by the running thread goes there and
//!   runs as soon as the current one suspends (hand-off latency of a
//!   ping-pong is one switch, and the partner's data is still in cache),
//! - a timer heap (`timer.rs`).
//!
//! A global injector takes work from outside the runtime (OS threads).
//!
//! # Invariants
//!
//! 1. A task (virtual thread) is in at most one place at a time: a run
//!    queue, a `next` slot, mounted on one carrier, or nowhere (parked: then
//!    whoever moves its park state out of PARKED owns it, see `park.rs`).
//! 2. The `next` slot may win at most [`NEXT_STREAK_CAP`] times in a row;
//!    then the slot's occupant goes to the back of the queue, so two threads
//!    ping-ponging through it cannot starve the others.
//! 3. Every [`GLOBAL_CHECK_INTERVAL`] ticks a carrier takes from the
//!    injector first, so outside work cannot starve behind local work.
//! 4. No lost wake-ups of carriers (the `Idle` protocol below, after Tokio's
//!    `idle.rs`): work is published *before* the searching/unparked counts
//!    are read (SeqCst), and the last searcher to give up re-checks every
//!    queue *after* publishing that it gave up. So either the pusher sees a
//!    searcher, or the searcher sees the work.
//! 5. An idle carrier sleeps in the kernel (zero CPU) with a timeout to its
//!    next timer, after a bounded spin.

use std::cell::{Cell, RefCell};
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use std::time::Instant;

use corosensei::CoroutineResult;
use crossbeam_deque::{Injector, Steal, Stealer, Worker};

use crate::park::AfterSwitch;
use crate::stack::{StackPool, TRIM_DEPTH};
use crate::thread::{Inner, Kind, State};
use crate::timer::TimerEntry;

/// A runnable virtual thread.
pub(crate) type Task = Arc<Inner>;

/// What a virtual thread asks of its carrier when it suspends. Handled by
/// the carrier *after* the switch (the suspend protocol, DESIGN.md).
pub(crate) enum Suspend {
    /// Park until unparked.
    Park,
    /// Park until unparked or the deadline passes.
    ParkUntil(Instant),
    /// Go to the back of the run queue.
    Yield,
}

const NEXT_STREAK_CAP: u32 = 16;
const GLOBAL_CHECK_INTERVAL: u32 = 61;
const SPIN_ROUNDS: u32 = 4;
/// Stacks a carrier keeps for itself before giving them back to the pool.
const LOCAL_STACK_CACHE: usize = 64;

/// State shared by all carriers of one runtime.
pub(crate) struct Shared {
    pub(crate) injector: Injector<Task>,
    stealers: Box<[Stealer<Task>]>,
    workers: Box<[WorkerShared]>,
    idle: Idle,
    pub(crate) shutdown: AtomicBool,
    pub(crate) stacks: &'static StackPool,
    /// Virtual threads started and not yet finished.
    pub(crate) live: AtomicUsize,
    /// Virtual threads ever started.
    pub(crate) started: AtomicUsize,
    /// Successful steals (batches).
    pub(crate) steals: AtomicUsize,
    monitor: Monitor,
}

/// The monitor thread's parking spot (Go's sysmon sleeps the same way when
/// every P is idle).
struct Monitor {
    thread: OnceLock<std::thread::Thread>,
    /// Set while the monitor sleeps without a timeout because no carrier
    /// was busy; the first carrier to mount a thread wakes it.
    deep_sleep: AtomicBool,
}

struct WorkerShared {
    os_thread: OnceLock<std::thread::Thread>,
    /// Set by a notifier that removed this worker from the sleeper list.
    notified: AtomicBool,
    /// The LIFO `next` slot: an `Arc<Inner>` turned into a raw pointer, or
    /// null. Atomic so that a thief can take it from a carrier that is stuck
    /// in one long-running thread (Go steals `runnext` the same way).
    next: AtomicPtr<Inner>,
    /// Count of threads this carrier has mounted (the monitor compares
    /// snapshots to find a carrier stuck in one thread).
    switches: AtomicU64,
    /// Whether a thread is mounted right now.
    busy: AtomicBool,
}

impl WorkerShared {
    fn take_next(&self) -> Option<Task> {
        if self.next.load(Ordering::Relaxed).is_null() {
            return None;
        }
        let p = self.next.swap(std::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: non-null values in `next` come from `Arc::into_raw` in
        // `push_next`, and the swap gives us sole ownership of that count.
        (!p.is_null()).then(|| unsafe { Arc::from_raw(p) })
    }

    fn has_next(&self) -> bool {
        !self.next.load(Ordering::Relaxed).is_null()
    }
}

/// Per-carrier state, reachable from the carrier's own thread only.
pub(crate) struct Carrier {
    index: usize,
    shared: Arc<Shared>,
    local: Worker<Task>,
    next_streak: Cell<u32>,
    tick: Cell<u32>,
    searching: Cell<bool>,
    rng: Cell<u64>,
    timers: RefCell<BinaryHeap<TimerEntry>>,
    /// The mounted thread, or null.
    current: Cell<*const Inner>,
    /// Free stack slots of the default pool, kept here to avoid its lock.
    stack_cache: RefCell<Vec<usize>>,
}

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

/// Raw pointer to the thread mounted on this carrier (null if none).
#[inline(never)]
pub(crate) fn current_task_ptr() -> *const Inner {
    match carrier() {
        Some(c) => c.current.get(),
        None => std::ptr::null(),
    }
}

/// An owned handle to the mounted thread.
#[inline(never)]
pub(crate) fn current_task_arc() -> Option<Task> {
    let p = current_task_ptr();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` came from `Arc::as_ptr` of a Task the carrier holds for as
    // long as it is mounted, so the count is at least one while we add ours.
    unsafe {
        Arc::increment_strong_count(p);
        Some(Arc::from_raw(p))
    }
}

impl Shared {
    pub(crate) fn new(n: usize, stacks: &'static StackPool) -> (Arc<Shared>, Vec<Worker<Task>>) {
        let locals: Vec<Worker<Task>> = (0..n).map(|_| Worker::new_fifo()).collect();
        let stealers = locals.iter().map(Worker::stealer).collect();
        let workers = (0..n)
            .map(|_| WorkerShared {
                os_thread: OnceLock::new(),
                notified: AtomicBool::new(false),
                next: AtomicPtr::new(std::ptr::null_mut()),
                switches: AtomicU64::new(0),
                busy: AtomicBool::new(false),
            })
            .collect();
        let shared = Arc::new(Shared {
            injector: Injector::new(),
            stealers,
            workers,
            idle: Idle::new(n),
            shutdown: AtomicBool::new(false),
            stacks,
            live: AtomicUsize::new(0),
            started: AtomicUsize::new(0),
            steals: AtomicUsize::new(0),
            monitor: Monitor {
                thread: OnceLock::new(),
                deep_sleep: AtomicBool::new(false),
            },
        });
        (shared, locals)
    }

    pub(crate) fn num_workers(&self) -> usize {
        self.workers.len()
    }

    /// Makes `task` runnable. On one of this runtime's carriers it goes to
    /// the `next` slot (it runs as soon as the current thread suspends);
    /// from anywhere else, to the injector.
    pub(crate) fn schedule(self: &Arc<Shared>, task: Task) {
        if let Some(c) = carrier()
            && Arc::ptr_eq(&c.shared, self)
        {
            c.push_next(task);
            return;
        }
        self.injector.push(task);
        self.notify_work();
    }

    /// Wakes a sleeping carrier if no carrier is searching for work.
    pub(crate) fn notify_work(&self) {
        fence(Ordering::SeqCst);
        if let Some(i) = self.idle.worker_to_notify() {
            self.unpark_worker(i);
        }
    }

    fn unpark_worker(&self, i: usize) {
        let w = &self.workers[i];
        w.notified.store(true, Ordering::SeqCst);
        if let Some(t) = w.os_thread.get() {
            t.unpark();
        }
    }

    /// Wakes every carrier (shutdown).
    pub(crate) fn wake_all(&self) {
        while let Some(i) = self.idle.pop_any_sleeper() {
            self.unpark_worker(i);
        }
        for w in self.workers.iter() {
            if let Some(t) = w.os_thread.get() {
                t.unpark();
            }
        }
        self.monitor.deep_sleep.store(true, Ordering::SeqCst);
        self.wake_monitor();
    }

    fn has_visible_work(&self) -> bool {
        // `next` slots are not counted: their carriers are awake and will
        // run them; one stuck in a long-running thread is the monitor's job.
        !self.injector.is_empty() || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// Number of tasks in the global queue and each local queue.
    pub(crate) fn queue_depths(&self) -> (usize, Vec<usize>) {
        (
            self.injector.len(),
            self.stealers.iter().map(Stealer::len).collect(),
        )
    }
}

impl Carrier {
    fn me(&self) -> &WorkerShared {
        &self.shared.workers[self.index]
    }

    fn push_next(&self, task: Task) {
        task_state(&task, State::Runnable);
        let new = Arc::into_raw(task).cast_mut();
        let old = self.me().next.swap(new, Ordering::AcqRel);
        if !old.is_null() {
            // SAFETY: see `WorkerShared::take_next`.
            self.local.push(unsafe { Arc::from_raw(old) });
            self.shared.notify_work();
        }
    }

    fn push_back(&self, task: Task) {
        self.local.push(task);
        self.shared.notify_work();
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

    fn recycle_stack(&self, stack: crate::stack::Stack, deep: bool) {
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

    fn next_rand(&self) -> u64 {
        // xorshift64*
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Local work: timers, the next slot, the local queue, the injector.
    fn find_local(&self) -> Option<Task> {
        let tick = self.tick.get().wrapping_add(1);
        self.tick.set(tick);
        if tick % GLOBAL_CHECK_INTERVAL == 0
            && let Some(t) = self.steal_injector()
        {
            return Some(t);
        }
        self.fire_timers();
        if let Some(t) = self.me().take_next() {
            let streak = self.next_streak.get();
            if streak < NEXT_STREAK_CAP {
                self.next_streak.set(streak + 1);
                return Some(t);
            }
            self.local.push(t);
        }
        self.next_streak.set(0);
        self.local.pop().or_else(|| self.steal_injector())
    }

    fn steal_injector(&self) -> Option<Task> {
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
    fn steal(&self, take_next: bool) -> Option<Task> {
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
        if take_next {
            for k in 0..n {
                let i = (start + k) % n;
                if i != self.index
                    && let Some(t) = self.shared.workers[i].take_next()
                {
                    self.shared.steals.fetch_add(1, Ordering::Relaxed);
                    return Some(t);
                }
            }
        }
        None
    }

    fn fire_timers(&self) {
        let mut timers = self.timers.borrow_mut();
        let Some(first) = timers.peek() else { return };
        let now = Instant::now();
        if first.deadline > now {
            return;
        }
        while let Some(t) = timers.peek() {
            if t.deadline > now {
                break;
            }
            let t = timers.pop().expect("peeked");
            if t.task.timer_seq.load(Ordering::Relaxed) == t.seq
                && t.task.park.unpark() == crate::park::Unpark::Schedule
            {
                task_state(&t.task, State::Runnable);
                self.local.push(t.task);
            }
        }
        drop(timers);
        if !self.local.is_empty() {
            self.shared.notify_work();
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        self.timers.borrow().peek().map(|t| t.deadline)
    }

    /// Runs `task` until it suspends or finishes, then carries out what it
    /// asked for (the suspend protocol).
    fn run(&self, task: Task) {
        let Kind::Virtual { coro, .. } = &task.kind else {
            unreachable!("OS thread in a run queue")
        };
        task_state(&task, State::Running);
        self.current.set(Arc::as_ptr(&task));
        let me = self.me();
        me.switches.fetch_add(1, Ordering::Relaxed);
        me.busy.store(true, Ordering::SeqCst);
        if self.shared.monitor.deep_sleep.load(Ordering::SeqCst) {
            self.shared.wake_monitor();
        }
        // SAFETY: this carrier owns the task exclusively (invariant 1), so no
        // one else touches its coroutine while it runs or until it is
        // published below.
        let coro_ref = unsafe { &mut *coro.get() };
        let result = coro_ref
            .as_mut()
            .expect("runnable thread without a coroutine")
            .resume(());
        self.current.set(std::ptr::null());
        me.busy.store(false, Ordering::Relaxed);
        match result {
            CoroutineResult::Yield(Suspend::Park) => self.after_park(task),
            CoroutineResult::Yield(Suspend::ParkUntil(deadline)) => {
                let seq = task.timer_seq.load(Ordering::Relaxed);
                self.timers.borrow_mut().push(TimerEntry {
                    deadline,
                    seq,
                    task: task.clone(),
                });
                self.after_park(task);
            }
            CoroutineResult::Yield(Suspend::Yield) => {
                task_state(&task, State::Runnable);
                self.push_back(task);
            }
            CoroutineResult::Return(()) => {
                task_state(&task, State::Terminated);
                let coro = coro_ref
                    .take()
                    .expect("finished thread without a coroutine");
                let stack = coro.into_stack();
                let low_sp = task.low_sp.load(Ordering::Relaxed);
                let deep = stack.base_addr().saturating_sub(low_sp) > TRIM_DEPTH;
                self.recycle_stack(stack, deep);
                self.shared.live.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    fn after_park(&self, task: Task) {
        task_state(&task, State::Parked);
        match task.park.publish_parked() {
            // Whoever unparks it owns it now; drop our reference.
            AfterSwitch::Parked => {}
            AfterSwitch::Reschedule => self.push_next(task),
        }
    }

    // ---- idle ----

    fn become_searching(&self) -> bool {
        if !self.searching.get() && self.shared.idle.try_start_searching() {
            self.searching.set(true);
        }
        self.searching.get()
    }

    fn stop_searching(&self) {
        if self.searching.replace(false) && self.shared.idle.stop_searching() {
            // We were the last searcher and found work: let another carrier
            // look for the rest.
            self.shared.notify_work();
        }
    }

    fn sleep(&self) {
        let shared = &*self.shared;
        let was_searching = self.searching.replace(false);
        let last = shared.idle.to_sleep(self.index, was_searching);
        if last && shared.has_visible_work() {
            shared.notify_work();
        }
        loop {
            if shared.shutdown.load(Ordering::SeqCst) {
                return;
            }
            let scavenge = shared.stacks.scavenge(Instant::now());
            let wake_at = match (self.next_timer(), scavenge) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            match wake_at {
                Some(d) => {
                    let now = Instant::now();
                    if d > now {
                        std::thread::park_timeout(d - now);
                    }
                }
                None => std::thread::park(),
            }
            if shared.workers[self.index]
                .notified
                .swap(false, Ordering::SeqCst)
            {
                self.searching.set(true);
                return;
            }
            let timer_due = self.next_timer().is_some_and(|d| d <= Instant::now());
            if timer_due && shared.idle.wake_self(self.index) {
                return;
            }
        }
    }
}

fn task_state(task: &Inner, s: State) {
    crate::thread::set_inner_state(task, s);
}

/// Body of a carrier OS thread.
pub(crate) fn run_carrier(shared: Arc<Shared>, index: usize, local: Worker<Task>) {
    let _ = shared.workers[index].os_thread.set(std::thread::current());
    crate::overflow::ensure_altstack();
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
        timers: RefCell::new(BinaryHeap::new()),
        current: Cell::new(std::ptr::null()),
        stack_cache: RefCell::new(Vec::new()),
    };
    CARRIER.with(|c| c.set(&carrier));
    carrier.main_loop();
    CARRIER.with(|c| c.set(std::ptr::null()));
    let mut cache = carrier.stack_cache.take();
    carrier.shared.stacks.release_batch(&mut cache);
}

impl Carrier {
    fn main_loop(&self) {
        loop {
            if let Some(t) = self.find_local() {
                self.stop_searching();
                self.run(t);
                continue;
            }
            if self.become_searching() {
                let mut found = None;
                for round in 0..SPIN_ROUNDS {
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
            if self.shared.shutdown.load(Ordering::SeqCst) && !self.me().has_next() {
                if self.local.is_empty() {
                    return;
                }
                continue;
            }
            self.sleep();
        }
    }
}

// ---------------------------------------------------------------------------
// Idle protocol: who is searching, who sleeps.

/// Counts packed in one word so that both change atomically:
/// low half = carriers searching for work, high half = carriers awake.
struct Idle {
    state: AtomicUsize,
    sleepers: Mutex<Vec<usize>>,
    num_workers: usize,
}

const UNPARKED_SHIFT: u32 = usize::BITS / 2;
const SEARCH_MASK: usize = (1 << UNPARKED_SHIFT) - 1;

impl Idle {
    fn new(n: usize) -> Idle {
        Idle {
            state: AtomicUsize::new(n << UNPARKED_SHIFT),
            sleepers: Mutex::new(Vec::with_capacity(n)),
            num_workers: n,
        }
    }

    fn searching(s: usize) -> usize {
        s & SEARCH_MASK
    }

    fn unparked(s: usize) -> usize {
        s >> UNPARKED_SHIFT
    }

    /// At most half the carriers search at once (each search costs a pass
    /// over every queue); the rest sleep.
    fn try_start_searching(&self) -> bool {
        let s = self.state.load(Ordering::SeqCst);
        if 2 * Self::searching(s) >= self.num_workers.max(2) {
            return false;
        }
        self.state.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// Returns true if this was the last searcher.
    fn stop_searching(&self) -> bool {
        let prev = self.state.fetch_sub(1, Ordering::SeqCst);
        Self::searching(prev) == 1
    }

    /// A sleeper to wake for new work, already counted as awake and
    /// searching; None if someone is searching or nobody sleeps.
    fn worker_to_notify(&self) -> Option<usize> {
        let s = self.state.load(Ordering::SeqCst);
        if Self::searching(s) != 0 || Self::unparked(s) >= self.num_workers {
            return None;
        }
        let mut sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        let s = self.state.load(Ordering::SeqCst);
        if Self::searching(s) != 0 {
            return None;
        }
        let i = sleepers.pop()?;
        self.state
            .fetch_add(1 | (1 << UNPARKED_SHIFT), Ordering::SeqCst);
        Some(i)
    }

    fn pop_any_sleeper(&self) -> Option<usize> {
        let mut sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        let i = sleepers.pop()?;
        self.state
            .fetch_add(1 | (1 << UNPARKED_SHIFT), Ordering::SeqCst);
        Some(i)
    }

    /// Records that carrier `i` goes to sleep. Returns true if it was the
    /// last searcher (it must then re-check the queues).
    fn to_sleep(&self, i: usize, was_searching: bool) -> bool {
        let mut sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        let dec = (1 << UNPARKED_SHIFT) | usize::from(was_searching);
        let prev = self.state.fetch_sub(dec, Ordering::SeqCst);
        sleepers.push(i);
        was_searching && Self::searching(prev) == 1
    }

    /// A sleeper woke by its own timer: take it off the list. False if a
    /// notifier already did (its `notified` flag is then about to be set).
    fn wake_self(&self, i: usize) -> bool {
        let mut sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(pos) = sleepers.iter().position(|&w| w == i) else {
            return false;
        };
        sleepers.swap_remove(pos);
        self.state.fetch_add(1 << UNPARKED_SHIFT, Ordering::SeqCst);
        true
    }
}

/// Handle to spawn work into this module's queues from `runtime.rs`.
pub(crate) struct Spawner<'a>(pub(crate) &'a Arc<Shared>);

impl Spawner<'_> {
    pub(crate) fn spawn(&self, task: Task) {
        let shared = self.0;
        shared.live.fetch_add(1, Ordering::Relaxed);
        shared.started.fetch_add(1, Ordering::Relaxed);
        if let Some(c) = carrier()
            && Arc::ptr_eq(&c.shared, shared)
        {
            // New threads go to the back of the local queue (stealable), so a
            // spawning loop keeps running and idle carriers help.
            task_state(&task, State::Runnable);
            c.push_back(task);
            return;
        }
        task_state(&task, State::Runnable);
        shared.injector.push(task);
        shared.notify_work();
    }
}

impl Carrier {
    /// Whether this carrier belongs to the runtime owning `shared`.
    pub(crate) fn owned_by(&self, shared: &Arc<Shared>) -> bool {
        Arc::ptr_eq(&self.shared, shared)
    }
}

// ---------------------------------------------------------------------------
// The monitor (Go's sysmon, in small).

/// How often the monitor looks at the carriers while any is busy.
const MONITOR_TICK: Duration = Duration::from_millis(10);
/// Quiet ticks (no carrier busy) before the monitor sleeps until woken.
const MONITOR_QUIET_TICKS: u32 = 10;

impl Shared {
    fn wake_monitor(&self) {
        if self.monitor.deep_sleep.swap(false, Ordering::SeqCst)
            && let Some(t) = self.monitor.thread.get()
        {
            t.unpark();
        }
    }
}

/// Body of the monitor thread. It never runs virtual threads; it notices a
/// carrier that has been running one thread for a whole tick while other
/// work waits on it (in its `next` slot or queue), and wakes an idle
/// carrier to steal that work. It holds only a `Weak` reference, so it ends
/// with the runtime.
pub(crate) fn run_monitor(weak: std::sync::Weak<Shared>) {
    let mut last: Vec<u64> = Vec::new();
    let mut quiet = 0u32;
    loop {
        let Some(shared) = weak.upgrade() else { return };
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let _ = shared.monitor.thread.set(std::thread::current());
        let n = shared.workers.len();
        last.resize(n, u64::MAX);
        let mut any_busy = false;
        for (i, w) in shared.workers.iter().enumerate() {
            let sw = w.switches.load(Ordering::Relaxed);
            let busy = w.busy.load(Ordering::Relaxed);
            any_busy |= busy;
            let stuck = busy && sw == last[i];
            last[i] = sw;
            if stuck && (w.has_next() || !shared.stealers[i].is_empty()) {
                shared.notify_work();
            }
        }
        quiet = if any_busy { 0 } else { quiet + 1 };
        if quiet >= MONITOR_QUIET_TICKS {
            shared.monitor.deep_sleep.store(true, Ordering::SeqCst);
            // Re-check after announcing the deep sleep, so a carrier that
            // became busy in between (and saw no deep sleep) is not missed.
            let busy_now = shared.workers.iter().any(|w| w.busy.load(Ordering::SeqCst));
            drop(shared);
            if !busy_now {
                std::thread::park();
            }
            quiet = 0;
            if let Some(shared) = weak.upgrade() {
                shared.monitor.deep_sleep.store(false, Ordering::SeqCst);
            }
            continue;
        }
        drop(shared);
        std::thread::sleep(MONITOR_TICK);
    }
}
