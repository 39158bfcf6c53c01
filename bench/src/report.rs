//! Results: medians, the text table, `report.md` (and the section of
//! `docs/bench.md`), `results.json`, and one SVG bar chart per workload —
//! with the medians, tables and charts of [`weft_bench_support`].

use std::fmt::Write as _;

use serde::Serialize;
use weft_bench_support::format::ratio;
pub use weft_bench_support::format::{kib as format_kib, thousands};
use weft_bench_support::stats::median;
use weft_bench_support::svg::{Bar, Panel, bar_chart};
use weft_bench_support::table::Table;

use crate::proc::Launcher;

/// What a workload's figure measures, and which way is better.
#[derive(Clone, Copy, Debug, Serialize)]
pub enum Unit {
    /// Nanoseconds per operation (lower is better).
    Ns,
    /// Milliseconds of wall time (lower is better).
    Ms,
    /// Operations per second (higher is better), with the unit's name.
    PerSec(&'static str),
    /// Resident memory per thread, KiB (lower is better).
    KiBPerThread,
    /// Resident memory per idle connection, KiB (lower is better).
    KiBPerConn,
}

impl Unit {
    /// Human formatting: `312 ns`, `1.24 µs`, `1,034 ms`, `30.2 M msg/s`.
    pub fn format(self, v: f64) -> String {
        match self {
            Unit::Ns if v >= 1e6 => format!("{:.2} ms", v / 1e6),
            Unit::Ns if v >= 1e3 => format!("{:.2} µs", v / 1e3),
            Unit::Ns => format!("{v:.0} ns"),
            Unit::Ms if v >= 10_000.0 => format!("{:.1} s", v / 1e3),
            Unit::Ms if v >= 100.0 => format!("{} ms", thousands(v.round() as u64)),
            Unit::Ms => format!("{v:.2} ms"),
            Unit::PerSec(u) if v >= 1e6 => format!("{:.2} M {u}", v / 1e6),
            Unit::PerSec(u) if v >= 1e3 => format!("{:.1} k {u}", v / 1e3),
            Unit::PerSec(u) => format!("{v:.0} {u}"),
            Unit::KiBPerThread | Unit::KiBPerConn if v >= 1024.0 => {
                format!("{:.2} MiB", v / 1024.0)
            }
            Unit::KiBPerThread | Unit::KiBPerConn => format!("{v:.2} KiB"),
        }
    }
}

/// One measured run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Run {
    /// The figure, in the workload's unit.
    pub value: f64,
    /// p99 latency (ms) for load workloads.
    pub p99_ms: Option<f64>,
    /// Peak RSS of the measured process (the server, for load workloads).
    pub rss_kib: u64,
    /// Failed operations (load workloads).
    pub errors: u64,
    /// HTTPS workloads: full TLS handshakes per second in a second window
    /// where every request opens a new connection.
    pub handshakes_per_sec: Option<f64>,
    /// HTTPS workloads: p99 of those handshakes (ms).
    pub handshake_p99_ms: Option<f64>,
    /// Workloads beside CPU-bound requests: the slowest one's response
    /// time (ms).
    pub slowest_ms: Option<f64>,
    /// Workloads beside CPU-bound requests: the rounds of the hash the
    /// least-served one computed (higher: the computation got more CPU).
    #[serde(default)]
    pub hog_rounds: Option<f64>,
    /// Parked-thread workloads: from the first spawn until the last thread
    /// had counted itself, right before it blocked (ms).
    pub parked_ms: Option<f64>,
}

/// One workload on one column.
#[derive(Debug, Serialize)]
pub struct Cell {
    /// Column id.
    pub column: String,
    /// Worker arguments.
    pub args: Vec<u64>,
    /// Every run, in order.
    pub runs: Vec<Run>,
    /// Why this cell was not run.
    pub skipped: Option<String>,
    /// The error that stopped it.
    pub error: Option<String>,
}

impl Cell {
    fn metric(&self, m: Metric) -> Option<f64> {
        if self.error.is_some() {
            return None;
        }
        let v: Vec<f64> = self
            .runs
            .iter()
            .filter_map(|r| match m {
                Metric::Value => Some(r.value),
                Metric::P99 => r.p99_ms,
                Metric::Rss => Some(r.rss_kib as f64),
                Metric::Handshakes => r.handshakes_per_sec,
                Metric::HandshakeP99 => r.handshake_p99_ms,
                Metric::Slowest => r.slowest_ms,
                Metric::HogWork => r.hog_rounds,
                Metric::Parked => r.parked_ms,
            })
            .collect();
        median(&v)
    }

