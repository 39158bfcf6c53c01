//! The HTML report: one self-contained page (inline CSS and SVG, no
//! script, no external file or font), readable offline.

use std::fmt::Write as _;
use std::time::UNIX_EPOCH;

use weft_bench_support::format::{sig3, thousands};
use weft_bench_support::svg::{LinePanel, Series, escape, line_chart};

use crate::{Interval, Report};

/// A percentile of interval `i` for the chart: NaN, a gap, when it has
/// no latency.
fn latency(i: &Interval, ms: f64) -> f64 {
    if i.latencies == 0 { f64::NAN } else { ms }
}

/// A percentile of interval `i` for the table: a dash when it has no
/// latency.
fn latency_text(i: &Interval, ms: f64) -> String {
    if i.latencies == 0 {
        "–".into()
    } else {
        sig3(ms)
    }
}

/// The percentiles in the page's table.
const PERCENTILES: [(f64, &str); 8] = [
    (0.5, "p50"),
    (0.75, "p75"),
    (0.9, "p90"),
    (0.95, "p95"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (0.9999, "p99.99"),
    (1.0, "max"),
];

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:24px;color:#212529;max-width:1100px}\
h1{font-size:22px}h2{font-size:17px;margin-top:28px}\
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border-bottom:1px solid #dee2e6;text-align:right}\
th:first-child,td:first-child{text-align:left}.muted{color:#6c757d}svg{max-width:100%;height:auto}";

impl Report {
    /// The report as a self-contained HTML page: the totals, throughput
    /// and p50/p99 latency over time (charts, and the series as a table),
    /// the percentile table, errors and statuses. No script and no
    /// external resource: it opens offline, from a file.
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_http::{Request, Response};
    ///
    /// let server = weft_http::serve("127.0.0.1:0", |_req: &mut Request<'_>| Response::text("ok"))?;
    /// let report = weft_load::run(&weft_load::Config {
    ///     url: format!("http://{}/", server.local_addr()),
    ///     requests: Some(50),
    ///     ..weft_load::Config::default()
    /// })?;
    /// let html = report.to_html();
    /// assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
    /// assert!(!html.contains("<script src") && !html.contains("http://fonts"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn to_html(&self) -> String {
        let mut s = String::new();
        let title = format!("weft-load: {}", self.name);
        let _ = write!(
            s,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width\"><title>{}</title>\
             <style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
            escape(&title),
            escape(&title)
        );
        self.html_summary(&mut s);
        self.html_totals(&mut s);
        s.push_str("<h2>Over time</h2>\n");
        s.push_str(&self.chart());
        self.html_percentiles(&mut s);
        self.html_errors(&mut s);
        self.html_series(&mut s);
        s.push_str("</body></html>\n");
        s
    }

    fn html_summary(&self, s: &mut String) {
        let started = httpdate::fmt_http_date(self.started_at);
        let since_epoch = self
            .started_at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let runs = if self.runs > 1 {
            format!("{} runs merged, ", self.runs)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "<p class=\"muted\">{runs}{} model, {} users, measured for {} s from {} ({} ms since the epoch); intervals of {} ms.</p>",
            self.model,
            thousands(self.concurrency as u64),
            sig3(self.duration_secs),
            escape(&started),
            since_epoch,
            self.interval.as_millis()
        );
    }

    fn html_totals(&self, s: &mut String) {
        s.push_str("<h2>Totals</h2>\n<table>\n");
        let mut row = |k: &str, v: String| {
            let _ = writeln!(s, "<tr><td>{k}</td><td>{}</td></tr>", escape(&v));
        };
        row("requests", thousands(self.requests));
        row("successes", thousands(self.successes));
        let pct = if self.requests == 0 {
            0.0
        } else {
            100.0 * self.failures as f64 / self.requests as f64
        };
        row(
            "failures",
            format!("{} ({pct:.2} %)", thousands(self.failures)),
        );
        row("throughput", format!("{:.1} req/s", self.throughput));
        if let Some(t) = self.target_rate {
            row("target rate", format!("{t:.1} req/s"));
        }
        row("failures/s", format!("{:.1}", self.failures_per_sec));
        row("response bytes", thousands(self.body_bytes));
        if let Some(h) = &self.handshake {
            row(
                "TLS handshakes",
                format!(
                    "{} (median {} ms, p99 {} ms; not in the latencies)",
                    thousands(self.handshakes),
                    sig3(h.p50_ms),
                    sig3(h.p99_ms)
                ),
            );
        }
        s.push_str("</table>\n");
    }

    /// Throughput and latency over time, as inline SVG.
    fn chart(&self) -> String {
        let secs = |d: std::time::Duration| d.as_secs_f64();
        // Each interval's value drawn at its middle.
        let line = |label: &str, f: &dyn Fn(&Interval) -> f64| Series {
            label: label.into(),
            points: self
                .series
                .iter()
                .map(|i| (secs(i.start) + secs(i.duration) / 2.0, f(i)))
                .collect(),
        };
        let panels = [
            LinePanel {
                title: "Throughput, requests/s".into(),
                series: vec![
                    line("requests/s", &|i| i.throughput),
                    line("failures/s", &|i| {
                        if i.requests == 0 {
                            0.0
                        } else {
                            i.throughput * i.failures as f64 / i.requests as f64
                        }
                    }),
                ],
                marker: None,
            },
            // No latency in an interval (say every connection refused):
            // a gap, not a point at 0.
            LinePanel {
                title: "Latency, ms".into(),
                series: vec![
                    line("p50", &|i| latency(i, i.p50_ms)),
                    line("p99", &|i| latency(i, i.p99_ms)),
                ],
                marker: None,
            },
        ];
        line_chart(&self.name, "s", &panels)
    }

    fn html_percentiles(&self, s: &mut String) {
        s.push_str("<h2>Latency percentiles, ms</h2>\n<table><tr>");
        for (_, name) in PERCENTILES {
            let _ = write!(s, "<th>{name}</th>");
        }
        s.push_str("<th>mean</th><th>stdev</th></tr>\n<tr>");
        let h = &self.histogram;
        for (q, _) in PERCENTILES {
            let v = if h.is_empty() {
                0
            } else if q >= 1.0 {
                h.max()
            } else {
                h.value_at_quantile(q)
            };
            let _ = write!(s, "<td>{}</td>", sig3(v as f64 / 1e3));
        }
        let _ = writeln!(
            s,
            "<td>{}</td><td>{}</td></tr>\n</table>\n<p class=\"muted\">From {} latencies (HDR histogram, 3 significant digits{}).</p>",
            sig3(self.latency.mean_ms),
            sig3(self.latency.stdev_ms),
            thousands(h.len()),
            if self.runs > 1 {
                "; the runs' histograms added, so these are the percentiles of all their requests"
            } else {
                ""
            }
        );
    }

    fn html_errors(&self, s: &mut String) {
        let e = &self.errors;
        if e.total() > 0 {
            s.push_str("<h2>Errors</h2>\n<table><tr><th>class</th><th>count</th></tr>\n");
            for (k, v) in [
                ("connect", e.connect),
                ("read", e.read),
                ("write", e.write),
                ("timeout", e.timeout),
                ("protocol", e.protocol),
                ("tls", e.tls),
            ] {
                if v > 0 {
                    let _ = writeln!(s, "<tr><td>{k}</td><td>{}</td></tr>", thousands(v));
                }
            }
            for (code, n) in &e.status {
                let _ = writeln!(
                    s,
                    "<tr><td>status {code}</td><td>{}</td></tr>",
                    thousands(*n)
                );
            }
            s.push_str("</table>\n");
        }
        if !self.status_counts.is_empty() {
            s.push_str(
                "<h2>Responses by status</h2>\n<table><tr><th>status</th><th>count</th></tr>\n",
            );
            for (code, n) in &self.status_counts {
                let _ = writeln!(s, "<tr><td>{code}</td><td>{}</td></tr>", thousands(*n));
            }
            s.push_str("</table>\n");
        }
    }

    fn html_series(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "<h2>Series</h2>\n<details><summary>{} intervals of {} ms</summary>\n\
             <table id=\"series\"><tr><th>start, s</th><th>requests</th><th>failures</th>\
             <th>requests/s</th><th>p50, ms</th><th>p99, ms</th></tr>",
            self.series.len(),
            self.interval.as_millis()
        );
        for i in &self.series {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td></tr>",
                i.start.as_secs_f64(),
                i.requests,
                i.failures,
                i.throughput,
                latency_text(i, i.p50_ms),
                latency_text(i, i.p99_ms)
            );
        }
        s.push_str("</table></details>\n");
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use crate::testing::{report, spread};

    #[test]
    fn an_interval_without_latencies_is_a_gap_in_the_latency_lines() {
        // Requests in seconds 0, 1, 3 and 4: second 2 has none.
        let samples: Vec<_> = spread(1, 500, 5.0)
            .into_iter()
            .filter(|(t, _)| t.as_secs() != 2)
            .collect();
        let r = report(
            "gap",
            SystemTime::UNIX_EPOCH,
            Duration::from_secs(1),
            &samples,
        );
        assert_eq!(r.series.len(), 5);
        assert_eq!(r.series[2].latencies, 0);
        let html = r.to_html();
        let (throughput, latency) = html.split_once("Latency, ms").unwrap();
        // The x of second 2's middle: 2.5 of 4.5 s on a 620-pixel axis
        // from 70.
        let x = format!("{:.1},", 70.0 + 2.5 / 4.5 * 620.0);
        // Throughput is 0 there (a point); p50 and p99 have none: each
        // line is two pieces, seconds 0-1 and 3-4.
        assert!(throughput.contains(&x), "{throughput}");
        let latency = latency.split("</svg>").next().unwrap();
        assert!(!latency.contains(&x), "{latency}");
        assert_eq!(latency.matches("<polyline").count(), 4, "{latency}");
        // The series table: a dash, not 0.
        assert!(
            html.contains(
                "<tr><td>2</td><td>0</td><td>0</td><td>0.0</td><td>–</td><td>–</td></tr>"
            )
        );
    }
}
