//! A virtual thread keeps the thread contracts that C and C++ code and the
//! kernel rely on (ARCHITECTURE.md, "Thread-local areas"): each test is
//! one row of issue #38's table and failed before the change it names.
//!
//! Most tests run on a runtime of one carrier, so that two virtual
//! threads of the test share an OS thread: what one of them sets must not
//! be what the other sees. None asserts a time: a hang is caught by a
//! watchdog that only fires when nothing has finished for minutes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use weft::Runtime;
use weft_native_tests::*;

fn one_carrier(carrier_locals: bool) -> Runtime {
    let b = Runtime::builder().parallelism(1);
    let b = if carrier_locals {
        b.carrier_thread_locals()
    } else {
        b
    };
    b.build().unwrap()
}

/// Parks the calling virtual thread until `flag` is set (yields meanwhile,
/// so the other threads of its carrier run).
fn yield_until(flag: &AtomicBool) {
    while !flag.load(Ordering::Acquire) {
        weft::yield_now();
    }
}

// ---------------------------------------------------------------- row 1

/// A C shared library's `__thread` variables (reached through
/// `__tls_get_addr` and the `dtv`) are the virtual thread's own: writes
/// survive a park, and two threads of one carrier do not share them.
/// Before: the park reverted the writes (the carrier's block was mirrored
/// back from a stale copy) — 0 instead of 3.
#[test]
fn a_c_librarys_thread_locals_survive_a_park_and_are_per_thread() {
    let rt = one_carrier(false);
    let handles: Vec<_> = (0..3)
        .map(|i| {
            rt.spawn(move || {
                // SAFETY: plain C functions of the test library.
                unsafe {
                    let addr = weft_c_counter_addr() as usize;
                    for _ in 0..3 {
                        weft_c_counter_inc();
                        weft::yield_now();
                    }
                    weft_c_global_add(i);
                    weft::sleep(Duration::from_millis(10)).unwrap();
                    assert_eq!(addr, weft_c_counter_addr() as usize, "address moved");
                    (weft_c_counter_get(), weft_c_global_add(0), addr)
                }
            })
        })
        .collect();
    let mut addrs = Vec::new();
    for (i, h) in handles.into_iter().enumerate() {
        let (count, global, addr) = h.join().unwrap();
        assert_eq!(
            count, 3,
            "thread {i}: its C thread-local was reverted or shared"
        );
        assert_eq!(
            global,
            100 + i as i64,
            "thread {i}: initialised from the template"
        );
        addrs.push(addr);
    }
    addrs.sort_unstable();
    addrs.dedup();
    assert_eq!(addrs.len(), 3, "two virtual threads share a C thread-local");
}

// ---------------------------------------------------------------- row 2

