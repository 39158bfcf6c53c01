//! Integration tests of `weft::sync`, on virtual and OS threads.
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use weft::sync::{
    Barrier, Condvar, CountDownLatch, LockError, Mutex, RwLock, Semaphore, WaitError,
};

/// A virtual or an OS thread, joined the same way (never join an OS thread
/// from a virtual one: that would block its carrier).
enum Handle<T> {
    Virtual(weft::JoinHandle<T>),
    Os(std::thread::JoinHandle<T>),
}

impl<T> Handle<T> {
    fn join(self) -> T {
        match self {
            Handle::Virtual(h) => h.join().unwrap(),
            Handle::Os(h) => h.join().unwrap(),
        }
    }
}

fn spawn_on<T: Send + 'static>(os: bool, f: impl FnOnce() -> T + Send + 'static) -> Handle<T> {
    if os {
        Handle::Os(std::thread::spawn(f))
    } else {
        Handle::Virtual(weft::spawn(f))
    }
}

/// Polls until `t` is parked (it is then blocked inside a weft call).
/// Gives up after 10 s; callers never depend on the thread being parked for
/// correctness, only for exercising the "interrupted while parked" path.
fn wait_until_parked(t: &weft::Thread) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.state() != weft::State::Parked && Instant::now() < deadline {
        std::thread::yield_now();
    }
}

// ---------------------------------------------------------------------------
// Mutex
// ---------------------------------------------------------------------------

#[test]
fn mutex_counts_exactly_across_virtual_and_os_threads() {
    const VIRTUAL: usize = 1000;
    const OS: usize = 4;
    const PER_VIRTUAL: u64 = 50;
    const PER_OS: u64 = 5_000;

    // A plain (non-atomic) counter plus an "inside" gauge: both only stay
    // right under mutual exclusion.
    let m = Arc::new(Mutex::new(0u64));
    let inside = Arc::new(AtomicUsize::new(0));

    let mut virt = Vec::new();
    for _ in 0..VIRTUAL {
        let (m, inside) = (Arc::clone(&m), Arc::clone(&inside));
        virt.push(weft::spawn(move || {
            for i in 0..PER_VIRTUAL {
                let mut g = m.lock().unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                *g += 1;
                if i % 8 == 0 {
                    weft::yield_now(); // hold the lock across a switch
                }
                inside.fetch_sub(1, Ordering::SeqCst);
            }
        }));
    }
    let mut os = Vec::new();
    for _ in 0..OS {
        let (m, inside) = (Arc::clone(&m), Arc::clone(&inside));
        os.push(std::thread::spawn(move || {
            for _ in 0..PER_OS {
                let mut g = m.lock().unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                *g += 1;
                inside.fetch_sub(1, Ordering::SeqCst);
            }
        }));
    }
    for h in virt {
        h.join().unwrap();
    }
    for h in os {
        h.join().unwrap();
    }
    assert_eq!(
        *m.lock().unwrap(),
        VIRTUAL as u64 * PER_VIRTUAL + OS as u64 * PER_OS
    );
}

#[test]
fn mutex_basics() {
    let mut m = Mutex::new(vec![1, 2]);
    m.get_mut().unwrap().push(3);
    {
        let g = m.lock().unwrap();
        assert!(matches!(
            m.try_lock(),
            Err(std::sync::TryLockError::WouldBlock)
        ));
        assert_eq!(*g, [1, 2, 3]);
    }
    assert!(m.try_lock().is_ok());
    assert_eq!(
        format!("{m:?}"),
        "Mutex { data: [1, 2, 3], poisoned: false, .. }"
    );
    assert_eq!(m.into_inner().unwrap(), [1, 2, 3]);

    static STATIC: Mutex<u32> = Mutex::new(7);
    *STATIC.lock().unwrap() += 1;
    assert_eq!(*STATIC.lock().unwrap(), 8);

    let unsized_: &Mutex<[u8]> = &Mutex::new([1u8, 2, 3]);
    assert_eq!(unsized_.lock().unwrap().len(), 3);
}

