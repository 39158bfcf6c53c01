//! A carrier that waits in the kernel for something Weft sees coming hands
//! its other threads off when the wait begins (the scheduler's
//! `blocked.rs`), not when the monitor finds it held past the stall
//! threshold: Go's `entersyscallblock`, issue #54's fourth goal.
//!
//! Each test runs one carrier with a stall threshold of an hour, so the
//! monitor never hands anything off. A started virtual thread (bound to
//! that carrier) answers pings; another thread of the carrier then waits
//! — for a C mutex, a `FILE` lock or a read-write lock an OS thread holds,
//! or in a pinned park — and the test pings again while the wait lasts.
//! The answer can only come if the bound thread ran elsewhere. Before, it
//! waited behind the carrier for the whole wait: the test stopped at its
//! watchdog. None asserts a time; the watchdog fires after minutes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The system allocator, counting the allocations of threads that ask.
struct Counting;

std::thread_local! {
    /// Allocations of this thread while `Some` (a virtual thread's own:
    /// it has its own thread-locals).
    static COUNT: Cell<Option<u64>> = const { Cell::new(None) };
}

// SAFETY: forwards to `System`; the count is a const-initialised
// thread-local that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get().map(|n| n + 1)));
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

use weft::Runtime;
use weft_native_tests::*;

/// Whether virtual threads get thread-local areas of their own here: only
/// those may move to another carrier.
fn areas_supported() -> bool {
    cfg!(all(
        target_os = "linux",
        target_arch = "x86_64",
        target_env = "gnu"
    )) && std::env::var_os("WEFT_THREAD_LOCALS").is_none()
}

/// The kernel's state letter and system call number of thread `tid`.
fn kernel_wait(tid: i32) -> Option<(char, i64)> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let state = stat[stat.rfind(')')? + 1..].trim_start().chars().next()?;
    let call = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    Some((state, call.split_whitespace().next()?.parse().ok()?))
}

/// A one-carrier runtime that never hands off on its own (a stall
/// threshold of an hour), with a started thread bound to its carrier that
/// answers each ping with a pong.
struct Echo {
    rt: Runtime,
    ping: weft::channel::Sender<u32>,
    pongs: std::sync::mpsc::Receiver<u32>,
    thread: weft::JoinHandle<()>,
}

impl Echo {
    /// `None` where threads have no areas of their own (they never move).
    fn start() -> Option<Echo> {
        if !areas_supported() {
            eprintln!("skipped: threads without areas of their own never move");
            return None;
        }
        let rt = Runtime::builder()
            .parallelism(1)
            .stall_threshold(Duration::from_secs(3600))
            .build()
            .unwrap();
        let (ping, pings) = weft::channel::unbounded::<u32>();
        let (pong, pongs) = std::sync::mpsc::channel::<u32>();
        let thread = rt.spawn(move || {
            for n in pings {
                pong.send(n).unwrap();
            }
        });
        // The echo thread has started, so it is bound to the one carrier.
        ping.send(1).unwrap();
        assert_eq!(pongs.recv_timeout(STUCK), Ok(1), "first ping");
        Some(Echo {
            rt,
            ping,
            pongs,
            thread,
        })
    }

    /// Ends the echo thread and the runtime.
    fn stop(self) {
        drop(self.ping);
        let thread = self.thread;
        within_watchdog("the echo thread", move || thread.join().unwrap());
    }
}

/// Runs `wait` on a virtual thread of an [`Echo`] runtime and checks that
/// the echo thread answers a ping while the wait lasts; `release` (called
/// on this OS thread) ends the wait.
fn bound_thread_runs_while_the_carrier_waits(
    what: &str,
    wait: impl FnOnce() + Send + 'static,
    release: impl FnOnce(),
) {
    let Some(echo) = Echo::start() else { return };
    let tid = Arc::new(AtomicI32::new(0));
    let t = tid.clone();
    let waiter = echo.rt.spawn(move || {
        // SAFETY: gettid has no preconditions.
        t.store(unsafe { libc::gettid() }, Ordering::SeqCst);
        wait();
    });
    // The carrier's OS thread sleeps in a futex wait (a progress check,
    // not a time: the wait lasts until `release`).
    let t0 = Instant::now();
    loop {
        let tid = tid.load(Ordering::SeqCst);
        if tid != 0 && kernel_wait(tid) == Some(('S', libc::SYS_futex)) {
            break;
        }
        assert!(t0.elapsed() < STUCK, "{what}: the carrier never waited");
        std::thread::sleep(Duration::from_millis(1));
    }
    echo.ping.send(2).unwrap();
    let answer = echo.pongs.recv_timeout(STUCK);
    release();
    assert_eq!(
        answer,
        Ok(2),
        "{what}: the bound thread did not run while its carrier waited"
    );
    within_watchdog("the waiter", move || waiter.join().unwrap());
    echo.stop();
}

#[test]
fn a_contended_c_mutex_hands_the_carrier_off() {
    let m = CMutex::new(libc::PTHREAD_MUTEX_NORMAL);
    assert_eq!(m.lock(), 0);
    let m2 = m.clone();
    bound_thread_runs_while_the_carrier_waits(
        "pthread_mutex_lock",
        move || {
            assert_eq!(m2.lock(), 0);
            assert_eq!(m2.unlock(), 0);
        },
        || assert_eq!(m.unlock(), 0),
    );
}

