//! An HTTP load generator on weft virtual threads: one virtual thread per
//! simulated user, each with its own keep-alive connection, latencies in an
//! HDR histogram. The `weft-load` binary is a thin CLI over [`run`]; the lab
//! calls [`run`] in-process and reads the [`Report`].
//!
//! ```
//! use std::time::Duration;
//! use weft_http::{Response, Server, ServerConfig};
//!
//! let server = Server::bind("127.0.0.1:0", ServerConfig::default())?
//!     .serve(|_req: &mut weft_http::Request<'_>| Response::text("hello"))?;
//!
//! let report = weft_load::run(&weft_load::Config {
//!     url: format!("http://{}/", server.local_addr()),
//!     concurrency: 4,
//!     requests: Some(200),
//!     ..weft_load::Config::default()
//! })?;
//! assert_eq!(report.requests, 200);
//! assert_eq!(report.failures, 0);
//! assert_eq!(server.stats().requests, 200);
//! println!("{}", report.table());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Models
//!
//! - **Closed** (default): `concurrency` users, each sending its next
//!   request as soon as the previous one is answered, until `requests`
//!   have been sent or `duration` has passed. Latency is measured from the
//!   moment each request is sent. In a `duration` run a request counts
//!   when its answer arrives inside the measured window (as in wrk): one
//!   sent during warmup and answered inside counts, one still in flight at
//!   the end is finished but not counted — so that long requests (say a
//!   1 s handler) neither inflate nor deflate the rate by
//!   `concurrency / window`.
//! - **Open** (`rate` set): requests are *scheduled* at `rate` per second
//!   (request *i* at `start + i / rate`) and handed to whichever user is
//!   free; latency is measured from the **intended** start time, so a
//!   server that stalls is charged for the requests that could not even be
//!   sent meanwhile (coordinated omission corrected, as in wrk2). The
//!   report gives the achieved rate beside the target.
//!
//! # Reports: table, JSON, HTML
//!
//! The CLI prints a table ([`Report::table`]); `--json` (or `--json -`)
//! prints the [JSON report](#json-report) instead and `--json FILE` (or
//! `--json=FILE`, in `merge` too) writes it to a file; `--html FILE` writes a self-contained page ([`Report::to_html`]:
//! throughput and p50/p99 over time, the percentile table, errors, the
//! series as a table; inline SVG and CSS, no script, no external resource,
//! so it opens offline).
//!
//! # JSON report
//!
//! Schema version 1 ([`VERSION`]; `"format": "weft-load-report"`). Besides
//! the totals of the table (`requests`, `successes`, `failures`,
//! `duration_secs`, `throughput`, `latency`, `errors`, `status_counts`,
//! …) it carries everything needed to merge runs exactly:
//!
//! | field | what |
//! |---|---|
//! | `version`, `format` | the schema; a reader refuses other versions |
//! | `runs` | runs in the report: 1, or the sum for a merge |
//! | `started_at_unix_ms` | wall clock at the start of the measured phase |
//! | `histogram` | every measured latency (answered requests, failures with a status included), µs: HdrHistogram V2, deflate, base64 (HdrHistogram's own libraries and tools read it), 1 µs .. 1 h, 3 significant digits |
//! | `handshake_histogram` | `https://`: TLS handshake times, the same encoding (else `null`) |
//! | `interval_ms` | length of an interval of `series` (`--interval`, default 1 s) |
//! | `run_ids` | ids of the runs in the report (random; a merge: all its runs'), so that merging a run twice is refused; a report without them gets one derived from its content |
//! | `series[]` | per interval: `start_ms` (`i × interval_ms` from the start), `duration_ms` (as sampled), `requests`, `failures`, `throughput` (req/s), `p50_ms`, `p99_ms`, `histogram` (the interval's latencies) |
//!
//! The series adds up: its requests are the report's, its histograms sum
//! to the report's histogram ([`Report::from_json`] checks the latter).
//!
//! # Many agents: run them with what you have, then merge
//!
//! One machine's load generator runs out of CPU or ports before a fleet of
//! servers does. weft-load has no controller of its own: start N agents
//! with the orchestrator you already use, each writing `--json FILE`,
//! collect the files, and `weft-load merge` them ([`merge`]): the
//! histograms are added, so the merged p50, p99, p99.9 are the
//! percentiles of all the requests of all agents (to 0.1 %), not an
//! average of percentiles; counts and errors are summed; the series are
//! lined up by wall clock (default, `--align wall`: agents that ran at
//! the same time, clocks kept by NTP) or by offset from each run's start
//! (`--align offset`). Give every agent the same `--interval`, and its
//! share of the load (`-R total/N` in the open model). A run given twice
//! (or in a merged report beside it) and, by wall clock, a run that
//! overlaps no other in time are refused with the files named
//! (`--allow-duplicates`, `--allow-disjoint`).
//!
//! With `parallel` over `ssh` (each host has `weft-load` on its path):
//!
//! ```text
//! # one job per host (1/), the report fetched back (--return) and removed there
//! parallel --tag -S 1/host1,1/host2,1/host3,1/host4 --return {}.json --cleanup \
//!   'weft-load -q -c 250 -R 5000 -d 5m --warmup 30s --json={}.json http://target:8080/ > /dev/null' \
//!   ::: agent-1 agent-2 agent-3 agent-4
//! weft-load merge agent-*.json --json merged.json --html report.html
//! ```
//!
//! or plain `ssh` in a loop:
//!
//! ```text
//! for h in host1 host2 host3 host4; do
//!   ssh "$h" weft-load -q -c 250 -R 5000 -d 5m --json=- http://target:8080/ > "$h.json" &
//! done; wait
//! weft-load merge host*.json --html report.html
//! ```
//!
//! (`--json=-`, `--json -` and `--json` alone: the report on standard
//! output.) On Kubernetes,
//! an indexed Job runs the agents and each pod prints its report (`-q`
//! keeps standard error empty), so its log is the file to merge:
//!
//! ```text
//! apiVersion: batch/v1
//! kind: Job
//! metadata: { name: weft-load }
//! spec:
//!   completions: 8
//!   parallelism: 8          # all at once: the merge lines them up by wall clock
//!   completionMode: Indexed
//!   template:
//!     spec:
//!       restartPolicy: Never
//!       containers:
//!       - name: agent
//!         image: registry.example/weft-load:latest
//!         args: ["-q", "-c", "250", "-R", "2500", "-d", "5m", "--warmup", "30s",
//!                "--json", "http://my-service.default.svc:8080/"]
//! ```
//!
//! ```text
//! kubectl wait --for=condition=complete job/weft-load --timeout=10m
//! for p in $(kubectl get pods -l job-name=weft-load -o name); do
//!   kubectl logs "$p" > "${p#pod/}.json"
//! done
//! weft-load merge weft-load-*.json --json merged.json --html report.html
//! ```

