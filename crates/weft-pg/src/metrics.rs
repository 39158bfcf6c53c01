//! Pool metrics: gauges and timing summaries, and their Prometheus
//! exposition.
//!
//! Every open pool is listed in the runtime's Prometheus exposition
//! ([`weft::metrics::prometheus`], served by weft-http's
//! `/debug/weft/metrics`) beside the runtime's own series, under the names
//! HikariCP's Micrometer binding uses (so dashboards made for HikariCP
//! read them), labelled with the pool's name:
//!
//! | series | type | from |
//! |---|---|---|
//! | `hikaricp_connections` | gauge | [`Metrics::total`] |
//! | `hikaricp_connections_active` / `_idle` / `_pending` | gauge | [`Metrics::active`], [`Metrics::idle`], [`Metrics::pending`] |
//! | `hikaricp_connections_max` / `_min` | gauge | `max_size`, `min_idle` |
//! | `hikaricp_connections_timeout_total` | counter | [`Metrics::timeouts`] |
//! | `hikaricp_connections_acquire_seconds` / `_usage_seconds` / `_creation_seconds` | summary (0.5, 0.95, 0.99), and `…_max` gauges | [`Metrics::acquire`], [`Metrics::usage`], [`Metrics::creation`] |
//! | `weft_pg_connections_created_total` / `_closed_total`, `weft_pg_connect_errors_total`, `weft_pg_validation_failures_total`, `weft_pg_leak_warnings_total` | counter | the rest of [`Metrics`] |
//!
//! A pool leaves the exposition when it is closed. Two open pools with the
//! same name are told apart by a suffix (`-2`, `-3`, …) on the label.

use std::fmt;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;
use weft::sync::Unpoison;

/// Sub-buckets per power of two (log-linear buckets, ~19% wide).
const SUB: usize = 4;
/// Powers of two covered, in nanoseconds: 1 ns .. ~18 minutes.
const OCTAVES: usize = 40;
const BUCKETS: usize = OCTAVES * SUB;

/// A lock-free recorder of durations: count, sum, max and a log-linear
/// histogram for quantiles.
pub(crate) struct Timer {
    count: AtomicU64,
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
    buckets: Box<[AtomicU64]>,
}

fn bucket_of(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let octave = 63 - ns.leading_zeros() as usize; // floor(log2)
    let frac = ((ns >> (octave.saturating_sub(2))) & (SUB as u64 - 1)) as usize;
    (octave * SUB + frac).min(BUCKETS - 1)
}

/// The upper bound of a bucket, in nanoseconds.
fn bucket_high(b: usize) -> u64 {
    if b < SUB {
        return b as u64 + 1;
    }
    let octave = b / SUB;
    let frac = (b % SUB) as u64;
    let base = 1u64 << octave;
    base + (frac + 1) * (base / SUB as u64)
}

impl Timer {
    pub(crate) fn new() -> Timer {
        Timer {
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub(crate) fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
        self.buckets[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Timing {
        Timing {
            count: self.count.load(Ordering::Relaxed),
            total: Duration::from_nanos(self.sum_ns.load(Ordering::Relaxed)),
            max: Duration::from_nanos(self.max_ns.load(Ordering::Relaxed)),
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
        }
    }
}

/// A summary of recorded durations (acquire, usage or creation times).
#[derive(Clone, Default)]
pub struct Timing {
    /// How many were recorded.
    pub count: u64,
    /// Their sum.
    pub total: Duration,
    /// The longest.
    pub max: Duration,
    buckets: Vec<u64>,
}

impl Timing {
    /// The mean (zero if nothing was recorded).
    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            Duration::ZERO
        } else {
            self.total / u32::try_from(self.count).unwrap_or(u32::MAX)
        }
    }

    /// The `q` quantile (`0.0..=1.0`), as the upper bound of its
    /// histogram bucket (buckets are about 19% wide), capped at `max`.
    pub fn quantile(&self, q: f64) -> Duration {
        let n: u64 = self.buckets.iter().sum();
        if n == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(bucket_high(b)).min(self.max);
            }
        }
        self.max
    }
}

