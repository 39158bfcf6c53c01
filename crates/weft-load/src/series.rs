//! The time series of a run: every `interval` a sampler thread swaps out
//! the users' [`Shard`]s, so each interval has its own histogram (exact
//! per-interval percentiles, and exact merges across runs), and the run's
//! histogram is the sum of the intervals'.
//!
//! An interval's counts and its histogram are one snapshot: a user records
//! a request's latency and counts it under one shard lock, and the sampler
//! takes the histogram and the counts of a shard together by swapping the
//! whole shard. Reading the counts from the run's progress counters
//! instead (as weft-load once did) cuts them at another moment than the
//! histograms: a request recorded in a shard already swapped out but
//! counted before the counter is read lands in two intervals, and an
//! interval's `requests` differs from its histogram's count by one or two.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use weft::channel::{Receiver, RecvTimeoutError, Sender};
use weft::sync::Unpoison;

use crate::Plan;
use crate::hdr::{self, DEFAULT_MAX_HISTOGRAM_BYTES};

/// One interval of a run's (or a merge's) time series.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// Where the interval starts, from the start of the measured phase:
    /// `i × interval` for the `i`-th interval (nominal: the sampler may
    /// wake a little late).
    pub start: Duration,
    /// How long it lasted: the interval, give or take the sampler's
    /// wake-up, and the rest of the run for the last one.
    pub duration: Duration,
    /// Requests completed in it (successes + failures).
    pub requests: u64,
    /// Failed requests among them.
    pub failures: u64,
    /// Requests per second: `requests / duration` for a run; for a merge
    /// the sum of the merged runs' rates in that interval.
    pub throughput: f64,
    /// Latencies recorded in it: the requests that got a response
    /// (failures with a status included), its histogram's count.
    pub latencies: u64,
    /// Median latency of the requests answered in it, ms (0 if none: see
    /// `latencies`; the HTML report leaves a gap there).
    pub p50_ms: f64,
    /// 99th percentile, ms (0 if none).
    pub p99_ms: f64,
    /// The interval's latency histogram (microseconds), encoded as in the
    /// JSON report (kept encoded: a decoded one is ~270 KB).
    pub(crate) histogram: String,
}

impl Interval {
    pub(crate) fn new(
        start: Duration,
        duration: Duration,
        requests: u64,
        failures: u64,
        throughput: f64,
        h: &Histogram<u64>,
    ) -> Interval {
        Interval {
            start,
            duration,
            requests,
            failures,
            throughput,
            latencies: h.len(),
            p50_ms: quantile_ms(h, 0.5),
            p99_ms: quantile_ms(h, 0.99),
            histogram: hdr::encode(h),
        }
    }

    /// The interval's latency histogram, microseconds.
    ///
    /// # Errors
    ///
    /// None for an interval of a run or of a report read with
    /// [`Report::from_json`](crate::Report::from_json) (which checks every
    /// histogram); the message says what is wrong otherwise.
    pub fn histogram(&self) -> Result<Histogram<u64>, String> {
        hdr::decode(&self.histogram, DEFAULT_MAX_HISTOGRAM_BYTES)
    }

    /// The histogram in the JSON report's encoding (HdrHistogram V2,
    /// deflate, base64).
    pub fn encoded_histogram(&self) -> &str {
        &self.histogram
    }
}

pub(crate) fn quantile_ms(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(q) as f64 / 1000.0
    }
}

/// What the users of one shard did in the current interval. A user
/// updates it under the shard's lock once per measured request, so the
/// three fields always describe the same requests.
pub(crate) struct Shard {
    /// Latencies of the requests that got a response (failures with a
    /// status included), microseconds.
    pub histogram: Histogram<u64>,
    /// Measured requests completed: the histogram's count plus the
    /// failures without a response.
    pub requests: u64,
    /// Failed requests among them.
    pub failures: u64,
}

impl Shard {
    pub(crate) fn new() -> Shard {
        Shard {
            histogram: hdr::new_histogram(),
            requests: 0,
            failures: 0,
        }
    }

    /// Counts a request that got a response after `us` microseconds.
    pub(crate) fn answered(&mut self, us: u64, failed: bool) {
        hdr::record(&mut self.histogram, us);
        self.requests += 1;
        self.failures += u64::from(failed);
    }

    /// Counts a request that failed without a response (no latency).
    pub(crate) fn unanswered(&mut self) {
        self.requests += 1;
        self.failures += 1;
    }

    /// Adds `other` and empties it.
    fn drain_from(&mut self, other: &mut Shard) {
        let _ = self.histogram.add(&other.histogram);
        self.requests += other.requests;
        self.failures += other.failures;
        other.clear();
    }

    fn clear(&mut self) {
        self.histogram.reset();
        self.requests = 0;
        self.failures = 0;
    }
}

/// The end of a run, sent to the sampler.
pub(crate) struct End {
    /// The end of the measured window.
    pub at: Instant,
    /// The run's measured requests and failures, as the users' tallies
    /// say: the last interval gets what the shards did not count (only a
    /// user that panicked leaves such a remainder).
    pub requests: u64,
    pub failures: u64,
}

/// What the sampler hands back: the run's histogram and its intervals.
pub(crate) struct Sampled {
    pub histogram: Histogram<u64>,
    pub series: Vec<Interval>,
}

/// The sampler: an OS thread, so that it wakes on time however busy the
/// users' carriers are.
pub(crate) struct Sampler {
    end: Sender<End>,
    out: Receiver<Sampled>,
}