#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};
use weft::sync::Unpoison;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use weft_bench_support::format::sig3;
use weft_http::client::{Connection, ErrorKind, Url, encode_request};

mod hdr;
mod html;
mod json;
mod merge;
mod series;
#[cfg(test)]
mod testing;

pub use hdr::DEFAULT_MAX_HISTOGRAM_BYTES;
pub use json::{FORMAT, ParseError, VERSION};
pub use merge::{Align, MergeError, MergeOptions, merge};
pub use series::Interval;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Target URL (`http://host:port/path` or `https://…`).
    pub url: String,
    /// `https://`: accept any certificate (self-signed test servers). The
    /// handshake still checks signatures, so it costs what a verified one
    /// costs (default false: the certificate is verified against the
    /// built-in roots and the host name).
    pub insecure: bool,
    /// Request method (default `GET`).
    pub method: String,
    /// Extra request headers.
    pub headers: Vec<(String, String)>,
    /// Request body (sent with `Content-Length` when not empty).
    pub body: Vec<u8>,
    /// Simulated users = connections = virtual threads (default 10).
    pub concurrency: usize,
    /// Stop after this many measured requests.
    pub requests: Option<u64>,
    /// Stop after this long (measured phase). With neither `requests` nor
    /// `duration`, runs for 10 s.
    pub duration: Option<Duration>,
    /// Open model: target requests per second (all users together).
    pub rate: Option<f64>,
    /// Connect timeout and per-read/write timeout of a request (default
    /// 10 s).
    pub timeout: Duration,
    /// Run this long before measuring (requests are sent, not counted).
    pub warmup: Duration,
    /// Closed model: start the users evenly spread over this time instead
    /// of all at once (JMeter's ramp-up), so that their requests do not
    /// arrive in synchronized waves. Keep it within `warmup` to measure a
    /// steady state.
    pub ramp_up: Duration,
    /// Reuse connections (default true).
    pub keep_alive: bool,
    /// Row name in the table (default `METHOD path`).
    pub name: Option<String>,
    /// Runtime for the users' virtual threads (default: weft's default
    /// runtime).
    pub runtime: Option<weft::Runtime>,
    /// Show a live progress line on stderr when it is a terminal.
    pub progress: bool,
    /// Length of an interval of the report's time series (default 1 s,
    /// at least [`MIN_INTERVAL`]): each interval has its own latency
    /// histogram.
    pub interval: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            url: String::new(),
            insecure: false,
            method: "GET".into(),
            headers: Vec::new(),
            body: Vec::new(),
            concurrency: 10,
            requests: None,
            duration: None,
            rate: None,
            timeout: Duration::from_secs(10),
            warmup: Duration::ZERO,
            ramp_up: Duration::ZERO,
            keep_alive: true,
            name: None,
            runtime: None,
            progress: false,
            interval: Duration::from_secs(1),
        }
    }
}

