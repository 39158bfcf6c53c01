//! The scheduler: carriers, run queues, work stealing and idle sleep.
//!
//! # Shape (Go's `runtime/proc.go`, in small, with affinity)
//!
//! Each carrier (an OS thread) owns
//! - a FIFO run queue of threads that have *not started yet*
//!   (`crossbeam_deque::Worker`), which others may steal half of: this is
//!   where load is balanced;
//! - an inbox of runnable threads *bound* to it (a started thread runs on
//!   the carrier that first ran it, for its whole life): only this carrier
//!   takes from it; anyone may push, kicking the carrier if it sleeps;
//! - a LIFO `next` slot: a thread woken by the running thread goes there and
//!   runs as soon as the current one suspends (hand-off latency of a
//!   ping-pong is one switch, and the partner's data is still in cache);
//! - a timer heap (`timer.rs`).
//!
//! A global injector takes new threads from outside the runtime.
//!
//! Why affinity: a virtual thread's stack holds values Rust ties to an OS
//! thread (thread-local references, `ThreadRng`, `Rc`s from thread-locals,
//! std lock guards, LLVM's cached TLS addresses). Resuming it on another OS
//! thread is undefined behaviour reachable from safe code; the `may` crate
//! had to make its spawn `unsafe` for this. Go and Java migrate because
//! their compilers control what a stack may hold; Rust's does not. Started
//! threads therefore stay put; only a runtime built with the `unsafe`
//! `RuntimeBuilder::allow_migration` leaves them unbound (`NO_HOME`), and
//! then they flow through the stealable queues as before.
//!
//! # Invariants
//!
//! 1. A thread is in at most one place at a time: a run queue, an inbox, a
//!    `next` slot, mounted on one carrier, or nowhere (parked: then
//!    whoever moves its park state out of PARKED owns it, see `park.rs`).
//! 2. A bound thread is only ever queued on, or mounted by, its home
//!    carrier: stealable queues and the injector hold unbound threads only,
//!    and a `next` slot is stolen only on a runtime that allows migration.
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
//!    a bound thread, the inbox handshake (`WorkerShared::sleeping`): the
//!    pusher publishes, then reads `sleeping`; the carrier raises
//!    `sleeping`, then re-reads the inbox — so either the pusher kicks, or
//!    the carrier sees the work.
//! 6. An idle carrier sleeps in the kernel (zero CPU) with a timeout to its
//!    next timer, after a bounded spin.

use std::cell::{Cell, RefCell};
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use std::time::Instant;

use corosensei::CoroutineResult;
use crossbeam_deque::{Injector, Steal, Stealer, Worker};

use crate::park::AfterSwitch;
use crate::stack::{StackPool, TRIM_DEPTH};
use crate::thread::{Inner, Kind, NO_HOME, State};
use crate::timer::TimerEntry;

/// A runnable virtual thread.
pub(crate) type Task = Arc<Inner>;

/// What a virtual thread asks of its carrier when it suspends. Handled by
/// the carrier *after* the switch (the suspend protocol, `park.rs`).
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
/// Rounds a searching carrier makes over the queues (yielding its core in
/// between) before it sleeps. Measured: a longer, time-based spin (50 µs)
/// made cross-runtime ping-pong 5x slower on 2 cores, because the spinner
/// takes the core the producer needs.
const SPIN_ROUNDS: u32 = 4;
/// Rounds of [`Carrier::watch_home`] before an idle carrier sleeps.
const HOME_WATCH_ROUNDS: u32 = 16;
/// Spin-loop hints per round.
const HOME_WATCH_SPINS: u32 = 32;
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
    /// Carriers that always run (the runtime's parallelism).
    core: usize,
    /// Upper bound on carriers including spares (`max_pool_size`).
    max: usize,
    /// Carriers in their main loop (core + spares on duty).
    active: AtomicUsize,
    /// Carriers in a pinned wait, or counted as stalled by the monitor.
    /// `active - blocked` is what really runs (see `stall.rs`).
    blocked: crate::stall::Blocked,
    /// Run queues of slots without a thread (spares not started or retired).
    free_slots: Mutex<Vec<(usize, Worker<Task>)>>,
    /// Spare slots whose threads wait in keep-alive for duty.
    idle_spares: Mutex<Vec<usize>>,
    /// Carrier thread name prefix.
    name: String,
    /// How long one thread may hold a carrier before the monitor calls it a
    /// stall (WEFT_STALL_THRESHOLD).
    pub(crate) stall_threshold: Duration,
    /// How long an idle spare carrier waits for duty before it exits.
    spare_keepalive: Duration,
    /// Spare carriers ever started (metrics).
    pub(crate) spares_started: AtomicUsize,
    /// Weak self-reference, so compensation can start carrier threads.
    me_weak: OnceLock<std::sync::Weak<Shared>>,
    /// Started threads may move between carriers (the `unsafe` opt-in,
    /// `RuntimeBuilder::allow_migration`); otherwise each is bound to the
    /// carrier that first ran it.
    pub(crate) migrate: bool,
}

