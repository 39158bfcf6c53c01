//! The Rust workers: every workload on Weft virtual threads, Tokio tasks
//! (multi-thread and current-thread runtimes) and `std` OS threads.
//!
//! A worker is this binary re-executed as `weft-bench worker <runtime>
//! <workload> <args…>`, one process per measurement, so that the peak RSS
//! the orchestrator reads from `wait4` belongs to that run alone. The Go
//! (`bench/go/main.go`) and Java (`bench/java/Bench.java`) workers take the
//! same arguments and print the same line:
//!
//! ```text
//! {"workload":"spawn","value":265.3,"unit":"ns/op","hwm_kib":4096}
//! ```
//!
//! `hwm_kib` is the process's own peak RSS (`VmHWM`) at the end: `wait4`'s
//! `ru_maxrss` cannot be used, because Linux carries the parent's
//! high-water mark across fork+exec into the child's. The `park` workload
//! adds a second figure, `"parked_ms"` (its `value` is KiB per thread).
//!
//! Servers (`echo-server`, `http-server`) instead print `ready <port>` once
//! they listen on `127.0.0.1:<port>` and serve until killed.
//!
//! CPU workloads (spawn, pingpong, mutex, channel) first run once untimed
//! at a tenth of their size, in every language (Java's JIT needs it most).

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The Rust runtimes a worker can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Rt {
    /// Weft virtual threads on the default runtime (one carrier per CPU).
    Weft,
    /// Tokio multi-thread runtime (one worker per CPU).
    TokioMt,
    /// Tokio current-thread runtime.
    TokioCt,
    /// One OS thread per thread of the workload.
    Std,
}

/// Runs `workload` with `args` on `rt`; prints its result line.
///
/// Every workload takes numbers except `https-server`, which takes the
/// paths of a PEM certificate chain and a PEM private key.
pub fn run(rt: Rt, workload: &str, args: &[String]) -> Result<(), String> {
    let text = |i: usize| -> Result<&str, String> {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("{workload}: missing argument {}", i + 1))
    };
    let arg = |i: usize| -> Result<u64, String> {
        let a = text(i)?;
        a.parse()
            .map_err(|e| format!("{workload}: argument {} ({a:?}): {e}", i + 1))
    };
    // Figures beside the main one, as `,"name":value` (the park workload's
    // time until all are parked).
    let mut extra = String::new();
    let (value, unit) = match workload {
        "spawn" | "spawn-main" => {
            let (n, from) = (arg(0)?, From::of(workload));
            spawn(rt, (n / 10).max(1), from);
            (ns_per(spawn(rt, n, from), n), "ns/op")
        }
        "pingpong" => {
            let n = arg(0)?;
            pingpong(rt, (n / 10).max(1));
            (ns_per(pingpong(rt, n), n), "ns/op")
        }
        "pingpong-cross" => {
            let n = arg(0)?;
            pingpong_cross(rt, (n / 10).max(1))?;
            (ns_per(pingpong_cross(rt, n)?, n), "ns/op")
        }
        "sleep" | "sleep-main" => {
            let d = Duration::from_millis(arg(1)?);
            let took = sleep(rt, arg(0)?, d, From::of(workload));
            (took.as_secs_f64() * 1e3, "ms")
        }
        "park" => {
            let (kib, until) = park(rt, arg(0)?)?;
            extra = format!(",\"parked_ms\":{:.3}", until.as_secs_f64() * 1e3);
            (kib, "KiB")
        }
        "mutex" => {
            let (t, ops) = (arg(0)?, arg(1)?);
            mutex(rt, t, (ops / 10).max(1))?;
            (ns_per(mutex(rt, t, ops)?, t * ops), "ns/op")
        }
        "channel" => {
            let (p, msgs, cap) = (arg(0)?, arg(1)?, arg(2)?);
            channel(rt, p, (msgs / 10).max(p), cap)?;
            let took = channel(rt, p, msgs, cap)?;
            (msgs as f64 / took.as_secs_f64(), "msg/s")
        }
        "echo-server" => return echo_server(rt),
        "http-server" => return http_server(rt),
        "https-server" => {
            let tls = TlsFiles {
                cert: text(0)?.into(),
                key: text(1)?.into(),
            };
            return https_server(rt, &tls);
        }
        other => return Err(format!("unknown workload {other:?}")),
    };
    let hwm = crate::proc::vm_hwm_kib("self").unwrap_or(0);
    println!(
        "{{\"workload\":\"{workload}\",\"value\":{value:.3},\"unit\":\"{unit}\",\"hwm_kib\":{hwm}{extra}}}"
    );
    Ok(())
}

fn ns_per(took: Duration, n: u64) -> f64 {
    took.as_nanos() as f64 / n.max(1) as f64
}

fn tokio_rt(rt: Rt) -> tokio::runtime::Runtime {
    let mut b = match rt {
        Rt::TokioCt => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    b.enable_all().build().expect("tokio runtime")
}

/// Runs an async workload on a Tokio runtime of `rt`'s flavour, inside a
/// spawned task (on the multi-thread runtime `block_on`'s own future runs on
/// the calling thread, not on a worker).
fn tokio_on<T: Send + 'static>(
    rt: Rt,
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    let r = tokio_rt(rt);
    r.block_on(async move { tokio::spawn(fut).await.expect("driver task panicked") })
}

