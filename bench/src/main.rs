//! `weft-bench`: the same workloads on Weft, Tokio, `std` OS threads, Go
//! goroutines and Java virtual threads, on this machine, in one table.
//!
//! ```text
//! cargo run --release -p weft-bench                  # full run (~15 min), medians of 3-5 runs; rewrites docs/bench.md
//! cargo run --release -p weft-bench -- --quick       # smaller sizes, under 3 minutes
//! cargo run --release -p weft-bench -- --only echo,http --runtimes weft,go
//! cargo run --release -p weft-bench -- --quick --update-docs   # a partial run that still rewrites docs/bench.md
//! cargo run --release -p weft-bench -- --list        # the workloads and columns
//! cargo run --release -p weft-bench -- --soak        # 10 minutes of mixed HTTP load: leaks? (soak.rs)
//! ```
//!
//! Every measurement is a fresh process (`weft-bench worker …`, the Go
//! binary built from `bench/go`, or `java Bench` compiled from
//! `bench/java`), so each figure's peak RSS is that run's alone: the
//! worker's own `VmHWM` (`wait4`'s `ru_maxrss` would inherit the suite's
//! high-water mark across fork+exec; see `weft_bench_support::child`). Servers are driven from this process: TCP echo by a Tokio
//! current-thread client, HTTP and HTTPS by `weft-load` — the same load for
//! every server. A missing Go or JDK (≥ 21) skips its column with a note.
//!
//! The `weft-std` column runs the echo rows only: the same echo server
//! written against `std::net` (`tests-transparent/examples/bench_worker.rs`),
//! on virtual threads with `weft`'s `transparent` feature. Its worker is a
//! crate outside the workspace (the hooks would otherwise be linked into
//! every binary of the build), so the suite builds it with `cargo build
//! --release` into `target/transparent` before the first run (a minute or
//! two the first time). Beside the `weft` column it shows what the hooks
//! cost on a real server.
//!
//! The HTTPS row (`https-hello-100`) generates one self-signed certificate
//! per suite run (rcgen, ECDSA P-256) into `<out>/tls/{cert,key}.pem` and
//! starts every server as `https-server <cert.pem> <key.pem>`: weft-http's
//! `TlsConfig`, hyper behind `tokio-rustls` and `std` over
//! `rustls::StreamOwned` (all rustls with the `ring` provider), Go's
//! `crypto/tls`, Java's `HttpsServer`. `weft-load` skips certificate
//! verification (`insecure`; signatures are still checked). A first window
//! measures keep-alive requests over sessions set up during the warmup; a
//! second, half as long, opens a new connection per request and reports
//! full handshakes / s and their p99, each as a row of its own.
//!
//! The park rows (`park-100k`, and `park-1m` in full runs; issue #40)
//! spawn N threads from the main thread that each block until released,
//! and report two figures from one run: the memory per parked thread
//! (growth of `VmRSS` + `VmPTE` over N, read by the worker itself) and the
//! time until all are parked (`worker::park` and its Go and Java twins).
//!
//! The hog rows (`hog-1`, `hog-2`; issue #39, full runs only) start the
//! `http-server` and load `/hello` while one or two `GET /cpu` requests
//! compute for 4 s on the server (`worker::spin`, the same hash loop in Go
//! and Java), with new connections made meanwhile (`client::hogged`), and
//! report the slowest CPU-bound request's response time beside the rate
//! and p99.
//!
//! Results go to `target/weft-bench/`: `results.json`, `report.md` and one
//! SVG chart per workload.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

mod client;
mod proc;
mod quota;
mod report;
mod soak;
mod worker;

use proc::Launcher;
use report::{Cell, Column, Row, Run, Unit, WorkloadResult};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Weft vs Tokio, std threads, Go and Java virtual threads: one table"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Smaller sizes and fewer runs: under 3 minutes.
    #[arg(long)]
    quick: bool,
    /// Runs per figure (default: 5 for CPU workloads, 3 for the rest; 3/1
    /// with --quick).
    #[arg(long)]
    runs: Option<usize>,
    /// Only workloads whose id contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Only these columns (comma-separated ids: weft, tokio-mt, tokio-ct,
    /// std, go, java).
    #[arg(long, value_delimiter = ',')]
    runtimes: Vec<String>,
    /// Output directory (default: target/weft-bench in the workspace).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Rewrite the table between the weft-bench markers in docs/bench.md
    /// even for a partial run (`--quick`, `--only`, `--runtimes`, `--runs`);
    /// a full run always does.
    #[arg(long, alias = "update-readme")]
    update_docs: bool,
    /// Run beside N busy neighbour processes (`yes > /dev/null`, started
    /// after the build and stopped at the end): what each figure becomes
    /// when the cores are shared, as on a loaded laptop or a container
    /// host. Never rewrites docs/bench.md's table.
    #[arg(long, value_name = "N", default_value_t = 0)]
    busy: usize,
    /// Where the `--busy` neighbours run. `spread` (the default) binds
    /// neighbour i to the i-th CPU this process may use, round robin, so
    /// that every core is shared. `free` leaves them to the kernel, which
    /// often stacks two on one CPU beside a server that keeps waking on
    /// the other: a run then measures a half-quiet machine, and runs
    /// differ by where the neighbours landed (docs/bench.md, "Where the
    /// neighbours run").
    #[arg(long, value_enum, value_name = "HOW", default_value_t = Placement::Spread)]
    busy_placement: Placement,
    /// Run every worker (not the load generator) in a cgroup of its own
    /// with a CPU quota of this many CPUs (e.g. 1.5), as a container with a
    /// CPU limit: needs root and a cgroup `cpu` controller (`quota.rs`).
    /// Never rewrites docs/bench.md's table.
    #[arg(long, value_name = "CPUS")]
    cpu_quota: Option<f64>,
    /// Print the workloads and columns and exit.
    #[arg(long)]
    list: bool,
    /// Instead of the suite: one HTTP server under a long mixed load,
    /// its memory, descriptors and threads sampled (`soak.rs`). Weft's
    /// server, or the first Rust column of `--runtimes`.
    #[arg(long)]
    soak: bool,
    /// Length of `--soak` in minutes; 10 or more rewrites docs/soak.md.
    #[arg(long, default_value_t = 10.0)]
    soak_minutes: f64,
    /// Judges and reports a saved soak (its `soak.json`) again instead of
    /// running one.
    #[arg(long, value_name = "SOAK_JSON")]
    soak_replay: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Runs one workload in this process (used by the suite itself).
    #[command(hide = true)]
    Worker {
        #[arg(value_enum)]
        rt: worker::Rt,
        workload: String,
        /// Numbers, or for `https-server` the certificate and key paths.
        args: Vec<String>,
    },
}

