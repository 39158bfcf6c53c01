//! weft-pg against a real PostgreSQL server, measured in one process run.
//!
//! ```text
//! cargo bench -p weft-pg --bench pg                  # every row, 3 runs, 3 s windows
//! cargo bench -p weft-pg --bench pg -- --runs 5      # more runs per row
//! cargo bench -p weft-pg --bench pg -- --secs 2      # other window for the SELECT 1 rows
//! cargo bench -p weft-pg --bench pg -- select1       # only rows whose id contains this
//! ```
//!
//! The server: `WEFT_PG_URL`, else the throwaway cluster of
//! `scripts/pg-test-cluster.sh` (started if PostgreSQL is installed), else
//! the bench says so and exits.
//!
//! | row | what one run measures |
//! |---|---|
//! | `sleep/virtual` | 100 virtual threads × 5 `SELECT pg_sleep(0.1)` through a `weft_pg::Pool` of 10; queries/s (ideal: 10 / 0.1 s = 100), and weft's stall/pinned events during the run |
//! | `sleep/os` | the same from 100 OS threads (the pool is the limit either way) |
//! | `select1/weft` | 64 virtual threads, `weft_pg::Pool` of 16, each a closed loop of `query("SELECT 1")` for the window; queries/s |
//! | `select1/tokio` | 64 Tokio tasks (multi-thread runtime, one worker per CPU), `tokio-postgres` over Tokio sockets, 16 connections behind a `tokio::sync::Semaphore` (a minimal pool: the cheapest baseline); queries/s |
//! | `lat1/weft`, `lat1/tokio` | one thread (task), one connection, back-to-back `query("SELECT 1")`: the latency of one query |
//! | `driver/inline` | how weft-pg drives tokio-postgres: the calling virtual thread polls the query and the connection (bare pool of 16, 64 threads) |
//! | `driver/thread` | tokio-postgres with one weft virtual thread per connection running `weft::block_on(connection)`, queries via `weft::block_on(client.query(..))` |
//! | `driver/protocol` | a minimal synchronous client written on `postgres-protocol` over blocking weft sockets (same two round trips per query as tokio-postgres) |
//!
//! `query("SELECT 1")` with a `&str` costs two round trips in
//! tokio-postgres (prepare, then bind/execute); every row does the same.
//! Rows run interleaved, run by run; each row reports the median (min..max).
//!
//! Run without `--bench` (as `cargo test --benches` does), every row runs
//! once with tiny sizes, as a smoke test.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::{backend, frontend};
use tokio_postgres::NoTls;
use weft_bench_support::stats::{self, summary};
use weft_bench_support::table::Table;
use weft_pg::{Config, Pool};

struct Args {
    smoke: bool,
    runs: usize,
    window: Duration,
    filters: Vec<String>,
}

fn parse_args() -> Args {
    let mut bench = false;
    let mut runs = 3;
    let mut secs = 3.0f64;
    let mut filters = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bench" => bench = true,
            "--runs" => runs = it.next().and_then(|v| v.parse().ok()).unwrap_or(3).max(1),
            "--secs" => secs = it.next().and_then(|v| v.parse().ok()).unwrap_or(3.0),
            f if f.starts_with('-') => eprintln!("pg bench: ignoring flag {f}"),
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
// The server
// ---------------------------------------------------------------------------

fn server_url() -> Option<String> {
    if let Ok(u) = std::env::var("WEFT_PG_URL") {
        return Some(u);
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg-test-cluster.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .arg("start")
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        l.strip_prefix("export WEFT_PG_URL=")
            .map(|v| v.trim_matches('\'').to_string())
    })
}

/// The first TCP address and the credentials of the URL.
struct Target {
    addr: std::net::SocketAddr,
    user: String,
    password: String,
    db: String,
    pg: tokio_postgres::Config,
}