// ---------------------------------------------------------------------------
// Blocking threads: Weft's virtual threads and std's OS threads share one
// implementation of each workload, written against this trait.
// ---------------------------------------------------------------------------

/// What the blocking workloads need from a kind of thread.
trait Blocking {
    type Handle<T: Send + 'static>;
    type Thread: Clone + Send + 'static;
    type Mutex: Send + Sync + 'static;
    type Tx: Clone + Send + 'static;
    type Rx: Send + 'static;
    fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Self::Handle<T>;
    fn join<T: Send + 'static>(h: Self::Handle<T>) -> T;
    fn thread_of<T: Send + 'static>(h: &Self::Handle<T>) -> Self::Thread;
    fn current() -> Self::Thread;
    fn park();
    fn unpark(t: &Self::Thread);
    fn sleep(d: Duration);
    fn mutex() -> Self::Mutex;
    fn increment(m: &Self::Mutex);
    fn value(m: &Self::Mutex) -> u64;
    fn bounded(cap: usize) -> (Self::Tx, Self::Rx);
    fn send(tx: &Self::Tx, v: u64);
    fn sum(rx: Self::Rx, n: u64) -> u64;
}

/// Weft virtual threads, `weft::sync::Mutex`, `weft::channel::bounded`.
struct WeftThreads;

impl Blocking for WeftThreads {
    type Handle<T: Send + 'static> = weft::JoinHandle<T>;
    type Thread = weft::Thread;
    type Mutex = weft::sync::Mutex<u64>;
    type Tx = weft::channel::Sender<u64>;
    type Rx = weft::channel::Receiver<u64>;
    fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Self::Handle<T> {
        weft::spawn(f)
    }
    fn join<T: Send + 'static>(h: Self::Handle<T>) -> T {
        h.join().expect("thread panicked")
    }
    fn thread_of<T: Send + 'static>(h: &Self::Handle<T>) -> Self::Thread {
        h.thread().clone()
    }
    fn current() -> Self::Thread {
        weft::current()
    }
    fn park() {
        weft::park();
    }
    fn unpark(t: &Self::Thread) {
        t.unpark();
    }
    fn sleep(d: Duration) {
        weft::sleep(d).expect("sleep interrupted");
    }
    fn mutex() -> Self::Mutex {
        weft::sync::Mutex::new(0)
    }
    fn increment(m: &Self::Mutex) {
        *m.lock().unwrap() += 1;
    }
    fn value(m: &Self::Mutex) -> u64 {
        *m.lock().unwrap()
    }
    fn bounded(cap: usize) -> (Self::Tx, Self::Rx) {
        weft::channel::bounded(cap)
    }
    fn send(tx: &Self::Tx, v: u64) {
        tx.send(v).unwrap();
    }
    fn sum(rx: Self::Rx, n: u64) -> u64 {
        rx.iter().take(n as usize).sum()
    }
}

/// OS threads, `std::sync::Mutex`, `std::sync::mpsc::sync_channel`.
struct StdThreads;

impl Blocking for StdThreads {
    type Handle<T: Send + 'static> = std::thread::JoinHandle<T>;
    type Thread = std::thread::Thread;
    type Mutex = std::sync::Mutex<u64>;
    type Tx = std::sync::mpsc::SyncSender<u64>;
    type Rx = std::sync::mpsc::Receiver<u64>;
    fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Self::Handle<T> {
        std::thread::spawn(f)
    }
    fn join<T: Send + 'static>(h: Self::Handle<T>) -> T {
        h.join().expect("thread panicked")
    }
    fn thread_of<T: Send + 'static>(h: &Self::Handle<T>) -> Self::Thread {
        h.thread().clone()
    }
    fn current() -> Self::Thread {
        std::thread::current()
    }
    fn park() {
        std::thread::park();
    }
    fn unpark(t: &Self::Thread) {
        t.unpark();
    }
    fn sleep(d: Duration) {
        std::thread::sleep(d);
    }
    fn mutex() -> Self::Mutex {
        std::sync::Mutex::new(0)
    }
    fn increment(m: &Self::Mutex) {
        *m.lock().unwrap() += 1;
    }
    fn value(m: &Self::Mutex) -> u64 {
        *m.lock().unwrap()
    }
    fn bounded(cap: usize) -> (Self::Tx, Self::Rx) {
        std::sync::mpsc::sync_channel(cap)
    }
    fn send(tx: &Self::Tx, v: u64) {
        tx.send(v).unwrap();
    }
    fn sum(rx: Self::Rx, n: u64) -> u64 {
        rx.iter().take(n as usize).sum()
    }
}

/// Runs a blocking workload on `rt`'s kind of thread (Weft: from inside a
/// virtual thread, so spawning is what a virtual thread does).
/// Where a fan-out workload's spawns come from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum From {
    /// Inside the runtime: a virtual thread, a Tokio task.
    Inside,
    /// The program's main OS thread, as most programs spawn: Weft's
    /// `spawn` from `fn main`, Tokio's `Runtime::block_on` future (which
    /// runs on the calling thread), std threads as always.
    Main,
}