#[test]
fn mutex_poisoning_like_std() {
    let m = Arc::new(Mutex::new(1));
    let m2 = Arc::clone(&m);
    let r = weft::spawn(move || {
        let _g = m2.lock().unwrap();
        panic!("boom (expected by the test)");
    })
    .join();
    assert!(r.is_err());
    assert!(m.is_poisoned());
    let g = m.lock().unwrap_err().into_inner();
    assert_eq!(*g, 1);
    drop(g);
    assert!(matches!(
        m.try_lock(),
        Err(std::sync::TryLockError::Poisoned(_))
    ));
    assert!(matches!(
        m.lock_interruptibly(),
        Err(LockError::Poisoned(_))
    ));
    m.clear_poison();
    assert!(!m.is_poisoned());
    assert_eq!(*m.lock().unwrap(), 1);
    let m = Arc::into_inner(m).unwrap();
    assert_eq!(m.into_inner().unwrap(), 1);
}

#[test]
fn lock_interruptibly_returns_on_interrupt() {
    let m = Arc::new(Mutex::new(0));
    let g = m.lock().unwrap();
    let m2 = Arc::clone(&m);
    let t = weft::spawn(move || {
        let r = m2.lock_interruptibly();
        let interrupted = matches!(r, Err(LockError::Interrupted));
        drop(r);
        // Java semantics: the flag is cleared when Interrupted is reported.
        (interrupted, weft::current().is_interrupted())
    });
    wait_until_parked(t.thread());
    t.thread().interrupt();
    let (interrupted, flag_after) = t.join().unwrap();
    assert!(interrupted);
    assert!(!flag_after);
    drop(g);
    // The mutex is still usable, and nobody is left queued.
    *m.lock().unwrap() += 1;
    assert_eq!(*m.lock().unwrap(), 1);

    // Uncontended: the flag is not looked at.
    let m3 = Arc::clone(&m);
    let t = weft::spawn(move || {
        weft::current().interrupt();
        let ok = m3.lock_interruptibly().is_ok();
        (ok, weft::interrupted())
    });
    assert_eq!(t.join().unwrap(), (true, true));

    // Converts to io::Error of kind Interrupted.
    let e: io::Error = LockError::<()>::Interrupted.into();
    assert_eq!(e.kind(), io::ErrorKind::Interrupted);
}

#[test]
fn plain_lock_ignores_interrupt_and_keeps_the_flag() {
    let m = Arc::new(Mutex::new(0));
    let g = m.lock().unwrap();
    let m2 = Arc::clone(&m);
    let t = weft::spawn(move || {
        *m2.lock().unwrap() += 1;
        weft::interrupted()
    });
    wait_until_parked(t.thread());
    t.thread().interrupt();
    // The waiter must still be waiting: the lock is ours.
    assert_eq!(*g, 0);
    drop(g);
    assert!(
        t.join().unwrap(),
        "interrupt flag must survive an uninterruptible lock()"
    );
    assert_eq!(*m.lock().unwrap(), 1);
}

/// Two threads hammer the mutex (lock, tiny critical section, unlock, again
/// at once); a third asks for it once. Barging alone would let the hammers
/// keep it forever; starvation mode must hand it to the waiter. The hammers
/// stop when the waiter got the lock — or after 20 s, which fails the test.
fn fairness_case(hammers_virtual: bool) {
    let m = Arc::new(Mutex::new(0u64));
    let got_it = Arc::new(AtomicBool::new(false));
    let started = Arc::new(CountDownLatch::new(2));
    let give_up = Instant::now() + Duration::from_secs(20);

    let hammer = {
        let (m, got_it, started) = (Arc::clone(&m), Arc::clone(&got_it), Arc::clone(&started));
        move || {
            started.count_down();
            let mut n = 0u64;
            while !got_it.load(Ordering::Relaxed) && Instant::now() < give_up {
                for _ in 0..64 {
                    let mut g = m.lock().unwrap();
                    *g += 1;
                    std::hint::black_box(&mut *g);
                }
                n += 64;
            }
            n
        }
    };
    let hammers: Vec<_> = (0..2)
        .map(|_| spawn_on(!hammers_virtual, hammer.clone()))
        .collect();
    started.wait().unwrap();

    let waiter = {
        let (m, got_it) = (Arc::clone(&m), Arc::clone(&got_it));
        move || {
            let start = Instant::now();
            let g = m.lock().unwrap();
            let waited = start.elapsed();
            got_it.store(true, Ordering::Relaxed);
            drop(g);
            waited
        }
    };
    let waited = spawn_on(hammers_virtual, waiter).join();
    let iterations: u64 = hammers.into_iter().map(Handle::join).sum();
    assert!(got_it.load(Ordering::Relaxed));
    assert!(
        Instant::now() < give_up,
        "waiter starved: waited {waited:?}"
    );
    assert!(iterations > 0);
}

