//! Blocking primitives of weft against the spec: park/unpark permits,
//! `park_timeout`, `sleep`, interrupts, `interrupted()` and `yield_now` —
//! each checked from a virtual thread and from a plain OS thread, and across
//! the two kinds (a virtual thread waking an OS thread and vice versa).
//!
//! Timeouts are failure detectors only. Lower bounds (`elapsed >= d`) are
//! the spec; upper bounds are generous so a loaded CI machine cannot trip
//! them.

use std::io::ErrorKind;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use weft::{Runtime, State, Thread};

/// Upper bound for anything that should take milliseconds.
const LIMIT: Duration = Duration::from_secs(30);
/// Slack allowed above a timeout before we call it broken.
const SLACK: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Virtual,
    Os,
}

/// A running virtual or OS thread: its weft `Thread` and a way to join it.
struct Task<T> {
    thread: Thread,
    result: mpsc::Receiver<std::thread::Result<T>>,
    handle: Option<weft::JoinHandle<()>>,
}

fn start<T, F>(kind: Kind, f: F) -> Task<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (result_tx, result) = mpsc::channel();
    let (thread_tx, thread_rx) = mpsc::channel();
    let body = move || {
        assert_eq!(
            weft::current().is_virtual(),
            kind == Kind::Virtual,
            "is_virtual() does not match the kind of thread"
        );
        thread_tx.send(weft::current()).unwrap();
        let _ = result_tx.send(catch_unwind(AssertUnwindSafe(f)));
    };
    let handle = match kind {
        Kind::Virtual => Some(weft::spawn(body)),
        Kind::Os => {
            std::thread::spawn(body);
            None
        }
    };
    let thread = thread_rx
        .recv_timeout(LIMIT)
        .unwrap_or_else(|_| panic!("{kind:?} thread did not start within {LIMIT:?}"));
    Task {
        thread,
        result,
        handle,
    }
}

impl<T> Task<T> {
    fn join(self) -> T {
        let r = match self.result.recv_timeout(LIMIT) {
            Ok(r) => r,
            Err(_) => panic!(
                "thread {:?} did not finish within {LIMIT:?}; state {:?}",
                self.thread.id(),
                self.thread.state()
            ),
        };
        if let Some(h) = self.handle {
            h.join().expect("virtual thread wrapper panicked");
        }
        r.unwrap_or_else(|p| resume_unwind(p))
    }
}

fn run_on<T: Send + 'static>(kind: Kind, f: impl FnOnce() -> T + Send + 'static) -> T {
    start(kind, f).join()
}

/// Runs a thread of `kind` that executes `f` (used as the "other side").
fn act_from(kind: Kind, f: impl FnOnce() + Send + 'static) {
    run_on(kind, f);
}

/// Gives the target a chance to actually block (not required for
/// correctness: every test is also correct if the wake-up comes first).
fn soft_wait_parked(t: &Thread) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while t.state() != State::Parked && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn assert_between(elapsed: Duration, at_least: Duration, what: &str) {
    assert!(
        elapsed >= at_least,
        "{what}: returned after {elapsed:?}, before its timeout {at_least:?}"
    );
    assert!(
        elapsed < at_least + SLACK,
        "{what}: returned after {elapsed:?}, far beyond {at_least:?}"
    );
}

fn assert_prompt(elapsed: Duration, what: &str) {
    assert!(
        elapsed < SLACK,
        "{what}: took {elapsed:?}, should have returned immediately"
    );
}

/// Each check runs once on a virtual thread and once on an OS thread.
macro_rules! on_both_kinds {
    ($($check:ident),* $(,)?) => {$(
        mod $check {
            #[test]
            fn virtual_thread() {
                super::run_on(super::Kind::Virtual, super::$check);
            }
            #[test]
            fn os_thread() {
                super::run_on(super::Kind::Os, super::$check);
            }
        }
    )*};
}

