//! `weft-bench --soak`: one HTTP server under a long mixed load. Does
//! anything leak?
//!
//! ```text
//! cargo run --release -p weft-bench -- --soak                  # 10 minutes, Weft; writes docs/soak.md
//! cargo run --release -p weft-bench -- --soak --soak-minutes 2 --runtimes tokio-mt
//! ```
//!
//! The server is the suite's `http-server` worker (for Weft: `weft-http` on
//! virtual threads), a process of its own. It is driven in consecutive
//! windows of [`WINDOW`] by three `weft-load` loads at once:
//!
//! - **keep-alive**: [`KEEP_ALIVE_USERS`] users on `GET /hello`, each over
//!   one connection for the whole window;
//! - **short-lived**: [`SHORT_USERS`] users that open a new connection for
//!   every `GET /hello` — accept, register, close, free, thousands of times
//!   a second;
//! - **slow**: [`SLOW_USERS`] keep-alive users on `GET /sleep`, whose
//!   handler sleeps 1 s — parked threads and timers.
//!
//! Every load ends with its window and closes its connections, so between
//! windows the server should be back where it started. After each window
//! the soak waits (at most [`SETTLE`]) for the server's descriptors to
//! drop back to their count after the window before, then records its
//! resident memory (`VmRSS`), descriptors and OS threads: the *idle*
//! sample. A sampler also records them every [`SAMPLE_EVERY`], load or not,
//! for the curve.
//!
//! The verdict compares idle samples after the warm-up (the first
//! [`WARMUP_SHARE`] of the soak, at least one window): memory is *flat* if
//! the last idle sample is within [`FLAT_SLACK`] (or [`FLAT_SLACK_KIB`],
//! whichever is larger) of the first; descriptors and OS threads if they
//! never exceed their highest idle count during the warm-up (a spare
//! carrier that starts under load and retires after its keep-alive makes
//! the thread count move by one between windows: not growth). Any failed request is reported with its class.
//! Printed as it goes (one line per window), then written to
//! `<out>/soak.json` and `<out>/soak.svg`; a soak of 10 minutes or more
//! also rewrites `docs/soak.md` and `docs/soak.svg`.

use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use weft_bench_support::child::{open_fds, os_threads, vm_rss_kib};
use weft_bench_support::format::thousands;
use weft_bench_support::svg::{LinePanel, Series, line_chart};

use crate::proc::{Launcher, Server};

/// One round of the three loads.
pub const WINDOW: Duration = Duration::from_secs(20);
/// Users of the keep-alive load.
pub const KEEP_ALIVE_USERS: usize = 100;
/// Users of the connection-per-request load.
pub const SHORT_USERS: usize = 20;
/// Users of the slow-handler load.
pub const SLOW_USERS: usize = 500;
/// Longest wait after a window for the server's descriptors to drop back.
pub const SETTLE: Duration = Duration::from_secs(10);
/// Interval of the sampler's curve.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Share of the soak that counts as warm-up.
pub const WARMUP_SHARE: f64 = 0.2;
/// Growth of idle resident memory still called flat, relative…
pub const FLAT_SLACK: f64 = 0.10;
/// …or absolute, whichever is larger. Not zero: Weft's stack pool keeps up
/// to 1,024 released stacks resident for reuse, a few pages each, so a
/// concurrency peak after the warm-up may raise the idle plateau once by a
/// few MiB (measured: steps of 4.7 MiB to the same 77.7 MiB plateau in
/// two runs) without anything leaking.
pub const FLAT_SLACK_KIB: u64 = 8 * 1024;

/// The server's state at one moment.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the first window started.
    pub t: f64,
    pub rss_kib: u64,
    pub fds: u64,
    pub threads: u64,
}

/// One load's figures in one window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadFigures {
    pub name: String,
    pub successes: u64,
    pub requests_per_sec: f64,
    pub p99_ms: f64,
    pub failures: u64,
    /// The failures by class, as `weft-load` names them (empty if none).
    pub errors: String,
}