    fn errors(&self) -> u64 {
        self.runs.iter().map(|r| r.errors).sum()
    }

    /// Why there is no figure, in a word or two.
    fn absent(&self) -> String {
        if self.error.is_some() {
            "failed".into()
        } else if self.skipped.as_deref() == Some("column skipped") {
            "–".into()
        } else {
            "n/a".into()
        }
    }
}

/// A column as it is reported.
#[derive(Clone, Debug, Serialize)]
pub struct ColumnSummary {
    /// Short id (`weft`, `go`, …).
    pub id: String,
    /// Heading.
    pub label: String,
    /// Toolchain version line.
    pub version: String,
    /// Why the column did not run.
    pub skipped: Option<String>,
}

/// A column while the suite runs.
pub struct Column {
    /// Short id.
    pub id: String,
    /// Heading.
    pub label: String,
    /// Toolchain version line.
    pub version: String,
    /// Why it is skipped.
    pub skipped: Option<String>,
    /// How to start its workers (none when skipped).
    pub launcher: Option<Launcher>,
}

impl Column {
    /// The reported part.
    pub fn summary(&self) -> ColumnSummary {
        ColumnSummary {
            id: self.id.clone(),
            label: self.label.clone(),
            version: self.version.clone(),
            skipped: self.skipped.clone(),
        }
    }
}

/// One workload's results.
#[derive(Debug, Serialize)]
pub struct WorkloadResult {
    /// Id (`spawn`, `echo-10k`, …).
    pub id: String,
    /// Row title.
    pub title: String,
    /// What one run measures.
    pub what: String,
    /// Unit of the main figure.
    pub unit: Unit,
    /// The theoretical figure, where one exists.
    pub ideal: Option<f64>,
    /// The theoretical p99, where one exists.
    pub ideal_p99_ms: Option<f64>,
    /// Whether peak RSS gets its own row.
    pub rss_row: bool,
    /// One cell per column.
    pub cells: Vec<Cell>,
}

