//! Resting carriers: how many core carriers serve while the cores are
//! shared (ARCHITECTURE.md, "Sharing the cores").
//!
//! # Why
//!
//! A carrier is worth its OS thread while it gets CPU time the others
//! would not. When the carriers only take turns with each other on the
//! CPUs the runtime gets — a load generator on the same two cores, more
//! carriers than CPUs — every wake-up that crosses carriers waits for
//! the woken one to be scheduled. Measured on 2 cores under
//! `wrk -t1 -c100` on the same machine (docs/bench.md, "Resting
//! carriers"), weft-http on two carriers: each on a CPU half the time and
//! runnable but waiting a third of it, p99 3.6–4.3 ms; on one carrier:
//! on a CPU 95 % of the time, waiting 1 %, as many requests a second or
//! more, p99 0.64–0.69 ms.
//!
//! # The rule
//!
//! The monitor looks at the core carriers on duty once a [`WINDOW`]: how
//! much CPU their OS threads got (`run`), how long they were runnable
//! and waited for one (`wait`) and, the rest of the window, how long they
//! slept (`sleep`, nothing to do), all in CPUs (`sched/schedstat.rs`).
//!
//! 1. *Rest one* when the `n` on duty contend for the CPUs (`wait` at
//!    least a quarter of `run`), they sleep too (`sleep` at least a tenth
//!    of a CPU each: work that fits on fewer carriers, not a computation
//!    that wants them all), and they got about what `n - 1` carriers can
//!    get — `n - 1` CPUs, or every CPU the runtime may use if fewer, give
//!    or take a quarter: the last carrier only takes turns with the
//!    others. The highest-numbered carrier on duty rests.
//!
//!    Beside CPU-bound processes the carriers get well under that, and
//!    they keep their number: the kernel shares a CPU per runnable
//!    thread, so each carrier is a claim on CPU time, and with one the
//!    process runs only while that one thread is scheduled. Resting
//!    there cost the suite's HTTP row beside two `yes` 30 % of its
//!    requests (each side's carriers got 0.83 CPU instead of 0.95).
//! 2. *Bring one back* when those on duty never sleep (less than
//!    [`SATURATED`] of a CPU each), no sooner than the back-off after the
//!    last rest. Then *probe*: the next window must show the carriers got
//!    [`GAIN`] more CPU than before, or the contention is gone; if not,
//!    the carrier rests again and the back-off doubles (from
//!    [`BACKOFF_MIN`] to [`BACKOFF_MAX`]); if so, it stays and the
//!    back-off starts over. A load generator beside the server on two
//!    cores keeps one carrier and probes for a window every 8 s.
//! 3. *Bring every one back* the moment a carrier is held, blocked,
//!    pinned or lowered, or a spare is on duty: the handoff machinery owns
//!    the carriers then (`Watcher::rest_carriers` in `monitor.rs`).
//!
//! 4. *Cover* while the carriers on duty wait for a CPU at least as long
//!    as they run ([`cover`]; until the wait falls under half the run,
//!    and never while rule 3 holds):
//!    a carrier with nothing to do takes half of the inbox of another
//!    that waits, rebinding the threads to itself
//!    (`carrier/steal.rs`), and hands its woken threads back until their
//!    populations are level. Beside a CPU-bound process per core each
//!    carrier is off a CPU about half the time, and the threads bound to
//!    it would wait with it; the one on a CPU runs them instead, as a
//!    work-stealing scheduler's workers do for each other. Handing back
//!    keeps both carriers populated, so both stay claims on CPU time
//!    (taking without it let every thread gather on one carrier: the
//!    suite's HTTP row beside two `yes` lost a fifth of its requests).
//!
//! A computation on every carrier never rests (it never sleeps); a quiet
//! machine never rests (nothing waits); nor do carriers beside CPU-bound
//! processes (rule 1's lower bound); a rested runtime that becomes
//! saturated gets a carrier back within a window of the back-off.
//!
//! This file is the rule only, a pure function of the windows it is
//! given (unit-tested below); `monitor.rs` measures and acts,
//! `carrier/retire.rs` is what a resting carrier does, and
//! `carrier/steal.rs` what a covering one does.

