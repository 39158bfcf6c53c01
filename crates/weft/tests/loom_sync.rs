//! Loom model checks of the wait-queue protocol shared by `weft::sync` and
//! `weft::channel`.
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p weft --release --test loom_sync
//! ```
//!
//! Under `--cfg loom` the primitives are compiled against loom's atomics,
//! mutex and park/unpark (see `src/sync/facade.rs`), so these models check
//! the real lock-word state machines, waiter hand-off and wake-up code.
//! Loom has no clock: every timed wait behaves as if its deadline expired
//! right after the waiter queued, so each one races its own cancellation
//! against the notifier — the window where a permit, a lock, a message or a
//! notification handed to a waiter must not be lost. Loom reports a lost
//! wake-up as a deadlock, and a missing happens-before edge on the data
//! protected by a lock as a causality violation (the models keep that data
//! in `loom::cell::UnsafeCell`).
//!
//! The mutex's starvation policy is made deterministic under loom: a woken
//! waiter that loses the race once asks for direct hand-off, so the models
//! also cover starvation mode.
#![cfg(loom)]

use std::time::Duration;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use weft::channel::{self, RecvError, RecvTimeoutError, SendError};
use weft::sync::{__loom, Condvar, CountDownLatch, LockError, Mutex, RwLock, Semaphore};

/// Explores all interleavings up to `preemptions` forced preemptions.
fn check(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.check(f);
}

/// Increments a cell that the caller claims to access exclusively (it holds
/// a lock, or received the cell through a hand-off). Loom reports a
/// causality violation if the claim is wrong.
fn bump(cell: &UnsafeCell<usize>) {
    // SAFETY: exclusivity is what the model checks; loom tracks the access
    // and fails the model on a data race instead of letting it happen.
    cell.with_mut(|p| unsafe { *p += 1 });
}

/// Reads a cell that the caller claims nobody writes concurrently.
fn get<T: Copy>(cell: &UnsafeCell<T>) -> T {
    // SAFETY: as in `bump`: loom checks the claim.
    cell.with(|p| unsafe { *p })
}

fn incr(m: &Mutex<UnsafeCell<usize>>) {
    bump(&m.lock().unwrap());
}

fn read(m: &Mutex<UnsafeCell<usize>>) -> usize {
    get(&m.lock().unwrap())
}

/// Mutual exclusion, happens-before between critical sections, and no lost
/// wake-up between the unlock slow path and a queueing locker.
#[test]
fn mutex_two_lockers() {
    check(3, || {
        let m = Arc::new(Mutex::new(UnsafeCell::new(0)));
        let t = {
            let m = m.clone();
            thread::spawn(move || incr(&m))
        };
        incr(&m);
        t.join().unwrap();
        assert_eq!(read(&m), 2);
    });
}

/// Three contenders, one of which locks twice: covers requeue-at-front of a
/// woken waiter that lost, the WOKEN bit, starvation mode and direct
/// hand-off.
#[test]
fn mutex_three_lockers_handoff() {
    check(2, || {
        let m = Arc::new(Mutex::new(UnsafeCell::new(0)));
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let m = m.clone();
                thread::spawn(move || incr(&m))
            })
            .collect();
        incr(&m);
        incr(&m);
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(read(&m), 4);
    });
}

/// `lock_interruptibly` racing an unlock and an interrupt: it either gets
/// the lock (and the interrupt stays pending) or reports `Interrupted` (and
/// the flag is cleared); the mutex stays consistent either way.
#[test]
fn mutex_lock_interruptibly_vs_interrupt() {
    check(3, || {
        let m = Arc::new(Mutex::new(UnsafeCell::new(0)));
        let holder = {
            let m = m.clone();
            thread::spawn(move || incr(&m))
        };
        let me = __loom::current();
        let interrupter = thread::spawn(move || me.interrupt());

        let ok = match m.lock_interruptibly() {
            Ok(g) => {
                bump(&g);
                true
            }
            Err(LockError::Interrupted) => false,
            Err(LockError::Poisoned(_)) => unreachable!(),
        };
        interrupter.join().unwrap();
        holder.join().unwrap();
        // Exactly one interrupt was delivered; only `Interrupted` clears it.
        assert_eq!(__loom::is_interrupted(), ok);
        assert_eq!(read(&m), if ok { 2 } else { 1 });
    });
}

