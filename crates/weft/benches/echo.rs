//! TCP echo and accept rate: weft virtual threads vs Tokio tasks vs std
//! threads, measured in one process run.
//!
//! ```text
//! cargo bench -p weft --bench echo                 # 3 runs per row, 2 s each
//! cargo bench -p weft --bench echo -- --runs 5     # more runs per row
//! cargo bench -p weft --bench echo -- --secs 1     # shorter windows
//! cargo bench -p weft --bench echo -- echo/100     # only rows whose id/impl contains this
//! cargo bench -p weft --bench echo -- /tokio       # e.g. only Tokio
//! ```
//!
//! | row | what one run measures |
//! |---|---|
//! | `echo/C` | C connections on loopback, each a loop of write 64 B / read the 64 B echo, for a fixed window; messages (round trips) per second over all connections, and the p99 round-trip latency |
//! | `accept` | 50 connectors open and reset connections against one acceptor for a fixed window; connections accepted per second |
//!
//! Server and clients live in the same process and use the same runtime:
//! weft — both sides are virtual threads on the default runtime (one
//! carrier per CPU); Tokio — both sides are tasks on a multi-thread runtime
//! (one worker per CPU); std — both sides are OS threads (1 and 100
//! connections only). Each row is the median of the runs (min..max
//! beside it); ratios compare with Tokio's median in the same run.
//!
//! Connections are closed with `SO_LINGER 0` (a reset) so that repeated runs
//! do not fill loopback's ephemeral ports with `TIME_WAIT` sockets.
//!
//! `RLIMIT_NOFILE` is raised to the hard limit at startup; the 10,000
//! connection row needs about 20,000 descriptors (client + server side)
//! and falls back to the largest round thousand that fits (printed).
//!
//! Run without `--bench` (as `cargo test --benches` does), the binary only
//! smoke-tests each row with tiny sizes.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft_bench_support::format::rate;
use weft_bench_support::stats::{self, summary};
use weft_bench_support::table::Table;

const MSG: usize = 64;
const CONNECTORS: usize = 50;

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

struct Args {
    smoke: bool,
    runs: usize,
    window: Duration,
    filters: Vec<String>,
}

fn parse_args() -> Args {
    let mut bench = false;
    let mut runs = 3;
    let mut secs = 2.0f64;
    let mut filters = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bench" => bench = true,
            "--runs" => runs = it.next().and_then(|v| v.parse().ok()).unwrap_or(3).max(1),
            "--secs" => secs = it.next().and_then(|v| v.parse().ok()).unwrap_or(2.0),
            f if f.starts_with('-') => eprintln!("echo bench: ignoring flag {f}"),
            f => filters.push(f.to_string()),
        }
    }
    Args {
        smoke: !bench,
        runs: if bench { runs } else { 1 },
        window: if bench {
            Duration::from_secs_f64(secs)
        } else {
            Duration::from_millis(100)
        },
        filters,
    }
}

// ---------------------------------------------------------------------------
// Latency histogram (log-linear buckets, ~3% resolution)
// ---------------------------------------------------------------------------

const SUB: usize = 32;
const BUCKETS: usize = 64 * SUB;

struct Hist {
    counts: Vec<u64>,
}

impl Hist {
    fn new() -> Hist {
        Hist {
            counts: vec![0; BUCKETS],
        }
    }

    fn index(ns: u64) -> usize {
        if ns < SUB as u64 {
            return ns as usize;
        }
        let log = 63 - ns.leading_zeros() as usize; // >= 5
        let shift = log - 5;
        let sub = ((ns >> shift) as usize) & (SUB - 1);
        (log - 4) * SUB + sub
    }

    fn value(i: usize) -> u64 {
        if i < SUB {
            return i as u64;
        }
        let log = i / SUB + 4;
        let sub = (i % SUB) as u64;
        ((SUB as u64) | sub) << (log - 5)
    }

    fn record(&mut self, d: Duration) {
        let ns = d.as_nanos().min(u64::MAX as u128) as u64;
        self.counts[Self::index(ns).min(BUCKETS - 1)] += 1;
    }

    fn merge(&mut self, o: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
    }

    fn quantile(&self, q: f64) -> Duration {
        let total: u64 = self.counts.iter().sum();
        if total == 0 {
            return Duration::ZERO;
        }
        let want = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Duration::from_nanos(Self::value(i));
            }
        }
        Duration::ZERO
    }
}

/// What one echo run produced.
struct EchoResult {
    msgs_per_sec: f64,
    p99: Duration,
}

/// Collects the clients' counts and latencies.
struct Collect {
    msgs: AtomicU64,
    hist: Mutex<Hist>,
}

