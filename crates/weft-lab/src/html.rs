//! `report.html`: one self-contained page (no network) with, per
//! experiment, its table and an SVG chart drawn with `plotters` — req/s
//! bars with the Little's-law ideal as a line across each bar, and the
//! latency percentiles of each row with the unqueued ideal as a line.

use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use weft_bench_support::svg::{log_ticks, tick_label};

use crate::report::{self, ExperimentResult, Mode, Report, Row};

const PLATFORM: RGBColor = RGBColor(222, 110, 30);
const VIRTUAL: RGBColor = RGBColor(40, 100, 200);
const IDEAL: RGBColor = RGBColor(20, 150, 60);

fn color(row: &Row, i: usize) -> RGBColor {
    let base = match row.mode {
        Mode::Platform => PLATFORM,
        Mode::Virtual => VIRTUAL,
    };
    // Later rows of the same mode get lighter.
    let k = (i % 3) as u8;
    let lift = |c: u8| c.saturating_add(k * 35);
    RGBColor(lift(base.0), lift(base.1), lift(base.2))
}

/// The SVG chart of one experiment's rows (an empty chart when nothing
/// was measured).
pub fn chart(title: &str, rows: &[Row]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 380)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let root = root
            .titled(title, ("sans-serif", 18))
            .map_err(|e| e.to_string())?;
        let (left, right) = root.split_horizontally(480);
        let measured: Vec<&Row> = rows.iter().filter(|r| r.rps.is_some()).collect();
        throughput(&left, &measured).map_err(|e| e.to_string())?;
        latency(&right, &measured).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for v in values.filter(|v| *v > 0.0 && v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (0.1, 10.0);
    }
    (lo / 3.0, hi * 3.0)
}

fn throughput(area: &Area<'_>, rows: &[&Row]) -> DrawResult {
    let n = rows.len().max(1) as u32;
    let (lo, hi) = log_range(
        rows.iter()
            .flat_map(|r| [r.rps.unwrap_or(0.0), r.ideal_rps.unwrap_or(0.0)]),
    );
    let mut chart = ChartBuilder::on(area)
        .caption("throughput, req/s (log)", ("sans-serif", 14))
        .margin(8)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (0..n).into_segmented(),
            (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
        )?;
    let labels: Vec<String> = rows.iter().map(|r| r.short.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n as usize)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .x_label_style(("sans-serif", 11))
        .y_label_formatter(&|v| tick_label(*v))
        .y_desc("req/s")
        .draw()?;
    chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
        let i = i as u32;
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(i), lo),
                (SegmentValue::Exact(i + 1), r.rps.unwrap_or(lo).max(lo)),
            ],
            color(r, i as usize).filled(),
        );
        bar.set_margin(0, 0, 12, 12);
        bar
    }))?;
    chart
        .draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
            let i = i as u32;
            r.ideal_rps.map(|ideal| {
                PathElement::new(
                    vec![
                        (SegmentValue::Exact(i), ideal),
                        (SegmentValue::Exact(i + 1), ideal),
                    ],
                    IDEAL.stroke_width(3),
                )
            })
        }))?
        .label("ideal (Little's law)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], IDEAL.stroke_width(3)));
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

fn latency(area: &Area<'_>, rows: &[&Row]) -> DrawResult {
    const STATS: [&str; 4] = ["median", "avg", "p99", "max"];
    let pick = |r: &Row| {
        r.latency
            .map(|l| [l.p50_ms, l.avg_ms, l.p99_ms, l.max_ms])
            .unwrap_or([0.0; 4])
    };
    let (lo, hi) = log_range(
        rows.iter()
            .flat_map(|r| pick(r).into_iter().chain(r.ideal_ms)),
    );
    let mut chart = ChartBuilder::on(area)
        .caption("latency, ms (log)", ("sans-serif", 14))
        .margin(8)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (0..4u32).into_segmented(),
            (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
        )?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(4)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => STATS.get(*i as usize).unwrap_or(&"").to_string(),
            _ => String::new(),
        })
        .y_label_formatter(&|v| tick_label(*v))
        .y_desc("ms")
        .draw()?;
    for (i, r) in rows.iter().enumerate() {
        let c = color(r, i);
        let points: Vec<(SegmentValue<u32>, f64)> = pick(r)
            .into_iter()
            .enumerate()
            .filter(|(_, v)| *v > 0.0)
            .map(|(k, v)| (SegmentValue::CenterOf(k as u32), v))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))?
            .label(r.short.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart.draw_series(points.into_iter().map(|p| Circle::new(p, 4, c.filled())))?;
    }
    if let Some(ideal) = rows.iter().find_map(|r| r.ideal_ms) {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![
                    (SegmentValue::Exact(0), ideal),
                    (SegmentValue::Exact(4), ideal),
                ],
                IDEAL.stroke_width(2),
            )))?
            .label("unqueued latency")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], IDEAL.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 11))
        .draw()?;
    Ok(())
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn section(e: &ExperimentResult) -> String {
    let mut out = format!(
        "<section id=\"{id}\">\n<h2>{id} — {title}</h2>\n",
        id = e.experiment.id(),
        title = escape(e.title)
    );
    if let Some(why) = &e.skipped {
        out += &format!("<p class=\"skip\">Skipped: {}</p>\n", escape(why));
    }
    match chart(
        &format!("{} — platform vs virtual", e.experiment.id()),
        &e.rows,
    ) {
        Ok(svg) => out += &format!("<div class=\"chart\">{svg}</div>\n"),
        Err(err) => out += &format!("<p>chart failed: {}</p>\n", escape(&err)),
    }
    out += "<table>\n<tr>";
    for h in report::HEADER {
        out += &format!("<th>{}</th>", escape(h));
    }
    out += "</tr>\n";
    for r in &e.rows {
        out += "<tr>";
        for c in report::cells(r) {
            out += &format!("<td>{}</td>", escape(&c));
        }
        out += "</tr>\n";
    }
    out += "</table>\n<ul>";
    for r in &e.rows {
        for n in r.notes.iter().chain(r.error.iter()) {
            out += &format!("<li>{}: {}</li>", escape(&r.label), escape(n));
        }
    }
    out += &format!("</ul>\n<p class=\"t\">{:.1} s</p>\n</section>\n", e.seconds);
    out
}