impl From {
    /// `*-main` workloads spawn from the main thread.
    fn of(workload: &str) -> From {
        if workload.ends_with("-main") {
            From::Main
        } else {
            From::Inside
        }
    }
}

/// Runs a Tokio workload from `from`: inside a spawned task, or as the
/// `block_on` future on this (main) thread.
fn tokio_from<T: Send + 'static>(
    rt: Rt,
    from: From,
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    match from {
        From::Inside => tokio_on(rt, fut),
        From::Main => tokio_rt(rt).block_on(fut),
    }
}

/// Runs a blocking workload from `from`: Weft's on a virtual thread or on
/// this (main) OS thread; std's on this thread either way.
fn blocking_from<R: Send + 'static>(
    rt: Rt,
    from: From,
    weft: impl FnOnce() -> R + Send + 'static,
    std: impl FnOnce() -> R,
) -> R {
    match (rt, from) {
        (Rt::Weft, From::Main) => weft(),
        _ => blocking(rt, weft, std),
    }
}

fn blocking<R: Send + 'static>(
    rt: Rt,
    weft: impl FnOnce() -> R + Send + 'static,
    std: impl FnOnce() -> R,
) -> R {
    match rt {
        Rt::Weft => weft::spawn(weft).join().expect("driver thread panicked"),
        Rt::Std => std(),
        Rt::TokioMt | Rt::TokioCt => unreachable!("tokio workloads are async"),
    }
}

/// Starts `n` threads running `f(i)`, then joins them all; the elapsed time.
fn fan_out<B: Blocking, F: FnOnce() + Send + 'static>(n: u64, f: impl Fn(u64) -> F) -> Duration {
    let t = Instant::now();
    let hs: Vec<_> = (0..n).map(|i| B::spawn(f(i))).collect();
    for h in hs {
        B::join(h);
    }
    t.elapsed()
}

// ---------------------------------------------------------------------------
// spawn: N empty threads, all started, then all joined
// ---------------------------------------------------------------------------

fn spawn(rt: Rt, n: u64, from: From) -> Duration {
    fn run<B: Blocking>(n: u64) -> Duration {
        fan_out::<B, _>(n, |_| || {})
    }
    match rt {
        Rt::TokioMt | Rt::TokioCt => tokio_from(rt, from, async move {
            let t = Instant::now();
            let hs: Vec<_> = (0..n).map(|_| tokio::spawn(async {})).collect();
            for h in hs {
                h.await.unwrap();
            }
            t.elapsed()
        }),
        _ => blocking_from(
            rt,
            from,
            move || run::<WeftThreads>(n),
            || run::<StdThreads>(n),
        ),
    }
}

// ---------------------------------------------------------------------------
// pingpong: N round trips between two threads (park/unpark; Tokio: Notify)
// ---------------------------------------------------------------------------

fn pingpong(rt: Rt, n: u64) -> Duration {
    /// Whose turn it is: 0 = ping (the caller), 1 = pong.
    fn run<B: Blocking>(n: u64) -> Duration {
        let turn = Arc::new(AtomicU8::new(0));
        let ping = B::current();
        let t2 = turn.clone();
        let pong = B::spawn(move || {
            for _ in 0..n {
                while t2.load(Ordering::Acquire) != 1 {
                    B::park();
                }
                t2.store(0, Ordering::Release);
                B::unpark(&ping);
            }
        });
        let pong_t = B::thread_of(&pong);
        let t = Instant::now();
        for _ in 0..n {
            turn.store(1, Ordering::Release);
            B::unpark(&pong_t);
            while turn.load(Ordering::Acquire) != 0 {
                B::park();
            }
        }
        let took = t.elapsed();
        B::join(pong);
        took
    }
    match rt {
        Rt::TokioMt | Rt::TokioCt => tokio_on(rt, async move {
            use tokio::sync::Notify;
            let (to_pong, to_ping) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
            let (a, b) = (to_pong.clone(), to_ping.clone());
            let pong = tokio::spawn(async move {
                for _ in 0..n {
                    a.notified().await;
                    b.notify_one();
                }
            });
            let t = Instant::now();
            for _ in 0..n {
                to_pong.notify_one();
                to_ping.notified().await;
            }
            let took = t.elapsed();
            pong.await.unwrap();
            took
        }),
        _ => blocking(rt, move || run::<WeftThreads>(n), || run::<StdThreads>(n)),
    }
}

