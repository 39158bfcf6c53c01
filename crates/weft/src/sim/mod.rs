//! Deterministic simulation: run blocking code under virtual time and a
//! seeded schedule, and replay any run from its seed.
//!
//! [`run`] (or [`Sim::run`]) runs a closure, and every virtual thread it
//! spawns, on a simulated runtime:
//!
//! - **One carrier, seeded schedule.** Whenever the running thread
//!   suspends (parks, sleeps, waits on a lock, channel or socket, yields),
//!   the next thread to run is drawn from the seed among all runnable ones
//!   — uniformly, or with PCT priorities ([`Sim::pct`]). Wake-up orders and
//!   timer ties are runnable-set order, so they follow from the seed too.
//! - **Virtual time.** Weft's clock is the simulation's: `weft::sleep`,
//!   `park_timeout`, lock, channel and socket timeouts and Weft's timers
//!   all read it. It stands still while threads run and jumps to the next
//!   deadline when every thread waits: a 30 s timeout takes microseconds.
//!   [`now`] reads it; under `transparent`, so do `std::time::Instant::now`
//!   and `SystemTime::now` (libc's `clock_gettime`) on the simulation's
//!   threads, and `std::thread::sleep` sleeps in it.
//! - **Seeded entropy.** [`random`] draws from the seed; under
//!   `transparent`, so does libc's `getrandom` on the simulation's threads
//!   (and with it `HashMap`'s keys).
//! - **Same seed, same run.** Every scheduling decision and every value a
//!   program passes to [`trace`] goes into a trace hash
//!   ([`Report::trace`]): two runs with one seed have the same hash.
//!
//! [`check`] runs many seeds and stops at the first failure — a panic of
//! the closure, or a deadlock (threads left, none runnable, no timer) —
//! with the seed in the panic message; `WEFT_SIM_SEED=<seed>` makes
//! [`check`] run that seed alone, to replay it.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use weft::sync::Mutex;
//!
//! // Two threads sleep different virtual times and record who was first:
//! // the sleeps take no real time, and the order never varies.
//! let report = weft::sim::Sim::new().seed(42).run(|| {
//!     let log = Arc::new(Mutex::new(Vec::new()));
//!     let hs: Vec<_> = [(1, 30), (2, 10)]
//!         .into_iter()
//!         .map(|(id, secs)| {
//!             let log = log.clone();
//!             weft::spawn(move || {
//!                 weft::sleep(Duration::from_secs(secs)).unwrap();
//!                 log.lock().unwrap().push(id);
//!             })
//!         })
//!         .collect();
//!     for h in hs {
//!         h.join().unwrap();
//!     }
//!     assert_eq!(weft::sim::elapsed(), Some(Duration::from_secs(30)));
//!     let order = log.lock().unwrap().clone();
//!     order
//! });
//! let report = report.unwrap();
//! assert_eq!(report.value, vec![2, 1]);
//! assert_eq!(report.elapsed, Duration::from_secs(30));
//! ```
//!
//! [`net`] is the simulated network: inside a simulation, `weft::net`'s
//! TCP sockets connect simulated hosts ([`net::host`]) through in-memory
//! links with latency, jitter, loss, partitions and crashes drawn from the
//! seed or scripted, and names resolve to those hosts.
//!
//! # What a simulation cannot see
//!
//! Only what goes through Weft is simulated. A simulated runtime has no
//! poller, no monitor, no spare carriers and no offload threads:
//! [`crate::blocking`] runs its closure in place (in zero virtual time),
//! and a pinned wait parks like any other. Calls that would leave the
//! simulation — real sockets and files read by a thread that waits on
//! them, threads of another runtime or OS threads — are not deterministic;
//! a thread that waits for one of them, with nothing else to do, looks
//! deadlocked. Code that spins on the clock never sees it move (time moves
//! only when every thread waits).

pub mod net;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::runtime::RuntimeBuilder;
use crate::sched::{End, Limits, Policy, Simulation, Stream};
use crate::thread::panic_message;

