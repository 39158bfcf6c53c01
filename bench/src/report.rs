//! Results: medians, the text table, `report.md` (and the README section),
//! `results.json`, and one SVG bar chart per workload.

use std::fmt::Write as _;

use serde::Serialize;

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
        }
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `KiB` → `12.3 MiB` / `1.21 GiB`.
pub fn format_kib(kib: u64) -> String {
    let mib = kib as f64 / 1024.0;
    if mib >= 1024.0 {
        format!("{:.2} GiB", mib / 1024.0)
    } else if mib >= 100.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{mib:.1} MiB")
    }
}

/// One measured run.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// The figure, in the workload's unit.
    pub value: f64,
    /// p99 latency (ms) for load workloads.
    pub p99_ms: Option<f64>,
    /// Peak RSS of the measured process (the server, for load workloads).
    pub rss_kib: u64,
    /// Failed operations (load workloads).
    pub errors: u64,
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

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl Cell {
    fn metric(&self, m: Metric) -> Option<f64> {
        if self.error.is_some() {
            return None;
        }
        median(
            self.runs
                .iter()
                .filter_map(|r| match m {
                    Metric::Value => Some(r.value),
                    Metric::P99 => r.p99_ms,
                    Metric::Rss => Some(r.rss_kib as f64),
                })
                .collect(),
        )
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

    fn describe(&self) -> String {
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
            Metric::Value => w.title.clone(),
            Metric::P99 => format!("{} — p99", w.title),
            Metric::Rss => format!("{} — peak RSS", w.title),
        }
    }

    fn ideal(&self, row: &Row) -> String {
        let w = &self.workloads[row.workload];
        match row.metric {
            Metric::Value => w.ideal.map(|v| w.unit.format(v)),
            Metric::P99 => w.ideal_p99_ms.map(|v| Unit::Ms.format(v)),
            Metric::Rss => None,
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
        let fmt = |v: f64| match row.metric {
            Metric::Value => w.unit.format(v),
            Metric::P99 => Unit::Ms.format(v),
            Metric::Rss => format_kib(v as u64),
        };
        let mut s = fmt(v);
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

fn ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.2}")
    }
}

