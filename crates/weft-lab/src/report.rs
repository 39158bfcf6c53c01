//! Report rows, the summary, the console table, `results.json` and the
//! markdown page `docs/lab.md`.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
pub use weft_bench_support::format::thousands;
use weft_bench_support::table::Table;

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

fn table_of(rows: &[Row]) -> Table {
    let mut table = Table::new(HEADER).right(1..10);
    for row in rows {
        table.row(cells(row));
    }
    table
}

fn notes(rows: &[Row], bullet: &str) -> String {
    let mut out = String::new();
    for row in rows {
        if let Some(e) = &row.error {
            let _ = writeln!(out, "{bullet}{}: FAILED: {e}", row.label);
        }
        for n in &row.notes {
            let _ = writeln!(out, "{bullet}{}: {n}", row.label);
        }
    }
    out
}

/// Renders `rows` (one experiment) as an aligned text table, with the
/// rows' failures and notes under it.
pub fn table(rows: &[Row]) -> String {
    table_of(rows).text() + &notes(rows, "  ")
}

/// `r` as a ratio: `100×`, `8.0×`, `0.35×`.
fn times(r: f64) -> String {
    if r >= 10.0 {
        format!("{}×", thousands(r.round() as u64))
    } else {
        format!("{r:.2}×")
    }
}

/// One line that says what an experiment found: each virtual row's
/// throughput as a multiple of the platform row it is compared with (the
/// platform row in the same position, or the last one), with the verdict
/// in a word — e.g. `E2  faster: virtual 1 carrier 100× platform 1 (100
/// vs 1.00 req/s)`.
pub fn summary_line(e: &ExperimentResult) -> String {
    let id = e.experiment.id();
    if let Some(why) = &e.skipped {
        return format!("{id}  skipped: {why}");
    }
    let measured = |mode: Mode| -> Vec<(&Row, f64)> {
        e.rows
            .iter()
            .filter(|r| r.mode == mode && r.error.is_none())
            .filter_map(|r| r.rps.filter(|v| v.is_finite()).map(|v| (r, v)))
            .collect()
    };
    let (platform, virt) = (measured(Mode::Platform), measured(Mode::Virtual));
    let failed = e.rows.iter().filter(|r| r.error.is_some()).count();
    let failed = match failed {
        0 => String::new(),
        n => format!(" ({n} row(s) FAILED)"),
    };
    if platform.is_empty() || virt.is_empty() {
        return format!("{id}  no platform/virtual pair measured{failed}");
    }
    let parts: Vec<String> = virt
        .iter()
        .enumerate()
        .map(|(i, &(v, v_rps))| {
            let (p, p_rps) = platform[i.min(platform.len() - 1)];
            let (verdict, ratio) = if p_rps > 0.0 {
                let r = v_rps / p_rps;
                let verdict = if r >= 1.1 {
                    "faster"
                } else if r <= 0.9 {
                    "SLOWER"
                } else {
                    "on par"
                };
                (verdict, times(r))
            } else if v_rps > 0.0 {
                ("faster", "∞×".to_string())
            } else {
                ("on par", "–".to_string())
            };
            let failures = match v.errors {
                0 => String::new(),
                n => format!(", {} failed", thousands(n)),
            };
            format!(
                "{verdict}: {} {ratio} {} ({} vs {} req/s{failures})",
                v.short,
                p.short,
                figure(v_rps),
                figure(p_rps)
            )
        })
        .collect();
    format!("{id}  {}{failed}", parts.join("; "))
}

/// A UTC date and time, `2026-11-22 21:30 UTC`, from Unix seconds.
pub fn utc(unix: u64) -> String {
    // Days to civil date: Howard Hinnant's `civil_from_days`.
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60
    )
}

