//! Stacks of parked threads read in place (x86-64 Linux, `dump/parked.rs`):
//! without running the thread, so a thread whose carrier another thread
//! holds still gets its stack, and a dump leaves every thread as it was.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use weft::{Runtime, State};

#[inline(never)]
fn in_place_test_sleeper() {
    let _ = std::hint::black_box(weft::sleep(Duration::from_secs(600)));
}

/// Holds its carrier with `std::thread::sleep` (not a weft call).
#[inline(never)]
fn in_place_test_staller(release: &AtomicBool) {
    while !release.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "never {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A parked thread bound to a carrier that another thread holds cannot run
/// to record its own stack; read in place, it is listed with it.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[test]
fn a_thread_behind_a_stalled_carrier_is_listed_with_its_stack() {
    let rt = Runtime::builder()
        .parallelism(1)
        .stall_threshold(Duration::from_millis(20))
        .build()
        .unwrap();
    let sleeper = rt.spawn(in_place_test_sleeper);
    wait_for("parked", || sleeper.thread().state() == State::Parked);
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let staller = rt.spawn(move || in_place_test_staller(&r));
    wait_for("running", || staller.thread().state() == State::Running);
    let id = sleeper.thread().id();
    let mut stalled_seen = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    // The monitor marks the carrier held past the threshold; until then the
    // sleeper is not yet "behind a stalled carrier".
    while !stalled_seen {
        assert!(
            Instant::now() < deadline,
            "the carrier never counted as held"
        );
        let dump = weft::dump();
        let t = dump.thread(id).expect("listed");
        assert_eq!(t.state, State::Parked);
        assert!(
            t.stack
                .iter()
                .any(|f| f.function.contains("in_place_test_sleeper")),
            "no stack for the sleeper: {t:?}"
        );
        stalled_seen = t.home_stalled;
        std::thread::sleep(Duration::from_millis(10));
    }
    release.store(true, Ordering::SeqCst);
    staller.join().unwrap();
    sleeper.thread().interrupt();
    sleeper.join().unwrap();
}

/// Dumps taken while threads park and wake leave each thread as it was:
/// every wake-up arrives (none lost while a dump held a parked thread) and
/// no thread runs twice for one. Each thread answers ROUNDS pings, parking
/// for each, while another OS thread dumps in a loop.
#[test]
fn dumps_while_threads_park_and_wake_lose_no_wake_up() {
    const THREADS: usize = 64;
    const ROUNDS: usize = 200;
    let rt = Runtime::builder().parallelism(2).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let dumper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut dumps = 0;
            while !stop.load(Ordering::SeqCst) {
                std::hint::black_box(weft::dump());
                dumps += 1;
            }
            dumps
        })
    };
    let (pong_tx, pong_rx) = weft::channel::unbounded::<usize>();
    let (txs, hs): (Vec<_>, Vec<_>) = (0..THREADS)
        .map(|_| {
            let (tx, rx) = weft::channel::unbounded::<usize>();
            let pong = pong_tx.clone();
            let h = rt.spawn(move || {
                for _ in 0..ROUNDS {
                    pong.send(rx.recv().unwrap()).unwrap();
                }
            });
            (tx, h)
        })
        .unzip();
    let mut got = 0usize;
    for round in 0..ROUNDS {
        for tx in &txs {
            tx.send(round).unwrap();
        }
        for _ in 0..THREADS {
            // A lost wake-up leaves a thread parked for ever: bounded here.
            let v = pong_rx
                .recv_timeout(Duration::from_secs(60))
                .expect("every ping answered");
            assert_eq!(v, round, "an answer from another round");
            got += 1;
        }
    }
    assert_eq!(got, THREADS * ROUNDS);
    for h in hs {
        h.join().unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    assert!(dumper.join().unwrap() > 0);
}
