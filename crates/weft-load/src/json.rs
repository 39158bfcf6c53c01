//! The JSON report: its schema (versioned), writing and reading it.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::hdr::{self, DEFAULT_MAX_HISTOGRAM_BYTES};
use crate::series::{Interval, quantile_ms};
use crate::{Errors, Latency, Report, summary};

/// The `format` field of a JSON report.
pub const FORMAT: &str = "weft-load-report";

/// The schema version this weft-load writes and reads (the `version`
/// field). Version 1 is the first with histograms; reports of earlier
/// weft-loads have no `version` and cannot be merged.
pub const VERSION: u32 = 1;

/// A report as it is written (see the crate docs, "JSON report").
#[derive(Serialize, Deserialize)]
pub(crate) struct ReportJson {
    format: String,
    version: u32,
    name: String,
    model: String,
    runs: usize,
    concurrency: usize,
    requests: u64,
    successes: u64,
    failures: u64,
    duration_secs: f64,
    throughput: f64,
    failures_per_sec: f64,
    target_rate: Option<f64>,
    latency: Latency,
    handshake: Option<Latency>,
    handshakes: u64,
    errors: Errors,
    status_counts: BTreeMap<u16, u64>,
    body_bytes: u64,
    started_at_unix_ms: u64,
    interval_ms: u64,
    histogram: String,
    handshake_histogram: Option<String>,
    /// Absent in reports of weft-loads before it: derived from the content.
    #[serde(default)]
    run_ids: Vec<String>,
    series: Vec<IntervalJson>,
}

#[derive(Serialize, Deserialize)]
struct IntervalJson {
    start_ms: u64,
    duration_ms: f64,
    requests: u64,
    failures: u64,
    throughput: f64,
    p50_ms: f64,
    p99_ms: f64,
    histogram: String,
}

impl ReportJson {
    pub(crate) fn of(r: &Report) -> ReportJson {
        ReportJson {
            format: FORMAT.into(),
            version: VERSION,
            name: r.name.clone(),
            model: r.model.into(),
            runs: r.runs,
            concurrency: r.concurrency,
            requests: r.requests,
            successes: r.successes,
            failures: r.failures,
            duration_secs: r.duration_secs,
            throughput: r.throughput,
            failures_per_sec: r.failures_per_sec,
            target_rate: r.target_rate,
            latency: r.latency.clone(),
            handshake: r.handshake.clone(),
            handshakes: r.handshakes,
            errors: r.errors.clone(),
            status_counts: r.status_counts.clone(),
            body_bytes: r.body_bytes,
            started_at_unix_ms: r
                .started_at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            interval_ms: r.interval.as_millis() as u64,
            histogram: hdr::encode(&r.histogram),
            handshake_histogram: r.handshake_histogram.as_ref().map(hdr::encode),
            run_ids: r.run_ids.clone(),
            series: r
                .series
                .iter()
                .map(|i| IntervalJson {
                    start_ms: i.start.as_millis() as u64,
                    duration_ms: i.duration.as_secs_f64() * 1e3,
                    requests: i.requests,
                    failures: i.failures,
                    throughput: i.throughput,
                    p50_ms: i.p50_ms,
                    p99_ms: i.p99_ms,
                    histogram: i.histogram.clone(),
                })
                .collect(),
        }
    }
}

/// Why a JSON report could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    message: String,
}

impl ParseError {
    fn new(message: impl Into<String>) -> ParseError {
        ParseError {
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ParseError {}

impl Report {
    /// The report as JSON (schema in the crate docs, "JSON report"):
    /// the totals, the latency histogram and the per-interval series, each
    /// with its histogram.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&ReportJson::of(self))
            .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Reads a report that [`to_json`](Report::to_json) wrote (by this or
    /// another weft-load of the same schema version), checking every
    /// histogram; histograms larger than 16 MiB decompressed are refused.
    ///
    /// # Errors
    ///
    /// A [`ParseError`] saying what is wrong and where: not JSON, not a
    /// weft-load report, another schema version, a field of the wrong
    /// type (with its path), a corrupt histogram, a series that does not
    /// add up to the totals.
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_load::Report;
    ///
    /// let err = Report::from_json(r#"{"format": "weft-load-report", "version": 99}"#).unwrap_err();
    /// assert!(err.to_string().contains("version 99"), "{err}");
    /// assert!(Report::from_json("[1, 2").is_err());
    /// ```
    pub fn from_json(text: &str) -> Result<Report, ParseError> {
        Report::from_json_with_limit(text, DEFAULT_MAX_HISTOGRAM_BYTES)
    }

    /// [`from_json`](Report::from_json) with another limit on the size of
    /// a decompressed histogram.
    ///
    /// # Errors
    ///
    /// As [`from_json`](Report::from_json).
    pub fn from_json_with_limit(
        text: &str,
        max_histogram_bytes: usize,
    ) -> Result<Report, ParseError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ParseError::new(format!("not JSON: {e}")))?;
        check_version(&value)?;
        let j: ReportJson = serde_path_to_error::deserialize(value)
            .map_err(|e| ParseError::new(format!("at {}: {}", e.path(), e.inner())))?;
        j.into_report(max_histogram_bytes)
    }
}

fn check_version(v: &serde_json::Value) -> Result<(), ParseError> {
    if !v.is_object() {
        return Err(ParseError::new(
            "not a weft-load report (not a JSON object)",
        ));
    }
    match v.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(ParseError::new(format!(
                "not a weft-load report (format {other:?}, expected {FORMAT:?})"
            )));
        }
        None if v.get("requests").is_some() => {
            return Err(ParseError::new(
                "a weft-load report without a schema version (written before reports carried histograms): run it again with this weft-load",
            ));
        }
        None => {
            return Err(ParseError::new(
                "not a weft-load report (no \"format\" field)",
            ));
        }
    }
    match v.get("version").and_then(|n| n.as_u64()) {
        Some(n) if n == u64::from(VERSION) => Ok(()),
        Some(n) => Err(ParseError::new(format!(
            "report schema version {n} is not supported: this weft-load reads version {VERSION}"
        ))),
        None => Err(ParseError::new("no schema \"version\" number")),
    }
}