/// Environment variable naming one seed for [`check`] to run alone.
pub const SEED_ENV: &str = "WEFT_SIM_SEED";

/// Settings of a simulation: the seed and the scheduling policy.
#[derive(Clone, Copy, Debug)]
#[must_use = "a Sim does nothing until `run` or `check` is called"]
pub struct Sim {
    seed: u64,
    policy: Policy,
    limits: Limits,
}

/// Scheduling decisions a run may take by default before it is stopped
/// ([`Sim::max_steps`]).
pub const DEFAULT_MAX_STEPS: u64 = 10_000_000;

impl Default for Sim {
    fn default() -> Sim {
        Sim::new()
    }
}

impl Sim {
    /// Seed 0, uniform random choice of the next thread.
    pub fn new() -> Sim {
        Sim {
            seed: 0,
            policy: Policy::Uniform,
            limits: Limits {
                steps: DEFAULT_MAX_STEPS,
                time: None,
            },
        }
    }

    /// The seed of [`Sim::run`], and the first seed of [`Sim::check`].
    pub fn seed(mut self, seed: u64) -> Sim {
        self.seed = seed;
        self
    }

    /// PCT scheduling: random priorities, with `depth - 1` priority
    /// changes at steps drawn from the first `expected_steps` scheduling
    /// decisions (see the ASPLOS 2010 paper by Burckhardt et al.). Finds a
    /// bug that needs `depth` ordering constraints with probability at
    /// least 1/(threads · steps^(depth-1)) per seed.
    ///
    /// # Panics
    ///
    /// If `depth` is 0.
    pub fn pct(mut self, depth: u32, expected_steps: u64) -> Sim {
        assert!(depth >= 1, "weft::sim: PCT depth must be at least 1");
        self.policy = Policy::Pct {
            depth,
            expected_steps,
        };
        self
    }

    /// Stops a run after `steps` scheduling decisions (default
    /// [`DEFAULT_MAX_STEPS`]): threads that yield to each other for ever
    /// (a livelock) end in [`Outcome::Limit`] instead of a hang.
    pub fn max_steps(mut self, steps: u64) -> Sim {
        self.limits.steps = steps;
        self
    }

    /// Stops a run whose virtual time would pass `time` (default: no
    /// limit), e.g. a heartbeat loop that never ends: [`Outcome::Limit`].
    pub fn max_time(mut self, time: Duration) -> Sim {
        self.limits.time = Some(time);
        self
    }

