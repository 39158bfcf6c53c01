//! Pool metrics: gauges and timing summaries.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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