/// The machine the suite ran on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// Memory in GiB.
    pub mem_gib: f64,
    /// Kernel release.
    pub kernel: String,
    /// `rustc -V`.
    pub rustc: String,
    /// 1-minute load average at the start and at the end.
    pub load_start: f64,
    /// See `load_start`.
    pub load_end: f64,
    /// UTC date of the run (`date -u`).
    pub date: String,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn loadavg() -> f64 {
    read("/proc/loadavg")
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

impl Machine {
    /// Reads /proc and the toolchain at the start of a run.
    pub fn probe() -> Machine {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .unwrap_or("unknown CPU")
            .trim()
            .to_string();
        let mem_kib: f64 = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.0);
        let rustc = std::process::Command::new("rustc")
            .arg("-V")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let date = std::process::Command::new("date")
            .args(["-u", "+%Y-%m-%d %H:%M UTC"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        Machine {
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            mem_gib: mem_kib / (1024.0 * 1024.0),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            rustc,
            load_start: loadavg(),
            load_end: f64::NAN,
            date,
        }
    }

    /// Records the end-of-run load average.
    pub fn finish(mut self) -> Machine {
        self.load_end = loadavg();
        self
    }

    /// One line: CPUs, memory, kernel, load averages, date.
    pub fn describe(&self) -> String {
        format!(
            "{} × {}, {:.0} GiB, Linux {}; load average {:.1} at start, {:.1} at end",
            self.cpus, self.cpu, self.mem_gib, self.kernel, self.load_start, self.load_end
        )
    }
}

/// Everything one suite run produced (serialized as `results.json`).
#[derive(Debug, Serialize)]
pub struct Report {
    /// The command that reproduces it.
    pub command: String,
    /// The exact command line.
    pub invoked_as: String,
    /// `--quick`?
    pub quick: bool,
    /// Where it ran.
    pub machine: Machine,
    /// Wall time of the whole suite, seconds.
    pub duration_secs: f64,
    /// The columns.
    pub columns: Vec<ColumnSummary>,
    /// The workloads.
    pub workloads: Vec<WorkloadResult>,
}

/// Which figure of a workload a table row shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    /// The workload's own figure.
    Value,
    /// p99 latency.
    P99,
    /// Peak RSS.
    Rss,
    /// TLS handshakes per second (connection per request).
    Handshakes,
    /// p99 of those handshakes.
    HandshakeP99,
    /// Response time of the slowest CPU-bound request.
    Slowest,
    /// Rounds computed by the least-served CPU-bound request.
    HogWork,
    /// Time until all threads are parked.
    Parked,
}

/// The unit of TLS handshake rates.
const HANDSHAKES: Unit = Unit::PerSec("handshakes/s");

impl Metric {
    /// Whether any run of `w` has this figure.
    fn present(self, w: &WorkloadResult) -> bool {
        w.cells.iter().any(|c| {
            c.runs.iter().any(|r| match self {
                Metric::Value => true,
                Metric::P99 => r.p99_ms.is_some(),
                Metric::Rss => w.rss_row,
                Metric::Handshakes => r.handshakes_per_sec.is_some(),
                Metric::HandshakeP99 => r.handshake_p99_ms.is_some(),
                Metric::Slowest => r.slowest_ms.is_some(),
                Metric::HogWork => r.hog_rounds.is_some(),
                Metric::Parked => r.parked_ms.is_some(),
            })
        })
    }

    /// Formats a figure of workload `w`.
    fn format(self, w: &WorkloadResult, v: f64) -> String {
        match self {
            Metric::Value => w.unit.format(v),
            Metric::P99 | Metric::HandshakeP99 | Metric::Slowest | Metric::Parked => {
                Unit::Ms.format(v)
            }
            Metric::Rss => format_kib(v as u64),
            Metric::Handshakes => HANDSHAKES.format(v),
            Metric::HogWork => format!("{} rounds", thousands(v.round() as u64)),
        }
    }
}

/// One table row.
pub struct Row {
    workload: usize,
    metric: Metric,
}

impl Report {
    /// The rows: each workload's figure, then its p99 and RSS where shown.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        for (i, w) in self.workloads.iter().enumerate() {
            rows.push(Row {
                workload: i,
                metric: Metric::Value,
            });
            if w.cells
                .iter()
                .any(|c| c.runs.iter().any(|r| r.p99_ms.is_some()))
            {
                rows.push(Row {
                    workload: i,
                    metric: Metric::P99,
                });
            }
            if w.rss_row {
                rows.push(Row {
                    workload: i,
                    metric: Metric::Rss,
                });
            }
            for metric in [
                Metric::Handshakes,
                Metric::HandshakeP99,
                Metric::Slowest,
                Metric::HogWork,
                Metric::Parked,
            ] {
                if metric.present(w) {
                    rows.push(Row {
                        workload: i,
                        metric,
                    });
                }
            }
        }
        rows
    }

    fn shown_columns(&self) -> Vec<usize> {
        (0..self.columns.len())
            .filter(|&i| {
                self.workloads
                    .iter()
                    .any(|w| w.cells[i].skipped.as_deref() != Some("column skipped"))
            })
            .collect()
    }

    fn row_label(&self, row: &Row) -> String {
        let w = &self.workloads[row.workload];
        match row.metric {
            Metric::Value => match w.unit {
                Unit::KiBPerThread => format!("{} — memory per thread", w.title),
                Unit::KiBPerConn => format!("{} — memory per idle connection", w.title),
                _ => w.title.clone(),
            },
            Metric::P99 => format!("{} — p99", w.title),
            Metric::Rss => format!("{} — peak RSS", w.title),
            Metric::Handshakes => {
                format!("{} — TLS handshakes, new connection per request", w.title)
            }
            Metric::HandshakeP99 => format!("{} — TLS handshake p99", w.title),
            Metric::Slowest => format!("{} — slowest CPU-bound request", w.title),
            Metric::HogWork => format!("{} — rounds the CPU-bound request computed", w.title),
            Metric::Parked => format!("{} — time until all are parked", w.title),
        }
    }

    fn ideal(&self, row: &Row) -> String {
        let w = &self.workloads[row.workload];
        match row.metric {
            Metric::Value => w.ideal.map(|v| w.unit.format(v)),
            Metric::P99 => w.ideal_p99_ms.map(|v| Unit::Ms.format(v)),
            Metric::Rss
            | Metric::Handshakes
            | Metric::HandshakeP99
            | Metric::Slowest
            | Metric::HogWork
            | Metric::Parked => None,
        }
        .unwrap_or_default()
    }

    /// Cell text: the median and, beside other columns, the ratio to
    /// Weft's median (`×0.85`: 0.85 times Weft's figure).
    fn cell(&self, row: &Row, col: usize, markdown: bool) -> String {
        let w = &self.workloads[row.workload];
        let cell = &w.cells[col];
        let Some(v) = cell.metric(row.metric) else {
            return cell.absent();
        };
        let mut s = row.metric.format(w, v);
        let weft = self.columns.iter().position(|c| c.id == "weft");
        match weft.and_then(|i| w.cells[i].metric(row.metric)) {
            Some(base) if Some(col) != weft && base > 0.0 => {
                let _ = write!(s, " (×{})", ratio(v / base));
            }
            _ if Some(col) == weft && markdown => s = format!("**{s}**"),
            _ => {}
        }
        if row.metric == Metric::Value && cell.errors() > 0 {
            let _ = write!(s, " [{} err]", cell.errors());
        }
        s
    }
}