/// How a workload is driven.
#[derive(Clone, Copy, Debug)]
enum Drive {
    /// The worker measures itself and prints the figure.
    Own,
    /// Echo server; `conns` client connections.
    Echo { conns: usize },
    /// HTTP server; `conns` keep-alive users on `path`. `tls`: the
    /// `https-server` with the suite's self-signed certificate, then a
    /// second, shorter window of one new connection per request for the
    /// handshake figures.
    Http {
        path: &'static str,
        conns: usize,
        tls: bool,
    },
    /// HTTP server; `conns` users on `/hello` while `hogs` requests to
    /// `/cpu` compute (`client::hogged`).
    Hog { hogs: usize, conns: usize },
    /// HTTP server; `conns` keep-alive connections that each make one
    /// request and then sit idle: the server's memory per idle connection
    /// (`client::idle`).
    Idle { conns: usize },
}

/// One workload of the plan.
struct Spec {
    /// Row id (`channel-100`); unique.
    id: &'static str,
    /// The worker's workload name (`channel`) for `Drive::Own` rows;
    /// several rows may share one. Servers: unused (`Drive` names them).
    worker: &'static str,
    title: &'static str,
    what: &'static str,
    unit: Unit,
    drive: Drive,
    /// Arguments for the worker (`Own`) — per column, or why it is skipped.
    args: Vec<u64>,
    overrides: Vec<(&'static str, Result<Vec<u64>, String>)>,
    runs: usize,
    warmup: Duration,
    window: Duration,
    ideal: Option<f64>,
    ideal_p99_ms: Option<f64>,
    rss_row: bool,
}

const COLUMNS: [(&str, &str); 7] = [
    ("weft", "Weft"),
    ("weft-std", "Weft, std::net + transparent"),
    ("tokio-mt", "Tokio (multi-thread)"),
    ("tokio-ct", "Tokio (current-thread)"),
    ("std", "std threads"),
    ("go", "Go goroutines"),
    ("java", "Java 25 virtual threads"),
];

/// The workloads, in table order: a row per `Spec`.
fn plan(quick: bool, runs: Option<usize>) -> Vec<Spec> {
    let z = Sizing::new(quick, runs);
    let mut v = Vec::new();
    v.extend(spawn_rows(&z));
    v.extend(handoff_rows(&z));
    v.extend(sleep_rows(&z));
    v.extend(park_rows(&z));
    v.extend(echo_rows(&z));
    v.extend(http_rows(&z));
    v.extend(hog_rows(&z));
    v
}

/// What the rows of a plan share: sizes, runs and windows for a full or a
/// `--quick` suite.
struct Sizing {
    quick: bool,
    /// Runs of a CPU-bound row (`Drive::Own`), and of the others.
    cpu_runs: usize,
    other_runs: usize,
    /// Servers' warmup and measured window.
    srv_warmup: Duration,
    srv_window: Duration,
    map_count: u64,
}

impl Sizing {
    fn new(quick: bool, runs: Option<usize>) -> Sizing {
        let (srv_warmup, srv_window) = if quick {
            (Duration::from_millis(500), Duration::from_secs(2))
        } else {
            (Duration::from_secs(1), Duration::from_secs(5))
        };
        Sizing {
            quick,
            cpu_runs: runs.unwrap_or(if quick { 3 } else { 5 }),
            other_runs: runs.unwrap_or(if quick { 1 } else { 3 }),
            srv_warmup,
            srv_window,
            map_count: max_map_count(),
        }
    }

    /// The sizes of the fan-out rows (sleepers, parked threads): 100k, and
    /// 1M in a full suite.
    fn fan_out_sizes(&self) -> &'static [u64] {
        if self.quick {
            &[100_000]
        } else {
            &[100_000, 1_000_000]
        }
    }

    /// `full`, or `quick_v` in a quick suite.
    fn q(&self, full: u64, quick_v: u64) -> u64 {
        if self.quick { quick_v } else { full }
    }

    /// Why std threads cannot run `n` threads, when they cannot.
    fn std_thread_cap(&self, n: u64) -> Option<Result<Vec<u64>, String>> {
        (n > self.map_count / 2).then(|| {
            Err(format!(
                "{n} OS threads need ~{} memory mappings; vm.max_map_count is {}",
                2 * n,
                self.map_count
            ))
        })
    }

    /// A row the worker measures itself; its worker is the id's first word.
    fn own(
        &self,
        id: &'static str,
        title: &'static str,
        what: &'static str,
        unit: Unit,
        args: Vec<u64>,
    ) -> Spec {
        Spec {
            id,
            worker: id.split('-').next().unwrap_or(id),
            title,
            what,
            unit,
            drive: Drive::Own,
            args,
            overrides: Vec::new(),
            runs: self.cpu_runs,
            warmup: Duration::ZERO,
            window: Duration::ZERO,
            ideal: None,
            ideal_p99_ms: None,
            rss_row: false,
        }
    }

    /// A server row (no current-thread Tokio column).
    fn server(
        &self,
        id: &'static str,
        title: &'static str,
        what: &'static str,
        unit: Unit,
        drive: Drive,
    ) -> Spec {
        Spec {
            id,
            worker: "",
            title,
            what,
            unit,
            drive,
            args: Vec::new(),
            overrides: vec![(
                "tokio-ct",
                Err("servers: multi-thread runtime only".to_string()),
            )],
            runs: self.other_runs,
            warmup: self.srv_warmup,
            window: self.srv_window,
            ideal: None,
            ideal_p99_ms: None,
            rss_row: false,
        }
    }
}