impl Collect {
    fn new() -> Arc<Collect> {
        Arc::new(Collect {
            msgs: AtomicU64::new(0),
            hist: Mutex::new(Hist::new()),
        })
    }
    fn add(&self, n: u64, h: &Hist) {
        self.msgs.fetch_add(n, Ordering::Relaxed);
        self.hist.lock().unwrap().merge(h);
    }
    fn result(&self, elapsed: Duration) -> EchoResult {
        EchoResult {
            msgs_per_sec: self.msgs.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64(),
            p99: self.hist.lock().unwrap().quantile(0.99),
        }
    }
}

fn reset_on_close(fd: std::os::fd::BorrowedFd<'_>) {
    let _ = socket2::SockRef::from(&fd).set_linger(Some(Duration::ZERO));
}

fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "echo bench: timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

// ---------------------------------------------------------------------------
// weft
// ---------------------------------------------------------------------------

fn weft_echo(conns: usize, window: Duration) -> EchoResult {
    use weft::net::{TcpListener, TcpStream};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = weft::spawn(move || {
        let mut handlers = Vec::with_capacity(conns);
        for _ in 0..conns {
            let (mut s, _) = l.accept().unwrap();
            handlers.push(weft::spawn(move || {
                s.set_nodelay(true).unwrap();
                let mut buf = [0u8; MSG];
                while s.read_exact(&mut buf).is_ok() {
                    if s.write_all(&buf).is_err() {
                        break;
                    }
                }
            }));
        }
        for h in handlers {
            h.join().unwrap();
        }
    });
    let ready = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(weft::sync::CountDownLatch::new(1));
    let stop = Arc::new(AtomicBool::new(false));
    let out = Collect::new();
    let clients: Vec<_> = (0..conns)
        .map(|_| {
            let (ready, go, stop, out) = (ready.clone(), go.clone(), stop.clone(), out.clone());
            weft::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_nodelay(true).unwrap();
                ready.fetch_add(1, Ordering::SeqCst);
                go.wait().unwrap();
                let mut h = Hist::new();
                let mut n = 0u64;
                let msg = [7u8; MSG];
                let mut buf = [0u8; MSG];
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    s.write_all(&msg).unwrap();
                    s.read_exact(&mut buf).unwrap();
                    h.record(t.elapsed());
                    n += 1;
                }
                out.add(n, &h);
                use std::os::fd::AsFd;
                reset_on_close(s.as_fd());
            })
        })
        .collect();
    wait_for("weft clients to connect", || {
        ready.load(Ordering::SeqCst) == conns
    });
    let start = Instant::now();
    go.count_down();
    std::thread::sleep(window);
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let elapsed = start.elapsed();
    server.join().unwrap();
    out.result(elapsed)
}

