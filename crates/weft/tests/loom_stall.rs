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

/// The handoff mark (`weft::stall::Handoff`): the monitor marks a hold
/// it saw while the carrier's thread leaves it. Whatever the interleaving,
/// the mark does not outlive the monitor's next look at the carrier that
/// no thread holds any more — else the carrier's threads would keep moving
/// away from a carrier that serves. (Without that look loom finds a
/// leftover mark: it models the SeqCst pair as acquire/release.)
#[test]
fn a_held_mark_is_never_left_on_an_empty_carrier() {
    use loom::sync::atomic::{AtomicBool, Ordering};
    use weft::stall::Handoff;
    loom::model(|| {
        let mark = Arc::new(Handoff::new());
        let mounted = Arc::new(AtomicBool::new(true));
        let monitor = {
            let (mark, mounted) = (mark.clone(), mounted.clone());
            loom::thread::spawn(move || mark.mark_held(|| mounted.load(Ordering::SeqCst)))
        };
        let carrier = {
            let (mark, mounted) = (mark.clone(), mounted.clone());
            loom::thread::spawn(move || {
                mounted.store(false, Ordering::SeqCst);
                mark.hold_ended();
            })
        };
        monitor.join().unwrap();
        carrier.join().unwrap();
        // The monitor's next look: the carrier is empty.
        if !mounted.load(Ordering::SeqCst) {
            mark.heal();
        }
        assert!(!mark.is_held(), "held mark left on an empty carrier");
    });
}

/// The demoted mark (`sched/demote.rs`): the monitor raises it during a
/// hold it marked, and lowers the carrier's OS thread only if the hold is
/// still on after the mark is up; the carrier ends the hold. Whatever the
/// interleaving, a carrier the monitor lowered leaves: it saw the mark when
/// the hold ended, or the mark is still up for its next look (the carrier
/// checks it before it sleeps); and the carrier lowers neither the mark
/// nor its own off-duty mark beside it.
#[test]
fn a_lowered_carrier_always_learns_it() {
    use loom::sync::atomic::{AtomicBool, Ordering};
    use weft::stall::Handoff;
    loom::model(|| {
        let mark = Arc::new(Handoff::new());
        let mounted = Arc::new(AtomicBool::new(true));
        let monitor = {
            let (mark, mounted) = (mark.clone(), mounted.clone());
            loom::thread::spawn(move || {
                mark.mark_held(|| mounted.load(Ordering::SeqCst))
                    && mark.mark_demoted(|| mounted.load(Ordering::SeqCst))
            })
        };
        let carrier = {
            let (mark, mounted) = (mark.clone(), mounted.clone());
            loom::thread::spawn(move || {
                mounted.store(false, Ordering::SeqCst);
                mark.hold_ended()
            })
        };
        let lowered = monitor.join().unwrap();
        let saw = carrier.join().unwrap();
        // The carrier's next look before it sleeps.
        let leaves = saw || mark.is_demoted();
        assert!(!lowered || leaves, "a lowered carrier kept serving");
        if lowered {
            mark.set_off_duty(true);
            assert!(mark.is_demoted() && mark.handing_off());
        }
    });
}

/// The carrier's own blocked mark (`sched/blocked.rs`) and the monitor's
/// held mark share one word: raising or lowering either never changes the
/// other, whatever the interleaving, and while the carrier is in its
/// blocking section a waker sees it handing off.
#[test]
fn the_blocked_mark_and_the_held_mark_do_not_clobber_each_other() {
    use weft::stall::Handoff;
    loom::model(|| {
        let mark = Arc::new(Handoff::new());
        let monitor = {
            let mark = mark.clone();
            loom::thread::spawn(move || {
                assert!(mark.mark_held(|| true));
                assert!(mark.is_held(), "the held mark was lowered by the carrier");
                mark.heal();
            })
        };
        let carrier = {
            let mark = mark.clone();
            loom::thread::spawn(move || {
                mark.set_blocked(true);
                assert!(
                    mark.is_blocked(),
                    "the blocked mark was lowered by the monitor"
                );
                assert!(mark.handing_off());
                mark.set_blocked(false);
            })
        };
        monitor.join().unwrap();
        carrier.join().unwrap();
        assert!(!mark.is_blocked() && !mark.is_held() && !mark.handing_off());
    });
}
