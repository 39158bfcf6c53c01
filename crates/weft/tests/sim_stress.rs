//! `weft::sim` under stress: determinism of many seeds with many threads
//! doing mixed work, PCT replays, 10,000 short runs without leaks, nested
//! simulations and simulations started from a normal runtime, deadlock
//! detection around pending timers, a root that returns before its
//! detached threads, and panics of threads other than the root.
//!
//! Every test takes `SERIAL` so that the thread and registry counts of the
//! leak test see no other test's runtimes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use weft::channel;
use weft::sim::{Outcome, Report, Sim};
use weft::sync::{Condvar, Mutex};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A random number below `n`, from the simulation's seed.
fn below(n: u64) -> u64 {
    weft::sim::random() % n
}

/// Twelve threads that each take eight random steps — yield, sleep a few
/// virtual milliseconds, lock a shared log, send on a small bounded
/// channel, wait on a condition variable with a timeout, park with a
/// timeout — while a consumer drains the channel. Returns the log (who did
/// what, in which order, at which virtual time) and what the consumer got.
fn mixed() -> (Vec<u64>, Vec<u64>) {
    const THREADS: u64 = 12;
    let log = Arc::new(Mutex::new(Vec::new()));
    let cv = Arc::new((Mutex::new(0u64), Condvar::new()));
    let (tx, rx) = channel::bounded::<u64>(2);
    let consumer = weft::spawn(move || {
        let mut got = Vec::new();
        while let Ok(v) = rx.recv() {
            got.push(v);
            if below(3) == 0 {
                weft::yield_now();
            }
        }
        got
    });
    let t0 = weft::sim::now();
    let hs: Vec<_> = (0..THREADS)
        .map(|i| {
            let log = log.clone();
            let cv = cv.clone();
            let tx = tx.clone();
            weft::spawn(move || {
                for step in 0..8u64 {
                    let what = below(6);
                    match what {
                        0 => weft::yield_now(),
                        1 => weft::sleep(Duration::from_millis(below(4))).unwrap(),
                        2 => {
                            let mut l = log.lock().unwrap();
                            l.push(i * 1000 + step);
                            // Hold the lock across a switch point.
                            weft::yield_now();
                            l.push((weft::sim::now() - t0).as_millis() as u64);
                        }
                        3 => tx.send(i * 100 + step).unwrap(),
                        4 => {
                            let (m, c) = &*cv;
                            let mut g = m.lock().unwrap();
                            *g += 1;
                            c.notify_one();
                            let (g, _) = c.wait_timeout(g, Duration::from_millis(2)).unwrap();
                            drop(g);
                        }
                        _ => {
                            weft::park_timeout(Duration::from_millis(1 + below(2)));
                        }
                    }
                    weft::sim::trace(i << 32 | step << 8 | what);
                }
                i
            })
        })
        .collect();
    drop(tx);
    for (i, h) in hs.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), i as u64);
    }
    let got = consumer.join().unwrap();
    let log = log.lock().unwrap().clone();
    (log, got)
}

fn same_run<T: PartialEq + std::fmt::Debug>(a: &Report<T>, b: &Report<T>) {
    assert_eq!(a.value, b.value, "seed {}", a.seed);
    assert_eq!(a.trace, b.trace, "seed {}", a.seed);
    assert_eq!(a.steps, b.steps, "seed {}", a.seed);
    assert_eq!(a.elapsed, b.elapsed, "seed {}", a.seed);
}

#[test]
fn many_seeds_with_mixed_work_replay_exactly() {
    let _s = serial();
    let mut traces = std::collections::HashSet::new();
    let mut values = std::collections::HashSet::new();
    for seed in 0..60 {
        let a = weft::sim::run(seed, mixed).unwrap();
        let b = weft::sim::run(seed, mixed).unwrap();
        same_run(&a, &b);
        assert!(a.steps > 100, "seed {seed}: {} steps", a.steps);
        traces.insert(a.trace);
        values.insert(a.value);
    }
    // Each seed is a different schedule.
    assert_eq!(traces.len(), 60);
    assert!(values.len() > 50, "{} distinct results", values.len());
}

