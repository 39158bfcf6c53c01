//! The policy of a simulated runtime (`crate::sim`): which runnable thread
//! runs next, drawn from a seed, and the trace of every such decision.
//!
//! A simulated runtime has one carrier and no other source of events: no
//! poller, no monitor, no spare carriers, no offload threads. Its carrier
//! runs [`Carrier::simulate`](super::carrier::Carrier) instead of its main
//! loop: it gathers every runnable thread (its `next` slot, inbox, local
//! queue and the injector, in that order), asks [`Simulation::pick`] which
//! one runs, runs it until it suspends, and repeats. With nothing runnable
//! it moves the [`VirtualClock`] to its earliest timer and fires it; with
//! no timer either, the simulation ends — finished if no thread is left,
//! deadlocked otherwise ([`End`]).
//!
//! Everything a run depends on is then a function of the seed: the order
//! of the runnable set is the order of the events that made the threads
//! runnable, which were themselves chosen by earlier picks; timer ties
//! become runnable together and are picked like any others.
//!
//! # Policies
//!
//! - **Uniform**: each step picks uniformly among the runnable threads.
//! - **PCT** (probabilistic concurrency testing; Burckhardt, Kothari,
//!   Musuvathi and Nagarakatte, "A Randomized Scheduler with Probabilistic
//!   Guarantees of Finding Bugs", ASPLOS 2010): each thread gets a random
//!   priority when first seen, the highest-priority runnable thread runs,
//!   and at `depth - 1` steps drawn in advance from the first
//!   `expected_steps` the running thread's priority drops below every
//!   initial one. A bug that needs `d` ordering constraints is found with
//!   probability at least 1/(n·k^(d-1)) per run (n threads, k steps).
//!
//! # The trace
//!
//! Each pick mixes (step, runnable count, the chosen thread's number in
//! order of first appearance, virtual time) into a 64-bit hash (FNV-1a
//! over words), and so do the values a program records with
//! `sim::trace`. Two runs with the same seed have the same trace hash; a
//! different hash means the runs diverged, the first thing to check when a
//! seed does not replay.

use crate::thread::RecordArc;
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::clock::VirtualClock;
use crate::thread::{Thread, VThread};
use crate::unpoison::Unpoison;

/// How a simulated carrier picks the next thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    Uniform,
    Pct { depth: u32, expected_steps: u64 },
}

/// How a simulation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Every thread finished.
    Finished,
    /// Threads are left, none runnable and no timer pending.
    Deadlock { parked: usize },
    /// The step limit was reached (`Limits::steps`).
    StepLimit,
    /// The next timer lies past the virtual-time limit (`Limits::time`).
    TimeLimit,
    /// One step ran past the watchdog's real time (`Simulation::wait_end`):
    /// the running thread neither finished nor suspended.
    Stuck {
        /// Real time since the step began, as the watchdog saw it.
        ran: Duration,
        /// CPU time the carrier used in it (from the first poll that saw
        /// it unfinished), if it could be read.
        cpu: Option<Duration>,
        /// Whether the carrier was asleep in the kernel (a blocking system
        /// call) rather than running, if that could be read.
        in_system_call: Option<bool>,
    },
}

/// How far a simulation may run before it is stopped (a livelock — threads
/// that yield to each other for ever — would otherwise never end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Scheduling decisions.
    pub(crate) steps: u64,
    /// Virtual time.
    pub(crate) time: Option<Duration>,
}

/// A thread of a simulation that panicked.
#[derive(Clone, Debug)]
pub(crate) struct Panicked {
    /// Its id.
    pub(crate) id: u64,
    /// `thread "name" (#id)`, or `thread #id`.
    pub(crate) label: String,
    /// The panic's message.
    pub(crate) message: String,
    /// Nobody will see the payload: the thread's join handle was dropped
    /// (before or after the panic) without a join.
    pub(crate) lost: bool,
    /// The payload's address while it lives, to match `panic_lost`.
    payload: usize,
}

/// The address of a panic payload, its identity while it lives.
fn payload_addr(payload: &(dyn Any + Send)) -> usize {
    payload as *const (dyn Any + Send) as *const () as usize
}

/// Independent random streams, so that entropy a program draws does not
/// shift the schedule's decisions (and the other way round).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stream {
    Schedule = 0,
    Program = 1,
    Network = 2,
}

