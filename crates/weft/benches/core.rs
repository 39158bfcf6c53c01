//! Core benchmarks of Weft, measured in one run beside `std` threads and Tokio.
//!
//! ```text
//! cargo bench -p weft --bench core                  # everything, 7 runs per row
//! cargo bench -p weft --bench core -- --quick       # 3 runs per row, smaller N
//! cargo bench -p weft --bench core -- pingpong      # only rows whose id contains "pingpong"
//! cargo bench -p weft --bench core -- --big         # also 1,000,000 sleepers (or WEFT_BENCH_BIG=1)
//! ```
//!
//! Every row is the median of several runs (min..max beside it), all taken in
//! the same process run, so rows compare as ratios on the same noisy machine.
//! Rows with a target from the design brief say `ok` or `MISS`.
//!
//! | group | what one sample measures |
//! |---|---|
//! | `spawn` | spawn N empty threads/tasks, then join them all; wall time / N |
//! | `pingpong` | N park/unpark round trips between two threads (Tokio: `Notify`); time / N |
//! | `channel` | N round trips over two capacity-1 channels; time / N |
//! | `mutex` | T threads each add to one counter under a mutex; time / total increments |
//! | `sleepers` | N virtual threads × `sleep(1 s)`, spawned and joined in a child process; wall time, peak RSS, the most threads asleep at once (below N when spawning N takes longer than a sleep) and RSS per such thread |
//!
//! The sleeper runs re-execute this binary (`--child sleepers N`, with
//! `weft_bench_support::child`) so that each has a fresh process: its peak
//! RSS is read from `wait4`'s `ru_maxrss`, and the child also reports its
//! own `VmHWM` (the figure to trust: `ru_maxrss` can carry the parent's
//! high-water mark across exec).
//!
//! Run without `--bench` (as `cargo test --benches` does) the binary only
//! smoke-tests each benchmark with tiny sizes.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use weft_bench_support::child::{Launcher, Worker, vm_hwm_kib};
use weft_bench_support::format::sig3;
use weft_bench_support::stats::{median, summary};
use weft_bench_support::table::Table;

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

const CHILD_TAG: &str = "weft-bench-child:";

/// How big and how often: full, `--quick`, or the smoke test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Smoke,
    Quick,
    Full,
}

#[derive(Debug)]
struct Args {
    level: Level,
    big: bool,
    list: bool,
    filters: Vec<String>,
}

impl Args {
    fn parse(args: impl Iterator<Item = String>) -> Args {
        let mut bench = false;
        let mut quick = false;
        let mut big = matches!(
            std::env::var("WEFT_BENCH_BIG").as_deref(),
            Ok("1") | Ok("true") | Ok("yes")
        );
        let mut list = false;
        let mut filters = Vec::new();
        for arg in args {
            match arg.as_str() {
                "--bench" => bench = true,
                "--quick" => quick = true,
                "--big" => big = true,
                "--list" => list = true,
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                flag if flag.starts_with('-') => {
                    eprintln!("core bench: ignoring unknown flag {flag}");
                }
                filter => filters.push(filter.to_lowercase()),
            }
        }
        let level = match (bench, quick) {
            (false, _) => Level::Smoke,
            (true, true) => Level::Quick,
            (true, false) => Level::Full,
        };
        Args {
            level,
            big,
            list,
            filters,
        }
    }

    fn selects(&self, id: &str) -> bool {
        let id = id.to_lowercase();
        self.filters.is_empty() || self.filters.iter().any(|f| id.contains(f.as_str()))
    }
}

const USAGE: &str = "\
usage: cargo bench -p weft --bench core -- [--quick] [--big] [--list] [FILTER...]

  --quick   3 runs per row and smaller N (default: 7 runs)
  --big     also run 1,000,000 sleepers (same as WEFT_BENCH_BIG=1)
  --list    list benchmark ids and exit
  FILTER    run only benchmarks whose id (group/name) contains FILTER";

// ---------------------------------------------------------------------------
// Rows and the table
// ---------------------------------------------------------------------------

/// A limit from the design brief: the median must be at most `max`.
#[derive(Clone, Copy, Debug)]
struct Target {
    max: f64,
}