/// Errors by class. A request fails either without a response (connect,
/// read, write, timeout, protocol) or with a status `>= 400`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Errors {
    /// Connections that could not be established.
    pub connect: u64,
    /// Failures receiving the response (reset, closed early).
    pub read: u64,
    /// Failures sending the request.
    pub write: u64,
    /// Connect/read/write timeouts.
    pub timeout: u64,
    /// Malformed responses.
    pub protocol: u64,
    /// TLS handshakes that failed (certificate verification or another
    /// TLS error).
    pub tls: u64,
    /// Responses with status `>= 400`, by status.
    pub status: BTreeMap<u16, u64>,
}

impl Errors {
    /// All failures.
    pub fn total(&self) -> u64 {
        self.connect
            + self.read
            + self.write
            + self.timeout
            + self.protocol
            + self.tls
            + self.status.values().sum::<u64>()
    }

    fn merge(&mut self, o: &Errors) {
        self.connect += o.connect;
        self.read += o.read;
        self.write += o.write;
        self.timeout += o.timeout;
        self.protocol += o.protocol;
        self.tls += o.tls;
        for (k, v) in &o.status {
            *self.status.entry(*k).or_default() += v;
        }
    }
}

/// Latency summary in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Mean.
    pub mean_ms: f64,
    /// Minimum.
    pub min_ms: f64,
    /// Maximum.
    pub max_ms: f64,
    /// Standard deviation.
    pub stdev_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
}

/// The outcome of a run, or of a [`merge`] of runs.
#[derive(Clone, Debug)]
pub struct Report {
    /// Row name (a merge: the runs' names, joined by ` + `).
    pub name: String,
    /// `"closed"` or `"open"` (a merge of both: `"mixed"`).
    pub model: &'static str,
    /// Runs in this report: 1 for a run, their sum for a merge.
    pub runs: usize,
    /// Users (connections).
    pub concurrency: usize,
    /// Measured requests completed (successes + failures).
    pub requests: u64,
    /// Requests answered with a status below 400.
    pub successes: u64,
    /// Failed requests (see [`Errors`]).
    pub failures: u64,
    /// Length of the measured phase, seconds.
    pub duration_secs: f64,
    /// Completed requests per second (the achieved rate).
    pub throughput: f64,
    /// Failures per second.
    pub failures_per_sec: f64,
    /// Open model: the target rate.
    pub target_rate: Option<f64>,
    /// Latency of answered requests (open model: from the intended start).
    /// For `https://` it leaves out the TLS handshake of a new connection
    /// (see [`handshake`](Report::handshake)), like `oha` and k6.
    pub latency: Latency,
    /// `https://`: time of the TLS handshakes in the measured phase (after
    /// the TCP connect), reported apart from request latency.
    pub handshake: Option<Latency>,
    /// `https://`: TLS handshakes completed in the measured phase.
    pub handshakes: u64,
    /// Errors by class.
    pub errors: Errors,
    /// Responses by status.
    pub status_counts: BTreeMap<u16, u64>,
    /// Response body bytes received.
    pub body_bytes: u64,
    /// The latency histogram, microseconds (1 µs .. 1 h, 3 significant
    /// digits).
    pub histogram: Histogram<u64>,
    /// `https://`: the TLS handshake histogram, microseconds.
    pub handshake_histogram: Option<Histogram<u64>>,
    /// Wall-clock time at the start of the measured phase (a merge: the
    /// earliest start).
    pub started_at: SystemTime,
    /// Length of an interval of `series`.
    pub interval: Duration,
    /// Requests, failures and latency per interval, from the start of the
    /// measured phase.
    pub series: Vec<Interval>,
    /// Ids of the runs in the report: one for a run (random), all of the
    /// merged runs' for a merge. [`merge`] refuses a run that is in two of
    /// the reports it is given.
    pub run_ids: Vec<String>,
}

/// Written as the JSON report (see [`Report::to_json`]).
impl Serialize for Report {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        json::ReportJson::of(self).serialize(s)
    }
}