#[test]
fn mutex_waiter_is_not_starved_by_os_hammers() {
    fairness_case(false);
}

#[test]
fn mutex_waiter_is_not_starved_by_virtual_hammers() {
    fairness_case(true);
}

// ---------------------------------------------------------------------------
// Condvar
// ---------------------------------------------------------------------------

struct Bounded {
    items: Mutex<VecDeque<u64>>,
    not_empty: Condvar,
    not_full: Condvar,
}

#[test]
fn condvar_producer_consumer() {
    const PRODUCERS: u64 = 4;
    const CONSUMERS: usize = 4;
    const PER: u64 = 2_000;
    let q = Arc::new(Bounded {
        items: Mutex::new(VecDeque::new()),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
    });
    let consumed = Arc::new(AtomicUsize::new(0));
    let total = (PRODUCERS * PER) as usize;

    let mut handles = Vec::new();
    for p in 0..PRODUCERS {
        let q = Arc::clone(&q);
        handles.push(spawn_on(false, move || {
            for i in 0..PER {
                let mut items = q
                    .not_full
                    .wait_while(q.items.lock().unwrap(), |v| v.len() >= 8)
                    .unwrap();
                items.push_back(p * PER + i + 1);
                drop(items);
                q.not_empty.notify_one();
            }
            0u64
        }));
    }
    for c in 0..CONSUMERS {
        let (q, consumed) = (Arc::clone(&q), Arc::clone(&consumed));
        let body = move || {
            let mut sum = 0u64;
            loop {
                let mut items = q.items.lock().unwrap();
                loop {
                    if consumed.load(Ordering::SeqCst) >= total {
                        return sum;
                    }
                    if let Some(v) = items.pop_front() {
                        consumed.fetch_add(1, Ordering::SeqCst);
                        sum += v;
                        break;
                    }
                    items = q.not_empty.wait(items).unwrap();
                }
                drop(items);
                q.not_full.notify_one();
                if consumed.load(Ordering::SeqCst) >= total {
                    // Wake the other consumers so they can see we are done.
                    q.not_empty.notify_all();
                }
            }
        };
        // One consumer on an OS thread.
        handles.push(spawn_on(c == 0, body));
    }
    let sum: u64 = handles.into_iter().map(Handle::join).sum();
    let n = PRODUCERS * PER;
    assert_eq!(sum, n * (n + 1) / 2);
}

#[test]
fn condvar_wait_timeout_times_out() {
    let m = Mutex::new(());
    let cv = Condvar::new();
    let start = Instant::now();
    let (_g, res) = cv
        .wait_timeout(m.lock().unwrap(), Duration::from_millis(20))
        .unwrap();
    assert!(res.timed_out());
    assert!(start.elapsed() >= Duration::from_millis(20));

    // Same on a virtual thread.
    let t = weft::spawn(|| {
        let m = Mutex::new(0);
        let cv = Condvar::new();
        let start = Instant::now();
        let (g, res) = cv
            .wait_timeout_while(m.lock().unwrap(), Duration::from_millis(20), |v| *v == 0)
            .unwrap();
        (res.timed_out(), *g, start.elapsed())
    });
    let (timed_out, v, waited) = t.join().unwrap();
    assert!(timed_out);
    assert_eq!(v, 0);
    assert!(waited >= Duration::from_millis(20));
}

#[test]
fn condvar_wait_timeout_while_sees_notification() {
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let pair2 = Arc::clone(&pair);
    let t = weft::spawn(move || {
        let (m, cv) = &*pair2;
        let (g, res) = cv
            .wait_timeout_while(m.lock().unwrap(), Duration::from_secs(30), |ready| !*ready)
            .unwrap();
        (*g, res.timed_out())
    });
    wait_until_parked(t.thread());
    *pair.0.lock().unwrap() = true;
    pair.1.notify_one();
    assert_eq!(t.join().unwrap(), (true, false));
}