/// One line of the result table.
#[derive(Debug)]
struct Row {
    id: String,
    unit: &'static str,
    samples: Vec<f64>,
    target: Option<Target>,
    error: Option<String>,
}

impl Row {
    fn cells(&self) -> [String; 6] {
        let fmt = sig3;
        let median = median(&self.samples);
        let spread = match summary(&self.samples) {
            Some(s) => format!("{}..{} (n={})", fmt(s.min), fmt(s.max), self.samples.len()),
            None => "-".to_string(),
        };
        let target = self
            .target
            .map_or_else(String::new, |t| format!("<= {}", fmt(t.max)));
        let verdict = match (&self.error, median, self.target) {
            (Some(e), _, _) => format!("ERROR: {e}"),
            (None, Some(m), Some(t)) if m <= t.max => "ok".to_string(),
            (None, Some(_), Some(_)) => "MISS".to_string(),
            _ => String::new(),
        };
        [
            self.id.clone(),
            median.map_or_else(|| "-".to_string(), fmt),
            spread,
            self.unit.to_string(),
            target,
            verdict,
        ]
    }
}

fn print_table(rows: &[Row]) {
    let mut table = Table::new([
        "benchmark",
        "median",
        "min..max",
        "unit",
        "target",
        "verdict",
    ])
    .right([1]);
    let mut group = "";
    for row in rows {
        let this_group = row.id.split('/').next().unwrap_or("");
        if !group.is_empty() && this_group != group {
            table.gap();
        }
        group = this_group;
        table.row(row.cells());
    }
    print!("{}", table.text());
}

// ---------------------------------------------------------------------------
// The bench harness
// ---------------------------------------------------------------------------

/// Sizes and repetitions for one level.
#[derive(Clone, Copy, Debug)]
struct Plan {
    level: Level,
    runs: usize,
}

impl Plan {
    /// `full` at full level, a quarter of it with `--quick`, a tiny smoke size otherwise.
    fn n(&self, full: u64) -> u64 {
        match self.level {
            Level::Full => full,
            Level::Quick => (full / 4).max(1),
            Level::Smoke => (full / 1000).clamp(1, 100),
        }
    }
}

/// Shared state: lazily built runtimes, the plan, and the collected rows.
struct Bench {
    args: Args,
    plan: Plan,
    rows: Vec<Row>,
    weft1: OnceLock<weft::Runtime>,
    weft2: OnceLock<weft::Runtime>,
    tokio_ct: OnceLock<tokio::runtime::Runtime>,
    tokio_mt: OnceLock<tokio::runtime::Runtime>,
}

impl Bench {
    fn weft_rt(&self, parallelism: usize) -> &weft::Runtime {
        let cell = if parallelism == 1 {
            &self.weft1
        } else {
            &self.weft2
        };
        cell.get_or_init(|| {
            weft::Runtime::builder()
                .parallelism(parallelism)
                .build()
                .expect("build a weft runtime")
        })
    }

    fn tokio_ct(&self) -> &tokio::runtime::Runtime {
        self.tokio_ct.get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("build a tokio current_thread runtime")
        })
    }

    fn tokio_mt(&self) -> &tokio::runtime::Runtime {
        self.tokio_mt.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("build a tokio multi_thread runtime")
        })
    }

    /// Runs `measure` (one sample per call, in `unit`) once to warm up, then
    /// `plan.runs` times, and records the row — unless the filter excludes `id`.
    fn run(
        &mut self,
        id: &str,
        unit: &'static str,
        target: Option<f64>,
        mut measure: impl FnMut(&Bench) -> f64,
    ) {
        if self.args.list {
            println!("{id}");
            return;
        }
        if !self.args.selects(id) {
            return;
        }
        eprint!("{id} ...");
        let runs = if self.plan.level == Level::Smoke {
            1
        } else {
            black_box(measure(self));
            self.plan.runs
        };
        let samples: Vec<f64> = (0..runs).map(|_| measure(self)).collect();
        let row = Row {
            id: id.to_string(),
            unit,
            samples,
            // Tiny smoke sizes say nothing about the targets.
            target: target
                .filter(|_| self.plan.level != Level::Smoke)
                .map(|max| Target { max }),
            error: None,
        };
        eprintln!(" {}", row.cells()[1]);
        self.rows.push(row);
    }
}