/// Scheduler settings from the runtime builder.
pub(crate) struct SchedConfig {
    pub(crate) core: usize,
    pub(crate) max: usize,
    pub(crate) name: String,
    pub(crate) stall_threshold: Duration,
    pub(crate) spare_keepalive: Duration,
    pub(crate) migrate: bool,
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
    /// Timers of threads that parked on this carrier. Locked by the owner
    /// (uncontended) and, rarely, by the monitor when the owner is blocked.
    timers: Mutex<BinaryHeap<TimerEntry>>,
    /// The carrier is inside `weft::blocking` or a pinned wait.
    in_blocking: AtomicBool,
    /// The monitor counted this carrier as blocked (a stall); cleared, and
    /// uncounted, by the carrier when its thread next leaves it.
    stalled: crate::stall::StallFlag,
    /// Earliest timer deadline (ns since `now_ns` epoch), `u64::MAX` if
    /// none: lets `find_local` skip the heap (and the clock) when empty.
    timer_next: AtomicU64,
    /// Heap size at which `push_timer` next looks for stale entries
    /// (written under the `timers` lock).
    timer_scan_at: AtomicUsize,
    /// `switches` value for which a stall was already reported.
    reported: AtomicU64,
    /// Kernel thread id of the carrier (for /proc lookups).
    tid: AtomicI32,
    /// A spare in keep-alive was picked for duty.
    spare_wake: AtomicBool,
    /// Event count the carrier sleeps on (a futex word). Anyone who wants
    /// a sleeping carrier to look again bumps it and wakes the futex. Its
    /// own word, not the OS thread's park token: code running on the
    /// carrier thread can never consume a wake-up meant for the scheduler.
    wake_word: AtomicU32,
    /// The mounted thread, null when none (a borrowed pointer; the monitor
    /// reads through it only under the `inspect` handshake).
    mounted: AtomicPtr<Inner>,
    /// Set by the monitor while it reads through `mounted`. A carrier that
    /// finds it set after a thread left it waits before letting go of that
    /// thread (see `mounted_identity`).
    inspect: AtomicBool,
    /// Runnable threads bound to this carrier (affinity): only this carrier
    /// takes from it; anyone may push (a wake-up from another carrier, an
    /// OS thread, the poller, the monitor's timers). Never stolen.
    inbox: Injector<Task>,
    /// Set while the carrier sleeps (or waits off duty): a pusher to
    /// `inbox` that sees it kicks the carrier. Dekker-style with the
    /// inbox: the pusher publishes its task then reads this (SeqCst); the
    /// carrier sets this then re-checks the inbox (SeqCst).
    sleeping: AtomicBool,
    /// Live threads bound to this carrier. A spare carrier with bound
    /// threads cannot exit: it keeps serving them off duty.
    homed: AtomicUsize,
    /// `switches` value for which a blocked-with-waiters event was recorded.
    reported_waiters: AtomicU64,
}

static EPOCH: OnceLock<Instant> = OnceLock::new();

fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

/// The instant `ns` nanoseconds after the epoch.
pub(crate) fn instant_of(ns: u64) -> Instant {
    epoch() + Duration::from_nanos(ns)
}

/// `t` as nanoseconds since the epoch (0 for instants before it).
pub(crate) fn ns_of(t: Instant) -> u64 {
    t.saturating_duration_since(epoch()).as_nanos() as u64
}

impl WorkerShared {
    /// Makes a sleeping carrier look again (see `wake_word`).
    fn kick(&self) {
        self.wake_word.fetch_add(1, Ordering::SeqCst);
        futex_wake(&self.wake_word);
    }

    /// Sleeps while `wake_word` still equals `seen`, at most until `until`.
    fn wait_kick(&self, seen: u32, until: Option<Instant>) {
        let timeout = match until {
            None => None,
            Some(d) => {
                let now = Instant::now();
                if d <= now {
                    return;
                }
                Some(d - now)
            }
        };
        futex_wait(&self.wake_word, seen, timeout);
    }

    fn new() -> WorkerShared {
        WorkerShared {
            os_thread: OnceLock::new(),
            notified: AtomicBool::new(false),
            next: AtomicPtr::new(std::ptr::null_mut()),
            switches: AtomicU64::new(0),
            timers: Mutex::new(BinaryHeap::new()),
            in_blocking: AtomicBool::new(false),
            stalled: crate::stall::StallFlag::new(),
            timer_next: AtomicU64::new(u64::MAX),
            timer_scan_at: AtomicUsize::new(crate::timer::SCAN_MIN),
            reported: AtomicU64::new(u64::MAX),
            tid: AtomicI32::new(0),
            spare_wake: AtomicBool::new(false),
            wake_word: AtomicU32::new(0),
            mounted: AtomicPtr::new(std::ptr::null_mut()),
            inspect: AtomicBool::new(false),
            inbox: Injector::new(),
            sleeping: AtomicBool::new(false),
            homed: AtomicUsize::new(0),
            reported_waiters: AtomicU64::new(u64::MAX),
        }
    }