/// The markdown page (`docs/lab.md`): how it was made, the summary, then a
/// table per experiment.
pub fn markdown(report: &Report) -> String {
    let mut out = String::from("# The lab's results (weft-lab)\n\n");
    let _ = writeln!(
        out,
        "Generated by `{}` on {} ({} {}, {} cores, kernel {}); the run took {:.0} s. \
         `cargo run --release` rewrites this file; the same run writes \
         `target/weft-lab/report.html` (a chart per experiment) and \
         `target/weft-lab/results.json`. Ideal = Little's law (concurrency / \
         service time; platform rows: their pool's limit); \"article\" is the figure \
         the original article reported. One run: on a shared machine the \
         figures move between runs, so compare rows within this page.\n",
        report.command_line(),
        utc(report.unix_time),
        report.machine.os,
        report.machine.arch,
        report.machine.cores,
        report.machine.kernel.as_deref().unwrap_or("?"),
        report.total_seconds,
    );
    out.push_str("## Summary\n\n");
    for e in &report.experiments {
        let _ = writeln!(out, "- {}", summary_line(e));
    }
    for e in &report.experiments {
        let _ = writeln!(
            out,
            "\n## {} — {} ({:.1} s)\n",
            e.experiment.id(),
            e.title,
            e.seconds
        );
        match &e.skipped {
            Some(why) => {
                let _ = writeln!(out, "Skipped: {why}");
            }
            None => {
                out.push_str(&table_of(&e.rows).markdown());
                let n = notes(&e.rows, "- ");
                if !n.is_empty() {
                    out.push('\n');
                    out.push_str(&n);
                }
            }
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

    /// The command that reproduces it: `cargo run --release` with the
    /// arguments this run was given.
    pub fn command_line(&self) -> String {
        let args = self.command.get(1..).unwrap_or_default();
        if args.is_empty() {
            "cargo run --release".to_string()
        } else {
            format!("cargo run --release -- {}", args.join(" "))
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
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400 + 3_660), "2000-02-29 01:01 UTC");
        assert_eq!(utc(1_795_392_000), "2026-11-23 00:00 UTC");
    }

    fn result(experiment: Experiment, rows: Vec<Row>) -> ExperimentResult {
        ExperimentResult {
            experiment,
            title: experiment.title(),
            skipped: None,
            rows,
            seconds: 1.0,
        }
    }

    /// A row of `mode` that served `ok` requests and failed `failed` in one
    /// second.
    fn served(mode: Mode, short: &str, ok: usize, failed: u64) -> Row {
        Row::new("E", mode, short).short(short).measured(
            vec![1; ok],
            failed,
            Duration::from_secs(1),
        )
    }

    #[test]
    fn summary_lines_give_the_verdict_and_the_ratio() {
        use Mode::{Platform, Virtual};
        let e2 = result(
            Experiment::E2,
            vec![
                served(Platform, "platform 1", 1, 0),
                served(Virtual, "virtual 1 carrier", 100, 0),
            ],
        );
        assert_eq!(
            summary_line(&e2),
            "E2  faster: virtual 1 carrier 100× platform 1 (100 vs 1.00 req/s)"
        );
        let e7 = result(
            Experiment::E7,
            vec![
                served(Platform, "platform", 494, 0),
                served(Virtual, "std Mutex", 173, 0),
                served(Virtual, "weft Mutex", 493, 0),
                Row::new("E7", Virtual, "x").failed("boom"),
            ],
        );
        assert_eq!(
            summary_line(&e7),
            "E7  SLOWER: std Mutex 0.35× platform (173 vs 494 req/s); \
             on par: weft Mutex 1.00× platform (493 vs 494 req/s) (1 row(s) FAILED)"
        );
        // A row that served nothing is the strongest finding, not a gap.
        let deadlocked = result(
            Experiment::E7,
            vec![
                served(Platform, "platform", 495, 0),
                served(Virtual, "std Mutex", 0, 200),
            ],
        );
        assert_eq!(
            summary_line(&deadlocked),
            "E7  SLOWER: std Mutex 0.00× platform (0.00 vs 495 req/s, 200 failed)"
        );
        let mut skipped = result(Experiment::E5, Vec::new());
        skipped.skipped = Some("no PostgreSQL".into());
        assert_eq!(summary_line(&skipped), "E5  skipped: no PostgreSQL");
        let empty = result(Experiment::E6, Vec::new());
        assert_eq!(
            summary_line(&empty),
            "E6  no platform/virtual pair measured"
        );
    }

    #[test]
    fn markdown_page_opens_with_the_summary() {
        let e4 = result(
            Experiment::E4,
            vec![
                served(Mode::Platform, "platform 100", 100, 0).note("scaled down"),
                served(Mode::Virtual, "virtual", 800, 0),
            ],
        );
        let report = Report::new(&Options::default(), vec![e4], Duration::from_secs(1));
        let md = markdown(&report);
        let summary = md
            .find("## Summary\n\n- E4  faster: virtual 8.00× platform 100")
            .unwrap();
        let table = md.find("| mode | users | req/s |").unwrap();
        assert!(summary < table, "{md}");
        assert!(md.contains("- platform 100: scaled down"), "{md}");
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