/// One simulation's policy state, clock and outcome.
pub(crate) struct Simulation {
    seed: u64,
    policy: Policy,
    limits: Limits,
    pub(crate) clock: VirtualClock,
    choices: Mutex<Choices>,
    /// Set by the caller once the root thread is spawned (`start`), read
    /// by the carrier before its first pick.
    started: Mutex<bool>,
    /// The simulated host each thread belongs to (`sim::net`), by thread
    /// id; a thread spawned by a simulated thread inherits its parent's.
    hosts: Mutex<HashMap<u64, u32>>,
    /// Threads in `sim::wait_idle`, in the order they began to wait, and
    /// the flag each waits to see raised.
    idle_waiters: Mutex<Vec<(crate::thread::Thread, Arc<AtomicBool>)>>,
    /// The simulation's threads that panicked, in the order they did.
    panics: Mutex<Vec<Panicked>>,
    /// The simulated network (`sim::net`'s state: hosts, links,
    /// connections), made on first use; its type is `sim::net`'s own.
    network: OnceLock<Arc<dyn Any + Send + Sync>>,
    /// Set by the carrier when the simulation ends (`finish`), or by the
    /// watchdog when one step never ends (`wait_end`): the first to set
    /// it decides.
    end: Mutex<Option<End>>,
    /// The carrier's kernel thread id, for the watchdog (0 until the
    /// carrier starts).
    carrier_tid: AtomicI32,
    /// Raised by the watchdog with `End::Stuck`; the carrier reads it after
    /// each step (a relaxed load, not the `end` lock).
    gave_up: AtomicBool,
    /// One condition variable per mutex (`std` may panic if one is used
    /// with two): the carrier waits on `started`, the caller on `end`, at
    /// overlapping times.
    started_cv: Condvar,
    end_cv: Condvar,
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("seed", &self.seed)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// What the carrier decides with; only the carrier (and the threads it
/// runs, one at a time) touches it, so its lock is never contended.
struct Choices {
    rngs: [fastrand::Rng; 3],
    trace: u64,
    steps: u64,
    /// Thread ids in order of first appearance (ids are process-wide; the
    /// numbers here are the run's own).
    numbers: HashMap<u64, u64>,
    /// PCT priorities by thread number.
    priority: HashMap<u64, u64>,
    /// PCT change points: steps, ascending, each consumed once.
    change_at: Vec<u64>,
    changes_done: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn mix(h: u64, word: u64) -> u64 {
    word.to_le_bytes()
        .iter()
        .fold(h, |h, &b| (h ^ b as u64).wrapping_mul(FNV_PRIME))
}

impl Simulation {
    pub(crate) fn new(seed: u64, policy: Policy) -> Simulation {
        // One seed, three streams: the golden-ratio increments keep them
        // apart (fastrand's generator is a 64-bit counter mix, wyrand).
        let stream =
            |k: u64| fastrand::Rng::with_seed(seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut rngs = [stream(1), stream(2), stream(3)];
        let change_at = match policy {
            Policy::Uniform => Vec::new(),
            Policy::Pct {
                depth,
                expected_steps,
            } => {
                // `depth - 1` distinct steps (each step changes one
                // priority), or every step when there are fewer.
                let steps = expected_steps.max(1);
                if u64::from(depth - 1) >= steps {
                    (1..=steps).collect()
                } else {
                    let mut v = std::collections::BTreeSet::new();
                    while v.len() < (depth - 1) as usize {
                        v.insert(rngs[Stream::Schedule as usize].u64(1..=steps));
                    }
                    v.into_iter().collect()
                }
            }
        };
        Simulation {
            seed,
            policy,
            limits: Limits {
                steps: u64::MAX,
                time: None,
            },
            clock: VirtualClock::new(),
            choices: Mutex::new(Choices {
                rngs,
                trace: FNV_OFFSET,
                steps: 0,
                numbers: HashMap::new(),
                priority: HashMap::new(),
                change_at,
                changes_done: 0,
            }),
            started: Mutex::new(false),
            hosts: Mutex::new(HashMap::new()),
            idle_waiters: Mutex::new(Vec::new()),
            panics: Mutex::new(Vec::new()),
            network: OnceLock::new(),
            end: Mutex::new(None),
            carrier_tid: AtomicI32::new(0),
            gave_up: AtomicBool::new(false),
            started_cv: Condvar::new(),
            end_cv: Condvar::new(),
        }
    }

    /// The same simulation, stopped at `limits`.
    pub(crate) fn with_limits(mut self, limits: Limits) -> Simulation {
        self.limits = limits;
        self
    }

    /// Whether virtual time may move to `t` (false past the time limit).
    pub(crate) fn within_time(&self, t: std::time::Instant) -> bool {
        self.limits
            .time
            .is_none_or(|max| t.saturating_duration_since(self.clock.origin()) <= max)
    }

    /// Whether the simulation has started and its carrier is not free to
    /// serve dumps: it has not ended, or the watchdog gave up on a step
    /// that still holds the carrier.
    pub(crate) fn running(&self) -> bool {
        *self.started.lock().unpoison() && (self.end.lock().unpoison().is_none() || self.gave_up())
    }

    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }

    /// The index in `runnable` (not empty) of the thread to run next;
    /// `None` at the step limit.
    pub(crate) fn pick(&self, runnable: &[RecordArc]) -> Option<usize> {
        debug_assert!(!runnable.is_empty());
        let c = &mut *self.choices.lock().unpoison();
        if c.steps >= self.limits.steps {
            return None;
        }
        c.steps += 1;
        let number = |t: &VThread, c: &mut Choices| {
            let id = Thread::peek_name_id(t).1;
            let next = c.numbers.len() as u64;
            *c.numbers.entry(id).or_insert(next)
        };
        let i = match self.policy {
            Policy::Uniform => c.rngs[Stream::Schedule as usize].usize(..runnable.len()),
            Policy::Pct { depth, .. } => {
                let mut best = (0, 0u64);
                for (i, t) in runnable.iter().enumerate() {
                    let n = number(t, c);
                    let p = match c.priority.get(&n) {
                        Some(&p) => p,
                        None => {
                            // Initial priorities lie above every change's.
                            let p = c.rngs[Stream::Schedule as usize].u64(depth as u64..);
                            c.priority.insert(n, p);
                            p
                        }
                    };
                    if i == 0 || p > best.1 {
                        best = (i, p);
                    }
                }
                if c.change_at.first().is_some_and(|&k| k <= c.steps) {
                    c.change_at.remove(0);
                    c.changes_done += 1;
                    let n = number(&runnable[best.0], c);
                    c.priority.insert(n, depth as u64 - c.changes_done);
                }
                best.0
            }
        };
        let n = number(&runnable[i], c);
        for word in [
            c.steps,
            runnable.len() as u64,
            n,
            self.clock.elapsed().as_nanos() as u64,
        ] {
            c.trace = mix(c.trace, word);
        }
        Some(i)
    }

    /// A random number from `stream`.
    pub(crate) fn random(&self, stream: Stream) -> u64 {
        self.choices.lock().unpoison().rngs[stream as usize].u64(..)
    }

    /// Mixes a program's value into the trace.
    pub(crate) fn record(&self, word: u64) {
        let c = &mut *self.choices.lock().unpoison();
        c.trace = mix(c.trace, word);
    }

    /// The trace hash so far.
    pub(crate) fn trace(&self) -> u64 {
        self.choices.lock().unpoison().trace
    }

    /// Thread `child` was spawned by `parent`, a thread of this
    /// simulation: it inherits its host.
    pub(crate) fn spawned(&self, parent: u64, child: u64) {
        let mut hosts = self.hosts.lock().unpoison();
        if let Some(&h) = hosts.get(&parent) {
            hosts.insert(child, h);
        }
    }

    /// Puts thread `thread` (and the threads it spawns from now on) on
    /// simulated host `host`.
    pub(crate) fn set_host(&self, thread: u64, host: u32) {
        self.hosts.lock().unpoison().insert(thread, host);
    }

    /// The simulated host of thread `thread`, if it was put on one.
    pub(crate) fn host_of(&self, thread: u64) -> Option<u32> {
        self.hosts.lock().unpoison().get(&thread).copied()
    }

    /// Parks the calling thread of this simulation until every other one
    /// is blocked (nothing else runnable); before time moves on.
    pub(crate) fn wait_idle(&self) {
        let flag = Arc::new(AtomicBool::new(false));
        self.idle_waiters
            .lock()
            .unpoison()
            .push((crate::thread::current(), flag.clone()));
        while !flag.load(Ordering::Acquire) {
            // Not interruptible (it returns nothing to say so): an interrupt
            // is kept for the thread's next wait. `park` returns at once on
            // an interrupted thread, and this loop would then never suspend
            // again, holding the one carrier forever.
            let was = crate::thread::take_interrupt();
            crate::thread::park();
            if was {
                crate::thread::current().interrupt_flag_restore();
            }
        }
    }