fn ns_per(took: Duration, n: u64) -> f64 {
    took.as_nanos() as f64 / n as f64
}

// ---------------------------------------------------------------------------
// Threads of three kinds behind one interface
// ---------------------------------------------------------------------------

/// A spawned thread: a handle to unpark it and a way to join it.
struct Spawned<T, Th> {
    thread: Th,
    join: Box<dyn FnOnce() -> T>,
}

impl<T, Th> Spawned<T, Th> {
    fn join(self) -> T {
        (self.join)()
    }
}

/// What the generic benchmarks need from a kind of thread.
trait Flavor {
    type Thread: Clone + Send + Sync + 'static;
    fn spawn<T, F>(&self, f: F) -> Spawned<T, Self::Thread>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static;
    fn current() -> Self::Thread;
    fn park();
    fn unpark(thread: &Self::Thread);
    fn yield_now();
}

/// Virtual threads on a given runtime.
struct Weft<'a>(&'a weft::Runtime);

/// Virtual threads on the default runtime (`weft::spawn`).
struct WeftDefault;

/// Plain OS threads.
struct StdThreads;

fn weft_join<T: Send + 'static>(handle: weft::JoinHandle<T>) -> Spawned<T, weft::Thread> {
    Spawned {
        thread: handle.thread().clone(),
        join: Box::new(move || {
            handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }),
    }
}

impl Flavor for Weft<'_> {
    type Thread = weft::Thread;
    fn spawn<T, F>(&self, f: F) -> Spawned<T, weft::Thread>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        weft_join(self.0.spawn(f))
    }
    fn current() -> weft::Thread {
        weft::current()
    }
    fn park() {
        weft::park()
    }
    fn unpark(thread: &weft::Thread) {
        thread.unpark()
    }
    fn yield_now() {
        weft::yield_now()
    }
}

impl Flavor for WeftDefault {
    type Thread = weft::Thread;
    fn spawn<T, F>(&self, f: F) -> Spawned<T, weft::Thread>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        weft_join(weft::spawn(f))
    }
    fn current() -> weft::Thread {
        weft::current()
    }
    fn park() {
        weft::park()
    }
    fn unpark(thread: &weft::Thread) {
        thread.unpark()
    }
    fn yield_now() {
        weft::yield_now()
    }
}

impl Flavor for StdThreads {
    type Thread = std::thread::Thread;
    fn spawn<T, F>(&self, f: F) -> Spawned<T, std::thread::Thread>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let handle = std::thread::spawn(f);
        Spawned {
            thread: handle.thread().clone(),
            join: Box::new(move || {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }),
        }
    }
    fn current() -> std::thread::Thread {
        std::thread::current()
    }
    fn park() {
        std::thread::park()
    }
    fn unpark(thread: &std::thread::Thread) {
        thread.unpark()
    }
    fn yield_now() {
        std::thread::yield_now()
    }
}

// ---------------------------------------------------------------------------
// (a) spawn + join
// ---------------------------------------------------------------------------

fn spawn_join<F: Flavor>(flavor: &F, n: u64) -> Duration {
    let start = Instant::now();
    let handles: Vec<_> = (0..n).map(|i| flavor.spawn(move || black_box(i))).collect();
    for handle in handles {
        black_box(handle.join());
    }
    start.elapsed()
}

fn weft_spawn_from_virtual(n: u64) -> Duration {
    weft::spawn(move || spawn_join(&WeftDefault, n))
        .join()
        .expect("spawner panicked")
}

fn tokio_spawn_join(rt: &tokio::runtime::Runtime, n: u64) -> Duration {
    rt.block_on(async move {
        let start = Instant::now();
        let handles: Vec<_> = (0..n)
            .map(|i| tokio::spawn(async move { black_box(i) }))
            .collect();
        for handle in handles {
            black_box(handle.await.expect("task panicked"));
        }
        start.elapsed()
    })
}