/// The whole page.
pub fn page(report: &Report) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n\
         <title>weft-lab report</title>\n<style>\n\
         body{font-family:sans-serif;margin:2em;max-width:1100px}\n\
         table{border-collapse:collapse;font-size:13px}\n\
         td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}\n\
         td:first-child,td:last-child,th{text-align:left}\n\
         .skip{color:#a33}.t{color:#777;font-size:12px}\n\
         .summary li{font-family:monospace;margin:2px 0}\n\
         </style>\n</head>\n<body>\n<h1>weft-lab: virtual vs platform threads</h1>\n",
    );
    out += &format!(
        "<p>{} {} on {} cores (kernel {}), total {:.1} s. Command: <code>{}</code>. \
         Ideal = Little's law (concurrency / service time); bars show measured req/s, \
         green lines the ideal.</p>\n",
        report.machine.os,
        report.machine.arch,
        report.machine.cores,
        escape(report.machine.kernel.as_deref().unwrap_or("?")),
        report.total_seconds,
        escape(&report.command.join(" ")),
    );
    out += "<h2>Summary</h2>\n<ul class=\"summary\">\n";
    for e in &report.experiments {
        out += &format!("<li>{}</li>\n", escape(&report::summary_line(e)));
    }
    out += "</ul>\n";
    for e in &report.experiments {
        out += &section(e);
    }
    out += "</body>\n</html>\n";
    out
}

/// Writes [`page`] to `path`, creating parent directories.
pub fn write(report: &Report, path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, page(report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn chart_is_svg() {
        let rows = vec![
            Row::new("E2", Mode::Platform, "p")
                .ideal(1.0, 1000.0)
                .measured(vec![5_000_000; 5], 0, Duration::from_secs(5)),
            Row::new("E2", Mode::Virtual, "v")
                .ideal(100.0, 1000.0)
                .measured(vec![1_000_000; 500], 0, Duration::from_secs(5)),
        ];
        let svg = chart("E2", &rows).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        assert!(svg.contains("</svg>"));
        assert!(chart("empty", &[]).unwrap().contains("<svg"));
        // Log axes are labelled at powers of ten, as people write them —
        // not plotters' default stack of "90.0 80.0 70.0 …".
        let labels = |svg: &str| -> Vec<String> {
            svg.split("</text>")
                .filter_map(|t| t.rsplit('>').next())
                .map(|t| t.trim().to_string())
                .collect()
        };
        let l = labels(&svg);
        for tick in ["1", "10", "100"] {
            assert!(l.iter().any(|t| t == tick), "no tick {tick}: {l:?}");
        }
        assert!(!l.iter().any(|t| t.ends_with(".0")), "{l:?}");
    }
}