/// `pingpong` with each side on its own OS thread: Weft's sides on two
/// runtimes of one carrier each (a cross-carrier hand-off every time),
/// Tokio's in two current-thread runtimes on two OS threads.
fn pingpong_cross(rt: Rt, n: u64) -> Result<Duration, String> {
    match rt {
        Rt::Weft => {
            let one = || {
                weft::Runtime::builder()
                    .parallelism(1)
                    .build()
                    .map_err(|e| format!("runtime: {e}"))
            };
            let (ping_rt, pong_rt) = (one()?, one()?);
            // Whose turn it is (0 = ping, 1 = pong), and the ping thread,
            // set before its first turn is handed over.
            let shared = Arc::new((AtomicU8::new(0), std::sync::OnceLock::<weft::Thread>::new()));
            let s = shared.clone();
            let pong = pong_rt.spawn(move || {
                for _ in 0..n {
                    while s.0.load(Ordering::Acquire) != 1 {
                        weft::park();
                    }
                    s.0.store(0, Ordering::Release);
                    s.1.get()
                        .expect("ping is set before its first turn")
                        .unpark();
                }
            });
            let pong_thread = pong.thread().clone();
            let ping = ping_rt.spawn(move || {
                let _ = shared.1.set(weft::current());
                let t = Instant::now();
                for _ in 0..n {
                    shared.0.store(1, Ordering::Release);
                    pong_thread.unpark();
                    while shared.0.load(Ordering::Acquire) != 0 {
                        weft::park();
                    }
                }
                t.elapsed()
            });
            let took = ping.join().map_err(|_| "ping panicked".to_string())?;
            pong.join().map_err(|_| "pong panicked".to_string())?;
            Ok(took)
        }
        Rt::TokioMt | Rt::TokioCt => {
            use tokio::sync::Notify;
            let current = || {
                tokio::runtime::Builder::new_current_thread()
                    .build()
                    .map_err(|e| format!("runtime: {e}"))
            };
            let (to_pong, to_ping) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
            let (a, b) = (to_pong.clone(), to_ping.clone());
            let pong_rt = current()?;
            let pong = std::thread::spawn(move || {
                pong_rt.block_on(async move {
                    for _ in 0..n {
                        a.notified().await;
                        b.notify_one();
                    }
                })
            });
            let took = current()?.block_on(async move {
                let t = Instant::now();
                for _ in 0..n {
                    to_pong.notify_one();
                    to_ping.notified().await;
                }
                t.elapsed()
            });
            pong.join().map_err(|_| "pong panicked".to_string())?;
            Ok(took)
        }
        Rt::Std => Ok(pingpong(rt, n)),
    }
}

// ---------------------------------------------------------------------------
// sleep: N threads each sleep, wall time until all have finished
// ---------------------------------------------------------------------------

fn sleep(rt: Rt, n: u64, d: Duration, from: From) -> Duration {
    fn run<B: Blocking>(n: u64, d: Duration) -> Duration {
        fan_out::<B, _>(n, |_| move || B::sleep(d))
    }
    match rt {
        Rt::TokioMt | Rt::TokioCt => tokio_from(rt, from, async move {
            let t = Instant::now();
            let hs: Vec<_> = (0..n)
                .map(|_| tokio::spawn(tokio::time::sleep(d)))
                .collect();
            for h in hs {
                h.await.unwrap();
            }
            t.elapsed()
        }),
        _ => blocking_from(
            rt,
            from,
            move || run::<WeftThreads>(n, d),
            || run::<StdThreads>(n, d),
        ),
    }
}

// ---------------------------------------------------------------------------
// park: N threads spawned from main, each blocked until released
// ---------------------------------------------------------------------------

/// How long `park` waits after the last thread has counted itself before it
/// reads the process's memory. Each thread counts itself right before it
/// blocks, so when the count is complete the last few may still be on
/// their way to blocking: a few instructions, unless the OS has not run
/// their carrier or worker yet. The Go and Java workers wait as long.
const SETTLE: Duration = Duration::from_millis(200);

/// Counts the threads of a `park` run as each reaches its blocking point,
/// and notes when the last one did.
struct Arrivals {
    n: u64,
    arrived: AtomicU64,
    all_at: OnceLock<Instant>,
}

impl Arrivals {
    fn new(n: u64) -> Arrivals {
        Arrivals {
            n,
            arrived: AtomicU64::new(0),
            all_at: OnceLock::new(),
        }
    }

    /// Counts the calling thread; true for the `n`th, which has noted the
    /// time in `all_at`.
    fn arrive(&self) -> bool {
        // Relaxed: the counter's own modification order makes exactly one
        // caller the `n`th, and the `OnceLock` publishes the time it notes.
        let last = self.arrived.fetch_add(1, Ordering::Relaxed) + 1 == self.n;
        if last {
            let _ = self.all_at.set(Instant::now());
        }
        last
    }
}

/// One `park` run.
struct ParkRun {
    /// From the first spawn until the last thread counted itself.
    until: Duration,
    /// `resident_kib` before the first spawn, and [`SETTLE`] after the
    /// last thread counted itself.
    before_kib: u64,
    after_kib: u64,
}