/// One window: its loads, then the idle sample after it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Window {
    pub index: usize,
    pub loads: Vec<LoadFigures>,
    pub idle: Sample,
    /// How long the descriptors took to drop back (or `SETTLE`).
    pub settle_ms: u64,
}

impl Window {
    /// Failed requests of all loads.
    pub fn failures(&self) -> u64 {
        self.loads.iter().map(|l| l.failures).sum()
    }

    /// The window's figures as the progress line and the report show them:
    /// req/s of each load, keep-alive p99, idle RSS, fds, OS threads,
    /// failures.
    fn cells(&self) -> [String; 8] {
        let rate = |i: usize| format!("{:.0}", self.loads[i].requests_per_sec);
        [
            rate(0),
            rate(1),
            rate(2),
            format!("{:.2} ms", self.loads[0].p99_ms),
            format!("{:.1} MiB", self.idle.rss_kib as f64 / 1024.0),
            self.idle.fds.to_string(),
            self.idle.threads.to_string(),
            self.failures().to_string(),
        ]
    }
}

/// Everything the soak measured, and its verdict.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Soak {
    pub runtime: String,
    /// Where and when it ran (filled in by the caller).
    pub machine: String,
    pub minutes: f64,
    /// Windows that count as warm-up.
    pub warmup_windows: usize,
    pub warmup_secs: f64,
    /// Before the first window.
    pub start: Sample,
    pub windows: Vec<Window>,
    pub curve: Vec<Sample>,
    pub requests: u64,
    pub failures: u64,
    pub memory_flat: bool,
    pub fds_flat: bool,
    pub threads_flat: bool,
    /// Idle RSS after the warm-up, first and last.
    pub rss_after_warmup_kib: (u64, u64),
}

impl Soak {
    /// Whether nothing leaked and nothing failed.
    pub fn passed(&self) -> bool {
        self.failures == 0 && self.memory_flat && self.fds_flat && self.threads_flat
    }
}

fn sample(pid: &str, t0: Instant) -> Option<Sample> {
    Some(Sample {
        t: t0.elapsed().as_secs_f64(),
        rss_kib: vm_rss_kib(pid)?,
        fds: open_fds(pid)?,
        threads: os_threads(pid)?,
    })
}

fn load(
    port: u16,
    name: &'static str,
    path: &str,
    users: usize,
    keep_alive: bool,
) -> std::thread::JoinHandle<Result<LoadFigures, String>> {
    let config = weft_load::Config {
        url: format!("http://127.0.0.1:{port}{path}"),
        concurrency: users,
        duration: Some(WINDOW),
        ramp_up: Duration::from_secs(1),
        keep_alive,
        timeout: Duration::from_secs(30),
        name: Some(name.into()),
        ..weft_load::Config::default()
    };
    std::thread::spawn(move || {
        let r = weft_load::run(&config).map_err(|e| format!("{name}: {e}"))?;
        Ok(LoadFigures {
            name: name.into(),
            successes: r.successes,
            requests_per_sec: r.successes as f64 / r.duration_secs,
            p99_ms: r.latency.p99_ms,
            failures: r.failures,
            errors: if r.failures == 0 {
                String::new()
            } else {
                format!("{:?}", r.errors)
            },
        })
    })
}

