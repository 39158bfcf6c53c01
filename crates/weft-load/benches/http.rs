//! HTTP server benchmark: weft-http (virtual and platform mode) against a
//! Tokio + hyper server, driven by `wrk` and by `weft-load`; and a 1 s
//! sleeping handler under 10,000 connections on a one-carrier server.
//!
//! ```text
//! cargo bench -p weft-load --bench http                 # 3 runs per cell, 5 s each
//! cargo bench -p weft-load --bench http -- --runs 5 --secs 10
//! cargo bench -p weft-load --bench http -- hello        # only the hello-world table
//! cargo bench -p weft-load --bench http -- sleep10k     # only the 10k-connection row
//! cargo bench -p weft-load --bench http -- --no-pin     # servers and loaders on every CPU
//! ```
//!
//! Every server runs in its own child process (this binary re-executed
//! with `--serve KIND`), so servers and load generators never share a
//! process or a descriptor table; the load generators are `wrk` (skipped
//! with a note when it is not installed) and the `weft-load` binary, each
//! also a separate process. On a machine with two or more CPUs the server
//! is pinned to CPU 0 and the load generators to CPU 1, so every server
//! runs on one core (weft: one carrier; Tokio: one worker; platform mode:
//! 200 OS threads on that core) and a load generator can only be the
//! bottleneck if it needs more CPU per request than the server. With
//! `--no-pin` every process may use every CPU (weft and Tokio then start
//! one carrier/worker per CPU). Each cell
//! is the median of the runs (min..max beside it); wrk and weft-load runs
//! alternate, so both see the same background noise.
//!
//! | row | server | load |
//! |---|---|---|
//! | `hello` | `GET /` answers `Hello, World!`; weft virtual (default runtime), weft platform (200 OS threads), Tokio multi-thread runtime + hyper 1 | `wrk -t1 -c50 -d{secs}s`, and `weft-load -c 50 -d {secs}s --threads 1` |
//! | `sleep10k` | weft virtual on a one-carrier runtime; the handler sleeps 1 s | `weft-load -c 10000 -d 20s --warmup 5s --ramp-up 1s` (ideal by Little's law: 10,000 req/s) |
//!
//! Run without `--bench` (as `cargo test --benches` does), it only smoke
//! tests each server with a tiny `weft-load` run.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use weft_bench_support::child::Launcher;
use weft_bench_support::stats::{median, summary};
use weft_bench_support::table::Table;

const HELLO: &str = "Hello, World!";

// ---------------------------------------------------------------------------
// Server child processes

fn serve(kind: &str) {
    let _ = weft_load::raise_fd_limit();
    if kind != "weft-sleep-1carrier" {
        // A hello-world server gets CPU 0 to itself; the load generators
        // run on CPU 1. (The sleep row needs little CPU and is about
        // latency: it is not pinned, so background load cannot trap it on
        // one busy CPU.)
        pin_to(0);
    }
    match kind {
        "weft-virtual" => {
            let h = weft_http::Server::bind("127.0.0.1:0", weft_http::ServerConfig::default())
                .and_then(|s| s.serve(hello_handler))
                .expect("start weft server");
            wait_parent(h.local_addr(), h);
        }
        "weft-platform" => {
            let cfg =
                weft_http::ServerConfig::default().thread_mode(weft_http::ThreadMode::platform());
            let h = weft_http::Server::bind("127.0.0.1:0", cfg)
                .and_then(|s| s.serve(hello_handler))
                .expect("start weft server");
            wait_parent(h.local_addr(), h);
        }
        "weft-sleep-1carrier" => {
            let rt = weft::Runtime::builder()
                .parallelism(1)
                .build()
                .expect("runtime");
            let cfg = weft_http::ServerConfig::default()
                .runtime(rt)
                .max_connections(12_000)
                .backlog(16_384)
                .header_read_timeout(Duration::from_secs(60));
            let h = weft_http::Server::bind("127.0.0.1:0", cfg)
                .and_then(|s| {
                    s.serve(|_req: &mut weft_http::Request<'_>| {
                        match weft::sleep(Duration::from_secs(1)) {
                            Ok(()) => weft_http::Response::text(HELLO),
                            Err(_) => weft_http::Response::error(503),
                        }
                    })
                })
                .expect("start weft server");
            wait_parent(h.local_addr(), h);
        }
        "tokio-hyper" => tokio_hyper(),
        other => panic!("unknown server kind {other}"),
    }
}

