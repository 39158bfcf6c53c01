//! Self-contained SVG charts (no scripts, no fonts to fetch) and readable
//! ticks for log-scale axes.

use std::fmt::Write as _;

/// Bar colours, one per bar position (they repeat after six).
pub const COLORS: [&str; 6] = [
    "#d9480f", "#1c7ed6", "#74c0fc", "#868e96", "#2f9e44", "#9c36b5",
];

/// One bar of a [`Panel`].
#[derive(Clone, Debug)]
pub struct Bar {
    /// The label left of the bar.
    pub label: String,
    /// Its length, in the panel's unit; `None` draws no bar, only `text`.
    pub value: Option<f64>,
    /// The text right of the bar (the formatted value), or why there is none.
    pub text: String,
}

/// A titled group of horizontal bars sharing one linear scale.
#[derive(Clone, Debug)]
pub struct Panel {
    /// Heading above the bars (say which way is better).
    pub title: String,
    /// The bars, top to bottom.
    pub bars: Vec<Bar>,
    /// Where a dashed "ideal" line goes, in the bars' unit.
    pub ideal: Option<f64>,
}

/// Escapes text for SVG and HTML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The start of a chart: the `<svg>` element, a white background and the
/// title.
fn open(width: f64, height: f64, title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="10" y="24" font-size="16" font-weight="bold">{}</text>"#,
        escape(title)
    );
    s
}

/// A chart of horizontal bars, one panel under another, each scaled to its
/// largest bar (or its ideal, if larger). Bar `i` of every panel gets
/// colour `COLORS[i]`, so one runtime keeps its colour across panels.
///
/// # Examples
///
/// ```
/// use weft_bench_support::svg::{bar_chart, Bar, Panel};
///
/// let panel = Panel {
///     title: "req/s (higher is better)".into(),
///     bars: vec![
///         Bar { label: "weft".into(), value: Some(59_400.0), text: "59.4 k req/s".into() },
///         Bar { label: "go".into(), value: None, text: "n/a".into() },
///     ],
///     ideal: None,
/// };
/// let svg = bar_chart("HTTP hello", &[panel]);
/// assert!(svg.starts_with("<svg") && svg.contains("59.4 k req/s") && svg.ends_with("</svg>\n"));
/// ```
pub fn bar_chart(title: &str, panels: &[Panel]) -> String {
    let bar = 22.0;
    let label_w = 190.0;
    let plot_w = 430.0;
    let width = label_w + plot_w + 130.0;
    let panel_h = |n: usize| 34.0 + n as f64 * (bar + 6.0) + 10.0;
    let height = 40.0 + panels.iter().map(|p| panel_h(p.bars.len())).sum::<f64>();
    let mut s = open(width, height, title);
    let mut y0 = 40.0;
    for panel in panels {
        let n = panel.bars.len();
        let max = panel
            .bars
            .iter()
            .filter_map(|b| b.value)
            .chain(panel.ideal)
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max)
            .max(f64::MIN_POSITIVE);
        let _ = writeln!(
            s,
            r##"<text x="10" y="{}" fill="#495057">{}</text>"##,
            y0 + 18.0,
            escape(&panel.title)
        );
        for (i, b) in panel.bars.iter().enumerate() {
            let y = y0 + 30.0 + i as f64 * (bar + 6.0);
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
                label_w - 8.0,
                y + bar * 0.7,
                escape(&b.label)
            );
            match b.value.filter(|v| v.is_finite()) {
                Some(v) => {
                    let len = (v / max * plot_w).max(1.0);
                    let _ = writeln!(
                        s,
                        r#"<rect x="{label_w}" y="{y}" width="{len:.1}" height="{bar}" fill="{}"/><text x="{:.1}" y="{}">{}</text>"#,
                        COLORS[i % COLORS.len()],
                        label_w + len + 6.0,
                        y + bar * 0.7,
                        escape(&b.text)
                    );
                }
                None => {
                    let _ = writeln!(
                        s,
                        r##"<text x="{}" y="{}" fill="#868e96">{}</text>"##,
                        label_w + 4.0,
                        y + bar * 0.7,
                        escape(&b.text)
                    );
                }
            }
        }
        if let Some(ideal) = panel.ideal.filter(|v| v.is_finite()) {
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

/// One line of a [`LinePanel`]: `(x, y)` points in increasing `x`.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// The points. One with a non-finite coordinate (`f64::NAN`: no value
    /// there) is a gap: the line stops before it and starts again after.
    pub points: Vec<(f64, f64)>,
}