/// spawn + join, from a virtual thread and from main.
fn spawn_rows(z: &Sizing) -> Vec<Spec> {
    let mut s = z.own(
        "spawn",
        "spawn + join",
        "start N empty threads/tasks, then join them all; wall time / N",
        Unit::Ns,
        vec![z.q(100_000, 20_000)],
    );
    s.overrides.push(("std", Ok(vec![z.q(10_000, 2_000)])));
    // The same from the program's main OS thread, as most programs spawn
    // (Go's main goroutine and Java's main thread are what "spawn" uses).
    let mut m = z.own(
        "spawn-main",
        "spawn + join, from main",
        "as spawn + join, spawned from the main OS thread (Weft: fn main; Tokio: the block_on future; Go: the main goroutine; Java: the main thread)",
        Unit::Ns,
        vec![z.q(100_000, 20_000)],
    );
    m.worker = "spawn-main";
    m.overrides.push(("std", Ok(vec![z.q(10_000, 2_000)])));
    vec![s, m]
}

/// Handing work between threads: ping-pong, a contended lock, channels.
fn handoff_rows(z: &Sizing) -> Vec<Spec> {
    let mut pingpong = z.own(
        "pingpong",
        "ping-pong round trip",
        "two threads hand a turn back and forth (park/unpark; Tokio: Notify; Go: unbuffered channels); time / round trip",
        Unit::Ns,
        vec![z.q(1_000_000, 200_000)],
    );
    pingpong
        .overrides
        .push(("std", Ok(vec![z.q(100_000, 20_000)])));
    // Every hand-off wakes the other side's OS thread: with `--busy` it
    // waits for the OS to give that thread a core (docs/bench.md, "Hand-offs
    // on shared cores").
    let mut cross = z.own(
        "pingpong-cross",
        "ping-pong across two OS threads",
        "as ping-pong, each side on its own OS thread (Weft: two runtimes of one carrier each; Tokio: two current-thread runtimes; std: two OS threads); time / round trip",
        Unit::Ns,
        vec![z.q(200_000, 50_000)],
    );
    cross.worker = "pingpong-cross";
    cross.overrides.extend([
        ("std", Ok(vec![z.q(100_000, 20_000)])),
        (
            "go",
            Err("goroutines cannot be placed on chosen OS threads".into()),
        ),
        (
            "java",
            Err("virtual threads cannot be placed on chosen carriers".into()),
        ),
    ]);
    vec![
        pingpong,
        cross,
        z.own(
            "mutex",
            "contended lock, 100 threads",
            "100 threads each increment one counter under one lock (Weft: weft::sync::Mutex, Tokio: tokio::sync::Mutex, Go: sync.Mutex, Java: ReentrantLock); time / increment",
            Unit::Ns,
            vec![100, z.q(10_000, 2_000)],
        ),
        z.own(
            "channel-1",
            "channel 1 → 1",
            "one producer sends N u64 to one consumer over a bounded channel of 1,024; messages / s",
            Unit::PerSec("msg/s"),
            vec![1, z.q(2_000_000, 400_000), 1024],
        ),
        z.own(
            "channel-100",
            "channel 100 → 1",
            "100 producers send N u64 in all to one consumer over a bounded channel of 1,024; messages / s",
            Unit::PerSec("msg/s"),
            vec![100, z.q(2_000_000, 400_000), 1024],
        ),
    ]
}

/// N × sleep(1 s): 100k (and 1M in a full suite), spawned from a virtual
/// thread, then from main.
fn sleep_rows(z: &Sizing) -> Vec<Spec> {
    let sizes = z.fan_out_sizes();
    let mut v: Vec<Spec> = sizes.iter().map(|&n| sleepers(z, n)).collect();
    for &n in sizes {
        let mut s = sleepers(z, n);
        (s.id, s.title) = if n >= 1_000_000 {
            ("sleep-1m-main", "1M × sleep(1 s), from main")
        } else {
            ("sleep-100k-main", "100k × sleep(1 s), from main")
        };
        s.worker = "sleep-main";
        s.what = "as the row above, spawned from the main OS thread (Weft: fn main; Tokio: the block_on future; Go: the main goroutine; Java: the main thread)";
        v.push(s);
    }
    v
}

/// `n` threads that each sleep 1 s.
fn sleepers(z: &Sizing, n: u64) -> Spec {
    let (id, title) = if n >= 1_000_000 {
        ("sleep-1m", "1M × sleep(1 s)")
    } else {
        ("sleep-100k", "100k × sleep(1 s)")
    };
    let mut s = z.own(
        id,
        title,
        "start N threads that each sleep 1 s; wall time until all are joined, and the process's peak RSS",
        Unit::Ms,
        vec![n, 1000],
    );
    s.runs = z.other_runs;
    s.ideal = Some(1000.0);
    s.rss_row = true;
    if let Some(cap) = z.std_thread_cap(n) {
        s.overrides.push(("std", cap));
    }
    s
}

/// N threads parked at once, spawned from main (issue #40): 100k, and 1M
/// in a full suite. Two figures per cell from one run: the memory a parked
/// thread costs, and the time until all are parked (`Run::parked_ms`).
fn park_rows(z: &Sizing) -> Vec<Spec> {
    let what = "spawn N threads from the main thread (Weft: fn main; Tokio: the block_on future; Go: the main goroutine; Java: the main thread); each counts itself and blocks until released (Weft, std and Java: park in a loop on a flag; Tokio: a semaphore of no permits, closed on release; Go: receive from a channel, closed on release). Memory per thread: the growth of VmRSS + VmPTE (/proc/self/status, read inside the worker 200 ms after the last one counted itself) over N, in KiB; the baseline is read after one thread went the same way, so what the runtime starts lazily is in it; the handles kept to join the threads count (Go: a WaitGroup instead), and Java's heap growth does (parked virtual threads' stacks live there). Time until all are parked: the first spawn until the last thread counted itself. Then all are released and joined, untimed";
    z.fan_out_sizes()
        .iter()
        .map(|&n| {
            let (id, title) = if n >= 1_000_000 {
                ("park-1m", "1M threads parked, from main")
            } else {
                ("park-100k", "100k threads parked, from main")
            };
            let mut s = z.own(id, title, what, Unit::KiBPerThread, vec![n]);
            s.runs = z.other_runs;
            if let Some(cap) = z.std_thread_cap(n) {
                s.overrides.push(("std", cap));
            }
            s
        })
        .collect()
}

/// TCP echo with 100 and 10,000 connections.
fn echo_rows(z: &Sizing) -> Vec<Spec> {
    let mut big = z.server(
        "echo-10k",
        "TCP echo, 10,000 connections",
        "as above with 10,000 connections; round trips / s, p99, server peak RSS",
        Unit::PerSec("msg/s"),
        Drive::Echo { conns: 10_000 },
    );
    big.rss_row = true;
    vec![
        z.server(
            "echo-100",
            "TCP echo, 100 connections",
            "100 client connections each write 64 B and read the echo in a loop; round trips / s (and p99 latency)",
            Unit::PerSec("msg/s"),
            Drive::Echo { conns: 100 },
        ),
        big,
    ]
}