/// `park`: `n` threads spawned from this (main) thread, each counting
/// itself and then blocking until released; once all have counted and
/// [`SETTLE`] has passed, the growth of `VmRSS` + `VmPTE` per thread (KiB)
/// and the time until all had counted. Then they are released and joined
/// (not timed). The handles kept to join them are part of the memory. A
/// first run of one thread through the same path starts what the runtime
/// starts lazily (carriers, workers) before the baseline is read.
fn park(rt: Rt, n: u64) -> Result<(f64, Duration), String> {
    if n == 0 {
        return Err("park: at least one thread".into());
    }
    let r = match rt {
        Rt::TokioMt | Rt::TokioCt => tokio_rt(rt).block_on(async move {
            park_tasks(1).await?;
            park_tasks(n).await
        })?,
        Rt::Weft => {
            park_blocking::<WeftThreads>(1)?;
            park_blocking::<WeftThreads>(n)?
        }
        Rt::Std => {
            park_blocking::<StdThreads>(1)?;
            park_blocking::<StdThreads>(n)?
        }
    };
    let kib = r.after_kib.saturating_sub(r.before_kib) as f64 / n as f64;
    Ok((kib, r.until))
}

/// A `park` run of `B`'s threads (Weft: spawned from `fn main`), each
/// parked until a flag is set; this OS thread waits with `std`'s park.
fn park_blocking<B: Blocking>(n: u64) -> Result<ParkRun, String> {
    struct Gate {
        arrivals: Arrivals,
        released: AtomicBool,
        main: std::thread::Thread,
    }
    let gate = Arc::new(Gate {
        arrivals: Arrivals::new(n),
        released: AtomicBool::new(false),
        main: std::thread::current(),
    });
    let before_kib = crate::proc::resident_kib("self")?;
    let t0 = Instant::now();
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let g = gate.clone();
            B::spawn(move || {
                if g.arrivals.arrive() {
                    g.main.unpark();
                }
                // An unpark that comes before the park is kept as its
                // token: the flag's store below is never missed.
                while !g.released.load(Ordering::Acquire) {
                    B::park();
                }
            })
        })
        .collect();
    let all_at = loop {
        match gate.arrivals.all_at.get() {
            Some(&t) => break t,
            None => std::thread::park(),
        }
    };
    std::thread::sleep(SETTLE);
    let after_kib = crate::proc::resident_kib("self");
    gate.released.store(true, Ordering::Release);
    for h in &hs {
        B::unpark(&B::thread_of(h));
    }
    for h in hs {
        B::join(h);
    }
    Ok(ParkRun {
        until: all_at - t0,
        before_kib,
        after_kib: after_kib?,
    })
}

/// A `park` run of Tokio tasks spawned from the `block_on` future, each
/// waiting on a semaphore of no permits that is closed on release (a
/// closed semaphore fails every waiter, present and future, so none can
/// miss it).
async fn park_tasks(n: u64) -> Result<ParkRun, String> {
    use tokio::sync::{Notify, Semaphore};
    struct Gate {
        arrivals: Arrivals,
        all: Notify,
        release: Semaphore,
    }
    let gate = Arc::new(Gate {
        arrivals: Arrivals::new(n),
        all: Notify::new(),
        release: Semaphore::new(0),
    });
    let before_kib = crate::proc::resident_kib("self")?;
    let t0 = Instant::now();
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let g = gate.clone();
            tokio::spawn(async move {
                if g.arrivals.arrive() {
                    g.all.notify_one();
                }
                let _ = g.release.acquire().await;
            })
        })
        .collect();
    // `notify_one` before this future waits leaves a permit that the next
    // `notified()` takes: the last arrival is never missed.
    let all_at = loop {
        match gate.arrivals.all_at.get() {
            Some(&t) => break t,
            None => gate.all.notified().await,
        }
    };
    tokio::time::sleep(SETTLE).await;
    let after_kib = crate::proc::resident_kib("self");
    gate.release.close();
    for h in hs {
        h.await.map_err(|e| format!("park: a task failed: {e}"))?;
    }
    Ok(ParkRun {
        until: all_at - t0,
        before_kib,
        after_kib: after_kib?,
    })
}

// ---------------------------------------------------------------------------
// mutex: T threads each increment one counter under a lock `ops` times
// ---------------------------------------------------------------------------

fn check_total(got: u64, want: u64) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("lost updates: counter {got}, expected {want}"))
    }
}

