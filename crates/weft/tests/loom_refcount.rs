//! Loom model of a thread record's reference counts (`weft::refcount`,
//! `Arc`'s protocol in 32 bits): whatever the interleaving, the value is
//! dropped exactly once, after every use through a strong reference, and
//! the memory is freed exactly once, after every use of the counts.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p weft --release --test loom_refcount`
//!
//! The "record" is a `Counts` and a value cell in a leaked box; a
//! reference is the pointer plus what it may do. Loom's `UnsafeCell`
//! reports any unsynchronised access (a use racing the drop), and the
//! flags catch a double drop, a double free, or a use after either.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use weft::refcount::Counts as Model;

/// The counts under test, on loom's atomics.
type Counts = Model<AtomicU32>;

/// What a slot holds in the model.
struct Record {
    counts: Counts,
    /// The value: read by every strong user, written by the drop (as
    /// `drop_in_place` writes it).
    value: UnsafeCell<u32>,
    dropped: AtomicBool,
    freed: AtomicBool,
}

/// A raw pointer that may cross loom threads (the model's references).
#[derive(Clone, Copy)]
struct P(*const Record);
// SAFETY: the model's protocol is what is checked; the pointee is shared
// through its atomics and loom's cells.
unsafe impl Send for P {}

impl P {
    fn get(self) -> &'static Record {
        // SAFETY: the model never frees the box (it only marks `freed`), so
        // the pointer stays valid; what the flags allow is the check.
        unsafe { &*self.0 }
    }
}

/// A strong owner's use of the value, then its release.
fn use_and_release_strong(p: P) {
    let r = p.get();
    assert!(!r.dropped.load(Ordering::Relaxed), "used after the drop");
    // SAFETY: a read through loom's cell, which checks its causality.
    r.value
        .with(|v| unsafe { assert_eq!(*v, 0, "read a dropped value") });
    release_strong(p);
}

fn release_strong(p: P) {
    let r = p.get();
    if r.counts.dec_strong() {
        // The drop writes the value: unsynchronised with a use, loom says so.
        // SAFETY: a write through loom's cell, which checks its causality.
        r.value.with_mut(|v| unsafe { *v = u32::MAX });
        assert!(!r.dropped.swap(true, Ordering::Relaxed), "dropped twice");
        release_weak(p);
    }
}

fn release_weak(p: P) {
    let r = p.get();
    if r.counts.dec_weak() {
        assert!(
            r.dropped.load(Ordering::Relaxed),
            "memory freed before the value was dropped"
        );
        assert!(!r.freed.swap(true, Ordering::Relaxed), "freed twice");
    }
}

fn new_record() -> P {
    P(Box::into_raw(Box::new(Record {
        counts: Counts::new(),
        value: UnsafeCell::new(0),
        dropped: AtomicBool::new(false),
        freed: AtomicBool::new(false),
    })))
}

/// Two strong owners release on two threads: one drop, one free.
#[test]
fn two_strong_releases_drop_once() {
    loom::model(|| {
        let p = new_record();
        p.get().counts.inc_strong();
        let t = loom::thread::spawn(move || use_and_release_strong(p));
        use_and_release_strong(p);
        t.join().unwrap();
        assert!(p.get().dropped.load(Ordering::Relaxed));
        assert!(p.get().freed.load(Ordering::Relaxed));
    });
}

/// A weak owner upgrades while the last strong one releases: the upgrade
/// either fails (the value is gone or going) or yields a reference under
/// which the value is still alive; the memory outlives both.
#[test]
fn upgrade_races_the_last_release() {
    loom::model(|| {
        let p = new_record();
        p.get().counts.inc_weak();
        let t = loom::thread::spawn(move || {
            if p.get().counts.upgrade() {
                use_and_release_strong(p);
            }
            release_weak(p);
        });
        use_and_release_strong(p);
        t.join().unwrap();
        assert!(p.get().dropped.load(Ordering::Relaxed));
        assert!(p.get().freed.load(Ordering::Relaxed));
    });
}

/// A strong owner makes a weak one and hands it over, then both let go
/// on their own threads (the timer's path: `downgrade`, fire later).
#[test]
fn downgrade_then_release_on_both_sides() {
    loom::model(|| {
        let p = new_record();
        p.get().counts.inc_weak();
        p.get().counts.inc_strong();
        let t = loom::thread::spawn(move || {
            use_and_release_strong(p);
            release_weak(p);
        });
        use_and_release_strong(p);
        t.join().unwrap();
        assert!(p.get().freed.load(Ordering::Relaxed));
    });
}