on_both_kinds!(
    unpark_before_park_returns_immediately,
    unparks_do_not_accumulate,
    park_timeout_waits_for_its_timeout,
    park_timeout_consumes_permit,
    park_timeout_zero_returns,
    sleep_waits_at_least_its_duration,
    sleep_is_not_cut_short_by_unpark_permit,
    interrupted_returns_and_clears_flag,
    interrupt_before_sleep_fails_immediately,
    interrupt_before_park_makes_park_return_without_clearing,
    yield_now_returns,
    sleep_until_waits_until_its_deadline,
);

// ------------------------------------------------------------------ checks

fn unpark_before_park_returns_immediately() {
    weft::current().unpark();
    let t0 = Instant::now();
    weft::park();
    assert_prompt(t0.elapsed(), "park with a pending permit");
}

fn unparks_do_not_accumulate() {
    let me = weft::current();
    me.unpark();
    me.unpark();
    me.unpark();
    let t0 = Instant::now();
    weft::park(); // consumes the single permit
    assert_prompt(t0.elapsed(), "park with a pending permit");
    // No permit left: this must run into its timeout. (Spurious wake-ups are
    // allowed by the spec, but nothing here could cause one.)
    let d = Duration::from_millis(200);
    let t0 = Instant::now();
    weft::park_timeout(d);
    assert_between(t0.elapsed(), d, "park_timeout after 3 unparks + 1 park");
}

fn park_timeout_waits_for_its_timeout() {
    for ms in [1u64, 20, 100] {
        let d = Duration::from_millis(ms);
        let t0 = Instant::now();
        weft::park_timeout(d);
        assert_between(t0.elapsed(), d, "park_timeout without unpark");
    }
}

fn park_timeout_consumes_permit() {
    weft::current().unpark();
    let t0 = Instant::now();
    weft::park_timeout(Duration::from_secs(60));
    assert_prompt(t0.elapsed(), "park_timeout with a pending permit");
    let d = Duration::from_millis(50);
    let t0 = Instant::now();
    weft::park_timeout(d);
    assert_between(t0.elapsed(), d, "park_timeout after the permit was used");
}

fn park_timeout_zero_returns() {
    let t0 = Instant::now();
    for _ in 0..1000 {
        weft::park_timeout(Duration::ZERO);
    }
    assert_prompt(t0.elapsed(), "1000 × park_timeout(0)");
}

fn sleep_waits_at_least_its_duration() {
    weft::sleep(Duration::ZERO).expect("sleep(0)");
    for ms in [1u64, 10, 50] {
        let d = Duration::from_millis(ms);
        let t0 = Instant::now();
        weft::sleep(d).expect("sleep");
        assert_between(t0.elapsed(), d, "sleep");
    }
}

fn sleep_is_not_cut_short_by_unpark_permit() {
    weft::current().unpark();
    let d = Duration::from_millis(100);
    let t0 = Instant::now();
    weft::sleep(d).expect("sleep");
    assert_between(t0.elapsed(), d, "sleep with a pending unpark permit");
}

fn interrupted_returns_and_clears_flag() {
    let me = weft::current();
    assert!(!me.is_interrupted());
    assert!(!weft::interrupted());
    me.interrupt();
    assert!(me.is_interrupted());
    assert!(me.is_interrupted(), "is_interrupted() must not clear");
    assert!(weft::interrupted(), "interrupted() must report the flag");
    assert!(!weft::interrupted(), "interrupted() must clear the flag");
    assert!(!me.is_interrupted());
}

fn interrupt_before_sleep_fails_immediately() {
    weft::current().interrupt();
    let t0 = Instant::now();
    let err = weft::sleep(Duration::from_secs(60)).expect_err("sleep after interrupt returned Ok");
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    assert_prompt(t0.elapsed(), "sleep with interrupt flag set");
    assert!(
        !weft::current().is_interrupted(),
        "sleep's Interrupted error must clear the flag"
    );
    // The flag is gone, so the next sleep sleeps.
    let d = Duration::from_millis(20);
    let t0 = Instant::now();
    weft::sleep(d).expect("sleep after the interrupt was consumed");
    assert_between(t0.elapsed(), d, "sleep after consumed interrupt");
}