/// A titled plot of lines sharing one linear scale from zero, with an
/// optional dashed vertical marker (say, the end of a warm-up).
#[derive(Clone, Debug)]
pub struct LinePanel {
    /// Heading above the plot (name the unit).
    pub title: String,
    /// The lines; line `i` gets colour `COLORS[i]`.
    pub series: Vec<Series>,
    /// Where a dashed vertical line goes, in `x` units, and its label.
    pub marker: Option<(f64, String)>,
}

/// Plots of lines over one shared `x` axis (from zero to the largest `x`),
/// one panel under another, each `y` axis from zero to its largest value.
///
/// # Examples
///
/// ```
/// use weft_bench_support::svg::{line_chart, LinePanel, Series};
///
/// let panel = LinePanel {
///     title: "RSS, MiB".into(),
///     series: vec![Series { label: "server".into(), points: vec![(0.0, 40.0), (60.0, 42.5)] }],
///     marker: Some((30.0, "warm-up".into())),
/// };
/// let svg = line_chart("Soak", "seconds", &[panel]);
/// assert!(svg.starts_with("<svg") && svg.contains("<polyline") && svg.ends_with("</svg>\n"));
/// ```
pub fn line_chart(title: &str, x_label: &str, panels: &[LinePanel]) -> String {
    let (left, plot_w, plot_h, panel_h) = (70.0, 620.0, 150.0, 210.0);
    let width = left + plot_w + 40.0;
    let height = 40.0 + panels.len() as f64 * panel_h + 20.0;
    let finite = |v: &f64| v.is_finite();
    let x_max = panels
        .iter()
        .flat_map(|p| p.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)))
        .filter(finite)
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let mut s = open(width, height, title);
    let mut y0 = 40.0;
    for panel in panels {
        let y_max = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(finite)
            .fold(0.0f64, f64::max)
            .max(f64::MIN_POSITIVE)
            * 1.1;
        let top = y0 + 30.0;
        let bottom = top + plot_h;
        let px = |x: f64| left + x / x_max * plot_w;
        let py = |y: f64| bottom - y / y_max * plot_h;
        let _ = writeln!(
            s,
            r##"<text x="10" y="{}" fill="#495057">{}</text>"##,
            y0 + 18.0,
            escape(&panel.title)
        );
        // Axes, with the top of each range labelled.
        let _ = writeln!(
            s,
            r##"<path d="M{left} {top} V{bottom} H{}" fill="none" stroke="#adb5bd"/><text x="{}" y="{}" text-anchor="end" fill="#495057">{}</text><text x="{}" y="{}" text-anchor="end" fill="#495057">0</text><text x="{}" y="{}" text-anchor="end" fill="#495057">{} {}</text>"##,
            left + plot_w,
            left - 6.0,
            top + 4.0,
            tick_label(y_max / 1.1),
            left - 6.0,
            bottom + 4.0,
            left + plot_w,
            bottom + 16.0,
            tick_label(x_max),
            escape(x_label)
        );
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#e9ecef"/>"##,
            py(y_max / 1.1),
            left + plot_w
        );
        if let Some((x, label)) = panel.marker.as_ref().filter(|m| m.0.is_finite()) {
            let _ = writeln!(
                s,
                r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{bottom}" stroke="#212529" stroke-dasharray="4 3"/><text x="{1:.1}" y="{2}" fill="#212529">{3}</text>"##,
                px(*x),
                px(*x) + 4.0,
                top + 12.0,
                escape(label)
            );
        }
        for (i, series) in panel.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            // A non-finite point is a gap: one polyline per run of finite
            // points, a dot for a run of one.
            for run in series
                .points
                .split(|p| !(p.0.is_finite() && p.1.is_finite()))
            {
                let _ = match run {
                    [] => Ok(()),
                    [(x, y)] => writeln!(
                        s,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="2" fill="{color}"/>"#,
                        px(*x),
                        py(*y)
                    ),
                    _ => {
                        let points: Vec<String> = run
                            .iter()
                            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                            .collect();
                        writeln!(
                            s,
                            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="1.5"/>"#,
                            points.join(" ")
                        )
                    }
                };
            }
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" fill="{color}">{}</text>"#,
                left + 10.0 + i as f64 * 160.0,
                bottom + 32.0,
                escape(&series.label)
            );
        }
        y0 += panel_h;
    }
    s.push_str("</svg>\n");
    s
}