fn mutex(rt: Rt, threads: u64, ops: u64) -> Result<Duration, String> {
    fn run<B: Blocking>(threads: u64, ops: u64) -> (Duration, u64) {
        let m = Arc::new(B::mutex());
        let took = fan_out::<B, _>(threads, |_| {
            let m = m.clone();
            move || {
                for _ in 0..ops {
                    B::increment(&m);
                }
            }
        });
        (took, B::value(&m))
    }
    let (took, total) = match rt {
        // tokio::sync::Mutex: the lock that parks the task (the analogue of
        // a blocking lock in a virtual thread), FIFO-fair.
        Rt::TokioMt | Rt::TokioCt => tokio_on(rt, async move {
            let m = Arc::new(tokio::sync::Mutex::new(0u64));
            let t = Instant::now();
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    let m = m.clone();
                    tokio::spawn(async move {
                        for _ in 0..ops {
                            *m.lock().await += 1;
                        }
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
            let took = t.elapsed();
            let total = *m.lock().await;
            (took, total)
        }),
        _ => blocking(
            rt,
            move || run::<WeftThreads>(threads, ops),
            || run::<StdThreads>(threads, ops),
        ),
    };
    check_total(total, threads * ops)?;
    Ok(took)
}

// ---------------------------------------------------------------------------
// channel: P producers send `msgs` values in all to one consumer
// ---------------------------------------------------------------------------

/// How many values producer `i` of `p` sends so that they total `msgs`.
fn share(i: u64, p: u64, msgs: u64) -> u64 {
    msgs / p + u64::from(i < msgs % p)
}

fn channel(rt: Rt, p: u64, msgs: u64, cap: u64) -> Result<Duration, String> {
    fn run<B: Blocking>(p: u64, msgs: u64, cap: usize) -> (Duration, u64) {
        let (tx, rx) = B::bounded(cap);
        let t = Instant::now();
        for i in 0..p {
            let tx = tx.clone();
            B::spawn(move || {
                for v in 1..=share(i, p, msgs) {
                    B::send(&tx, v);
                }
            });
        }
        drop(tx);
        let sum = B::join(B::spawn(move || B::sum(rx, msgs)));
        (t.elapsed(), sum)
    }
    if p == 0 {
        return Err("channel: at least one producer".into());
    }
    let cap = cap as usize;
    // Producer i sends 1..=share(i); the consumer checks count and sum.
    let want: u64 = (0..p)
        .map(|i| share(i, p, msgs))
        .map(|k| k * (k + 1) / 2)
        .sum();
    let (took, got) = match rt {
        Rt::TokioMt | Rt::TokioCt => tokio_on(rt, async move {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(cap.max(1));
            let t = Instant::now();
            for i in 0..p {
                let tx = tx.clone();
                tokio::spawn(async move {
                    for v in 1..=share(i, p, msgs) {
                        tx.send(v).await.unwrap();
                    }
                });
            }
            drop(tx);
            let consumer = tokio::spawn(async move {
                let mut sum = 0u64;
                for _ in 0..msgs {
                    sum += rx.recv().await.unwrap();
                }
                sum
            });
            let sum = consumer.await.unwrap();
            (t.elapsed(), sum)
        }),
        _ => blocking(
            rt,
            move || run::<WeftThreads>(p, msgs, cap),
            || run::<StdThreads>(p, msgs, cap),
        ),
    };
    check_total(got, want)?;
    Ok(took)
}

// ---------------------------------------------------------------------------
// Servers
// ---------------------------------------------------------------------------

fn ready(port: u16) {
    println!("ready {port}");
    let _ = std::io::stdout().flush();
}

/// Connections the servers accept: more than the 10,000 the suite opens.
const BACKLOG: i32 = 4096;

/// One blocking echo connection: copies what it reads (4 KiB at a time)
/// back until EOF or an error.
fn echo_conn(s: &mut (impl Read + Write)) {
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = s.read(&mut buf) {
        if s.write_all(&buf[..n]).is_err() {
            break;
        }
    }
}

/// Serves TCP echo on `127.0.0.1`: one thread/task per connection copies
/// what it reads (up to 4 KiB at a time) back until EOF.
fn echo_server(rt: Rt) -> Result<(), String> {
    let _ = weft_load::raise_fd_limit();
    match rt {
        Rt::Weft => weft::spawn(|| {
            let l = weft::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
            ready(l.local_addr().map_err(|e| e.to_string())?.port());
            loop {
                let Ok((mut s, _)) = l.accept() else { continue };
                let _ = s.set_nodelay(true);
                weft::spawn(move || echo_conn(&mut s));
            }
        })
        .join()
        .expect("accept loop panicked"),
        Rt::Std => {
            let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
            ready(l.local_addr().map_err(|e| e.to_string())?.port());
            loop {
                let Ok((mut s, _)) = l.accept() else { continue };
                let _ = s.set_nodelay(true);
                std::thread::spawn(move || echo_conn(&mut s));
            }
        }
        Rt::TokioMt | Rt::TokioCt => tokio_rt(rt).block_on(async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let sock = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
            sock.set_reuseaddr(true).map_err(|e| e.to_string())?;
            sock.bind("127.0.0.1:0".parse().unwrap())
                .map_err(|e| e.to_string())?;
            let l = sock.listen(BACKLOG as u32).map_err(|e| e.to_string())?;
            ready(l.local_addr().map_err(|e| e.to_string())?.port());
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    continue;
                };
                let _ = s.set_nodelay(true);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = s.read(&mut buf).await {
                        if s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        }),
    }
}

const HELLO: &str = "Hello, World!";
const SLEEP: Duration = Duration::from_secs(1);
/// How long `GET /cpu` computes.
pub const CPU_FOR: Duration = Duration::from_secs(4);

/// The CPU-bound request `GET /cpu`, the same work in every language
/// (`spin` in `bench/go/main.go` and `bench/java/Bench.java`): rounds of
/// 65,536 steps of a multiply-xorshift hash (MurmurHash3's 64-bit
/// finalizer, each step fed the previous one's result, so it neither
/// vectorizes nor folds away) until `d` has passed since it began, then
/// the number of rounds and the hash. A round takes about 0.1 ms here, so
/// the request ends within a round of `d` of its start, whatever the
/// language's speed. The clock is read between rounds (a vDSO call, never
/// a yield): the handler holds whatever runs it, as bcrypt or an image
/// resize would.
pub fn spin(d: Duration) -> String {
    let t0 = Instant::now();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rounds: u64 = 0;
    while t0.elapsed() < d {
        for i in 0..65_536_u64 {
            x ^= i;
            x ^= x >> 33;
            x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
            x ^= x >> 33;
        }
        rounds += 1;
    }
    format!("spun {rounds} rounds: {x:016x}")
}

/// Serves `GET /hello` (`Hello, World!`), `GET /sleep` (sleeps 1 s, then
/// `slept`) and `GET /cpu` ([`spin`] for [`CPU_FOR`], computing on the
/// thread that runs the handler) over HTTP/1.1 keep-alive: weft-http in
/// virtual mode, hyper 1 on Tokio, or a thread-per-connection server on
/// `std`.
fn http_server(rt: Rt) -> Result<(), String> {
    let _ = weft_load::raise_fd_limit();
    match rt {
        Rt::Weft => weft_http_server(None),
        Rt::Std => std_http(None),
        Rt::TokioMt | Rt::TokioCt => tokio_rt(rt).block_on(hyper_http(None)),
    }
}

/// The PEM certificate chain and private key of an https server.
pub struct TlsFiles {
    /// Certificate chain, leaf first.
    pub cert: std::path::PathBuf,
    /// Private key (PKCS#8, PKCS#1 or SEC1).
    pub key: std::path::PathBuf,
}

/// The `http-server` over TLS (rustls with the `ring` provider in every
/// Rust column, as weft-http uses; ALPN `http/1.1`): weft-http with a
/// [`weft_http::TlsConfig`], hyper behind `tokio-rustls`, or the `std`
/// server over `rustls::StreamOwned`.
fn https_server(rt: Rt, tls: &TlsFiles) -> Result<(), String> {
    let _ = weft_load::raise_fd_limit();
    match rt {
        Rt::Weft => weft_http_server(Some(tls)),
        Rt::Std => std_http(Some(rustls_config(tls)?)),
        Rt::TokioMt | Rt::TokioCt => {
            let acceptor = tokio_rustls::TlsAcceptor::from(rustls_config(tls)?);
            tokio_rt(rt).block_on(hyper_http(Some(acceptor)))
        }
    }
}

/// What `weft_http::TlsConfig::from_pem_files` builds, for the other Rust
/// servers: the `ring` provider, rustls's safe default protocol versions
/// (TLS 1.3 and 1.2), no client authentication, ALPN `http/1.1`.
fn rustls_config(tls: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
    let read =
        |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("reading {}: {e}", p.display()));
    let certs = CertificateDer::pem_slice_iter(&read(&tls.cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: bad PEM certificate: {e}", tls.cert.display()))?;
    let key = PrivateKeyDer::from_pem_slice(&read(&tls.key)?)
        .map_err(|e| format!("{}: bad PEM private key: {e}", tls.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("certificate and key: {e}"))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// weft-http in virtual mode, over TLS when given certificate files.
fn weft_http_server(tls: Option<&TlsFiles>) -> Result<(), String> {
    use weft_http::{Response, Router, Server, ServerConfig, TlsConfig};
    let router = Router::new()
        .get("/hello", |_| Response::text(HELLO))
        .get("/sleep", |_| {
            let _ = weft::sleep(SLEEP);
            Response::text("slept")
        })
        .get("/cpu", |_| Response::text(spin(CPU_FOR)));
    let mut config = ServerConfig::default()
        .max_connections(1 << 20)
        .backlog(BACKLOG as u32);
    if let Some(t) = tls {
        config = config.tls(TlsConfig::from_pem_files(&t.cert, &t.key).map_err(|e| e.to_string())?);
    }
    let server = Server::bind("127.0.0.1:0", config)
        .and_then(|s| s.serve(Arc::new(router)))
        .map_err(|e| e.to_string())?;
    ready(server.local_addr().port());
    loop {
        std::thread::park();
    }
}

async fn hyper_http(tls: Option<tokio_rustls::TlsAcceptor>) -> Result<(), String> {
    let sock = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
    sock.set_reuseaddr(true).map_err(|e| e.to_string())?;
    sock.bind("127.0.0.1:0".parse().unwrap())
        .map_err(|e| e.to_string())?;
    let l = sock.listen(BACKLOG as u32).map_err(|e| e.to_string())?;
    ready(l.local_addr().map_err(|e| e.to_string())?.port());
    loop {
        let Ok((stream, _)) = l.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                // The handshake runs in the connection's task, as hyper +
                // tokio-rustls servers do.
                Some(acceptor) => {
                    if let Ok(s) = acceptor.accept(stream).await {
                        hyper_conn(s).await;
                    }
                }
                None => hyper_conn(stream).await,
            }
        });
    }
}

/// One hyper HTTP/1.1 connection over `io` (TCP or TLS).
async fn hyper_conn<IO>(io: IO)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::Full;
    use hyper::body::Bytes;
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;

    let svc = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
        let (status, body) = match req.uri().path() {
            "/hello" => (200, Bytes::from_static(HELLO.as_bytes())),
            "/sleep" => {
                tokio::time::sleep(SLEEP).await;
                (200, Bytes::from_static(b"slept"))
            }
            // On the worker that polls this task, as an async handler
            // that computes does.
            "/cpu" => (200, Bytes::from(spin(CPU_FOR))),
            _ => (404, Bytes::from_static(b"not found")),
        };
        hyper::Response::builder()
            .status(status)
            .header("content-type", "text/plain")
            .body(Full::new(body))
    });
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(io), svc)
        .await;
}