/// The console table.
pub fn text_table(rep: &Report, rows: &[Row]) -> String {
    let cols = rep.shown_columns();
    let mut head = vec!["workload".to_string(), "ideal".to_string()];
    head.extend(cols.iter().map(|&c| rep.columns[c].id.clone()));
    let mut table = Table::new(head).right(1..cols.len() + 2);
    for row in rows {
        let mut line = vec![rep.row_label(row), rep.ideal(row)];
        line.extend(cols.iter().map(|&c| rep.cell(row, c, false)));
        table.row(line);
    }
    let mut out = table.text();
    let _ = writeln!(
        out,
        "\nmedians of {}; (×r) = r times Weft's figure; lower is better for ns, ms, KiB and RSS, higher for /s",
        runs_phrase(rep)
    );
    for c in &rep.columns {
        if let Some(why) = &c.skipped {
            let _ = writeln!(out, "{} skipped: {why}", c.label);
        }
    }
    for note in cell_notes(rep) {
        let _ = writeln!(out, "{note}");
    }
    out
}

fn runs_phrase(rep: &Report) -> String {
    let mut counts: Vec<usize> = rep
        .workloads
        .iter()
        .flat_map(|w| w.cells.iter().map(|c| c.runs.len()))
        .filter(|&n| n > 0)
        .collect();
    counts.sort();
    counts.dedup();
    match counts.as_slice() {
        [] => "no runs".into(),
        [n] => format!("{n} runs"),
        [a, .., b] => format!("{a}–{b} runs"),
    }
}

/// Notes on skipped or failed cells and on non-default sizes.
fn cell_notes(rep: &Report) -> Vec<String> {
    let mut notes = Vec::new();
    for w in &rep.workloads {
        let default_args = w
            .cells
            .iter()
            .find(|c| c.column == "weft")
            .map(|c| c.args.clone());
        for (c, col) in w.cells.iter().zip(&rep.columns) {
            if col.skipped.is_some() {
                continue;
            }
            if let Some(e) = &c.error {
                notes.push(format!("{} / {}: failed: {e}", w.id, col.id));
            } else if let Some(s) = &c.skipped {
                notes.push(format!("{} / {}: not run: {s}", w.id, col.id));
            } else if default_args.as_ref().is_some_and(|d| d != &c.args) && !c.args.is_empty() {
                notes.push(format!(
                    "{} / {}: run with smaller N ({:?}); the figure is per operation",
                    w.id, col.id, c.args
                ));
            }
        }
    }
    notes
}

