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
//! [`check`] runs many seeds and stops at the first failure ([`Outcome`]):
//! a panic of the closure or of a thread nobody joined, a deadlock
//! (threads left, none runnable, no timer), a limit ([`Sim::max_steps`],
//! [`Sim::max_time`]), or a step that never ends ([`Sim::watchdog`]).
//! The message ends with the settings that replay the run
//! (`replay: Sim::new().seed(3).pct(3, 20).run(…)`, also
//! [`Failure::replay`]); `WEFT_SIM_SEED=<seed>` makes [`check`] run that
//! seed alone, with its own settings.
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
//! deadlocked. Without the `transparent` feature, `std::net` is a plain
//! system call Weft cannot see: it reaches the real network, and a call
//! that blocks holds the carrier until the watchdog reports the run
//! [`Outcome::Stuck`]; under `transparent`, an Internet socket made on a
//! simulation's thread is refused (`PermissionDenied`). Use `weft::net`.
//! Code that spins on the clock never sees it move (time moves only when
//! every thread waits).

pub mod net;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::runtime::RuntimeBuilder;
use crate::sched::{End, Limits, Panicked, Policy, Simulation, Stream};
use crate::thread::panic_message;

/// Environment variable naming one seed for [`check`] to run alone.
pub const SEED_ENV: &str = "WEFT_SIM_SEED";

/// Settings of a simulation: the seed, the scheduling policy and the
/// limits.
///
/// `Display` writes the builder expression that makes these settings
/// (`Sim::new().seed(1).pct(3, 20)`), which a [`Failure`] prints to replay
/// a run.
#[derive(Clone, Copy, Debug)]
#[must_use = "a Sim does nothing until `run` or `check` is called"]
pub struct Sim {
    seed: u64,
    policy: Policy,
    limits: Limits,
    watchdog: Duration,
}

/// Scheduling decisions a run may take by default before it is stopped
/// ([`Sim::max_steps`]).
pub const DEFAULT_MAX_STEPS: u64 = 10_000_000;

/// Real time one scheduling step may take by default before the run is
/// given up as stuck ([`Sim::watchdog`]).
pub const DEFAULT_WATCHDOG: Duration = Duration::from_secs(10);

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
            watchdog: DEFAULT_WATCHDOG,
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

    /// Gives a run up as [`Outcome::Stuck`] when one scheduling step lasts
    /// `real_time` (default [`DEFAULT_WATCHDOG`]): a thread that neither
    /// finishes nor suspends holds the one carrier, and the step and time
    /// limits, checked between steps, never come.
    ///
    /// Slow is told from stuck by progress: a run that keeps taking steps
    /// is never stopped, however long it takes; only one step without an
    /// end is. The stuck thread cannot be preempted or unwound from
    /// outside: it keeps its carrier, which is lowered to `SCHED_IDLE`
    /// priority (it gets only CPU time nothing else wants) and leaves the
    /// run if the thread ever suspends. The setting does not change what a
    /// seed does, so a replay needs it only to be stopped the same way.
    pub fn watchdog(mut self, real_time: Duration) -> Sim {
        self.watchdog = real_time;
        self
    }

    /// Runs `f` and every thread it spawns in a simulation seeded with this
    /// seed, until every thread has finished.
    ///
    /// Returns what `f` returned, with the run's trace hash, steps and
    /// virtual time; or the failure ([`Outcome`]): `f` panicked, or a
    /// thread whose panic nobody joined, the threads deadlocked, a limit
    /// was reached or a step never ended. A run that did not finish
    /// leaves its threads as they are (their memory is not reclaimed).
    #[expect(
        clippy::result_large_err,
        reason = "a failure ends a run, made once and moved once; no hot path carries it"
    )]
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
            .map_err(|e| self.failure(&sim, Outcome::Setup(e.to_string())))?;
        let root = crate::builder::Builder::new().spawn_on(&rt, f);
        sim.start();
        // Parks a virtual thread of another runtime instead of holding its
        // carrier for the whole simulation.
        let end = crate::blocking::blocking(|| sim.wait_end(self.watchdog));
        let root = match root {
            Ok(root) => root,
            Err(e) => return Err(self.failure(&sim, Outcome::Setup(e.to_string()))),
        };
        let root_id = root.thread().id().as_u64().get();
        let left = match end {
            End::Finished => None,
            End::Deadlock { parked } => Some(Outcome::Deadlock {
                parked,
                threads: threads_left(&sim).1,
            }),
            End::StepLimit => Some(Outcome::Limit(Limit::Steps(self.limits.steps))),
            End::TimeLimit => Some(Outcome::Limit(Limit::Time(
                self.limits.time.unwrap_or(Duration::MAX),
            ))),
            End::Stuck {
                ran,
                cpu,
                in_system_call,
            } => {
                let (thread, threads) = threads_left(&sim);
                // Sampled: the carrier may now give way to everything else.
                sim.demote_carrier();
                Some(Outcome::Stuck {
                    ran,
                    cpu,
                    in_system_call,
                    thread: thread.unwrap_or_else(|| "(not seen running)".to_string()),
                    threads,
                })
            }
        };
        let root_panic = match &left {
            // Its threads are never resumed: stop the carrier (they stay
            // parked, their memory leaked).
            Some(_) => {
                rt.shutdown_now();
                match root.is_finished().then(|| root.join()) {
                    Some(Err(payload)) => Some(payload),
                    _ => None,
                }
            }
            None => match root.join() {
                Ok(value) => {
                    return match panicked(&sim, root_id, None, None) {
                        Some(lost) => Err(self.failure(&sim, lost)),
                        None => Ok(Report {
                            value,
                            seed: sim.seed(),
                            trace: sim.trace(),
                            steps: sim.steps(),
                            elapsed: sim.elapsed(),
                        }),
                    };
                }
                Err(payload) => Some(payload),
            },
        };
        // A panic says more than what it left behind: it comes first.
        let root_panic = root_panic.as_deref().map(panic_message);
        let outcome = panicked(&sim, root_id, root_panic, left.as_ref())
            .or(left)
            .expect("a run that did not finish has an outcome");
        Err(self.failure(&sim, outcome))
    }

    /// The failure of a run of these settings.
    fn failure(&self, sim: &Simulation, outcome: Outcome) -> Failure {
        Failure {
            seed: sim.seed(),
            trace: sim.trace(),
            steps: sim.steps(),
            elapsed: sim.elapsed(),
            outcome,
            settings: *self,
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
                panic!(
                    "{e}\nor run this check again with {SEED_ENV}={seed} \
                     (it then runs seed {seed} alone, with its own settings)"
                );
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
#[expect(
    clippy::result_large_err,
    reason = "a failure ends a run, made once and moved once; no hot path carries it"
)]
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
///
/// `Display` ends with the line that replays it: the [`Sim`] settings
/// that ran (also [`Failure::replay`]).
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
    /// The settings that ran.
    settings: Sim,
}