/// A C++ library's `thread_local` object with heap memory and a
/// destructor, used by several virtual threads of one carrier: each has
/// its own, and each is destroyed once, when its thread ends (before
/// `join` returns). Before: the destructor was registered in the first
/// thread's area for the carrier's object and freed it when that thread
/// ended while the others kept using it (heap corruption, abort).
#[test]
fn a_cxx_thread_local_is_per_thread_and_destroyed_with_it() {
    let rt = one_carrier(false);
    // SAFETY: plain C functions of the test library.
    let before = unsafe { weft_cxx_destroyed() };
    let handles: Vec<_> = (0..4)
        .map(|_| {
            rt.spawn(|| {
                for k in 0..100 {
                    // SAFETY: as above.
                    unsafe { weft_cxx_push(k) };
                    if k % 10 == 0 {
                        weft::yield_now();
                    }
                }
                weft::sleep(Duration::from_millis(5)).unwrap();
                // SAFETY: as above.
                unsafe { weft_cxx_sum() }
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 4950);
    }
    // Other tests of this binary may end C++ threads of their own: at
    // least ours were destroyed.
    // SAFETY: as above.
    let destroyed = unsafe { weft_cxx_destroyed() } - before;
    assert!(
        destroyed >= 4,
        "{destroyed} of 4 thread_local objects destroyed"
    );
}

// ------------------------------------------------------------ dlopen (1)

/// A module loaded with `dlopen` after the threads exist: its
/// thread-locals are made for each virtual thread on first use, from
/// the template (glibc's dynamic TLS), and are the thread's own.
/// Before: they were the carrier's, shared by its threads.
#[test]
fn a_dlopened_librarys_thread_locals_are_per_thread() {
    let path = std::ffi::CString::new(DYN_TLS_LIB).unwrap();
    // SAFETY: dlopen/dlsym of the test library, whose functions have the
    // signatures below; the handle is kept for the process's life.
    let (get, set) = unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW);
        assert!(!h.is_null(), "dlopen {DYN_TLS_LIB}");
        let get = libc::dlsym(h, c"weft_dyn_get".as_ptr());
        let set = libc::dlsym(h, c"weft_dyn_set".as_ptr());
        assert!(!get.is_null() && !set.is_null());
        (
            std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> libc::c_long>(get),
            std::mem::transmute::<*mut libc::c_void, extern "C" fn(libc::c_long)>(set),
        )
    };
    let rt = one_carrier(false);
    let handles: Vec<_> = (0..3)
        .map(|i| {
            rt.spawn(move || {
                let first = get();
                set(1000 + i);
                weft::sleep(Duration::from_millis(10)).unwrap();
                weft::yield_now();
                (first, get())
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), (7, 1000 + i as i64), "thread {i}");
    }
}

// ---------------------------------------------------------------- row 3

fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity writes the set it is given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn pin_os_thread_to(cpus: &[usize]) {
    // SAFETY: sched_setaffinity reads the set; 0 is the calling OS thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        assert_eq!(
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

/// `sched_getcpu` (which glibc answers from its rseq area, updated by the
/// kernel) gives the CPU the virtual thread runs on. Before: the area's
/// copy of `struct rseq` was never updated, so it gave the CPU of the
/// moment the area was made. The carrier is moved between CPUs by
/// affinity, so the answer is known.
#[test]
fn sched_getcpu_follows_the_carrier() {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("skipped: needs two CPUs, has {cpus:?}");
        return;
    }
    let (a, b) = (cpus[0], cpus[1]);
    let rt = one_carrier(false);
    // The carrier on CPU `a` when the next thread's area is made.
    rt.spawn(move || pin_os_thread_to(&[a])).join().unwrap();
    let all = cpus.clone();
    let wrong = rt
        .spawn(move || {
            let mut wrong = Vec::new();
            for cpu in [b, a, b] {
                pin_os_thread_to(&[cpu]);
                for _ in 0..10 {
                    // SAFETY: no preconditions.
                    let got = unsafe { libc::sched_getcpu() };
                    if got != cpu as i32 {
                        wrong.push((cpu, got));
                    }
                }
            }
            pin_os_thread_to(&all);
            wrong
        })
        .join()
        .unwrap();
    assert!(wrong.is_empty(), "(expected, sched_getcpu): {wrong:?}");
}

// ----------------------------------------------------------- rows 4 and 5

/// Row 4: a recursive C mutex held across a park by one virtual thread;
/// a second thread of the same carrier tries it. Before: both were inside
/// the critical section (the owner is the kernel thread id, which the two
/// share). Now the holder keeps its carrier while it holds the lock (and
/// the wait is reported as a pinned event naming the C lock), so the
/// second thread runs either after the unlock or on another OS thread (a
/// spare carrier), where the lock is busy: never inside with the first.
fn recursive_mutex_has_one_owner(carrier_locals: bool) {
    let rt = one_carrier(carrier_locals);
    for kind in [
        libc::PTHREAD_MUTEX_RECURSIVE,
        libc::PTHREAD_MUTEX_ERRORCHECK,
    ] {
        let m = CMutex::new(kind);
        let locked = Arc::new(AtomicBool::new(false));
        let inside = Arc::new(AtomicBool::new(false));
        let (m1, l1, i1) = (m.clone(), locked.clone(), inside.clone());
        let holder = rt.spawn(move || {
            assert_eq!(m1.lock(), 0);
            i1.store(true, Ordering::SeqCst);
            l1.store(true, Ordering::Release);
            weft::sleep(Duration::from_millis(20)).unwrap();
            i1.store(false, Ordering::SeqCst);
            assert_eq!(m1.unlock(), 0);
        });
        let (m2, l2, i2) = (m.clone(), locked.clone(), inside.clone());
        let other = rt.spawn(move || {
            yield_until(&l2);
            let r = m2.trylock();
            let overlapped = r == 0 && i2.load(Ordering::SeqCst);
            if r == 0 {
                m2.unlock();
            }
            (r, overlapped)
        });
        let (r, overlapped) = within_watchdog("recursive mutex", move || {
            holder.join().unwrap();
            other.join().unwrap()
        });
        assert!(!overlapped, "kind {kind}: two owners of one C mutex");
        // While the holder waits pinned, a spare carrier may run the
        // second thread on another OS thread: there the lock is busy.
        assert!(r == 0 || r == libc::EBUSY, "kind {kind}: trylock gave {r}");
    }
    assert!(
        weft::events::recent()
            .iter()
            .any(|e| e.kind == weft::events::EventKind::Pinned
                && e.detail.as_deref().is_some_and(|d| d.contains("C lock"))),
        "no pinned event names the C lock"
    );
}

#[test]
fn a_recursive_c_mutex_held_across_a_park_has_one_owner() {
    recursive_mutex_has_one_owner(false);
}

#[test]
fn a_recursive_c_mutex_has_one_owner_with_carrier_thread_locals() {
    recursive_mutex_has_one_owner(true);
}

/// Row 5: a normal C mutex (and a `FILE` lock) held across a park, wanted
/// by a second thread of the same carrier. Before: the second blocked in
/// the kernel and the owner, parked behind it on the same OS thread,
/// could never release it — the carrier deadlocked.
fn held_c_locks_do_not_deadlock_the_carrier(carrier_locals: bool) {
    let rt = one_carrier(carrier_locals);
    let m = CMutex::new(libc::PTHREAD_MUTEX_NORMAL);
    // SAFETY: fopen of a path that exists; the FILE is closed at the end.
    let file = unsafe { libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr()) } as usize;
    assert_ne!(file, 0);
    let locked = Arc::new(AtomicBool::new(false));
    let order = Arc::new(AtomicU32::new(0));
    let (m1, l1, o1) = (m.clone(), locked.clone(), order.clone());
    let holder = rt.spawn(move || {
        assert_eq!(m1.lock(), 0);
        // SAFETY: an open FILE.
        unsafe { flockfile(file as *mut libc::FILE) };
        l1.store(true, Ordering::Release);
        weft::sleep(Duration::from_millis(20)).unwrap();
        o1.fetch_add(1, Ordering::SeqCst);
        // SAFETY: locked above by this thread.
        unsafe { funlockfile(file as *mut libc::FILE) };
        assert_eq!(m1.unlock(), 0);
    });
    let (m2, l2, o2) = (m.clone(), locked.clone(), order.clone());
    let other = rt.spawn(move || {
        yield_until(&l2);
        assert_eq!(m2.lock(), 0);
        // SAFETY: an open FILE.
        unsafe { flockfile(file as *mut libc::FILE) };
        let seen = o2.load(Ordering::SeqCst);
        // SAFETY: locked above by this thread.
        unsafe { funlockfile(file as *mut libc::FILE) };
        assert_eq!(m2.unlock(), 0);
        seen
    });
    let seen = within_watchdog("normal mutex and FILE lock", move || {
        holder.join().unwrap();
        other.join().unwrap()
    });
    assert_eq!(
        seen, 1,
        "the second thread got the locks while the first held them"
    );
    // SAFETY: opened above, no longer used.
    unsafe { libc::fclose(file as *mut libc::FILE) };
}