#[test]
fn condvar_notify_all_wakes_everyone() {
    let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
    let ready = Arc::new(CountDownLatch::new(50));
    let handles: Vec<_> = (0..50)
        .map(|_| {
            let (pair, ready) = (Arc::clone(&pair), Arc::clone(&ready));
            weft::spawn(move || {
                let (m, cv) = &*pair;
                let mut g = m.lock().unwrap();
                ready.count_down();
                while *g == 0 {
                    g = cv.wait(g).unwrap();
                }
                *g += 1;
            })
        })
        .collect();
    ready.wait().unwrap();
    *pair.0.lock().unwrap() = 1;
    pair.1.notify_all();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*pair.0.lock().unwrap(), 51);
}

#[test]
fn condvar_wait_interruptibly() {
    let pair = Arc::new((Mutex::new(0), Condvar::new()));
    let pair2 = Arc::clone(&pair);
    let t = weft::spawn(move || {
        let (m, cv) = &*pair2;
        match cv.wait_interruptibly(m.lock().unwrap()) {
            Err(WaitError::Interrupted(mut g)) => {
                // The mutex is held again.
                *g += 1;
                (true, weft::current().is_interrupted())
            }
            Err(WaitError::Poisoned(_)) => (false, false),
            Ok(_) => (false, false), // spurious wake-up: not expected here
        }
    });
    wait_until_parked(t.thread());
    t.thread().interrupt();
    let (interrupted, flag) = t.join().unwrap();
    assert!(interrupted);
    assert!(!flag);
    assert_eq!(*pair.0.lock().unwrap(), 1);
}

#[test]
fn condvar_plain_wait_keeps_interrupt_pending() {
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let pair2 = Arc::clone(&pair);
    let t = weft::spawn(move || {
        let (m, cv) = &*pair2;
        let _g = cv.wait_while(m.lock().unwrap(), |done| !*done).unwrap();
        weft::interrupted()
    });
    wait_until_parked(t.thread());
    t.thread().interrupt();
    *pair.0.lock().unwrap() = true;
    pair.1.notify_all();
    assert!(t.join().unwrap());
}

// ---------------------------------------------------------------------------
// RwLock
// ---------------------------------------------------------------------------

#[test]
fn rwlock_readers_share_writers_exclude() {
    // Readers really share: N readers meet at a barrier while holding it.
    let lock = Arc::new(RwLock::new((0u64, 0u64)));
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (lock, barrier) = (Arc::clone(&lock), Arc::clone(&barrier));
            weft::spawn(move || {
                let g = lock.read().unwrap();
                barrier.wait();
                g.0
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 0);
    }

    // Writers keep the two halves equal; readers check it.
    let mut handles = Vec::new();
    for i in 0..40 {
        let lock = Arc::clone(&lock);
        handles.push(spawn_on(false, move || {
            for _ in 0..50 {
                if i % 4 == 0 {
                    let mut g = lock.write().unwrap();
                    g.0 += 1;
                    weft::yield_now();
                    g.1 += 1;
                } else {
                    let g = lock.read().unwrap();
                    assert_eq!(g.0, g.1);
                    weft::yield_now();
                    assert_eq!(g.0, g.1);
                }
            }
        }));
    }
    for _ in 0..2 {
        let lock = Arc::clone(&lock);
        handles.push(spawn_on(true, move || {
            for _ in 0..500 {
                let mut g = lock.write().unwrap();
                g.0 += 1;
                g.1 += 1;
            }
        }));
    }
    for h in handles {
        h.join();
    }
    assert_eq!(*lock.read().unwrap(), (10 * 50 + 1000, 10 * 50 + 1000));
}

#[test]
fn rwlock_try_and_poison() {
    let lock = Arc::new(RwLock::new(1));
    {
        let _r = lock.read().unwrap();
        assert!(lock.try_read().is_ok());
        assert!(lock.try_write().is_err());
    }
    {
        let _w = lock.write().unwrap();
        assert!(lock.try_read().is_err());
    }
    let l2 = Arc::clone(&lock);
    let _ = weft::spawn(move || {
        let _w = l2.write().unwrap();
        panic!("boom (expected by the test)");
    })
    .join();
    assert!(lock.is_poisoned());
    assert_eq!(*lock.read().unwrap_err().into_inner(), 1);
    lock.clear_poison();
    assert_eq!(*lock.write().unwrap(), 1);
}

