//! Runtime metrics: a snapshot struct, the table of series made from it
//! ([`Metrics::series`]), and the Prometheus text exposition of that
//! table. The exposition and weft-http's live page both read the table,
//! so a series is named, typed and explained once.
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

/// A point-in-time view of every runtime in the process (summed; the
/// carrier figures also per runtime in [`Metrics::runtimes`]).
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
    /// Virtual threads in the global (injector) queues.
    pub run_queue_global: usize,
    /// Virtual threads in each carrier's local queue (all runtimes, in
    /// order).
    pub run_queue_local: Vec<usize>,
    /// The carrier figures of each runtime, oldest runtime first.
    pub runtimes: Vec<RuntimeCarriers>,
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
    /// Started virtual threads moved off a stalled carrier (a thread past the
    /// stall threshold on it) to run elsewhere: handoff.
    pub threads_moved: usize,
    /// Carriers' OS threads lowered in priority while one virtual thread
    /// computed on them and others waited
    /// ([`RuntimeBuilder::held_carrier_nice`](crate::RuntimeBuilder::held_carrier_nice)).
    pub carriers_lowered: usize,
    /// Core carriers resting now: they only took turns with the others on
    /// shared cores
    /// ([`RuntimeBuilder::rest_carriers`](crate::RuntimeBuilder::rest_carriers)).
    pub carriers_resting: usize,
    /// Times a core carrier was sent to rest.
    pub carrier_rests: usize,
    /// Times a core carrier took threads queued for another that waited
    /// for a CPU
    /// ([`RuntimeBuilder::cover_carriers`](crate::RuntimeBuilder::cover_carriers)).
    pub carrier_covers: usize,
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
    /// How long carriers were held, by bucket of
    /// [`events::HISTOGRAM_BOUNDS_MS`] ([`events::duration_histogram`]).
    pub event_histogram: [u64; events::HISTOGRAM_BUCKETS],
}

/// One runtime's carriers, for the `runtime` label of the carrier series.
#[derive(Clone, Debug, Default)]
pub struct RuntimeCarriers {
    /// The label: the runtime's name (`RuntimeBuilder::name`), with
    /// `#2`, `#3`, … after it for a second and third runtime of that name.
    pub runtime: String,
    /// Carriers on duty (core + spares).
    pub carriers: usize,
    /// Carriers running a virtual thread.
    pub busy: usize,
    /// Carriers on duty and not running a thread.
    pub idle: usize,
    /// Spare carriers on duty.
    pub spare: usize,
    /// Carriers blocked in `weft::blocking`, pinned, or stalled.
    pub blocked: usize,
    /// Spare carrier threads ever started.
    pub spares_started: usize,
    /// Virtual threads in the runtime's global queue.
    pub run_queue_global: usize,
    /// Virtual threads in each carrier's local queue.
    pub run_queue_local: Vec<usize>,
    /// Why this runtime's virtual threads share their carriers'
    /// thread-locals (`RuntimeBuilder::carrier_thread_locals`, a runtime
    /// that allows migration, a platform without thread-local areas), as
    /// said once on stderr when its first carrier started; `None` when
    /// each has its own (or no carrier has started yet).
    pub shared_thread_locals: Option<&'static str>,
}

