//! Runtime metrics: a snapshot struct and a Prometheus text exposition.
//!
//! ```
//! weft::spawn(|| ()).join().unwrap();
//! let m = weft::metrics::snapshot();
//! assert!(m.threads_started >= 1);
//! let text = weft::metrics::prometheus();
//! assert!(text.contains("weft_virtual_threads_started_total"));
//! ```
//!
//! Other crates add their own series with [`register_source`] (weft-pg
//! publishes its pool under HikariCP's names there).

use crate::unpoison::Unpoison;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use crate::events;
use crate::thread::{Blocker, State};

/// A point-in-time view of every runtime in the process (summed).
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    /// Carriers on duty (core + spares).
    pub carriers_total: usize,
    /// Carriers running a virtual thread right now.
    pub carriers_busy: usize,
    /// Carriers on duty and not running a thread.
    pub carriers_idle: usize,
    /// Spare carriers on duty (compensating for blocked ones).
    pub carriers_spare: usize,
    /// Carriers blocked in `weft::blocking`, pinned, or stalled.
    pub carriers_blocked: usize,
    /// Carriers looking for work (spinning) right now.
    pub carriers_searching: usize,
    /// Carriers asleep waiting for work.
    pub carriers_sleeping: usize,
    /// Spare carrier threads ever started.
    pub spares_started: usize,
    /// Tasks in the global (injector) queues.
    pub run_queue_global: usize,
    /// Tasks in each carrier's local queue (all runtimes, in order).
    pub run_queue_local: Vec<usize>,
    /// Virtual threads alive.
    pub threads_live: usize,
    /// Virtual threads ever started.
    pub threads_started: usize,
    /// Virtual threads finished.
    pub threads_finished: usize,
    /// Parked virtual threads by what they wait on.
    pub parked_by_reason: Vec<(&'static str, usize)>,
    /// Successful steals (batches).
    pub steals: usize,
    /// New virtual threads started on another, less loaded carrier than
    /// the one that took them from a run queue (a started thread stays on
    /// its carrier, so placement at the first run is where populations are
    /// balanced).
    pub placed: usize,
    /// Pending timer entries.
    pub timers_pending: usize,
    /// Sockets registered with the poller.
    pub sockets_registered: usize,
    /// Virtual-thread stacks in use (all pools).
    pub stacks_live: usize,
    /// OS threads of the offload pool (`weft::blocking`) alive.
    pub blocking_threads: usize,
    /// Offloaded closures waiting for an offload thread.
    pub blocking_queued: usize,
    /// Pinned/stall/spawn-failure totals.
    pub events: events::Counters,
    /// Pinned+stall durations by bucket of [`events::HISTOGRAM_BOUNDS_MS`].
    pub event_histogram: [u64; 8],
}

