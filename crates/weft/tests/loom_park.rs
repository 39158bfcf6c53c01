//! Loom model checks of the park/unpark state machine (`weft::park`).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p weft --release --test loom_park`
//!
//! Each model races a parking thread (which runs `begin_park` and then, in
//! the role of its carrier, `publish_parked`) against unparkers, and checks
//! that the parked thread is resumed exactly once: by consuming a permit, by
//! its carrier rescheduling it, or by exactly one unparker scheduling it.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use weft::park::{AfterSwitch, BeginPark, ParkState, Unpark};

/// One park by the owner. Returns true if the owner must wait for an
/// unparker to schedule it (it is PARKED).
fn park_once(s: &ParkState, resumed: &AtomicUsize) -> bool {
    match s.begin_park() {
        BeginPark::Consumed => {
            resumed.fetch_add(1, Ordering::SeqCst);
            false
        }
        BeginPark::Suspend => match s.publish_parked() {
            AfterSwitch::Reschedule => {
                resumed.fetch_add(1, Ordering::SeqCst);
                false
            }
            AfterSwitch::Parked => true,
        },
    }
}

fn unpark(s: &ParkState, resumed: &AtomicUsize) {
    if s.unpark() == Unpark::Schedule {
        resumed.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn one_park_one_unpark_resumes_exactly_once() {
    loom::model(|| {
        let s = Arc::new(ParkState::new());
        let resumed = Arc::new(AtomicUsize::new(0));
        let (s2, r2) = (s.clone(), resumed.clone());
        let t = loom::thread::spawn(move || unpark(&s2, &r2));
        park_once(&s, &resumed);
        t.join().unwrap();
        // The single unpark either preceded the park (permit), slipped into
        // the switch (reschedule) or found it parked (schedule): exactly once.
        assert_eq!(resumed.load(Ordering::SeqCst), 1);
        assert!(!s.is_parked());
    });
}

#[test]
fn two_unparkers_resume_at_most_once_and_never_lose() {
    loom::model(|| {
        let s = Arc::new(ParkState::new());
        let resumed = Arc::new(AtomicUsize::new(0));
        let mut ts = Vec::new();
        for _ in 0..2 {
            let (s2, r2) = (s.clone(), resumed.clone());
            ts.push(loom::thread::spawn(move || unpark(&s2, &r2)));
        }
        park_once(&s, &resumed);
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(resumed.load(Ordering::SeqCst), 1);
        assert!(!s.is_parked());
    });
}

#[test]
fn permit_is_not_lost_across_two_parks() {
    loom::model(|| {
        // Owner parks twice; an unparker unparks twice, each time after
        // observing the owner's progress. Both parks must end.
        let s = Arc::new(ParkState::new());
        let resumed = Arc::new(AtomicUsize::new(0));
        let (s2, r2) = (s.clone(), resumed.clone());
        let t = loom::thread::spawn(move || {
            unpark(&s2, &r2);
            while r2.load(Ordering::SeqCst) == 0 {
                loom::thread::yield_now();
            }
            unpark(&s2, &r2);
        });
        let mut waits = 0;
        for round in 1..=2 {
            if park_once(&s, &resumed) {
                waits += 1;
                while resumed.load(Ordering::SeqCst) < round {
                    loom::thread::yield_now();
                }
            }
        }
        t.join().unwrap();
        assert_eq!(resumed.load(Ordering::SeqCst), 2);
        assert!(waits <= 2);
    });
}

/// A stale permit must not hide a newer unpark's data: the parker that
/// consumes a permit must see everything its latest unparker wrote before
/// unparking (regression: `unpark` used to return on a plain load of
/// NOTIFIED, so the parker could consume an older permit, read stale data
/// and park for good).
#[test]
fn stale_permit_does_not_hide_new_data() {
    loom::model(|| {
        let s = Arc::new(ParkState::new());
        let data = Arc::new(AtomicUsize::new(0));
        let resumed = Arc::new(AtomicUsize::new(0));
        // A permit left over from an earlier unpark.
        assert_eq!(s.unpark(), Unpark::Noted);
        let (s2, d2, r2) = (s.clone(), data.clone(), resumed.clone());
        let t = loom::thread::spawn(move || {
            d2.store(1, Ordering::Relaxed);
            unpark(&s2, &r2);
        });
        loop {
            if data.load(Ordering::Relaxed) == 1 {
                break;
            }
            let before = resumed.load(Ordering::SeqCst);
            if park_once(&s, &resumed) {
                // PARKED: only the unparker can bring us back.
                while resumed.load(Ordering::SeqCst) == before {
                    loom::thread::yield_now();
                }
            }
        }
        t.join().unwrap();
    });
}

/// Two unparkers, each publishing its own data: the parker must end up
/// seeing both (regression: consuming a permit with a plain store could
/// swallow a permit re-published in between without synchronising with
/// its unparker).
#[test]
fn two_unparkers_data_is_never_lost() {
    loom::model(|| {
        let s = Arc::new(ParkState::new());
        let data = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let resumed = Arc::new(AtomicUsize::new(0));
        let mut ts = Vec::new();
        for i in 0..2 {
            let (s2, d2, r2) = (s.clone(), data.clone(), resumed.clone());
            ts.push(loom::thread::spawn(move || {
                d2[i].store(1, Ordering::Relaxed);
                unpark(&s2, &r2);
            }));
        }
        loop {
            if data[0].load(Ordering::Relaxed) == 1 && data[1].load(Ordering::Relaxed) == 1 {
                break;
            }
            let before = resumed.load(Ordering::SeqCst);
            if park_once(&s, &resumed) {
                while resumed.load(Ordering::SeqCst) == before {
                    loom::thread::yield_now();
                }
            }
        }
        for t in ts {
            t.join().unwrap();
        }
    });
}