/// HTTP and HTTPS hello, hello with 10,000 connections (full suite), and
/// sleep(1 s) with 10,000 connections.
fn http_rows(z: &Sizing) -> Vec<Spec> {
    let http = |path, conns, tls| Drive::Http { path, conns, tls };
    let mut v = vec![z.server(
        "http-hello-100",
        "HTTP hello, 100 connections",
        "weft-load, 100 keep-alive users on GET /hello (13-byte body); responses / s (and p99)",
        Unit::PerSec("req/s"),
        http("/hello", 100, false),
    )];
    let mut s = z.server(
        "https-hello-100",
        "HTTPS hello, 100 connections",
        "as HTTP hello over TLS (self-signed ECDSA P-256 certificate; rustls + ring in the Rust columns, crypto/tls in Go, JSSE in Java): weft-load, 100 keep-alive users, handshakes during warmup; responses / s (and p99). Then a window of one new connection per request: full TLS handshakes / s and their p99",
        Unit::PerSec("req/s"),
        http("/hello", 100, true),
    );
    // 100 handshakes (and, in Java, the JIT's first pass over JSSE) must
    // be over before the keep-alive window: a cold JVM shakes hands at
    // ~100/s on this machine.
    s.warmup = z.srv_warmup * 3;
    v.push(s);
    if !z.quick {
        let mut s = z.server(
            "http-hello-10k",
            "HTTP hello, 10,000 connections",
            "weft-load, 10,000 keep-alive users on GET /hello; responses / s, p99, server peak RSS",
            Unit::PerSec("req/s"),
            http("/hello", 10_000, false),
        );
        s.rss_row = true;
        v.push(s);
    }
    v.push(http_sleep_row(z));
    v.push(http_idle_row(z));
    v
}

/// 10,000 idle keep-alive connections: the server's memory per idle
/// connection (issue 56).
fn http_idle_row(z: &Sizing) -> Spec {
    let mut s = z.server(
        "http-idle-10k",
        "HTTP, 10,000 idle keep-alive connections",
        "10,000 connections (in waves of 256) each send GET /hello, read the answer and stay open, idle; memory per idle connection: the growth of the server's VmRSS + VmPTE (/proc/<pid>/status, read 3 s after the last answer: weft-http hands a connection to its idle set after 500 ms, and its stack pool gives back stacks over its bound 1 s later) over 10,000, in KiB; the baseline is read 1 s after 100 warm-up connections made one request each and closed. Then every connection makes a second request (all must be answered, so none was closed) and all close. Every server runs with WEFT_STALL_THRESHOLD=3600s (Weft's stall reports off; the others ignore it): on a loaded machine a stall report loads the symbolizer's tables once, ~50 MB, which would count as 5 KiB a connection",
        Unit::KiBPerConn,
        Drive::Idle { conns: 10_000 },
    );
    s.warmup = Duration::from_secs(1);
    s.window = Duration::from_secs(3);
    s
}

/// 10,000 users on a handler that sleeps 1 s: ideal 10,000 req/s, p99 1 s.
fn http_sleep_row(z: &Sizing) -> Spec {
    let mut s = z.server(
        "http-sleep-10k",
        "HTTP sleep(1 s), 10,000 connections",
        "weft-load, 10,000 keep-alive users on GET /sleep (the handler sleeps 1 s); responses / s (ideal 10,000), p99 (ideal 1 s), server peak RSS",
        Unit::PerSec("req/s"),
        Drive::Http {
            path: "/sleep",
            conns: 10_000,
            tls: false,
        },
    );
    s.warmup = Duration::from_secs(3);
    s.window = Duration::from_secs(if z.quick { 4 } else { 10 });
    s.ideal = Some(10_000.0);
    s.ideal_p99_ms = Some(1000.0);
    s.rss_row = true;
    s
}

/// `/hello` beside one CPU-bound request, and beside as many as this
/// machine's two cores (issue #39). Not in `--quick`: each run waits for
/// its CPU-bound requests (4 s, more on a server that runs them one after
/// the other).
fn hog_rows(z: &Sizing) -> Vec<Spec> {
    if z.quick {
        return Vec::new();
    }
    let row = |id, title, what, hogs| {
        let mut s = z.server(
            id,
            title,
            what,
            Unit::PerSec("req/s"),
            Drive::Hog { hogs, conns: 50 },
        );
        s.window = Duration::from_secs(3);
        s
    };
    vec![
        row(
            "hog-1",
            "HTTP hello during one 4 s CPU-bound request",
            "a GET /cpu computes for 4 s on the server (rounds of a multiply-xorshift hash until 4 s have passed since the handler began: the same loop in every language); 250 ms after it was sent, 50 new weft-load keep-alive users on GET /hello for 3 s (after a 1 s warmup of the same load before it); responses / s, p99, the CPU-bound request's own response time (ideal 4 s) and the rounds it computed (what serving /hello took from it)",
            1,
        ),
        row(
            "hog-2",
            "HTTP hello during two 4 s CPU-bound requests",
            "as above with two GET /cpu at once (as many as this machine's cores: Go's GOMAXPROCS and Java's carriers default to 2); the slowest CPU-bound request's response time shows whether the second waited for the first (ideal 4 s, 8 s when it waited)",
            2,
        ),
    ]
}

/// `vm.max_map_count` (65,530 when unreadable: the kernel default).
fn max_map_count() -> u64 {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65_530)
}

fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench/ has a parent")
        .to_path_buf()
}

// ---------------------------------------------------------------------------
// Toolchains: this binary, Go, a JDK >= 21
// ---------------------------------------------------------------------------

/// Finds `go` and builds the Go worker into `out`.
fn build_go(out: &Path) -> Result<(Launcher, String), String> {
    let go = std::env::var_os("WEFT_BENCH_GO")
        .map(PathBuf::from)
        .or_else(|| which("go"))
        .or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| p.exists()))
        .ok_or("`go` not found on PATH (or set WEFT_BENCH_GO)")?;
    let version = output(Command::new(&go).arg("version"))?;
    let bin = out.join("gobench");
    let status = Command::new(&go)
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(workspace_dir().join("bench/go"))
        .status()
        .map_err(|e| format!("go build: {e}"))?;
    if !status.success() {
        return Err(format!("go build failed ({status})"));
    }
    Ok((
        Launcher {
            program: bin,
            prefix: Vec::new(),
        },
        version.trim().to_string(),
    ))
}

