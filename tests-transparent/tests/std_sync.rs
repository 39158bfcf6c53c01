//! std's (and parking_lot's) locks, condition variables, `Once`,
//! `thread::park` and the channels built on them park virtual threads
//! (`weft::transparent`'s futex waits), on runtimes of one or two carriers
//! and no spares: a wait that held its carrier would stop the others, and
//! the watchdog would fire. Each test proves the threads were in flight at
//! once (a barrier that fills only then, or a hand-off that needs both
//! sides), never by the clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock, mpsc};
use std::time::Duration;

use weft_transparent_tests::{strict_runtime, watchdog};

const LIMIT: Duration = Duration::from_secs(120);

/// Threads that share their carrier's thread-locals also share its std
/// parker: their futex waits go to the kernel (documented).
fn isolated() -> bool {
    std::env::var_os("WEFT_THREAD_LOCALS").is_none()
}

/// 50 producer/consumer pairs over `sync_channel(0)` (a rendezvous: each
/// send waits for its receive) on two carriers. Before, a consumer blocked
/// in `recv` held its carrier, and with it the producer it waited for.
#[test]
fn std_mpsc_rendezvous_pairs_complete() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("std mpsc pairs", LIMIT);
    let rt = strict_runtime(2);
    let mut hs = Vec::new();
    for p in 0..50u64 {
        let (tx, rx) = mpsc::sync_channel::<u64>(0);
        hs.push(rt.spawn(move || rx.iter().sum::<u64>()));
        hs.push(rt.spawn(move || {
            for i in 0..100 {
                tx.send(p * 1000 + i).unwrap();
            }
            0
        }));
    }
    let total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    let want: u64 = (0..50u64)
        .map(|p| (0..100).map(|i| p * 1000 + i).sum::<u64>())
        .sum();
    assert_eq!(total, want);
}

/// The same with crossbeam-channel's zero-capacity channel.
#[test]
fn crossbeam_rendezvous_pairs_complete() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("crossbeam pairs", LIMIT);
    let rt = strict_runtime(2);
    let mut hs = Vec::new();
    for _ in 0..50 {
        let (tx, rx) = crossbeam_channel::bounded::<u64>(0);
        hs.push(rt.spawn(move || rx.iter().count() as u64));
        hs.push(rt.spawn(move || {
            for i in 0..100 {
                tx.send(i).unwrap();
            }
            0
        }));
    }
    let total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, 50 * 100);
}

/// The pinning deadlock, gone: a virtual thread holds a `std::sync::Mutex`
/// across a park while 20 others of its carrier (and two OS threads) wait
/// for the lock. Before, the first waiter blocked the one carrier in the
/// kernel and the holder could never resume.
#[test]
fn a_std_mutex_held_across_a_park_does_not_deadlock_its_carrier() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("std mutex across a park", LIMIT);
    let rt = strict_runtime(1);
    let m = Arc::new(Mutex::new(0u64));
    let waiting = Arc::new(AtomicUsize::new(0));
    let holder = {
        let (m, waiting) = (m.clone(), waiting.clone());
        rt.spawn(move || {
            let mut g = m.lock().unwrap();
            // Wait (parked, holding the lock) until every other thread of
            // this carrier has started and is about to block on it.
            while waiting.load(Ordering::SeqCst) < 20 {
                weft::sleep(Duration::from_millis(1)).unwrap();
            }
            weft::sleep(Duration::from_millis(5)).unwrap();
            *g += 1;
        })
    };
    let mut hs: Vec<_> = (0..20)
        .map(|_| {
            let (m, waiting) = (m.clone(), waiting.clone());
            rt.spawn(move || {
                waiting.fetch_add(1, Ordering::SeqCst);
                *m.lock().unwrap() += 1;
            })
        })
        .collect();
    let os: Vec<_> = (0..2)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..1000 {
                    *m.lock().unwrap() += 1;
                }
            })
        })
        .collect();
    holder.join().unwrap();
    for h in hs.drain(..) {
        h.join().unwrap();
    }
    for t in os {
        t.join().unwrap();
    }
    assert_eq!(*m.lock().unwrap(), 1 + 20 + 2000);
}

/// Mutex + Condvar hand a turn back and forth between two virtual threads
/// of one carrier (each waits for the other's notify), with
/// `wait_timeout` — and a third waits for a notify that never comes and
/// must time out.
#[test]
fn condvar_ping_pong_and_wait_timeout_on_one_carrier() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("condvar ping-pong", LIMIT);
    let rt = strict_runtime(1);
    let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
    let side = |me: u32| {
        let pair = pair.clone();
        rt.spawn(move || {
            let (m, cv) = &*pair;
            for _ in 0..500 {
                let mut turn = m.lock().unwrap();
                while *turn % 2 != me {
                    turn = cv.wait_timeout(turn, Duration::from_secs(30)).unwrap().0;
                }
                *turn += 1;
                cv.notify_all();
            }
        })
    };
    let (a, b) = (side(0), side(1));
    let lonely = rt.spawn(|| {
        let m = Mutex::new(());
        let cv = Condvar::new();
        let g = m.lock().unwrap();
        let (_g, r) = cv.wait_timeout(g, Duration::from_millis(20)).unwrap();
        r.timed_out()
    });
    a.join().unwrap();
    b.join().unwrap();
    assert_eq!(*pair.0.lock().unwrap(), 1000);
    assert!(lonely.join().unwrap(), "wait_timeout did not time out");
}