/// Takes a snapshot. Counting parked threads by reason visits every
/// thread (a lock per registry shard); everything else is a few atomics.
pub fn snapshot() -> Metrics {
    let mut m = Metrics::default();
    for rt in crate::sched::runtimes() {
        let s = rt.stats();
        let idle = s.carriers_active.saturating_sub(s.carriers_busy);
        m.carriers_total += s.carriers_active;
        m.carriers_busy += s.carriers_busy;
        m.carriers_idle += idle;
        m.carriers_spare += s.carriers_spare;
        m.carriers_blocked += s.carriers_blocked;
        m.carriers_searching += s.carriers_searching;
        m.carriers_sleeping += s.carriers_sleeping;
        m.spares_started += s.spares_started;
        m.run_queue_global += s.run_queue_global;
        m.run_queue_local.extend(&s.run_queue_local);
        m.threads_live += s.threads_live;
        m.threads_started += s.threads_started;
        m.steals += s.steals;
        m.placed += s.placed;
        m.threads_moved += s.moved;
        m.carriers_lowered += s.lowered;
        m.carriers_resting += s.resting;
        m.carrier_rests += s.rests;
        m.carrier_covers += s.covers;
        m.timers_pending += s.timers_pending;
        let same = m
            .runtimes
            .iter()
            .filter(|r| r.runtime == rt.name || r.runtime.starts_with(&format!("{}#", rt.name)))
            .count();
        m.runtimes.push(RuntimeCarriers {
            runtime: if same == 0 {
                rt.name.clone()
            } else {
                format!("{}#{}", rt.name, same + 1)
            },
            carriers: s.carriers_active,
            busy: s.carriers_busy,
            idle,
            spare: s.carriers_spare,
            blocked: s.carriers_blocked,
            spares_started: s.spares_started,
            run_queue_global: s.run_queue_global,
            run_queue_local: s.run_queue_local,
            shared_thread_locals: s.shared_thread_locals,
        });
    }
    m.threads_finished = m.threads_started.saturating_sub(m.threads_live);
    let mut reasons: Vec<(&'static str, usize)> =
        Blocker::REASONS.iter().map(|&r| (r, 0)).collect();
    crate::thread::registry::for_each_thread(|t| {
        if crate::thread::state_of(t) != State::Parked {
            return;
        }
        reasons[crate::thread::blocker_of(t).reason_index()].1 += 1;
    });
    m.parked_by_reason = reasons;
    m.sockets_registered =
        crate::netpoll::get().map_or(0, |s| s.registered.load(Ordering::Relaxed));
    m.stacks_live = crate::stack::live_stacks();
    (m.blocking_threads, m.blocking_queued) = crate::offload::stats();
    m.events = events::counters();
    m.event_histogram = events::duration_histogram();
    m
}

/// What a series measures, as Prometheus types it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SeriesKind {
    /// A value that goes up and down.
    Gauge,
    /// A total that only grows.
    Counter,
    /// Counts by bucket, with a sum and a count.
    Histogram,
}

impl SeriesKind {
    /// `"gauge"`, `"counter"` or `"histogram"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SeriesKind::Gauge => "gauge",
            SeriesKind::Counter => "counter",
            SeriesKind::Histogram => "histogram",
        }
    }
}

/// One series of the exposition: a name, its type and help text, and its
/// samples (one without labels, or one per label value).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The metric's name (`weft_carriers`).
    pub name: &'static str,
    /// Its type.
    pub kind: SeriesKind,
    /// What it measures, in one sentence.
    pub help: &'static str,
    /// Its samples.
    pub samples: Vec<Sample>,
}

/// One sample of a [`Series`].
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// What follows the series' name: empty, or `_bucket`, `_sum`,
    /// `_count` for a histogram.
    pub suffix: &'static str,
    /// Label names and values (values not escaped).
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: f64,
}

impl Series {
    /// A row of the table.
    pub fn new(
        name: &'static str,
        kind: SeriesKind,
        help: &'static str,
        samples: Vec<Sample>,
    ) -> Series {
        Series {
            name,
            kind,
            help,
            samples,
        }
    }
}