/// Builds `tests-transparent`'s `bench_worker` (the `std::net` echo server
/// on virtual threads with the `transparent` feature).
fn build_transparent() -> Result<(Launcher, String), String> {
    eprintln!("building the weft-std worker (tests-transparent/examples/bench_worker.rs) …");
    let program = weft_bench_support::transparent::build_example(&workspace_dir(), "bench_worker")?;
    Ok((
        Launcher {
            program,
            prefix: Vec::new(),
        },
        "weft + transparent".to_string(),
    ))
}

/// Finds a JDK >= 21 (`WEFT_BENCH_JAVA_HOME`, `JAVA_HOME`, `java` on PATH,
/// then `/usr/lib/jvm/*`, newest first) and compiles the Java worker.
fn build_java(out: &Path) -> Result<(Launcher, String), String> {
    let mut homes: Vec<PathBuf> = Vec::new();
    for var in ["WEFT_BENCH_JAVA_HOME", "JAVA_HOME"] {
        if let Some(h) = std::env::var_os(var) {
            homes.push(h.into());
        }
    }
    if let Some(java) = which("java").and_then(|p| p.canonicalize().ok())
        && let Some(home) = java.parent().and_then(Path::parent)
    {
        homes.push(home.to_path_buf());
    }
    if let Ok(rd) = std::fs::read_dir("/usr/lib/jvm") {
        let mut more: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        more.sort();
        homes.extend(more);
    }
    let mut best: Option<(u32, PathBuf, String)> = None;
    for home in homes {
        let (java, javac) = (home.join("bin/java"), home.join("bin/javac"));
        if !java.exists() || !javac.exists() {
            continue;
        }
        let Ok(v) = output(Command::new(&java).arg("-version")) else {
            continue;
        };
        let Some(major) = java_major(&v) else {
            continue;
        };
        if major >= 21 && best.as_ref().is_none_or(|b| major > b.0) {
            let first = v.lines().next().unwrap_or_default().to_string();
            best = Some((major, home, first));
        }
    }
    let (_, home, version) = best
        .ok_or("no JDK >= 21 found (JAVA_HOME, PATH, /usr/lib/jvm; or set WEFT_BENCH_JAVA_HOME)")?;
    let classes = out.join("java");
    let status = Command::new(home.join("bin/javac"))
        .arg("-d")
        .arg(&classes)
        .arg(workspace_dir().join("bench/java/Bench.java"))
        .status()
        .map_err(|e| format!("javac: {e}"))?;
    if !status.success() {
        return Err(format!("javac failed ({status})"));
    }
    Ok((
        Launcher {
            program: home.join("bin/java"),
            prefix: vec!["-cp".into(), classes.display().to_string(), "Bench".into()],
        },
        version,
    ))
}

