//! Test helpers: reports made from given samples, as a run would make them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;

use crate::series::Interval;
use crate::{Errors, Report, hdr, summary};

/// A deterministic heavy-tailed latency, microseconds.
fn latencies(seed: u64, n: usize) -> Vec<u64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            // 200 µs .. ~2 s, most near the bottom.
            (200.0 / (1.0 - u * 0.9999).powf(1.0)) as u64
        })
        .collect()
}

/// A report of `samples` (time from the start, latency in µs) as a
/// run would make it: per-interval histograms and their sum.
pub(crate) fn report(
    name: &str,
    start: SystemTime,
    interval: Duration,
    samples: &[(Duration, u64)],
) -> Report {
    let mut total = hdr::new_histogram();
    let mut cells: BTreeMap<u32, Histogram<u64>> = BTreeMap::new();
    for &(t, us) in samples {
        let cell = (t.as_nanos() / interval.as_nanos()) as u32;
        hdr::record(cells.entry(cell).or_insert_with(hdr::new_histogram), us);
        hdr::record(&mut total, us);
    }
    let last = cells.keys().next_back().copied().unwrap_or(0);
    let series = (0..=last)
        .map(|c| {
            let h = cells.remove(&c).unwrap_or_else(hdr::new_histogram);
            let n = h.len();
            Interval::new(
                interval * c,
                interval,
                n,
                0,
                crate::series::rate(n, interval),
                &h,
            )
        })
        .collect();
    let n = samples.len() as u64;
    Report {
        name: name.into(),
        model: "closed",
        runs: 1,
        concurrency: 4,
        requests: n,
        successes: n,
        failures: 0,
        duration_secs: interval.as_secs_f64() * f64::from(last + 1),
        throughput: 0.0,
        failures_per_sec: 0.0,
        target_rate: None,
        latency: summary(&total),
        handshake: None,
        handshakes: 0,
        errors: Errors::default(),
        status_counts: [(200, n)].into(),
        body_bytes: 5 * n,
        histogram: total,
        handshake_histogram: None,
        started_at: start,
        interval,
        series,
        // A new run each call.
        run_ids: vec![format!("test-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed))],
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// `n` samples spread evenly over `secs` seconds.
pub(crate) fn spread(seed: u64, n: usize, secs: f64) -> Vec<(Duration, u64)> {
    latencies(seed, n)
        .into_iter()
        .enumerate()
        .map(|(i, us)| (Duration::from_secs_f64(secs * i as f64 / n as f64), us))
        .collect()
}
