//! Merging the reports of several runs (agents on several machines, or
//! several processes on one) into one: histograms added, so the merged
//! percentiles are those of all the requests together.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use weft_bench_support::format::sig3;

use crate::hdr;
use crate::series::Interval;
use crate::{Report, summary};

/// How [`merge`] lines up the runs' time series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Align {
    /// By wall clock (default): each run's intervals are placed at its
    /// start time (`started_at`) on a grid of the interval that begins at
    /// the earliest start; an interval goes to the grid cell its start
    /// falls in. For agents that ran at the same time, on machines whose
    /// clocks agree (NTP keeps them within milliseconds; the grid is one
    /// interval, a second by default).
    #[default]
    WallClock,
    /// By offset: the `i`-th interval of every run together, as if all had
    /// started at once. For runs that did not run at the same time, or
    /// machines whose clocks disagree.
    Offset,
}

impl std::str::FromStr for Align {
    type Err = String;

    fn from_str(s: &str) -> Result<Align, String> {
        match s {
            "wall" | "wall-clock" => Ok(Align::WallClock),
            "offset" => Ok(Align::Offset),
            _ => Err(format!("alignment {s:?} is not wall or offset")),
        }
    }
}

/// How to [`merge`].
#[derive(Clone, Debug)]
pub struct MergeOptions {
    /// How to line up the series.
    pub align: Align,
    /// Most intervals the merged series may have (default 1,000,000: 11
    /// days of 1 s intervals). Runs wall-clock aligned that started far
    /// apart span many (empty) intervals; beyond this, merging is refused
    /// rather than making a huge report.
    pub max_intervals: usize,
    /// What errors call the reports, in order: their file names (default
    /// none: `report 1`, `report 2`, …).
    pub names: Vec<String>,
    /// Merge even when a run is in more than one report (default false:
    /// an error naming both). Each report carries the ids of its runs
    /// ([`Report::run_ids`]), so one file given twice, a copy of it, or a
    /// merged report beside one of its own runs is caught: merged, that
    /// run's requests would be counted twice.
    pub allow_duplicates: bool,
    /// Aligned by wall clock, merge even when a run overlaps no other in
    /// time (default false: an error naming it and the nearest run). Such
    /// runs did not load the target together, and the merged throughput
    /// would count the time between them; [`Align::Offset`] lines them up
    /// by their starts instead.
    pub allow_disjoint: bool,
}

impl Default for MergeOptions {
    fn default() -> MergeOptions {
        MergeOptions {
            align: Align::default(),
            max_intervals: 1_000_000,
            names: Vec::new(),
            allow_duplicates: false,
            allow_disjoint: false,
        }
    }
}

impl MergeOptions {
    /// The name of the `i`-th report in errors.
    fn name(&self, i: usize) -> String {
        self.names
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("report {}", i + 1))
    }
}

/// Why reports could not be merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeError {
    message: String,
}

impl std::fmt::Display for MergeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for MergeError {}

fn error(message: impl Into<String>) -> MergeError {
    MergeError {
        message: message.into(),
    }
}

