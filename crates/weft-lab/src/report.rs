//! Report rows, the console table and `results.json`.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::experiments::{Experiment, Options};

/// Which kind of threads served a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// OS threads (a fixed pool).
    Platform,
    /// weft virtual threads.
    Virtual,
}

/// Latency summary of the requests (or tasks) of one row, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Mean.
    pub avg_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub max_ms: f64,
}

impl Latency {
    /// Summarizes latencies given in microseconds (`None` when empty).
    pub fn from_micros(values: &mut [u64]) -> Option<Latency> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let n = values.len();
        let at = |q: f64| values[((q * n as f64).ceil() as usize).clamp(1, n) - 1] as f64 / 1e3;
        Some(Latency {
            avg_ms: values.iter().map(|&v| v as f64).sum::<f64>() / n as f64 / 1e3,
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            max_ms: values[n - 1] as f64 / 1e3,
        })
    }
}

/// One measured configuration of an experiment.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Experiment id, e.g. `"E2"`.
    pub experiment: &'static str,
    /// Platform or virtual.
    pub mode: Mode,
    /// What ran, e.g. `"platform, 1 OS worker thread"`.
    pub label: String,
    /// Short name for charts, e.g. `"platform 1"`.
    pub short: String,
    /// Concurrent users (E1: tasks).
    pub users: u64,
    /// Requests (tasks) completed inside the measured window.
    pub requests: u64,
    /// Length of the measured window, milliseconds.
    pub measured_ms: f64,
    /// Completed requests per second.
    pub rps: Option<f64>,
    /// Latency of completed requests (E1: time from submission to the end
    /// of each task).
    pub latency: Option<Latency>,
    /// Failed requests inside the window.
    pub errors: u64,
    /// Little's law: concurrency / service time, in requests per second.
    pub ideal_rps: Option<f64>,
    /// The latency a request would have with no queueing, milliseconds.
    pub ideal_ms: Option<f64>,
    /// `rps / ideal_rps * 100`.
    pub pct_of_ideal: Option<f64>,
    /// The article's figure for this configuration.
    pub article: Option<&'static str>,
    /// Remarks: what was scaled down, what was cut off, runtime events.
    pub notes: Vec<String>,
    /// Why the measurement failed, if it did.
    pub error: Option<String>,
}

impl Row {
    /// A row with nothing measured yet.
    pub fn new(experiment: &'static str, mode: Mode, label: impl Into<String>) -> Row {
        let label = label.into();
        Row {
            experiment,
            mode,
            short: label.clone(),
            label,
            users: 0,
            requests: 0,
            measured_ms: 0.0,
            rps: None,
            latency: None,
            errors: 0,
            ideal_rps: None,
            ideal_ms: None,
            pct_of_ideal: None,
            article: None,
            notes: Vec::new(),
            error: None,
        }
    }

    /// Sets the short chart label.
    pub fn short(mut self, short: impl Into<String>) -> Row {
        self.short = short.into();
        self
    }

    /// Sets the users (concurrency) column.
    pub fn users(mut self, users: u64) -> Row {
        self.users = users;
        self
    }

    /// Sets the Little's-law ideals (throughput and unqueued latency).
    pub fn ideal(mut self, rps: f64, latency_ms: f64) -> Row {
        self.ideal_rps = Some(rps);
        self.ideal_ms = Some(latency_ms);
        self
    }

    /// Sets the article's figure.
    pub fn article(mut self, article: &'static str) -> Row {
        self.article = Some(article);
        self
    }

    /// Adds a remark.
    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.notes.push(note.into());
        self
    }

    /// Fills in a measurement: `latencies_us` of the completed requests,
    /// `errors`, and the window they were measured in.
    pub fn measured(mut self, mut latencies_us: Vec<u64>, errors: u64, window: Duration) -> Row {
        self.requests = latencies_us.len() as u64;
        self.errors = errors;
        self.measured_ms = window.as_secs_f64() * 1e3;
        let rps = self.requests as f64 / window.as_secs_f64().max(1e-9);
        self.rps = Some(rps);
        self.latency = Latency::from_micros(&mut latencies_us);
        self.pct_of_ideal = self.ideal_rps.map(|ideal| rps / ideal * 100.0);
        self
    }

    /// Records a failure.
    pub fn failed(mut self, error: impl Into<String>) -> Row {
        self.error = Some(error.into());
        self
    }
}

/// Formats an integer with `,` thousands separators: `100000` → `100,000`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Formats a figure compactly: thousands separators from 100 up, one
/// decimal below, two below 10.
pub fn figure(v: f64) -> String {
    if v >= 100.0 {
        thousands(v.round() as u64)
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The table columns.
pub const HEADER: [&str; 11] = [
    "mode",
    "users",
    "req/s",
    "avg ms",
    "median",
    "p99",
    "max",
    "errors",
    "ideal req/s",
    "% ideal",
    "article",
];

/// The cells of `row`, in [`HEADER`] order.
pub fn cells(row: &Row) -> [String; 11] {
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), figure);
    let lat = row.latency;
    [
        row.label.clone(),
        thousands(row.users),
        if row.error.is_some() {
            "FAILED".to_string()
        } else {
            opt(row.rps)
        },
        opt(lat.map(|l| l.avg_ms)),
        opt(lat.map(|l| l.p50_ms)),
        opt(lat.map(|l| l.p99_ms)),
        opt(lat.map(|l| l.max_ms)),
        thousands(row.errors),
        opt(row.ideal_rps),
        row.pct_of_ideal
            .map_or_else(|| "-".to_string(), |p| format!("{p:.1}%")),
        row.article.unwrap_or("-").to_string(),
    ]
}