fn target(url: &str) -> Target {
    let pg: tokio_postgres::Config = url.parse().expect("WEFT_PG_URL parses");
    let host = match &pg.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        _ => panic!("the benches need a TCP URL"),
    };
    let port = pg.get_ports().first().copied().unwrap_or(5432);
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
        .unwrap()
        .next()
        .unwrap();
    Target {
        addr,
        user: pg.get_user().unwrap_or("postgres").to_string(),
        password: String::from_utf8_lossy(pg.get_password().unwrap_or(b"")).into_owned(),
        db: pg.get_dbname().unwrap_or("postgres").to_string(),
        pg,
    }
}

// ---------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------

struct Sample {
    qps: f64,
    /// Client-process CPU time (user + system) per query, µs.
    cpu_us: f64,
    stalls: u64,
    pinned: u64,
    note: String,
}

fn events<T>(f: impl FnOnce() -> T) -> (T, u64, u64) {
    let before = weft::events::counters();
    let r = f();
    let after = weft::events::counters();
    let (stalls, pinned) = (after.stalls - before.stalls, after.pinned - before.pinned);
    if stalls + pinned > 0 {
        let recent = weft::events::recent();
        for e in recent.iter().rev().take((stalls + pinned) as usize) {
            eprintln!("    event: {e}");
        }
    }
    (r, stalls, pinned)
}

/// This process's CPU time so far (user + system).
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_SELF is valid.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Measures `f` (which returns queries/s and the query count) with CPU
/// accounting.
fn with_cpu(f: impl FnOnce() -> (f64, u64)) -> (f64, f64) {
    let c0 = cpu_time();
    let (qps, n) = f();
    let cpu = cpu_time() - c0;
    (
        qps,
        if n == 0 {
            0.0
        } else {
            cpu.as_secs_f64() * 1e6 / n as f64
        },
    )
}

fn sleep_row(
    url: &str,
    threads: usize,
    pool_size: usize,
    per_thread: usize,
    virtual_threads: bool,
) -> Sample {
    let pool = Pool::new(
        Config::from_url(url)
            .unwrap()
            .max_size(pool_size)
            .min_idle(pool_size)
            .pool_name("bench-sleep"),
    )
    .unwrap();
    while pool.metrics().idle < pool_size {
        weft::sleep(Duration::from_millis(5)).unwrap();
    }
    let ((elapsed, m), stalls, pinned) = events(|| {
        let start = Instant::now();
        let work = {
            let pool = pool.clone();
            move || {
                for _ in 0..per_thread {
                    let mut c = pool.get().unwrap();
                    c.query("SELECT pg_sleep(0.1)", &[]).unwrap();
                }
            }
        };
        if virtual_threads {
            let hs: Vec<_> = (0..threads).map(|_| weft::spawn(work.clone())).collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
        } else {
            let hs: Vec<_> = (0..threads)
                .map(|_| std::thread::spawn(work.clone()))
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
        }
        (start.elapsed(), pool.metrics())
    });
    let qps = (threads * per_thread) as f64 / elapsed.as_secs_f64();
    Sample {
        qps,
        cpu_us: 0.0,
        stalls,
        pinned,
        note: format!(
            "acquire p50 {:.0} ms, p99 {:.0} ms",
            m.acquire.quantile(0.5).as_secs_f64() * 1e3,
            m.acquire.quantile(0.99).as_secs_f64() * 1e3
        ),
    }
}

/// Runs `body` in `threads` virtual threads until `window` is over;
/// queries per second and the query count.
fn closed_loop_weft(
    threads: usize,
    window: Duration,
    body: impl Fn() + Send + Sync + 'static,
) -> (f64, u64) {
    let body = Arc::new(body);
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let (body, stop, count) = (body.clone(), stop.clone(), count.clone());
            weft::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    body();
                    n += 1;
                }
                count.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    let start = Instant::now();
    weft::sleep(window).unwrap();
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    let n = count.load(Ordering::Relaxed);
    (n as f64 / start.elapsed().as_secs_f64(), n)
}