/// A `RwLock` writer parks while holding the lock; readers of the same
/// carrier wait for it, parked.
#[test]
fn rwlock_readers_wait_for_a_parked_writer() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("rwlock", LIMIT);
    let rt = strict_runtime(1);
    let l = Arc::new(RwLock::new(0u64));
    let started = Arc::new(AtomicUsize::new(0));
    let w = {
        let (l, started) = (l.clone(), started.clone());
        rt.spawn(move || {
            let mut g = l.write().unwrap();
            while started.load(Ordering::SeqCst) < 10 {
                weft::sleep(Duration::from_millis(1)).unwrap();
            }
            *g = 7;
        })
    };
    let rs: Vec<_> = (0..10)
        .map(|_| {
            let (l, started) = (l.clone(), started.clone());
            rt.spawn(move || {
                started.fetch_add(1, Ordering::SeqCst);
                *l.read().unwrap()
            })
        })
        .collect();
    w.join().unwrap();
    for r in rs {
        assert_eq!(r.join().unwrap(), 7);
    }
}

/// `OnceLock::get_or_init` whose initialiser parks: the other threads of
/// the carrier wait on the `Once`, parked, and all see the one value.
#[test]
fn once_lock_initialiser_that_parks() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("once", LIMIT);
    let rt = strict_runtime(1);
    let cell = Arc::new(OnceLock::<u64>::new());
    let inits = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..30)
        .map(|i| {
            let (cell, inits) = (cell.clone(), inits.clone());
            rt.spawn(move || {
                *cell.get_or_init(|| {
                    inits.fetch_add(1, Ordering::SeqCst);
                    weft::sleep(Duration::from_millis(10)).unwrap();
                    i
                })
            })
        })
        .collect();
    let vals: Vec<u64> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(inits.load(Ordering::SeqCst), 1);
    assert!(vals.iter().all(|v| *v == vals[0]));
}

/// `std::thread::park`/`unpark` between virtual threads of one carrier:
/// each parks in the kernel's place, and the other runs meanwhile.
#[test]
fn std_thread_park_unpark_between_virtual_threads() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("std park", LIMIT);
    let rt = strict_runtime(1);
    let (tx, rx) = weft::channel::bounded::<std::thread::Thread>(1);
    let flag = Arc::new(AtomicUsize::new(0));
    let parker = {
        let flag = flag.clone();
        rt.spawn(move || {
            tx.send(std::thread::current()).unwrap();
            while flag.load(Ordering::SeqCst) == 0 {
                std::thread::park();
            }
        })
    };
    let unparker = rt.spawn(move || {
        let t = rx.recv().unwrap();
        // The parker runs first and parks; we get the carrier only if it
        // unmounted.
        weft::yield_now();
        flag.store(1, Ordering::SeqCst);
        t.unpark();
    });
    unparker.join().unwrap();
    parker.join().unwrap();
}

/// parking_lot's own parker (its futex) parks too; mixed with OS threads
/// on the same lock.
#[test]
fn parking_lot_mutex_contended_by_virtual_and_os_threads() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("parking_lot", LIMIT);
    let rt = strict_runtime(1);
    let m = Arc::new(parking_lot::Mutex::new(0u64));
    let started = Arc::new(AtomicUsize::new(0));
    let holder = {
        let (m, started) = (m.clone(), started.clone());
        rt.spawn(move || {
            let mut g = m.lock();
            while started.load(Ordering::SeqCst) < 10 {
                weft::sleep(Duration::from_millis(1)).unwrap();
            }
            *g += 1;
        })
    };
    let hs: Vec<_> = (0..10)
        .map(|_| {
            let (m, started) = (m.clone(), started.clone());
            rt.spawn(move || {
                started.fetch_add(1, Ordering::SeqCst);
                for _ in 0..100 {
                    *m.lock() += 1;
                }
            })
        })
        .collect();
    let os: Vec<_> = (0..2)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..1000 {
                    *m.lock() += 1;
                }
            })
        })
        .collect();
    holder.join().unwrap();
    for h in hs {
        h.join().unwrap();
    }
    for t in os {
        t.join().unwrap();
    }
    assert_eq!(*m.lock(), 1 + 1000 + 2000);
}

/// Many short waits under contention from virtual and OS threads on the
/// same std locks: a lost wake-up would leave a waiter parked for ever
/// (the watchdog fires).
#[test]
fn std_mutex_stress_mixed_threads() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("std mutex stress", LIMIT);
    let rt = strict_runtime(2);
    let m = Arc::new(Mutex::new(0u64));
    let hs: Vec<_> = (0..64)
        .map(|_| {
            let m = m.clone();
            rt.spawn(move || {
                for i in 0..2000 {
                    let mut g = m.lock().unwrap();
                    *g += 1;
                    if i % 64 == 0 {
                        weft::yield_now(); // park holding it, now and then
                    }
                }
            })
        })
        .collect();
    let os: Vec<_> = (0..2)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    *m.lock().unwrap() += 1;
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    for t in os {
        t.join().unwrap();
    }
    assert_eq!(*m.lock().unwrap(), 64 * 2000 + 40_000);
}