/// `report.md`: what ran where, the table, notes. Also the README section.
pub fn markdown(rep: &Report, rows: &[Row]) -> String {
    let cols = rep.shown_columns();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Generated by `{}` on {} ({}); the suite took {:.0} s. Medians of {}; \
         (×r) = r times Weft's figure (lower is better for ns, ms, KiB and RSS, higher for /s). \
         Charts and every run: `target/weft-bench/`.\n",
        rep.command,
        rep.machine.date,
        rep.machine.describe(),
        rep.duration_secs,
        runs_phrase(rep)
    );
    let mut head = vec!["workload".to_string(), "ideal".to_string()];
    head.extend(cols.iter().map(|&c| rep.columns[c].label.clone()));
    let mut table = Table::new(head);
    for row in rows {
        let mut line = vec![rep.row_label(row), rep.ideal(row)];
        line.extend(cols.iter().map(|&c| rep.cell(row, c, true)));
        table.row(line);
    }
    out.push_str(&table.markdown());
    out.push('\n');
    let _ = writeln!(out, "Toolchains: {}.", {
        let v: Vec<String> = rep
            .columns
            .iter()
            .filter(|c| c.skipped.is_none() && !c.version.is_empty())
            .map(|c| format!("{}: {}", c.label, c.version))
            .collect();
        v.join("; ")
    });
    let _ = writeln!(out, "Rust columns: {}.", rep.machine.rustc);
    for c in &rep.columns {
        if let Some(why) = &c.skipped {
            let _ = writeln!(out, "\n{} skipped: {why}.", c.label);
        }
    }
    let notes = cell_notes(rep);
    if !notes.is_empty() {
        out.push('\n');
        for n in notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    out.push_str("\n<details><summary>What each workload measures</summary>\n\n");
    for w in &rep.workloads {
        let _ = writeln!(out, "- **{}** (`{}`): {}", w.title, w.id, w.what);
    }
    out.push_str("\n</details>\n");
    out
}

/// Replaces the text between `<!-- weft-bench:begin -->` and
/// `<!-- weft-bench:end -->` of `doc` (the text of `docs/bench.md`) with
/// `section`.
pub fn splice_docs(doc: &str, section: &str) -> Result<String, String> {
    const BEGIN: &str = "<!-- weft-bench:begin -->";
    const END: &str = "<!-- weft-bench:end -->";
    let b = doc
        .find(BEGIN)
        .ok_or("docs/bench.md has no <!-- weft-bench:begin --> marker")?;
    let e = doc
        .find(END)
        .filter(|&e| e > b)
        .ok_or("docs/bench.md has no <!-- weft-bench:end --> marker after the begin marker")?;
    Ok(format!("{}{BEGIN}\n{section}{}", &doc[..b], &doc[e..]))
}