/// The console table.
pub fn text_table(rep: &Report, rows: &[Row]) -> String {
    let cols = rep.shown_columns();
    let mut grid: Vec<Vec<String>> = Vec::new();
    let mut head = vec!["workload".to_string(), "ideal".to_string()];
    head.extend(cols.iter().map(|&c| rep.columns[c].id.clone()));
    grid.push(head);
    for row in rows {
        let mut line = vec![rep.row_label(row), rep.ideal(row)];
        line.extend(cols.iter().map(|&c| rep.cell(row, c, false)));
        grid.push(line);
    }
    let widths: Vec<usize> = (0..grid[0].len())
        .map(|i| grid.iter().map(|l| l[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (n, line) in grid.iter().enumerate() {
        for (i, cell) in line.iter().enumerate() {
            let pad = widths[i] - cell.chars().count();
            if i == 0 {
                let _ = write!(out, "{cell}{}", " ".repeat(pad));
            } else {
                let _ = write!(out, "  {}{cell}", " ".repeat(pad));
            }
        }
        out.push('\n');
        if n == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
            out.push('\n');
        }
    }
    let _ = writeln!(
        out,
        "\nmedians of {}; (×r) = r times Weft's figure; lower is better for ns, ms and RSS, higher for /s",
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
         (×r) = r times Weft's figure (lower is better for ns, ms and RSS, higher for /s). \
         Charts and every run: `target/weft-bench/`.\n",
        rep.command,
        rep.machine.date,
        rep.machine.describe(),
        rep.duration_secs,
        runs_phrase(rep)
    );
    let _ = write!(out, "| workload | ideal |");
    for &c in &cols {
        let _ = write!(out, " {} |", rep.columns[c].label);
    }
    let _ = write!(out, "\n|---|---|");
    for _ in &cols {
        out.push_str("---|");
    }
    out.push('\n');
    for row in rows {
        let _ = write!(out, "| {} | {} |", rep.row_label(row), rep.ideal(row));
        for &c in &cols {
            let _ = write!(out, " {} |", rep.cell(row, c, true));
        }
        out.push('\n');
    }
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
/// `<!-- weft-bench:end -->` with `section`.
pub fn splice_readme(readme: &str, section: &str) -> Result<String, String> {
    const BEGIN: &str = "<!-- weft-bench:begin -->";
    const END: &str = "<!-- weft-bench:end -->";
    let b = readme
        .find(BEGIN)
        .ok_or("README.md has no <!-- weft-bench:begin --> marker")?;
    let e = readme
        .find(END)
        .filter(|&e| e > b)
        .ok_or("README.md has no <!-- weft-bench:end --> marker after the begin marker")?;
    Ok(format!(
        "{}{BEGIN}\n{section}{}",
        &readme[..b],
        &readme[e..]
    ))
}

const COLORS: [&str; 6] = [
    "#d9480f", "#1c7ed6", "#74c0fc", "#868e96", "#2f9e44", "#9c36b5",
];

/// One SVG per workload: a panel of horizontal bars for its figure, and
/// for p99 and peak RSS where the workload has them; a dashed line marks
/// the ideal.
pub fn svg(w: &WorkloadResult, columns: &[ColumnSummary]) -> String {
    let mut panels: Vec<(String, Metric, Option<f64>)> = vec![(
        match w.unit {
            Unit::Ns => "ns per operation (lower is better)".into(),
            Unit::Ms => "wall time, ms (lower is better)".into(),
            Unit::PerSec(u) => format!("{u} (higher is better)"),
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
    let bar = 22.0;
    let label_w = 190.0;
    let plot_w = 430.0;
    let width = label_w + plot_w + 130.0;
    let panel_h = |n: usize| 34.0 + n as f64 * (bar + 6.0) + 10.0;
    let n = columns.len();
    let height = 40.0 + panels.len() as f64 * panel_h(n);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="10" y="24" font-size="16" font-weight="bold">{}</text>"#,
        esc(&w.title)
    );
    let mut y0 = 40.0;
    for (title, metric, ideal) in panels {
        let vals: Vec<Option<f64>> = w.cells.iter().map(|c| c.metric(metric)).collect();
        let max = vals
            .iter()
            .flatten()
            .copied()
            .chain(ideal)
            .fold(0.0f64, f64::max)
            .max(f64::MIN_POSITIVE);
        let _ = writeln!(
            s,
            r##"<text x="10" y="{}" fill="#495057">{}</text>"##,
            y0 + 18.0,
            esc(&title)
        );
        for (i, (v, col)) in vals.iter().zip(columns).enumerate() {
            let y = y0 + 30.0 + i as f64 * (bar + 6.0);
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
                label_w - 8.0,
                y + bar * 0.7,
                esc(&col.label)
            );
            match v {
                Some(v) => {
                    let len = (v / max * plot_w).max(1.0);
                    let text = match metric {
                        Metric::Value => w.unit.format(*v),
                        Metric::P99 => Unit::Ms.format(*v),
                        Metric::Rss => format_kib(*v as u64),
                    };
                    let _ = writeln!(
                        s,
                        r#"<rect x="{label_w}" y="{y}" width="{len:.1}" height="{bar}" fill="{}"/><text x="{:.1}" y="{}">{}</text>"#,
                        COLORS[i % COLORS.len()],
                        label_w + len + 6.0,
                        y + bar * 0.7,
                        esc(&text)
                    );
                }
                None => {
                    let _ = writeln!(
                        s,
                        r##"<text x="{}" y="{}" fill="#868e96">{}</text>"##,
                        label_w + 4.0,
                        y + bar * 0.7,
                        esc(&w.cells[i].absent())
                    );
                }
            }
        }
        if let Some(ideal) = ideal {
            let x = label_w + ideal / max * plot_w;
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#212529" stroke-dasharray="4 3"/><text x="{x:.1}" y="{}" text-anchor="middle" fill="#212529">ideal</text>"##,
                y0 + 26.0,
                y0 + panel_h(n) - 8.0,
                y0 + 24.0
            );
        }
        y0 += panel_h(n);
    }
    s.push_str("</svg>\n");
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: f64) -> Run {
        Run {
            value: v,
            p99_ms: None,
            rss_kib: 1024,
            errors: 0,
        }
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
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

    #[test]
    fn ratios_table_and_readme_splice() {
        let cols: Vec<ColumnSummary> = ["weft", "go"]
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
        let rep = Report {
            command: "x".into(),
            invoked_as: "x".into(),
            quick: true,
            machine: Machine::probe().finish(),
            duration_secs: 1.0,
            columns: cols.clone(),
            workloads: vec![WorkloadResult {
                id: "spawn".into(),
                title: "spawn + join".into(),
                what: "w".into(),
                unit: Unit::Ns,
                ideal: None,
                ideal_p99_ms: None,
                rss_row: true,
                cells: vec![
                    cell("weft", vec![run(100.0), run(300.0), run(200.0)]),
                    cell("go", vec![run(400.0)]),
                ],
            }],
        };
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
        let readme = "a\n<!-- weft-bench:begin -->\nold\n<!-- weft-bench:end -->\nb\n";
        let new = splice_readme(readme, "NEW\n").unwrap();
        assert_eq!(
            new,
            "a\n<!-- weft-bench:begin -->\nNEW\n<!-- weft-bench:end -->\nb\n"
        );
        assert!(splice_readme("no markers", "x").is_err());
        let chart = svg(&rep.workloads[0], &cols);
        assert!(chart.starts_with("<svg") && chart.contains("400 ns"));
    }
}