fn select1_weft(url: &str, threads: usize, pool_size: usize, window: Duration) -> Sample {
    let pool = Pool::new(
        Config::from_url(url)
            .unwrap()
            .max_size(pool_size)
            .min_idle(pool_size)
            .pool_name("bench-s1"),
    )
    .unwrap();
    while pool.metrics().idle < pool_size {
        weft::sleep(Duration::from_millis(5)).unwrap();
    }
    let ((qps, cpu_us), stalls, pinned) = events(|| {
        with_cpu(|| {
            closed_loop_weft(threads, window, move || {
                let mut c = pool.get().unwrap();
                let r = c.query("SELECT 1", &[]).unwrap();
                assert_eq!(r.len(), 1);
            })
        })
    });
    Sample {
        qps,
        cpu_us,
        stalls,
        pinned,
        note: String::new(),
    }
}

fn select1_tokio(t: &Target, tasks: usize, pool_size: usize, window: Duration) -> Sample {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let qps = with_cpu(|| {
        rt.block_on(async {
            let mut clients = Vec::new();
            for _ in 0..pool_size {
                let s = tokio::net::TcpStream::connect(t.addr).await.unwrap();
                s.set_nodelay(true).unwrap();
                let (client, conn) = t.pg.connect_raw(s, NoTls).await.unwrap();
                tokio::spawn(conn);
                clients.push(client);
            }
            let pool = Arc::new((
                tokio::sync::Semaphore::new(pool_size),
                std::sync::Mutex::new(clients),
            ));
            let stop = Arc::new(AtomicBool::new(false));
            let count = Arc::new(AtomicU64::new(0));
            let hs: Vec<_> = (0..tasks)
                .map(|_| {
                    let (pool, stop, count) = (pool.clone(), stop.clone(), count.clone());
                    tokio::spawn(async move {
                        let mut n = 0;
                        while !stop.load(Ordering::Relaxed) {
                            let _permit = pool.0.acquire().await.unwrap();
                            let client = pool.1.lock().unwrap().pop().unwrap();
                            let r = client.query("SELECT 1", &[]).await.unwrap();
                            assert_eq!(r.len(), 1);
                            pool.1.lock().unwrap().push(client);
                            n += 1;
                        }
                        count.fetch_add(n, Ordering::Relaxed);
                    })
                })
                .collect();
            let start = Instant::now();
            tokio::time::sleep(window).await;
            stop.store(true, Ordering::Relaxed);
            for h in hs {
                h.await.unwrap();
            }
            let n = count.load(Ordering::Relaxed);
            (n as f64 / start.elapsed().as_secs_f64(), n)
        })
    });
    Sample {
        qps: qps.0,
        cpu_us: qps.1,
        stalls: 0,
        pinned: 0,
        note: String::new(),
    }
}

/// A bare pool (a semaphore and a stack), to compare drivers alone.
struct Bare<T> {
    sem: weft::sync::Semaphore,
    items: weft::sync::Mutex<Vec<T>>,
}

impl<T> Bare<T> {
    fn new(items: Vec<T>) -> Bare<T> {
        Bare {
            sem: weft::sync::Semaphore::new(items.len()),
            items: weft::sync::Mutex::new(items),
        }
    }
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.sem.acquire().unwrap().forget();
        let mut item = self.items.lock().unwrap().pop().unwrap();
        let r = f(&mut item);
        self.items.lock().unwrap().push(item);
        self.sem.release();
        r
    }
}

fn driver_inline(url: &str, threads: usize, pool_size: usize, window: Duration) -> Sample {
    let conns: Vec<_> = (0..pool_size)
        .map(|_| weft_pg::Connection::connect_url(url).unwrap())
        .collect();
    let pool = Arc::new(Bare::new(conns));
    let ((qps, cpu_us), stalls, pinned) = events(|| {
        with_cpu(|| {
            closed_loop_weft(threads, window, move || {
                pool.with(|c| assert_eq!(c.query("SELECT 1", &[]).unwrap().len(), 1));
            })
        })
    });
    Sample {
        qps,
        cpu_us,
        stalls,
        pinned,
        note: String::new(),
    }
}