/// Takes a snapshot. Counting parked threads by reason visits every
/// thread (a lock per registry shard); everything else is a few atomics.
pub fn snapshot() -> Metrics {
    let mut m = Metrics::default();
    for rt in crate::sched::runtimes() {
        let s = rt.stats();
        m.carriers_total += s.carriers_active;
        m.carriers_busy += s.carriers_busy;
        m.carriers_idle += s.carriers_active.saturating_sub(s.carriers_busy);
        m.carriers_spare += s.carriers_spare;
        m.carriers_blocked += s.carriers_blocked;
        m.carriers_searching += s.carriers_searching;
        m.carriers_sleeping += s.carriers_sleeping;
        m.spares_started += s.spares_started;
        m.run_queue_global += s.run_queue_global;
        m.run_queue_local.extend(s.run_queue_local);
        m.threads_live += s.threads_live;
        m.threads_started += s.threads_started;
        m.steals += s.steals;
        m.placed += s.placed;
        m.timers_pending += s.timers_pending;
    }
    m.threads_finished = m.threads_started.saturating_sub(m.threads_live);
    let mut reasons: [(&'static str, usize); 8] = [
        ("sleep", 0),
        ("park", 0),
        ("io", 0),
        ("lock", 0),
        ("channel", 0),
        ("join", 0),
        ("other", 0),
        ("unrecorded", 0),
    ];
    crate::thread::registry::for_each_thread(|t| {
        if crate::thread::inner_state(t) != State::Parked {
            return;
        }
        let i = match crate::thread::inner_blocker(t) {
            Blocker::Sleep(_) => 0,
            Blocker::Park => 1,
            Blocker::Io { .. } | Blocker::Call { .. } => 2,
            Blocker::Lock { .. } => 3,
            Blocker::Channel { .. } => 4,
            Blocker::Join(_) => 5,
            Blocker::Other(_) => 6,
            Blocker::None => 7,
        };
        reasons[i].1 += 1;
    });
    m.parked_by_reason = reasons.to_vec();
    m.sockets_registered =
        crate::netpoll::get().map_or(0, |s| s.registered.load(Ordering::Relaxed));
    m.stacks_live = crate::runtime::live_stacks();
    (m.blocking_threads, m.blocking_queued) = crate::offload::stats();
    m.events = events::counters();
    m.event_histogram = events::duration_histogram();
    m
}

type Source = Box<dyn Fn(&mut String) + Send + Sync>;
static SOURCES: Mutex<Vec<Source>> = Mutex::new(Vec::new());

/// Adds a source of extra Prometheus series, called on every
/// [`prometheus`] exposition; it appends complete lines (with `# HELP` and
/// `# TYPE`) to the buffer.
pub fn register_source(f: impl Fn(&mut String) + Send + Sync + 'static) {
    SOURCES.lock().unpoison().push(Box::new(f));
}

fn series(o: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    let _ = writeln!(
        o,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
    );
}

/// The Prometheus text exposition (format 0.0.4) of [`snapshot`] plus
/// every registered source.
pub fn prometheus() -> String {
    let m = snapshot();
    let mut o = String::with_capacity(4096);
    series(
        &mut o,
        "weft_carriers",
        "gauge",
        "Carriers on duty (core + spares).",
        m.carriers_total,
    );
    series(
        &mut o,
        "weft_carriers_busy",
        "gauge",
        "Carriers running a virtual thread.",
        m.carriers_busy,
    );
    series(
        &mut o,
        "weft_carriers_idle",
        "gauge",
        "Carriers on duty with nothing to run.",
        m.carriers_idle,
    );
    series(
        &mut o,
        "weft_carriers_spare",
        "gauge",
        "Spare carriers compensating for blocked ones.",
        m.carriers_spare,
    );
    series(
        &mut o,
        "weft_carriers_blocked",
        "gauge",
        "Carriers blocked, pinned or stalled.",
        m.carriers_blocked,
    );
    series(
        &mut o,
        "weft_spare_carriers_started_total",
        "counter",
        "Spare carrier threads started.",
        m.spares_started,
    );
    series(
        &mut o,
        "weft_run_queue_global",
        "gauge",
        "Tasks in the global queues.",
        m.run_queue_global,
    );
    let _ = writeln!(
        o,
        "# HELP weft_run_queue_local Tasks in a carrier's local queue.\n# TYPE weft_run_queue_local gauge"
    );
    for (i, d) in m.run_queue_local.iter().enumerate() {
        let _ = writeln!(o, "weft_run_queue_local{{carrier=\"{i}\"}} {d}");
    }
    series(
        &mut o,
        "weft_virtual_threads_live",
        "gauge",
        "Virtual threads alive.",
        m.threads_live,
    );
    series(
        &mut o,
        "weft_virtual_threads_started_total",
        "counter",
        "Virtual threads started.",
        m.threads_started,
    );
    series(
        &mut o,
        "weft_virtual_threads_finished_total",
        "counter",
        "Virtual threads finished.",
        m.threads_finished,
    );
    let _ = writeln!(
        o,
        "# HELP weft_virtual_threads_parked Parked virtual threads by reason.\n# TYPE weft_virtual_threads_parked gauge"
    );
    for (r, n) in &m.parked_by_reason {
        let _ = writeln!(o, "weft_virtual_threads_parked{{reason=\"{r}\"}} {n}");
    }
    series(
        &mut o,
        "weft_steals_total",
        "counter",
        "Successful work steals.",
        m.steals,
    );
    series(
        &mut o,
        "weft_placed_total",
        "counter",
        "New virtual threads placed on a less loaded carrier at their first run.",
        m.placed,
    );
    series(
        &mut o,
        "weft_timers_pending",
        "gauge",
        "Pending timer entries.",
        m.timers_pending,
    );
    series(
        &mut o,
        "weft_sockets_registered",
        "gauge",
        "Sockets registered with the poller.",
        m.sockets_registered,
    );
    series(
        &mut o,
        "weft_stacks_live",
        "gauge",
        "Virtual-thread stacks in use.",
        m.stacks_live,
    );
    series(
        &mut o,
        "weft_blocking_threads",
        "gauge",
        "Offload (weft::blocking) OS threads alive.",
        m.blocking_threads,
    );
    series(
        &mut o,
        "weft_blocking_queued",
        "gauge",
        "Offloaded closures waiting for an offload thread.",
        m.blocking_queued,
    );
    series(
        &mut o,
        "weft_pinned_events_total",
        "counter",
        "Pinned events.",
        m.events.pinned,
    );
    series(
        &mut o,
        "weft_stall_events_total",
        "counter",
        "Stall events.",
        m.events.stalls,
    );
    series(
        &mut o,
        "weft_spawn_failures_total",
        "counter",
        "Failed spawns.",
        m.events.spawn_failures,
    );
    let _ = writeln!(
        o,
        "# HELP weft_carrier_hold_seconds Duration of pinned and stall events.\n# TYPE weft_carrier_hold_seconds histogram"
    );
    let mut cum = 0;
    for (i, n) in m.event_histogram.iter().enumerate() {
        cum += n;
        let le = events::HISTOGRAM_BOUNDS_MS[i];
        if le == u64::MAX {
            let _ = writeln!(o, "weft_carrier_hold_seconds_bucket{{le=\"+Inf\"}} {cum}");
        } else {
            let _ = writeln!(
                o,
                "weft_carrier_hold_seconds_bucket{{le=\"{}\"}} {cum}",
                le as f64 / 1000.0
            );
        }
    }
    let _ = writeln!(
        o,
        "weft_carrier_hold_seconds_sum {}\nweft_carrier_hold_seconds_count {cum}",
        (m.events.pinned_us + m.events.stall_us) as f64 / 1e6
    );
    #[cfg(all(
        feature = "transparent",
        target_os = "linux",
        target_env = "gnu",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    {
        let _ = writeln!(
            o,
            "# HELP weft_transparent_parks_total Virtual threads parked in a hooked libc call.\n# TYPE weft_transparent_parks_total counter"
        );
        for (c, n) in crate::transparent::parks() {
            let _ = writeln!(o, "weft_transparent_parks_total{{call=\"{c}\"}} {n}");
        }
    }
    for s in SOURCES.lock().unpoison().iter() {
        s(&mut o);
    }
    o
}