/// The major version in `java -version` output (`"25.0.3"` → 25,
/// `"1.8.0_402"` → 8).
fn java_major(version_output: &str) -> Option<u32> {
    let q = version_output.split('"').nth(1)?;
    let mut parts = q.split(['.', '-', '+', '_']);
    let first: u32 = parts.next()?.parse().ok()?;
    if first == 1 {
        parts.next()?.parse().ok()
    } else {
        Some(first)
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// stdout + stderr of a command that must succeed.
fn output(cmd: &mut Command) -> Result<String, String> {
    let o = cmd.output().map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!("{:?} failed: {}", cmd, o.status));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
}

// ---------------------------------------------------------------------------
// Running the plan
// ---------------------------------------------------------------------------

/// Runs one measurement of `spec` on `launcher`; `tls` names the
/// certificate files of the https rows.
fn run_once(
    spec: &Spec,
    launcher: &Launcher,
    args: &[u64],
    tls: Option<&TlsFiles>,
) -> Result<Run, String> {
    match spec.drive {
        Drive::Own => {
            let limit = Duration::from_secs(300);
            let m = proc::measure(launcher, spec.worker, args, limit)?;
            Ok(Run {
                value: m.value,
                rss_kib: m.rss_kib,
                parked_ms: m.parked_ms,
                ..Run::default()
            })
        }
        Drive::Echo { conns } => {
            let limit = spec.warmup + spec.window + Duration::from_secs(120);
            let server = proc::Server::start(launcher, "echo-server", limit)?;
            let load = client::echo(server.port, conns, spec.warmup, spec.window);
            let rss = server.stop()?;
            let load = load?;
            Ok(Run {
                value: load.rate,
                p99_ms: Some(load.p99_ms),
                rss_kib: rss,
                errors: load.errors,
                ..Run::default()
            })
        }
        Drive::Http {
            path,
            conns,
            tls: false,
        } => {
            let limit = spec.warmup + spec.window + Duration::from_secs(120);
            let server = proc::Server::start(launcher, "http-server", limit)?;
            let load = client::http(server.port, path, conns, spec.warmup, spec.window, false);
            let rss = server.stop()?;
            let load = load?;
            Ok(Run {
                value: load.rate,
                p99_ms: Some(load.p99_ms),
                rss_kib: rss,
                errors: load.errors,
                ..Run::default()
            })
        }
        Drive::Http {
            path,
            conns,
            tls: true,
        } => {
            let files = tls.ok_or("https row without certificate files")?;
            let (hs_warmup, hs_window) = (spec.warmup / 2, spec.window / 2);
            let limit =
                spec.warmup + spec.window + hs_warmup + hs_window + Duration::from_secs(120);
            let server = proc::Server::start_with(
                launcher,
                "https-server",
                &[
                    files.cert.display().to_string(),
                    files.key.display().to_string(),
                ],
                limit,
            )?;
            let load = client::http(server.port, path, conns, spec.warmup, spec.window, true)
                .and_then(|load| {
                    let hs = client::handshakes(server.port, path, conns, hs_warmup, hs_window)?;
                    Ok((load, hs))
                });
            let rss = server.stop()?;
            let (load, hs) = load?;
            Ok(Run {
                value: load.rate,
                p99_ms: Some(load.p99_ms),
                rss_kib: rss,
                errors: load.errors + hs.errors,
                handshakes_per_sec: Some(hs.rate),
                handshake_p99_ms: Some(hs.p99_ms),
                ..Run::default()
            })
        }
        Drive::Idle { conns } => {
            let limit = spec.warmup + spec.window + Duration::from_secs(180);
            // Weft's stall reports off (the other runtimes ignore the
            // variable): on a loaded machine a report loads the
            // symbolizer's tables once, ~50 MB that would count as 5 KiB
            // a connection.
            let quiet = Launcher {
                program: "env".into(),
                prefix: ["WEFT_STALL_THRESHOLD=3600s".to_string()]
                    .into_iter()
                    .chain([launcher.program.display().to_string()])
                    .chain(launcher.prefix.iter().cloned())
                    .collect(),
            };
            let server = proc::Server::start(&quiet, "http-server", limit)?;
            let idle = client::idle(server.pid(), server.port, conns, spec.warmup, spec.window);
            let rss = server.stop()?;
            let idle = idle?;
            Ok(Run {
                value: idle.kib_per_conn,
                rss_kib: rss,
                errors: idle.errors,
                ..Run::default()
            })
        }
        Drive::Hog { hogs, conns } => {
            let cpu_for = worker::CPU_FOR;
            let limit = spec.warmup + cpu_for * (hogs as u32 + 1) + Duration::from_secs(120);
            let server = proc::Server::start(launcher, "http-server", limit)?;
            let load = client::hogged(server.port, hogs, cpu_for, conns, spec.warmup, spec.window);
            let rss = server.stop()?;
            let load = load?;
            Ok(Run {
                value: load.rate,
                p99_ms: load.p99_ms,
                rss_kib: rss,
                errors: load.errors,
                slowest_ms: Some(load.slowest_ms),
                hog_rounds: Some(load.least_rounds as f64),
                ..Run::default()
            })
        }
    }
}

fn main() {
    let cli = Cli::parse();
    if let Some(Cmd::Worker { rt, workload, args }) = &cli.cmd {
        if let Err(e) = worker::run(*rt, workload, args) {
            eprintln!("weft-bench worker: {e}");
            std::process::exit(1);
        }
        return;
    }
    if cli.soak || cli.soak_replay.is_some() {
        if let Err(e) = soak_main(&cli) {
            eprintln!("weft-bench --soak: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = suite(&cli) {
        eprintln!("weft-bench: {e}");
        std::process::exit(1);
    }
}

/// `--soak`: see `soak.rs`.
fn soak_main(cli: &Cli) -> Result<(), String> {
    const RUST: [&str; 3] = ["weft", "tokio-mt", "std"];
    let runtime = match cli.runtimes.first() {
        None => "weft",
        Some(r) => RUST.iter().find(|c| *c == r).ok_or_else(|| {
            format!(
                "the soak runs one of this binary's servers ({}), not {r:?}",
                RUST.join(", ")
            )
        })?,
    };
    let out = cli
        .out
        .clone()
        .unwrap_or_else(|| workspace_dir().join("target/weft-bench"));
    // Absolute: `go build -o` runs in bench/go, where a relative path
    // would land the Go worker.
    let out = std::path::absolute(&out).map_err(|e| format!("--out {}: {e}", out.display()))?;
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let s = match &cli.soak_replay {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let mut s: soak::Soak = serde_json::from_str(&text)
                .map_err(|e| format!("{} is not a soak.json: {e}", path.display()))?;
            s.judge();
            s
        }
        None => {
            let _ = weft_load::raise_fd_limit();
            let machine = report::Machine::probe();
            let launcher = Launcher {
                program: std::env::current_exe().map_err(|e| e.to_string())?,
                prefix: vec!["worker".into(), runtime.into()],
            };
            let mut s = soak::run(&launcher, runtime, cli.soak_minutes)?;
            let machine = machine.finish();
            s.machine = format!("{}, {}", machine.describe(), machine.date);
            s
        }
    };
    let command = format!(
        "cargo run --release -p weft-bench -- --soak --soak-minutes {}{}",
        s.minutes,
        if s.runtime == "weft" {
            String::new()
        } else {
            format!(" --runtimes {}", s.runtime)
        }
    );
    let docs = (s.minutes >= 10.0 && s.runtime == "weft").then(|| workspace_dir().join("docs"));
    soak::write(&s, &out, docs.as_deref(), &command)?;
    eprintln!(
        "soak: {} requests, {} failed; idle RSS after warm-up {:.1} -> {:.1} MiB; memory flat: {}, descriptors flat: {}, OS threads flat: {}",
        s.requests,
        s.failures,
        s.rss_after_warmup_kib.0 as f64 / 1024.0,
        s.rss_after_warmup_kib.1 as f64 / 1024.0,
        s.memory_flat,
        s.fds_flat,
        s.threads_flat
    );
    eprintln!(
        "soak: wrote {}{}",
        out.join("soak.json").display(),
        docs.map(|d| format!(" and {}", d.join("soak.md").display()))
            .unwrap_or_default()
    );
    if s.passed() {
        Ok(())
    } else {
        Err("the soak found a leak or failed requests (see above)".into())
    }
}

/// The suite: the selected rows on the selected columns, then the table,
/// `results.json`, `report.md`, the charts and (for a full run, or with
/// `--update-docs`) `docs/bench.md`.
fn suite(cli: &Cli) -> Result<(), String> {
    let started = Instant::now();
    let specs = selected_specs(cli)?;
    check_runtimes(&cli.runtimes)?;
    if cli.list {
        list(&specs);
        return Ok(());
    }
    let out = cli
        .out
        .clone()
        .unwrap_or_else(|| workspace_dir().join("target/weft-bench"));
    // Absolute: `go build -o` runs in bench/go, where a relative path
    // would land the Go worker.
    let out = std::path::absolute(&out).map_err(|e| format!("--out {}: {e}", out.display()))?;
    std::fs::create_dir_all(out.join("charts"))
        .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let _ = weft_load::raise_fd_limit();
    let machine = report::Machine::probe();
    let mut columns = build_columns(&cli.runtimes, &specs, &out)?;
    let quota = cli.cpu_quota.map(quota::CpuQuota::create).transpose()?;
    if let Some(q) = &quota {
        for c in &mut columns {
            c.launcher = c.launcher.as_ref().map(|l| q.wrap(l));
        }
        println!(
            "workers run in a cgroup with a CPU quota of {} CPUs",
            q.cpus
        );
    }
    // One self-signed certificate for every https server of this run.
    let tls = if specs
        .iter()
        .any(|s| matches!(s.drive, Drive::Http { tls: true, .. }))
    {
        Some(TlsFiles::generate(&out.join("tls"))?)
    } else {
        None
    };
    let neighbours = Neighbours::start(cli.busy, cli.busy_placement)?;
    let results = run_specs(&specs, &columns, tls.as_ref());
    drop(neighbours);
    let rep = report::Report {
        command: if cli.quick {
            "cargo run --release -p weft-bench -- --quick".into()
        } else {
            "cargo run --release -p weft-bench".into()
        },
        invoked_as: std::env::args().collect::<Vec<_>>().join(" "),
        quick: cli.quick,
        machine: machine.finish(),
        duration_secs: started.elapsed().as_secs_f64(),
        columns: columns.iter().map(Column::summary).collect(),
        workloads: results,
    };
    write_results(cli, &rep, &out)
}

/// The rows `--only` selects (all without it).
fn selected_specs(cli: &Cli) -> Result<Vec<Spec>, String> {
    let specs: Vec<Spec> = plan(cli.quick, cli.runs)
        .into_iter()
        .filter(|s| cli.only.is_empty() || cli.only.iter().any(|o| s.id.contains(o.as_str())))
        .collect();
    if specs.is_empty() {
        return Err(format!("no workload matches --only {:?}", cli.only));
    }
    Ok(specs)
}

fn check_runtimes(runtimes: &[String]) -> Result<(), String> {
    for r in runtimes {
        if !COLUMNS.iter().any(|c| c.0 == r) {
            return Err(format!(
                "unknown runtime {r:?} (expected one of: {})",
                COLUMNS.map(|c| c.0).join(", ")
            ));
        }
    }
    Ok(())
}

/// `--list`: the rows and the columns.
fn list(specs: &[Spec]) {
    for s in specs {
        println!("{:<16} {}\n{:<16} {}", s.id, s.title, "", s.what);
    }
    println!("\ncolumns: {}", COLUMNS.map(|c| c.0).join(", "));
}

/// The columns: this binary for the Rust ones, then Go and Java; a column
/// not selected or not buildable is skipped, with the reason.
fn build_columns(runtimes: &[String], specs: &[Spec], out: &Path) -> Result<Vec<Column>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut columns = Vec::new();
    for (id, label) in COLUMNS {
        let wanted = runtimes.is_empty() || runtimes.iter().any(|r| r == id);
        let built = if !wanted {
            Err("not selected (--runtimes)".to_string())
        } else {
            match id {
                "go" => build_go(out),
                "java" => build_java(out),
                "weft-std" if !specs.iter().any(|s| matches!(s.drive, Drive::Echo { .. })) => {
                    Err("no echo row selected".to_string())
                }
                "weft-std" => build_transparent(),
                rust => Ok((
                    Launcher {
                        program: exe.clone(),
                        prefix: vec!["worker".into(), rust.into()],
                    },
                    String::new(),
                )),
            }
        };
        if let Err(e) = &built
            && wanted
        {
            eprintln!("note: column {label} skipped: {e}");
        }
        columns.push(Column {
            id: id.into(),
            label: label.into(),
            version: built.as_ref().map(|b| b.1.clone()).unwrap_or_default(),
            skipped: built.as_ref().err().cloned(),
            launcher: built.ok().map(|b| b.0),
        });
    }
    Ok(columns)
}

/// Runs every row, interleaving the columns within each run so that a
/// noisy stretch of time hits every runtime alike.
fn run_specs(specs: &[Spec], columns: &[Column], tls: Option<&TlsFiles>) -> Vec<WorkloadResult> {
    let live = columns.iter().filter(|c| c.launcher.is_some()).count();
    let total: usize = specs.iter().map(|s| s.runs * live).sum();
    let mut step = 0;
    let mut results = Vec::new();
    for spec in specs {
        let mut cells: Vec<Cell> = columns.iter().map(|c| cell(spec, c)).collect();
        for run in 0..spec.runs {
            for (cell, col) in cells.iter_mut().zip(columns) {
                let Some(launcher) = &col.launcher else {
                    continue;
                };
                step += 1;
                if cell.skipped.is_some() || cell.error.is_some() {
                    continue;
                }
                eprint!(
                    "[{step:>3}/{total}] {:<15} {:<9} run {}/{}  ",
                    spec.id,
                    col.id,
                    run + 1,
                    spec.runs
                );
                match run_once(spec, launcher, &cell.args, tls) {
                    Ok(r) => {
                        eprintln!("{}", run_line(spec, &r));
                        cell.runs.push(r);
                    }
                    Err(e) => {
                        eprintln!("FAILED: {e}");
                        cell.error = Some(e);
                    }
                }
            }
        }
        results.push(WorkloadResult {
            id: spec.id.into(),
            title: spec.title.into(),
            what: spec.what.into(),
            unit: spec.unit,
            ideal: spec.ideal,
            ideal_p99_ms: spec.ideal_p99_ms,
            rss_row: spec.rss_row,
            cells,
        });
    }
    results
}

/// The cell of `spec` on `column`, before any run: its arguments, or why
/// it is skipped.
fn cell(spec: &Spec, column: &Column) -> Cell {
    let args = spec
        .overrides
        .iter()
        .find(|o| o.0 == column.id)
        .map(|o| o.1.clone())
        .unwrap_or_else(|| Ok(spec.args.clone()))
        .and_then(|a| match spec.drive {
            Drive::Echo { .. } => Ok(a),
            _ if column.id == "weft-std" => Err("echo rows only".to_string()),
            _ => Ok(a),
        });
    Cell {
        column: column.id.clone(),
        args: args.clone().unwrap_or_default(),
        runs: Vec::new(),
        skipped: column
            .skipped
            .as_ref()
            .map(|_| "column skipped".to_string())
            .or(args.err()),
        error: None,
    }
}

/// A run's figures on the progress line.
fn run_line(spec: &Spec, r: &Run) -> String {
    format!(
        "{}{}{}{}  rss {}{}",
        spec.unit.format(r.value),
        r.parked_ms
            .map(|p| format!("  all parked in {}", Unit::Ms.format(p)))
            .unwrap_or_default(),
        r.p99_ms
            .map(|p| format!("  p99 {}", Unit::Ms.format(p)))
            .unwrap_or_default(),
        r.slowest_ms
            .map(|p| format!("  CPU-bound request {}", Unit::Ms.format(p)))
            .unwrap_or_default(),
        report::format_kib(r.rss_kib),
        if r.errors > 0 {
            format!("  {} errors", r.errors)
        } else {
            String::new()
        }
    )
}

/// Prints the table; writes `results.json`, `report.md`, the charts and,
/// for a full run or with `--update-docs`, `docs/bench.md`.
fn write_results(cli: &Cli, rep: &report::Report, out: &Path) -> Result<(), String> {
    let rows: Vec<Row> = rep.rows();
    println!("\n{}", report::text_table(rep, &rows));
    let json = serde_json::to_string_pretty(rep).map_err(|e| e.to_string())?;
    write(&out.join("results.json"), &json)?;
    let md = report::markdown(rep, &rows);
    write(&out.join("report.md"), &md)?;
    for w in &rep.workloads {
        write(
            &out.join("charts").join(format!("{}.svg", w.id)),
            &report::svg(w, &rep.columns),
        )?;
    }
    println!(
        "wrote {} (results.json, report.md, charts/*.svg) in {:.0} s",
        out.display(),
        rep.duration_secs
    );
    let full_run = !cli.quick
        && cli.only.is_empty()
        && cli.runtimes.is_empty()
        && cli.runs.is_none()
        && cli.busy == 0
        && cli.cpu_quota.is_none();
    if cli.update_docs || full_run {
        let doc = workspace_dir().join("docs").join("bench.md");
        let text = std::fs::read_to_string(&doc)
            .map_err(|e| format!("cannot read {}: {e}", doc.display()))?;
        let new = report::splice_docs(&text, &md)?;
        write(&doc, &new)?;
        println!("updated {}", doc.display());
    }
    Ok(())
}

/// Where `--busy` neighbours run (`--busy-placement`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Placement {
    /// Neighbour i bound to the i-th allowed CPU, round robin.
    Spread,
    /// Wherever the kernel puts them.
    Free,
}