fn hello_handler(_req: &mut weft_http::Request<'_>) -> weft_http::Response {
    weft_http::Response::text(HELLO)
}

/// Announces the address, then serves until the parent closes our stdin.
fn wait_parent<T>(addr: std::net::SocketAddr, keep: T) -> T {
    println!("LISTENING {addr}");
    std::io::stdout().flush().unwrap();
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    keep
}

fn tokio_hyper() {
    use http_body_util::Full;
    use hyper::body::Bytes;
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let svc = service_fn(|_req| async {
                    Ok::<_, std::convert::Infallible>(
                        hyper::Response::builder()
                            .header("content-type", "text/plain; charset=utf-8")
                            .body(Full::new(Bytes::from_static(HELLO.as_bytes())))
                            .unwrap(),
                    )
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    wait_parent(addr, ());
    drop(rt);
}

struct ServerProc {
    child: Child,
    addr: String,
}

impl ServerProc {
    fn start(kind: &str) -> ServerProc {
        let mut child = Launcher::this_exe(["--serve"])
            .expect("this executable")
            .command([kind])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start server child");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .expect("server address");
        let addr = line
            .trim()
            .strip_prefix("LISTENING ")
            .unwrap_or_else(|| panic!("server {kind} said {line:?}"))
            .to_owned();
        ServerProc { child, addr }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------
// Load generators

/// Requests per second and p99 (ms) from one wrk run, or None without wrk.
fn wrk(url: &str, secs: u64, conns: usize) -> Option<(f64, f64)> {
    let out = Command::new("wrk")
        .args([
            "-t1",
            &format!("-c{conns}"),
            &format!("-d{secs}s"),
            "--latency",
            url,
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())?;
    let p99 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .and_then(|v| parse_wrk_ms(v.trim()))
        .unwrap_or(f64::NAN);
    Some((rps, p99))
}

fn parse_wrk_ms(v: &str) -> Option<f64> {
    let split = v.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = v.split_at(split);
    let n: f64 = n.parse().ok()?;
    Some(match unit {
        "us" => n / 1000.0,
        "ms" => n,
        "s" => n * 1000.0,
        "m" => n * 60_000.0,
        _ => return None,
    })
}

fn have_wrk() -> bool {
    Command::new("wrk")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Runs the weft-load binary (on CPU 1, inherited from this process) and
/// returns its JSON report.
fn weft_load(args: &[String]) -> serde_json::Value {
    weft_load_cmd(args, Command::new(env!("CARGO_BIN_EXE_weft-load")))
}

/// Runs the weft-load binary on every CPU.
fn weft_load_unpinned(args: &[String]) -> serde_json::Value {
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0-1023", env!("CARGO_BIN_EXE_weft-load")]);
    if Command::new("taskset").arg("-V").output().is_err() {
        cmd = Command::new(env!("CARGO_BIN_EXE_weft-load"));
    }
    weft_load_cmd(args, cmd)
}

fn weft_load_cmd(args: &[String], mut cmd: Command) -> serde_json::Value {
    let out = cmd
        .args(args)
        .arg("--json")
        .stderr(Stdio::inherit())
        .output()
        .expect("run weft-load");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "weft-load output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn num(v: &serde_json::Value, path: &[&str]) -> f64 {
    let mut v = v;
    for p in path {
        v = &v[*p];
    }
    v.as_f64().unwrap_or(f64::NAN)
}

// ---------------------------------------------------------------------------
// Statistics and output

struct Cell(Vec<f64>);

impl Cell {
    /// The median of the runs (NaN when none measured anything).
    fn mid(&self) -> f64 {
        median(&self.0).unwrap_or(f64::NAN)
    }
    fn show(&self) -> String {
        match summary(&self.0) {
            None => "—".into(),
            Some(s) if s.n == 1 => format!("{:.0}", s.median),
            Some(s) => format!("{:.0} ({:.0}..{:.0})", s.median, s.min, s.max),
        }
    }
}

struct Args {
    bench: bool,
    runs: usize,
    secs: u64,
    filters: Vec<String>,
}

fn parse_args() -> Option<Args> {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        bench: false,
        runs: 3,
        secs: 5,
        filters: Vec::new(),
    };
    while let Some(s) = it.next() {
        match s.as_str() {
            "--serve" => {
                serve(&it.next().expect("--serve KIND"));
                return None;
            }
            "--bench" => a.bench = true,
            // SAFETY: single-threaded at this point (argument parsing, before
            // any thread or child is started).
            "--no-pin" => unsafe { std::env::set_var("WEFT_BENCH_NO_PIN", "1") },
            "--runs" => a.runs = it.next().and_then(|v| v.parse().ok()).unwrap_or(3).max(1),
            "--secs" => a.secs = it.next().and_then(|v| v.parse().ok()).unwrap_or(5).max(1),
            f if f.starts_with('-') => eprintln!("http bench: ignoring flag {f}"),
            f => a.filters.push(f.to_owned()),
        }
    }
    Some(a)
}

fn wanted(a: &Args, row: &str) -> bool {
    a.filters.is_empty() || a.filters.iter().any(|f| row.contains(f.as_str()))
}

/// Restricts this process (and the children it starts later) to `cpu`
/// (not with `--no-pin`, which sets `WEFT_BENCH_NO_PIN` for the children).
fn pin_to(cpu: usize) {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2
        || std::env::var_os("WEFT_BENCH_NO_PIN").is_some()
    {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
    // sched_setaffinity only read/write the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn main() {
    let Some(args) = parse_args() else {
        return;
    };
    let _ = weft_load::raise_fd_limit();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if args.bench {
        // Load generators (children of this process) run on CPU 1; each
        // hello-world server child moves itself to CPU 0.
        pin_to(1);
    }
    if !args.bench {
        smoke();
        return;
    }
    // Background load distorts every number below: say what it was.
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!(
            "machine: {cpus} CPUs, load average {} (before the runs)",
            l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
        );
    }
    if wanted(&args, "hello") {
        hello(&args);
    }
    if wanted(&args, "sleep10k") {
        sleep10k(&args);
    }
}

/// `cargo test --benches`: each server answers a short weft-load run.
fn smoke() {
    for kind in ["weft-virtual", "weft-platform", "tokio-hyper"] {
        let s = ServerProc::start(kind);
        let r = weft_load(&[
            "-c".into(),
            "4".into(),
            "-n".into(),
            "200".into(),
            "-q".into(),
            s.url(),
        ]);
        assert_eq!(num(&r, &["requests"]), 200.0, "{kind}");
        assert_eq!(num(&r, &["failures"]), 0.0, "{kind}");
    }
    println!("http bench: smoke test passed (run with `cargo bench` to measure)");
}

fn hello(args: &Args) {
    let wrk_ok = have_wrk();
    let secs = args.secs;
    println!(
        "\n## hello world: wrk -t1 -c50 -d{secs}s vs weft-load -c 50 -d {secs}s --threads 1 ({} runs, median (min..max), req/s)\n",
        args.runs
    );
    if !wrk_ok {
        println!("note: `wrk` is not installed; its columns are skipped (apt-get install wrk)\n");
    }
    let kinds = ["weft-virtual", "weft-platform", "tokio-hyper"];
    let mut rows = Vec::new();
    for kind in kinds {
        let s = ServerProc::start(kind);
        // A short warmup of each server.
        let _ = weft_load(&[
            "-c".into(),
            "50".into(),
            "-d".into(),
            "1s".into(),
            "-q".into(),
            s.url(),
        ]);
        let (mut w, mut wp99, mut l, mut lp99) =
            (Cell(vec![]), Cell(vec![]), Cell(vec![]), Cell(vec![]));
        for _ in 0..args.runs {
            if wrk_ok && let Some((rps, p99)) = wrk(&s.url(), secs, 50) {
                w.0.push(rps);
                wp99.0.push(p99);
            }
            let r = weft_load(&[
                "-c".into(),
                "50".into(),
                "-d".into(),
                format!("{secs}s"),
                "--threads".into(),
                "1".into(),
                "-q".into(),
                s.url(),
            ]);
            l.0.push(num(&r, &["throughput"]));
            lp99.0.push(num(&r, &["latency", "p99_ms"]));
        }
        rows.push((kind, w, wp99, l, lp99));
    }
    let tokio_wrk = rows.last().map_or(f64::NAN, |r| r.1.mid());
    let tokio_load = rows.last().map_or(f64::NAN, |r| r.3.mid());
    let mut table = Table::new([
        "server",
        "wrk req/s",
        "wrk p99 ms",
        "weft-load req/s",
        "weft-load p99 ms",
        "weft-load / wrk",
        "vs Tokio (wrk)",
        "vs Tokio (weft-load)",
    ]);
    for (kind, w, wp99, l, lp99) in &rows {
        table.row([
            kind.to_string(),
            w.show(),
            format!("{:.2}", wp99.mid()),
            l.show(),
            format!("{:.2}", lp99.mid()),
            format!("{:.1}%", 100.0 * l.mid() / w.mid()),
            format!("{:.1}%", 100.0 * w.mid() / tokio_wrk),
            format!("{:.1}%", 100.0 * l.mid() / tokio_load),
        ]);
    }
    print!("{}", table.markdown());
}

fn sleep10k(args: &Args) {
    let conns = 10_000;
    let secs = 20;
    println!(
        "\n## 1 s sleeping handler, {conns} connections, one-carrier weft server: weft-load -c {conns} -d {secs}s --warmup 5s --ramp-up 1s ({} runs)\n",
        args.runs.min(2)
    );
    let mut table = Table::new([
        "run",
        "req/s",
        "ideal (Little)",
        "% of ideal",
        "p50 ms",
        "p99 ms",
        "max ms",
        "failures",
    ]);
    for run in 0..args.runs.min(2) {
        let s = ServerProc::start("weft-sleep-1carrier");
        let r = weft_load_unpinned(&[
            "-c".into(),
            conns.to_string(),
            "-d".into(),
            format!("{secs}s"),
            "--warmup".into(),
            "5s".into(),
            "--ramp-up".into(),
            "1s".into(),
            "--timeout".into(),
            "30s".into(),
            "-q".into(),
            s.url(),
        ]);
        let rps = num(&r, &["throughput"]);
        let ideal = conns as f64 / 1.0;
        table.row([
            (run + 1).to_string(),
            format!("{rps:.0}"),
            format!("{ideal:.0}"),
            format!("{:.2}%", 100.0 * rps / ideal),
            format!("{:.1}", num(&r, &["latency", "p50_ms"])),
            format!("{:.1}", num(&r, &["latency", "p99_ms"])),
            format!("{:.1}", num(&r, &["latency", "max_ms"])),
            num(&r, &["failures"]).to_string(),
        ]);
        eprintln!("  sleep10k run {}: {rps:.0} req/s", run + 1);
        drop(s);
    }
    print!("{}", table.markdown());
}