use std::time::{Duration, Instant};

/// How long the monitor measures before it decides.
pub(super) const WINDOW: Duration = Duration::from_millis(200);
/// Contention: `wait` at least this share of `run`.
const CONTENTION: f64 = 0.25;
/// Sleep each carrier must show for one to rest (CPUs).
const SLEEPS: f64 = 0.10;
/// What one more carrier must bring to be kept (CPUs); also the slack of
/// rule 1's `n - 1`.
const GAIN: f64 = 0.25;
/// Sleep per carrier below which those on duty are saturated (CPUs).
const SATURATED: f64 = 0.05;
/// The back-off after a rest, at first.
const BACKOFF_MIN: Duration = Duration::from_secs(2);
/// The longest back-off.
const BACKOFF_MAX: Duration = Duration::from_secs(8);

/// What the core carriers on duty did in one window, in CPUs (seconds of
/// each per second of the window), summed over them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Window {
    /// Carriers on duty.
    pub(super) on_duty: usize,
    /// The CPUs the runtime may use (its affinity mask and CPU quota, as
    /// the default parallelism counts them).
    pub(super) cpus: usize,
    /// On a CPU.
    pub(super) run: f64,
    /// Runnable, waiting for a CPU.
    pub(super) wait: f64,
}

impl Window {
    /// Time asleep (nothing to do), per carrier.
    fn sleep_each(&self) -> f64 {
        ((self.on_duty as f64 - self.run - self.wait) / self.on_duty as f64).max(0.0)
    }

    fn contended(&self) -> bool {
        self.wait >= CONTENTION * self.run && self.wait > 0.0
    }
}

/// Rule 4: whether carriers cover for each other after window `w`, given
/// whether they did (`covering`). On when they waited for a CPU at least
/// as long as they ran; off again once the wait is under half the run.
pub(super) fn cover(w: &Window, covering: bool) -> bool {
    let wait = if covering { COVER_UNTIL } else { COVER_FROM };
    w.on_duty >= 2 && w.run > 0.0 && w.wait >= wait * w.run
}

/// Rule 4 turns on at `wait` of at least this share of `run`...
const COVER_FROM: f64 = 1.0;
/// ...and off under this one.
const COVER_UNTIL: f64 = 0.5;

/// The decision for one window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Keep the carriers as they are.
    Keep,
    /// Rest the highest-numbered carrier on duty.
    Rest,
    /// Bring the lowest-numbered resting carrier back.
    Return,
}

/// The rule's memory across windows (the monitor's).
#[derive(Debug)]
pub(super) struct Rest {
    /// The CPU the carriers got in the window before the last return,
    /// while that return is being judged (rule 2's probe).
    probe: Option<f64>,
    /// How long a rest lasts at least before a return is tried.
    backoff: Duration,
    /// When the last rest began.
    rested_at: Option<Instant>,
}

impl Default for Rest {
    fn default() -> Self {
        Rest {
            probe: None,
            backoff: BACKOFF_MIN,
            rested_at: None,
        }
    }
}

impl Rest {
    /// The decision for window `w`, ended at `now`, with `resting` core
    /// carriers resting.
    pub(super) fn step(&mut self, w: Window, resting: usize, now: Instant) -> Step {
        if let Some(before) = self.probe.take() {
            if w.run < before + GAIN && w.contended() {
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                self.rested_at = Some(now);
                return Step::Rest;
            }
            self.backoff = BACKOFF_MIN;
        }
        let n = w.on_duty;
        // What `n - 1` carriers can get: that many CPUs, or all there are.
        let fewer = n.saturating_sub(1).min(w.cpus) as f64;
        if n >= 2
            && w.contended()
            && w.sleep_each() >= SLEEPS
            && w.run >= fewer - GAIN
            && w.run <= (n - 1) as f64 + GAIN
        {
            if self
                .rested_at
                .is_none_or(|t| now.duration_since(t) > BACKOFF_MAX)
            {
                // A rest long after the last: a new situation.
                self.backoff = BACKOFF_MIN;
            }
            self.rested_at = Some(now);
            return Step::Rest;
        }
        if resting > 0
            && w.sleep_each() < SATURATED
            && self
                .rested_at
                .is_none_or(|t| now.duration_since(t) >= self.backoff)
        {
            self.probe = Some(w.run);
            return Step::Return;
        }
        Step::Keep
    }