    /// The carrier found nothing runnable: wakes the first thread in
    /// `wait_idle`, if any (true), before it would move time on.
    ///
    /// One at a time, in the order they began to wait: each returns when
    /// every other thread is blocked. Woken together, the first to run
    /// could set others going (send to a worker) while the rest, returning
    /// after it, would take that state for idle.
    pub(crate) fn wake_idle_waiters(&self) -> bool {
        let first = {
            let mut waiters = self.idle_waiters.lock().unpoison();
            (!waiters.is_empty()).then(|| waiters.remove(0))
        };
        match first {
            Some((t, flag)) => {
                flag.store(true, Ordering::Release);
                t.unpark();
                true
            }
            None => false,
        }
    }

    /// Thread `thread` of this simulation ended in a panic with `payload`,
    /// which its join handle's holder may still see (or not:
    /// [`Simulation::panic_lost`]).
    pub(crate) fn thread_panicked(&self, thread: &VThread, payload: &(dyn Any + Send)) {
        let (name, id) = Thread::peek_name_id(thread);
        let label = match name {
            Some(name) => format!("thread {name:?} (#{id})"),
            None => format!("thread #{id}"),
        };
        self.panics.lock().unpoison().push(Panicked {
            id,
            label,
            message: crate::thread::panic_message(payload).to_string(),
            lost: false,
            payload: payload_addr(payload),
        });
    }

    /// A panic payload is dropped unjoined — its thread was detached, or
    /// its handle dropped without a join: nobody saw the panic.
    pub(crate) fn panic_lost(&self, payload: &(dyn Any + Send)) {
        let addr = payload_addr(payload);
        let mut panics = self.panics.lock().unpoison();
        // The latest entry at this address: a payload freed after a join
        // may have left its address to a later one. (An error that never
        // was a panic — a body dropped unrun — matches no message.)
        let message = crate::thread::panic_message(payload);
        if let Some(p) = panics
            .iter_mut()
            .rev()
            .find(|p| p.payload == addr && p.message == message)
        {
            p.lost = true;
        }
    }

    /// The simulation's threads that panicked, in the order they did.
    pub(crate) fn panics(&self) -> Vec<Panicked> {
        self.panics.lock().unpoison().clone()
    }

    /// The simulated network of this simulation, made by `make` on first
    /// use (`None` if it was made with another type, which `sim::net`,
    /// its one caller, never does).
    pub(crate) fn network<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Option<Arc<T>> {
        self.network
            .get_or_init(|| Arc::new(make()))
            .clone()
            .downcast::<T>()
            .ok()
    }

    /// The ids of every thread this simulation has run.
    pub(crate) fn thread_ids(&self) -> std::collections::HashSet<u64> {
        self.choices
            .lock()
            .unpoison()
            .numbers
            .keys()
            .copied()
            .collect()
    }

    /// Scheduling decisions so far.
    pub(crate) fn steps(&self) -> u64 {
        self.choices.lock().unpoison().steps
    }

    /// Virtual time since the simulation began.
    pub(crate) fn elapsed(&self) -> Duration {
        self.clock.elapsed()
    }

    /// Lets the carrier begin (the root thread is queued).
    pub(crate) fn start(&self) {
        *self.started.lock().unpoison() = true;
        self.started_cv.notify_all();
    }

    /// The carrier's wait for [`Simulation::start`]; `tid` is the
    /// carrier's kernel thread id.
    pub(crate) fn wait_start(&self, tid: i32) {
        self.carrier_tid.store(tid, Ordering::Relaxed);
        let mut s = self.started.lock().unpoison();
        while !*s {
            s = self.started_cv.wait(s).unpoison();
        }
    }

    /// The carrier's report of the end (unless the watchdog ended the run
    /// first).
    pub(crate) fn finish(&self, end: End) {
        self.end.lock().unpoison().get_or_insert(end);
        self.end_cv.notify_all();
    }

    /// Whether the watchdog ended the run during the step that just
    /// ended (the carrier's check after each step).
    pub(crate) fn gave_up(&self) -> bool {
        self.gave_up.load(Ordering::Relaxed)
    }