fn bench_spawn(b: &mut Bench) {
    let n = b.plan.n(100_000);
    let n_std = b.plan.n(10_000);
    let target = Some(150.0);
    b.run(
        "spawn/weft::spawn from an OS thread",
        "ns/thread",
        target,
        |_| ns_per(spawn_join(&WeftDefault, n), n),
    );
    b.run(
        "spawn/weft::spawn from a virtual thread",
        "ns/thread",
        target,
        |_| ns_per(weft_spawn_from_virtual(n), n),
    );
    b.run(
        "spawn/std::thread::spawn (N=10k)",
        "ns/thread",
        None,
        |_| ns_per(spawn_join(&StdThreads, n_std), n_std),
    );
    b.run("spawn/tokio::spawn current_thread", "ns/task", None, |b| {
        ns_per(tokio_spawn_join(b.tokio_ct(), n), n)
    });
    b.run("spawn/tokio::spawn multi_thread(2)", "ns/task", None, |b| {
        ns_per(tokio_spawn_join(b.tokio_mt(), n), n)
    });
}

// ---------------------------------------------------------------------------
// (b) park/unpark ping-pong
// ---------------------------------------------------------------------------

/// `n` round trips: the pinger publishes an odd turn and unparks the ponger,
/// which answers with the next even turn. Turns make spurious wake-ups harmless.
fn park_pingpong<F: Flavor>(flavor: &F, n: u64) -> Duration {
    let turn = Arc::new(AtomicU64::new(0));
    let pinger: Arc<OnceLock<F::Thread>> = Arc::new(OnceLock::new());
    let ponger = {
        let turn = Arc::clone(&turn);
        let pinger = Arc::clone(&pinger);
        flavor.spawn(move || {
            for i in 0..n {
                while turn.load(Ordering::Acquire) != 2 * i + 1 {
                    F::park();
                }
                turn.store(2 * i + 2, Ordering::Release);
                F::unpark(pinger.get().expect("pinger registered"));
            }
        })
    };
    let ponger_thread = ponger.thread.clone();
    let pinging = flavor.spawn(move || {
        pinger.set(F::current()).ok();
        let start = Instant::now();
        for i in 0..n {
            turn.store(2 * i + 1, Ordering::Release);
            F::unpark(&ponger_thread);
            while turn.load(Ordering::Acquire) != 2 * i + 2 {
                F::park();
            }
        }
        start.elapsed()
    });
    ponger.join();
    pinging.join()
}

fn tokio_notify_pingpong(rt: &tokio::runtime::Runtime, n: u64) -> Duration {
    use tokio::sync::Notify;
    rt.block_on(async move {
        let ping = Arc::new(Notify::new());
        let pong = Arc::new(Notify::new());
        let ponger = {
            let (ping, pong) = (Arc::clone(&ping), Arc::clone(&pong));
            tokio::spawn(async move {
                for _ in 0..n {
                    ping.notified().await;
                    pong.notify_one();
                }
            })
        };
        let pinger = tokio::spawn(async move {
            let start = Instant::now();
            for _ in 0..n {
                ping.notify_one();
                pong.notified().await;
            }
            start.elapsed()
        });
        ponger.await.expect("ponger panicked");
        pinger.await.expect("pinger panicked")
    })
}

fn bench_pingpong(b: &mut Bench) {
    let n = b.plan.n(200_000);
    let n_slow = b.plan.n(20_000);
    b.run(
        "pingpong/weft park/unpark, parallelism(1)",
        "ns/round trip",
        Some(60.0),
        |b| ns_per(park_pingpong(&Weft(b.weft_rt(1)), n), n),
    );
    b.run(
        "pingpong/weft park/unpark, parallelism(2)",
        "ns/round trip",
        None,
        |b| ns_per(park_pingpong(&Weft(b.weft_rt(2)), n_slow), n_slow),
    );
    b.run(
        "pingpong/std::thread park/unpark",
        "ns/round trip",
        None,
        |_| ns_per(park_pingpong(&StdThreads, n_slow), n_slow),
    );
    b.run(
        "pingpong/tokio Notify current_thread",
        "ns/round trip",
        None,
        |b| ns_per(tokio_notify_pingpong(b.tokio_ct(), n), n),
    );
    b.run(
        "pingpong/tokio Notify multi_thread(2)",
        "ns/round trip",
        None,
        |b| ns_per(tokio_notify_pingpong(b.tokio_mt(), n_slow), n_slow),
    );
}

// ---------------------------------------------------------------------------
// (c) channel ping-pong
// ---------------------------------------------------------------------------

