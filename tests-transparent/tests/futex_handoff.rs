//! A futex wait that goes to the kernel on a virtual thread (inside
//! `weft::pinned`, so the emulation leaves it alone) hands the carrier's
//! other threads off when it begins (`thread::hold_carrier`), not when
//! the monitor finds the carrier held: one carrier, a stall threshold of
//! an hour, and a started thread bound to that carrier must answer a ping
//! while its carrier waits for a `std::sync::Mutex` an OS thread holds.
//! Before, it waited behind the carrier until the mutex was released:
//! the test stopped at its watchdog. No time is asserted.
//!
//! The same for a carrier's own loop: a waker the readiness handler runs
//! there (an async read's, as `weft-http`'s idle set registers) takes a
//! `std::sync::Mutex`, and the carrier waits for it in the kernel. A
//! thread bound to that carrier must still get to run, whether it holds
//! the lock (it runs elsewhere) or waits for it in the emulated queue (the
//! wake that frees the lock reaches the carrier too).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::time::{Duration, Instant};
use weft_transparent_tests::{one_at_a_time, watchdog};

const STUCK: Duration = Duration::from_secs(120);

/// The kernel's state letter and system call number of thread `tid`.
fn kernel_wait(tid: i32) -> Option<(char, i64)> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let state = stat[stat.rfind(')')? + 1..].trim_start().chars().next()?;
    let call = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    Some((state, call.split_whitespace().next()?.parse().ok()?))
}

#[test]
fn a_pinned_futex_wait_hands_the_carrier_off() {
    let _one = one_at_a_time();
    if std::env::var_os("WEFT_THREAD_LOCALS").is_some() {
        eprintln!("skipped: threads without areas of their own never move");
        return;
    }
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .stall_threshold(Duration::from_secs(3600))
        .build()
        .unwrap();
    let (ping, pings) = weft::channel::unbounded::<u32>();
    let (pong, pongs) = std::sync::mpsc::channel::<u32>();
    let echo = rt.spawn(move || {
        for n in pings {
            pong.send(n).unwrap();
        }
    });
    ping.send(1).unwrap();
    assert_eq!(pongs.recv_timeout(STUCK), Ok(1), "first ping");
    let lock = Arc::new(Mutex::new(0u32));
    let held = lock.lock().unwrap();
    let (l2, (tid_tx, tid_rx)) = (lock.clone(), std::sync::mpsc::channel());
    let waiter = rt.spawn(move || {
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() }).unwrap();
        weft::pinned(|| *l2.lock().unwrap() += 1);
    });
    let tid = tid_rx.recv_timeout(STUCK).unwrap();
    let t0 = Instant::now();
    while kernel_wait(tid) != Some(('S', libc::SYS_futex)) {
        assert!(t0.elapsed() < STUCK, "the carrier never waited");
        std::thread::sleep(Duration::from_millis(1));
    }
    ping.send(2).unwrap();
    let answer = pongs.recv_timeout(STUCK);
    drop(held);
    assert_eq!(
        answer,
        Ok(2),
        "the bound thread did not run while its carrier waited"
    );
    waiter.join().unwrap();
    assert_eq!(*lock.lock().unwrap(), 1);
    drop(ping);
    echo.join().unwrap();
}

/// Waits until thread `tid` sleeps in a futex wait in the kernel.
fn until_in_kernel_futex(tid: i32) {
    let t0 = Instant::now();
    while kernel_wait(tid) != Some(('S', libc::SYS_futex)) {
        assert!(t0.elapsed() < STUCK, "thread {tid} never waited");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until `taker` runs and waits for its lock in the kernel, on
/// `carrier` (an idle carrier also sleeps in a futex wait: the waker's
/// call comes first).
fn until_taking(taker: &Taker, carrier: i32) {
    let t0 = Instant::now();
    let tid = loop {
        match taker.tid.load(Ordering::SeqCst) {
            0 => {
                assert!(t0.elapsed() < STUCK, "the waker never ran");
                std::thread::sleep(Duration::from_millis(1));
            }
            t => break t,
        }
    };
    assert_eq!(
        tid, carrier,
        "the waker ran outside the carrier's loop: nothing was tested"
    );
    until_in_kernel_futex(carrier);
}

/// A waker that takes `lock` (adding 10) where it is called, once, and
/// says on which OS thread.
struct Taker {
    lock: Arc<Mutex<u32>>,
    fired: AtomicBool,
    tid: AtomicI32,
    done: std::sync::mpsc::Sender<()>,
}

impl Taker {
    /// A taker of `lock`, and where it says it is done.
    fn new(lock: &Arc<Mutex<u32>>) -> (Arc<Taker>, std::sync::mpsc::Receiver<()>) {
        let (done, finished) = std::sync::mpsc::channel();
        let taker = Arc::new(Taker {
            lock: lock.clone(),
            fired: AtomicBool::new(false),
            tid: AtomicI32::new(0),
            done,
        });
        (taker, finished)
    }
}

impl Wake for Taker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.fired.swap(true, Ordering::SeqCst) {
            return;
        }
        // SAFETY: gettid has no preconditions.
        self.tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
        *self.lock.lock().unwrap() += 10;
        let _ = self.done.send(());
    }
}