/// Merges the reports of runs into one.
///
/// - **Exact**: counts, failures, errors by class, statuses, bytes and
///   handshakes are summed; the latency histograms are added, so every
///   percentile is the one of all the requests together, to the
///   histogram's precision (3 significant digits: within 0.1 %), not an
///   average of percentiles.
/// - **Time**: `duration_secs` is the span of the aligned runs (wall
///   clock: from the earliest start to the latest end; offset: the
///   longest run), and `throughput` is all requests over that span. Each
///   merged interval has the added histograms of the intervals in it and
///   the sum of their rates.
/// - The runs must share one `interval`; the merged report can be merged
///   again.
/// - A run is merged once: one in two reports is refused (unless
///   [`allow_duplicates`](MergeOptions::allow_duplicates)), and so is,
///   aligned by wall clock, a run that overlaps no other in time (unless
///   [`allow_disjoint`](MergeOptions::allow_disjoint)).
///
/// # Errors
///
/// A [`MergeError`] naming the reports (by [`MergeOptions::names`]) for
/// an empty list, runs with different intervals, a run in two reports,
/// a run that overlaps no other, or a histogram with values outside
/// weft-load's range (1 µs .. 1 h).
///
/// # Examples
///
/// ```
/// use weft_http::{Request, Response};
/// use weft_load::{Align, Config, MergeOptions, merge, run};
///
/// let server = weft_http::serve("127.0.0.1:0", |_req: &mut Request<'_>| Response::text("ok"))?;
/// let config = Config {
///     url: format!("http://{}/", server.local_addr()),
///     concurrency: 2,
///     requests: Some(100),
///     ..Config::default()
/// };
/// let (a, b) = (run(&config)?, run(&config)?);
/// // One run after the other: by wall clock they never overlapped, so
/// // the default merge refuses them; lined up by their starts instead.
/// let by_start = MergeOptions { align: Align::Offset, ..MergeOptions::default() };
/// let merged = merge(&[a.clone(), b], &by_start)?;
/// assert_eq!(merged.requests, 200);
/// assert_eq!(merged.histogram.len(), 200);
/// assert_eq!(merged.runs, 2);
/// // A run merged twice, or nothing to merge: errors.
/// assert!(merge(&[a.clone(), a], &by_start).is_err());
/// assert!(merge(&[], &MergeOptions::default()).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn merge(reports: &[Report], options: &MergeOptions) -> Result<Report, MergeError> {
    let first = reports
        .first()
        .ok_or_else(|| error("nothing to merge: give at least one report"))?;
    let interval = common_interval(reports, options)?;
    if !options.allow_duplicates {
        check_duplicates(reports, options)?;
    }
    if options.align == Align::WallClock && !options.allow_disjoint {
        check_overlap(reports, options)?;
    }
    let start = reports
        .iter()
        .map(|r| r.started_at)
        .min()
        .unwrap_or(first.started_at);
    let offsets: Vec<Duration> = reports
        .iter()
        .map(|r| match options.align {
            Align::WallClock => r.started_at.duration_since(start).unwrap_or_default(),
            Align::Offset => Duration::ZERO,
        })
        .collect();
    let histogram = add_all(
        reports.iter().map(|r| Some(&r.histogram)),
        "histogram",
        options,
    )?;
    let handshake_histogram = if reports.iter().any(|r| r.handshake_histogram.is_some()) {
        Some(add_all(
            reports.iter().map(|r| r.handshake_histogram.as_ref()),
            "handshake histogram",
            options,
        )?)
    } else {
        None
    };
    let duration_secs = reports
        .iter()
        .zip(&offsets)
        .map(|(r, o)| o.as_secs_f64() + r.duration_secs)
        .fold(0.0, f64::max);
    let series = merge_series(reports, &offsets, interval, options.max_intervals)?;
    let mut m = totals(reports);
    m.throughput = per_sec(m.requests, duration_secs);
    m.failures_per_sec = per_sec(m.failures, duration_secs);
    m.duration_secs = duration_secs;
    m.latency = summary(&histogram);
    m.handshake = handshake_histogram.as_ref().map(summary);
    m.histogram = histogram;
    m.handshake_histogram = handshake_histogram;
    m.started_at = start;
    m.interval = interval;
    m.series = series;
    Ok(m)
}

fn per_sec(n: u64, secs: f64) -> f64 {
    if secs > 0.0 { n as f64 / secs } else { 0.0 }
}

fn common_interval(reports: &[Report], o: &MergeOptions) -> Result<Duration, MergeError> {
    let interval = reports[0].interval;
    if interval.is_zero() {
        return Err(error(format!("{} has an interval of zero", o.name(0))));
    }
    match reports.iter().position(|r| r.interval != interval) {
        None => Ok(interval),
        Some(i) => Err(error(format!(
            "the reports' intervals differ ({}: {} ms, {}: {} ms): run every agent with the same --interval",
            o.name(0),
            interval.as_millis(),
            o.name(i),
            reports[i].interval.as_millis()
        ))),
    }
}