#[test]
fn rwlock_writer_not_starved_by_readers() {
    // Readers keep re-acquiring; a writer must still get in.
    let lock = Arc::new(RwLock::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (lock, stop) = (Arc::clone(&lock), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let g = lock.read().unwrap();
                    std::hint::black_box(*g);
                }
            })
        })
        .collect();
    let l2 = Arc::clone(&lock);
    weft::spawn(move || *l2.write().unwrap() = 1)
        .join()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(*lock.read().unwrap(), 1);
}

// ---------------------------------------------------------------------------
// Semaphore
// ---------------------------------------------------------------------------

#[test]
fn semaphore_bounds_concurrency() {
    const PERMITS: usize = 3;
    let sem = Arc::new(Semaphore::new(PERMITS));
    let active = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..300 {
        let (sem, active, max) = (Arc::clone(&sem), Arc::clone(&active), Arc::clone(&max));
        let body = move || {
            for _ in 0..5 {
                let _p = sem.acquire().unwrap();
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                assert!(now <= PERMITS);
                weft::yield_now();
                active.fetch_sub(1, Ordering::SeqCst);
            }
        };
        handles.push(spawn_on(i % 50 == 0, body));
    }
    for h in handles {
        h.join();
    }
    assert!(max.load(Ordering::SeqCst) <= PERMITS);
    assert!(max.load(Ordering::SeqCst) >= 1);
    assert_eq!(sem.available_permits(), PERMITS);
}

#[test]
fn semaphore_try_timeout_release_forget() {
    let sem = Semaphore::new(1);
    let p = sem.try_acquire().unwrap();
    assert!(sem.try_acquire().is_none());
    let start = Instant::now();
    assert!(
        sem.acquire_timeout(Duration::from_millis(20))
            .unwrap()
            .is_none()
    );
    assert!(start.elapsed() >= Duration::from_millis(20));
    drop(p);
    assert_eq!(sem.available_permits(), 1);
    sem.acquire().unwrap().forget();
    assert_eq!(sem.available_permits(), 0);
    sem.add_permits(2);
    assert_eq!(sem.available_permits(), 2);
    sem.release();
    assert_eq!(sem.available_permits(), 3);

    let sem = Arc::new(Semaphore::new(1));
    let owned = Arc::clone(&sem).acquire_owned().unwrap();
    assert!(Arc::clone(&sem).try_acquire_owned().is_none());
    drop(owned);
    assert_eq!(sem.available_permits(), 1);
}

#[test]
fn semaphore_release_hands_permit_to_waiter() {
    let sem = Arc::new(Semaphore::new(0));
    let s2 = Arc::clone(&sem);
    let t = weft::spawn(move || {
        s2.acquire_timeout(Duration::from_secs(30))
            .unwrap()
            .map(|p| p.forget())
            .is_some()
    });
    wait_until_parked(t.thread());
    sem.release();
    assert!(t.join().unwrap());
    assert_eq!(sem.available_permits(), 0);
}

#[test]
fn semaphore_acquire_interrupted() {
    let sem = Arc::new(Semaphore::new(0));
    let s2 = Arc::clone(&sem);
    let t = weft::spawn(move || {
        let e = s2.acquire().map(|_| ()).unwrap_err();
        (e.kind(), weft::current().is_interrupted())
    });
    wait_until_parked(t.thread());
    t.thread().interrupt();
    assert_eq!(t.join().unwrap(), (io::ErrorKind::Interrupted, false));
    // The interrupted waiter left no trace: a permit goes straight to the pool.
    sem.release();
    assert_eq!(sem.available_permits(), 1);
    assert!(sem.try_acquire().is_some());
}

// ---------------------------------------------------------------------------
// Barrier
// ---------------------------------------------------------------------------