/// An interruptible waiter that is woken to compete (or handed the lock)
/// while being interrupted, next to an uninterruptible waiter: whichever
/// way it ends, the other waiter is never stranded (the WOKEN bit is
/// cleared or the lock passed on).
#[test]
fn mutex_interrupted_waiter_does_not_strand_others() {
    check(2, || {
        let m = Arc::new(Mutex::new(UnsafeCell::new(0)));
        let g = m.lock().unwrap();
        let other = {
            let m = m.clone();
            thread::spawn(move || incr(&m))
        };
        let (htx, hrx) = loom::sync::mpsc::channel();
        let victim = {
            let m = m.clone();
            thread::spawn(move || {
                htx.send(__loom::current()).unwrap();
                match m.lock_interruptibly() {
                    Ok(g) => bump(&g),
                    Err(LockError::Interrupted) => {}
                    Err(LockError::Poisoned(_)) => unreachable!(),
                }
            })
        };
        hrx.recv().unwrap().interrupt();
        drop(g);
        victim.join().unwrap();
        other.join().unwrap();
        let v = read(&m);
        assert!(v == 1 || v == 2);
    });
}

/// The classic condvar hand-shake: the notification is never lost.
#[test]
fn condvar_notify_one() {
    check(3, || {
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let t = {
            let pair = pair.clone();
            thread::spawn(move || {
                *pair.0.lock().unwrap() = true;
                pair.1.notify_one();
            })
        };
        let (m, cv) = &*pair;
        let mut g = m.lock().unwrap();
        while !*g {
            g = cv.wait(g).unwrap();
        }
        drop(g);
        t.join().unwrap();
    });
}

/// A timed wait racing `notify_one`: whatever wins, the waiter leaves the
/// queue (a later wait/notify pair still works) and nothing hangs.
#[test]
fn condvar_wait_timeout_vs_notify() {
    check(3, || {
        let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
        let t = {
            let pair = pair.clone();
            thread::spawn(move || {
                *pair.0.lock().unwrap() += 1;
                pair.1.notify_one();
                // Second round: wait for the main thread's signal.
                let mut g = pair.0.lock().unwrap();
                while *g < 2 {
                    g = pair.1.wait(g).unwrap();
                }
            })
        };
        let (m, cv) = &*pair;
        let g = m.lock().unwrap();
        let (mut g, _res) = cv.wait_timeout(g, Duration::from_secs(1)).unwrap();
        // The notification may or may not have been consumed; either way:
        if *g == 0 {
            g = cv.wait_while(g, |v| *v == 0).unwrap();
        }
        *g += 1;
        drop(g);
        cv.notify_all();
        t.join().unwrap();
    });
}

/// A permit granted to a waiter whose timeout fires at the same moment is
/// kept (and given back), never lost: the final blocking acquire must
/// succeed.
#[test]
fn semaphore_timeout_vs_release() {
    check(3, || {
        let sem = Arc::new(Semaphore::new(0));
        let t = {
            let sem = sem.clone();
            thread::spawn(move || {
                // Dropping a permit releases it.
                let _ = sem.acquire_timeout(Duration::from_secs(1)).unwrap();
            })
        };
        sem.release();
        t.join().unwrap();
        let p = sem.acquire().unwrap();
        drop(p);
        assert_eq!(sem.available_permits(), 1);
    });
}