fn interrupt_before_park_makes_park_return_without_clearing() {
    weft::current().interrupt();
    let t0 = Instant::now();
    weft::park();
    weft::park();
    weft::park_timeout(Duration::from_secs(60));
    assert_prompt(t0.elapsed(), "park with interrupt flag set");
    assert!(
        weft::current().is_interrupted(),
        "park must not clear the interrupt flag"
    );
    assert!(weft::interrupted());
    // interrupt() also unparked us; whether a park that returned because of
    // the flag consumed that permit is not specified, so drain it once.
    let d = Duration::from_millis(20);
    weft::park_timeout(d);
    let t0 = Instant::now();
    weft::park_timeout(d);
    assert_between(t0.elapsed(), d, "park_timeout after the flag was cleared");
}

fn sleep_until_waits_until_its_deadline() {
    let t0 = Instant::now();
    weft::sleep_until(t0).expect("sleep_until(now)");
    let past = t0.checked_sub(Duration::from_millis(5)).unwrap_or(t0);
    weft::sleep_until(past).expect("sleep_until(past)");
    assert_prompt(t0.elapsed(), "sleep_until a past instant");
    let deadline = Instant::now() + Duration::from_millis(30);
    weft::sleep_until(deadline).expect("sleep_until");
    let now = Instant::now();
    assert!(now >= deadline, "sleep_until returned before its deadline");
    assert!(now < deadline + SLACK, "sleep_until overslept");
}

fn yield_now_returns() {
    let t0 = Instant::now();
    for _ in 0..10_000 {
        weft::yield_now();
    }
    assert_prompt(t0.elapsed(), "10,000 yields");
}

// ------------------------------------------------- cross-thread wake-ups

const KINDS: [Kind; 2] = [Kind::Virtual, Kind::Os];

#[test]
fn unpark_wakes_parked_thread_across_kinds() {
    for parker in KINDS {
        for waker in KINDS {
            let flag = Arc::new(AtomicBool::new(false));
            let f = flag.clone();
            let task = start(parker, move || {
                let t0 = Instant::now();
                while !f.load(SeqCst) {
                    weft::park();
                }
                t0.elapsed()
            });
            soft_wait_parked(&task.thread);
            let t = task.thread.clone();
            act_from(waker, move || {
                flag.store(true, SeqCst);
                t.unpark();
            });
            let waited = task.join();
            assert!(waited < LIMIT, "{parker:?} parker woken by {waker:?}");
        }
    }
}

#[test]
fn unpark_wakes_park_timeout_early_across_kinds() {
    for parker in KINDS {
        for waker in KINDS {
            let flag = Arc::new(AtomicBool::new(false));
            let f = flag.clone();
            let task = start(parker, move || {
                let t0 = Instant::now();
                while !f.load(SeqCst) {
                    weft::park_timeout(Duration::from_secs(120));
                }
                t0.elapsed()
            });
            soft_wait_parked(&task.thread);
            let t = task.thread.clone();
            act_from(waker, move || {
                flag.store(true, SeqCst);
                t.unpark();
            });
            let waited = task.join();
            assert!(
                waited < Duration::from_secs(60),
                "{parker:?} in park_timeout(120 s) was not woken by {waker:?} unpark"
            );
        }
    }
}

#[test]
fn interrupt_wakes_sleep_across_kinds() {
    for sleeper in KINDS {
        for interrupter in KINDS {
            let task = start(sleeper, || {
                let t0 = Instant::now();
                let r = weft::sleep(Duration::from_secs(120));
                (
                    r.map_err(|e| e.kind()),
                    t0.elapsed(),
                    weft::current().is_interrupted(),
                )
            });
            soft_wait_parked(&task.thread);
            let t = task.thread.clone();
            act_from(interrupter, move || t.interrupt());
            let (r, elapsed, still_flagged) = task.join();
            let what = format!("{sleeper:?} sleeper interrupted by {interrupter:?}");
            assert_eq!(r, Err(ErrorKind::Interrupted), "{what}");
            assert!(elapsed < Duration::from_secs(60), "{what}: {elapsed:?}");
            assert!(!still_flagged, "{what}: flag not cleared by sleep");
        }
    }
}

