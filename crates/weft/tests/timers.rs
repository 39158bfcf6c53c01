//! Timed parks that end early do not leave their timer entries piling up.
//! (Its own test binary: it reads the process-wide count of pending timer
//! entries.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use weft::Runtime;

/// Two threads hand a turn back and forth, each waiting with a 60 s
/// timeout that never expires: every wait pushes a timer entry that goes
/// stale as soon as the partner unparks it. Without compaction all 40,000
/// entries would stay until their deadline (a minute later).
#[test]
fn early_ended_timed_parks_are_compacted() {
    const ROUNDS: u32 = 20_000;
    let rt = Runtime::builder().parallelism(1).build().unwrap();
    let turn = Arc::new(AtomicU8::new(0));
    let t2 = turn.clone();
    let inner = rt.clone();
    let pending = rt
        .spawn(move || {
            let ping = weft::current();
            let pong = inner.spawn(move || {
                for _ in 0..ROUNDS {
                    while t2.load(Ordering::Acquire) != 1 {
                        weft::park_timeout(Duration::from_secs(60));
                    }
                    t2.store(0, Ordering::Release);
                    ping.unpark();
                }
            });
            for _ in 0..ROUNDS {
                turn.store(1, Ordering::Release);
                pong.thread().unpark();
                while turn.load(Ordering::Acquire) != 0 {
                    weft::park_timeout(Duration::from_secs(60));
                }
            }
            pong.join().unwrap();
            weft::metrics::snapshot().timers_pending
        })
        .join()
        .unwrap();
    assert!(
        pending < 4_096,
        "{pending} timer entries pending after {} early-ended timed parks",
        2 * ROUNDS
    );
}