/// Two waiters, the first of which gives up (timeout) while a permit is
/// released: the permit ends up with the second waiter or back in the
/// pool, never lost.
#[test]
fn semaphore_cancel_passes_on() {
    check(2, || {
        let sem = Arc::new(Semaphore::new(0));
        let quitter = {
            let sem = sem.clone();
            thread::spawn(move || {
                let _ = sem.acquire_timeout(Duration::from_secs(1)).unwrap();
            })
        };
        let stayer = {
            let sem = sem.clone();
            thread::spawn(move || sem.acquire().unwrap().forget())
        };
        sem.release();
        quitter.join().unwrap();
        stayer.join().unwrap();
        assert_eq!(sem.available_permits(), 0);
    });
}

/// Same with an interrupt instead of a timeout.
#[test]
fn semaphore_interrupt_vs_release() {
    check(3, || {
        let sem = Arc::new(Semaphore::new(0));
        let (htx, hrx) = loom::sync::mpsc::channel();
        let t = {
            let sem = sem.clone();
            thread::spawn(move || {
                htx.send(__loom::current()).unwrap();
                match sem.acquire() {
                    Ok(p) => drop(p),
                    Err(e) => {
                        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
                        assert!(!__loom::is_interrupted());
                    }
                }
            })
        };
        hrx.recv().unwrap().interrupt();
        sem.release();
        t.join().unwrap();
        let p = sem.acquire().unwrap();
        drop(p);
        assert_eq!(sem.available_permits(), 1);
    });
}

/// Rendezvous hand-off racing a receive timeout: the message is received
/// exactly once.
#[test]
fn channel_rendezvous_recv_timeout_vs_send() {
    check(3, || {
        let (tx, rx) = channel::bounded::<UnsafeCell<u32>>(0);
        let t = thread::spawn(move || {
            tx.send(UnsafeCell::new(7)).unwrap();
        });
        let v = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => rx.recv().unwrap(),
            Err(e) => panic!("{e:?}"),
        };
        // Reading the message checks the hand-off's happens-before edge.
        assert_eq!(get(&v), 7);
        t.join().unwrap();
    });
}

/// A parked sender interrupted while a receiver (whose own timeout races)
/// may take its message: the message ends up in exactly one place.
#[test]
fn channel_send_interrupt_vs_recv() {
    check(2, || {
        let (tx, rx) = channel::bounded::<u32>(0);
        let me = __loom::current();
        let interrupter = thread::spawn(move || me.interrupt());
        let receiver = thread::spawn(move || rx.recv_timeout(Duration::from_secs(1)).ok());
        let sent = match tx.send(5) {
            Ok(()) => true,
            Err(SendError::Interrupted(5)) => {
                assert!(!__loom::is_interrupted());
                false
            }
            // The receiver gave up and dropped its end.
            Err(SendError::Disconnected(5)) => false,
            Err(e) => panic!("{e:?}"),
        };
        interrupter.join().unwrap();
        let received = receiver.join().unwrap();
        assert_eq!(sent, received == Some(5));
    });
}

/// Buffered messages are drained before `Disconnected`, and a parked
/// receiver is woken by the last sender's drop.
#[test]
fn channel_disconnect_senders() {
    check(3, || {
        let (tx, rx) = channel::bounded::<u32>(1);
        let t = thread::spawn(move || {
            let mut got = Vec::new();
            loop {
                match rx.recv() {
                    Ok(v) => got.push(v),
                    Err(RecvError::Disconnected) => return got,
                    Err(e) => panic!("{e:?}"),
                }
            }
        });
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        drop(tx);
        assert_eq!(t.join().unwrap(), [1, 2]);
    });
}

/// The last receiver's drop wakes a parked sender with its message.
#[test]
fn channel_disconnect_receivers() {
    check(3, || {
        let (tx, rx) = channel::bounded::<u32>(0);
        let t = thread::spawn(move || match tx.send(9) {
            Ok(()) => None,
            Err(SendError::Disconnected(v)) => Some(v),
            Err(e) => panic!("{e:?}"),
        });
        let got = rx.recv_timeout(Duration::from_secs(1)).ok();
        drop(rx);
        let back = t.join().unwrap();
        assert!(got.is_some() != back.is_some(), "{got:?} {back:?}");
    });
}