/// Why a run could not start.
#[derive(Debug)]
pub enum Error {
    /// The configuration is invalid (bad URL, zero users, …).
    Config(String),
    /// The users' threads could not be started.
    Io(io::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config(m) => write!(f, "invalid load configuration: {m}"),
            Error::Io(e) => write!(f, "load generator: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

/// Raises `RLIMIT_NOFILE` to its hard limit; returns the new soft limit.
pub fn raise_fd_limit() -> io::Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if r.rlim_cur < r.rlim_max {
        r.rlim_cur = r.rlim_max;
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    // `rlim_t` is not `u64` on every target.
    #[allow(clippy::unnecessary_cast)]
    Ok(r.rlim_cur as u64)
}

/// Per-user tallies, merged at the end.
struct Tally {
    ok: u64,
    errors: Errors,
    status: BTreeMap<u16, u64>,
    bytes: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            ok: 0,
            errors: Errors::default(),
            status: BTreeMap::new(),
            bytes: 0,
        }
    }
}

struct Plan {
    request: Vec<u8>,
    head: bool,
    addr: std::net::SocketAddr,
    /// `https://`: the TLS configuration and the server name.
    tls: Option<(Arc<weft_http::rustls::ClientConfig>, String)>,
    timeout: Duration,
    keep_alive: bool,
    /// Warmup starts here; measuring starts at `measure`.
    t0: Instant,
    measure: Instant,
    end: Option<Instant>,
    limit: Option<u64>,
    rate: Option<f64>,
    claimed: AtomicU64,
    ticket: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    stop: AtomicBool,
    /// The current interval's latencies and counts, one shard per group
    /// of users (a histogram is ~270 KB, so one per user would cost
    /// gigabytes at 10,000 users); the sampler empties them every
    /// interval. `done` and `failed` above are for the progress line only.
    shards: Box<[weft::sync::Mutex<series::Shard>]>,
    /// TLS handshake times, sharded like `shards`.
    hs_hists: Box<[weft::sync::Mutex<Histogram<u64>>]>,
}

/// The shortest [`Config::interval`]: every interval the sampler adds up
/// 16 histograms of ~270 KB (a fraction of a millisecond), and the report
/// keeps ~1 KB per interval.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// The longest duration, warmup, ramp-up, timeout or interval [`run`]
/// accepts: 100 years, so that every deadline it computes is a valid
/// [`Instant`].
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Refuses a method or header that would not make one well-formed request
/// head: a method that is not an HTTP token, a header name that is not,
/// or a value with a line break (which would end the header early or
/// smuggle another one in).
fn check_request_head(config: &Config) -> Result<(), Error> {
    // RFC 9110's tchar.
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    if !token(&config.method) {
        return Err(Error::Config(format!(
            "method {:?} is not an HTTP method (a token: letters, digits, !#$%&'*+-.^_`|~)",
            config.method
        )));
    }
    for (name, value) in &config.headers {
        if !token(name) {
            return Err(Error::Config(format!(
                "header name {name:?} is not an HTTP token"
            )));
        }
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(Error::Config(format!(
                "header {name}: the value {value:?} holds a line break or NUL"
            )));
        }
    }
    Ok(())
}

/// Users per latency histogram shard is `concurrency / HIST_SHARDS`.
const HIST_SHARDS: usize = 16;

