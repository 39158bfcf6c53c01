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
//!
//! The futex models add "one wake per sleep" (a ring that finds the word
//! already moved past the carrier's published count, and that move's wake
//! made, does nothing): two
//! kickers each queue a thread and ring; the carrier looks twice if it
//! must (a second look publishes a new count, which a kicker may read
//! stale). A futex is a lock, a queued flag and a woken flag, as the
//! kernel's hash bucket: the wait checks the word under the lock.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
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
                    bell.ring(|how| {
                        if how == Ring::Source {
                            source_rings.fetch_add(1, Ordering::SeqCst);
                        }
                    });
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

/// The kernel's futex for one waiter: queued and woken, under a lock.
#[derive(Default)]
struct Futex {
    state: Mutex<(bool, bool)>,
}

impl Futex {
    /// Queues the waiter if the word still holds `seen` (under the lock).
    fn wait(&self, bell: &Doorbell, seen: u32) -> bool {
        let mut s = self.state.lock().unwrap();
        if bell.word_now() != seen {
            return false;
        }
        *s = (true, false);
        true
    }

    fn wake(&self) {
        let mut s = self.state.lock().unwrap();
        if s.0 {
            *s = (false, true);
        }
    }

    fn woken(&self) -> bool {
        self.state.lock().unwrap().1
    }
}

#[test]
fn one_wake_per_sleep_loses_no_kick() {
    loom::model(|| {
        let bell = Arc::new(Doorbell::new());
        let futex = Arc::new(Futex::default());
        let queued = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let kickers: Vec<_> = (0..2)
            .map(|_| {
                let (bell, futex, queued, done) =
                    (bell.clone(), futex.clone(), queued.clone(), done.clone());
                loom::thread::spawn(move || {
                    queued.fetch_add(1, Ordering::SeqCst);
                    bell.ring(|how| {
                        if how == Ring::Futex {
                            futex.wake();
                        }
                    });
                    done.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        let mut taken = 0;
        while taken < 2 {
            let seen = bell.seen();
            let now = queued.load(Ordering::SeqCst);
            if now > taken {
                taken = now;
                continue;
            }
            if futex.wait(&bell, seen) {
                // Asleep: only a `Ring::Futex` wakes it.
                while !futex.woken() {
                    assert!(
                        done.load(Ordering::SeqCst) < 2 || futex.woken(),
                        "the carrier sleeps and no kick woke it"
                    );
                    loom::thread::yield_now();
                }
            }
        }
        for k in kickers {
            k.join().unwrap();
        }
    });
}