fn driver_thread(t: &Target, threads: usize, pool_size: usize, window: Duration) -> Sample {
    let clients: Vec<_> = (0..pool_size)
        .map(|_| {
            let s = weft::net::TcpStream::connect(t.addr).unwrap();
            s.set_nodelay(true).unwrap();
            let (client, conn) = weft::block_on(t.pg.connect_raw(s, NoTls)).unwrap();
            weft::spawn(move || {
                let _ = weft::block_on(conn);
            });
            client
        })
        .collect();
    let pool = Arc::new(Bare::new(clients));
    let ((qps, cpu_us), stalls, pinned) = events(|| {
        with_cpu(|| {
            closed_loop_weft(threads, window, move || {
                pool.with(|c| {
                    assert_eq!(weft::block_on(c.query("SELECT 1", &[])).unwrap().len(), 1)
                });
            })
        })
    });
    Sample {
        qps,
        cpu_us,
        stalls,
        pinned,
        note: String::new(),
    }
}

/// A minimal synchronous client on `postgres-protocol`: what writing our
/// own driver would start from.
struct Mini {
    s: weft::net::TcpStream,
    out: BytesMut,
    inp: BytesMut,
}

impl Mini {
    fn connect(t: &Target) -> Mini {
        let s = weft::net::TcpStream::connect(t.addr).unwrap();
        s.set_nodelay(true).unwrap();
        let mut m = Mini {
            s,
            out: BytesMut::new(),
            inp: BytesMut::new(),
        };
        frontend::startup_message(
            [("user", t.user.as_str()), ("database", t.db.as_str())],
            &mut m.out,
        )
        .unwrap();
        m.flush();
        let mut scram = None;
        loop {
            match m.next() {
                backend::Message::AuthenticationSasl(_) => {
                    let sc = postgres_protocol::authentication::sasl::ScramSha256::new(
                        t.password.as_bytes(),
                        postgres_protocol::authentication::sasl::ChannelBinding::unsupported(),
                    );
                    frontend::sasl_initial_response("SCRAM-SHA-256", sc.message(), &mut m.out)
                        .unwrap();
                    m.flush();
                    scram = Some(sc);
                }
                backend::Message::AuthenticationSaslContinue(b) => {
                    let sc = scram.as_mut().unwrap();
                    sc.update(b.data()).unwrap();
                    frontend::sasl_response(sc.message(), &mut m.out).unwrap();
                    m.flush();
                }
                backend::Message::AuthenticationSaslFinal(b) => {
                    scram.as_mut().unwrap().finish(b.data()).unwrap()
                }
                backend::Message::AuthenticationMd5Password(b) => {
                    let h = postgres_protocol::authentication::md5_hash(
                        t.user.as_bytes(),
                        t.password.as_bytes(),
                        b.salt(),
                    );
                    frontend::password_message(h.as_bytes(), &mut m.out).unwrap();
                    m.flush();
                }
                backend::Message::ReadyForQuery(_) => return m,
                backend::Message::ErrorResponse(_) => panic!("mini client: startup failed"),
                _ => {}
            }
        }
    }

    fn flush(&mut self) {
        self.s.write_all(&self.out).unwrap();
        self.out.clear();
    }

    fn next(&mut self) -> backend::Message {
        loop {
            if let Some(m) = backend::Message::parse(&mut self.inp).unwrap() {
                return m;
            }
            let mut tmp = [0u8; 8192];
            let n = self.s.read(&mut tmp).unwrap();
            assert!(n > 0, "mini client: server closed");
            self.inp.extend_from_slice(&tmp[..n]);
        }
    }

    fn until_ready(&mut self) -> Option<i32> {
        let mut v = None;
        loop {
            match self.next() {
                backend::Message::ReadyForQuery(_) => return v,
                backend::Message::DataRow(row) => {
                    let r = row.ranges().next().unwrap().unwrap().unwrap();
                    v = Some(i32::from_be_bytes(row.buffer()[r].try_into().unwrap()));
                }
                backend::Message::ErrorResponse(_) => panic!("mini client: query failed"),
                _ => {}
            }
        }
    }