/// Runs a load test and returns its report. Blocks the calling thread
/// (virtual or OS) until the run ends.
///
/// # Errors
///
/// An [`Error`] for a configuration that cannot run (no users, a URL it
/// cannot send to, no way to stop); failed requests are not errors but
/// counted in the [`Report`].
///
/// # Examples
///
/// An open-model run (wrk2-style: requests scheduled at a fixed rate,
/// latency charged from the intended start):
///
/// ```
/// use std::time::Duration;
/// use weft_http::{Request, Response};
///
/// let server = weft_http::serve("127.0.0.1:0", |_req: &mut Request<'_>| Response::text("ok"))?;
/// let report = weft_load::run(&weft_load::Config {
///     url: format!("http://{}/", server.local_addr()),
///     concurrency: 8,
///     rate: Some(200.0),
///     duration: Some(Duration::from_millis(500)),
///     ..weft_load::Config::default()
/// })?;
/// assert_eq!(report.failures, 0);
/// assert!(report.requests > 0);
/// println!("{} req/s, p99 {} ms", report.throughput, report.latency.p99_ms);
///
/// let no_users = weft_load::Config { concurrency: 0, ..weft_load::Config::default() };
/// assert!(weft_load::run(&no_users).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run(config: &Config) -> Result<Report, Error> {
    if config.concurrency == 0 {
        return Err(Error::Config("concurrency must be at least 1".into()));
    }
    if let Some(r) = config.rate
        && !(r.is_finite() && r > 0.0)
    {
        return Err(Error::Config(format!("rate must be positive, got {r}")));
    }
    if config.timeout.is_zero() {
        return Err(Error::Config("timeout must be greater than zero".into()));
    }
    if config.interval < MIN_INTERVAL {
        return Err(Error::Config(format!(
            "interval must be at least {MIN_INTERVAL:?}, got {:?}",
            config.interval
        )));
    }
    for (what, d) in [
        ("duration", config.duration.unwrap_or_default()),
        ("warmup", config.warmup),
        ("ramp-up", config.ramp_up),
        ("timeout", config.timeout),
        ("interval", config.interval),
    ] {
        if d > MAX_DURATION {
            return Err(Error::Config(format!(
                "{what} must be at most {} days, got {d:?}",
                MAX_DURATION.as_secs() / 86_400
            )));
        }
    }
    check_request_head(config)?;
    let url = Url::parse(&config.url).map_err(|e| Error::Config(e.to_string()))?;
    let addr = *url
        .socket_addrs()
        .map_err(|e| Error::Config(e.to_string()))?
        .first()
        .ok_or_else(|| Error::Config(format!("no address for {}", url.host())))?;
    let _ = raise_fd_limit();
    let headers: Vec<(&str, &str)> = config
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let request = encode_request(
        &config.method,
        &url,
        &headers,
        &config.body,
        config.keep_alive,
    );
    let duration = match (config.requests, config.duration) {
        (None, None) => Some(Duration::from_secs(10)),
        (_, d) => d,
    };
    let rt = match &config.runtime {
        Some(rt) => rt.clone(),
        None => weft::default_runtime()?,
    };
    let t0 = Instant::now();
    let started_at = SystemTime::now() + config.warmup;
    let measure = t0 + config.warmup;
    let plan = Arc::new(Plan {
        request,
        head: config.method.eq_ignore_ascii_case("HEAD"),
        addr,
        tls: url.is_https().then(|| {
            let cfg = if config.insecure {
                weft_http::tls::danger_accept_any_certificate()
            } else {
                weft_http::tls::default_client_config(&[])
            };
            (cfg, url.host().to_owned())
        }),
        timeout: config.timeout,
        keep_alive: config.keep_alive,
        t0,
        measure,
        end: duration.map(|d| measure + d),
        limit: config.requests,
        rate: config.rate,
        claimed: AtomicU64::new(0),
        ticket: AtomicU64::new(0),
        done: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        shards: (0..HIST_SHARDS.min(config.concurrency))
            .map(|_| weft::sync::Mutex::new(series::Shard::new()))
            .collect(),
        hs_hists: (0..HIST_SHARDS.min(config.concurrency))
            .map(|_| weft::sync::Mutex::new(hdr::new_histogram()))
            .collect(),
    });
    let sampler = series::Sampler::start(plan.clone(), config.interval)?;
    // Grown as the users start: a concurrency too large to start fails
    // below with the spawn error, not here with an allocation.
    let mut users = Vec::new();
    for i in 0..config.concurrency {
        let p = plan.clone();
        let delay = config.ramp_up.mul_f64(i as f64 / config.concurrency as f64);
        match weft::Builder::new().spawn_on(&rt, move || user(&p, i, delay)) {
            Ok(h) => users.push(h),
            Err(e) => {
                plan.stop.store(true, Ordering::SeqCst);
                for h in users {
                    let _ = h.join();
                }
                let _ = sampler.finish(series::End {
                    at: Instant::now(),
                    requests: 0,
                    failures: 0,
                });
                return Err(Error::Io(e));
            }
        }
    }
    let progress = config.progress.then(|| Progress::start(plan.clone()));
    let mut total = Tally::new();
    for h in users {
        match h.join() {
            Ok(t) => {
                total.ok += t.ok;
                total.errors.merge(&t.errors);
                for (k, v) in t.status {
                    *total.status.entry(k).or_default() += v;
                }
                total.bytes += t.bytes;
            }
            Err(_) => total.errors.protocol += 1,
        }
    }
    let finished = Instant::now();
    if let Some(p) = progress {
        p.finish();
    }
    let measured = match plan.end {
        // A duration run is over at its end (closed model: late answers are
        // not counted; open model: every scheduled request counts).
        Some(end) => end
            .max(measure)
            .min(finished)
            .max(measure + Duration::from_millis(1)),
        None => finished,
    }
    .saturating_duration_since(measure)
    .max(Duration::from_micros(1));
    let failures = total.errors.total();
    let requests = total.ok + failures;
    let secs = measured.as_secs_f64();
    let sampled = sampler.finish(series::End {
        at: measure + measured,
        requests,
        failures,
    });
    let hist = sampled.histogram;
    let mut hs = hdr::new_histogram();
    for h in plan.hs_hists.iter() {
        let _ = hs.add(&*h.lock().unpoison());
    }
    let latency = summary(&hist);
    let handshake = plan.tls.is_some().then(|| summary(&hs));
    Ok(Report {
        runs: 1,
        name: config
            .name
            .clone()
            .unwrap_or_else(|| format!("{} {}", config.method, url.path_and_query())),
        model: if config.rate.is_some() {
            "open"
        } else {
            "closed"
        },
        concurrency: config.concurrency,
        requests,
        successes: total.ok,
        failures,
        duration_secs: secs,
        throughput: requests as f64 / secs,
        failures_per_sec: failures as f64 / secs,
        target_rate: config.rate,
        latency,
        handshake,
        handshakes: hs.len(),
        errors: total.errors,
        status_counts: total.status,
        body_bytes: total.bytes,
        histogram: hist,
        handshake_histogram: plan.tls.is_some().then_some(hs),
        started_at,
        interval: config.interval,
        series: sampled.series,
        run_ids: vec![new_run_id()],
    })
}