impl Sample {
    /// A sample with these labels (no suffix).
    pub fn new(labels: Vec<(&'static str, String)>, value: f64) -> Sample {
        Sample {
            suffix: "",
            labels,
            value,
        }
    }

    fn plain(value: f64) -> Sample {
        Sample::new(Vec::new(), value)
    }

    /// The sample's line without its value: `weft_carriers{runtime="a"}`.
    pub fn key(&self, name: &str) -> String {
        let mut o = format!("{name}{}", self.suffix);
        if !self.labels.is_empty() {
            o.push('{');
            for (i, (k, v)) in self.labels.iter().enumerate() {
                if i > 0 {
                    o.push(',');
                }
                let _ = write!(o, "{k}=\"{}\"", escape_label(v));
            }
            o.push('}');
        }
        o
    }
}

/// A label value as the text format wants it (`\`, `"`, newline escaped).
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A count as a sample value (exact up to 2^53).
fn n(v: u64) -> f64 {
    v as f64
}

impl Metrics {
    /// The table of every series: what [`prometheus`] writes (before the
    /// registered sources) and weft-http's live page shows.
    pub fn series(&self) -> Vec<Series> {
        use SeriesKind::{Counter, Gauge, Histogram};
        let u = |v: usize| n(v as u64);
        let per_runtime = |f: fn(&RuntimeCarriers) -> usize| -> Vec<Sample> {
            self.runtimes
                .iter()
                .map(|r| Sample::new(vec![("runtime", r.runtime.clone())], u(f(r))))
                .collect()
        };
        let plain = |v: f64| vec![Sample::plain(v)];
        let local = self
            .runtimes
            .iter()
            .flat_map(|r| {
                r.run_queue_local.iter().enumerate().map(|(i, d)| {
                    let labels = vec![("runtime", r.runtime.clone()), ("carrier", i.to_string())];
                    Sample::new(labels, u(*d))
                })
            })
            .collect();
        let parked = self
            .parked_by_reason
            .iter()
            .map(|(r, c)| Sample::new(vec![("reason", (*r).to_owned())], u(*c)))
            .collect();
        let e = &self.events;
        let row = Series::new;
        vec![
            row(
                "weft_carriers",
                Gauge,
                "Carriers on duty (core + spares).",
                per_runtime(|r| r.carriers),
            ),
            row(
                "weft_carriers_busy",
                Gauge,
                "Carriers running a virtual thread.",
                per_runtime(|r| r.busy),
            ),
            row(
                "weft_carriers_idle",
                Gauge,
                "Carriers on duty with nothing to run.",
                per_runtime(|r| r.idle),
            ),
            row(
                "weft_carriers_spare",
                Gauge,
                "Spare carriers compensating for blocked ones.",
                per_runtime(|r| r.spare),
            ),
            row(
                "weft_carriers_blocked",
                Gauge,
                "Carriers blocked, pinned or stalled.",
                per_runtime(|r| r.blocked),
            ),
            row(
                "weft_spare_carriers_started_total",
                Counter,
                "Spare carrier threads started.",
                per_runtime(|r| r.spares_started),
            ),
            row(
                "weft_run_queue_global",
                Gauge,
                "Virtual threads in a runtime's global queue.",
                per_runtime(|r| r.run_queue_global),
            ),
            row(
                "weft_run_queue_local",
                Gauge,
                "Virtual threads in a carrier's local queue.",
                local,
            ),
            row(
                "weft_virtual_threads_live",
                Gauge,
                "Virtual threads alive.",
                plain(u(self.threads_live)),
            ),
            row(
                "weft_virtual_threads_started_total",
                Counter,
                "Virtual threads started.",
                plain(u(self.threads_started)),
            ),
            row(
                "weft_virtual_threads_finished_total",
                Counter,
                "Virtual threads finished.",
                plain(u(self.threads_finished)),
            ),
            row(
                "weft_virtual_threads_parked",
                Gauge,
                "Parked virtual threads by reason.",
                parked,
            ),
            row(
                "weft_steals_total",
                Counter,
                "Successful work steals.",
                plain(u(self.steals)),
            ),
            row(
                "weft_placed_total",
                Counter,
                "New virtual threads placed on a less loaded carrier at their first run.",
                plain(u(self.placed)),
            ),
            row(
                "weft_threads_moved_total",
                Counter,
                "Started virtual threads moved off a held carrier to run elsewhere.",
                plain(u(self.threads_moved)),
            ),
            row(
                "weft_carriers_lowered_total",
                Counter,
                "Carrier OS threads lowered in priority while one virtual thread computed on them.",
                plain(u(self.carriers_lowered)),
            ),
            row(
                "weft_carriers_resting",
                Gauge,
                "Core carriers resting: they only took turns with the others on shared cores.",
                plain(u(self.carriers_resting)),
            ),
            row(
                "weft_carrier_rests_total",
                Counter,
                "Times a core carrier was sent to rest.",
                plain(u(self.carrier_rests)),
            ),
            row(
                "weft_carrier_covers_total",
                Counter,
                "Times a core carrier took threads queued for another that waited for a CPU.",
                plain(u(self.carrier_covers)),
            ),
            row(
                "weft_timers_pending",
                Gauge,
                "Pending timer entries.",
                plain(u(self.timers_pending)),
            ),
            row(
                "weft_sockets_registered",
                Gauge,
                "Sockets registered with the poller.",
                plain(u(self.sockets_registered)),
            ),
            row(
                "weft_stacks_live",
                Gauge,
                "Virtual-thread stacks in use.",
                plain(u(self.stacks_live)),
            ),
            row(
                "weft_blocking_threads",
                Gauge,
                "Offload (weft::blocking) OS threads alive.",
                plain(u(self.blocking_threads)),
            ),
            row(
                "weft_blocking_queued",
                Gauge,
                "Offloaded closures waiting for an offload thread.",
                plain(u(self.blocking_queued)),
            ),
            row(
                "weft_pinned_events_total",
                Counter,
                "Pinned events.",
                plain(n(e.pinned)),
            ),
            row(
                "weft_stall_events_total",
                Counter,
                "Stall events.",
                plain(n(e.stalls)),
            ),
            row(
                "weft_blocked_with_waiters_total",
                Counter,
                "Blocked-with-waiters events (possible pinning deadlocks).",
                plain(n(e.blocked_with_waiters)),
            ),
            row(
                "weft_spawn_failures_total",
                Counter,
                "Failed spawns.",
                plain(n(e.spawn_failures)),
            ),
            row(
                "weft_event_reports_dropped_total",
                Counter,
                "Stall reports the monitor dropped: the thread writing them up was blocked (a log sink).",
                plain(n(e.reports_dropped)),
            ),
            row(
                "weft_carrier_hold_seconds",
                Histogram,
                "How long a carrier was held: each pinned wait, and each stall's whole hold, when it ended.",
                self.hold_samples(),
            ),
            #[cfg(all(
                feature = "transparent",
                target_os = "linux",
                target_env = "gnu",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            row(
                "weft_transparent_parks_total",
                Counter,
                "Virtual threads parked in a hooked libc call.",
                crate::transparent::parks()
                    .into_iter()
                    .map(|(c, v)| Sample::new(vec![("call", c.to_string())], n(v)))
                    .collect(),
            ),
        ]
    }