#[test]
fn barrier_one_leader_per_generation() {
    const N: usize = 10;
    const GENERATIONS: usize = 20;
    let barrier = Arc::new(Barrier::new(N));
    let arrived = Arc::new(AtomicUsize::new(0));
    let leaders: Arc<Vec<AtomicUsize>> =
        Arc::new((0..GENERATIONS).map(|_| AtomicUsize::new(0)).collect());
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let (barrier, arrived, leaders) = (
                Arc::clone(&barrier),
                Arc::clone(&arrived),
                Arc::clone(&leaders),
            );
            let body = move || {
                for g in 0..GENERATIONS {
                    arrived.fetch_add(1, Ordering::SeqCst);
                    let r = barrier.wait();
                    // Nobody leaves generation g before all N arrived in it.
                    assert!(arrived.load(Ordering::SeqCst) >= (g + 1) * N);
                    if r.is_leader() {
                        leaders[g].fetch_add(1, Ordering::SeqCst);
                    }
                }
            };
            spawn_on(i == 0, body)
        })
        .collect();
    for h in handles {
        h.join();
    }
    for (g, l) in leaders.iter().enumerate() {
        assert_eq!(l.load(Ordering::SeqCst), 1, "generation {g}");
    }
    assert!(Barrier::new(0).wait().is_leader());
    assert!(Barrier::new(1).wait().is_leader());
}

// ---------------------------------------------------------------------------
// CountDownLatch
// ---------------------------------------------------------------------------

#[test]
fn latch_opens_at_zero() {
    let latch = Arc::new(CountDownLatch::new(5));
    let done = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..20)
        .map(|_| {
            let (latch, done) = (Arc::clone(&latch), Arc::clone(&done));
            weft::spawn(move || {
                latch.wait().unwrap();
                // Every count_down happened before the latch opened.
                assert_eq!(done.load(Ordering::SeqCst), 5);
            })
        })
        .collect();
    let os_waiter = {
        let (latch, done) = (Arc::clone(&latch), Arc::clone(&done));
        std::thread::spawn(move || {
            assert!(latch.wait_timeout(Duration::from_secs(30)).unwrap());
            assert_eq!(done.load(Ordering::SeqCst), 5);
        })
    };
    assert!(!latch.wait_timeout(Duration::from_millis(10)).unwrap());
    for _ in 0..5 {
        let (latch, done) = (Arc::clone(&latch), Arc::clone(&done));
        weft::spawn(move || {
            done.fetch_add(1, Ordering::SeqCst);
            latch.count_down();
        });
    }
    for w in waiters {
        w.join().unwrap();
    }
    os_waiter.join().unwrap();
    assert_eq!(latch.count(), 0);
    latch.count_down(); // no effect
    assert_eq!(latch.count(), 0);
    latch.wait().unwrap();
}

#[test]
fn latch_wait_interrupted() {
    let latch = Arc::new(CountDownLatch::new(1));
    let l2 = Arc::clone(&latch);
    let t = weft::spawn(move || {
        let e = l2.wait().unwrap_err();
        (e.kind(), weft::current().is_interrupted())
    });
    wait_until_parked(t.thread());
    t.thread().interrupt();
    assert_eq!(t.join().unwrap(), (io::ErrorKind::Interrupted, false));
    latch.count_down();
    latch.wait().unwrap();
}

#[test]
fn interrupt_from_os_thread_reaches_os_thread_waiter() {
    // Interrupts work between any kinds of threads; here both are OS threads.
    let latch = Arc::new(CountDownLatch::new(1));
    let (tx, rx) = std::sync::mpsc::channel();
    let l2 = Arc::clone(&latch);
    let h = std::thread::spawn(move || {
        tx.send(weft::current()).unwrap();
        l2.wait().map_err(|e| e.kind())
    });
    let t = rx.recv().unwrap();
    wait_until_parked(&t);
    t.interrupt();
    assert_eq!(h.join().unwrap(), Err(io::ErrorKind::Interrupted));
}

#[test]
fn primitives_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_sync<T: Sync>() {}
    assert_send_sync::<Mutex<u8>>();
    assert_send_sync::<RwLock<u8>>();
    assert_send_sync::<Condvar>();
    assert_send_sync::<Semaphore>();
    assert_send_sync::<Barrier>();
    assert_send_sync::<CountDownLatch>();
    assert_sync::<weft::sync::MutexGuard<'static, u8>>();
}