/// A random id for a run: 64 bits from a randomly keyed hasher (new keys
/// for every call), over the time and the process id.
fn new_run_id() -> String {
    use std::hash::BuildHasher;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let id = std::hash::RandomState::new().hash_one((now, std::process::id()));
    format!("{id:016x}")
}

/// Latency summary of a histogram of microseconds.
fn summary(h: &Histogram<u64>) -> Latency {
    let ms = |us: u64| us as f64 / 1000.0;
    if h.is_empty() {
        Latency::default()
    } else {
        Latency {
            mean_ms: h.mean() / 1000.0,
            min_ms: ms(h.min()),
            max_ms: ms(h.max()),
            stdev_ms: h.stdev() / 1000.0,
            p50_ms: ms(h.value_at_quantile(0.5)),
            p90_ms: ms(h.value_at_quantile(0.9)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
        }
    }
}

/// One simulated user, starting `delay` after the run.
fn user(p: &Plan, index: usize, delay: Duration) -> Tally {
    let mut t = Tally::new();
    let shard = &p.shards[index % p.shards.len()];
    let hs_hist = &p.hs_hists[index % p.hs_hists.len()];
    let mut conn: Option<Connection> = None;
    if !delay.is_zero() && weft::sleep_until(p.t0 + delay).is_err() {
        return t;
    }
    loop {
        if p.stop.load(Ordering::Relaxed) {
            break;
        }
        // When this request should start (open model) or starts (closed).
        let (start, measured) = match p.rate {
            Some(rate) => {
                let i = p.ticket.fetch_add(1, Ordering::Relaxed);
                // At a tiny rate the schedule leaves time itself: no such
                // request is ever due.
                let Some(at) = Duration::try_from_secs_f64(i as f64 / rate)
                    .ok()
                    .and_then(|d| p.t0.checked_add(d))
                else {
                    break;
                };
                if p.end.is_some_and(|e| at >= e) {
                    break;
                }
                let measured = at >= p.measure;
                if measured && !claim(p) {
                    break;
                }
                if at > Instant::now() && weft::sleep_until(at).is_err() {
                    break;
                }
                (at, measured)
            }
            None => {
                let now = Instant::now();
                if p.end.is_some_and(|e| now >= e) {
                    break;
                }
                let measured = now >= p.measure;
                if measured && !claim(p) {
                    break;
                }
                (now, measured)
            }
        };
        let mut handshake = None;
        let result = match conn.as_mut() {
            Some(c) => c.exchange(&p.request, p.head, Some(p.timeout)),
            None => match match &p.tls {
                None => Connection::connect(p.addr, p.timeout),
                Some((cfg, host)) => Connection::connect_tls(p.addr, host, cfg.clone(), p.timeout),
            } {
                Ok(c) => {
                    handshake = c.handshake_time();
                    let _ = c.set_nodelay(true);
                    conn.insert(c).exchange(&p.request, p.head, Some(p.timeout))
                }
                Err(e) => Err(e),
            },
        };
        let finished = Instant::now();
        // The TLS handshake is reported on its own, not as request latency.
        let elapsed = finished
            .saturating_duration_since(start)
            .saturating_sub(handshake.unwrap_or_default());
        // Closed model: an answer after the window is not counted; in a
        // duration run (no request limit to claim from) an answer inside
        // the window counts even when its request was sent in warmup.
        let measured = if p.rate.is_some() {
            measured
        } else {
            let before_end = p.end.is_none_or(|e| finished <= e);
            match p.limit {
                Some(_) => measured && before_end,
                None => finished >= p.measure && before_end,
            }
        };
        match result {
            Ok(ex) => {
                if !ex.keep_alive || !p.keep_alive {
                    conn = None;
                }
                if measured {
                    if let Some(h) = handshake {
                        hdr::record(&mut hs_hist.lock().unpoison(), h.as_micros() as u64);
                    }
                    let failed = ex.status >= 400;
                    shard
                        .lock()
                        .unpoison()
                        .answered(elapsed.as_micros() as u64, failed);
                    *t.status.entry(ex.status).or_default() += 1;
                    t.bytes += ex.body_bytes;
                    if failed {
                        *t.errors.status.entry(ex.status).or_default() += 1;
                        p.failed.fetch_add(1, Ordering::Relaxed);
                    } else {
                        t.ok += 1;
                    }
                    p.done.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                conn = None;
                if measured {
                    match e.kind() {
                        ErrorKind::Connect => t.errors.connect += 1,
                        ErrorKind::Write => t.errors.write += 1,
                        ErrorKind::Read => t.errors.read += 1,
                        ErrorKind::Timeout => t.errors.timeout += 1,
                        ErrorKind::Protocol | ErrorKind::InvalidUrl => t.errors.protocol += 1,
                        ErrorKind::Certificate | ErrorKind::Tls => t.errors.tls += 1,
                    }
                    shard.lock().unpoison().unanswered();
                    p.failed.fetch_add(1, Ordering::Relaxed);
                    p.done.fetch_add(1, Ordering::Relaxed);
                }
                if matches!(
                    e.kind(),
                    ErrorKind::Connect | ErrorKind::Certificate | ErrorKind::Tls
                ) {
                    // Do not spin on a refused port: a short pause.
                    let _ = weft::sleep(Duration::from_millis(1));
                }
            }
        }
    }
    t
}

/// Claims one of the `limit` measured requests.
fn claim(p: &Plan) -> bool {
    match p.limit {
        None => true,
        Some(n) => p.claimed.fetch_add(1, Ordering::Relaxed) < n,
    }
}

/// The live progress line (stderr, only on a terminal).
struct Progress {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Progress {
    fn start(plan: Arc<Plan>) -> Progress {
        use std::io::IsTerminal;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let tty = std::io::stderr().is_terminal();
        let thread = std::thread::spawn(move || {
            if !tty {
                return;
            }
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            let mut last = (Instant::now(), 0u64);
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                let done = plan.done.load(Ordering::Relaxed);
                let failed = plan.failed.load(Ordering::Relaxed);
                let now = Instant::now();
                let rps = (done - last.1) as f64 / now.duration_since(last.0).as_secs_f64();
                last = (now, done);
                let phase = if now < plan.measure { "warmup " } else { "" };
                bar.set_message(format!(
                    "{phase}{rps:>10.0} req/s  {done:>10} done  {failed:>6} errors"
                ));
                bar.tick();
            }
            bar.finish_and_clear();
        });
        Progress { stop, thread }
    }

    fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

impl Report {
    /// The result table: Name, # reqs, # fails, Avg, Min, Max, Median,
    /// p90, p99, p99.9, req/s, failures/s (latencies in ms), then errors by
    /// class and, in the open model, the achieved vs target rate.
    pub fn table(&self) -> String {
        Report::table_of(std::slice::from_ref(self))
    }

    /// One table with a row per report.
    pub fn table_of(reports: &[Report]) -> String {
        let w = reports
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(4)
            .clamp(4, 48);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<w$} {:>9} {:>15} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10}",
            "Name",
            "# reqs",
            "# fails",
            "Avg",
            "Min",
            "Max",
            "Median",
            "p90",
            "p99",
            "p99.9",
            "req/s",
            "failures/s"
        );
        for r in reports {
            let l = &r.latency;
            let pct = if r.requests == 0 {
                0.0
            } else {
                100.0 * r.failures as f64 / r.requests as f64
            };
            let _ = writeln!(
                s,
                "{:<w$} {:>9} {:>15} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10.1} {:>10.1}",
                r.name,
                r.requests,
                format!("{}({:.2}%)", r.failures, pct),
                sig3(l.mean_ms),
                sig3(l.min_ms),
                sig3(l.max_ms),
                sig3(l.p50_ms),
                sig3(l.p90_ms),
                sig3(l.p99_ms),
                sig3(l.p999_ms),
                r.throughput,
                r.failures_per_sec,
            );
        }
        let _ = writeln!(s, "(latencies in ms)");
        for r in reports {
            let e = &r.errors;
            if e.total() > 0 {
                let _ = write!(
                    s,
                    "{}: errors: connect {}, read {}, write {}, timeout {}, protocol {}, tls {}",
                    r.name, e.connect, e.read, e.write, e.timeout, e.protocol, e.tls
                );
                for (code, n) in &e.status {
                    let _ = write!(s, ", status {code}: {n}");
                }
                s.push('\n');
            }
            if let Some(h) = &r.handshake {
                let _ = writeln!(
                    s,
                    "{}: TLS handshakes {} ({:.1}/s): avg {} ms, median {} ms, p99 {} ms, max {} ms (not in the latencies above)",
                    r.name,
                    r.handshakes,
                    r.handshakes as f64 / r.duration_secs,
                    sig3(h.mean_ms),
                    sig3(h.p50_ms),
                    sig3(h.p99_ms),
                    sig3(h.max_ms),
                );
            }
            if let Some(target) = r.target_rate {
                let _ = writeln!(
                    s,
                    "{}: open model: target {:.1} req/s, achieved {:.1} req/s ({:.1}%)",
                    r.name,
                    target,
                    r.throughput,
                    100.0 * r.throughput / target
                );
            }
        }
        s
    }
}