    /// Waits for the end of the simulation, and watches it meanwhile.
    ///
    /// The one carrier cannot be preempted: a thread that neither finishes
    /// nor suspends — a loop that never waits, or a real system call that
    /// blocks (a `std::net` read, `std::thread::sleep` without
    /// `transparent`) — holds it for ever, and neither limit is ever
    /// checked again (both are checked between steps). Slow and stuck are
    /// told apart by progress, not by total time: a run that takes
    /// scheduling steps is never stopped here, however long it runs; one
    /// step that lasts `watchdog` of real time (measured from when this
    /// wait first saw the step count at its value, so a little more in
    /// truth) ends the run as [`End::Stuck`]. The count is sampled every
    /// quarter of `watchdog` (at most every second).
    ///
    /// What then happens to the carrier: it keeps running the thread
    /// (nothing can stop a thread from outside without undefined
    /// behaviour: unwinding it from a signal handler is not allowed, and
    /// freezing it could leave a lock it holds — the allocator's, a
    /// `std` mutex — held for ever), but at `SCHED_IDLE` priority, so it
    /// takes only CPU time nothing else wants; if the thread ever
    /// suspends, the carrier sees the run ended and leaves it, like a
    /// deadlocked run's.
    pub(crate) fn wait_end(&self, watchdog: Duration) -> End {
        let poll = (watchdog / 4).clamp(Duration::from_millis(1), Duration::from_secs(1));
        // (steps, when first seen, the carrier's CPU time then: read only
        // once a poll finds the count unchanged, not in every quick run)
        let mut seen = (self.steps(), Instant::now(), None);
        loop {
            {
                let e = self.end.lock().unpoison();
                let (e, _) = self
                    .end_cv
                    .wait_timeout_while(e, poll, |e| e.is_none())
                    .unpoison();
                if let Some(end) = *e {
                    return end;
                }
            }
            // Outside the `end` lock: `steps` takes the policy's lock.
            let steps = self.steps();
            let now = Instant::now();
            if steps != seen.0 {
                seen = (steps, now, None);
                continue;
            }
            if seen.2.is_none() {
                seen.2 = self.carrier_cpu();
            }
            let ran = now - seen.1;
            if ran < watchdog {
                continue;
            }
            let cpu = self
                .carrier_cpu()
                .zip(seen.2)
                .map(|(now, then)| now.saturating_sub(then));
            let stuck = End::Stuck {
                ran,
                cpu,
                in_system_call: self.carrier_asleep(),
            };
            let end = *self.end.lock().unpoison().get_or_insert(stuck);
            if matches!(end, End::Stuck { .. }) {
                self.gave_up.store(true, Ordering::Relaxed);
            }
            return end;
        }
    }

    /// CPU time the carrier's OS thread has used (Linux's per-thread
    /// `schedstat`: nanoseconds on a CPU, first field).
    fn carrier_cpu(&self) -> Option<Duration> {
        let tid = self.carrier_tid.load(Ordering::Relaxed);
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
        let ns = text.split_whitespace().next()?.parse().ok()?;
        Some(Duration::from_nanos(ns))
    }

    /// Whether the carrier's OS thread sleeps in the kernel (state `S` or
    /// `D` in Linux's `stat`) rather than runs or waits for a CPU (`R`):
    /// told by its state, not its CPU time, which a loaded machine cuts.
    ///
    /// A few looks, a millisecond apart, and asleep if any says so: a
    /// thread asleep in a system call runs for a moment whenever a signal
    /// reaches it (another test's sampler in the same process read `R`
    /// once, for an `accept` that had used no CPU in 2 s), while a thread
    /// that computes is never seen asleep.
    fn carrier_asleep(&self) -> Option<bool> {
        let tid = self.carrier_tid.load(Ordering::Relaxed);
        let mut seen = None;
        for look in 0..3 {
            if look > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            let Ok(text) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
                continue;
            };
            // `pid (comm) state …`; the name may hold spaces and parentheses.
            let state = text
                .rfind(')')
                .and_then(|at| text.get(at + 1..))
                .and_then(|rest| rest.trim_start().chars().next());
            if let Some(state) = state {
                if matches!(state, 'S' | 'D') {
                    return Some(true);
                }
                seen = Some(false);
            }
        }
        seen
    }