    /// Runs `f` and every thread it spawns in a simulation seeded with this
    /// seed, until every thread has finished.
    ///
    /// Returns what `f` returned, with the run's trace hash, steps and
    /// virtual time; or the failure: `f` panicked, or the threads
    /// deadlocked. A deadlocked run's threads are left parked (their
    /// memory is not reclaimed).
    pub fn run<F, T>(self, f: F) -> Result<Report<T>, Failure>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let sim = Arc::new(Simulation::new(self.seed, self.policy).with_limits(self.limits));
        let rt = RuntimeBuilder::default()
            .name("weft-sim")
            .simulation(sim.clone())
            .build()
            .map_err(|e| failure(&sim, Outcome::Setup(e.to_string())))?;
        let root = crate::builder::Builder::new().spawn_on(&rt, f);
        sim.start();
        // Parks a virtual thread of another runtime instead of holding its
        // carrier for the whole simulation.
        let end = crate::blocking::blocking(|| sim.wait_end());
        let root = match root {
            Ok(root) => root,
            Err(e) => return Err(failure(&sim, Outcome::Setup(e.to_string()))),
        };
        let left = match end {
            End::Finished => None,
            End::Deadlock { parked } => Some(Outcome::Deadlock {
                parked,
                threads: deadlocked_threads(&sim),
            }),
            End::Limit => Some(Outcome::Limit),
        };
        if let Some(outcome) = left {
            // Its threads are never resumed: stop the carrier (they stay
            // parked, their memory leaked). A root that panicked says more
            // than what it left behind: its panic comes first.
            rt.shutdown_now();
            let outcome = match root.is_finished().then(|| root.join()) {
                Some(Err(payload)) => Outcome::Panic(format!(
                    "{} (and then: {})",
                    panic_message(&*payload),
                    match &outcome {
                        Outcome::Deadlock { parked, .. } => format!("{parked} threads deadlocked"),
                        _ => "the step or time limit was reached".to_string(),
                    }
                )),
                _ => outcome,
            };
            return Err(failure(&sim, outcome));
        }
        match root.join() {
            Ok(value) => Ok(Report {
                value,
                seed: sim.seed(),
                trace: sim.trace(),
                steps: sim.steps(),
                elapsed: sim.elapsed(),
            }),
            Err(payload) => Err(failure(
                &sim,
                Outcome::Panic(panic_message(&*payload).to_string()),
            )),
        }
    }

    /// Runs `f` under `seeds` seeds from this one (`0..seeds` by default;
    /// when `WEFT_SIM_SEED` is set, under that seed alone), stopping at
    /// the first failure.
    ///
    /// # Panics
    ///
    /// On the first failing seed, with a message that names it and says
    /// how to replay it.
    pub fn check<F>(self, seeds: u64, f: F)
    where
        F: Fn() + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        let only = std::env::var(SEED_ENV).ok().map(|s| {
            s.trim()
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("weft::sim: {SEED_ENV}={s:?} is not a seed (a u64)"))
        });
        let range = match only {
            Some(s) => s..s.saturating_add(1),
            None => self.seed..self.seed.saturating_add(seeds),
        };
        let total = range.end - range.start;
        let mut shown = Instant::now();
        for (i, seed) in range.enumerate() {
            let f = f.clone();
            if let Err(e) = self.seed(seed).run(move || f()) {
                panic!("{e}");
            }
            if shown.elapsed() >= PROGRESS_EVERY {
                shown = Instant::now();
                eprintln!("weft::sim: {} of {total} seeds passed", i + 1);
            }
        }
    }
}

/// How often [`Sim::check`] reports progress on stderr (real time).
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// [`Sim::run`] with uniform scheduling under `seed`.
pub fn run<F, T>(seed: u64, f: F) -> Result<Report<T>, Failure>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Sim::new().seed(seed).run(f)
}

/// [`Sim::check`] with uniform scheduling: seeds `0..seeds`, or the one in
/// `WEFT_SIM_SEED`.
pub fn check<F>(seeds: u64, f: F)
where
    F: Fn() + Send + Sync + 'static,
{
    Sim::new().check(seeds, f)
}

/// A finished simulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report<T> {
    /// What the closure returned.
    pub value: T,
    /// The seed.
    pub seed: u64,
    /// The trace hash: every scheduling decision and every [`trace`]d value.
    pub trace: u64,
    /// Scheduling decisions made.
    pub steps: u64,
    /// Virtual time from start to end.
    pub elapsed: Duration,
}

/// A failed simulation: which seed, what went wrong, and how far it got.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The seed that failed.
    pub seed: u64,
    /// The trace hash at the failure.
    pub trace: u64,
    /// Scheduling decisions made.
    pub steps: u64,
    /// Virtual time at the failure.
    pub elapsed: Duration,
    /// What went wrong.
    pub outcome: Outcome,
}