/// Parses a duration like `10s`, `500ms`, `2m`, `1h`, `250us` or a plain
/// number of seconds.
///
/// # Errors
///
/// A message naming the input when it is not such a duration.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weft_load::parse_duration;
///
/// assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
/// assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
/// assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
/// assert!(parse_duration("soon").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?} (examples: 10s, 500ms, 2m)"))?;
    let secs = match unit.trim() {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        u => return Err(format!("invalid duration unit {u:?} in {s:?}")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("invalid duration {s:?} (too long)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3 parsecs").is_err());
        // Too long for a Duration: an error, not a panic.
        assert!(parse_duration("99999999999999999999999").is_err());
        assert!(parse_duration("1e999").is_err());
    }

    #[test]
    fn a_rate_too_small_to_schedule_ends_the_run() {
        // The second request would be due 10^300 s after the start: past
        // any clock, so the schedule ends there (a user panicked on it
        // once, counted as a protocol error).
        let r = run(&Config {
            url: "http://127.0.0.1:1/".into(),
            concurrency: 2,
            rate: Some(1e-300),
            duration: Some(Duration::from_secs(3600)),
            ..Config::default()
        })
        .unwrap();
        assert_eq!(r.errors.protocol, 0, "{:?}", r.errors);
        assert!(r.requests <= 1, "{}", r.requests);
    }

    #[test]
    fn config_errors() {
        let c = Config {
            url: "http://127.0.0.1:1/".into(),
            concurrency: 0,
            ..Config::default()
        };
        assert!(matches!(run(&c), Err(Error::Config(_))));
        let c = Config {
            url: "ftp://x/".into(),
            ..Config::default()
        };
        assert!(matches!(run(&c), Err(Error::Config(_))));
        let c = Config {
            url: "http://127.0.0.1:1/".into(),
            rate: Some(0.0),
            ..Config::default()
        };
        assert!(matches!(run(&c), Err(Error::Config(_))));
        let c = Config {
            url: "http://127.0.0.1:1/".into(),
            interval: Duration::from_millis(1),
            ..Config::default()
        };
        assert!(matches!(run(&c), Err(Error::Config(m)) if m.contains("interval")));
        // Durations no clock can add: refused, not a panic in a user.
        let long = Duration::from_secs(u64::MAX);
        for c in [
            Config {
                warmup: long,
                ..Config::default()
            },
            Config {
                duration: Some(long),
                ..Config::default()
            },
            Config {
                timeout: long,
                ..Config::default()
            },
            Config {
                ramp_up: long,
                ..Config::default()
            },
        ] {
            let c = Config {
                url: "http://127.0.0.1:1/".into(),
                ..c
            };
            assert!(matches!(run(&c), Err(Error::Config(m)) if m.contains("at most")));
        }
        // A request head that would not be one request.
        for (method, header) in [
            ("GET / HTTP/1.1\r\nX:", ("A", "b")),
            ("GET", ("Bad Name", "b")),
            ("GET", ("X", "b\r\nInjected: yes")),
        ] {
            let c = Config {
                url: "http://127.0.0.1:1/".into(),
                method: method.into(),
                headers: vec![(header.0.into(), header.1.into())],
                ..Config::default()
            };
            assert!(
                matches!(run(&c), Err(Error::Config(_))),
                "{method:?} {header:?}"
            );
        }
    }
}