    /// `SELECT 1` the way tokio-postgres does it: prepare, then bind and
    /// execute with binary results.
    fn select1(&mut self) -> i32 {
        frontend::parse("", "SELECT 1", std::iter::empty(), &mut self.out).unwrap();
        frontend::describe(b'S', "", &mut self.out).unwrap();
        frontend::sync(&mut self.out);
        self.flush();
        self.until_ready();
        frontend::bind(
            "",
            "",
            std::iter::empty(),
            std::iter::empty::<()>(),
            |_, _| Ok(postgres_protocol::IsNull::No),
            [1],
            &mut self.out,
        )
        .map_err(|_| ())
        .unwrap();
        frontend::execute("", 0, &mut self.out).unwrap();
        frontend::sync(&mut self.out);
        self.flush();
        self.until_ready().unwrap()
    }
}

fn driver_protocol(t: &Target, threads: usize, pool_size: usize, window: Duration) -> Sample {
    let conns: Vec<_> = (0..pool_size).map(|_| Mini::connect(t)).collect();
    let pool = Arc::new(Bare::new(conns));
    let ((qps, cpu_us), stalls, pinned) = events(|| {
        with_cpu(|| {
            closed_loop_weft(threads, window, move || {
                pool.with(|c| assert_eq!(c.select1(), 1));
            })
        })
    });
    Sample {
        qps,
        cpu_us,
        stalls,
        pinned,
        note: String::new(),
    }
}

/// One thread, one connection, back-to-back `SELECT 1`: the latency of
/// one query (queries/s = 1 / latency), without pool or contention.
fn lat1_weft(url: &str, window: Duration) -> Sample {
    let url = url.to_string();
    let ((qps, cpu_us), stalls, pinned) = events(|| {
        with_cpu(|| {
            weft::spawn(move || {
                let mut c = weft_pg::Connection::connect_url(&url).unwrap();
                let start = Instant::now();
                let mut n = 0u64;
                while start.elapsed() < window {
                    assert_eq!(c.query("SELECT 1", &[]).unwrap().len(), 1);
                    n += 1;
                }
                (n as f64 / start.elapsed().as_secs_f64(), n)
            })
            .join()
            .unwrap()
        })
    });
    Sample {
        qps,
        cpu_us,
        stalls,
        pinned,
        note: String::new(),
    }
}

fn lat1_tokio(t: &Target, window: Duration) -> Sample {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (qps, cpu_us) = with_cpu(|| {
        rt.block_on(async {
            let s = tokio::net::TcpStream::connect(t.addr).await.unwrap();
            s.set_nodelay(true).unwrap();
            let (client, conn) = t.pg.connect_raw(s, NoTls).await.unwrap();
            tokio::spawn(conn);
            tokio::spawn(async move {
                let start = Instant::now();
                let mut n = 0u64;
                while start.elapsed() < window {
                    assert_eq!(client.query("SELECT 1", &[]).await.unwrap().len(), 1);
                    n += 1;
                }
                (n as f64 / start.elapsed().as_secs_f64(), n)
            })
            .await
            .unwrap()
        })
    });
    Sample {
        qps,
        cpu_us,
        stalls: 0,
        pinned: 0,
        note: String::new(),
    }
}

// ---------------------------------------------------------------------------

