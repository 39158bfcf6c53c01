//! Regression tests for defects found in a review of the runtime: each
//! failed (hung, crashed or asserted) before its fix.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use weft::sync::Unpoison;

use common::{is_child, join_within, run_child, wait_until};
use weft::Runtime;

const LIMIT: Duration = Duration::from_secs(60);

/// A thread dump borrows parked threads to record their stacks. A real
/// `unpark` racing that borrow used to be swallowed: the woken thread took
/// the dump's request for the borrow and parked again with no permit.
/// 64 pairs hand a turn back and forth with untimed park/unpark while
/// dumps run back to back for a few seconds; then every pair must finish.
#[test]
fn thread_dumps_never_swallow_a_wake_up() {
    const PAIRS: usize = 64;
    let rt = Runtime::builder().parallelism(2).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    for _ in 0..PAIRS {
        let turn = Arc::new(AtomicU64::new(0));
        let slots: [Arc<std::sync::OnceLock<weft::Thread>>; 2] = [
            Arc::new(std::sync::OnceLock::new()),
            Arc::new(std::sync::OnceLock::new()),
        ];
        for side in 0..2u64 {
            let (turn, stop) = (turn.clone(), stop.clone());
            let mine = slots[side as usize].clone();
            let theirs = slots[1 - side as usize].clone();
            hs.push(rt.spawn(move || {
                mine.set(weft::current()).unwrap();
                while theirs.get().is_none() {
                    weft::yield_now();
                }
                let other = theirs.get().unwrap().clone();
                let mut r = 0u64;
                loop {
                    let want = 2 * r + side;
                    while turn.load(Ordering::Acquire) != want {
                        weft::park();
                    }
                    // Side 0 decides when to stop, on its own turn; side 1
                    // sees the odd "stop" value and leaves too.
                    if side == 0 && stop.load(Ordering::Relaxed) {
                        turn.store(u64::MAX, Ordering::Release);
                        other.unpark();
                        return;
                    }
                    turn.store(want + 1, Ordering::Release);
                    other.unpark();
                    if side == 1 {
                        while turn.load(Ordering::Acquire) == want + 1 {
                            weft::park();
                        }
                        if turn.load(Ordering::Acquire) == u64::MAX {
                            return;
                        }
                    }
                    r += 1;
                }
            }));
        }
    }
    let t0 = std::time::Instant::now();
    let mut dumps = 0;
    while t0.elapsed() < Duration::from_secs(4) {
        std::hint::black_box(weft::dump());
        dumps += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        join_within("a ping-pong pair after the dumps", LIMIT, h).unwrap();
    }
    assert!(dumps > 0);
}

struct PanicsOnDrop;
impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("boom in drop");
    }
}

