//! Weft's timing behaviour, exactly: under `weft::sim` every timeout is
//! checked to the nanosecond of virtual time (on a real runtime the same
//! checks need generous upper bounds — `tests/park.rs` — because a loaded
//! machine may deschedule a carrier).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use weft::channel::{self, RecvTimeoutError, SendTimeoutError};
use weft::sim::{self, now};
use weft::sync::{Condvar, CountDownLatch, Mutex, Semaphore};

const MS: Duration = Duration::from_millis(1);

/// Runs `f` under a few seeds; every seed must give the same value.
fn exact<T: Send + PartialEq + std::fmt::Debug + 'static>(f: fn() -> T) -> T {
    let first = sim::run(0, f).unwrap().value;
    for seed in 1..8 {
        assert_eq!(sim::run(seed, f).unwrap().value, first, "seed {seed}");
    }
    first
}

/// The time `f` takes on the virtual clock.
fn took(f: impl FnOnce()) -> Duration {
    let t0 = now();
    f();
    now() - t0
}

#[test]
fn sleep_park_timeout_and_sleep_until_take_exactly_their_time() {
    let got = exact(|| {
        (
            took(|| weft::sleep(200 * MS).unwrap()),
            took(|| weft::park_timeout(75 * MS)),
            took(|| weft::sleep_until(now() + 3 * MS).unwrap()),
            took(|| weft::sleep_until(now() - MS).unwrap()),
            took(|| weft::sleep(Duration::ZERO).unwrap()),
        )
    });
    assert_eq!(
        got,
        (200 * MS, 75 * MS, 3 * MS, Duration::ZERO, Duration::ZERO)
    );
}

/// 100 sleeps of 200 ms on the one carrier all end at 200 ms: they
/// overlapped (a sleep that held the carrier would add up to 20 s).
#[test]
fn concurrent_sleepers_all_wake_at_their_deadline() {
    let ends = exact(|| {
        let t0 = now();
        let hs: Vec<_> = (0..100)
            .map(|_| {
                weft::spawn(move || {
                    weft::sleep(200 * MS).unwrap();
                    now() - t0
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert!(ends.iter().all(|&e| e == 200 * MS), "{ends:?}");
}

/// Sleepers wake in deadline order whatever order they went to sleep in;
/// equal deadlines wake together.
#[test]
fn timers_fire_in_deadline_order() {
    let order = exact(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let hs: Vec<_> = [50u32, 10, 30, 10, 40, 20]
            .into_iter()
            .map(|ms| {
                let log = log.clone();
                weft::spawn(move || {
                    weft::sleep(ms * MS).unwrap();
                    log.lock().unwrap().push((ms, now()));
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let log = log.lock().unwrap().clone();
        let t0 = log.iter().map(|&(ms, t)| t - ms * MS).min().unwrap();
        log.into_iter()
            .map(|(ms, t)| (ms, t - t0))
            .collect::<Vec<_>>()
    });
    let mut sorted = order.clone();
    sorted.sort_by_key(|&(ms, _)| ms);
    assert_eq!(
        order.iter().map(|p| p.0).collect::<Vec<_>>(),
        sorted.iter().map(|p| p.0).collect::<Vec<_>>()
    );
    assert!(order.iter().all(|&(ms, at)| at == ms * MS), "{order:?}");
}

#[test]
fn channel_timeouts_are_exact() {
    let got = exact(|| {
        let (tx, rx) = channel::bounded::<u32>(1);
        let recv = took(|| assert_eq!(rx.recv_timeout(30 * MS), Err(RecvTimeoutError::Timeout)));
        tx.send(1).unwrap();
        let send = took(|| {
            assert!(matches!(
                tx.send_timeout(2, 45 * MS),
                Err(SendTimeoutError::Timeout(2))
            ));
        });
        // A value that arrives before the deadline ends the wait then.
        let tx2 = tx.clone();
        let _h = weft::spawn(move || {
            weft::sleep(5 * MS).unwrap();
            tx2.send(3).unwrap();
        });
        assert_eq!(rx.recv().unwrap(), 1);
        let early = took(|| assert_eq!(rx.recv_timeout(30 * MS), Ok(3)));
        (recv, send, early)
    });
    assert_eq!(got, (30 * MS, 45 * MS, 5 * MS));
}

#[test]
fn lock_waits_time_out_exactly() {
    let got = exact(|| {
        let m = Mutex::new(());
        let cv = Condvar::new();
        let cond = took(|| {
            let (_g, r) = cv.wait_timeout(m.lock().unwrap(), 12 * MS).unwrap();
            assert!(r.timed_out());
        });
        let sem = Semaphore::new(0);
        let sem_t = took(|| assert!(sem.acquire_timeout(7 * MS).unwrap().is_none()));
        let latch = CountDownLatch::new(1);
        let latch_t = took(|| assert!(!latch.wait_timeout(9 * MS).unwrap()));
        (cond, sem_t, latch_t)
    });
    assert_eq!(got, (12 * MS, 7 * MS, 9 * MS));
}

/// An interrupt ends a two-minute sleep at the moment it is sent.
#[test]
fn an_interrupt_ends_a_long_sleep_when_sent() {
    let got = exact(|| {
        let t0 = now();
        let sleeper = weft::spawn(move || {
            let r = weft::sleep(Duration::from_secs(120)).map_err(|e| e.kind());
            (r, now() - t0)
        });
        weft::sleep(5 * MS).unwrap();
        sleeper.thread().interrupt();
        sleeper.join().unwrap()
    });
    assert_eq!(got, (Err(std::io::ErrorKind::Interrupted), 5 * MS));
}

/// A timed park that an unpark ends early leaves a stale timer behind; it
/// must neither wake the thread later nor move time on its own.
#[test]
fn an_unpark_before_the_deadline_cancels_the_timer() {
    let got = exact(|| {
        let woke = Arc::new(AtomicU64::new(0));
        let w = woke.clone();
        let t0 = now();
        let parker = weft::spawn(move || {
            weft::park_timeout(Duration::from_secs(60));
            w.fetch_add(1, Ordering::SeqCst);
            let first = now() - t0;
            // Parked again: only the next unpark, not the stale 60 s
            // timer, may wake it.
            weft::park_timeout(Duration::from_secs(600));
            (first, now() - t0)
        });
        weft::sleep(MS).unwrap();
        parker.thread().unpark();
        weft::sleep(2 * MS).unwrap();
        parker.thread().unpark();
        parker.join().unwrap()
    });
    assert_eq!(got, (MS, 3 * MS));
}