impl Sampler {
    pub(crate) fn start(plan: Arc<Plan>, interval: Duration) -> std::io::Result<Sampler> {
        let (end_tx, end_rx) = weft::channel::bounded(1);
        let (out_tx, out_rx) = weft::channel::bounded(1);
        std::thread::Builder::new()
            .name("weft-load-sampler".into())
            .spawn(move || {
                let sampled = State::new(plan, interval).run(&end_rx);
                let _ = out_tx.send(sampled);
            })?;
        Ok(Sampler {
            end: end_tx,
            out: out_rx,
        })
    }

    /// Ends the series at `end` and returns it. Parks a virtual caller.
    pub(crate) fn finish(self, end: End) -> Sampled {
        let _ = self.end.send(end);
        loop {
            match self.out.recv() {
                Ok(s) => return s,
                Err(weft::channel::RecvError::Interrupted) => continue,
                // The sampler thread panicked: nothing to report.
                Err(weft::channel::RecvError::Disconnected) => {
                    return Sampled {
                        histogram: hdr::new_histogram(),
                        series: Vec::new(),
                    };
                }
            }
        }
    }
}

/// The sampler thread's state.
struct State {
    plan: Arc<Plan>,
    interval: Duration,
    /// The interval being collected, and a spare that takes a shard's
    /// place while the shard is added.
    acc: Shard,
    spare: Shard,
    total: Histogram<u64>,
    series: Vec<Interval>,
    /// The last closed interval, not yet encoded: a remainder too short to
    /// be an interval of its own is added to it.
    pending: Option<Pending>,
    /// Where the current interval started.
    since: Instant,
}

impl State {
    fn new(plan: Arc<Plan>, interval: Duration) -> State {
        let since = plan.measure;
        State {
            plan,
            interval,
            acc: Shard::new(),
            spare: Shard::new(),
            total: hdr::new_histogram(),
            series: Vec::new(),
            pending: None,
            since,
        }
    }

    fn run(mut self, end: &Receiver<End>) -> Sampled {
        let mut i: u32 = 1;
        loop {
            let tick = self.plan.measure + self.interval * i;
            // No tick at or past the end of a duration run: the last
            // interval ends with the window.
            let wait = match self.plan.end {
                Some(e) if tick >= e => end.recv().map_err(|_| RecvTimeoutError::Disconnected),
                _ => end.recv_deadline(tick),
            };
            match wait {
                Ok(last) => return self.finish(last),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Interrupted) => continue,
                Err(RecvTimeoutError::Disconnected) => return self.finish_now(),
            }
            let now = match self.plan.end {
                Some(e) => Instant::now().min(e),
                None => Instant::now(),
            };
            self.collect();
            self.close(now);
            i += 1;
        }
    }

    /// Adds every shard to `acc` and empties the shards: each is swapped
    /// for the empty spare under its lock, so its histogram and its counts
    /// are taken at one moment (see the module docs).
    fn collect(&mut self) {
        for shard in self.plan.shards.iter() {
            std::mem::swap(&mut *shard.lock().unpoison(), &mut self.spare);
            self.acc.drain_from(&mut self.spare);
        }
    }

    /// Closes the interval `since..now` with `acc`.
    fn close(&mut self, now: Instant) {
        let _ = self.total.add(&self.acc.histogram);
        let duration = now.saturating_duration_since(self.since);
        match &mut self.pending {
            // Nothing left of the window: the remainder goes to the
            // previous interval.
            Some(p) if duration.is_zero() => p.shard.drain_from(&mut self.acc),
            _ => {
                self.flush_pending();
                let mut p = Pending {
                    // Nominal: the k-th interval starts at k × interval.
                    start: self.interval * self.series.len() as u32,
                    duration,
                    shard: Shard::new(),
                };
                p.shard.drain_from(&mut self.acc);
                self.pending = Some(p);
            }
        }
        self.since = now.max(self.since);
    }

    fn flush_pending(&mut self) {
        if let Some(p) = self.pending.take() {
            // An interval of no time (a run that ended as it started)
            // still counts its requests; its rate is 0.
            let s = &p.shard;
            let throughput = rate(s.requests, p.duration);
            self.series.push(Interval::new(
                p.start,
                p.duration,
                s.requests,
                s.failures,
                throughput,
                &s.histogram,
            ));
        }
    }

    fn finish(mut self, end: End) -> Sampled {
        self.collect();
        let counted = self.acc.requests + self.series_requests();
        let failed = self.acc.failures + self.series_failures();
        self.acc.requests += end.requests.saturating_sub(counted);
        self.acc.failures += end.failures.saturating_sub(failed);
        self.close(end.at.max(self.since));
        self.flush_pending();
        Sampled {
            histogram: self.total,
            series: self.series,
        }
    }

    /// The run ended without saying where (its thread is gone).
    fn finish_now(self) -> Sampled {
        let (done, failed) = (
            self.plan.done.load(Ordering::Relaxed),
            self.plan.failed.load(Ordering::Relaxed),
        );
        self.finish(End {
            at: Instant::now(),
            requests: done,
            failures: failed,
        })
    }

    fn series_requests(&self) -> u64 {
        self.series.iter().map(|s| s.requests).sum::<u64>()
            + self.pending.as_ref().map_or(0, |p| p.shard.requests)
    }

    fn series_failures(&self) -> u64 {
        self.series.iter().map(|s| s.failures).sum::<u64>()
            + self.pending.as_ref().map_or(0, |p| p.shard.failures)
    }
}

/// A closed interval not yet encoded.
struct Pending {
    start: Duration,
    duration: Duration,
    shard: Shard,
}

/// `n` per second over `d` (0 over nothing).
pub(crate) fn rate(n: u64, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 { n as f64 / s } else { 0.0 }
}