#[test]
fn c_locks_held_across_a_park_do_not_deadlock_the_carrier() {
    held_c_locks_do_not_deadlock_the_carrier(false);
}

#[test]
fn c_locks_do_not_deadlock_with_carrier_thread_locals() {
    held_c_locks_do_not_deadlock_the_carrier(true);
}

/// Released locks unpin: after the unlock, a park unmounts again (the
/// carrier runs another thread meanwhile).
#[test]
fn a_released_c_lock_no_longer_pins() {
    let rt = one_carrier(false);
    let m = CMutex::new(libc::PTHREAD_MUTEX_RECURSIVE);
    let flag = Arc::new(AtomicBool::new(false));
    let (m1, f1) = (m.clone(), flag.clone());
    let parked = rt.spawn(move || {
        assert_eq!(m1.lock(), 0);
        assert_eq!(m1.lock(), 0);
        assert_eq!(m1.unlock(), 0);
        assert_eq!(m1.unlock(), 0);
        // An unlock of a lock not held does not unpin below zero.
        assert_ne!(m1.unlock(), 0);
        // Unpinned: this park lets the other thread of the carrier run.
        yield_until(&f1);
    });
    let f2 = flag.clone();
    let setter = rt.spawn(move || f2.store(true, Ordering::Release));
    within_watchdog("unpinned park", move || {
        parked.join().unwrap();
        setter.join().unwrap();
    });
}

