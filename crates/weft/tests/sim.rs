//! `weft::sim`: virtual time, seeded schedules, replay, deadlock and
//! failure reports.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use weft::channel;
use weft::sim::{Limit, Outcome, Sim};
use weft::sync::Mutex;

/// Ten threads that each take turns through a shared lock and a channel,
/// recording the order they got through in the trace: a workload with
/// many scheduling decisions.
fn churn() -> Vec<u32> {
    let order = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = channel::unbounded();
    let hs: Vec<_> = (0..10u32)
        .map(|i| {
            let order = order.clone();
            let tx = tx.clone();
            weft::spawn(move || {
                for round in 0..3 {
                    weft::yield_now();
                    order.lock().unwrap().push(i * 10 + round);
                    tx.send(i).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let mut got = 0;
    while rx.recv().is_ok() {
        got += 1;
    }
    assert_eq!(got, 30);
    for h in hs {
        h.join().unwrap();
    }
    let order = order.lock().unwrap().clone();
    for &x in &order {
        weft::sim::trace(x as u64);
    }
    order
}

#[test]
fn one_seed_replays_bit_for_bit() {
    let a = weft::sim::run(7, churn).unwrap();
    let b = weft::sim::run(7, churn).unwrap();
    assert_eq!(a.value, b.value);
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.steps, b.steps);
    assert!(a.steps > 30, "{} steps", a.steps);
}

#[test]
fn different_seeds_explore_different_orders() {
    let orders: std::collections::HashSet<Vec<u32>> = (0..20)
        .map(|s| weft::sim::run(s, churn).unwrap().value)
        .collect();
    assert!(orders.len() > 10, "only {} distinct orders", orders.len());
    let pct: std::collections::HashSet<Vec<u32>> = (0..20)
        .map(|s| Sim::new().seed(s).pct(3, 200).run(churn).unwrap().value)
        .collect();
    assert!(pct.len() > 1, "PCT found one order only");
}

#[test]
fn a_long_sleep_takes_virtual_time_only() {
    let real = std::time::Instant::now();
    let r = weft::sim::run(1, || {
        let t0 = weft::sim::now();
        weft::sleep(Duration::from_secs(3600)).unwrap();
        weft::sim::now() - t0
    })
    .unwrap();
    assert_eq!(r.value, Duration::from_secs(3600));
    assert_eq!(r.elapsed, Duration::from_secs(3600));
    // The hour was not waited for in real time (a generous bound: this is
    // a statement that no real sleep happened, not a timing).
    assert!(real.elapsed() < Duration::from_secs(600));
}

#[test]
fn timeouts_fire_in_deadline_order_in_virtual_time() {
    let r = weft::sim::run(3, || {
        let (_tx, rx) = channel::unbounded::<u32>();
        let h = weft::spawn(move || {
            let m = Mutex::new(());
            let cv = weft::sync::Condvar::new();
            let t0 = weft::sim::now();
            // No one notifies: this times out.
            let (_g, r) = cv
                .wait_timeout(m.lock().unwrap(), Duration::from_secs(5))
                .unwrap();
            assert!(r.timed_out());
            weft::sim::now() - t0
        });
        let t0 = weft::sim::now();
        assert!(rx.recv_timeout(Duration::from_secs(20)).is_err());
        let waited = weft::sim::now() - t0;
        (h.join().unwrap(), waited)
    })
    .unwrap();
    assert_eq!(r.value, (Duration::from_secs(5), Duration::from_secs(20)));
    assert_eq!(r.elapsed, Duration::from_secs(20));
}

#[test]
fn a_deadlock_is_reported_with_its_threads() {
    let err = weft::sim::run(5, || {
        let (tx1, rx1) = channel::bounded::<u32>(1);
        let (tx2, rx2) = channel::bounded::<u32>(1);
        let a = weft::Builder::new()
            .name("sim-waits-for-b")
            .spawn(move || {
                let _ = rx1.recv();
                let _ = tx2.send(1);
            })
            .unwrap();
        let _ = rx2.recv();
        let _ = tx1.send(1);
        a.join().unwrap();
    })
    .unwrap_err();
    assert_eq!(err.seed, 5);
    match &err.outcome {
        Outcome::Deadlock { parked, threads } => {
            assert_eq!(*parked, 2);
            assert!(threads.contains("sim-waits-for-b"), "{threads}");
        }
        other => panic!("not a deadlock: {other:?}"),
    }
    assert!(
        err.to_string().contains("replay: Sim::new().seed(5).run"),
        "{err}"
    );
}

/// A lost update: read, yield (a switch point, like any wait), write.
fn racy_counter() {
    let n = Arc::new(AtomicU64::new(0));
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let n = n.clone();
            weft::spawn(move || {
                let v = n.load(Ordering::SeqCst);
                weft::yield_now();
                n.store(v + 1, Ordering::SeqCst);
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(n.load(Ordering::SeqCst), 2, "lost update");
}

#[test]
fn check_finds_a_lost_update_and_names_its_seed() {
    let panic = std::panic::catch_unwind(|| weft::sim::check(100, racy_counter)).unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("lost update"), "{msg}");
    let seed: u64 = msg
        .split("WEFT_SIM_SEED=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("the message names the seed");
    assert!(
        msg.contains(&format!("replay: Sim::new().seed({seed}).run")),
        "{msg}"
    );
    // The named seed fails again, the same way.
    let again = weft::sim::run(seed, racy_counter).unwrap_err();
    assert!(matches!(again.outcome, Outcome::Panic(ref m) if m.contains("lost update")));
}

#[test]
fn entropy_and_blocking_are_deterministic_inside() {
    let f = || {
        let a = weft::sim::random();
        let b = weft::blocking(move || a.wrapping_mul(3));
        assert_eq!(weft::sim::seed(), Some(11));
        assert!(weft::sim::is_simulated());
        (a, b)
    };
    let x = weft::sim::run(11, f).unwrap().value;
    let y = weft::sim::run(11, f).unwrap().value;
    assert_eq!(x, y);
    assert!(!weft::sim::is_simulated());
}

#[test]
fn wait_idle_returns_once_the_others_block_and_before_time_moves() {
    let r = weft::sim::run(9, || {
        let (tx, rx) = channel::unbounded::<u32>();
        let got = Arc::new(AtomicU64::new(0));
        let g = got.clone();
        let h = weft::spawn(move || {
            for _ in 0..3 {
                weft::yield_now();
            }
            g.store(rx.recv().unwrap() as u64, Ordering::SeqCst);
            weft::sleep(Duration::from_secs(5)).unwrap();
            g.store(99, Ordering::SeqCst);
        });
        let t0 = weft::sim::now();
        tx.send(7).unwrap();
        weft::sim::wait_idle();
        // The receiver ran to its sleep; time has not moved.
        let seen = got.load(Ordering::SeqCst);
        let at = weft::sim::now() - t0;
        h.join().unwrap();
        (seen, at, got.load(Ordering::SeqCst))
    })
    .unwrap();
    assert_eq!(r.value, (7, Duration::ZERO, 99));
    assert_eq!(r.elapsed, Duration::from_secs(5));
}

/// Threads that yield to each other for ever never move time: the step
/// limit stops the run with `Outcome::Limit` instead of a hang; a loop
/// that sleeps for ever is stopped by the time limit.
#[test]
fn a_livelock_stops_at_the_step_limit_and_an_endless_loop_at_the_time_limit() {
    let err = Sim::new()
        .seed(1)
        .max_steps(10_000)
        .run(|| {
            let spin = || loop {
                weft::yield_now();
            };
            let _a = weft::spawn(spin);
            spin();
        })
        .unwrap_err();
    assert!(
        matches!(err.outcome, Outcome::Limit(Limit::Steps(10_000))),
        "{err}"
    );
    assert!(
        err.to_string().contains("step limit, max_steps(10000)"),
        "{err}"
    );
    assert_eq!(err.steps, 10_000);
    let err = Sim::new()
        .seed(1)
        .max_time(Duration::from_secs(3600))
        .run(|| {
            loop {
                weft::sleep(Duration::from_secs(1)).unwrap();
            }
        })
        .unwrap_err();
    assert!(
        matches!(err.outcome, Outcome::Limit(Limit::Time(t)) if t == Duration::from_secs(3600)),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("virtual-time limit, max_time(Duration::from_secs(3600))"),
        "{err}"
    );
    assert_eq!(err.elapsed, Duration::from_secs(3600));
}

/// The OS threads of this process (Linux).
fn os_threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// A deadlocked run's carrier goes away (its threads stay parked): many
/// deadlocks do not pile up OS threads.
#[test]
fn deadlocked_runs_do_not_keep_their_carriers() {
    let deadlock = || {
        let (_tx, rx) = channel::bounded::<u32>(1);
        let _ = rx.recv();
    };
    let before = os_threads();
    for seed in 0..20 {
        assert!(weft::sim::run(seed, deadlock).is_err());
    }
    // Each carrier exits on its own once told: wait for them (bounded).
    let mut after = os_threads();
    for _ in 0..1000 {
        if after < before + 5 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        after = os_threads();
    }
    assert!(
        after < before + 5,
        "{before} OS threads before, {after} after 20 deadlocks"
    );
}

/// A root that panics while another thread waits for ever reports the
/// panic, then the thread it left waiting — not as a deadlock: an idle
/// server is not deadlocked because its client gave up.
#[test]
fn a_panic_of_the_root_is_reported_before_what_it_left_behind() {
    let err = weft::sim::run(2, || {
        let (tx, rx) = channel::bounded::<u32>(1);
        let _waiter = weft::spawn(move || rx.recv());
        weft::yield_now();
        // The sender outlives the root: the waiter waits for ever.
        std::mem::forget(tx);
        panic!("root gave up");
    })
    .unwrap_err();
    match &err.outcome {
        Outcome::Panic(m) => assert!(
            m.contains("root gave up")
                && m.contains("then the run stopped with 1 threads waiting")
                && !m.contains("deadlock"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
}

/// Released by the test once the run is reported: the stuck thread then
/// returns and its carrier leaves.
static RELEASE_SPINNER: AtomicBool = AtomicBool::new(false);

#[inline(never)]
fn spin_until_released() {
    while !RELEASE_SPINNER.load(Ordering::Relaxed) {
        std::hint::spin_loop();
    }
}

/// A thread that never suspends holds the one carrier: the step and time
/// limits, checked between steps, never come. The watchdog ends the run
/// as `Stuck`, naming the thread with its stack (sampled on the carrier),
/// and tells a loop by its CPU time.
#[test]
fn a_loop_that_never_yields_is_reported_stuck_with_its_stack() {
    let err = Sim::new()
        .seed(1)
        .max_steps(10_000)
        .max_time(Duration::from_secs(1))
        .watchdog(Duration::from_secs(2))
        .run(|| {
            let h = weft::Builder::new()
                .name("sim-spinner")
                .spawn(spin_until_released)
                .unwrap();
            weft::sleep(Duration::from_millis(10)).unwrap();
            h.join().unwrap();
        })
        .unwrap_err();
    RELEASE_SPINNER.store(true, Ordering::Relaxed);
    let text = err.to_string();
    match &err.outcome {
        Outcome::Stuck {
            thread,
            ran,
            in_system_call,
            ..
        } => {
            assert_ne!(*in_system_call, Some(true), "{text}");
            assert!(thread.contains("\"sim-spinner\""), "{text}");
            assert!(thread.contains("spin_until_released"), "{text}");
            assert!(*ran >= Duration::from_secs(2), "{text}");
        }
        other => panic!("not stuck: {other:?}"),
    }
    assert!(text.contains(".watchdog(Duration::from_secs(2))"), "{text}");
}

/// A detached thread's panic fails the run (`check` used to pass it),
/// naming the thread and its message; so does one whose handle is dropped
/// after the panic without a join.
#[test]
fn a_panic_nobody_joins_fails_the_run() {
    let panic = std::panic::catch_unwind(|| {
        weft::sim::check(20, || {
            weft::Builder::new()
                .name("sim-detached")
                .spawn(|| panic!("detached boom"))
                .unwrap();
            weft::sleep(Duration::from_millis(1)).unwrap();
        })
    })
    .unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("thread \"sim-detached\"") && msg.contains("panicked: detached boom"),
        "{msg}"
    );
    let err = weft::sim::run(3, || {
        let h = weft::Builder::new()
            .name("sim-dropped")
            .spawn(|| panic!("dropped boom"))
            .unwrap();
        while !h.is_finished() {
            weft::yield_now();
        }
        drop(h);
    })
    .unwrap_err();
    match &err.outcome {
        Outcome::Panic(m) => assert!(
            m.contains("thread \"sim-dropped\"")
                && m.contains("dropped boom")
                && m.contains("nobody joined it"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
}

/// A joined panic belongs to the joiner: handled, the run passes;
/// unwrapped, the failure shows the thread's own message, not only the
/// `Any { .. }` of the unwrap.
#[test]
fn a_joined_panic_is_the_joiners_and_shows_its_message() {
    let r = weft::sim::run(4, || weft::spawn(|| panic!("expected")).join().is_err());
    assert!(r.unwrap().value);
    let err = weft::sim::run(4, || {
        weft::Builder::new()
            .name("sim-joined")
            .spawn(|| panic!("joined boom"))
            .unwrap()
            .join()
            .unwrap();
    })
    .unwrap_err();
    match &err.outcome {
        Outcome::Panic(m) => assert!(
            m.contains("after thread \"sim-joined\"") && m.contains("panicked: joined boom"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
}

/// The failure names every setting a replay needs: a PCT seed replayed
/// without PCT runs another schedule. `Failure::replay` (and the printed
/// builder expression) gives the same run again.
#[test]
fn a_failure_gives_a_replay_with_its_policy_and_limits() {
    let sim = Sim::new().pct(3, 20).max_steps(5_000);
    let first = (0..200)
        .find_map(|s| sim.seed(s).run(racy_counter).err())
        .expect("PCT finds the lost update");
    let text = first.to_string();
    let seed = first.seed;
    assert!(
        text.contains(&format!(
            "replay: Sim::new().seed({seed}).pct(3, 20).max_steps(5000).run(…)"
        )),
        "{text}"
    );
    let again = first.replay().run(racy_counter).unwrap_err();
    assert_eq!(
        (again.seed, again.trace, again.steps),
        (seed, first.trace, first.steps)
    );
    // The same seed under uniform choice is another run.
    let uniform = weft::sim::run(seed, racy_counter);
    assert_ne!(
        uniform.map(|r| r.trace).unwrap_or_else(|e| e.trace),
        first.trace
    );
}

/// docs/sim.md's opening example prints what the code prints: each of its
/// `//   ` comment lines (`…` for what varies) is found in the message.
#[test]
fn the_opening_example_of_the_docs_is_true() {
    let doc = include_str!("../../../docs/sim.md");
    let block = doc
        .split("```rust")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let expected: Vec<&str> = block
        .lines()
        .filter_map(|l| l.strip_prefix("//   "))
        .collect();
    assert!(expected.len() >= 2, "{block}");
    let panic = std::panic::catch_unwind(|| {
        weft::sim::check(100, || {
            let n = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let n = n.clone();
                    weft::spawn(move || {
                        let v = n.load(std::sync::atomic::Ordering::SeqCst);
                        weft::yield_now(); // any wait is a switch point
                        n.store(v + 1, std::sync::atomic::Ordering::SeqCst);
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(
                n.load(std::sync::atomic::Ordering::SeqCst),
                2,
                "lost update"
            );
        })
    })
    .unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    let mut rest = msg.as_str();
    for line in expected {
        for piece in line.split('…').map(str::trim).filter(|p| !p.is_empty()) {
            let at = rest
                .find(piece)
                .unwrap_or_else(|| panic!("docs/sim.md says {piece:?}; the code says:\n{msg}"));
            rest = &rest[at + piece.len()..];
        }
    }
}

/// Without `transparent`, `std::net` is not Weft's to see: a real accept
/// inside a simulation blocks the one carrier in the kernel. The watchdog
/// reports it as stuck with (almost) no CPU time used, which the message
/// reads as a blocking system call and names the likely ones.
#[test]
fn a_real_blocking_call_is_reported_stuck_as_a_system_call() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let err = Sim::new()
        .seed(1)
        .watchdog(Duration::from_secs(2))
        .run(move || {
            let _ = listener.accept();
        })
        .unwrap_err();
    // Lets the accept return: its thread ends and its carrier leaves.
    let _ = std::net::TcpStream::connect(addr);
    match &err.outcome {
        Outcome::Stuck { in_system_call, .. } => {
            assert_ne!(*in_system_call, Some(false), "{err}")
        }
        other => panic!("not stuck: {other:?}"),
    }
    assert!(err.to_string().contains("std::net"), "{err}");
}