/// What went wrong in a [`Failure`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Outcome {
    /// The closure panicked (a thread it joined may have panicked first).
    Panic(String),
    /// Threads were left, none runnable and no timer pending.
    Deadlock {
        /// How many.
        parked: usize,
        /// Their states and stacks, grouped (a thread dump).
        threads: String,
    },
    /// The run reached its step or virtual-time limit ([`Sim::max_steps`],
    /// [`Sim::max_time`]).
    Limit,
    /// The simulated runtime could not be started.
    Setup(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "weft::sim: seed {} failed after {} steps at virtual time {:?} (trace {:016x}): ",
            self.seed, self.steps, self.elapsed, self.trace
        )?;
        match &self.outcome {
            Outcome::Panic(msg) => write!(f, "panicked: {msg}")?,
            Outcome::Deadlock { parked, threads } => write!(
                f,
                "deadlock: {parked} threads wait, none can run and no timer is pending\n{threads}"
            )?,
            Outcome::Limit => write!(
                f,
                "stopped at its step or virtual-time limit (a livelock, or a loop that never ends?)"
            )?,
            Outcome::Setup(msg) => write!(f, "could not start: {msg}")?,
        }
        write!(f, "\nreplay with {SEED_ENV}={}", self.seed)
    }
}

impl std::error::Error for Failure {}

fn failure(sim: &Simulation, outcome: Outcome) -> Failure {
    Failure {
        seed: sim.seed(),
        trace: sim.trace(),
        steps: sim.steps(),
        elapsed: sim.elapsed(),
        outcome,
    }
}

/// A grouped dump of the simulation's threads (the ones it ran).
fn deadlocked_threads(sim: &Simulation) -> String {
    let ids = sim.thread_ids();
    // A dump borrows parked threads through the carrier, which serves them
    // (its simulation ended, it runs its main loop now).
    let dumped = catch_unwind(AssertUnwindSafe(crate::dump::dump));
    let Ok(mut d) = dumped else {
        return "(the thread dump failed)".to_string();
    };
    d.threads.retain(|t| ids.contains(&t.id.as_u64().get()));
    d.containers.clear();
    d.deadlocks.clear();
    let mut text = d.groups().to_string();
    text.push_str("\nthreads:");
    for t in &d.threads {
        text.push_str(&format!("\n  #{} ", t.id.as_u64()));
        if let Some(name) = &t.name {
            text.push_str(&format!("{name:?} "));
        }
        text.push_str(&format!("{:?}, {:?}", t.state, t.blocker));
    }
    text
}

/// Whether the calling thread runs in a simulation.
pub fn is_simulated() -> bool {
    crate::sched::simulation().is_some()
}

/// The seed of the simulation the calling thread runs in.
pub fn seed() -> Option<u64> {
    crate::sched::simulation().map(Simulation::seed)
}

/// Now: the simulation's virtual instant on its threads, `Instant::now()`
/// elsewhere. Deadlines for Weft's waits (`sleep_until`, …) inside a
/// simulation must come from here (or, under `transparent`, from
/// `Instant::now`, which then reads the same clock).
pub fn now() -> Instant {
    crate::clock::now()
}

/// Blocks until every other thread of the simulation is blocked — waiting
/// on a lock, channel, socket or timer, with nothing left to run — and
/// returns before virtual time moves on (Go's `synctest.Wait`). A test
/// uses it to observe the state its threads settle in. Several waiters
/// are woken one at a time, in the order they began to wait, so each sees
/// every other thread blocked. Not interruptible (an interrupt is kept for
/// the thread's next wait). Outside a simulation it returns at once.
pub fn wait_idle() {
    if let Some(s) = crate::sched::simulation() {
        s.wait_idle();
    }
}

/// Virtual time since the simulation the calling thread runs in began.
pub fn elapsed() -> Option<Duration> {
    crate::sched::simulation().map(Simulation::elapsed)
}

/// A random number: drawn from the simulation's seed on its threads, from
/// a generator seeded with real entropy elsewhere.
pub fn random() -> u64 {
    match crate::sched::simulation() {
        Some(s) => s.random(Stream::Program),
        None => fastrand::u64(..),
    }
}

/// Mixes `value` into the simulation's trace hash (nothing outside a
/// simulation): two runs of one seed that record different values have
/// different hashes, so a program's own observations prove a replay.
pub fn trace(value: u64) {
    if let Some(s) = crate::sched::simulation() {
        s.record(value);
    }
}