/// CPU-bound neighbour processes (`yes` writing to `/dev/null`), killed
/// when dropped.
struct Neighbours(Vec<std::process::Child>);

impl Neighbours {
    fn start(n: usize, placement: Placement) -> Result<Neighbours, String> {
        let cpus = match placement {
            Placement::Spread if n > 0 => allowed_cpus()?,
            _ => Vec::new(),
        };
        let mut started = Neighbours(Vec::new());
        let mut bound = Vec::new();
        for i in 0..n {
            let child = Command::new("yes")
                .stdout(std::process::Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start a busy neighbour (yes): {e}"))?;
            let pid = child.id();
            started.0.push(child);
            if !cpus.is_empty() {
                let cpu = cpus[i % cpus.len()];
                bind_to_cpu(pid, cpu)
                    .map_err(|e| format!("cannot bind busy neighbour {pid} to CPU {cpu}: {e}"))?;
                bound.push(cpu.to_string());
            }
        }
        if n > 0 {
            match placement {
                Placement::Spread => println!(
                    "running beside {n} busy neighbour processes (yes > /dev/null), bound to CPUs {}",
                    bound.join(", ")
                ),
                Placement::Free => println!(
                    "running beside {n} busy neighbour processes (yes > /dev/null), placed by the kernel"
                ),
            }
        }
        Ok(started)
    }
}

/// The CPUs this process may run on (its affinity mask), in order.
fn allowed_cpus() -> Result<Vec<usize>, String> {
    // SAFETY: `cpu_set_t` is plain data, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(format!(
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        ));
    }
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the bits `set` holds.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect();
    if cpus.is_empty() {
        return Err("this process may run on no CPU".into());
    }
    Ok(cpus)
}