/// Refuses a run that is in two of the reports.
fn check_duplicates(reports: &[Report], o: &MergeOptions) -> Result<(), MergeError> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, r) in reports.iter().enumerate() {
        for id in &r.run_ids {
            match seen.insert(id, i) {
                Some(j) if j != i => {
                    return Err(error(format!(
                        "{} and {} hold the same run (run id {id}): merged, its requests would count twice                          (one file given twice, a copy of it, or a merged report beside one of its runs?);                          --allow-duplicates merges them all the same",
                        o.name(j),
                        o.name(i)
                    )));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Refuses, for a wall-clock merge of two or more reports, one whose run
/// overlaps no other's in time. Spans are closed (`started_at` to
/// `started_at + duration_secs`): runs back to back overlap.
fn check_overlap(reports: &[Report], o: &MergeOptions) -> Result<(), MergeError> {
    if reports.len() < 2 {
        return Ok(());
    }
    let span = |r: &Report| {
        let length = Duration::try_from_secs_f64(r.duration_secs).unwrap_or_default();
        (
            r.started_at,
            r.started_at.checked_add(length).unwrap_or(r.started_at),
        )
    };
    let spans: Vec<(SystemTime, SystemTime)> = reports.iter().map(span).collect();
    // How far apart two spans are (zero when they overlap).
    let gap = |a: (SystemTime, SystemTime), b: (SystemTime, SystemTime)| {
        b.0.duration_since(a.1)
            .or_else(|_| a.0.duration_since(b.1))
            .unwrap_or_default()
    };
    for (i, &a) in spans.iter().enumerate() {
        let others = spans.iter().enumerate().filter(|&(j, _)| j != i);
        let Some((j, apart)) = others.map(|(j, &b)| (j, gap(a, b))).min_by_key(|&(_, d)| d) else {
            continue;
        };
        if !apart.is_zero() {
            return Err(error(format!(
                "{} (from {} for {} s) overlaps no other report in time: the nearest, {}, is {} s away;                  merged by wall clock, the throughput would count the time between them.                  --align offset lines the runs up by their starts; --allow-disjoint merges them as they are",
                o.name(i),
                httpdate::fmt_http_date(a.0),
                sig3(reports[i].duration_secs),
                o.name(j),
                sig3(apart.as_secs_f64()),
            )));
        }
    }
    Ok(())
}

/// The sum of histograms (`None`s skipped) in a histogram of weft-load's
/// range.
fn add_all<'a>(
    hists: impl Iterator<Item = Option<&'a Histogram<u64>>>,
    what: &str,
    o: &MergeOptions,
) -> Result<Histogram<u64>, MergeError> {
    let mut sum = hdr::new_histogram();
    for (i, h) in hists.enumerate() {
        if let Some(h) = h {
            sum.add(h)
                .map_err(|e| error(format!("{}: {what}: {e:?}", o.name(i))))?;
        }
    }
    Ok(sum)
}

/// The counts, names and settings of the merged report (the histograms,
/// rates and series are filled in by [`merge`]).
fn totals(reports: &[Report]) -> Report {
    let first = &reports[0];
    let mut m = Report {
        runs: 0,
        concurrency: 0,
        requests: 0,
        successes: 0,
        failures: 0,
        handshakes: 0,
        body_bytes: 0,
        errors: Default::default(),
        status_counts: BTreeMap::new(),
        target_rate: Some(0.0),
        series: Vec::new(),
        run_ids: Vec::new(),
        ..first.clone()
    };
    for r in reports {
        m.runs += r.runs;
        m.concurrency += r.concurrency;
        m.requests += r.requests;
        m.successes += r.successes;
        m.failures += r.failures;
        m.handshakes += r.handshakes;
        m.body_bytes += r.body_bytes;
        m.run_ids.extend(r.run_ids.iter().cloned());
        m.errors.merge(&r.errors);
        for (k, v) in &r.status_counts {
            *m.status_counts.entry(*k).or_default() += v;
        }
        m.target_rate = m.target_rate.zip(r.target_rate).map(|(a, b)| a + b);
        if r.model != m.model {
            m.model = "mixed";
        }
    }
    let mut names: Vec<&str> = reports.iter().map(|r| r.name.as_str()).collect();
    names.dedup();
    m.name = names.join(" + ");
    m
}

/// The merged series: each run's intervals placed at `offset + start` on
/// the grid of `interval`; gaps inside the span are empty intervals.
fn merge_series(
    reports: &[Report],
    offsets: &[Duration],
    interval: Duration,
    max_intervals: usize,
) -> Result<Vec<Interval>, MergeError> {
    let mut cells: BTreeMap<u128, Vec<&Interval>> = BTreeMap::new();
    for (r, offset) in reports.iter().zip(offsets) {
        for iv in &r.series {
            let cell = (*offset + iv.start).as_nanos() / interval.as_nanos();
            cells.entry(cell).or_default().push(iv);
        }
    }
    let (Some(&lo), Some(&hi)) = (cells.keys().next(), cells.keys().next_back()) else {
        return Ok(Vec::new());
    };
    if hi - lo >= max_intervals as u128 {
        return Err(error(format!(
            "the aligned runs span {} intervals, more than the limit of {max_intervals} (--max-intervals); \
             did they run at the same time? (--align offset lines them up by start instead)",
            hi - lo + 1
        )));
    }
    let mut acc = hdr::new_histogram();
    let empty = hdr::encode(&acc);
    let mut out = Vec::new();
    for cell in lo..=hi {
        let start = u32::try_from(cell)
            .ok()
            .and_then(|c| interval.checked_mul(c))
            .ok_or_else(|| error("the runs span more intervals than can be counted"))?;
        let Some(parts) = cells.get(&cell) else {
            out.push(Interval {
                start,
                duration: interval,
                requests: 0,
                failures: 0,
                throughput: 0.0,
                latencies: 0,
                p50_ms: 0.0,
                p99_ms: 0.0,
                histogram: empty.clone(),
            });
            continue;
        };
        acc.reset();
        for (n, iv) in parts.iter().enumerate() {
            let h = hdr::decode(&iv.histogram, usize::MAX)
                .map_err(|e| error(format!("interval {cell}, part {}: {e}", n + 1)))?;
            acc.add(&h)
                .map_err(|e| error(format!("interval {cell}: {e:?}")))?;
        }
        let duration = parts.iter().map(|iv| iv.duration).max().unwrap_or(interval);
        let requests = parts.iter().map(|iv| iv.requests).sum();
        let failures = parts.iter().map(|iv| iv.failures).sum();
        let throughput = parts.iter().map(|iv| iv.throughput).sum();
        out.push(Interval::new(
            start, duration, requests, failures, throughput, &acc,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::testing::{report, spread};

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn merged_percentiles_are_those_of_all_the_samples() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let runs = [
            spread(1, 20_000, 10.0),
            spread(2, 5_000, 10.0),
            // A slow agent: its tail must show in the merged p99.
            spread(3, 3_000, 10.0)
                .into_iter()
                .map(|(t, us)| (t, us * 20))
                .collect(),
        ];
        let reports: Vec<Report> = runs
            .iter()
            .enumerate()
            .map(|(i, s)| report(&format!("agent {i}"), t0, SECOND, s))
            .collect();
        let merged = merge(&reports, &MergeOptions::default()).unwrap();

        let mut all: Vec<u64> = runs.iter().flatten().map(|s| s.1).collect();
        let mut union = hdr::new_histogram();
        for &us in &all {
            hdr::record(&mut union, us);
        }
        // The merged histogram is the histogram of all the samples:
        // every percentile is equal, not approximately equal.
        assert_eq!(merged.histogram, union);
        all.sort_unstable();
        for q in [0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999] {
            let v = merged.histogram.value_at_quantile(q);
            assert_eq!(v, union.value_at_quantile(q), "q {q}");
            // And it is the exact percentile of the samples to the
            // histogram's precision (same bucket: within 0.1 %).
            let exact = all[((q * all.len() as f64).ceil() as usize).max(1) - 1];
            assert!(union.equivalent(v, exact), "q {q}: {v} vs exact {exact}");
        }
        assert_eq!(merged.latency, summary(&union));
        assert_eq!(merged.requests, 28_000);
        assert_eq!(merged.successes, 28_000);
        assert_eq!(merged.status_counts[&200], 28_000);
        assert_eq!(merged.body_bytes, 5 * 28_000);
        assert_eq!(merged.concurrency, 12);
        assert_eq!(merged.runs, 3);
        assert_eq!(merged.name, "agent 0 + agent 1 + agent 2");
        // Each merged interval is the union of that second's samples.
        assert_eq!(merged.series.len(), 10);
        for (c, iv) in merged.series.iter().enumerate() {
            let mut h = hdr::new_histogram();
            for &(t, us) in runs.iter().flatten() {
                if t.as_secs() as usize == c {
                    hdr::record(&mut h, us);
                }
            }
            assert_eq!(iv.histogram().unwrap(), h, "interval {c}");
            assert_eq!(iv.requests, h.len());
            assert_eq!(iv.p99_ms, h.value_at_quantile(0.99) as f64 / 1e3);
            assert_eq!(iv.start, SECOND * c as u32);
        }
        // Through JSON, and merged again with itself (allowed): still
        // exact.
        let back = Report::from_json(&merged.to_json()).unwrap();
        assert_eq!(back.histogram, union);
        assert_eq!(back.run_ids.len(), 3);
        let allow = MergeOptions {
            allow_duplicates: true,
            ..MergeOptions::default()
        };
        let twice = merge(&[back.clone(), back], &allow).unwrap();
        assert_eq!(twice.histogram.len(), 2 * union.len());
        assert_eq!(twice.latency.p99_ms, merged.latency.p99_ms);
        assert_eq!(twice.runs, 6);
    }

    #[test]
    fn merge_is_associative_in_the_totals() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let r: Vec<Report> = (0..4)
            .map(|i| {
                report(
                    "a",
                    t0,
                    SECOND,
                    &spread(10 + i, 1000 + 500 * i as usize, 5.0),
                )
            })
            .collect();
        let o = MergeOptions::default();
        let all = merge(&r, &o).unwrap();
        let ab = merge(&r[..2], &o).unwrap();
        let cd = merge(&r[2..], &o).unwrap();
        let nested = merge(&[ab, cd], &o).unwrap();
        assert_eq!(nested.histogram, all.histogram);
        assert_eq!(nested.requests, all.requests);
        assert_eq!(nested.series.len(), all.series.len());
        for (a, b) in nested.series.iter().zip(&all.series) {
            assert_eq!(a.histogram().unwrap(), b.histogram().unwrap());
            assert!((a.throughput - b.throughput).abs() < 1e-6);
        }
        assert_eq!(all.name, "a");
    }

    #[test]
    fn wall_clock_and_offset_alignment() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let a = report("a", t0, SECOND, &spread(1, 300, 3.0));
        // b starts 2.5 s after a, and runs 3 s.
        let b = report(
            "b",
            t0 + Duration::from_millis(2500),
            SECOND,
            &spread(2, 600, 3.0),
        );
        let wall = merge(&[a.clone(), b.clone()], &MergeOptions::default()).unwrap();
        // a: cells 0, 1, 2; b: 2.5 + 0/1/2 s → cells 2, 3, 4.
        let req: Vec<u64> = wall.series.iter().map(|i| i.requests).collect();
        assert_eq!(req, [100, 100, 300, 200, 200]);
        assert_eq!(wall.started_at, t0);
        assert!((wall.duration_secs - 5.5).abs() < 1e-9);
        assert!((wall.throughput - 900.0 / 5.5).abs() < 1e-9);
        // Rates add where the runs overlap.
        assert!((wall.series[2].throughput - 300.0).abs() < 1e-9);

        let offset = merge(
            &[a, b],
            &MergeOptions {
                align: Align::Offset,
                ..MergeOptions::default()
            },
        )
        .unwrap();
        let req: Vec<u64> = offset.series.iter().map(|i| i.requests).collect();
        assert_eq!(req, [300, 300, 300]);
        assert!((offset.duration_secs - 3.0).abs() < 1e-9);

        // Runs a day apart: refused under a small limit, with the cure.
        let c = report(
            "c",
            t0 + Duration::from_secs(86_400),
            SECOND,
            &spread(3, 10, 1.0),
        );
        let wall_far = merge(
            &[wall.clone(), c],
            &MergeOptions {
                max_intervals: 1000,
                allow_disjoint: true,
                ..MergeOptions::default()
            },
        );
        assert!(wall_far.unwrap_err().to_string().contains("--align offset"));
    }

    #[test]
    fn bad_merges_are_errors() {
        let t0 = SystemTime::UNIX_EPOCH;
        assert!(
            merge(&[], &MergeOptions::default())
                .unwrap_err()
                .to_string()
                .contains("nothing to merge")
        );
        let a = report("a", t0, SECOND, &spread(1, 10, 1.0));
        let b = report("b", t0, Duration::from_millis(500), &spread(1, 10, 1.0));
        let err = merge(&[a, b], &named(&["a.json", "b.json"])).unwrap_err();
        assert!(err.to_string().contains("--interval"), "{err}");
        // The reports by their names, not their places.
        assert!(
            err.to_string().contains("a.json: 1000 ms, b.json: 500 ms"),
            "{err}"
        );
    }

    fn named(names: &[&str]) -> MergeOptions {
        MergeOptions {
            names: names.iter().map(|&n| n.to_owned()).collect(),
            ..MergeOptions::default()
        }
    }

    #[test]
    fn a_run_merged_twice_is_refused() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let a = report("a", t0, SECOND, &spread(1, 100, 2.0));
        let b = report("b", t0, SECOND, &spread(2, 100, 2.0));
        let o = named(&["a.json", "b.json", "c.json"]);
        // One report given twice.
        let err = merge(&[a.clone(), b.clone(), a.clone()], &o).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("a.json and c.json hold the same run"),
            "{text}"
        );
        assert!(text.contains("--allow-duplicates"), "{text}");
        // A merged report beside one of its runs.
        let ab = merge(&[a.clone(), b.clone()], &o).unwrap();
        let err = merge(&[ab.clone(), b.clone()], &o).unwrap_err();
        assert!(
            err.to_string()
                .contains("a.json and b.json hold the same run"),
            "{err}"
        );
        // A copy read back from JSON is the same run too.
        let copy = Report::from_json(&a.to_json()).unwrap();
        assert!(merge(&[a.clone(), copy], &o).is_err());
        // Allowed, it counts twice.
        let allow = MergeOptions {
            allow_duplicates: true,
            ..o
        };
        assert_eq!(merge(&[a.clone(), a], &allow).unwrap().requests, 200);
    }

    #[test]
    fn runs_that_never_overlapped_are_refused_by_wall_clock() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // a and b overlap; c starts an hour after they ended.
        let a = report("a", t0, SECOND, &spread(1, 100, 2.0));
        let b = report("b", t0 + SECOND, SECOND, &spread(2, 100, 2.0));
        let c = report(
            "c",
            t0 + Duration::from_secs(3603),
            SECOND,
            &spread(3, 100, 2.0),
        );
        let o = named(&["a.json", "b.json", "c.json"]);
        assert!(merge(&[a.clone(), b.clone()], &o).is_ok());
        // Back to back (a ends as d starts): they overlap.
        let d = report("d", t0 + 2 * SECOND, SECOND, &spread(2, 100, 2.0));
        assert!(merge(&[a.clone(), d], &o).is_ok());
        let err = merge(&[a.clone(), b.clone(), c.clone()], &o).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("c.json (from "), "{text}");
        assert!(
            text.contains("overlaps no other report in time: the nearest, b.json, is 3600 s away"),
            "{text}"
        );
        assert!(
            text.contains("--allow-disjoint") && text.contains("--align offset"),
            "{text}"
        );
        // By offset, or allowed: merged.
        let offset = MergeOptions {
            align: Align::Offset,
            ..o.clone()
        };
        assert_eq!(
            merge(&[a.clone(), b.clone(), c.clone()], &offset)
                .unwrap()
                .requests,
            300
        );
        let allow = MergeOptions {
            allow_disjoint: true,
            ..o
        };
        assert_eq!(merge(&[a, b, c], &allow).unwrap().requests, 300);
    }
}