/// One SVG per workload: a panel of horizontal bars for its figure, and
/// for p99 and peak RSS where the workload has them; a dashed line marks
/// the ideal.
pub fn svg(w: &WorkloadResult, columns: &[ColumnSummary]) -> String {
    let mut panels: Vec<(String, Metric, Option<f64>)> = vec![(
        match w.unit {
            Unit::Ns => "ns per operation (lower is better)".into(),
            Unit::Ms => "wall time, ms (lower is better)".into(),
            Unit::PerSec(u) => format!("{u} (higher is better)"),
            Unit::KiBPerThread => "memory per thread, KiB (lower is better)".into(),
            Unit::KiBPerConn => "memory per idle connection, KiB (lower is better)".into(),
        },
        Metric::Value,
        w.ideal,
    )];
    if w.cells
        .iter()
        .any(|c| c.runs.iter().any(|r| r.p99_ms.is_some()))
    {
        panels.push(("p99 latency, ms".into(), Metric::P99, w.ideal_p99_ms));
    }
    if w.rss_row {
        panels.push(("peak RSS, MiB".into(), Metric::Rss, None));
    }
    if Metric::Handshakes.present(w) {
        panels.push((
            "TLS handshakes / s, new connection per request (higher is better)".into(),
            Metric::Handshakes,
            None,
        ));
    }
    if Metric::HandshakeP99.present(w) {
        panels.push(("TLS handshake p99, ms".into(), Metric::HandshakeP99, None));
    }
    if Metric::Slowest.present(w) {
        panels.push((
            "the CPU-bound request's response time, ms (slowest of the run)".into(),
            Metric::Slowest,
            None,
        ));
    }
    if Metric::HogWork.present(w) {
        panels.push((
            "rounds the least-served CPU-bound request computed in its 4 s (higher: more CPU for it)".into(),
            Metric::HogWork,
            None,
        ));
    }
    if Metric::Parked.present(w) {
        panels.push((
            "time until all are parked, ms (lower is better)".into(),
            Metric::Parked,
            None,
        ));
    }
    let panels: Vec<Panel> = panels
        .into_iter()
        .map(|(title, metric, ideal)| Panel {
            title,
            ideal,
            bars: w
                .cells
                .iter()
                .zip(columns)
                .map(|(cell, col)| {
                    let value = cell.metric(metric);
                    Bar {
                        label: col.label.clone(),
                        value,
                        text: match value {
                            Some(v) => metric.format(w, v),
                            None => cell.absent(),
                        },
                    }
                })
                .collect(),
        })
        .collect();
    bar_chart(&w.title, &panels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: f64) -> Run {
        Run {
            value: v,
            rss_kib: 1024,
            ..Run::default()
        }
    }

    #[test]
    fn units_format() {
        assert_eq!(Unit::Ns.format(312.4), "312 ns");
        assert_eq!(Unit::Ns.format(1_240.0), "1.24 µs");
        assert_eq!(Unit::Ms.format(1034.2), "1,034 ms");
        assert_eq!(Unit::PerSec("msg/s").format(30_200_000.0), "30.20 M msg/s");
        assert_eq!(format_kib(2 * 1024 * 1024), "2.00 GiB");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    /// A report of one workload on a Weft and a Go column, with these runs.
    fn weft_and_go(w: WorkloadResult, weft: Vec<Run>, go: Vec<Run>) -> Report {
        let columns: Vec<ColumnSummary> = ["weft", "go"]
            .iter()
            .map(|id| ColumnSummary {
                id: id.to_string(),
                label: id.to_string(),
                version: String::new(),
                skipped: None,
            })
            .collect();
        let cell = |c: &str, runs: Vec<Run>| Cell {
            column: c.into(),
            args: vec![10],
            runs,
            skipped: None,
            error: None,
        };
        Report {
            command: "x".into(),
            invoked_as: "x".into(),
            quick: true,
            machine: Machine::probe().finish(),
            duration_secs: 1.0,
            columns,
            workloads: vec![WorkloadResult {
                cells: vec![cell("weft", weft), cell("go", go)],
                ..w
            }],
        }
    }

    /// A workload of `unit` without figures.
    fn workload(id: &str, title: &str, unit: Unit) -> WorkloadResult {
        WorkloadResult {
            id: id.into(),
            title: title.into(),
            what: "w".into(),
            unit,
            ideal: None,
            ideal_p99_ms: None,
            rss_row: false,
            cells: Vec::new(),
        }
    }

    #[test]
    fn a_parked_row_shows_memory_per_thread_and_the_time_until_all_are_parked() {
        let parked = |kib: f64, ms: f64| Run {
            value: kib,
            rss_kib: 1024,
            parked_ms: Some(ms),
            ..Run::default()
        };
        let w = workload(
            "park-100k",
            "100k threads parked, from main",
            Unit::KiBPerThread,
        );
        let rep = weft_and_go(
            w,
            vec![parked(8.0, 900.0), parked(9.0, 1100.0)],
            vec![parked(2.5, 250.0)],
        );
        let rows = rep.rows();
        assert_eq!(rows.len(), 2);
        let md = markdown(&rep, &rows);
        assert!(
            md.contains(
                "| 100k threads parked, from main — memory per thread |  | **8.50 KiB** | 2.50 KiB (×0.29) |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| 100k threads parked, from main — time until all are parked |  | **1,000 ms** | 250 ms (×0.25) |"
            ),
            "{md}"
        );
        let chart = svg(&rep.workloads[0], &rep.columns);
        assert!(chart.contains("time until all are parked") && chart.contains("250 ms"));
    }

    #[test]
    fn ratios_table_and_docs_splice() {
        let w = WorkloadResult {
            rss_row: true,
            ..workload("spawn", "spawn + join", Unit::Ns)
        };
        let rep = weft_and_go(
            w,
            vec![run(100.0), run(300.0), run(200.0)],
            vec![run(400.0)],
        );
        let rows = rep.rows();
        assert_eq!(rows.len(), 2);
        let t = text_table(&rep, &rows);
        assert!(t.contains("200 ns"), "{t}");
        assert!(t.contains("400 ns (×2.00)"), "{t}");
        let md = markdown(&rep, &rows);
        assert!(
            md.contains("| spawn + join |  | **200 ns** | 400 ns (×2.00) |"),
            "{md}"
        );
        let doc = "a\n<!-- weft-bench:begin -->\nold\n<!-- weft-bench:end -->\nb\n";
        let new = splice_docs(doc, "NEW\n").unwrap();
        assert_eq!(
            new,
            "a\n<!-- weft-bench:begin -->\nNEW\n<!-- weft-bench:end -->\nb\n"
        );
        assert!(splice_docs("no markers", "x").is_err());
        let chart = svg(&rep.workloads[0], &rep.columns);
        assert!(chart.starts_with("<svg") && chart.contains("400 ns"));
    }
}