fn weft_accept(window: Duration) -> f64 {
    use weft::net::{TcpListener, TcpStream};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let a2 = accepted.clone();
    let server = weft::spawn(move || {
        loop {
            match l.accept() {
                Ok((s, _)) => {
                    a2.fetch_add(1, Ordering::Relaxed);
                    drop(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return,
                Err(_) => {}
            }
        }
    });
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let clients: Vec<_> = (0..CONNECTORS)
        .map(|_| {
            let stop = stop.clone();
            weft::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(s) = TcpStream::connect(addr) {
                        use std::os::fd::AsFd;
                        reset_on_close(s.as_fd());
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(window);
    let n = accepted.load(Ordering::Relaxed);
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    server.thread().interrupt();
    server.join().unwrap();
    n as f64 / elapsed.as_secs_f64()
}

// ---------------------------------------------------------------------------
// Tokio
// ---------------------------------------------------------------------------

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A Tokio listener with the backlog weft's listener gets (Linux's
/// `net.core.somaxconn`, 4096 here) rather than Tokio's default of 1024,
/// which makes 10,000 simultaneous connects retry SYNs for seconds.
fn tokio_listener() -> tokio::net::TcpListener {
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.set_reuseaddr(true).unwrap();
    s.bind(([127, 0, 0, 1], 0).into()).unwrap();
    s.listen(4096).unwrap()
}

fn tokio_echo(rt: &tokio::runtime::Runtime, conns: usize, window: Duration) -> EchoResult {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    rt.block_on(async move {
        let l = tokio_listener();
        let addr = l.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let mut handlers = Vec::with_capacity(conns);
            for _ in 0..conns {
                let (mut s, _) = l.accept().await.unwrap();
                handlers.push(tokio::spawn(async move {
                    s.set_nodelay(true).unwrap();
                    let mut buf = [0u8; MSG];
                    while s.read_exact(&mut buf).await.is_ok() {
                        if s.write_all(&buf).await.is_err() {
                            break;
                        }
                    }
                }));
            }
            for h in handlers {
                h.await.unwrap();
            }
        });
        let ready = Arc::new(AtomicUsize::new(0));
        let (go_tx, go_rx) = tokio::sync::watch::channel(false);
        let stop = Arc::new(AtomicBool::new(false));
        let out = Collect::new();
        let clients: Vec<_> = (0..conns)
            .map(|_| {
                let (ready, stop, out) = (ready.clone(), stop.clone(), out.clone());
                let mut go = go_rx.clone();
                tokio::spawn(async move {
                    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                    s.set_nodelay(true).unwrap();
                    ready.fetch_add(1, Ordering::SeqCst);
                    go.wait_for(|g| *g).await.unwrap();
                    let mut h = Hist::new();
                    let mut n = 0u64;
                    let msg = [7u8; MSG];
                    let mut buf = [0u8; MSG];
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        s.write_all(&msg).await.unwrap();
                        s.read_exact(&mut buf).await.unwrap();
                        h.record(t.elapsed());
                        n += 1;
                    }
                    out.add(n, &h);
                    use std::os::fd::AsFd;
                    reset_on_close(s.as_fd());
                })
            })
            .collect();
        while ready.load(Ordering::SeqCst) < conns {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let start = Instant::now();
        go_tx.send(true).unwrap();
        tokio::time::sleep(window).await;
        stop.store(true, Ordering::Relaxed);
        for c in clients {
            c.await.unwrap();
        }
        let elapsed = start.elapsed();
        server.await.unwrap();
        out.result(elapsed)
    })
}

fn tokio_accept(rt: &tokio::runtime::Runtime, window: Duration) -> f64 {
    rt.block_on(async move {
        let l = tokio_listener();
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let a2 = accepted.clone();
        let server = tokio::spawn(async move {
            loop {
                if let Ok((s, _)) = l.accept().await {
                    a2.fetch_add(1, Ordering::Relaxed);
                    drop(s);
                }
            }
        });
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let clients: Vec<_> = (0..CONNECTORS)
            .map(|_| {
                let stop = stop.clone();
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok(s) = tokio::net::TcpStream::connect(addr).await {
                            use std::os::fd::AsFd;
                            reset_on_close(s.as_fd());
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(window).await;
        let n = accepted.load(Ordering::Relaxed);
        let elapsed = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        for c in clients {
            c.await.unwrap();
        }
        server.abort();
        let _ = server.await;
        n as f64 / elapsed.as_secs_f64()
    })
}

// ---------------------------------------------------------------------------
// std threads
// ---------------------------------------------------------------------------

fn std_echo(conns: usize, window: Duration) -> EchoResult {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap(); // backlog 128: fine for <= 100
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let mut handlers = Vec::with_capacity(conns);
        for _ in 0..conns {
            let (mut s, _) = l.accept().unwrap();
            handlers.push(
                std::thread::Builder::new()
                    .stack_size(64 << 10)
                    .spawn(move || {
                        s.set_nodelay(true).unwrap();
                        let mut buf = [0u8; MSG];
                        while s.read_exact(&mut buf).is_ok() {
                            if s.write_all(&buf).is_err() {
                                break;
                            }
                        }
                    })
                    .unwrap(),
            );
        }
        for h in handlers {
            h.join().unwrap();
        }
    });
    let barrier = Arc::new(std::sync::Barrier::new(conns + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let out = Collect::new();
    let clients: Vec<_> = (0..conns)
        .map(|_| {
            let (barrier, stop, out) = (barrier.clone(), stop.clone(), out.clone());
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    let mut s = std::net::TcpStream::connect(addr).unwrap();
                    s.set_nodelay(true).unwrap();
                    barrier.wait();
                    let mut h = Hist::new();
                    let mut n = 0u64;
                    let msg = [7u8; MSG];
                    let mut buf = [0u8; MSG];
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        s.write_all(&msg).unwrap();
                        s.read_exact(&mut buf).unwrap();
                        h.record(t.elapsed());
                        n += 1;
                    }
                    out.add(n, &h);
                    use std::os::fd::AsFd;
                    reset_on_close(s.as_fd());
                })
                .unwrap()
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    std::thread::sleep(window);
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let elapsed = start.elapsed();
    server.join().unwrap();
    out.result(elapsed)
}

// ---------------------------------------------------------------------------
// Table
// ---------------------------------------------------------------------------

struct Row {
    id: String,
    imp: &'static str,
    rate: Vec<f64>,
    p99_us: Vec<f64>,
}

impl Row {
    fn rate_median(&self) -> f64 {
        stats::median(&self.rate).unwrap_or(f64::NAN)
    }
    fn p99_median(&self) -> Option<f64> {
        stats::median(&self.p99_us)
    }
}

fn print_table(rows: &[Row]) {
    let mut table = Table::new([
        "row",
        "impl",
        "rate (median)",
        "min..max",
        "p99 µs (median)",
        "p99 min..max",
        "rate vs Tokio",
        "p99 vs Tokio",
    ]);
    for r in rows {
        let tokio = rows.iter().find(|t| t.id == r.id && t.imp == "tokio");
        let unit = if r.id.starts_with("accept") {
            "conn/s"
        } else {
            "msg/s"
        };
        let range = |v: &[f64], f: &dyn Fn(f64) -> String| {
            summary(v).map_or("-".to_string(), |s| format!("{}..{}", f(s.min), f(s.max)))
        };
        let p99 = r
            .p99_median()
            .map_or("-".to_string(), |p| format!("{p:.0}"));
        let (vs_rate, vs_p99) = match tokio {
            Some(t) if t.imp != r.imp => (
                format!("{:.2}x", r.rate_median() / t.rate_median()),
                match (r.p99_median(), t.p99_median()) {
                    (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
                    _ => "-".into(),
                },
            ),
            _ => (
                "1.00x".into(),
                if r.p99_us.is_empty() { "-" } else { "1.00x" }.into(),
            ),
        };
        table.row([
            r.id.clone(),
            r.imp.to_string(),
            format!("{} {unit}", rate(r.rate_median())),
            range(&r.rate, &rate),
            p99,
            range(&r.p99_us, &|p| format!("{p:.0}")),
            vs_rate,
            vs_p99,
        ]);
    }
    println!();
    print!("{}", table.markdown());
}

// ---------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------

/// Raises the soft descriptor limit to the hard one; returns the new soft
/// limit.
fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid, initialised struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        lim.rlim_cur = lim.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
    }
    lim.rlim_cur
}

fn main() {
    let args = parse_args();
    let nofile = raise_nofile();
    // Client + server descriptor per connection, plus slack for the
    // runtimes, listeners and the test harness.
    let fit = |c: usize| (2 * c + 200) as u64 <= nofile;
    let big = if args.smoke {
        50
    } else if fit(10_000) {
        10_000
    } else {
        let c = ((nofile.saturating_sub(200) / 2) / 1000 * 1000) as usize;
        println!(
            "note: RLIMIT_NOFILE is {nofile}: 10,000 connections need ~{} descriptors; \
             running {c} connections instead",
            2 * 10_000 + 200
        );
        c
    };
    println!(
        "echo bench: {} run(s) per row, {:?} window, {MSG} B messages, {} CPUs, RLIMIT_NOFILE {nofile}",
        args.runs,
        args.window,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let rt = tokio_rt();
    let selected =
        |id: &str| args.filters.is_empty() || args.filters.iter().any(|f| id.contains(f));

    let mut rows: Vec<Row> = Vec::new();
    let mut sizes = vec![1, 100];
    if big >= 1 {
        sizes.push(big);
    }
    for &c in &sizes {
        let id = format!("echo/{c}");
        let mut imps: Vec<&'static str> = vec!["weft", "tokio"];
        if c <= 100 {
            imps.push("std");
        }
        for imp in imps {
            if !selected(&format!("{id}/{imp}")) {
                continue;
            }
            let mut row = Row {
                id: id.clone(),
                imp,
                rate: Vec::new(),
                p99_us: Vec::new(),
            };
            for _ in 0..args.runs {
                let r = match imp {
                    "weft" => weft_echo(c, args.window),
                    "tokio" => tokio_echo(&rt, c, args.window),
                    _ => std_echo(c, args.window),
                };
                eprintln!(
                    "  {id} {imp}: {} msg/s, p99 {:?}",
                    rate(r.msgs_per_sec),
                    r.p99
                );
                row.rate.push(r.msgs_per_sec);
                row.p99_us.push(r.p99.as_secs_f64() * 1e6);
            }
            rows.push(row);
        }
    }
    for imp in ["weft", "tokio"] {
        if selected(&format!("accept/{imp}")) {
            let mut row = Row {
                id: "accept".into(),
                imp,
                rate: Vec::new(),
                p99_us: Vec::new(),
            };
            for _ in 0..args.runs {
                let r = match imp {
                    "weft" => weft_accept(args.window),
                    _ => tokio_accept(&rt, args.window),
                };
                eprintln!("  accept {imp}: {} conn/s", rate(r));
                row.rate.push(r);
            }
            rows.push(row);
        }
    }
    print_table(&rows);
}