#[test]
fn pct_runs_replay_exactly_and_differ_between_seeds() {
    let _s = serial();
    let mut traces = std::collections::HashSet::new();
    for seed in 0..40 {
        for (depth, steps) in [(1, 10), (3, 400), (6, 50)] {
            let sim = Sim::new().seed(seed).pct(depth, steps);
            let a = sim.run(mixed).unwrap();
            let b = sim.run(mixed).unwrap();
            same_run(&a, &b);
            traces.insert(a.trace);
        }
    }
    assert!(traces.len() > 100, "{} distinct PCT traces", traces.len());
}

/// PCT with `depth` change points all within the first few steps still
/// replays, and changes schedules: with every change point forced into the
/// first three steps, the runs differ from depth 1 (no change) for some
/// seed.
#[test]
fn pct_change_points_take_effect() {
    let _s = serial();
    let order = || {
        let log = Arc::new(Mutex::new(Vec::new()));
        let hs: Vec<_> = (0..4u64)
            .map(|i| {
                let log = log.clone();
                weft::spawn(move || {
                    for _ in 0..3 {
                        log.lock().unwrap().push(i);
                        weft::yield_now();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        log.lock().unwrap().clone()
    };
    let mut differs = false;
    for seed in 0..30 {
        let plain = Sim::new().seed(seed).pct(1, 3).run(order).unwrap();
        let a = Sim::new().seed(seed).pct(3, 3).run(order).unwrap();
        let b = Sim::new().seed(seed).pct(3, 3).run(order).unwrap();
        same_run(&a, &b);
        differs |= plain.value != a.value;
    }
    assert!(differs, "change points never changed a schedule");
}

/// Two threads sleeping to the same deadline wake in an order drawn from
/// the seed: both orders occur, and each seed always gives its own.
#[test]
fn timer_ties_are_broken_by_the_seed() {
    let _s = serial();
    let tie = || {
        let log = Arc::new(Mutex::new(Vec::new()));
        let hs: Vec<_> = (0..2u64)
            .map(|i| {
                let log = log.clone();
                weft::spawn(move || {
                    weft::sleep(Duration::from_secs(1)).unwrap();
                    log.lock().unwrap().push(i);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        log.lock().unwrap().clone()
    };
    let mut seen = std::collections::HashSet::new();
    for seed in 0..40 {
        let a = weft::sim::run(seed, tie).unwrap();
        let b = weft::sim::run(seed, tie).unwrap();
        same_run(&a, &b);
        assert_eq!(a.elapsed, Duration::from_secs(1));
        seen.insert(a.value);
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
}

/// OS threads of this process (`/proc/self/task`).
fn os_threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Resident memory of this process, in KiB (`/proc/self/status`).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// Polls `f` until it is true (the carrier threads of ended runs exit on
/// their own, shortly after their runtime is dropped); false if it never
/// became true within many tries. Real time bounds the wait only, it is
/// never asserted on.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..2000 {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    f()
}

#[test]
fn ten_thousand_short_runs_leak_no_threads_stacks_or_runtimes() {
    let _s = serial();
    let short = || {
        let h = weft::spawn(|| {
            weft::yield_now();
            weft::sleep(Duration::from_millis(1)).unwrap();
            7u64
        });
        weft::yield_now();
        h.join().unwrap()
    };
    // Warm up: the stack pool and the process's first runtime.
    // Deadlocked runs of other tests keep their carriers (by design).
    weft::sim::check(10, move || assert_eq!(short(), 7));
    let threads = os_threads();
    let before = weft::metrics::snapshot();
    let registered = weft::dump().threads.len();
    let rss = rss_kib();
    let mut peak = threads;
    for seed in 0..10_000u64 {
        let r = weft::sim::run(seed, short).unwrap();
        assert_eq!(r.value, 7);
        if seed % 500 == 0 {
            peak = peak.max(os_threads());
        }
    }
    // Runs end one at a time, and each carrier exits on its own shortly
    // after its run: a loaded machine may let hundreds of them lag behind,
    // but a leak would keep all 10,000.
    assert!(
        peak < threads + 5000,
        "{peak} OS threads during the runs, {threads} before"
    );
    assert!(
        eventually(|| os_threads() <= threads),
        "{} OS threads after 10,000 runs, {threads} before",
        os_threads()
    );
    // Measured once the carriers are gone. A run that kept a few KiB (a
    // stack's touched pages, a carrier's TLS) would hold 40+ MiB more
    // after 10,000 runs; the allocator's own slack stays well below.
    let grown = rss_kib().saturating_sub(rss);
    assert!(
        grown < 32 * 1024,
        "RSS grew by {grown} KiB over 10,000 runs"
    );
    assert!(eventually(|| {
        let m = weft::metrics::snapshot();
        m.carriers_total <= before.carriers_total
            && m.threads_live <= before.threads_live
            && m.stacks_live <= before.stacks_live
            && m.timers_pending <= before.timers_pending
    }));
    assert!(
        eventually(|| weft::dump().threads.len() <= registered),
        "{} threads registered after, {registered} before",
        weft::dump().threads.len()
    );
}

#[test]
fn a_simulation_inside_a_simulation_is_its_own() {
    let _s = serial();
    let outer = || {
        let t0 = weft::sim::now();
        let bg = weft::spawn(|| {
            weft::sleep(Duration::from_secs(2)).unwrap();
            weft::sim::seed()
        });
        let inner = weft::sim::run(99, || {
            let h = weft::spawn(|| {
                weft::sleep(Duration::from_secs(3600)).unwrap();
                weft::sim::seed()
            });
            (weft::sim::seed(), h.join().unwrap(), weft::sim::elapsed())
        })
        .unwrap();
        // Back in the outer simulation: its seed, its clock.
        let after = (weft::sim::seed(), weft::sim::now() - t0);
        (inner.value, inner.elapsed, after, bg.join().unwrap())
    };
    let a = weft::sim::run(5, outer).unwrap();
    let b = weft::sim::run(5, outer).unwrap();
    assert_eq!(
        a.value,
        (
            (Some(99), Some(99), Some(Duration::from_secs(3600))),
            Duration::from_secs(3600),
            (Some(5), Duration::ZERO),
            Some(5)
        )
    );
    assert_eq!(a.elapsed, Duration::from_secs(2));
    same_run(&a, &b);
}

#[test]
fn a_simulation_started_from_a_normal_virtual_thread() {
    let _s = serial();
    let rt = weft::Runtime::builder().parallelism(2).build().unwrap();
    let hs: Vec<_> = (0..4u64)
        .map(|seed| {
            rt.spawn(move || {
                assert!(!weft::sim::is_simulated());
                let r = weft::sim::run(seed, mixed).unwrap();
                // The caller is not simulated, before or after.
                assert!(!weft::sim::is_simulated());
                assert_eq!(weft::sim::elapsed(), None);
                // Its own timers run on real time.
                weft::sleep(Duration::from_millis(1)).unwrap();
                r
            })
        })
        .collect();
    let from_virtual: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    for r in from_virtual {
        let direct = weft::sim::run(r.seed, mixed).unwrap();
        same_run(&r, &direct);
    }
}

/// A thread waits on a channel that a sleeping thread will send on: no
/// deadlock while the timer is pending; the same program whose sleeper
/// leaves without sending is a deadlock, declared at the sleeper's
/// deadline, not before.
#[test]
fn no_deadlock_is_declared_while_a_timer_is_pending() {
    let _s = serial();
    let program = |send: bool| {
        move || {
            let (tx, rx) = channel::bounded::<u32>(1);
            let waiter = weft::spawn(move || rx.recv().ok());
            let sleeper = weft::spawn(move || {
                weft::sleep(Duration::from_secs(30)).unwrap();
                if send {
                    tx.send(1).unwrap();
                } else {
                    // Keep the channel open: the waiter waits forever.
                    std::mem::forget(tx);
                }
            });
            sleeper.join().unwrap();
            waiter.join().unwrap()
        }
    };
    for seed in 0..20 {
        let ok = weft::sim::run(seed, program(true)).unwrap();
        assert_eq!(ok.value, Some(1));
        assert_eq!(ok.elapsed, Duration::from_secs(30));
        let err = weft::sim::run(seed, program(false)).unwrap_err();
        assert_eq!(err.elapsed, Duration::from_secs(30), "{err}");
        match err.outcome {
            // The waiter, and the root joining it.
            Outcome::Deadlock { parked, .. } => assert_eq!(parked, 2, "{err}"),
            ref other => panic!("not a deadlock: {other:?}"),
        }
    }
}

/// A deadlock among some threads while another keeps sleeping in a loop
/// for a while: declared only once the sleeper is done.
#[test]
fn a_deadlock_waits_for_every_timer() {
    let _s = serial();
    let err = weft::sim::run(1, || {
        let m = Arc::new(Mutex::new(()));
        let g = m.lock().unwrap();
        let m2 = m.clone();
        weft::spawn(move || {
            for _ in 0..100 {
                weft::sleep(Duration::from_millis(10)).unwrap();
            }
        });
        // Waits for a lock its own thread holds, through another thread.
        let h = weft::spawn(move || drop(m2.lock().unwrap()));
        h.join().unwrap();
        drop(g);
    })
    .unwrap_err();
    assert!(
        matches!(err.outcome, Outcome::Deadlock { parked: 2, .. }),
        "{err}"
    );
    assert_eq!(err.elapsed, Duration::from_secs(1));
}

/// The root returns while detached threads still sleep: the run ends after
/// them, at the last one's deadline, and what they did is visible.
#[test]
fn the_run_waits_for_detached_threads_after_the_root_returns() {
    let _s = serial();
    let done = Arc::new(AtomicU64::new(0));
    let d = done.clone();
    let r = weft::sim::run(3, move || {
        for i in 1..=5u64 {
            let d = d.clone();
            weft::spawn(move || {
                weft::sleep(Duration::from_secs(i * 10)).unwrap();
                let inner = d.clone();
                // A detached grandchild spawned late, sleeping again.
                weft::spawn(move || {
                    weft::sleep(Duration::from_secs(1)).unwrap();
                    inner.fetch_add(1, Ordering::SeqCst);
                });
                d.fetch_add(1, Ordering::SeqCst);
            });
        }
        "root done"
    })
    .unwrap();
    assert_eq!(r.value, "root done");
    assert_eq!(done.load(Ordering::SeqCst), 10);
    assert_eq!(r.elapsed, Duration::from_secs(51));
}

/// `wait_idle` with several waiters: each returns once every other thread
/// is blocked, before virtual time moves, and the run replays.
#[test]
fn several_idle_waiters_all_return_before_time_moves() {
    let _s = serial();
    let prog = || {
        let t0 = weft::sim::now();
        let (tx, rx) = channel::unbounded::<u64>();
        let progress = Arc::new(AtomicU64::new(0));
        let p = progress.clone();
        let worker = weft::spawn(move || {
            while let Ok(v) = rx.recv() {
                for _ in 0..v {
                    weft::yield_now();
                }
                p.fetch_add(v, Ordering::SeqCst);
            }
            weft::sleep(Duration::from_secs(1)).unwrap();
        });
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let p = progress.clone();
                weft::spawn(move || {
                    weft::sim::wait_idle();
                    (p.load(Ordering::SeqCst), weft::sim::now() - t0)
                })
            })
            .collect();
        tx.send(3).unwrap();
        tx.send(4).unwrap();
        weft::sim::wait_idle();
        let mine = (progress.load(Ordering::SeqCst), weft::sim::now() - t0);
        let theirs: Vec<_> = waiters.into_iter().map(|h| h.join().unwrap()).collect();
        drop(tx);
        worker.join().unwrap();
        (mine, theirs)
    };
    for seed in 0..20 {
        let a = weft::sim::run(seed, prog).unwrap();
        let b = weft::sim::run(seed, prog).unwrap();
        same_run(&a, &b);
        let (mine, theirs) = &a.value;
        // Everything sent was processed when the root's wait returned.
        assert_eq!(*mine, (7, Duration::ZERO), "seed {seed}");
        for t in theirs {
            assert_eq!(t.1, Duration::ZERO, "seed {seed}");
        }
        assert_eq!(a.elapsed, Duration::from_secs(1));
    }
}

/// A joined thread's panic reaches the root as an `Err` (the run goes on
/// and replays); a root that unwraps it fails the run with the message.
#[test]
fn a_panic_in_a_joined_thread() {
    let _s = serial();
    let prog = |unwrap: bool| {
        move || {
            let others: Vec<_> = (0..3u64)
                .map(|i| {
                    weft::spawn(move || {
                        weft::sleep(Duration::from_millis(i)).unwrap();
                        i
                    })
                })
                .collect();
            let bad = weft::spawn(|| {
                weft::yield_now();
                panic!("sim-stress: thread panicked on purpose");
            });
            let r = bad.join();
            if unwrap {
                r.unwrap();
            }
            let sum: u64 = others.into_iter().map(|h| h.join().unwrap()).sum();
            (r.is_err(), sum)
        }
    };
    for seed in 0..10 {
        let a = weft::sim::run(seed, prog(false)).unwrap();
        let b = weft::sim::run(seed, prog(false)).unwrap();
        same_run(&a, &b);
        assert_eq!(a.value, (true, 3));
        let err = weft::sim::run(seed, prog(true)).unwrap_err();
        assert!(matches!(err.outcome, Outcome::Panic(_)), "{err}");
    }
}

/// A detached thread that panics ends alone: the others (and the root)
/// run on to the end, and the run replays — and fails, naming the thread:
/// nobody else would ever see its panic.
#[test]
fn a_panic_in_a_detached_thread_does_not_stop_the_others() {
    let _s = serial();
    let prog = || {
        let n = Arc::new(AtomicU64::new(0));
        for i in 0..4u64 {
            let n = n.clone();
            weft::spawn(move || {
                weft::sleep(Duration::from_millis(i)).unwrap();
                if i == 1 {
                    panic!("sim-stress: detached thread panicked on purpose");
                }
                n.fetch_add(1, Ordering::SeqCst);
            });
        }
        weft::sleep(Duration::from_millis(10)).unwrap();
        n.load(Ordering::SeqCst)
    };
    for seed in 0..5 {
        let a = weft::sim::run(seed, prog).unwrap_err();
        let b = weft::sim::run(seed, prog).unwrap_err();
        assert_eq!((a.trace, a.steps), (b.trace, b.steps));
        // The root slept past every other thread's end: all of them ran.
        assert_eq!(a.elapsed, Duration::from_millis(10));
        match &a.outcome {
            Outcome::Panic(m) => assert!(
                m.contains("panicked on purpose") && m.contains("nobody joined it"),
                "{a}"
            ),
            other => panic!("{other:?}"),
        }
    }
}

/// A simulated thread that waits for an OS thread outside the simulation:
/// not deterministic, but the run ends (a deadlock, or finished if the
/// wake-up came in time) and never hangs.
#[test]
fn a_wake_up_from_outside_never_hangs_the_run() {
    let _s = serial();
    for seed in 0..5 {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        let (tx, rx) = std::sync::mpsc::channel::<weft::Thread>();
        let outside = std::thread::spawn(move || {
            let t = rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(2));
            f.store(true, Ordering::SeqCst);
            t.unpark();
        });
        let r = weft::sim::run(seed, move || {
            tx.send(weft::current()).unwrap();
            while !flag.load(Ordering::SeqCst) {
                weft::park();
            }
        });
        match r {
            Ok(_) => {}
            Err(e) => assert!(matches!(e.outcome, Outcome::Deadlock { .. }), "{e}"),
        }
        outside.join().unwrap();
    }
}

/// A timed wait that ends early leaves a stale timer behind: the run ends
/// when its last thread does, not at the stale deadline, and a deadlock is
/// declared when it happens, not an hour later.
#[test]
fn stale_timers_neither_end_a_run_late_nor_delay_a_deadlock() {
    let _s = serial();
    let early = |seed| {
        weft::sim::run(seed, || {
            let (tx, rx) = channel::bounded::<u32>(1);
            let h = weft::spawn(move || rx.recv_timeout(Duration::from_secs(3600)).ok());
            let p = weft::spawn(|| weft::park_timeout(Duration::from_secs(7200)));
            weft::sleep(Duration::from_millis(1)).unwrap();
            tx.send(1).unwrap();
            p.thread().unpark();
            p.join().unwrap();
            h.join().unwrap()
        })
        .unwrap()
    };
    for seed in 0..10 {
        let r = early(seed);
        assert_eq!(r.value, Some(1));
        assert_eq!(r.elapsed, Duration::from_millis(1), "seed {seed}");
    }
    let err = weft::sim::run(1, || {
        let (tx, rx) = channel::bounded::<u32>(1);
        let h = weft::spawn(move || rx.recv_timeout(Duration::from_secs(3600)).ok());
        weft::sleep(Duration::from_millis(1)).unwrap();
        tx.send(1).unwrap();
        h.join().unwrap();
        // Waits forever from 1 ms on.
        let (_tx, rx) = channel::bounded::<u32>(1);
        let _ = rx.recv();
    })
    .unwrap_err();
    assert!(
        matches!(err.outcome, Outcome::Deadlock { parked: 1, .. }),
        "{err}"
    );
    assert_eq!(err.elapsed, Duration::from_millis(1));
}

/// `wait_idle` on an interrupted thread still waits for the others (and
/// keeps the interrupt for the thread's next wait) instead of spinning on
/// the simulation's one carrier forever.
#[test]
fn wait_idle_on_an_interrupted_thread() {
    let _s = serial();
    // A hang fails this test (after a bound) instead of hanging the run.
    let got = bounded(|| {
        weft::sim::run(1, || {
            let n = Arc::new(AtomicU64::new(0));
            let n2 = n.clone();
            let h = weft::spawn(move || {
                for _ in 0..5 {
                    weft::yield_now();
                    n2.fetch_add(1, Ordering::SeqCst);
                }
            });
            weft::current().interrupt();
            weft::sim::wait_idle();
            let seen = n.load(Ordering::SeqCst);
            // The interrupt is still there for the next interruptible wait.
            let slept = weft::sleep(Duration::from_secs(1)).map_err(|e| e.kind());
            h.join().unwrap();
            (seen, slept)
        })
        .map(|r| r.value)
        .map_err(|e| e.to_string())
    });
    assert_eq!(got, Ok((5, Err(std::io::ErrorKind::Interrupted))));
}

/// Several threads in `wait_idle` at once: each one returns only when
/// every other thread is blocked — so none of them sees a worker that
/// another waiter, returned just before it, has set going.
#[test]
fn each_idle_waiter_returns_when_all_others_are_blocked() {
    let _s = serial();
    let prog = || {
        let busy = Arc::new(AtomicBool::new(false));
        let (tx, rx) = channel::unbounded::<u32>();
        let b = busy.clone();
        let worker = weft::spawn(move || {
            while rx.recv().is_ok() {
                b.store(true, Ordering::SeqCst);
                for _ in 0..3 {
                    weft::yield_now();
                }
                b.store(false, Ordering::SeqCst);
            }
        });
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let busy = busy.clone();
                let tx = tx.clone();
                weft::spawn(move || {
                    weft::sim::wait_idle();
                    let seen = busy.load(Ordering::SeqCst);
                    tx.send(1).unwrap();
                    seen
                })
            })
            .collect();
        drop(tx);
        let seen: Vec<bool> = waiters.into_iter().map(|h| h.join().unwrap()).collect();
        worker.join().unwrap();
        seen
    };
    for seed in 0..30 {
        let r = weft::sim::run(seed, prog).unwrap();
        assert_eq!(
            r.value, [false; 4],
            "seed {seed}: a waiter saw the worker busy"
        );
    }
}

/// Runs `f` on an OS thread of its own and waits for its result, so that
/// a simulation that hangs fails the test (after a bound) instead of
/// hanging it.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the simulation hangs")
}

/// Virtual time goes as far as the clock can show (584 years): a sleep of
/// 500 years takes exactly that; one of 1,000 years never ends — a thread
/// waiting for it waits like one with no timer (a deadlock if nothing else
/// can happen), instead of the carrier spinning on a deadline its clock
/// cannot reach.
#[test]
fn deadlines_beyond_the_clock_are_never_reached() {
    let _s = serial();
    const YEAR: u64 = 365 * 24 * 3600;
    let r = bounded(|| {
        weft::sim::run(1, || weft::sleep(Duration::from_secs(500 * YEAR)).is_ok()).unwrap()
    });
    assert!(r.value);
    assert_eq!(r.elapsed, Duration::from_secs(500 * YEAR));
    let err = bounded(|| {
        weft::sim::run(1, || {
            let h = weft::spawn(|| weft::sleep(Duration::from_secs(10)).unwrap());
            let _ = weft::sleep(Duration::from_secs(1000 * YEAR));
            h.join().unwrap();
        })
        .unwrap_err()
    });
    assert!(
        matches!(err.outcome, Outcome::Deadlock { parked: 1, .. }),
        "{err}"
    );
    assert_eq!(err.elapsed, Duration::from_secs(10));
}

/// What a fresh process prints for seeds 0..8 of [`mixed`] when it runs
/// them first thing (`a_seed_replays_in_a_fresh_process`).
const CHILD_ENV: &str = "WEFT_SIM_STRESS_CHILD";

/// The replay of a failing seed happens in another process (`check` names
/// the seed, `WEFT_SIM_SEED` reruns it): a fresh process, whose first
/// runtime, stacks and thread ids are new, gets the same runs.
#[test]
fn a_seed_replays_in_a_fresh_process() {
    let _s = serial();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "replay_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // The harness prints "test replay_child ... " on the first line.
    let theirs: Vec<&str> = text
        .lines()
        .filter_map(|l| l.find("run ").map(|i| &l[i..]))
        .collect();
    let ours: Vec<String> = (0..8).map(run_line).collect();
    assert_eq!(theirs.len(), 8, "{text}");
    assert_eq!(theirs, ours);
}

fn run_line(seed: u64) -> String {
    let r = Sim::new().seed(seed).pct(2, 300).run(mixed).unwrap();
    let p = weft::sim::run(seed, mixed).unwrap();
    format!(
        "run {seed} {:016x} {} {:?} {:?} {:016x} {}",
        r.trace, r.steps, r.elapsed, r.value, p.trace, p.steps
    )
}

#[test]
fn replay_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    for seed in 0..8 {
        println!("{}", run_line(seed));
    }
}

/// Two threads that hand a value back and forth 200 times over rendezvous
/// channels: every step wakes the other thread.
fn ping_pong() -> u64 {
    let (tx1, rx1) = channel::bounded::<u64>(0);
    let (tx2, rx2) = channel::bounded::<u64>(0);
    let a = weft::spawn(move || {
        for i in 0..200 {
            tx1.send(i).unwrap();
            rx2.recv().unwrap();
        }
    });
    let b = weft::spawn(move || {
        let mut sum = 0;
        for _ in 0..200 {
            sum += rx1.recv().unwrap();
            tx2.send(sum).unwrap();
        }
        sum
    });
    a.join().unwrap();
    b.join().unwrap()
}

/// A thread dump taken meanwhile by another OS thread — another test's
/// `weft::dump()`, or another simulation's deadlock report, which dumps
/// the whole process — must neither change a simulation's schedule nor
/// make it look deadlocked. Before dumps left a running simulation's
/// threads alone (`dump::in_running_simulation`), the dump held parked
/// threads, an unpark meanwhile only left a permit, and the simulated
/// carrier, finding nothing runnable, declared a deadlock (7 of 600 runs)
/// or ran the thread later, when the dump scheduled it from its own OS
/// thread.
#[test]
fn a_concurrent_dump_changes_nothing_in_a_simulation() {
    let _s = serial();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let dumper = std::thread::spawn(move || {
        while !st.load(Ordering::Relaxed) {
            let _ = weft::dump();
        }
    });
    let mut failures = Vec::new();
    for seed in 0..300 {
        let a = weft::sim::run(seed, ping_pong);
        let b = weft::sim::run(seed, ping_pong);
        match (a, b) {
            (Ok(a), Ok(b)) if a.trace == b.trace && a.steps == b.steps => {}
            (a, b) => failures.push(format!(
                "seed {seed}: {:?} / {:?}",
                a.map(|r| r.trace).map_err(|e| e.outcome),
                b.map(|r| r.trace).map_err(|e| e.outcome)
            )),
        }
    }
    stop.store(true, Ordering::Relaxed);
    dumper.join().unwrap();
    assert!(failures.is_empty(), "{failures:#?}");
}
