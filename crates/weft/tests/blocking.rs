//! Carriers that block: `weft::blocking`, the stall watchdog's
//! compensation, pinned sections and their events, `block_on`, idleness.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use weft::events::{self, EventKind};
use weft::{Runtime, sync::CountDownLatch};

fn one_carrier() -> Runtime {
    Runtime::builder()
        .parallelism(1)
        .stall_threshold(Duration::from_millis(20))
        .build()
        .unwrap()
}

/// A virtual thread blocking its carrier in `std::thread::sleep` (not a weft
/// call) must not stop the others: the watchdog compensates with a spare.
/// The blocker sleeps until the others have all finished, so they can only
/// have run beside it, whatever the machine's load.
#[test]
fn std_sleep_on_one_carrier_is_compensated() {
    const LIMIT: Duration = Duration::from_secs(30);
    let rt = one_carrier();
    let stalls_before = events::counters().stalls;
    let started = Arc::new(CountDownLatch::new(1));
    let release = Arc::new(AtomicBool::new(false));
    let (s2, r2) = (started.clone(), release.clone());
    let blocker = rt.spawn(move || {
        s2.count_down();
        while !r2.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    started.wait().unwrap();
    // While the only carrier is stuck, 20 short sleepers must still finish.
    let hs: Vec<_> = (0..20)
        .map(|_| rt.spawn(|| weft::sleep(Duration::from_millis(5)).unwrap()))
        .collect();
    let t0 = Instant::now();
    while !hs.iter().all(|h| h.is_finished()) {
        assert!(
            t0.elapsed() < LIMIT,
            "the other threads did not finish while one carrier was blocked"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(!blocker.is_finished());
    for h in hs {
        h.join().unwrap();
    }
    release.store(true, Ordering::SeqCst);
    blocker.join().unwrap();
    // Reports are written off the monitor, at a low priority
    // (`sched/report.rs`): on a busy machine the event comes later.
    let t1 = Instant::now();
    while events::counters().stalls <= stalls_before {
        assert!(t1.elapsed() < LIMIT, "no stall event recorded");
        std::thread::sleep(Duration::from_millis(2));
    }
    let ev = events::recent();
    assert!(
        ev.iter()
            .any(|e| matches!(e.kind, EventKind::StallBlocked | EventKind::StallCpu)),
        "stall missing from the ring: {ev:?}"
    );
}

/// `weft::blocking` runs its closure on an offload thread: the carrier is
/// not blocked, and the other threads run on it (no spare needed).
#[test]
fn blocking_section_lets_others_run() {
    let rt = one_carrier();
    let entered = Arc::new(CountDownLatch::new(1));
    let release = Arc::new(AtomicBool::new(false));
    let (e2, r2) = (entered.clone(), release.clone());
    let blocker = rt.spawn(move || {
        weft::blocking(|| {
            e2.count_down();
            // Really blocks the OS thread (std primitive), bounded.
            let t0 = Instant::now();
            while !r2.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    });
    entered.wait().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..50)
        .map(|_| {
            let d = done.clone();
            rt.spawn(move || {
                weft::yield_now();
                d.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 50);
    assert_eq!(rt.blocked_carriers(), 0);
    assert_eq!(rt.active_carriers(), 1);
    release.store(true, Ordering::SeqCst);
    blocker.join().unwrap();
    assert_eq!(rt.blocked_carriers(), 0);
}

#[test]
fn pinned_wait_records_event_with_thread_name() {
    let rt = one_carrier();
    let h = weft::Builder::new()
        .name("pinned-sleeper")
        .spawn_on(&rt, || {
            weft::pinned(|| {
                assert!(weft::is_pinned());
                let me = weft::current();
                weft::sleep(Duration::from_millis(30)).unwrap();
                me.state()
            })
        })
        .unwrap();
    h.join().unwrap();
    let ev = events::recent();
    let e = ev
        .iter()
        .rev()
        .find(|e| e.kind == EventKind::Pinned && e.thread_name.as_deref() == Some("pinned-sleeper"))
        .unwrap_or_else(|| panic!("no pinned event for the thread: {ev:?}"));
    assert!(e.duration >= Duration::from_millis(25), "{e:?}");
    let stack = e.stack.as_deref().expect("pinned event has a stack");
    // The program's frames are named by their file and line (a closure
    // inlined from a test file has no module path to show).
    assert!(
        stack.contains("tests/blocking.rs"),
        "stack does not name the test's code:\n{stack}"
    );
}

#[test]
fn pinned_thread_reports_pinned_state_and_unparks() {
    let rt = one_carrier();
    let h = rt.spawn(|| weft::pinned(weft::park));
    let t = h.thread().clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    while t.state() != weft::State::Pinned {
        assert!(Instant::now() < deadline, "never pinned: {:?}", t.state());
        std::thread::yield_now();
    }
    t.unpark();
    h.join().unwrap();
}

#[test]
fn block_on_future_completed_from_another_thread() {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Mutex;
    use std::task::{Context, Poll, Waker};

    #[derive(Default)]
    struct Slot {
        value: Option<u32>,
        waker: Option<Waker>,
    }
    struct Fut(Arc<Mutex<Slot>>);
    impl Future for Fut {
        type Output = u32;
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
            let mut s = self.0.lock().unwrap();
            match s.value.take() {
                Some(v) => Poll::Ready(v),
                None => {
                    s.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        }
    }
    let rt = one_carrier();
    for _ in 0..200 {
        let slot = Arc::new(Mutex::new(Slot::default()));
        let s2 = slot.clone();
        let h = rt.spawn(move || weft::block_on(Fut(s2)));
        // Completes from an OS thread, racing with the first poll.
        let completer = std::thread::spawn(move || {
            let w = {
                let mut s = slot.lock().unwrap();
                s.value = Some(7);
                s.waker.take()
            };
            if let Some(w) = w {
                w.wake();
            }
        });
        completer.join().unwrap();
        assert_eq!(h.join().unwrap(), 7);
    }
    // Also from an OS thread.
    assert_eq!(weft::block_on(async { 5 }), 5);
}

/// A runtime with nothing to do burns (almost) no CPU: carriers and the
/// monitor sleep in the kernel.
#[test]
fn idle_runtime_uses_no_cpu() {
    /// CPU time of this process's threads whose name starts with `prefix`
    /// (the runtime's carriers and monitor), from `/proc/self/task`: other
    /// tests of this binary run in parallel and use CPU of their own.
    fn cpu_time(prefix: &str) -> (Duration, usize) {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let (mut ticks, mut threads) = (0, 0);
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if !comm.starts_with(prefix) {
                continue;
            }
            threads += 1;
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // Fields after the parenthesised name: state is the 3rd field,
            // utime the 14th and stime the 15th.
            let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
            let f: Vec<u64> = rest.split(' ').map(|x| x.parse().unwrap_or(0)).collect();
            ticks += f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
        }
        (Duration::from_millis(ticks * 1000 / hz), threads)
    }
    let rt = Runtime::builder()
        .parallelism(2)
        .name("idlechk")
        .build()
        .unwrap();
    let hs: Vec<_> = (0..100).map(|_| rt.spawn(weft::yield_now)).collect();
    for h in hs {
        h.join().unwrap();
    }
    // Let the monitor reach its deep sleep (10 quiet ticks).
    std::thread::sleep(Duration::from_millis(300));
    let (before, threads) = cpu_time("idlechk");
    assert!(threads >= 3, "found {threads} of the runtime's threads");
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_time("idlechk").0 - before;
    // A spinning carrier would use ~1 s here; the clock ticks are 10 ms.
    assert!(
        used < Duration::from_millis(100),
        "idle runtime used {used:?} of CPU in 1 s"
    );
}