/// One carrier running `rt`'s threads; a socket whose readiness runs
/// `taker` in that carrier's loop once `poke` is called. Returns the
/// carrier's OS thread id and the socket pair (kept open).
fn arm_taker(
    rt: &weft::Runtime,
    taker: &Arc<Taker>,
) -> (i32, weft::net::UnixStream, weft::net::UnixStream) {
    // SAFETY: gettid has no preconditions.
    let carrier = rt.spawn(|| unsafe { libc::gettid() }).join().unwrap();
    let (a, b) = weft::net::UnixStream::pair().unwrap();
    let waker = Waker::from(taker.clone());
    let a = rt
        .spawn(move || {
            let mut cx = Context::from_waker(&waker);
            let mut buf = [0u8; 1];
            let r = futures_io::AsyncRead::poll_read(Pin::new(&mut &a), &mut cx, &mut buf);
            assert!(r.is_pending(), "nothing was written yet");
            a
        })
        .join()
        .unwrap();
    (carrier, a, b)
}

/// Makes `b`'s peer readable: the carrier's poll runs the waker.
fn poke(b: &weft::net::UnixStream) {
    use std::io::Write;
    (&*b).write_all(&[1]).unwrap();
}

/// The lock's holder is bound to the carrier whose loop waits for it: it
/// runs elsewhere (a spare) and frees the lock. Before, it was queued
/// behind the waiting carrier for good: the test stopped at its watchdog.
#[test]
fn a_carrier_loop_waiting_for_a_lock_lets_the_holder_run_elsewhere() {
    let _one = one_at_a_time();
    if std::env::var_os("WEFT_THREAD_LOCALS").is_some() {
        eprintln!("skipped: threads without areas of their own never move");
        return;
    }
    let _dog = watchdog("a_carrier_loop_waiting_for_a_lock", STUCK);
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .max_pool_size(2)
        .stall_threshold(Duration::from_secs(3600))
        .build()
        .unwrap();
    let lock = Arc::new(Mutex::new(0u32));
    let (taker, finished) = Taker::new(&lock);
    let (carrier, _a, b) = arm_taker(&rt, &taker);
    let (go, gos) = weft::channel::unbounded::<()>();
    let (holding, held) = std::sync::mpsc::channel();
    let l = lock.clone();
    let holder = rt.spawn(move || {
        let mut g = l.lock().unwrap();
        holding.send(()).unwrap();
        gos.recv().unwrap();
        *g += 1;
    });
    held.recv_timeout(STUCK).unwrap();
    poke(&b);
    until_taking(&taker, carrier);
    go.send(()).unwrap();
    holder.join().unwrap();
    finished.recv_timeout(STUCK).unwrap();
    assert_eq!(*lock.lock().unwrap(), 11);
}

/// A virtual thread bound to the carrier waits for the lock in the
/// emulated queue, the carrier's loop in the kernel; the unlock's one
/// wake must reach the carrier too. Before, it went to the virtual thread
/// only, which then waited for the carrier for good (the hang once seen in
/// `crates.rs`' ureq test, through `weft-http`'s idle set): the test
/// stopped at its watchdog. No spare may come in.
#[test]
fn a_wake_reaches_a_carrier_loop_waiting_beside_its_own_emulated_waiter() {
    let _one = one_at_a_time();
    if std::env::var_os("WEFT_THREAD_LOCALS").is_some() {
        eprintln!("skipped: without areas of their own, waits are not emulated");
        return;
    }
    let _dog = watchdog("a_wake_reaches_a_carrier_loop", STUCK);
    let rt = weft_transparent_tests::strict_runtime(1);
    let lock = Arc::new(Mutex::new(0u32));
    let (taker, finished) = Taker::new(&lock);
    let (carrier, _a, b) = arm_taker(&rt, &taker);
    let guard = lock.lock().unwrap();
    let l = lock.clone();
    let waiter = rt.spawn(move || *l.lock().unwrap() += 1);
    weft_transparent_tests::parked_in(&waiter, "futex");
    poke(&b);
    until_taking(&taker, carrier);
    drop(guard);
    waiter.join().unwrap();
    finished.recv_timeout(STUCK).unwrap();
    assert_eq!(*lock.lock().unwrap(), 11);
}