impl Failure {
    /// The settings that ran — seed, policy, limits, watchdog — to replay
    /// the run: `failure.replay().run(f)` takes the same steps with the
    /// same trace hash.
    pub fn replay(&self) -> Sim {
        self.settings
    }
}

/// What went wrong in a [`Failure`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Outcome {
    /// A thread panicked and the run failed for it: the closure (its
    /// message is followed by the first panic of another thread before
    /// it, often the cause — a join's `unwrap` says only `Any { .. }`),
    /// or a thread whose panic nobody joined (detached, or its handle
    /// dropped without a join). What the run did after it follows.
    Panic(String),
    /// Threads were left, none runnable and no timer pending.
    Deadlock {
        /// How many.
        parked: usize,
        /// Their states and stacks, grouped (a thread dump).
        threads: String,
    },
    /// The run reached a limit ([`Sim::max_steps`], [`Sim::max_time`]).
    Limit(Limit),
    /// One step lasted the watchdog's real time ([`Sim::watchdog`]): a
    /// thread neither finished nor suspended — a loop that never waits,
    /// or a system call that blocks its carrier (real `std::net`,
    /// `std::thread::sleep` or a `std` lock without the `transparent`
    /// feature). It keeps its carrier (see [`Sim::watchdog`]).
    Stuck {
        /// Real time the step had lasted when the watchdog gave up.
        ran: Duration,
        /// CPU time the carrier used meanwhile, if it could be read (about
        /// zero for a blocking system call; for a loop, as much as the
        /// machine gave it).
        cpu: Option<Duration>,
        /// Whether the carrier was asleep in the kernel — a blocking system
        /// call — rather than running (a loop), if that could be read.
        in_system_call: Option<bool>,
        /// The thread, and its stack as sampled on its carrier.
        thread: String,
        /// The simulation's other threads: states and stacks, grouped.
        threads: String,
    },
    /// The simulated runtime could not be started.
    Setup(String),
}

/// Which limit stopped a run ([`Outcome::Limit`]), and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// [`Sim::max_steps`]: scheduling decisions.
    Steps(u64),
    /// [`Sim::max_time`]: virtual time.
    Time(Duration),
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Steps(n) => write!(f, "its step limit, max_steps({n}) (a livelock?)"),
            Limit::Time(t) => write!(
                f,
                "its virtual-time limit, max_time({}) (a loop that never ends?)",
                duration_expr(*t)
            ),
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Panic(msg) => write!(f, "panicked: {msg}"),
            Outcome::Deadlock { parked, threads } => write!(
                f,
                "deadlock: {parked} threads wait, none can run and no timer is pending\n{threads}"
            ),
            Outcome::Limit(limit) => write!(f, "stopped at {limit}"),
            Outcome::Stuck {
                ran,
                cpu,
                in_system_call,
                thread,
                threads,
            } => {
                write!(f, "stuck: one step ran {ran:.1?} of real time")?;
                if let Some(cpu) = cpu {
                    write!(f, " ({cpu:.1?} of it on a CPU)")?;
                }
                match in_system_call {
                    Some(true) => write!(
                        f,
                        ", blocked in a system call (real std::net, std::thread::sleep \
                         or a std lock without `transparent`?)"
                    )?,
                    Some(false) => write!(f, ", running (a loop that never waits?)")?,
                    None => {}
                }
                write!(
                    f,
                    "; it keeps its carrier (nothing can preempt it), which now runs at \
                     idle priority\nrunning: {thread}\n{threads}"
                )
            }
            Outcome::Setup(msg) => write!(f, "could not start: {msg}"),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "weft::sim: seed {} failed after {} steps at virtual time {:?} (trace {:016x}): {}",
            self.seed, self.steps, self.elapsed, self.trace, self.outcome
        )?;
        write!(f, "\nreplay: {}.run(…)", self.settings)
    }
}