/// `n` round trips over two channels made by `make`.
fn channel_pingpong<F, S, R>(
    flavor: &F,
    n: u64,
    make: fn() -> (S, R),
    send: fn(&S, u64),
    recv: fn(&R) -> u64,
) -> Duration
where
    F: Flavor,
    S: Send + 'static,
    R: Send + 'static,
{
    let (to_ponger, ponger_rx) = make();
    let (to_pinger, pinger_rx) = make();
    let ponger = flavor.spawn(move || {
        for _ in 0..n {
            let v = recv(&ponger_rx);
            send(&to_pinger, v + 1);
        }
    });
    let pinger = flavor.spawn(move || {
        let start = Instant::now();
        for i in 0..n {
            send(&to_ponger, i);
            let v = recv(&pinger_rx);
            debug_assert_eq!(v, i + 1);
            black_box(v);
        }
        start.elapsed()
    });
    ponger.join();
    pinger.join()
}

fn weft_channel() -> (weft::channel::Sender<u64>, weft::channel::Receiver<u64>) {
    weft::channel::bounded(1)
}

fn weft_send(tx: &weft::channel::Sender<u64>, v: u64) {
    tx.send(v).expect("weft channel closed");
}

fn weft_recv(rx: &weft::channel::Receiver<u64>) -> u64 {
    rx.recv().expect("weft channel closed")
}

fn std_channel() -> (
    std::sync::mpsc::SyncSender<u64>,
    std::sync::mpsc::Receiver<u64>,
) {
    std::sync::mpsc::sync_channel(1)
}

fn std_send(tx: &std::sync::mpsc::SyncSender<u64>, v: u64) {
    tx.send(v).expect("std channel closed");
}

fn std_recv(rx: &std::sync::mpsc::Receiver<u64>) -> u64 {
    rx.recv().expect("std channel closed")
}

fn tokio_channel_pingpong(rt: &tokio::runtime::Runtime, n: u64) -> Duration {
    use tokio::sync::mpsc;
    rt.block_on(async move {
        let (to_ponger, mut ponger_rx) = mpsc::channel::<u64>(1);
        let (to_pinger, mut pinger_rx) = mpsc::channel::<u64>(1);
        let ponger = tokio::spawn(async move {
            for _ in 0..n {
                let v = ponger_rx.recv().await.expect("tokio channel closed");
                to_pinger.send(v + 1).await.expect("tokio channel closed");
            }
        });
        let pinger = tokio::spawn(async move {
            let start = Instant::now();
            for i in 0..n {
                to_ponger.send(i).await.expect("tokio channel closed");
                black_box(pinger_rx.recv().await.expect("tokio channel closed"));
            }
            start.elapsed()
        });
        ponger.await.expect("ponger panicked");
        pinger.await.expect("pinger panicked")
    })
}

fn bench_channel(b: &mut Bench) {
    let n = b.plan.n(200_000);
    let n_slow = b.plan.n(20_000);
    b.run(
        "channel/weft bounded(1), parallelism(1)",
        "ns/round trip",
        None,
        |b| {
            let f = Weft(b.weft_rt(1));
            ns_per(
                channel_pingpong(&f, n, weft_channel, weft_send, weft_recv),
                n,
            )
        },
    );
    b.run(
        "channel/weft bounded(1), parallelism(2)",
        "ns/round trip",
        None,
        |b| {
            let f = Weft(b.weft_rt(2));
            let took = channel_pingpong(&f, n_slow, weft_channel, weft_send, weft_recv);
            ns_per(took, n_slow)
        },
    );
    b.run(
        "channel/std::sync::mpsc::sync_channel(1)",
        "ns/round trip",
        None,
        |_| {
            let took = channel_pingpong(&StdThreads, n_slow, std_channel, std_send, std_recv);
            ns_per(took, n_slow)
        },
    );
    b.run(
        "channel/tokio mpsc(1) current_thread",
        "ns/round trip",
        None,
        |b| ns_per(tokio_channel_pingpong(b.tokio_ct(), n), n),
    );
    b.run(
        "channel/tokio mpsc(1) multi_thread(2)",
        "ns/round trip",
        None,
        |b| ns_per(tokio_channel_pingpong(b.tokio_mt(), n_slow), n_slow),
    );
}