/// The blocking section may open inside a C allocator's own lock
/// (jemalloc takes its arena locks with `pthread_mutex_lock`), so the
/// waiting thread must not allocate in it: the carrier only raises flags
/// and the monitor does the rest. Before, the section boxed its guard and
/// the carrier moved its queues and started a spare itself.
#[test]
fn a_contended_c_mutex_allocates_nothing_on_the_waiting_thread() {
    let m = CMutex::new(libc::PTHREAD_MUTEX_NORMAL);
    assert_eq!(m.lock(), 0);
    let m2 = m.clone();
    let (count_tx, count_rx) = std::sync::mpsc::channel::<u64>();
    bound_thread_runs_while_the_carrier_waits(
        "pthread_mutex_lock, counting allocations",
        move || {
            COUNT.with(|c| c.set(Some(0)));
            let r = m2.lock();
            let n = COUNT.with(|c| c.replace(None)).unwrap();
            assert_eq!(r, 0);
            assert_eq!(m2.unlock(), 0);
            count_tx.send(n).unwrap();
        },
        || assert_eq!(m.unlock(), 0),
    );
    if let Ok(n) = count_rx.try_recv() {
        assert_eq!(n, 0, "the waiting thread allocated {n} times in the lock");
    }
}

#[test]
fn a_contended_file_lock_hands_the_carrier_off() {
    // SAFETY: fopen of a path that exists; the FILE is closed at the end.
    let file = unsafe { libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr()) } as usize;
    assert_ne!(file, 0);
    // SAFETY: an open FILE.
    unsafe { flockfile(file as *mut libc::FILE) };
    bound_thread_runs_while_the_carrier_waits(
        "flockfile",
        move || {
            // SAFETY: an open FILE, unlocked by this thread after.
            unsafe {
                flockfile(file as *mut libc::FILE);
                funlockfile(file as *mut libc::FILE);
            }
        },
        // SAFETY: locked above by this OS thread.
        || unsafe { funlockfile(file as *mut libc::FILE) },
    );
    // SAFETY: opened above, no longer used.
    unsafe { libc::fclose(file as *mut libc::FILE) };
}

/// A pthread read-write lock, shared by a test's threads.
struct CRwLock(std::cell::UnsafeCell<libc::pthread_rwlock_t>);
// SAFETY: a pthread rwlock is made to be shared between threads.
unsafe impl Sync for CRwLock {}
// SAFETY: as above; it is not tied to the thread that made it.
unsafe impl Send for CRwLock {}

#[test]
fn a_contended_rwlock_hands_the_carrier_off() {
    let l = Arc::new(CRwLock(std::cell::UnsafeCell::new(
        libc::PTHREAD_RWLOCK_INITIALIZER,
    )));
    // SAFETY: an initialised rwlock.
    assert_eq!(unsafe { libc::pthread_rwlock_wrlock(l.0.get()) }, 0);
    let l2 = l.clone();
    bound_thread_runs_while_the_carrier_waits(
        "pthread_rwlock_rdlock",
        move || {
            // SAFETY: an initialised rwlock, released by this thread after.
            unsafe {
                assert_eq!(libc::pthread_rwlock_rdlock(l2.0.get()), 0);
                assert_eq!(libc::pthread_rwlock_unlock(l2.0.get()), 0);
            }
        },
        // SAFETY: write-locked above by this OS thread.
        || assert_eq!(unsafe { libc::pthread_rwlock_unlock(l.0.get()) }, 0),
    );
}

#[test]
fn a_pinned_park_hands_the_carrier_off() {
    let (tx, rx) = std::sync::mpsc::channel::<weft::Thread>();
    bound_thread_runs_while_the_carrier_waits(
        "a pinned park",
        move || {
            tx.send(weft::current()).unwrap();
            weft::pinned(weft::park);
        },
        move || rx.recv().unwrap().unpark(),
    );
}

/// A thread already queued behind the carrier when it blocks — woken by
/// the waiter itself an instant before, so it sits in the carrier's `next`
/// slot — runs elsewhere too: the carrier pokes the monitor, which hands
/// its queues off. Before, it waited for the whole wait.
#[test]
fn a_thread_queued_behind_a_blocking_carrier_runs_elsewhere() {
    let Some(echo) = Echo::start() else { return };
    let m = CMutex::new(libc::PTHREAD_MUTEX_NORMAL);
    assert_eq!(m.lock(), 0);
    let (m2, ping2) = (m.clone(), echo.ping.clone());
    let waiter = echo.rt.spawn(move || {
        // Wakes the echo thread onto this carrier's queue, then blocks
        // before this carrier can run it.
        ping2.send(2).unwrap();
        assert_eq!(m2.lock(), 0);
        assert_eq!(m2.unlock(), 0);
    });
    let answer = echo.pongs.recv_timeout(STUCK);
    assert_eq!(m.unlock(), 0);
    assert_eq!(
        answer,
        Ok(2),
        "the queued thread did not run while its carrier waited"
    );
    within_watchdog("the waiter", move || waiter.join().unwrap());
    echo.stop();
}