// ---------------------------------------------------------------- row 8

/// `setuid` in a threaded process signals every thread and waits until
/// each has changed its credentials. Before: on a carrier running a
/// CPU-bound virtual thread, glibc's handler cleared the flag in the
/// area's copy of the thread's TCB, so `setuid` kept signalling until the
/// thread unmounted (here: never, since the thread computes until setuid
/// has returned).
#[test]
fn setuid_returns_while_a_virtual_thread_computes() {
    let rt = one_carrier(false);
    let started = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (s1, t1) = (started.clone(), stop.clone());
    let spinner = rt.spawn(move || {
        s1.store(true, Ordering::Release);
        let t0 = std::time::Instant::now();
        while !t1.load(Ordering::Acquire) {
            std::hint::spin_loop();
            if t0.elapsed() > Duration::from_secs(120) {
                return false; // setuid never returned: stuck
            }
        }
        true
    });
    while !started.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    // SAFETY: setting the user id to the one the process has.
    let r = unsafe { libc::setuid(libc::getuid()) };
    stop.store(true, Ordering::Release);
    assert_eq!(r, 0);
    assert!(
        spinner.join().unwrap(),
        "setuid did not return while the virtual thread computed"
    );
}

// ---------------------------------------------------------------- row 9

/// `pthread_getattr_np(pthread_self())` on a virtual thread describes the
/// virtual thread's stack (the one its locals are on). Before: the
/// carrier's.
#[test]
fn pthread_getattr_np_describes_the_virtual_threads_stack() {
    let rt = one_carrier(false);
    let (lo, size, local) = rt
        .spawn(|| {
            let local = 0u8;
            let (lo, size) = own_stack();
            (lo, size, std::hint::black_box(&local) as *const u8 as usize)
        })
        .join()
        .unwrap();
    assert!(
        (lo..lo + size).contains(&local),
        "a local at {local:#x} is outside the reported stack {lo:#x}+{size:#x}"
    );
    assert!(
        size <= weft::DEFAULT_STACK_SIZE,
        "{size} bytes: the carrier's stack?"
    );
}

// --------------------------------------------------------------- row 10

/// `errno` is per thread: a value set before a park is there after it,
/// whatever another thread of the carrier set meanwhile. Before: the
/// other thread's value.
fn errno_is_per_thread(carrier_locals: bool) {
    let rt = one_carrier(carrier_locals);
    let set = Arc::new(AtomicBool::new(false));
    let other_done = Arc::new(AtomicBool::new(false));
    let (s1, d1) = (set.clone(), other_done.clone());
    let a = rt.spawn(move || {
        set_errno(1234);
        s1.store(true, Ordering::Release);
        yield_until(&d1);
        errno()
    });
    let (s2, d2) = (set.clone(), other_done.clone());
    let b = rt.spawn(move || {
        yield_until(&s2);
        set_errno(5678);
        d2.store(true, Ordering::Release);
        weft::yield_now();
        errno()
    });
    let (ea, eb) = within_watchdog("errno", move || (a.join().unwrap(), b.join().unwrap()));
    assert_eq!((ea, eb), (1234, 5678));
}

#[test]
fn errno_is_per_virtual_thread() {
    errno_is_per_thread(false);
}

#[test]
fn errno_is_per_virtual_thread_with_carrier_thread_locals() {
    errno_is_per_thread(true);
}