/// Tick positions for a log-scale axis over `lo..=hi`: the powers of ten
/// inside it (1, 10, 100, …), with 2× and 5× steps added when fewer than
/// three powers fit, and the two ends when not even those give two ticks.
/// Empty when the range is not positive and finite.
///
/// # Examples
///
/// ```
/// use weft_bench_support::svg::log_ticks;
///
/// assert_eq!(log_ticks(0.5, 20_000.0), [1.0, 10.0, 100.0, 1e3, 1e4]);
/// assert_eq!(log_ticks(3.0, 60.0), [5.0, 10.0, 20.0, 50.0]);
/// ```
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return Vec::new();
    }
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    // Compare with a little slack so that 1000.0000001 still counts as 1k.
    let inside = |v: f64| v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9);
    let decades: Vec<f64> = (first..=last).map(|e| 10f64.powi(e)).collect();
    let mut ticks: Vec<f64> = decades.iter().copied().filter(|&v| inside(v)).collect();
    if ticks.len() < 3 {
        ticks = decades
            .iter()
            .flat_map(|&d| [d, 2.0 * d, 5.0 * d])
            .filter(|&v| inside(v))
            .collect();
    }
    if ticks.len() < 2 {
        ticks = vec![lo, hi];
        ticks.dedup();
    }
    ticks
}

/// A tick label without trailing zeros, with `k` and `M` for thousands and
/// millions: `0.5`, `1`, `20`, `1k`, `2.5k`, `10M`.
///
/// # Examples
///
/// ```
/// use weft_bench_support::svg::tick_label;
///
/// let labels: Vec<String> = [0.5, 1.0, 20.0, 1e3, 2500.0, 1e7].map(tick_label).to_vec();
/// assert_eq!(labels, ["0.5", "1", "20", "1k", "2.5k", "10M"]);
/// ```
pub fn tick_label(v: f64) -> String {
    fn short(x: f64) -> String {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", short(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", short(v / 1e3))
    } else if a >= 1.0 || a == 0.0 {
        short(v)
    } else {
        // Small values keep their first significant digit: 0.005, 0.0001.
        let digits = (-a.log10().floor()) as usize + 1;
        let s = format!("{v:.digits$}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_on_odd_ranges() {
        assert!(log_ticks(0.0, 10.0).is_empty());
        assert!(log_ticks(f64::NAN, 10.0).is_empty());
        assert_eq!(log_ticks(95.0, 105.0), [95.0, 105.0]);
        assert_eq!(log_ticks(1.0, 1.0), [1.0]);
        // A run from 333 req/s to 3,000 req/s: 500, 1k, 2k (not 9000.0, 8000.0 …).
        assert_eq!(log_ticks(333.0, 3000.0), [500.0, 1000.0, 2000.0]);
        let labels: Vec<String> = log_ticks(0.03, 3.0).into_iter().map(tick_label).collect();
        assert_eq!(labels, ["0.05", "0.1", "0.2", "0.5", "1", "2"]);
    }

    #[test]
    fn small_labels() {
        assert_eq!(tick_label(0.05), "0.05");
        assert_eq!(tick_label(0.0001), "0.0001");
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(1_500_000.0), "1.5M");
    }

    #[test]
    fn chart_draws_ideal_and_escapes() {
        let svg = bar_chart(
            "a < b",
            &[Panel {
                title: "t".into(),
                bars: vec![Bar {
                    label: "x".into(),
                    value: Some(f64::NAN),
                    text: "failed".into(),
                }],
                ideal: Some(5.0),
            }],
        );
        assert!(svg.contains("a &lt; b") && svg.contains(">ideal<") && svg.contains("failed"));
    }
}