// ---------------------------------------------------------------------------
// (d) contended mutex
// ---------------------------------------------------------------------------

/// `threads` threads, each adding 1 to one counter `per_thread` times under the
/// lock. All threads are started first and released together; the clock runs
/// from the release until every thread has been joined.
fn mutex_contended<F, M>(
    flavor: &F,
    threads: u64,
    per_thread: u64,
    mutex: M,
    increment: fn(&M),
    read: fn(&M) -> u64,
) -> Duration
where
    F: Flavor,
    M: Send + Sync + 'static,
{
    let mutex = Arc::new(mutex);
    let go = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (mutex, go, ready) = (Arc::clone(&mutex), Arc::clone(&go), Arc::clone(&ready));
            flavor.spawn(move || {
                ready.fetch_add(1, Ordering::AcqRel);
                while !go.load(Ordering::Acquire) {
                    F::yield_now();
                }
                for _ in 0..per_thread {
                    increment(&mutex);
                }
            })
        })
        .collect();
    while ready.load(Ordering::Acquire) < threads as usize {
        std::thread::yield_now();
    }
    let start = Instant::now();
    go.store(true, Ordering::Release);
    for handle in handles {
        handle.join();
    }
    let took = start.elapsed();
    assert_eq!(read(&mutex), threads * per_thread, "lost increments");
    took
}

fn weft_increment(m: &weft::sync::Mutex<u64>) {
    *m.lock().expect("poisoned") += 1;
}

fn weft_read(m: &weft::sync::Mutex<u64>) -> u64 {
    *m.lock().expect("poisoned")
}

fn std_increment(m: &std::sync::Mutex<u64>) {
    *m.lock().expect("poisoned") += 1;
}

fn std_read(m: &std::sync::Mutex<u64>) -> u64 {
    *m.lock().expect("poisoned")
}

fn tokio_mutex_contended(rt: &tokio::runtime::Runtime, tasks: u64, per_task: u64) -> Duration {
    rt.block_on(async move {
        let mutex = Arc::new(tokio::sync::Mutex::new(0u64));
        let go = Arc::new(tokio::sync::Notify::new());
        let ready = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let (mutex, go, ready) = (Arc::clone(&mutex), Arc::clone(&go), Arc::clone(&ready));
                tokio::spawn(async move {
                    let released = go.notified();
                    ready.fetch_add(1, Ordering::AcqRel);
                    released.await;
                    for _ in 0..per_task {
                        *mutex.lock().await += 1;
                    }
                })
            })
            .collect();
        while ready.load(Ordering::Acquire) < tasks as usize {
            tokio::task::yield_now().await;
        }
        let start = Instant::now();
        go.notify_waiters();
        for handle in handles {
            handle.await.expect("task panicked");
        }
        let took = start.elapsed();
        assert_eq!(*mutex.lock().await, tasks * per_task, "lost increments");
        took
    })
}

fn bench_mutex(b: &mut Bench) {
    let total = b.plan.n(256_000);
    for threads in [4u64, 64] {
        let per = (total / threads).max(1);
        let ops = per * threads;
        b.run(
            &format!("mutex/weft::sync::Mutex, {threads} virtual threads"),
            "ns/op",
            None,
            |_| {
                let m = weft::sync::Mutex::new(0u64);
                let took =
                    mutex_contended(&WeftDefault, threads, per, m, weft_increment, weft_read);
                ns_per(took, ops)
            },
        );
        b.run(
            &format!("mutex/std::sync::Mutex, {threads} OS threads"),
            "ns/op",
            None,
            |_| {
                let m = std::sync::Mutex::new(0u64);
                let took = mutex_contended(&StdThreads, threads, per, m, std_increment, std_read);
                ns_per(took, ops)
            },
        );
        b.run(
            &format!("mutex/tokio::sync::Mutex, {threads} tasks, multi_thread(2)"),
            "ns/op",
            None,
            |b| ns_per(tokio_mutex_contended(b.tokio_mt(), threads, per), ops),
        );
    }
}

// ---------------------------------------------------------------------------
// (e) sleepers, each run in a child process
// ---------------------------------------------------------------------------