/// Two producers on a one-slot buffer and one consumer: the refill of the
/// buffer from a parked sender keeps every message.
#[test]
fn channel_bounded_two_producers() {
    check(2, || {
        let (tx, rx) = channel::bounded::<u32>(1);
        let tx2 = tx.clone();
        let p1 = thread::spawn(move || tx.send(1).unwrap());
        let p2 = thread::spawn(move || tx2.send(2).unwrap());
        let a = rx.recv().unwrap();
        let b = rx.recv().unwrap();
        assert_eq!(a + b, 3);
        p1.join().unwrap();
        p2.join().unwrap();
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
    });
}

/// The latch opens exactly when the count reaches zero, wakes a parked
/// waiter, and orders each counter's prior writes before the wait returns.
#[test]
fn latch_two_count_downs() {
    check(3, || {
        let latch = Arc::new(CountDownLatch::new(2));
        let cells = Arc::new([UnsafeCell::new(0), UnsafeCell::new(0)]);
        let ts: Vec<_> = (0..2)
            .map(|i| {
                let (latch, cells) = (latch.clone(), cells.clone());
                thread::spawn(move || {
                    for _ in 0..=i {
                        bump(&cells[i]);
                    }
                    latch.count_down();
                })
            })
            .collect();
        latch.wait().unwrap();
        assert_eq!(latch.count(), 0);
        let sum: usize = cells.iter().map(get).sum();
        assert_eq!(sum, 3);
        for t in ts {
            t.join().unwrap();
        }
    });
}

/// `notify_all` wakes every waiter queued before it.
#[test]
fn condvar_notify_all_two_waiters() {
    check(2, || {
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let pair = pair.clone();
                thread::spawn(move || {
                    let (m, cv) = &*pair;
                    let _g = cv.wait_while(m.lock().unwrap(), |go| !*go).unwrap();
                })
            })
            .collect();
        *pair.0.lock().unwrap() = true;
        pair.1.notify_all();
        for w in waiters {
            w.join().unwrap();
        }
    });
}

/// Readers queued behind a waiting writer are granted together when it
/// leaves.
#[test]
fn rwlock_readers_behind_writer() {
    check(2, || {
        let lock = Arc::new(RwLock::new(UnsafeCell::new(0)));
        let r = lock.read().unwrap();
        let w = {
            let lock = lock.clone();
            thread::spawn(move || {
                let g = lock.write().unwrap();
                bump(&g);
            })
        };
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let lock = lock.clone();
                thread::spawn(move || {
                    let g = lock.read().unwrap();
                    get(&g)
                })
            })
            .collect();
        drop(r);
        w.join().unwrap();
        for rd in readers {
            assert!(rd.join().unwrap() <= 1);
        }
        assert_eq!(get(&lock.read().unwrap()), 1);
    });
}

/// Reader/writer exclusion and hand-off to a queued writer and to queued
/// readers.
#[test]
fn rwlock_readers_and_writer() {
    check(2, || {
        let lock = Arc::new(RwLock::new(UnsafeCell::new(0)));
        let w = {
            let lock = lock.clone();
            thread::spawn(move || {
                let g = lock.write().unwrap();
                bump(&g);
            })
        };
        let r = {
            let lock = lock.clone();
            thread::spawn(move || {
                let g = lock.read().unwrap();
                let v = get(&g);
                assert!(v <= 2);
            })
        };
        {
            let g = lock.write().unwrap();
            bump(&g);
        }
        w.join().unwrap();
        r.join().unwrap();
        let g = lock.read().unwrap();
        assert_eq!(get(&g), 2);
    });
}