/// Runs the soak on `launcher`'s `http-server` for `minutes`.
pub fn run(launcher: &Launcher, runtime: &str, minutes: f64) -> Result<Soak, String> {
    if !(minutes.is_finite() && minutes > 0.0) {
        return Err(format!("--soak-minutes must be positive, got {minutes}"));
    }
    let total = Duration::from_secs_f64(minutes * 60.0);
    let windows = (total.as_secs_f64() / WINDOW.as_secs_f64()).ceil().max(2.0) as usize;
    let warmup_windows = ((windows as f64 * WARMUP_SHARE).round() as usize).clamp(1, windows - 1);
    // The worker's own watchdog: every window and settle, and a margin.
    let limit = (WINDOW + SETTLE) * windows as u32 + Duration::from_secs(120);
    let server = Server::start(launcher, "http-server", limit)?;
    let pid = server.pid().to_string();
    let t0 = Instant::now();
    let start = sample(&pid, t0).ok_or("cannot read the server's /proc entries")?;

    let curve = Arc::new(Mutex::new(vec![start]));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (curve, stop, pid) = (curve.clone(), stop.clone(), pid.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(SAMPLE_EVERY);
                if let Some(s) = sample(&pid, t0) {
                    curve.lock().unwrap().push(s);
                }
            }
        })
    };

    eprintln!(
        "soak: {runtime} http-server (pid {pid}), {windows} windows of {WINDOW:?} ({warmup_windows} warm-up): \
         {KEEP_ALIVE_USERS} keep-alive users on /hello, {SHORT_USERS} users with a new connection per request, \
         {SLOW_USERS} users on /sleep (1 s)"
    );
    eprintln!(
        "{:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>5} {:>7} {:>8}",
        "window", "keep /s", "short /s", "slow /s", "p99", "idle RSS", "fds", "threads", "failures"
    );
    let mut result = Vec::with_capacity(windows);
    let outcome = (|| {
        for index in 0..windows {
            let handles = [
                load(server.port, "keep-alive", "/hello", KEEP_ALIVE_USERS, true),
                load(server.port, "short-lived", "/hello", SHORT_USERS, false),
                load(server.port, "slow", "/sleep", SLOW_USERS, true),
            ];
            let mut loads = Vec::new();
            for h in handles {
                loads.push(
                    h.join()
                        .map_err(|_| "a load thread panicked".to_string())??,
                );
            }
            let settled = Instant::now();
            let before = result.last().map_or(start.fds, |w: &Window| w.idle.fds);
            let idle = loop {
                let s = sample(&pid, t0).ok_or("the server is gone")?;
                if s.fds <= before || settled.elapsed() >= SETTLE {
                    break s;
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let w = Window {
                index,
                loads,
                idle,
                settle_ms: settled.elapsed().as_millis() as u64,
            };
            let [keep, short, slow, p99, rss, fds, threads, failures] = w.cells();
            eprintln!(
                "{:>7} {keep:>10} {short:>10} {slow:>10} {p99:>10} {rss:>10} {fds:>5} {threads:>7} {failures:>8}{}",
                format!("{}/{windows}", index + 1),
                if index + 1 == warmup_windows {
                    "  (end of warm-up)"
                } else {
                    ""
                }
            );
            result.push(w);
        }
        Ok::<(), String>(())
    })();
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    server.stop()?;
    outcome?;

    let curve = std::mem::take(&mut *curve.lock().unwrap());
    let mut soak = Soak {
        runtime: runtime.into(),
        machine: String::new(),
        minutes,
        warmup_windows,
        warmup_secs: result
            .get(warmup_windows)
            .map_or(0.0, |w| w.idle.t - WINDOW.as_secs_f64()),
        start,
        windows: result,
        curve,
        requests: 0,
        failures: 0,
        memory_flat: false,
        fds_flat: false,
        threads_flat: false,
        rss_after_warmup_kib: (0, 0),
    };
    soak.judge();
    Ok(soak)
}

impl Soak {
    /// Computes the totals and the verdict from the windows (see the module
    /// docs), so that a saved run can be judged again (`--soak-replay`).
    pub fn judge(&mut self) {
        let w = self.warmup_windows.max(1);
        let Some(after) = self.windows.get(w..) else {
            return;
        };
        let (Some(first), Some(last)) = (after.first(), after.last()) else {
            return;
        };
        let (first, last) = (first.idle, last.idle);
        let slack = ((first.rss_kib as f64 * FLAT_SLACK) as u64).max(FLAT_SLACK_KIB);
        // The highest idle counts up to the end of the warm-up.
        let warm = self.windows[..w]
            .iter()
            .map(|x| x.idle)
            .fold(self.start, |a, b| Sample {
                fds: a.fds.max(b.fds),
                threads: a.threads.max(b.threads),
                ..a
            });
        let loads = || self.windows.iter().flat_map(|x| &x.loads);
        self.requests = loads().map(|l| l.successes + l.failures).sum();
        self.failures = self.windows.iter().map(Window::failures).sum();
        self.memory_flat = last.rss_kib <= first.rss_kib + slack;
        self.fds_flat = after.iter().all(|x| x.idle.fds <= warm.fds);
        self.threads_flat = after.iter().all(|x| x.idle.threads <= warm.threads);
        self.rss_after_warmup_kib = (first.rss_kib, last.rss_kib);
    }
}

/// The curve as a chart: resident memory, descriptors and OS threads over
/// time, the end of the warm-up marked.
pub fn chart(s: &Soak) -> String {
    let series = |label: &str, f: fn(&Sample) -> f64| Series {
        label: label.into(),
        points: s.curve.iter().map(|x| (x.t, f(x))).collect(),
    };
    let marker = Some((s.warmup_secs, "end of warm-up".to_string()));
    line_chart(
        &format!(
            "Soak: {} http-server, {:.0} min of mixed load",
            s.runtime, s.minutes
        ),
        "s",
        &[
            LinePanel {
                title: "resident memory (VmRSS), MiB".into(),
                series: vec![series("RSS", |x| x.rss_kib as f64 / 1024.0)],
                marker: marker.clone(),
            },
            LinePanel {
                title: "open descriptors and OS threads".into(),
                series: vec![
                    series("descriptors", |x| x.fds as f64),
                    series("OS threads", |x| x.threads as f64),
                ],
                marker,
            },
        ],
    )
}

/// The report of a soak as Markdown (`docs/soak.md`).
pub fn markdown(s: &Soak, command: &str) -> String {
    let yes = |b: bool| if b { "yes" } else { "**no**" };
    let mut m = String::new();
    m.push_str("# Soak: the HTTP server under a long mixed load\n\n");
    m.push_str(&format!(
        "Generated by `{command}` ({}). The server is `weft-bench`'s \
         `http-server` worker ({}); the method is in `bench/src/soak.rs`. Each window of {} s runs \
         three loads at once: {KEEP_ALIVE_USERS} keep-alive users on `GET /hello`, \
         {SHORT_USERS} users opening a new connection per request, {SLOW_USERS} keep-alive \
         users on `GET /sleep` (the handler sleeps 1 s). After each window, once the \
         server's descriptors are back to their count after the window before (at most {} s), its idle \
         resident memory, descriptors and OS threads are recorded.\n\n",
        s.machine,
        s.runtime,
        WINDOW.as_secs(),
        SETTLE.as_secs()
    ));
    m.push_str("![resident memory, descriptors and OS threads over the soak](soak.svg)\n\n");
    m.push_str("| verdict | |\n|---|---|\n");
    m.push_str(&format!(
        "| requests (all loads) | {} |\n| failed requests | {} |\n",
        thousands(s.requests),
        thousands(s.failures)
    ));
    m.push_str(&format!(
        "| idle RSS after warm-up, first → last | {:.1} → {:.1} MiB |\n",
        s.rss_after_warmup_kib.0 as f64 / 1024.0,
        s.rss_after_warmup_kib.1 as f64 / 1024.0
    ));
    m.push_str(&format!(
        "| memory flat (within {:.0} % or {} MiB) | {} |\n| descriptors never above the warm-up's | {} |\n| OS threads never above the warm-up's | {} |\n\n",
        FLAT_SLACK * 100.0,
        FLAT_SLACK_KIB / 1024,
        yes(s.memory_flat),
        yes(s.fds_flat),
        yes(s.threads_flat)
    ));
    if s.runtime == "weft" {
        m.push_str(
            "Memory is not held to zero growth: Weft's stack pool keeps up to 1,024 released \
             stacks resident for reuse, a few pages each, so a concurrency peak after the \
             warm-up can raise the idle plateau once by a few MiB without anything leaking.\n\n",
        );
    }
    m.push_str(&format!(
        "At start: {:.1} MiB, {} descriptors, {} OS threads.\n\n",
        s.start.rss_kib as f64 / 1024.0,
        s.start.fds,
        s.start.threads
    ));
    m.push_str("| window | keep-alive req/s | short-lived req/s | slow req/s | keep-alive p99 | idle RSS | fds | OS threads | failures |\n");
    m.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for w in &s.windows {
        let why: Vec<String> = w
            .loads
            .iter()
            .filter(|l| l.failures > 0)
            .map(|l| format!("{}: {}", l.name, l.errors))
            .collect();
        m.push_str(&format!(
            "| {} | {}{} |\n",
            w.index + 1,
            w.cells().join(" | "),
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join("; "))
            }
        ));
    }
    m
}

