//! The tests every allocator's test binary runs (`alloc_*.rs`: each sets
//! its own global allocator, then `allocator_tests!()`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use weft_native_tests::STUCK;
use weft_native_tests::churn::{Threads, child_main, rss_in_child};

/// Short threads: 200,000 virtual threads on the strict runtime (2
/// carriers, no spares) leave the process within 2x the RSS of the same
/// program on std threads (each in a process of its own).
pub fn short_threads_keep_no_memory(child_test: &str) {
    const N: usize = 200_000;
    let std = rss_in_child(child_test, Threads::Std, N);
    let weft = rss_in_child(child_test, Threads::Weft, N);
    eprintln!(
        "RSS after {N} threads: std {} KiB, weft {} KiB",
        std >> 10,
        weft >> 10
    );
    assert!(
        weft <= 2 * std,
        "RSS after {N} short virtual threads {} KiB, on std threads {} KiB",
        weft >> 10,
        std >> 10
    );
}

/// In the child process only: churns threads and prints its RSS.
pub fn churn_child() {
    child_main();
}

/// 1,000 long-lived virtual threads each build, check and free heap
/// values across parks (yields and sleeps) while hogs hold a carrier past
/// the stall threshold so that threads move to the other (4 hogs, one at
/// a time spinning until a thread has moved); values cross
/// threads too (each thread frees its neighbour's). Every value holds
/// what its maker wrote.
pub fn long_lived_threads_allocate_across_parks_and_moves() {
    const THREADS: usize = 1_000;
    const ROUNDS: usize = 20;
    // Both carriers on duty throughout, so that threads move by handoff
    // off a held carrier, as the test says (a resting carrier's threads
    // move too, and put every thread and hog on the other).
    let rt = weft::Runtime::builder()
        .parallelism(2)
        .max_pool_size(2)
        .stall_threshold(Duration::from_millis(2))
        .rest_carriers(false)
        .build()
        .unwrap();
    let moved_before = rt.threads_moved();
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS)
        .map(|_| weft::channel::unbounded::<Vec<u64>>())
        .unzip();
    let mut rxs = rxs.into_iter().map(Some).collect::<Vec<_>>();
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let tx = txs[(i + 1) % THREADS].clone();
            let rx = rxs[i].take().unwrap();
            let rt2 = rt.clone();
            rt.spawn(move || {
                let mut kept: Vec<Vec<u64>> = Vec::new();
                for r in 0..ROUNDS {
                    if r == ROUNDS / 2 && i % 250 == 0 {
                        hog(rt2.clone(), moved_before);
                    }
                    let tag = ((i as u64) << 32) | r as u64;
                    let v: Vec<u64> = (0..(16 + (i + r) % 200) as u64).map(|k| tag ^ k).collect();
                    if r % 2 == 0 {
                        weft::yield_now();
                    } else {
                        weft::sleep(Duration::from_micros(200)).unwrap();
                    }
                    assert!(v.iter().enumerate().all(|(k, &x)| x == tag ^ k as u64));
                    // The neighbour frees this one; we free theirs.
                    tx.send(v).unwrap();
                    let theirs = rx.recv().unwrap();
                    let their_tag = theirs[0];
                    assert!(
                        theirs
                            .iter()
                            .enumerate()
                            .all(|(k, &x)| x == their_tag ^ k as u64),
                        "a value changed while its thread parked or moved"
                    );
                    kept.push(theirs);
                    if kept.len() > 4 {
                        kept.remove(0);
                    }
                }
                kept.len()
            })
        })
        .collect();
    drop(txs);
    for h in handles {
        assert_eq!(h.join().unwrap(), 4);
    }
    assert!(rt.threads_moved() > moved_before, "no thread moved");
}

/// Spawns a thread that starts on the caller's carrier (a new thread goes
/// to its spawner's queue) and spins there until some thread has moved
/// off a held carrier: the monitor hands off the threads queued behind it.
/// One hog spins at a time: two could hold both carriers, and with no
/// spare (`max_pool_size` 2) no moved thread could run, so each spun until
/// `STUCK` (seen in CI, resting on or off).
fn hog(rt: weft::Runtime, moved_before: usize) {
    static SPINNING: AtomicBool = AtomicBool::new(false);
    weft::spawn(move || {
        if SPINNING.swap(true, Ordering::SeqCst) {
            return;
        }
        let t0 = Instant::now();
        while rt.threads_moved() == moved_before {
            assert!(t0.elapsed() < STUCK, "no thread moved off a held carrier");
            std::hint::spin_loop();
        }
        SPINNING.store(false, Ordering::SeqCst);
    });
}

/// Defines the tests in the calling test binary.
#[macro_export]
macro_rules! allocator_tests {
    () => {
        #[test]
        fn churn_child() {
            alloc_common::churn_child();
        }

        #[test]
        fn short_threads_keep_no_memory() {
            if std::env::var_os("WEFT_CHURN_CHILD").is_some() {
                return;
            }
            alloc_common::short_threads_keep_no_memory("churn_child");
        }

        #[test]
        fn long_lived_threads_allocate_across_parks_and_moves() {
            if std::env::var_os("WEFT_CHURN_CHILD").is_some() {
                return;
            }
            alloc_common::long_lived_threads_allocate_across_parks_and_moves();
        }
    };
}
pub use allocator_tests;