fn main() {
    let args = parse_args();
    let Some(url) = server_url() else {
        eprintln!(
            "===== pg bench: NO POSTGRESQL SERVER (set WEFT_PG_URL or install postgresql); nothing measured ====="
        );
        return;
    };
    let t = target(&url);
    let (sleep_threads, sleep_pool, sleep_rounds) = if args.smoke {
        (10, 10, 1)
    } else {
        (100, 10, 5)
    };
    let (s1_threads, s1_pool) = if args.smoke { (8, 4) } else { (64, 16) };
    let w = args.window;

    type Row<'a> = (&'static str, Box<dyn Fn() -> Sample + 'a>);
    let rows: Vec<Row<'_>> = vec![
        (
            "sleep/virtual",
            Box::new(|| sleep_row(&url, sleep_threads, sleep_pool, sleep_rounds, true)),
        ),
        (
            "sleep/os",
            Box::new(|| sleep_row(&url, sleep_threads, sleep_pool, sleep_rounds, false)),
        ),
        (
            "select1/weft",
            Box::new(|| select1_weft(&url, s1_threads, s1_pool, w)),
        ),
        (
            "select1/tokio",
            Box::new(|| select1_tokio(&t, s1_threads, s1_pool, w)),
        ),
        ("lat1/weft", Box::new(|| lat1_weft(&url, w))),
        ("lat1/tokio", Box::new(|| lat1_tokio(&t, w))),
        (
            "driver/inline",
            Box::new(|| driver_inline(&url, s1_threads, s1_pool, w)),
        ),
        (
            "driver/thread",
            Box::new(|| driver_thread(&t, s1_threads, s1_pool, w)),
        ),
        (
            "driver/protocol",
            Box::new(|| driver_protocol(&t, s1_threads, s1_pool, w)),
        ),
    ];
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|(id, _)| args.filters.is_empty() || args.filters.iter().any(|f| id.contains(f)))
        .collect();
    println!(
        "weft-pg bench: {} run(s) per row, SELECT 1 window {:.1} s, {} CPUs, server {}{}",
        args.runs,
        w.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        t.addr,
        if args.smoke {
            " (smoke: tiny sizes)"
        } else {
            ""
        }
    );
    let mut results: Vec<Vec<Sample>> = rows.iter().map(|_| Vec::new()).collect();
    for run in 0..args.runs {
        for (i, (id, f)) in rows.iter().enumerate() {
            let s = f();
            eprintln!("  run {} {id}: {:.1} q/s {}", run + 1, s.qps, s.note);
            results[i].push(s);
        }
    }
    let mut table = Table::new([
        "row",
        "queries/s (median)",
        "min..max",
        "client CPU µs/query",
        "stall / pinned events",
        "notes",
    ]);
    let med_of = |id: &str| {
        rows.iter()
            .position(|(r, _)| *r == id)
            .and_then(|i| stats::median(&results[i].iter().map(|s| s.qps).collect::<Vec<_>>()))
    };
    let tokio = med_of("select1/tokio");
    let thread = med_of("driver/thread");
    for (i, (id, _)) in rows.iter().enumerate() {
        let q: Vec<f64> = results[i].iter().map(|s| s.qps).collect();
        let (med, lo, hi) =
            summary(&q).map_or((f64::NAN, f64::NAN, f64::NAN), |s| (s.median, s.min, s.max));
        let stalls: u64 = results[i].iter().map(|s| s.stalls).sum();
        let pinned: u64 = results[i].iter().map(|s| s.pinned).sum();
        let note = if id.starts_with("sleep/") {
            let ideal = sleep_pool as f64 / 0.1;
            format!(
                "ideal {ideal:.0} q/s; {:.1}% of ideal; {}",
                100.0 * med / ideal,
                results[i][0].note
            )
        } else if *id == "select1/weft" {
            tokio.map_or(String::new(), |tk| {
                format!("{:.1}% of select1/tokio", 100.0 * med / tk)
            })
        } else if *id == "lat1/weft" {
            med_of("lat1/tokio").map_or(String::new(), |tk| {
                format!("{:.0} µs/query vs {:.0} µs on Tokio", 1e6 / med, 1e6 / tk)
            })
        } else if id.starts_with("driver/") && *id != "driver/thread" {
            thread.map_or(String::new(), |th| {
                format!("{:.2}x driver/thread", med / th)
            })
        } else {
            String::new()
        };
        let events = if id.ends_with("/tokio") {
            "n/a".to_string()
        } else {
            format!("{stalls} / {pinned}")
        };
        let cpu: Vec<f64> = results[i].iter().map(|s| s.cpu_us).collect();
        let cpu = stats::median(&cpu).unwrap_or(0.0);
        let cpu = if cpu > 0.0 {
            format!("{cpu:.1}")
        } else {
            "-".into()
        };
        table.row([
            format!("`{id}`"),
            format!("{med:.1}"),
            format!("{lo:.1}..{hi:.1}"),
            cpu,
            events,
            note,
        ]);
    }
    println!();
    print!("{}", table.markdown());
}
