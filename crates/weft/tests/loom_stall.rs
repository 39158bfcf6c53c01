//! Loom model of the blocked-carrier count and the monitor's stall marks
//! (`weft::stall`).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p weft --release --test loom_stall`
//!
//! The monitor marks a carrier stalled while the carrier's thread leaves it
//! (the carrier clears the mark) and the monitor, seeing it moved on,
//! clears it too; a third thread reads the count the way `compensate`
//! does. The count must never read above the one carrier there is — a
//! wrap below zero reads as `usize::MAX` — and must end at zero.
#![cfg(loom)]

use loom::sync::Arc;
use weft::stall::{Blocked, StallFlag};

#[test]
fn the_count_never_wraps_and_ends_at_zero() {
    loom::model(|| {
        let blocked = Arc::new(Blocked::new());
        let flag = Arc::new(StallFlag::new());
        let monitor = {
            let (blocked, flag) = (blocked.clone(), flag.clone());
            loom::thread::spawn(move || {
                if blocked.mark(&flag) {
                    // It moved on meanwhile: undo.
                    blocked.clear(&flag);
                }
            })
        };
        let carrier = {
            let (blocked, flag) = (blocked.clone(), flag.clone());
            loom::thread::spawn(move || {
                blocked.clear(&flag);
            })
        };
        let reader = {
            let blocked = blocked.clone();
            loom::thread::spawn(move || {
                let n = blocked.get();
                assert!(n <= 1, "blocked count read {n}");
            })
        };
        monitor.join().unwrap();
        carrier.join().unwrap();
        reader.join().unwrap();
        assert_eq!(blocked.get(), 0);
        assert!(!flag.is_set());
    });
}

#[test]
fn a_pinned_wait_and_a_stall_mark_count_two_then_zero() {
    loom::model(|| {
        let blocked = Arc::new(Blocked::new());
        let flag = Arc::new(StallFlag::new());
        blocked.enter();
        let monitor = {
            let (blocked, flag) = (blocked.clone(), flag.clone());
            loom::thread::spawn(move || {
                blocked.mark(&flag);
            })
        };
        let carrier = {
            let (blocked, flag) = (blocked.clone(), flag.clone());
            loom::thread::spawn(move || {
                let n = blocked.get();
                assert!((1..=2).contains(&n), "read {n}");
                blocked.clear(&flag);
            })
        };
        monitor.join().unwrap();
        carrier.join().unwrap();
        blocked.clear(&flag);
        blocked.exit();
        assert_eq!(blocked.get(), 0);
    });
}