/// Writes `<out>/soak.json` and `<out>/soak.svg`, and with `docs` also
/// `docs/soak.md` and `docs/soak.svg`.
pub fn write(s: &Soak, out: &Path, docs: Option<&Path>, command: &str) -> Result<(), String> {
    let json = serde_json::to_string_pretty(s).map_err(|e| e.to_string())?;
    crate::write(&out.join("soak.json"), &json)?;
    let svg = chart(s);
    crate::write(&out.join("soak.svg"), &svg)?;
    if let Some(docs) = docs {
        crate::write(&docs.join("soak.svg"), &svg)?;
        crate::write(&docs.join("soak.md"), &markdown(s, command))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soak(rss_mib: &[u64], fds: &[u64], failures: u64) -> Soak {
        let windows = rss_mib
            .iter()
            .zip(fds)
            .enumerate()
            .map(|(index, (&rss, &fds))| Window {
                index,
                loads: vec![LoadFigures {
                    name: "keep-alive".into(),
                    successes: 1000,
                    requests_per_sec: 50.0,
                    p99_ms: 1.0,
                    failures: if index == 1 { failures } else { 0 },
                    errors: String::new(),
                }],
                idle: Sample {
                    t: 20.0 * (index + 1) as f64,
                    rss_kib: rss * 1024,
                    fds,
                    threads: 6,
                },
                settle_ms: 0,
            })
            .collect();
        let mut s = Soak {
            runtime: "weft".into(),
            machine: String::new(),
            minutes: 1.0,
            warmup_windows: 2,
            warmup_secs: 40.0,
            start: Sample {
                t: 0.0,
                rss_kib: 5 * 1024,
                fds: 10,
                threads: 6,
            },
            windows,
            curve: Vec::new(),
            requests: 0,
            failures: 0,
            memory_flat: false,
            fds_flat: false,
            threads_flat: false,
            rss_after_warmup_kib: (0, 0),
        };
        s.judge();
        s
    }

    #[test]
    fn a_plateau_step_is_flat_and_steady_growth_is_not() {
        let step = soak(&[70, 72, 72, 77, 77, 78], &[11; 6], 0);
        assert!(step.memory_flat && step.passed(), "{step:?}");
        assert_eq!(step.rss_after_warmup_kib, (72 * 1024, 78 * 1024));
        assert_eq!(step.requests, 6000);
        let leak = soak(&[70, 72, 76, 80, 84, 88], &[11; 6], 0);
        assert!(!leak.memory_flat && !leak.passed());
    }

    #[test]
    fn descriptors_above_the_warm_up_and_failures_fail() {
        let fds = soak(&[70; 6], &[11, 11, 11, 12, 11, 11], 0);
        assert!(fds.memory_flat && !fds.fds_flat && !fds.passed());
        let failed = soak(&[70; 6], &[11; 6], 3);
        assert_eq!(failed.failures, 3);
        assert_eq!(failed.requests, 6003);
        assert!(!failed.passed());
    }
}