/// A panic after the body (here: dropping a detached thread's result)
/// used to unwind through the carrier, killing it and leaving dangling
/// state. Now the process aborts with a message naming the thread, as std
/// does for a panicking thread result.
#[test]
fn a_panic_while_dropping_a_result_aborts_with_a_message() {
    const NAME: &str = "a_panic_while_dropping_a_result_aborts_with_a_message";
    if is_child(NAME) {
        let h = weft::Builder::new()
            .name("dropper")
            .spawn(|| PanicsOnDrop)
            .unwrap();
        drop(h); // detached: the thread drops its own result
        std::thread::sleep(Duration::from_secs(20));
        println!("CHILD SURVIVED");
        return;
    }
    let out = run_child(NAME, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "status {:?}, stderr:\n{stderr}",
        out.status
    );
    assert!(
        stderr.contains("'dropper' panicked while dropping"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("CHILD SURVIVED"));
}

/// The same when the handle lets go last: a detached handle dropped after
/// its thread finished drops the result itself, and a panic there used to
/// unwind into whoever dropped the handle (here `main`, exit code 101
/// instead of an abort; seen as a flaky failure of the test above when the
/// thread won the race). Now both sides abort with the thread's name.
#[test]
fn dropping_the_handle_of_a_finished_thread_whose_result_panics_aborts() {
    const NAME: &str = "dropping_the_handle_of_a_finished_thread_whose_result_panics_aborts";
    if is_child(NAME) {
        let h = weft::Builder::new()
            .name("dropper")
            .spawn(|| PanicsOnDrop)
            .unwrap();
        while !h.is_finished() {
            std::thread::yield_now();
        }
        drop(h);
        std::thread::sleep(Duration::from_secs(20));
        println!("CHILD SURVIVED");
        return;
    }
    let out = run_child(NAME, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "status {:?}, stderr:\n{stderr}",
        out.status
    );
    assert!(
        stderr.contains("'dropper' panicked while dropping"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("CHILD SURVIVED"));
}

/// A scoped thread's result whose `Drop` panics, with the handle dropped
/// unjoined: whichever side drops the result, the panic used to skip the
/// scope's "thread done" count and the scope waited forever. Now the
/// process aborts with a message (std: "thread result panicked on drop").
#[test]
fn a_scoped_result_that_panics_in_drop_aborts_instead_of_hanging_the_scope() {
    const NAME: &str = "a_scoped_result_that_panics_in_drop_aborts_instead_of_hanging_the_scope";
    if is_child(NAME) {
        // A deadlock detector, not a timing assumption: the scope either
        // aborts the process or never returns.
        std::thread::spawn(|| {
            std::thread::sleep(Duration::from_secs(30));
            println!("CHILD HUNG");
            std::process::exit(3);
        });
        weft::scope(|s| {
            let h = s.spawn(|| PanicsOnDrop);
            while !h.is_finished() {
                std::thread::yield_now();
            }
            drop(h);
        });
        println!("CHILD SURVIVED");
        return;
    }
    let out = run_child(NAME, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "status {:?}, stdout: {}, stderr:\n{stderr}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains("scoped thread's result panicked while being dropped"),
        "{stderr}"
    );
}

/// Poisoning is per virtual thread: a thread that parks while unwinding
/// (its `Drop` waits for a contended weft lock) leaves its carrier's panic
/// count raised, and another thread of that carrier that releases a lock
/// meanwhile must not poison it.
#[test]
fn a_thread_unwinding_elsewhere_on_the_carrier_does_not_poison_my_lock() {
    let rt = Runtime::builder().parallelism(1).build().unwrap();
    let contended = Arc::new(weft::sync::Mutex::new(()));
    let mine = Arc::new(weft::sync::Mutex::new(0u32));
    let step = Arc::new(AtomicUsize::new(0));

    // C holds `contended` until told to let go.
    let release = Arc::new(weft::sync::CountDownLatch::new(1));
    let c = {
        let (contended, release, step) = (contended.clone(), release.clone(), step.clone());
        rt.spawn(move || {
            let _g = contended.lock().unwrap();
            step.store(1, Ordering::SeqCst);
            release.wait().unwrap();
        })
    };
    wait_until("C holds the lock", LIMIT, || {
        step.load(Ordering::SeqCst) == 1
    });

    // B locks `mine`, then waits until A is unwinding and parked.
    let a_parked = Arc::new(weft::sync::CountDownLatch::new(1));
    let b = {
        let (mine, a_parked) = (mine.clone(), a_parked.clone());
        rt.spawn(move || {
            let mut g = mine.lock().unwrap();
            a_parked.wait().unwrap();
            *g += 1;
            assert!(!weft::panicking(), "B is not unwinding");
        })
    };

    // A panics; its Drop waits for `contended`.
    struct WaitsOnDrop(Arc<weft::sync::Mutex<()>>, Arc<weft::sync::CountDownLatch>);
    impl Drop for WaitsOnDrop {
        fn drop(&mut self) {
            assert!(weft::panicking());
            self.1.count_down();
            let _g = self.0.lock().unpoison();
            assert!(weft::panicking(), "A is still unwinding after its wait");
        }
    }
    let a = {
        let (contended, a_parked) = (contended.clone(), a_parked.clone());
        rt.spawn(move || {
            let _w = WaitsOnDrop(contended, a_parked);
            panic!("A unwinds");
        })
    };
    // B releases `mine` while A is parked mid-unwind on the same carrier.
    join_within("B", LIMIT, b).unwrap();
    assert!(
        !mine.is_poisoned(),
        "B's lock was poisoned by A's unwinding"
    );
    release.count_down();
    assert!(join_within("A", LIMIT, a).is_err());
    join_within("C", LIMIT, c).unwrap();
}

/// `yield_now` inside `weft::pinned` keeps the carrier: no other thread of
/// a one-carrier runtime runs in between.
#[test]
fn yield_now_inside_pinned_does_not_unmount() {
    // No stall reports, so no spare carrier may come in and run the other
    // (unstarted) thread while this one holds its carrier on a busy machine.
    let rt = Runtime::builder()
        .parallelism(1)
        .stall_threshold(Duration::from_secs(600))
        .build()
        .unwrap();
    let other_ran = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let h = {
        let (other_ran, ready, rt2) = (other_ran.clone(), ready.clone(), rt.clone());
        rt.spawn(move || {
            let flag = other_ran.clone();
            let other = rt2.spawn(move || flag.store(true, Ordering::SeqCst));
            let saw = weft::pinned(|| {
                ready.store(true, Ordering::SeqCst);
                for _ in 0..100 {
                    weft::yield_now();
                }
                other_ran.load(Ordering::SeqCst)
            });
            other.join().unwrap();
            saw
        })
    };
    assert!(!join_within("the pinned yielder", LIMIT, h).unwrap());
    assert!(ready.load(Ordering::SeqCst));
    assert!(other_ran.load(Ordering::SeqCst));
}

/// Nested `blocking` sections work and leave no carrier counted blocked.
#[test]
fn nested_blocking_sections_leave_nothing_blocked() {
    let rt = Runtime::builder().parallelism(1).build().unwrap();
    let h = rt.spawn(|| {
        weft::blocking(|| {
            let inner = weft::blocking(|| 20);
            std::thread::sleep(Duration::from_millis(20));
            inner + 22
        })
    });
    assert_eq!(join_within("nested blocking", LIMIT, h).unwrap(), 42);
    assert_eq!(rt.blocked_carriers(), 0);
}

fn vm_size_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap()
}

/// One 1 GiB stack used to reserve a 1,024-slot chunk (a terabyte of
/// address space), and every distinct size made a pool of its own. Run in
/// a child so that other tests' mappings do not blur the figure.
#[test]
fn odd_stack_sizes_reserve_what_they_need() {
    const NAME: &str = "odd_stack_sizes_reserve_what_they_need";
    if is_child(NAME) {
        let before = vm_size_kib();
        weft::Builder::new()
            .stack_size(1 << 30)
            .spawn(|| 1)
            .unwrap()
            .join()
            .unwrap();
        let one_gib = vm_size_kib() - before;
        assert!(one_gib < 4 << 20, "a 1 GiB stack reserved {one_gib} KiB");
        let before = vm_size_kib();
        for k in 0..60usize {
            let size = 20_000 + k * 17_000;
            weft::Builder::new()
                .stack_size(size)
                .spawn(|| 1)
                .unwrap()
                .join()
                .unwrap();
        }
        let sixty = vm_size_kib() - before;
        assert!(sixty < 16 << 20, "60 distinct sizes reserved {sixty} KiB");
        println!("CHILD OK");
        return;
    }
    let out = run_child(NAME, &[]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("CHILD OK"),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn carrier_threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim().starts_with(prefix))
        .count()
}

/// Timer entries hold their thread weakly: a private runtime whose threads
/// ended before their deadlines shuts down when its last handle goes,
/// instead of living until the last deadline (an hour here).
#[test]
fn a_runtime_is_not_kept_alive_by_stale_timers() {
    let rt = Runtime::builder()
        .parallelism(2)
        .name("wtimer")
        .build()
        .unwrap();
    let hs: Vec<_> = (0..20)
        .map(|_| {
            rt.spawn(|| {
                weft::park_timeout(Duration::from_secs(3600));
            })
        })
        .collect();
    wait_until("the threads to park", LIMIT, || {
        hs.iter().all(|h| h.thread().state() == weft::State::Parked)
    });
    for h in hs {
        h.thread().unpark();
        join_within("an unparked thread", LIMIT, h).unwrap();
    }
    assert!(carrier_threads_named("wtimer") > 0);
    drop(rt);
    wait_until("the carriers to exit", LIMIT, || {
        carrier_threads_named("wtimer") == 0
    });
}

/// A bad `WEFT_PARALLELISM` makes the default runtime fail to start, and
/// used to make it fail for the life of the process. Now fixing the
/// variable and trying again works.
#[test]
fn a_failed_default_runtime_start_is_retried() {
    const NAME: &str = "a_failed_default_runtime_start_is_retried";
    if is_child(NAME) {
        let err = weft::Builder::new().spawn(|| 1).unwrap_err();
        assert!(err.to_string().contains("WEFT_PARALLELISM"), "{err}");
        // SAFETY: this child process runs only this test, on one thread.
        unsafe { std::env::set_var("WEFT_PARALLELISM", "2") };
        let v = weft::Builder::new().spawn(|| 7).unwrap().join().unwrap();
        assert_eq!(v, 7);
        println!("CHILD OK");
        return;
    }
    let out = run_child(NAME, &[("WEFT_PARALLELISM", "lots")]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("CHILD OK"),
        "stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The I/O poller cannot start while the process is out of descriptors;
/// that used to disable every socket for good. Now a later call works.
#[test]
fn a_failed_poller_start_is_retried() {
    const NAME: &str = "a_failed_poller_start_is_retried";
    if is_child(NAME) {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: reading our own limit into a valid struct.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        let saved = lim;
        // No descriptor beyond those already open can be made.
        let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
        lim.rlim_cur = open.saturating_sub(1);
        // SAFETY: lowering our own soft limit.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
        let first = weft::net::UdpSocket::bind("127.0.0.1:0");
        // SAFETY: restoring the limit we read.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &saved) }, 0);
        assert!(first.is_err(), "expected EMFILE");
        let second = weft::net::UdpSocket::bind("127.0.0.1:0");
        assert!(second.is_ok(), "{:?}", second.err());
        println!("CHILD OK");
        return;
    }
    let out = run_child(NAME, &[]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("CHILD OK"),
        "stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The pinning deadlock: thread A holds a `std::sync::Mutex` across a
/// weft sleep; thread B of the same carrier then blocks the carrier on
/// that lock (here with a bounded `try_lock` loop, so the test ends).
/// Returns whether B got the lock, and A's handle.
fn pinning_deadlock(rt: &Runtime, a_stays: bool) -> (bool, weft::JoinHandle<()>) {
    let lock = Arc::new(std::sync::Mutex::new(0u32));
    let held = Arc::new(AtomicBool::new(false));
    let a = {
        let (lock, held) = (lock.clone(), held.clone());
        weft::Builder::new()
            .name("holder-A")
            .spawn_on(rt, move || {
                if a_stays {
                    weft::stay_on_carrier();
                }
                let mut g = lock.lock().unwrap();
                held.store(true, Ordering::SeqCst);
                weft::sleep(Duration::from_millis(50)).unwrap();
                *g += 1;
            })
            .unwrap()
    };
    wait_until("A holds the std lock", LIMIT, || {
        held.load(Ordering::SeqCst)
    });
    let b = {
        let lock = lock.clone();
        rt.spawn(move || {
            // Blocks the carrier (never unmounts) for up to 3 s.
            for _ in 0..600 {
                if let Ok(mut g) = lock.try_lock() {
                    *g += 1;
                    return true;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            false
        })
    };
    (join_within("B", LIMIT, b).unwrap(), a)
}

/// The pinning deadlock, resolved: B holds the carrier past the stall
/// threshold, so the carrier hands A off when A's timer fires; A runs on a
/// spare, releases the lock, and B gets it.
#[test]
fn a_lock_holder_parked_behind_a_blocked_carrier_moves_and_releases() {
    let rt = Runtime::builder()
        .parallelism(1)
        .stall_threshold(Duration::from_millis(10))
        .build()
        .unwrap();
    let (b_got_it, a) = pinning_deadlock(&rt, false);
    assert!(b_got_it, "A never released the lock: it was not handed off");
    join_within("A", LIMIT, a).unwrap();
    assert!(rt.threads_moved() >= 1);
}

/// The pinning deadlock, detected, for a holder that stays on its carrier
/// (`weft::stay_on_carrier`): A's timer fires while B holds the carrier, A
/// cannot move, and the monitor records a blocked-with-waiters event
/// naming the carrier and A.
#[test]
fn a_carrier_blocked_while_its_threads_wait_is_reported() {
    let rt = Runtime::builder()
        .parallelism(1)
        .stall_threshold(Duration::from_millis(10))
        .build()
        .unwrap();
    let before = weft::events::counters().blocked_with_waiters;
    let (b_got_it, a) = pinning_deadlock(&rt, true);
    assert!(!b_got_it, "A cannot run while B holds the carrier");
    join_within("A", LIMIT, a).unwrap();
    // Reports are written off the monitor (`sched/report.rs`): wait for it.
    wait_until("the blocked-with-waiters event", LIMIT, || {
        weft::events::counters().blocked_with_waiters > before
    });
    let ev = weft::events::recent()
        .into_iter()
        .rev()
        .find(|e| e.kind == weft::events::EventKind::BlockedWithWaiters)
        .expect("a blocked-with-waiters event");
    let detail = ev.detail.unwrap_or_default();
    assert!(detail.contains("'holder-A'"), "{detail}");
    assert!(detail.contains("carrier 0"), "{detail}");
}

/// CPU-bound stalls do not grow the carriers past twice the parallelism.
#[test]
fn cpu_bound_stalls_add_at_most_parallelism_spares() {
    let rt = Runtime::builder()
        .parallelism(2)
        .stall_threshold(Duration::from_millis(5))
        .build()
        .unwrap();
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (rt, most, done) = (rt.clone(), most.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(rt.active_carriers(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let hs: Vec<_> = (0..40)
        .map(|_| {
            rt.spawn(|| {
                let t0 = std::time::Instant::now();
                let mut x = 0u64;
                while t0.elapsed() < Duration::from_millis(60) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            })
        })
        .collect();
    for h in hs {
        join_within("a spinner", LIMIT, h).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let most = most.load(Ordering::Relaxed);
    assert!(
        most <= 4,
        "{most} carriers for CPU-bound stalls on parallelism 2"
    );
}
