//! Loom model of a sleeping carrier's doorbell (`weft::doorbell`): a kick
//! must reach a carrier that sleeps in the readiness source.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p weft --release --test loom_doorbell`
//!
//! The carrier reads the kick count, then (finding no work) enters the
//! source; a kicker rings concurrently, once or twice. A carrier that
//! blocks there waits until a ring says `Ring::Source` (the eventfd is a
//! counter, so it wakes it whenever it was written); if the kicker
//! finished and every ring said `Ring::Futex`, the kick was lost.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use weft::doorbell::{Doorbell, Ring};

fn model(kicks: usize) {
    loom::model(move || {
        let bell = Arc::new(Doorbell::new());
        let source_rings = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let seen = bell.seen();
        let kicker = {
            let (bell, source_rings, done) = (bell.clone(), source_rings.clone(), done.clone());
            loom::thread::spawn(move || {
                for _ in 0..kicks {
                    if bell.ring() == Ring::Source {
                        source_rings.fetch_add(1, Ordering::SeqCst);
                    }
                }
                done.store(true, Ordering::SeqCst);
            })
        };
        if bell.enter_source(seen) {
            // Blocked in the source: only an eventfd write wakes it.
            while source_rings.load(Ordering::SeqCst) == 0 {
                assert!(
                    !done.load(Ordering::SeqCst) || source_rings.load(Ordering::SeqCst) > 0,
                    "the carrier sleeps in the source and every kick woke the futex"
                );
                loom::thread::yield_now();
            }
        } else {
            // It did not block: it saw the kick in the count.
            assert_ne!(bell.seen(), seen);
        }
        bell.leave_source();
        kicker.join().unwrap();
    });
}

#[test]
fn one_kick_reaches_a_carrier_sleeping_in_the_source() {
    model(1);
}

#[test]
fn two_kicks_reach_a_carrier_sleeping_in_the_source() {
    model(2);
}