/// What one child reported.
#[derive(Debug, Default)]
struct ChildReport {
    wall: Duration,
    /// Peak RSS from `wait4`'s `ru_maxrss`, in bytes.
    maxrss: u64,
    /// Peak RSS the child read from its own `/proc/self/status` `VmHWM`, in bytes.
    vmhwm: Option<u64>,
    /// Most sleepers that were asleep at the same time. Below N when spawning
    /// N threads takes longer than one sleep.
    peak_live: u64,
}

/// In the child: spawn `n` virtual threads that each sleep 1 s, join them,
/// and print one tagged line with the wall time, `VmHWM` and the peak number
/// of sleepers asleep at once.
fn child_sleepers(n: u64) -> ! {
    static LIVE: AtomicU64 = AtomicU64::new(0);
    static PEAK: AtomicU64 = AtomicU64::new(0);
    fn sleeper() -> std::io::Result<()> {
        let live = LIVE.fetch_add(1, Ordering::Relaxed) + 1;
        PEAK.fetch_max(live, Ordering::Relaxed);
        let slept = weft::sleep(Duration::from_secs(1));
        LIVE.fetch_sub(1, Ordering::Relaxed);
        slept
    }

    let start = Instant::now();
    let mut handles = Vec::with_capacity(n as usize);
    let mut error = None;
    for i in 0..n {
        match weft::Builder::new().spawn(sleeper) {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                error = Some(format!("spawned {i} of {n}, then: {e}"));
                break;
            }
        }
    }
    for handle in handles {
        match handle.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => error = error.or(Some(format!("sleep failed: {e}"))),
            Err(_) => error = error.or(Some("a sleeper panicked".to_string())),
        }
    }
    let wall = start.elapsed();
    let vmhwm_kb = vm_hwm_kib("self");
    match error {
        None => {
            println!(
                "{CHILD_TAG} wall_ns={} vmhwm_kb={} peak_live={}",
                wall.as_nanos(),
                vmhwm_kb.map_or_else(|| "-".to_string(), |v| v.to_string()),
                PEAK.load(Ordering::Relaxed),
            );
            std::process::exit(0)
        }
        Some(e) => {
            println!("{CHILD_TAG} error={e}");
            std::process::exit(1)
        }
    }
}