/// Binds process `pid` to one CPU.
fn bind_to_cpu(pid: u32, cpu: usize) -> std::io::Result<()> {
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` came from `allowed_cpus`, so it is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    let pid = libc::pid_t::try_from(pid).map_err(std::io::Error::other)?;
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed; the call
    // only reads it.
    let r = unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl Drop for Neighbours {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The https servers' certificate: PEM files that every runtime reads.
struct TlsFiles {
    cert: PathBuf,
    key: PathBuf,
}

impl TlsFiles {
    /// A fresh self-signed certificate for `localhost` and `127.0.0.1`
    /// (rcgen's default key: ECDSA P-256, PKCS#8), written to `dir` as
    /// `cert.pem` and `key.pem`.
    fn generate(dir: &Path) -> Result<TlsFiles, String> {
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let c = rcgen::generate_simple_self_signed(names)
            .map_err(|e| format!("generating a certificate: {e}"))?;
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let files = TlsFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        write(&files.cert, &c.cert.pem())?;
        write(&files.key, &c.signing_key.serialize_pem())?;
        Ok(files)
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_versions_parse() {
        assert_eq!(
            java_major("openjdk version \"25.0.3\" 2026-04-21 LTS"),
            Some(25)
        );
        assert_eq!(
            java_major("openjdk version \"17.0.9\" 2023-10-17"),
            Some(17)
        );
        assert_eq!(java_major("java version \"1.8.0_402\""), Some(8));
        assert_eq!(java_major("openjdk version \"21-ea\""), Some(21));
        assert_eq!(java_major("garbage"), None);
    }

    #[test]
    fn plans_have_unique_ids_and_quick_is_smaller() {
        let full = plan(false, None);
        let quick = plan(true, None);
        let mut ids: Vec<_> = full.iter().map(|s| s.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), full.len());
        assert!(quick.len() < full.len());
        for s in &full {
            if matches!(s.drive, Drive::Own) {
                let known = [
                    "spawn",
                    "spawn-main",
                    "pingpong",
                    "pingpong-cross",
                    "mutex",
                    "channel",
                    "sleep",
                    "sleep-main",
                    "park",
                ];
                assert!(known.contains(&s.worker), "{}: {}", s.id, s.worker);
            }
        }
        for q in &quick {
            let f = full.iter().find(|f| f.id == q.id).unwrap();
            assert!(q.args.iter().product::<u64>() <= f.args.iter().product::<u64>());
            assert!(q.window <= f.window);
        }
    }
}