impl std::error::Error for Failure {}

impl std::fmt::Display for Sim {
    /// The builder expression for these settings, defaults left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sim::new().seed({})", self.seed)?;
        if let Policy::Pct {
            depth,
            expected_steps,
        } = self.policy
        {
            write!(f, ".pct({depth}, {expected_steps})")?;
        }
        if self.limits.steps != DEFAULT_MAX_STEPS {
            write!(f, ".max_steps({})", self.limits.steps)?;
        }
        if let Some(t) = self.limits.time {
            write!(f, ".max_time({})", duration_expr(t))?;
        }
        if self.watchdog != DEFAULT_WATCHDOG {
            write!(f, ".watchdog({})", duration_expr(self.watchdog))?;
        }
        Ok(())
    }
}

/// `Duration::from_secs(3)`, `Duration::from_millis(1500)`, …: the
/// coarsest exact constructor.
fn duration_expr(d: Duration) -> String {
    let ns = d.as_nanos();
    let (unit, n) = [
        ("secs", 1_000_000_000),
        ("millis", 1_000_000),
        ("micros", 1_000),
    ]
    .into_iter()
    .find(|&(_, k)| ns.is_multiple_of(k))
    .map_or(("nanos", ns), |(unit, k)| (unit, ns / k));
    format!("Duration::from_{unit}({n})")
}

/// The failure a run's panics make, if any: the root's panic (`root`),
/// after the first panic of another thread before it; else the first
/// panic nobody joined. `then` is how the run ended beside it (said
/// after it: threads a panic left waiting are not a deadlock).
fn panicked(
    sim: &Simulation,
    root_id: u64,
    root: Option<&str>,
    then: Option<&Outcome>,
) -> Option<Outcome> {
    let panics = sim.panics();
    let mut text = match root {
        Some(msg) => {
            let mut text = msg.to_string();
            let before = panics.iter().take_while(|p| p.id != root_id).next();
            if let Some(Panicked { label, message, .. }) = before {
                text.push_str(&format!("\n  after {label} panicked: {message}"));
            }
            text
        }
        None => {
            let lost = panics.iter().find(|p| p.lost)?;
            format!(
                "{} panicked: {} (nobody joined it)",
                lost.label, lost.message
            )
        }
    };
    match then {
        Some(Outcome::Deadlock { parked, threads }) => text.push_str(&format!(
            "\n  then the run stopped with {parked} threads waiting\n{threads}"
        )),
        Some(other) => text.push_str(&format!("\n  then: {other}")),
        None => {}
    }
    Some(Outcome::Panic(text))
}

/// The simulation's threads (the ones it ran), from a thread dump: the one
/// running with its stack, if any, and the others' states and stacks,
/// grouped.
fn threads_left(sim: &Simulation) -> (Option<String>, String) {
    let ids = sim.thread_ids();
    // A dump borrows parked threads through the carrier, which serves them
    // once its simulation ended (it runs its main loop then); a stuck
    // run's are listed without that, and its running thread is sampled.
    let dumped = catch_unwind(AssertUnwindSafe(crate::dump::dump));
    let Ok(mut d) = dumped else {
        return (None, "(the thread dump failed)".to_string());
    };
    d.threads.retain(|t| ids.contains(&t.id.as_u64().get()));
    d.containers.clear();
    d.deadlocks.clear();
    let label = |t: &crate::dump::ThreadInfo| match &t.name {
        Some(name) => format!("thread {name:?} (#{})", t.id.as_u64()),
        None => format!("thread #{}", t.id.as_u64()),
    };
    let running = d
        .threads
        .iter()
        .position(|t| t.state == crate::thread::State::Running)
        .map(|i| d.threads.remove(i))
        .map(|t| format!("{}\n{}", label(&t), crate::symbols::format_stack(&t.stack)));
    if d.threads.is_empty() {
        return (running, "(no other threads)".to_string());
    }
    let mut text = d.groups().to_string();
    text.push_str("\nthreads:");
    for t in &d.threads {
        text.push_str(&format!("\n  {} {:?}, {:?}", label(t), t.state, t.blocker));
    }
    (running, text)
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