/// Renders `rows` (one experiment) as an aligned text table.
pub fn table(rows: &[Row]) -> String {
    let right = [
        false, true, true, true, true, true, true, true, true, true, false,
    ];
    let lines: Vec<[String; 11]> = rows.iter().map(cells).collect();
    let mut widths = HEADER.map(str::len);
    for line in &lines {
        for (w, c) in widths.iter_mut().zip(line) {
            *w = (*w).max(c.chars().count());
        }
    }
    let render = |line: &[String]| {
        let parts: Vec<String> = line
            .iter()
            .zip(widths.iter().zip(right))
            .map(|(c, (&w, r))| {
                if r {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = render(&HEADER.map(String::from));
    out += &(widths.map(|w| "-".repeat(w)).join("  ") + "\n");
    for line in &lines {
        out += &render(line);
    }
    for row in rows {
        if let Some(e) = &row.error {
            out += &format!("  {}: FAILED: {e}\n", row.label);
        }
        for n in &row.notes {
            out += &format!("  {}: {n}\n", row.label);
        }
    }
    out
}

/// The machine the report was measured on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// `std::env::consts::OS`.
    pub os: &'static str,
    /// `std::env::consts::ARCH`.
    pub arch: &'static str,
    /// Kernel release, where readable.
    pub kernel: Option<String>,
    /// `std::thread::available_parallelism()`.
    pub cores: usize,
}

impl Machine {
    /// This machine.
    pub fn this() -> Machine {
        Machine {
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|s| s.trim().to_string()),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// The results of one experiment.
#[derive(Clone, Debug, Serialize)]
pub struct ExperimentResult {
    /// Which experiment.
    pub experiment: Experiment,
    /// Its one-line description.
    pub title: &'static str,
    /// Whether it was skipped (and why).
    pub skipped: Option<String>,
    /// The measured rows.
    pub rows: Vec<Row>,
    /// Wall time of the experiment, seconds.
    pub seconds: f64,
}

/// The whole report, as written to `results.json`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always `"weft-lab"`.
    pub tool: &'static str,
    /// Version of `weft-lab`.
    pub version: &'static str,
    /// Seconds since the Unix epoch when the report was written.
    pub unix_time: u64,
    /// The command line that produced it.
    pub command: Vec<String>,
    /// Where it ran.
    pub machine: Machine,
    /// With which options.
    pub options: Options,
    /// One entry per experiment run.
    pub experiments: Vec<ExperimentResult>,
    /// Wall time of the whole run, seconds.
    pub total_seconds: f64,
}

impl Report {
    /// Assembles a report, stamped with the current time and machine.
    pub fn new(options: &Options, experiments: Vec<ExperimentResult>, total: Duration) -> Report {
        Report {
            tool: "weft-lab",
            version: env!("CARGO_PKG_VERSION"),
            unix_time: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            command: std::env::args().collect(),
            machine: Machine::this(),
            options: options.clone(),
            experiments,
            total_seconds: total.as_secs_f64(),
        }
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Writes the report as JSON to `path`, creating parent directories.
    pub fn write_json(&self, path: &Path) -> io::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, self.to_json() + "\n")
    }
}

/// `<target dir>/weft-lab`: the target directory this binary was built
/// into (found from its own path and Cargo's `CACHEDIR.TAG`), else
/// `./target/weft-lab`.
pub fn default_output_dir() -> PathBuf {
    let exe = std::env::current_exe().ok();
    let target = exe
        .as_deref()
        .into_iter()
        .flat_map(Path::ancestors)
        .skip(1)
        .take(3)
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("weft-lab")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_summary() {
        let mut v: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let l = Latency::from_micros(&mut v).unwrap();
        assert_eq!(l.p50_ms, 50.0);
        assert_eq!(l.p99_ms, 99.0);
        assert_eq!(l.max_ms, 100.0);
        assert_eq!(l.avg_ms, 50.5);
        assert!(Latency::from_micros(&mut []).is_none());
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }

    #[test]
    fn row_percent_of_ideal() {
        let row = Row::new("E2", Mode::Virtual, "virtual")
            .ideal(100.0, 1000.0)
            .measured(vec![1_000_000; 50], 0, Duration::from_secs(1));
        assert_eq!(row.rps, Some(50.0));
        assert_eq!(row.pct_of_ideal, Some(50.0));
        assert!(table(&[row]).contains("50.0%"));
    }
}