    /// Moves the carrier of a stuck run to `SCHED_IDLE` (see
    /// [`Simulation::wait_end`]), once the caller has sampled its stack (a
    /// sample needs the carrier to run its signal handler). Lowering a
    /// thread of one's own process needs no privilege; if it fails anyway,
    /// the carrier keeps its priority.
    pub(crate) fn demote_carrier(&self) {
        let tid = self.carrier_tid.load(Ordering::Relaxed);
        if tid <= 0 {
            return;
        }
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid `sched_param` that outlives the call;
        // `tid` names the carrier of this simulation, a thread of this
        // process (an exited one makes the call fail with ESRCH, nothing
        // else).
        let _ = unsafe { libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param) };
    }
}

/// Whether `socket(domain, …)` — `std::net`, or a C library, under
/// `transparent` — must fail on the calling thread: on a simulation's
/// thread, an Internet socket would reach the real network, which the
/// simulation neither sees nor replays (only `weft::net`'s sockets are
/// simulated). It fails with `EACCES` (`PermissionDenied`), and the first
/// one in the process says why on stderr, naming the call.
#[cfg(feature = "transparent")]
pub(crate) fn refuses_real_socket(domain: i32) -> bool {
    let family = match domain {
        libc::AF_INET => "AF_INET",
        libc::AF_INET6 => "AF_INET6",
        _ => return false,
    };
    if !crate::clock::is_virtual() {
        return false;
    }
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        eprintln!(
            "weft::sim: socket({family}) inside a simulation (std::net, or a C library's \
             socket) would use the real network, which the simulation neither sees nor \
             replays: refused (EACCES); weft::net's sockets are the simulated ones"
        );
    }
    true
}

/// Whether an OS thread started now must be refused (`EPERM`): inside a
/// simulation it would run outside its clock and schedule. Said once on
/// stderr. Weft's `pthread_create` (`starter.rs`) asks, with the
/// `transparent` feature (which makes the clock virtual for a simulation).
#[cfg(all(
    feature = "transparent",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub(super) fn refuse_os_thread() -> bool {
    if !crate::clock::is_virtual() {
        return false;
    }
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        eprintln!(
            "weft::sim: an OS thread was started inside a simulation \
             (std::thread::spawn or pthread_create): it would run outside the \
             simulation's clock and schedule, so it is refused (EPERM); \
             use weft::spawn"
        );
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_from_one_seed_are_reproducible_and_distinct() {
        let a = Simulation::new(7, Policy::Uniform);
        let b = Simulation::new(7, Policy::Uniform);
        let xs: Vec<u64> = (0..4).map(|_| a.random(Stream::Program)).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.random(Stream::Program)).collect();
        assert_eq!(xs, ys);
        let zs: Vec<u64> = (0..4).map(|_| b.random(Stream::Network)).collect();
        assert_ne!(xs, zs);
        let c = Simulation::new(8, Policy::Uniform);
        assert_ne!(xs[0], c.random(Stream::Program));
    }

    #[test]
    fn pct_change_points_lie_within_the_expected_steps() {
        let s = Simulation::new(
            3,
            Policy::Pct {
                depth: 4,
                expected_steps: 50,
            },
        );
        let c = s.choices.lock().unwrap();
        assert_eq!(c.change_at.len(), 3);
        assert!(c.change_at.windows(2).all(|w| w[0] <= w[1]));
        assert!(c.change_at.iter().all(|&k| (1..=50).contains(&k)));
    }

    /// Each change point is its own step: two drawn equal would leave the
    /// second (and every later one) behind the step counter, never taken.
    #[test]
    fn pct_change_points_are_distinct() {
        for seed in 0..200 {
            let s = Simulation::new(
                seed,
                Policy::Pct {
                    depth: 4,
                    expected_steps: 6,
                },
            );
            let c = s.choices.lock().unwrap();
            assert_eq!(c.change_at.len(), 3, "seed {seed}");
            assert!(
                c.change_at.windows(2).all(|w| w[0] < w[1]),
                "seed {seed}: {:?}",
                c.change_at
            );
        }
        // More changes than steps: one at every step.
        let s = Simulation::new(
            1,
            Policy::Pct {
                depth: 10,
                expected_steps: 3,
            },
        );
        assert_eq!(s.choices.lock().unwrap().change_at, [1, 2, 3]);
    }
}