#[test]
fn interrupt_wakes_park_and_stays_set_across_kinds() {
    for parker in KINDS {
        for interrupter in KINDS {
            let task = start(parker, || {
                let t0 = Instant::now();
                while !weft::current().is_interrupted() {
                    weft::park();
                }
                let woke = t0.elapsed();
                // Flag still set: park keeps returning at once.
                let t1 = Instant::now();
                weft::park();
                weft::park_timeout(Duration::from_secs(60));
                (woke, t1.elapsed(), weft::interrupted(), weft::interrupted())
            });
            soft_wait_parked(&task.thread);
            let t = task.thread.clone();
            act_from(interrupter, move || t.interrupt());
            let (woke, again, first, second) = task.join();
            let what = format!("{parker:?} parker interrupted by {interrupter:?}");
            assert!(woke < LIMIT, "{what}");
            assert_prompt(again, &what);
            assert!(first, "{what}: flag lost");
            assert!(!second, "{what}: interrupted() did not clear");
        }
    }
}

#[test]
fn interrupt_wakes_park_timeout() {
    for parker in KINDS {
        let task = start(parker, || {
            let t0 = Instant::now();
            while !weft::current().is_interrupted() {
                weft::park_timeout(Duration::from_secs(120));
            }
            t0.elapsed()
        });
        soft_wait_parked(&task.thread);
        task.thread.interrupt();
        assert!(task.join() < Duration::from_secs(60), "{parker:?}");
    }
}

#[test]
fn interrupt_is_visible_from_outside() {
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let task = start(Kind::Virtual, move || {
        while !r.load(SeqCst) {
            weft::park(); // returns at once once interrupted; that is fine
        }
        weft::current().is_interrupted()
    });
    assert!(!task.thread.is_interrupted());
    task.thread.interrupt();
    // Nobody clears it (park does not): visible from here, right away.
    assert!(task.thread.is_interrupted());
    release.store(true, SeqCst);
    task.thread.unpark();
    assert!(task.join(), "interrupt flag not observed by the target");
}

#[test]
fn sleep_is_not_cut_short_by_repeated_unparks() {
    for sleeper in KINDS {
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let d = Duration::from_millis(300);
        let task = start(sleeper, move || {
            let t0 = Instant::now();
            let r = weft::sleep(d);
            d2.store(true, SeqCst);
            (r.is_ok(), t0.elapsed())
        });
        let t = task.thread.clone();
        let deadline = Instant::now() + LIMIT;
        while !done.load(SeqCst) && Instant::now() < deadline {
            t.unpark();
            std::thread::sleep(Duration::from_micros(100));
        }
        let (ok, elapsed) = task.join();
        assert!(ok, "{sleeper:?}: sleep returned Err under unpark");
        assert_between(elapsed, d, &format!("{sleeper:?} sleep under unpark storm"));
    }
}