/// A minimal HTTP/1.1 keep-alive server, one OS thread per connection
/// (64 KiB stacks so that 10,000 of them fit comfortably): what a `std`
/// user writes without a framework. Requests have no body in this suite;
/// one with a body is answered `400` and the connection closed. With a
/// rustls configuration each connection is a `rustls::StreamOwned` (its
/// handshake runs on the connection's thread, at the first read).
fn std_http(tls: Option<Arc<rustls::ServerConfig>>) -> Result<(), String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    ready(l.local_addr().map_err(|e| e.to_string())?.port());
    loop {
        let Ok((s, _)) = l.accept() else { continue };
        let _ = s.set_nodelay(true);
        let tls = tls.clone();
        // TLS needs more stack than the plain parser (rustls keeps its
        // handshake state and buffers partly on the stack).
        let stack = if tls.is_some() { 256 << 10 } else { 64 << 10 };
        let _ = std::thread::Builder::new()
            .stack_size(stack)
            .spawn(move || match tls {
                None => std_http_conn(s),
                Some(cfg) => {
                    if let Ok(conn) = rustls::ServerConnection::new(cfg) {
                        std_http_conn(rustls::StreamOwned::new(conn, s));
                    }
                }
            });
    }
}

fn std_http_conn(mut s: impl Read + Write) {
    let mut buf = vec![0u8; 8192];
    let mut filled = 0;
    loop {
        // Parse what we have; read more when the head is incomplete.
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        let parsed = req.parse(&buf[..filled]);
        match parsed {
            Ok(httparse::Status::Complete(len)) => {
                let has_body = req.headers.iter().any(|h| {
                    h.name.eq_ignore_ascii_case("transfer-encoding")
                        || (h.name.eq_ignore_ascii_case("content-length") && h.value != b"0")
                });
                let close = req.version == Some(0)
                    || req.headers.iter().any(|h| {
                        h.name.eq_ignore_ascii_case("connection")
                            && h.value.eq_ignore_ascii_case(b"close")
                    });
                let spun;
                let (status, body) = match (req.method, req.path) {
                    _ if has_body => ("400 Bad Request", "bodies are not supported"),
                    (Some("GET"), Some("/hello")) => ("200 OK", HELLO),
                    (Some("GET"), Some("/sleep")) => {
                        std::thread::sleep(SLEEP);
                        ("200 OK", "slept")
                    }
                    (Some("GET"), Some("/cpu")) => {
                        spun = spin(CPU_FOR);
                        ("200 OK", spun.as_str())
                    }
                    _ => ("404 Not Found", "not found"),
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                if s.write_all(resp.as_bytes())
                    .and_then(|()| s.flush())
                    .is_err()
                    || close
                    || has_body
                {
                    return;
                }
                buf.copy_within(len..filled, 0);
                filled -= len;
            }
            Ok(httparse::Status::Partial) => {
                if filled == buf.len() {
                    let _ = s.write_all(b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    return;
                }
                match s.read(&mut buf[filled..]) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => filled += n,
                }
            }
            Err(_) => {
                let _ = s.write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_computes_for_its_time_and_names_its_rounds() {
        let d = Duration::from_millis(5);
        let t0 = Instant::now();
        let out = spin(d);
        assert!(t0.elapsed() >= d);
        assert!(
            out.starts_with("spun ") && out.contains(" rounds: "),
            "{out}"
        );
        // No time, no round: the starting state, the same as the Go and
        // Java workers' `spin`.
        assert_eq!(spin(Duration::ZERO), "spun 0 rounds: 9e3779b97f4a7c15");
    }

    #[test]
    fn shares_add_up() {
        for (p, msgs) in [(1, 10), (3, 10), (100, 1_000_001), (7, 3)] {
            assert_eq!((0..p).map(|i| share(i, p, msgs)).sum::<u64>(), msgs);
        }
    }

    #[test]
    fn every_rust_workload_runs_on_every_runtime() {
        for rt in [Rt::Weft, Rt::TokioMt, Rt::TokioCt, Rt::Std] {
            for from in [From::Inside, From::Main] {
                assert!(spawn(rt, 100, from) > Duration::ZERO);
                let d = Duration::from_millis(20);
                assert!(sleep(rt, 50, d, from) >= d);
            }
            assert!(pingpong(rt, 100) > Duration::ZERO);
            mutex(rt, 8, 500).unwrap();
            channel(rt, 1, 1000, 16).unwrap();
            channel(rt, 7, 1000, 0).unwrap();
        }
    }
}