    /// Queues `task`, a runnable thread bound to this carrier, and kicks
    /// the carrier if it sleeps (see `sleeping`).
    fn push_home(&self, task: Task) {
        self.inbox.push(task);
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            self.kick();
        }
    }

    /// Takes the oldest runnable thread bound to this carrier.
    fn pop_home(&self) -> Option<Task> {
        loop {
            match self.inbox.steal() {
                Steal::Success(t) => return Some(t),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// Whether threads bound to this carrier wait to run on it.
    fn has_home_work(&self) -> bool {
        !self.inbox.is_empty() || self.has_next()
    }

    fn push_timer(&self, e: TimerEntry) {
        let mut timers = self.timers.lock().unwrap_or_else(|e| e.into_inner());
        timers.push(e);
        if timers.len() >= self.timer_scan_at.load(Ordering::Relaxed) {
            crate::timer::compact(&mut timers);
            self.timer_scan_at.store(
                (2 * timers.len()).max(crate::timer::SCAN_MIN),
                Ordering::Relaxed,
            );
        }
        self.update_timer_next(&timers);
    }

    fn update_timer_next(&self, timers: &BinaryHeap<TimerEntry>) {
        let next = timers.peek().map_or(u64::MAX, |t| ns_of(t.deadline));
        self.timer_next.store(next, Ordering::Relaxed);
    }

    /// Whether a timer is due at `now` (ns), without locking.
    fn timer_due(&self, now: u64) -> bool {
        self.timer_next.load(Ordering::Relaxed) <= now
    }

    /// Pops due timers, handing each woken thread to `wake`.
    fn fire_timers(&self, now: Instant, mut wake: impl FnMut(Task)) -> usize {
        let mut timers = self.timers.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        while let Some(t) = timers.peek() {
            if t.deadline > now {
                break;
            }
            let t = timers.pop().expect("peeked");
            // A thread that is gone (the entry holds it weakly) has nothing
            // to wake.
            let Some(task) = t.task.upgrade() else {
                continue;
            };
            if task.timer_seq.load(Ordering::Relaxed) == t.seq
                && task.park.unpark() == crate::park::Unpark::Schedule
            {
                // SAFETY: a PARKED thread carries one strong count leaked by
                // its carrier (`after_park`); we moved it out of PARKED, so
                // that count is ours. We run it with the upgraded count.
                unsafe { Arc::decrement_strong_count(Arc::as_ptr(&task)) };
                task_state(&task, State::Runnable);
                wake(task);
                n += 1;
            }
        }
        self.update_timer_next(&timers);
        n
    }

    /// Fires due timers: bound threads go to this carrier's inbox (they run
    /// only here), unbound ones to `unbound`. Returns how many went there.
    fn fire_timers_home(&self, now: Instant, mut unbound: impl FnMut(Task)) -> usize {
        let mut n = 0;
        self.fire_timers(now, |t| {
            if t.home.load(Ordering::Relaxed) == NO_HOME {
                unbound(t);
                n += 1;
            } else {
                self.inbox.push(t);
            }
        });
        n
    }

    fn next_timer(&self) -> Option<Instant> {
        self.timers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .peek()
            .map(|t| t.deadline)
    }

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

    /// Id and name of the thread mounted here (for stall reports), if it
    /// is still the one mounted at switch count `sw`.
    ///
    /// Handshake: we raise `inspect`, then read `mounted` and `switches`.
    /// The carrier swaps `mounted` to null *before* it checks `inspect`
    /// after a thread leaves it (both SeqCst), so if we still see the thread
    /// mounted on switch `sw`, the carrier has not yet passed that check and
    /// will wait for us before it can let go of the thread: the pointer is
    /// valid until we lower `inspect`.
    fn mounted_identity(&self, sw: u64) -> Option<Identity> {
        self.inspect.store(true, Ordering::SeqCst);
        let mut out = None;
        let p = self.mounted.load(Ordering::SeqCst);
        if !p.is_null() && self.switches.load(Ordering::SeqCst) == sw {
            // SAFETY: see the handshake above; the carrier holds the
            // thread's Arc until it has seen `inspect` lowered.
            if let Some(t) = unsafe { p.as_ref() } {
                let (name, id) = crate::thread::Thread::peek_name_id(t);
                out = Some((id, name.map(str::to_owned)));
            }
        }
        self.inspect.store(false, Ordering::SeqCst);
        out
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
    /// The mounted thread, or null.
    current: Cell<*const Inner>,
    /// Free stack slots of the default pool, kept here to avoid its lock.
    stack_cache: RefCell<Vec<usize>>,
    /// Threads of this carrier suspended while unwinding a panic (each
    /// leaves the OS thread's panic count raised; see
    /// `crate::thread::panicking`).
    suspended_unwinders: Cell<u32>,
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

/// Called by a virtual thread about to suspend. If its carrier's OS thread
/// is unwinding a panic on this thread's behalf, counts it among the
/// carrier's suspended unwinders (see `crate::thread::panicking`) and
/// returns true; the thread calls [`resume_unwinding`] when it resumes.
///
/// The panic is "ours" when no other suspended thread of this carrier
/// accounts for the raised count (or we were already unwinding when we last
/// suspended). On a runtime that allows migration, such a thread becomes
/// bound to this carrier: its unwinding lives in this OS thread's panic
/// count, and moving it would corrupt two threads' counts.
pub(crate) fn suspend_unwinding(inner: &Inner) -> bool {
    if !std::thread::panicking() {
        inner.unwinding.set(false);
        return false;
    }
    let Some(c) = carrier() else { return false };
    let mine = inner.unwinding.get() || c.suspended_unwinders.get() == 0;
    inner.unwinding.set(mine);
    if !mine {
        return false;
    }
    c.suspended_unwinders.set(c.suspended_unwinders.get() + 1);
    if inner.home.load(Ordering::Relaxed) == NO_HOME {
        inner.home.store(c.index as u32, Ordering::Relaxed);
        c.me().homed.fetch_add(1, Ordering::Relaxed);
    }
    true
}

/// The counterpart of [`suspend_unwinding`], on the same carrier.
pub(crate) fn resume_unwinding() {
    if let Some(c) = carrier() {
        c.suspended_unwinders
            .set(c.suspended_unwinders.get().saturating_sub(1));
    }
}

/// Threads of the calling carrier suspended while unwinding.
pub(crate) fn suspended_unwinders() -> u32 {
    carrier().map_or(0, |c| c.suspended_unwinders.get())
}

impl Shared {
    /// Creates the shared state for `core` carriers and up to `max` in all.
    /// Returns the run queues of the core carriers.
    pub(crate) fn new(
        cfg: SchedConfig,
        stacks: &'static StackPool,
    ) -> (Arc<Shared>, Vec<Worker<Task>>) {
        let SchedConfig {
            core,
            max,
            name,
            stall_threshold,
            spare_keepalive,
            migrate,
        } = cfg;
        let mut locals: Vec<Worker<Task>> = (0..max).map(|_| Worker::new_fifo()).collect();
        let stealers = locals.iter().map(Worker::stealer).collect();
        let workers = (0..max).map(|_| WorkerShared::new()).collect();
        let spare_locals: Vec<Worker<Task>> = locals.split_off(core);
        let free_slots = spare_locals
            .into_iter()
            .enumerate()
            .map(|(i, w)| (core + i, w))
            .rev()
            .collect();
        let shared = Arc::new(Shared {
            injector: Injector::new(),
            stealers,
            workers,
            idle: Idle::new(core),
            shutdown: AtomicBool::new(false),
            stacks,
            live: AtomicUsize::new(0),
            started: AtomicUsize::new(0),
            steals: AtomicUsize::new(0),
            monitor: Monitor {
                thread: OnceLock::new(),
                deep_sleep: AtomicBool::new(false),
            },
            core,
            max,
            active: AtomicUsize::new(core),
            blocked: crate::stall::Blocked::new(),
            free_slots: Mutex::new(free_slots),
            idle_spares: Mutex::new(Vec::new()),
            name,
            stall_threshold,
            spare_keepalive,
            spares_started: AtomicUsize::new(0),
            me_weak: OnceLock::new(),
            migrate,
        });
        let _ = shared.me_weak.set(Arc::downgrade(&shared));
        (shared, locals)
    }

    /// Carriers in their main loop right now (core + spares on duty).
    pub(crate) fn active_carriers(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Whether carrier `i` is held by one thread past the stall threshold
    /// (the monitor's mark) or in a pinned wait: the threads bound to it
    /// wait.
    pub(crate) fn carrier_held(&self, i: usize) -> bool {
        self.workers
            .get(i)
            .is_some_and(|w| w.stalled.is_set() || w.in_blocking.load(Ordering::Relaxed))
    }

    /// Carrier `i`'s kernel thread id and switch count, if it is running
    /// `thread` right now (for a dump to sample its stack, and to check
    /// afterwards that it was still the same thread).
    pub(crate) fn carrier_running(&self, i: usize, thread: &Inner) -> Option<(i32, u64)> {
        let w = self.workers.get(i)?;
        let sw = w.switches.load(Ordering::SeqCst);
        std::ptr::eq(w.mounted.load(Ordering::SeqCst), thread)
            .then(|| (w.tid.load(Ordering::Relaxed), sw))
    }

    /// Carriers blocked or stalled right now.
    pub(crate) fn blocked_carriers(&self) -> usize {
        self.blocked.get()
    }

    /// Makes `task`, a thread that has run before, runnable again.
    ///
    /// A thread bound to a carrier (affinity, the default) goes back to that
    /// carrier only: to its `next` slot when the waker runs there (it runs
    /// as soon as the current thread suspends), to its inbox otherwise,
    /// kicking the carrier if it sleeps. An unbound thread (a runtime that
    /// allows migration) goes to the waker's `next` slot on one of this
    /// runtime's carriers, to the injector from anywhere else.
    pub(crate) fn schedule(self: &Arc<Shared>, task: Task) {
        let home = task.home.load(Ordering::Relaxed);
        let here = carrier().filter(|c| Arc::ptr_eq(&c.shared, self));
        if home != NO_HOME {
            match here {
                Some(c) if c.index == home as usize => c.push_next(task),
                _ => {
                    task_state(&task, State::Runnable);
                    self.workers[home as usize].push_home(task);
                }
            }
            return;
        }
        if let Some(c) = here
            && !c.me().in_blocking.load(Ordering::Relaxed)
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
    fn compensate_up_to(self: &Shared, limit: usize) {
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
        let spare = self
            .idle_spares
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        if let Some(i) = spare {
            let w = &self.workers[i];
            w.spare_wake.store(true, Ordering::SeqCst);
            w.kick();
            return;
        }
        let slot = self
            .free_slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
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
        let spawned = std::thread::Builder::new()
            .name(format!("{}-{i}", self.name))
            .spawn(move || run_carrier(me, i, local));
        if spawned.is_err() {
            // The slot's queue went down with the closure; make a new one is
            // impossible (its stealer is fixed), so the slot stays unused.
            self.active.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn return_slot(&self, i: usize, local: Worker<Task>) {
        self.free_slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((i, local));
    }

    /// An owning handle to this Shared, from the registry kept by the
    /// monitor (compensation may run on any thread, holding only `&Shared`).
    fn self_arc(&self) -> Option<Arc<Shared>> {
        self.me_weak.get().and_then(std::sync::Weak::upgrade)
    }

    fn unpark_worker(&self, i: usize) {
        let w = &self.workers[i];
        w.notified.store(true, Ordering::SeqCst);
        self.unpark_worker_raw(i);
    }

    /// Unparks carrier `i`'s OS thread without claiming it for work (it
    /// re-reads its timers and goes back to sleep if there is nothing).
    fn unpark_worker_raw(&self, i: usize) {
        self.workers[i].kick();
    }

    /// Wakes every carrier (shutdown).
    pub(crate) fn wake_all(&self) {
        while let Some(i) = self.idle.pop_any_sleeper() {
            self.unpark_worker(i);
        }
        for w in self.workers.iter() {
            w.spare_wake.store(false, Ordering::SeqCst);
            w.kick();
        }
        self.monitor.deep_sleep.store(true, Ordering::SeqCst);
        self.wake_monitor();
    }

    fn has_visible_work(&self) -> bool {
        // `next` slots are not counted: their carriers are awake and will
        // run them; one stuck in a long-running thread is the monitor's job.
        !self.injector.is_empty() || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// Adds this runtime's figures to a metrics snapshot.
    pub(crate) fn add_metrics(&self, m: &mut crate::metrics::Metrics) {
        let active = self.active.load(Ordering::Relaxed);
        let busy = self
            .workers
            .iter()
            .filter(|w| !w.mounted.load(Ordering::Relaxed).is_null())
            .count();
        m.carriers_total += active;
        m.carriers_busy += busy;
        m.carriers_idle += active.saturating_sub(busy);
        m.carriers_spare += active.saturating_sub(self.core);
        m.carriers_blocked += self.blocked.get();
        m.carriers_searching += self.idle.searching.load(Ordering::Relaxed);
        m.carriers_sleeping += self.idle.num_sleepers.load(Ordering::Relaxed);
        m.spares_started += self.spares_started.load(Ordering::Relaxed);
        m.run_queue_global += self.injector.len();
        m.run_queue_local.extend(
            self.stealers
                .iter()
                .take(active.max(self.core))
                .map(Stealer::len),
        );
        m.threads_live += self.live.load(Ordering::Relaxed);
        m.threads_started += self.started.load(Ordering::Relaxed);
        m.steals += self.steals.load(Ordering::Relaxed);
        m.timers_pending += self
            .workers
            .iter()
            .map(|w| w.timers.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum::<usize>();
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
            self.push_back(unsafe { Arc::from_raw(old) });
        }
    }

    /// Queues a runnable thread at the back: a bound thread in this
    /// carrier's inbox (only this carrier may run it, so no one else is
    /// told), an unbound one in the stealable queue.
    fn push_back(&self, task: Task) {
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
        // A `next` slot holds a thread that has run: only a runtime that
        // allows migration lets another carrier take it.
        if take_next && self.shared.migrate {
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
        let me = self.me();
        if me.timer_next.load(Ordering::Relaxed) == u64::MAX {
            return;
        }
        let now = Instant::now();
        if !me.timer_due(ns_of(now)) {
            return;
        }
        if me.fire_timers_home(now, |t| self.local.push(t)) > 0 {
            self.shared.notify_work();
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        self.me().next_timer()
    }

    /// Runs `task` until it suspends or finishes, then carries out what it
    /// asked for (the suspend protocol).
    fn run(&self, task: Task) {
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
        if let Err(e) = coro_ref.get(first_stack) {
            self.fail_start(&task, coro_ref, e);
            return;
        }
        let me = self.me();
        if first_run && !self.shared.migrate {
            // Affinity: from now on this thread runs on this carrier only.
            task.home.store(self.index as u32, Ordering::Relaxed);
            me.homed.fetch_add(1, Ordering::Relaxed);
        }
        task_state(&task, State::Running);
        self.current.set(Arc::as_ptr(&task));
        me.mounted
            .store(Arc::as_ptr(&task).cast_mut(), Ordering::Relaxed);
        // Single writer: a plain increment, no locked instruction.
        me.switches.store(
            me.switches.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );

        let result = match coro_ref {
            crate::thread::CoroSlot::Running(c) => c.resume(()),
            _ => unreachable!("started above"),
        };
        self.current.set(std::ptr::null());
        me.mounted.swap(std::ptr::null_mut(), Ordering::SeqCst);
        // The monitor may be reading through `mounted`: keep the thread
        // alive until it is done (see `WorkerShared::mounted_identity`).
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
                task_state(&task, State::Runnable);
                self.push_back(task);
            }
            CoroutineResult::Return(()) => {
                task_state(&task, State::Terminated);
                crate::dump::unregister(&task);
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
            }
        }
    }

    /// A thread that cannot get a stack ends without running: its body is
    /// dropped, which completes its join packet with `Err(why)`.
    #[cold]
    fn fail_start(&self, task: &Task, slot: &mut crate::thread::CoroSlot, e: std::io::Error) {
        let why = format!(
            "weft: virtual thread #{} could not start: no stack: {e}",
            crate::thread::Thread::peek_name_id(task).1
        );
        eprintln!("{why}");
        task_state(task, State::Terminated);
        crate::dump::unregister(task);
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

    fn after_park(&self, task: Task) {
        task_state(&task, State::Parked);
        match task.park.publish_parked() {
            // Whoever unparks it owns it now: our strong count goes with it
            // (taken back by `Thread::unpark` or the timer that fires), which
            // saves a clone and a drop on every hand-off.
            AfterSwitch::Parked => std::mem::forget(task),
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
        let me = &shared.workers[self.index];
        // Before the inbox is looked at below (see `sleeping`).
        me.sleeping.store(true, Ordering::SeqCst);
        loop {
            // Snapshot the event count *before* looking at the flags: a
            // notifier sets its flag, then bumps the count.
            let seen = me.wake_word.load(Ordering::SeqCst);
            if shared.shutdown.load(Ordering::SeqCst) {
                me.sleeping.store(false, Ordering::SeqCst);
                return;
            }
            if me.notified.swap(false, Ordering::SeqCst) {
                self.searching.set(true);
                break;
            }
            // Our own work — a due timer, or a bound thread woken from
            // elsewhere — wakes us without the idle protocol. If a notifier
            // already took us off the sleeper list, its flag is coming:
            // loop and take it.
            let timer_due = self.next_timer().is_some_and(|d| d <= Instant::now());
            if (timer_due || !me.inbox.is_empty()) && shared.idle.wake_self(self.index) {
                break;
            }
            let scavenge = shared.stacks.scavenge(Instant::now());
            let wake_at = match (self.next_timer(), scavenge) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            me.wait_kick(seen, wake_at);
        }
        me.sleeping.store(false, Ordering::SeqCst);
        // We left the sleeper count (SeqCst) before this load: a monitor
        // that decided to sleep because every carrier slept is woken here.
        if shared.monitor.deep_sleep.load(Ordering::SeqCst) {
            shared.wake_monitor();
        }
    }
}

fn task_state(task: &Inner, s: State) {
    crate::thread::set_inner_state(task, s);
}

/// Body of a carrier OS thread.
pub(crate) fn run_carrier(shared: Arc<Shared>, index: usize, local: Worker<Task>) {
    let w = &shared.workers[index];
    let _ = w.os_thread.set(std::thread::current());
    // SAFETY: gettid has no preconditions.
    w.tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
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
        current: Cell::new(std::ptr::null()),
        stack_cache: RefCell::new(Vec::new()),
        suspended_unwinders: Cell::new(0),
    };
    CARRIER.with(|c| c.set(&carrier));
    carrier.main_loop();
    CARRIER.with(|c| c.set(std::ptr::null()));
    let mut cache = carrier.stack_cache.take();
    carrier.shared.stacks.release_batch(&mut cache);
    if index >= carrier.shared.core {
        let Carrier { shared, local, .. } = carrier;
        shared.return_slot(index, local);
    }
}

impl Carrier {
    fn is_spare(&self) -> bool {
        self.index >= self.shared.core
    }

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

    /// Watches the inbox for a moment before sleeping; true if work came.
    ///
    /// Threads bound here can run nowhere else, and their wakers are often
    /// one hop away (a producer on another carrier, the poller): a wake-up
    /// that finds us awake costs a queue push, one that finds us asleep a
    /// futex wake and a context switch. Measured on 2 cores with a bounded
    /// channel between two carriers: 4.9 M msg/s sleeping at once, see
    /// ARCHITECTURE.md for the figure with this watch. Bounded (about
    /// [`HOME_WATCH_ROUNDS`] short spins, yielding the core in between),
    /// and skipped when no thread is bound here.
    fn watch_home(&self) -> bool {
        let me = self.me();
        if me.homed.load(Ordering::Relaxed) == 0 {
            return false;
        }
        for round in 0..HOME_WATCH_ROUNDS {
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
    fn surplus(&self) -> bool {
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
    fn retire(&self) -> bool {
        let shared = &*self.shared;
        let me = self.me();
        self.hand_over_unbound();
        me.spare_wake.store(false, Ordering::SeqCst);
        shared.active.fetch_sub(1, Ordering::SeqCst);
        shared
            .idle_spares
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(self.index);
        // Work may have arrived while we were leaving; let a compensator see
        // that we are available.
        shared.notify_work();
        let mut deadline = Instant::now() + shared.spare_keepalive;
        loop {
            let seen = me.wake_word.load(Ordering::SeqCst);
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
                let mut spares = shared.idle_spares.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(pos) = spares.iter().position(|&i| i == self.index) {
                    spares.swap_remove(pos);
                    return false;
                }
                // A compensator picked us concurrently; its wake is coming.
                drop(spares);
                loop {
                    let seen = me.wake_word.load(Ordering::SeqCst);
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
    fn find_home(&self) -> Option<Task> {
        self.fire_timers();
        let me = self.me();
        me.take_next().or_else(|| me.pop_home())
    }

    /// Gives unbound threads parked or queued here to the rest of the
    /// runtime (migration only; bound threads have none).
    fn hand_over_unbound(&self) {
        let shared = &*self.shared;
        let me = self.me();
        let timers = {
            let mut mine = me.timers.lock().unwrap_or_else(|e| e.into_inner());
            let (unbound, bound): (Vec<TimerEntry>, Vec<TimerEntry>) =
                std::mem::take(&mut *mine).into_iter().partition(|t| {
                    t.task
                        .upgrade()
                        .is_some_and(|t| t.home.load(Ordering::Relaxed) == NO_HOME)
                });
            mine.extend(bound);
            me.update_timer_next(&mine);
            unbound
        };
        if !timers.is_empty() {
            let heir = &shared.workers[0];
            let mut h = heir.timers.lock().unwrap_or_else(|e| e.into_inner());
            h.extend(timers);
            heir.update_timer_next(&h);
            drop(h);
            // The heir may be asleep with a later deadline.
            shared.unpark_worker_raw(0);
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

// ---------------------------------------------------------------------------
// Idle protocol: who is searching, who sleeps.

/// Core carriers only: spares never sleep in this list (they retire).
struct Idle {
    searching: AtomicUsize,
    num_sleepers: AtomicUsize,
    sleepers: Mutex<Vec<usize>>,
    core: usize,
}

impl Idle {
    fn new(core: usize) -> Idle {
        Idle {
            searching: AtomicUsize::new(0),
            num_sleepers: AtomicUsize::new(0),
            sleepers: Mutex::new(Vec::with_capacity(core)),
            core,
        }
    }

    /// At most half the carriers search at once (each search costs a pass
    /// over every queue); the rest sleep.
    fn try_start_searching(&self) -> bool {
        let s = self.searching.load(Ordering::SeqCst);
        if 2 * s >= self.core.max(2) {
            return false;
        }
        self.searching.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// Returns true if this was the last searcher.
    fn stop_searching(&self) -> bool {
        self.searching.fetch_sub(1, Ordering::SeqCst) == 1
    }

    /// A sleeper to wake for new work, already counted as searching; None
    /// if someone is searching (it will find the work) or nobody sleeps.
    fn worker_to_notify(&self) -> Option<usize> {
        if self.searching.load(Ordering::SeqCst) != 0
            || self.num_sleepers.load(Ordering::SeqCst) == 0
        {
            return None;
        }
        let mut sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        if self.searching.load(Ordering::SeqCst) != 0 {
            return None;
        }
        let i = sleepers.pop()?;
        self.num_sleepers.fetch_sub(1, Ordering::SeqCst);
        self.searching.fetch_add(1, Ordering::SeqCst);
        Some(i)
    }

    fn pop_any_sleeper(&self) -> Option<usize> {
        let mut sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        let i = sleepers.pop()?;
        self.num_sleepers.fetch_sub(1, Ordering::SeqCst);
        self.searching.fetch_add(1, Ordering::SeqCst);
        Some(i)
    }

    /// Records that carrier `i` goes to sleep. Returns true if it was the
    /// last searcher (it must then re-check the queues).
    fn to_sleep(&self, i: usize, was_searching: bool) -> bool {
        let mut sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        sleepers.push(i);
        self.num_sleepers.fetch_add(1, Ordering::SeqCst);
        was_searching && self.searching.fetch_sub(1, Ordering::SeqCst) == 1
    }

    /// A sleeper woke by its own timer: take it off the list. False if a
    /// notifier already did (its `notified` flag is then about to be set).
    fn wake_self(&self, i: usize) -> bool {
        let mut sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(pos) = sleepers.iter().position(|&w| w == i) else {
            return false;
        };
        sleepers.swap_remove(pos);
        self.num_sleepers.fetch_sub(1, Ordering::SeqCst);
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
        task_state(&task, State::Runnable);
        if let Some(c) = carrier()
            && Arc::ptr_eq(&c.shared, shared)
            && !c.me().in_blocking.load(Ordering::Relaxed)
        {
            // New threads go to the back of the local queue (stealable), so a
            // spawning loop keeps running and idle carriers help.
            c.push_back(task);
            return;
        }
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

/// Every runtime in the process (for dumps and metrics).
static RUNTIMES: Mutex<Vec<std::sync::Weak<Shared>>> = Mutex::new(Vec::new());

/// Lists a new runtime.
pub(crate) fn register_runtime(shared: &Arc<Shared>) {
    let mut r = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
    r.retain(|w| w.strong_count() > 0);
    r.push(Arc::downgrade(shared));
}

/// Live runtimes.
pub(crate) fn runtimes() -> Vec<Arc<Shared>> {
    RUNTIMES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect()
}

/// Mounted threads (as `Inner` addresses) and the carrier index they run on.
pub(crate) fn mounted_carriers() -> std::collections::HashMap<usize, usize> {
    let mut m = std::collections::HashMap::new();
    for rt in runtimes() {
        for (i, w) in rt.workers.iter().enumerate() {
            let p = w.mounted.load(Ordering::Relaxed);
            if !p.is_null() {
                m.insert(p as usize, i);
            }
        }
    }
    m
}

// ---------------------------------------------------------------------------
// Blocking sections.

/// Marks the current carrier as blocked while alive (see `blocking.rs`).
pub(crate) struct BlockingGuard {
    shared: Arc<Shared>,
    index: usize,
}

/// Marks the calling carrier blocked and brings in a spare if work is
/// waiting. None when not called on a carrier.
pub(crate) fn enter_blocking() -> Option<BlockingGuard> {
    let c = carrier()?;
    let me = c.me();
    me.in_blocking.store(true, Ordering::SeqCst);
    c.shared.blocked.enter();
    if !c.local.is_empty() || me.has_next() || c.shared.has_visible_work() {
        c.shared.compensate();
    }
    Some(BlockingGuard {
        shared: c.shared.clone(),
        index: c.index,
    })
}

impl Drop for BlockingGuard {
    fn drop(&mut self) {
        self.shared.workers[self.index]
            .in_blocking
            .store(false, Ordering::SeqCst);
        self.shared.blocked.exit();
    }
}

// ---------------------------------------------------------------------------
// The monitor (Go's sysmon, in small).

/// Upper bound on the monitor's tick while any carrier is busy.
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

/// Body of the monitor thread. It never runs virtual threads. Each tick it
/// 1. fires due timers of carriers that are blocked (their owners cannot),
/// 2. reports a stall when a carrier has run one thread past the stall
///    threshold, counts that carrier as blocked and compensates,
/// 3. wakes an idle carrier when a busy one has work waiting behind its
///    running thread (in its `next` slot or queue), so it can be stolen.
///
/// It holds only a `Weak` reference, so it ends with the runtime, and it
/// sleeps without a timeout while no carrier is busy (an idle runtime costs
/// no CPU).
pub(crate) fn run_monitor(weak: std::sync::Weak<Shared>) {
    let mut last: Vec<u64> = Vec::new();
    // When the monitor first saw each carrier on its current switch count:
    // a carrier seen on the same count for `stall_threshold` is stalled.
    // (Monitor-side clocks keep `Instant::now` off the carriers' hot path.)
    let mut since: Vec<Instant> = Vec::new();
    let mut quiet = 0u32;
    loop {
        let Some(shared) = weak.upgrade() else { return };
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let _ = shared.monitor.thread.set(std::thread::current());
        let tick = MONITOR_TICK
            .min(shared.stall_threshold / 2)
            .max(Duration::from_millis(1));
        let n = shared.workers.len();
        last.resize(n, u64::MAX);
        let now = Instant::now();
        since.resize(n, now);
        let mut any_busy = false;
        for (i, w) in shared.workers.iter().enumerate() {
            let sw = w.switches.load(Ordering::Relaxed);
            let busy = !w.mounted.load(Ordering::Relaxed).is_null();
            let in_blocking = w.in_blocking.load(Ordering::SeqCst);
            any_busy |= busy;
            let same = busy && sw == last[i];
            if sw != last[i] || !busy {
                since[i] = now;
            }
            last[i] = sw;
            if in_blocking || w.stalled.is_set() {
                // The owner cannot fire them. Bound threads still can run
                // only there, but they are runnable the moment it is back;
                // unbound ones (migration) run elsewhere at once.
                if w.fire_timers_home(now, |t| shared.injector.push(t)) > 0 {
                    shared.notify_work();
                }
            }
            let held = now.saturating_duration_since(since[i]);
            if same && held >= shared.stall_threshold {
                let report = !in_blocking && w.reported.load(Ordering::Relaxed) != sw;
                // The pinning deadlock: held in the kernel while threads
                // bound here wait (they can run nowhere else).
                let waiters = w.reported_waiters.load(Ordering::Relaxed) != sw && w.has_home_work();
                // Who holds it, read now: by the time the stack is sampled
                // and a spare started the thread may have moved on.
                let who = if report || waiters {
                    w.mounted_identity(sw)
                } else {
                    None
                };
                if let Some(who) = who {
                    let tid = w.tid.load(Ordering::Relaxed);
                    let cpu = kernel_state(tid) == Some('R');
                    if report {
                        w.reported.store(sw, Ordering::Relaxed);
                        // The stack first (the carrier may move on at any
                        // moment), the symbols after compensating.
                        let ips = crate::sample::sample(tid)
                            .filter(|_| w.switches.load(Ordering::SeqCst) == sw);
                        // A CPU-bound thread waits for nothing a spare could
                        // help with: it is counted as blocked (which makes
                        // room for a spare) only while fewer than twice the
                        // parallelism carriers are on duty. Past that,
                        // CPU-bound stalls add no carrier at all.
                        let count = !cpu || shared.active.load(Ordering::SeqCst) < 2 * shared.core;
                        if count && shared.blocked.mark(&w.stalled) {
                            // The carrier may have moved on in between; undo
                            // (whoever clears the flag uncounts it, once).
                            if w.switches.load(Ordering::SeqCst) != sw {
                                shared.blocked.clear(&w.stalled);
                            } else if cpu {
                                shared.compensate_up_to(2 * shared.core);
                            } else {
                                shared.compensate();
                            }
                        }
                        report_stall(&shared, i, w, &who, held, cpu, ips);
                    }
                    if waiters && !cpu {
                        w.reported_waiters.store(sw, Ordering::Relaxed);
                        report_blocked_with_waiters(&shared, i, w, &who, held, in_blocking);
                    }
                }
            }
            if same && !shared.stealers[i].is_empty() {
                shared.notify_work();
            }
        }
        // Safety net (Go's sysmon does the same): work queued while no
        // carrier searches gets a carrier, whatever the wake-up protocol
        // missed. Cheap: a few loads per tick.
        let queued = shared.has_visible_work();
        if queued && shared.idle.searching.load(Ordering::SeqCst) == 0 {
            shared.notify_work();
        }
        let all_asleep =
            shared.idle.num_sleepers.load(Ordering::SeqCst) >= shared.active.load(Ordering::SeqCst);
        quiet = if any_busy || !all_asleep || queued {
            0
        } else {
            quiet + 1
        };
        if quiet >= MONITOR_QUIET_TICKS {
            shared.monitor.deep_sleep.store(true, Ordering::SeqCst);
            // Re-check after announcing the deep sleep: a carrier that woke
            // in between left the sleeper count first and checks
            // `deep_sleep` after (both SeqCst), so one of us sees the other.
            let all_asleep = shared.idle.num_sleepers.load(Ordering::SeqCst)
                >= shared.active.load(Ordering::SeqCst);
            drop(shared);
            if all_asleep {
                std::thread::park();
            }
            quiet = 0;
            if let Some(shared) = weak.upgrade() {
                shared.monitor.deep_sleep.store(false, Ordering::SeqCst);
            }
            continue;
        }
        drop(shared);
        std::thread::sleep(tick);
    }
}

/// Records a stall of carrier `i`: which thread, for how long, whether the
/// OS thread is running (CPU) or sleeping in the kernel (blocked), and the
/// threads bound to the carrier that wait behind it.
fn report_stall(
    shared: &Arc<Shared>,
    i: usize,
    w: &WorkerShared,
    who: &Identity,
    held: Duration,
    cpu: bool,
    ips: Option<Vec<usize>>,
) {
    let tid = w.tid.load(Ordering::Relaxed);
    let mut detail = format!("carrier {i}, tid {tid}");
    if !cpu && let Some(call) = kernel_call(tid) {
        let _ = write!(detail, ", in {call}");
    }
    let frames = ips.map(|ips| crate::symbols::Resolver::default().frames(&ips));
    // (A registry walk: only when something is queued behind it.)
    if w.has_home_work() {
        let waiting = waiting_behind(shared, i);
        if !waiting.is_empty() {
            let _ = write!(detail, "; waiting behind it: {waiting}");
        }
    }
    let kind = if cpu {
        crate::events::EventKind::StallCpu
    } else {
        crate::events::EventKind::StallBlocked
    };
    record_carrier_event(who, kind, held, detail, frames);
}

/// A virtual thread's id and name, as read off its carrier.
type Identity = (u64, Option<String>);

/// Records `kind` for `who`, the thread that held its carrier.
fn record_carrier_event(
    who: &Identity,
    kind: crate::events::EventKind,
    held: Duration,
    detail: String,
    frames: Option<Vec<crate::symbols::Frame>>,
) {
    crate::events::record(crate::events::Event {
        kind,
        thread_id: who.0,
        thread_name: who.1.clone(),
        duration: held,
        at: std::time::SystemTime::now(),
        call_site: frames.as_ref().and_then(|f| {
            crate::symbols::first_user_frame(f).map(|i| crate::symbols::describe(&f[i]))
        }),
        stack: frames.map(|f| crate::symbols::format_stack(&f)),
        detail: Some(detail),
    });
}

/// Records that carrier `i` is held in the kernel (or in a pinned wait)
/// while threads bound to it are runnable: the pinning deadlock shape.
fn report_blocked_with_waiters(
    shared: &Arc<Shared>,
    i: usize,
    w: &WorkerShared,
    who: &Identity,
    held: Duration,
    pinned_wait: bool,
) {
    let tid = w.tid.load(Ordering::Relaxed);
    let call = if pinned_wait {
        "a pinned wait (weft::pinned)".to_string()
    } else {
        kernel_call(tid).unwrap_or_else(|| "the kernel".into())
    };
    let waiting = waiting_behind(shared, i);
    let detail = format!(
        "carrier {i} (tid {tid}) is blocked in {call} while threads bound to it wait: {}. \
         They can run only on this carrier. If the blocked thread waits for an OS-level lock \
         (std::sync, parking_lot) that one of them holds across a weft blocking call, this is \
         a deadlock: use weft::sync locks, or do not block while holding an OS lock",
        if waiting.is_empty() {
            "(none listed)".to_string()
        } else {
            waiting
        }
    );
    record_carrier_event(
        who,
        crate::events::EventKind::BlockedWithWaiters,
        held,
        detail,
        None,
    );
}

/// The runnable threads bound to carrier `i` of `shared`, as
/// `#id 'name', …` (at most 8 named, then a count).
fn waiting_behind(shared: &Arc<Shared>, i: usize) -> String {
    let mut names = Vec::new();
    let mut n = 0usize;
    crate::dump::for_each_thread(|t| {
        if t.home.load(Ordering::Relaxed) as usize == i
            && crate::thread::inner_state(t) == State::Runnable
            && t.runtime_shared().is_some_and(|s| Arc::ptr_eq(s, shared))
        {
            n += 1;
            if names.len() < 8 {
                let (name, id) = crate::thread::Thread::peek_name_id(t);
                names.push(format!("#{id} '{}'", name.unwrap_or("")));
            }
        }
    });
    let mut out = names.join(", ");
    if n > names.len() {
        let _ = write!(out, " and {} more", n - names.len());
    }
    out
}

/// The system call a kernel thread of this process sleeps in, by name
/// where we know it (`/proc/self/task/<tid>/syscall`).
fn kernel_call(tid: i32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    let nr: i64 = s.split_whitespace().next()?.parse().ok()?;
    Some(
        match nr {
            libc::SYS_futex => "futex (a std::sync/parking_lot lock, a condvar, thread::park)",
            libc::SYS_read => "read",
            libc::SYS_write => "write",
            libc::SYS_recvfrom => "recvfrom",
            libc::SYS_sendto => "sendto",
            libc::SYS_recvmsg => "recvmsg",
            libc::SYS_accept4 => "accept4",
            libc::SYS_connect => "connect",
            libc::SYS_nanosleep => "nanosleep (std::thread::sleep)",
            libc::SYS_clock_nanosleep => "clock_nanosleep (std::thread::sleep)",
            libc::SYS_poll => "poll",
            libc::SYS_ppoll => "ppoll",
            libc::SYS_epoll_wait => "epoll_wait",
            libc::SYS_epoll_pwait => "epoll_pwait",
            libc::SYS_wait4 => "wait4",
            _ => return Some(format!("system call {nr}")),
        }
        .to_string(),
    )
}

/// State letter of a kernel thread of this process (`R`, `S`, `D`, ...).
fn kernel_state(tid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The state follows the parenthesised command name, which may itself
    // contain spaces or parentheses: take the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

// ---------------------------------------------------------------------------
// Futex on a carrier's event count.

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT on a live, aligned u32 (an AtomicU32 we borrow for
    // the call); the kernel only reads it and the optional timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            tsp,
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32; wakes at most one waiter.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}