impl fmt::Debug for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timing")
            .field("count", &self.count)
            .field("mean", &self.mean())
            .field("p50", &self.quantile(0.5))
            .field("p99", &self.quantile(0.99))
            .field("max", &self.max)
            .finish()
    }
}

/// A snapshot of a pool's state and history ([`Pool::metrics`](crate::Pool::metrics)).
///
/// The gauges are read together under the pool's lock, so they are
/// consistent with each other: `total == active + idle + creating`.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    /// Connections open or being opened.
    pub total: usize,
    /// Connections handed out and not yet returned.
    pub active: usize,
    /// Connections waiting in the pool.
    pub idle: usize,
    /// Connections being opened right now.
    pub creating: usize,
    /// Threads waiting for a connection.
    pub pending: usize,
    /// Time from `get()` to having a connection (successful checkouts).
    pub acquire: Timing,
    /// Time from checkout to return.
    pub usage: Timing,
    /// Time to open a connection (successful attempts).
    pub creation: Timing,
    /// Checkouts that timed out.
    pub timeouts: u64,
    /// Connections opened since the pool started.
    pub created: u64,
    /// Connections closed since the pool started (idle timeout, max
    /// lifetime, failed validation, broken, pool closed).
    pub closed: u64,
    /// Failed attempts to open a connection.
    pub connect_errors: u64,
    /// Connections that failed validation at checkout.
    pub validation_failures: u64,
    /// Leak warnings issued.
    pub leaks: u64,
}

/// What a published pool reads for the exposition: its metrics, its
/// `max_size` and `min_idle`; `None` once it is closed or gone.
type Reader = Arc<dyn Fn() -> Option<(Metrics, usize, usize)> + Send + Sync>;

/// The open pools, by label, in the order they were started.
static POOLS: Mutex<Vec<(String, Reader)>> = Mutex::new(Vec::new());

/// Lists a pool in the Prometheus exposition until `read` answers `None`
/// (registers weft-pg's source with `weft::metrics` at the first pool).
pub(crate) fn publish(
    name: &str,
    read: impl Fn() -> Option<(Metrics, usize, usize)> + Send + Sync + 'static,
) {
    static SOURCE: Once = Once::new();
    SOURCE.call_once(|| weft::metrics::register_source(write_prometheus));
    let mut pools = POOLS.lock().unpoison();
    let mut label = name.to_string();
    let mut n = 1;
    while pools.iter().any(|(l, _)| *l == label) {
        n += 1;
        label = format!("{name}-{n}");
    }
    pools.push((label, Arc::new(read)));
}

