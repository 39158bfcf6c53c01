//! C condition variables' waits park virtual threads
//! (`transparent/hooks/cond.rs`), on runtimes of two carriers and no
//! spares. Each test hangs (the watchdog fires) when a waiting virtual
//! thread holds its carrier, as it did before (issue 53).

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use libc::{c_int, c_long};
use weft_transparent_tests::{socketpair, strict_runtime, watchdog};

const LIMIT: Duration = Duration::from_secs(120);

#[link(name = "weft_gil")]
unsafe extern "C" {
    fn weft_gil_take();
    fn weft_gil_drop();
    fn weft_gil_waiting() -> c_long;
    fn weft_flag_wait();
    fn weft_flag_set(v: c_int);
}

/// Threads that share their carrier's thread-locals keep glibc's waits
/// (documented).
fn isolated() -> bool {
    std::env::var_os("WEFT_THREAD_LOCALS").is_none()
}

/// Polls `cond` from an OS thread until it holds; panics after the limit
/// (the work takes milliseconds: a miss is a deadlock).
fn poll_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < LIMIT, "{what}: no progress");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// CPython's shape: a thread holding the GIL parks in a socket read while
/// four others wait for the GIL in `pthread_cond_timedwait`. The socket
/// is written only once as many takers wait as there are carriers: before,
/// those two held both carriers, and the holder, readable, never ran
/// again (the takers' 5 ms timeouts kept them waiting for ever).
#[test]
fn a_gil_holder_parked_in_a_read_gets_a_carrier_back() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("GIL holder parked in a read", LIMIT);
    let rt = strict_runtime(2);
    let [a, b] = socketpair();
    let holding = Arc::new(AtomicBool::new(false));
    let h2 = holding.clone();
    let holder = rt.spawn(move || {
        // SAFETY: the test library's functions; a read into a local.
        unsafe {
            weft_gil_take();
            h2.store(true, Ordering::SeqCst);
            let mut buf = [0u8; 1];
            assert_eq!(libc::read(a, buf.as_mut_ptr().cast(), 1), 1);
            weft_gil_drop();
        }
    });
    poll_until("the holder takes the GIL", || {
        holding.load(Ordering::SeqCst)
    });
    let takers: Vec<_> = (0..4)
        .map(|_| {
            rt.spawn(|| {
                // SAFETY: the test library's functions.
                unsafe {
                    weft_gil_take();
                    weft_gil_drop();
                }
            })
        })
        .collect();
    // SAFETY: the test library's function.
    poll_until("two takers wait", || unsafe { weft_gil_waiting() } >= 2);
    // SAFETY: a write of one byte from a local.
    assert_eq!(unsafe { libc::write(b, b"x".as_ptr().cast(), 1) }, 1);
    holder.join().unwrap();
    for t in takers {
        t.join().unwrap();
    }
    // SAFETY: our own descriptors.
    unsafe {
        libc::close(a);
        libc::close(b);
    }
}

/// Untimed waits: 50 virtual threads wait in `pthread_cond_wait` until a
/// flag is set by a thread spawned after them on the same two carriers.
#[test]
fn untimed_waits_park_until_a_broadcast() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("pthread_cond_wait", LIMIT);
    let rt = strict_runtime(2);
    let waiters: Vec<_> = (0..50)
        // SAFETY: the test library's function.
        .map(|_| rt.spawn(|| unsafe { weft_flag_wait() }))
        .collect();
    // SAFETY: as above.
    rt.spawn(|| unsafe { weft_flag_set(1) }).join().unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    // SAFETY: as above.
    unsafe { weft_flag_set(0) };
}

/// A pthread mutex and condition variable shared by a test's threads.
struct CQueue {
    mu: UnsafeCell<libc::pthread_mutex_t>,
    cv: UnsafeCell<libc::pthread_cond_t>,
    /// Guarded by `mu`: items available, consumed, and the end.
    count: UnsafeCell<usize>,
    done: UnsafeCell<bool>,
}
// SAFETY: the pthread objects are made to be shared; the fields are only
// touched with `mu` held.
unsafe impl Sync for CQueue {}

impl CQueue {
    fn lock(&self) {
        // SAFETY: an initialised mutex.
        assert_eq!(unsafe { libc::pthread_mutex_lock(self.mu.get()) }, 0);
    }
    fn unlock(&self) {
        // SAFETY: as above, held by the caller.
        assert_eq!(unsafe { libc::pthread_mutex_unlock(self.mu.get()) }, 0);
    }
}

/// Producers signal one consumer per item; consumers are virtual threads
/// and OS threads waiting on the same condition variable (one timed, to
/// cover both kinds of wait). Every item is consumed: a signal that
/// reached no waiter while one was queued would leave an item, and its
/// consumer, waiting for ever.
#[test]
fn signals_reach_virtual_and_os_waiters_alike() {
    if !isolated() {
        return;
    }
    const ITEMS: usize = 20_000;
    let _dog = watchdog("cond producer/consumers", LIMIT);
    let rt = strict_runtime(2);
    let q = Arc::new(CQueue {
        mu: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
        cv: UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER),
        count: UnsafeCell::new(0),
        done: UnsafeCell::new(false),
    });
    let consumed = Arc::new(AtomicUsize::new(0));
    let consume = |q: Arc<CQueue>, consumed: Arc<AtomicUsize>, timed: bool| {
        move || {
            q.lock();
            loop {
                // SAFETY: `mu` is held.
                unsafe {
                    if *q.count.get() > 0 {
                        *q.count.get() -= 1;
                        consumed.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if *q.done.get() {
                        break;
                    }
                    let r = if timed {
                        let mut ts = libc::timespec {
                            tv_sec: 0,
                            tv_nsec: 0,
                        };
                        libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts);
                        ts.tv_sec += 1;
                        libc::pthread_cond_timedwait(q.cv.get(), q.mu.get(), &ts)
                    } else {
                        libc::pthread_cond_wait(q.cv.get(), q.mu.get())
                    };
                    assert!(r == 0 || r == libc::ETIMEDOUT, "{r}");
                }
            }
            q.unlock();
        }
    };
    let mut virtual_consumers = Vec::new();
    for i in 0..4 {
        virtual_consumers.push(rt.spawn(consume(q.clone(), consumed.clone(), i == 0)));
    }
    let os_consumers: Vec<_> = (0..2)
        .map(|i| std::thread::spawn(consume(q.clone(), consumed.clone(), i == 0)))
        .collect();
    let producers: Vec<_> = (0..2)
        .map(|_| {
            let q = q.clone();
            rt.spawn(move || {
                for k in 0..ITEMS / 2 {
                    q.lock();
                    // SAFETY: `mu` is held; an initialised cond.
                    unsafe {
                        *q.count.get() += 1;
                        libc::pthread_cond_signal(q.cv.get());
                    }
                    q.unlock();
                    if k % 64 == 0 {
                        weft::yield_now();
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    q.lock();
    // SAFETY: `mu` is held.
    unsafe {
        *q.done.get() = true;
        libc::pthread_cond_broadcast(q.cv.get());
    }
    q.unlock();
    for c in virtual_consumers {
        c.join().unwrap();
    }
    for c in os_consumers {
        c.join().unwrap();
    }
    assert_eq!(consumed.load(Ordering::Relaxed), ITEMS);
}