/// An unpark or interrupt that arrives while the target is still being
/// started (queued, not yet run) must not be lost.
#[test]
fn unpark_and_interrupt_right_after_spawn_are_not_lost() {
    for round in 0..10 {
        let parkers: Vec<_> = (0..1000)
            .map(|_| {
                let h = weft::spawn(weft::park);
                h.thread().unpark();
                h
            })
            .collect();
        let sleepers: Vec<_> = (0..1000)
            .map(|_| {
                let h =
                    weft::spawn(|| weft::sleep(Duration::from_secs(3600)).map_err(|e| e.kind()));
                h.thread().interrupt();
                h
            })
            .collect();
        let results = run_on(Kind::Os, move || {
            for h in parkers {
                h.join().unwrap();
            }
            sleepers
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
        for r in results {
            assert_eq!(r, Err(ErrorKind::Interrupted), "round {round}");
        }
    }
}

// -------------------------------------------------- single-carrier runtime

fn one_carrier() -> Runtime {
    Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .build()
        .expect("runtime with one carrier")
}

#[test]
fn yield_now_interleaves_two_threads_on_one_carrier() {
    const ROUNDS: usize = 100;
    let rt = one_carrier();
    let order = Arc::new(Mutex::new(Vec::with_capacity(2 * ROUNDS)));
    let started = Arc::new(AtomicUsize::new(0));
    let spawn_one = |who: char| {
        let (order, started) = (order.clone(), started.clone());
        rt.spawn(move || {
            // Both must be on the run queue before recording starts.
            started.fetch_add(1, SeqCst);
            while started.load(SeqCst) < 2 {
                weft::yield_now();
            }
            for _ in 0..ROUNDS {
                order.lock().unwrap().push(who);
                weft::yield_now();
            }
        })
    };
    let a = spawn_one('A');
    let b = spawn_one('B');
    run_on(Kind::Os, move || {
        a.join().unwrap();
        b.join().unwrap();
    });
    let order: String = order.lock().unwrap().iter().collect();
    assert_eq!(order.len(), 2 * ROUNDS);
    assert_eq!(order.matches('A').count(), ROUNDS);
    // yield_now must let the other runnable thread run before returning.
    let repeats: Vec<usize> = order
        .as_bytes()
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[0] == w[1])
        .map(|(i, _)| i)
        .collect();
    assert!(
        repeats.is_empty(),
        "yield_now did not alternate on one carrier; repeats at {repeats:?}: {order}"
    );
}

/// If `sleep` blocked the carrier instead of parking the virtual thread,
/// 100 sleeps of 200 ms on one carrier would take 20 s.
#[test]
fn sleep_parks_virtual_thread_not_the_carrier() {
    let rt = one_carrier();
    let t0 = Instant::now();
    let handles: Vec<_> = (0..100)
        .map(|_| rt.spawn(|| weft::sleep(Duration::from_millis(200)).is_ok()))
        .collect();
    let all_ok = run_on(Kind::Os, move || {
        handles.into_iter().all(|h| h.join().unwrap())
    });
    assert!(all_ok);
    let elapsed = t0.elapsed();
    assert!(elapsed >= Duration::from_millis(200));
    assert!(
        elapsed < Duration::from_secs(10),
        "100 concurrent 200 ms sleeps on one carrier took {elapsed:?}: sleep blocks the carrier?"
    );
}

#[test]
fn park_parks_virtual_thread_not_the_carrier() {
    let rt = one_carrier();
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let parker = rt.spawn(move || {
        while !f.load(SeqCst) {
            weft::park();
        }
        "woken"
    });
    let target = parker.thread().clone();
    // Runs on the same (only) carrier: possible only if the parker unmounted.
    let waker = rt.spawn(move || {
        flag.store(true, SeqCst);
        target.unpark();
    });
    let r = run_on(Kind::Os, move || {
        waker.join().unwrap();
        parker.join().unwrap()
    });
    assert_eq!(r, "woken");
}

#[test]
fn park_timeout_on_one_carrier_lets_others_run() {
    let rt = one_carrier();
    let t0 = Instant::now();
    let handles: Vec<_> = (0..100)
        .map(|_| {
            rt.spawn(|| {
                let t = Instant::now();
                weft::park_timeout(Duration::from_millis(200));
                t.elapsed()
            })
        })
        .collect();
    let waits = run_on(Kind::Os, move || {
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    for w in waits {
        assert!(
            w >= Duration::from_millis(200),
            "park_timeout woke after {w:?}"
        );
    }
    let elapsed = t0.elapsed();
    assert!(
        elapsed < Duration::from_secs(10),
        "100 concurrent 200 ms park_timeouts on one carrier took {elapsed:?}"
    );
}

#[test]
fn interrupt_wakes_sleeper_on_one_carrier() {
    let rt = one_carrier();
    let sleeper = rt.spawn(|| weft::sleep(Duration::from_secs(120)).map_err(|e| e.kind()));
    let target = sleeper.thread().clone();
    soft_wait_parked(&target);
    let interrupter = rt.spawn(move || target.interrupt());
    let r = run_on(Kind::Os, move || {
        interrupter.join().unwrap();
        sleeper.join().unwrap()
    });
    assert_eq!(r, Err(ErrorKind::Interrupted));
}

// ------------------------------------- wake-ups while a carrier is hogged

/// Spins on the current carrier, without yielding, for `d`.
fn hog(d: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A CPU-bound virtual thread that holds one of two carriers holds up no
/// one else: a sleeper that runs on the other carrier wakes about on time
/// (its timer lives on its own carrier). The hog starts first and spins
/// inside its thread, so its carrier takes nothing from the injector and
/// the sleeper, spawned from this OS thread, can only run on the other.
/// (A thread *bound* to the hogged carrier waits for the hog: affinity;
/// the monitor reports that stall, `tests/culprit.rs`.)
///
/// This test once spawned its hog with `weft::spawn` from a thread of
/// `rt`, which then meant the default runtime: the hog never ran on `rt`.
#[test]
fn sleeper_wakes_on_time_while_the_other_carrier_is_hogged() {
    let rt = Runtime::builder()
        .parallelism(2)
        .max_pool_size(2)
        .build()
        .expect("runtime");
    let hog_time = Duration::from_secs(3);
    let hogging = Arc::new(AtomicBool::new(false));
    let h = {
        let hogging = hogging.clone();
        rt.spawn(move || {
            hogging.store(true, SeqCst);
            hog(hog_time);
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() }
        })
    };
    while !hogging.load(SeqCst) {
        std::thread::yield_now();
    }
    let sleeper = rt.spawn(move || {
        let t0 = Instant::now();
        weft::sleep(Duration::from_millis(20)).unwrap();
        // SAFETY: gettid has no preconditions (the carrier's id).
        (t0.elapsed(), unsafe { libc::gettid() })
    });
    let (slept, sleeper_carrier) = run_on(Kind::Os, move || sleeper.join().unwrap());
    let hog_carrier = run_on(Kind::Os, move || h.join().unwrap());
    assert_ne!(
        sleeper_carrier, hog_carrier,
        "the sleeper ran on the hogged carrier"
    );
    assert!(slept >= Duration::from_millis(20));
    assert!(
        slept < Duration::from_millis(1500),
        "sleep(20 ms) took {slept:?} while a hog occupied the other carrier"
    );
}

/// With migration allowed, a thread woken by a virtual thread that then
/// hogs its carrier must not stay stuck in that carrier's "run next" slot
/// while another is idle (it is stolen, as Go steals `runnext`). Without
/// the opt-in a started thread waits for its own carrier: that is the
/// price of affinity (see `tests/affinity.rs`).
#[test]
fn woken_thread_is_not_stuck_behind_a_hogging_waker() {
    // SAFETY: these threads keep nothing tied to an OS thread (no
    // thread-locals, no std lock guards) across their blocking calls.
    let rt = unsafe { Runtime::builder().parallelism(2).allow_migration() }
        .build()
        .expect("runtime");
    let woken_at = Arc::new(Mutex::new(None::<Instant>));
    let flag = Arc::new(AtomicBool::new(false));
    let (w, f) = (woken_at.clone(), flag.clone());
    let parker = rt.spawn(move || {
        while !f.load(SeqCst) {
            weft::park();
        }
        *w.lock().unwrap() = Some(Instant::now());
    });
    let target = parker.thread().clone();
    soft_wait_parked(&target);
    let waker = rt.spawn(move || {
        flag.store(true, SeqCst);
        let t0 = Instant::now();
        target.unpark();
        hog(Duration::from_secs(3));
        t0
    });
    let unparked_at = run_on(Kind::Os, move || {
        parker.join().unwrap();
        waker.join().unwrap()
    });
    let woke = woken_at.lock().unwrap().expect("parker never ran");
    let delay = woke.saturating_duration_since(unparked_at);
    assert!(
        delay < Duration::from_millis(1500),
        "woken thread ran {delay:?} after its unpark: stuck behind the hogging waker"
    );
}