    fn hold_samples(&self) -> Vec<Sample> {
        let mut out = Vec::with_capacity(events::HISTOGRAM_BUCKETS + 2);
        let mut cum = 0;
        for (i, c) in self.event_histogram.iter().enumerate() {
            cum += c;
            let le = events::HISTOGRAM_BOUNDS_MS[i];
            out.push(Sample {
                suffix: "_bucket",
                labels: vec![(
                    "le",
                    if le == u64::MAX {
                        "+Inf".to_owned()
                    } else {
                        (le as f64 / 1000.0).to_string()
                    },
                )],
                value: n(cum),
            });
        }
        let sum_us = self.events.pinned_us + self.events.stall_hold_us;
        for (suffix, value) in [("_sum", sum_us as f64 / 1e6), ("_count", n(cum))] {
            out.push(Sample {
                suffix,
                labels: Vec::new(),
                value,
            });
        }
        out
    }
}

type Source = Box<dyn Fn(&mut String) + Send + Sync>;
static SOURCES: Mutex<Vec<Source>> = Mutex::new(Vec::new());

/// Adds a source of extra Prometheus series, called on every
/// [`prometheus`] exposition; it appends complete lines (with `# HELP` and
/// `# TYPE`) to the buffer.
pub fn register_source(f: impl Fn(&mut String) + Send + Sync + 'static) {
    SOURCES.lock().unpoison().push(Box::new(f));
}

/// Appends `series` to a text exposition (format 0.0.4).
pub fn write_series(o: &mut String, series: &[Series]) {
    for s in series {
        let _ = writeln!(
            o,
            "# HELP {} {}\n# TYPE {} {}",
            s.name,
            s.help,
            s.name,
            s.kind.as_str()
        );
        for sample in &s.samples {
            let _ = writeln!(o, "{} {}", sample.key(s.name), sample.value);
        }
    }
}

/// The Prometheus text exposition (format 0.0.4) of [`snapshot`]'s
/// [`Metrics::series`] plus every registered source.
pub fn prometheus() -> String {
    let mut o = String::with_capacity(8192);
    write_series(&mut o, &snapshot().series());
    for s in SOURCES.lock().unpoison().iter() {
        s(&mut o);
    }
    o
}
