//! A spawned thread takes its stack when it first runs, not when it is
//! spawned: a burst of short threads reuses a few resident stacks instead of
//! needing one fresh stack each. (Its own test binary: it reads the
//! process-wide count of stacks in use.)

use weft::Runtime;

#[test]
fn queued_threads_hold_no_stack() {
    let rt = Runtime::builder().parallelism(1).build().unwrap();
    let inner = rt.clone();
    let (live_after_spawn, sum) = rt
        .spawn(move || {
            // One carrier, and this thread does not yield: none of the
            // spawned threads can run before the loop ends (the monitor may
            // lend a spare carrier after the stall threshold; those threads
            // finish at once and give their stacks back).
            let hs: Vec<_> = (0..5_000u64).map(|i| inner.spawn(move || i)).collect();
            let live = weft::metrics::snapshot().stacks_live;
            let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
            (live, sum)
        })
        .join()
        .unwrap();
    assert_eq!(sum, 5_000 * 4_999 / 2);
    // The spawner's own stack, plus at most a few threads mounted on spare
    // carriers at that instant — not 5,000.
    assert!(
        live_after_spawn <= 8,
        "{live_after_spawn} stacks in use right after spawning 5,000 threads"
    );
}