impl ReportJson {
    fn into_report(self, max: usize) -> Result<Report, ParseError> {
        let decode = |what: &str, text: &str| {
            hdr::decode(text, max).map_err(|e| ParseError::new(format!("{what}: {e}")))
        };
        let histogram = decode("histogram", &self.histogram)?;
        let handshake_histogram = match &self.handshake_histogram {
            Some(h) => Some(decode("handshake_histogram", h)?),
            None => None,
        };
        if self.interval_ms == 0 {
            return Err(ParseError::new("interval_ms: must be greater than zero"));
        }
        let model = match self.model.as_str() {
            "closed" => "closed",
            "open" => "open",
            "mixed" => "mixed",
            m => {
                return Err(ParseError::new(format!(
                    "model: {m:?} is not closed, open or mixed"
                )));
            }
        };
        let mut series = Vec::with_capacity(self.series.len());
        let mut answered = 0u64;
        for (n, i) in self.series.into_iter().enumerate() {
            let h = decode(&format!("series[{n}].histogram"), &i.histogram)?;
            answered = answered.saturating_add(h.len());
            let duration = Duration::try_from_secs_f64(i.duration_ms / 1e3)
                .ok()
                .filter(|_| i.throughput.is_finite())
                .ok_or_else(|| {
                    ParseError::new(format!(
                        "series[{n}]: duration_ms must be a duration and throughput finite"
                    ))
                })?;
            series.push(Interval {
                start: Duration::from_millis(i.start_ms),
                duration,
                requests: i.requests,
                failures: i.failures,
                throughput: i.throughput,
                latencies: h.len(),
                p50_ms: quantile_ms(&h, 0.5),
                p99_ms: quantile_ms(&h, 0.99),
                histogram: i.histogram,
            });
        }
        if !series.is_empty() && answered != histogram.len() {
            return Err(ParseError::new(format!(
                "the series' histograms hold {answered} latencies, the report's histogram {}: the file is inconsistent",
                histogram.len()
            )));
        }
        if !self.duration_secs.is_finite() || self.duration_secs < 0.0 {
            return Err(ParseError::new(
                "duration_secs: must be finite and not negative",
            ));
        }
        let run_ids = if self.run_ids.is_empty() {
            // One run, named by what identifies it: when it started, what
            // it counted and measured.
            let key = (self.started_at_unix_ms, self.requests, &self.histogram);
            vec![format!(
                "content-{:016x}",
                BuildHasherDefault::<DefaultHasher>::default().hash_one(key)
            )]
        } else {
            self.run_ids
        };
        let started_at = SystemTime::UNIX_EPOCH
            .checked_add(Duration::from_millis(self.started_at_unix_ms))
            .ok_or_else(|| ParseError::new("started_at_unix_ms: out of range"))?;
        Ok(Report {
            name: self.name,
            model,
            concurrency: self.concurrency,
            requests: self.requests,
            successes: self.successes,
            failures: self.failures,
            duration_secs: self.duration_secs,
            throughput: self.throughput,
            failures_per_sec: self.failures_per_sec,
            target_rate: self.target_rate,
            latency: summary(&histogram),
            handshake: handshake_histogram.as_ref().map(summary),
            handshakes: self.handshakes,
            errors: self.errors,
            status_counts: self.status_counts,
            body_bytes: self.body_bytes,
            histogram,
            handshake_histogram,
            started_at,
            interval: Duration::from_millis(self.interval_ms),
            series,
            run_ids,
            runs: self.runs.max(1),
        })
    }
}