    /// Every carrier was brought back (rule 3): no probe is pending, and
    /// the next rest starts a fresh back-off.
    pub(super) fn reset(&mut self) {
        *self = Rest::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window on a machine of two CPUs.
    fn w(on_duty: usize, run: f64, wait: f64) -> Window {
        Window {
            on_duty,
            cpus: 2,
            run,
            wait,
        }
    }

    /// Figures measured with `/proc/<pid>/task/<tid>/schedstat` around
    /// weft-http under `wrk -t1 -c100` on 2 cores.
    #[test]
    fn a_server_beside_its_load_generator_rests_one_carrier_and_keeps_it() {
        let mut r = Rest::default();
        let t0 = Instant::now();
        // Two carriers: 0.49 CPU each, waiting 0.35 each.
        assert_eq!(r.step(w(2, 0.98, 0.70), 0, t0), Step::Rest);
        // One: on a CPU 95 %, never asleep; the back-off holds it.
        let t1 = t0 + Duration::from_millis(200);
        assert_eq!(r.step(w(1, 0.95, 0.01), 1, t1), Step::Keep);
        // After it, a probe; the second carrier brings nothing: rest again,
        // and wait twice as long for the next probe.
        let t2 = t0 + BACKOFF_MIN;
        assert_eq!(r.step(w(1, 0.95, 0.01), 1, t2), Step::Return);
        let t3 = t2 + WINDOW;
        assert_eq!(r.step(w(2, 0.98, 0.70), 0, t3), Step::Rest);
        assert_eq!(r.step(w(1, 0.95, 0.01), 1, t3 + BACKOFF_MIN), Step::Keep);
        assert_eq!(
            r.step(w(1, 0.95, 0.01), 1, t3 + 2 * BACKOFF_MIN),
            Step::Return
        );
    }

    /// Beside a CPU-bound neighbour per core each carrier is a claim on
    /// CPU time: the kernel shares a CPU per runnable thread, so one
    /// carrier would get less, and the process runs only when that one
    /// thread is scheduled (measured: the suite's HTTP row served 30 %
    /// less with a carrier rested on each side).
    #[test]
    fn a_server_beside_cpu_bound_neighbours_keeps_its_carriers() {
        let mut r = Rest::default();
        let t0 = Instant::now();
        assert_eq!(r.step(w(2, 0.48, 0.82), 0, t0), Step::Keep);
        assert_eq!(r.step(w(2, 0.44, 0.67), 0, t0 + WINDOW), Step::Keep);
    }

    /// Four carriers bound to one CPU take turns on it.
    #[test]
    fn more_carriers_than_cpus_rest_down_to_the_cpus() {
        let mut r = Rest::default();
        let t0 = Instant::now();
        let one = |n, run, wait| Window {
            on_duty: n,
            cpus: 1,
            run,
            wait,
        };
        assert_eq!(r.step(one(4, 1.0, 0.72), 0, t0), Step::Rest);
        assert_eq!(r.step(one(3, 1.0, 0.60), 1, t0 + WINDOW), Step::Rest);
        assert_eq!(r.step(one(2, 1.0, 0.53), 2, t0 + WINDOW * 2), Step::Rest);
    }

    #[test]
    fn a_quiet_machine_never_rests() {
        let mut r = Rest::default();
        let t0 = Instant::now();
        // A light load and a full one, both without waiting.
        assert_eq!(r.step(w(2, 0.30, 0.01), 0, t0), Step::Keep);
        assert_eq!(r.step(w(2, 1.95, 0.02), 0, t0), Step::Keep);
        assert_eq!(r.step(w(4, 0.50, 0.0), 0, t0), Step::Keep);
    }

    #[test]
    fn a_computation_on_every_carrier_never_rests() {
        let mut r = Rest::default();
        let t0 = Instant::now();
        // Beside a CPU-bound neighbour per core: half a CPU each, waiting
        // the other half, never asleep.
        assert_eq!(r.step(w(2, 1.0, 1.0), 0, t0), Step::Keep);
    }

    #[test]
    fn a_rested_runtime_that_gets_more_cpu_keeps_its_carrier_back() {
        let mut r = Rest::default();
        let t0 = Instant::now();
        assert_eq!(r.step(w(2, 0.98, 0.70), 0, t0), Step::Rest);
        // The load generator left and a computation came: saturated.
        let t1 = t0 + BACKOFF_MIN;
        assert_eq!(r.step(w(1, 0.99, 0.0), 1, t1), Step::Return);
        // Two carriers get two CPUs: kept, back-off reset.
        assert_eq!(r.step(w(2, 1.98, 0.01), 0, t1 + WINDOW), Step::Keep);
        assert_eq!(r.backoff, BACKOFF_MIN);
    }

    #[test]
    fn a_probe_that_finds_the_contention_gone_keeps_the_carrier() {
        let mut r = Rest::default();
        let t0 = Instant::now();
        assert_eq!(r.step(w(2, 0.98, 0.70), 0, t0), Step::Rest);
        assert_eq!(r.step(w(1, 0.97, 0.0), 1, t0 + BACKOFF_MIN), Step::Return);
        // No more CPU (the load did not grow), but nothing waits either.
        assert_eq!(
            r.step(w(2, 0.99, 0.05), 0, t0 + BACKOFF_MIN + WINDOW),
            Step::Keep
        );
    }

    /// Rule 4, with figures measured around weft-http and the suite's
    /// load generator (docs/bench.md, "Carriers that cover for each
    /// other").
    #[test]
    fn carriers_cover_for_each_other_only_beside_busy_processes() {
        // weft-http under `wrk` beside a `yes` per core: 0.47 CPU, waiting
        // 0.73; the suite's server and load generator there: 0.57, 1.02.
        assert!(cover(&w(2, 0.47, 0.73), false));
        assert!(cover(&w(2, 0.57, 1.02), false));
        // Under `wrk` alone (taking turns with it): no.
        assert!(!cover(&w(2, 0.98, 0.70), false));
        assert!(!cover(&w(2, 1.95, 0.02), false));
        // Nor with one carrier on duty, or nothing run.
        assert!(!cover(&w(1, 0.40, 0.45), false));
        assert!(!cover(&w(2, 0.0, 0.0), false));
        // Once on, it stays on down to a wait of half the run.
        assert!(cover(&w(2, 0.90, 0.50), true));
        assert!(!cover(&w(2, 0.90, 0.50), false));
        assert!(!cover(&w(2, 0.90, 0.40), true));
    }

    #[test]
    fn the_back_off_is_bounded() {
        let mut r = Rest::default();
        let mut t = Instant::now();
        assert_eq!(r.step(w(2, 0.98, 0.70), 0, t), Step::Rest);
        for _ in 0..10 {
            t += r.backoff;
            assert_eq!(r.step(w(1, 0.95, 0.01), 1, t), Step::Return);
            t += WINDOW;
            assert_eq!(r.step(w(2, 0.98, 0.70), 0, t), Step::Rest);
        }
        assert_eq!(r.backoff, BACKOFF_MAX);
        r.reset();
        assert_eq!(r.backoff, BACKOFF_MIN);
    }
}