/// Appends every open pool's series to a Prometheus text exposition, and
/// forgets the pools that closed.
pub(crate) fn write_prometheus(o: &mut String) {
    // Read outside the list's lock: a reader takes its pool's lock.
    let readers: Vec<(String, Reader)> = POOLS.lock().unpoison().clone();
    let mut pools = Vec::new();
    let mut gone = Vec::new();
    for (label, read) in readers {
        match read() {
            Some(m) => pools.push((escape(&label), m)),
            None => gone.push(label),
        }
    }
    if !gone.is_empty() {
        POOLS.lock().unpoison().retain(|(l, _)| !gone.contains(l));
    }
    if pools.is_empty() {
        return;
    }
    type Get = fn(&(Metrics, usize, usize)) -> u64;
    let families: [(&str, &str, &str, Get); 12] = [
        (
            "hikaricp_connections",
            "gauge",
            "Connections open or being opened.",
            |m| m.0.total as u64,
        ),
        (
            "hikaricp_connections_active",
            "gauge",
            "Connections handed out.",
            |m| m.0.active as u64,
        ),
        (
            "hikaricp_connections_idle",
            "gauge",
            "Connections waiting in the pool.",
            |m| m.0.idle as u64,
        ),
        (
            "hikaricp_connections_pending",
            "gauge",
            "Threads waiting for a connection.",
            |m| m.0.pending as u64,
        ),
        (
            "hikaricp_connections_max",
            "gauge",
            "The pool's max_size.",
            |m| m.1 as u64,
        ),
        (
            "hikaricp_connections_min",
            "gauge",
            "The pool's min_idle.",
            |m| m.2 as u64,
        ),
        (
            "hikaricp_connections_timeout_total",
            "counter",
            "Checkouts that timed out.",
            |m| m.0.timeouts,
        ),
        (
            "weft_pg_connections_created_total",
            "counter",
            "Connections opened.",
            |m| m.0.created,
        ),
        (
            "weft_pg_connections_closed_total",
            "counter",
            "Connections closed.",
            |m| m.0.closed,
        ),
        (
            "weft_pg_connect_errors_total",
            "counter",
            "Failed attempts to open a connection.",
            |m| m.0.connect_errors,
        ),
        (
            "weft_pg_validation_failures_total",
            "counter",
            "Connections that failed validation at checkout.",
            |m| m.0.validation_failures,
        ),
        (
            "weft_pg_leak_warnings_total",
            "counter",
            "Connection leak warnings issued.",
            |m| m.0.leaks,
        ),
    ];
    for (name, kind, help, get) in families {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (label, m) in &pools {
            let _ = writeln!(o, "{name}{{pool=\"{label}\"}} {}", get(m));
        }
    }
    type Time = fn(&Metrics) -> &Timing;
    let timings: [(&str, &str, Time); 3] = [
        (
            "hikaricp_connections_acquire_seconds",
            "Time to get a connection.",
            |m| &m.acquire,
        ),
        (
            "hikaricp_connections_usage_seconds",
            "Time a connection was held.",
            |m| &m.usage,
        ),
        (
            "hikaricp_connections_creation_seconds",
            "Time to open a connection.",
            |m| &m.creation,
        ),
    ];
    for (name, help, get) in timings {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} summary");
        for (label, m) in &pools {
            let t = get(&m.0);
            for q in [0.5, 0.95, 0.99] {
                let _ = writeln!(
                    o,
                    "{name}{{pool=\"{label}\",quantile=\"{q}\"}} {}",
                    t.quantile(q).as_secs_f64()
                );
            }
            let _ = writeln!(
                o,
                "{name}_sum{{pool=\"{label}\"}} {}",
                t.total.as_secs_f64()
            );
            let _ = writeln!(o, "{name}_count{{pool=\"{label}\"}} {}", t.count);
        }
        let _ = writeln!(
            o,
            "# HELP {name}_max The longest, since the pool started.\n# TYPE {name}_max gauge"
        );
        for (label, m) in &pools {
            let _ = writeln!(
                o,
                "{name}_max{{pool=\"{label}\"}} {}",
                get(&m.0).max.as_secs_f64()
            );
        }
    }
}

/// A label value as the exposition format wants it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_pools_are_exposed_under_their_names_and_closed_ones_leave() {
        let open = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let o2 = open.clone();
        let metrics = Metrics {
            total: 3,
            active: 2,
            idle: 1,
            ..Metrics::default()
        };
        publish("unit \"q\"", move || {
            o2.load(Ordering::SeqCst).then(|| (metrics.clone(), 7, 1))
        });
        publish("unit \"q\"", || Some((Metrics::default(), 1, 0)));
        let mut text = String::new();
        write_prometheus(&mut text);
        assert!(
            text.contains("hikaricp_connections_active{pool=\"unit \\\"q\\\"\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("hikaricp_connections_max{pool=\"unit \\\"q\\\"\"} 7"),
            "{text}"
        );
        assert!(
            text.contains("hikaricp_connections_active{pool=\"unit \\\"q\\\"-2\"} 0"),
            "{text}"
        );
        assert_eq!(
            text.matches("# TYPE hikaricp_connections_active gauge")
                .count(),
            1,
            "{text}"
        );
        open.store(false, Ordering::SeqCst);
        let mut text = String::new();
        write_prometheus(&mut text);
        assert!(!text.contains("pool=\"unit \\\"q\\\"\""), "{text}");
        assert!(text.contains("-2\"}"), "{text}");
    }
}