/// In the parent: re-executes this binary as `--child sleepers n`, waits for
/// it with `wait4` and returns its report.
fn run_child_sleepers(n: u64) -> Result<ChildReport, String> {
    let launcher = Launcher::this_exe(["--child", "sleepers"])?;
    // Far above a sleeper run's few seconds: only a hung child hits it.
    let worker = Worker::start(&launcher, [n.to_string()], Duration::from_secs(600))?;
    let (exit, out) = worker.finish_with_output()?;
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(CHILD_TAG))
        .ok_or_else(|| format!("child printed no result ({})", exit.describe()))?;
    let mut report = ChildReport {
        maxrss: exit.max_rss_kib * 1024,
        ..ChildReport::default()
    };
    if let Some(e) = line.trim().strip_prefix("error=") {
        return Err(e.to_string());
    }
    for field in line.split_whitespace() {
        match field.split_once('=') {
            Some(("wall_ns", v)) => {
                report.wall =
                    Duration::from_nanos(v.parse().map_err(|_| format!("bad line: {line}"))?)
            }
            Some(("vmhwm_kb", v)) => report.vmhwm = v.parse::<u64>().ok().map(|kb| kb * 1024),
            Some(("peak_live", v)) => report.peak_live = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    if !exit.ok_or_terminated() {
        return Err(format!("child failed ({})", exit.describe()));
    }
    Ok(report)
}

fn bench_sleepers(b: &mut Bench) {
    let mut sizes = vec![(100_000u64, "100k", Some(1100.0), None)];
    if b.args.big {
        sizes.push((1_000_000, "1M", Some(1800.0), Some(4500.0)));
    }
    if b.plan.level == Level::Smoke {
        sizes = vec![(1_000, "1k", None, None)];
    }
    for (n, label, wall_target, rss_target) in sizes {
        let wall_id = format!("sleepers/{label} x sleep(1 s): wall time");
        let rss_id = format!("sleepers/{label} x sleep(1 s): peak RSS (ru_maxrss)");
        let hwm_id = format!("sleepers/{label} x sleep(1 s): peak RSS (child VmHWM)");
        let live_id = format!("sleepers/{label} x sleep(1 s): most asleep at once");
        let per_id = format!("sleepers/{label} x sleep(1 s): peak RSS / most asleep");
        let ids = [&wall_id, &rss_id, &hwm_id, &live_id, &per_id];
        if b.args.list {
            for id in ids {
                println!("{id}");
            }
            continue;
        }
        if !ids.iter().any(|id| b.args.selects(id)) {
            continue;
        }
        let runs = match b.plan.level {
            Level::Full => 3,
            Level::Quick | Level::Smoke => 1,
        };
        let mut reports = Vec::new();
        let mut error = None;
        for _ in 0..runs {
            eprint!("{wall_id} ...");
            match run_child_sleepers(n) {
                Ok(report) => {
                    eprintln!(" {:.0} ms", report.wall.as_secs_f64() * 1e3);
                    reports.push(report);
                }
                Err(e) => {
                    eprintln!(" ERROR: {e}");
                    error = Some(e);
                    break;
                }
            }
        }
        let mb = |bytes: u64| bytes as f64 / 1e6;
        b.rows.push(Row {
            id: wall_id,
            unit: "ms",
            samples: reports.iter().map(|r| r.wall.as_secs_f64() * 1e3).collect(),
            target: wall_target.map(|max| Target { max }),
            error: error.clone(),
        });
        b.rows.push(Row {
            id: rss_id,
            unit: "MB",
            samples: reports.iter().map(|r| mb(r.maxrss)).collect(),
            target: rss_target.map(|max| Target { max }),
            error: error.clone(),
        });
        b.rows.push(Row {
            id: hwm_id,
            unit: "MB",
            samples: reports.iter().filter_map(|r| r.vmhwm.map(mb)).collect(),
            target: None,
            error: error.clone(),
        });
        b.rows.push(Row {
            id: live_id,
            unit: "threads",
            samples: reports.iter().map(|r| r.peak_live as f64).collect(),
            target: None,
            error: error.clone(),
        });
        b.rows.push(Row {
            id: per_id,
            unit: "KiB",
            samples: reports
                .iter()
                .map(|r| r.maxrss as f64 / 1024.0 / r.peak_live.max(1) as f64)
                .collect(),
            target: None,
            error,
        });
    }
}

// ---------------------------------------------------------------------------

fn main() {
    let mut argv = std::env::args().skip(1).peekable();
    if argv.peek().map(String::as_str) == Some("--child") {
        let rest: Vec<String> = argv.skip(1).collect();
        match rest.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["sleepers", n] => child_sleepers(n.parse().expect("--child sleepers N")),
            _ => {
                eprintln!("core bench: bad child arguments {rest:?}");
                std::process::exit(2)
            }
        }
    }

    let args = Args::parse(argv);
    let plan = Plan {
        level: args.level,
        runs: match args.level {
            Level::Full => 7,
            Level::Quick => 3,
            Level::Smoke => 1,
        },
    };
    if args.level == Level::Smoke && !args.list {
        eprintln!(
            "core bench: smoke test (tiny sizes, one run); run with `cargo bench` to measure"
        );
    }
    let mut bench = Bench {
        args,
        plan,
        rows: Vec::new(),
        weft1: OnceLock::new(),
        weft2: OnceLock::new(),
        tokio_ct: OnceLock::new(),
        tokio_mt: OnceLock::new(),
    };

    bench_spawn(&mut bench);
    bench_pingpong(&mut bench);
    bench_channel(&mut bench);
    bench_mutex(&mut bench);
    bench_sleepers(&mut bench);

    if bench.args.list {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!();
    println!(
        "weft core benchmarks: median of {} runs ({} sleeper runs), {cores} cores, {} {}",
        plan.runs,
        if plan.level == Level::Full { 3 } else { 1 },
        std::env::consts::OS,
        std::env::consts::ARCH,
    );
    print_table(&bench.rows);
    let missed = bench.rows.iter().filter(|r| r.cells()[5] == "MISS").count();
    let failed = bench.rows.iter().filter(|r| r.error.is_some()).count();
    println!();
    println!("{missed} target(s) missed, {failed} row(s) failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
