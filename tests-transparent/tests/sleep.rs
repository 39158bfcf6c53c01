//! Step 1: sleeps park virtual threads, and stay plain sleeps on OS threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weft_transparent_tests::strict_runtime;

fn parks(call: &str) -> u64 {
    weft::transparent::parks()
        .into_iter()
        .find(|(c, _)| *c == call)
        .map_or(0, |(_, n)| n)
}

/// On one carrier with no spares, a second thread runs while the first is
/// inside `std::thread::sleep`: the sleep unmounted. Without the hooks the
/// second thread only runs after the sleep, and sees the first finished.
#[test]
fn std_sleep_parks_the_virtual_thread() {
    let rt = strict_runtime(1);
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let a = rt.spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        d.store(true, Ordering::SeqCst);
    });
    let at = a.thread().clone();
    let seen = rt
        .spawn(move || {
            // The first thread started before us (FIFO on one carrier).
            (done.load(Ordering::SeqCst), at.blocker())
        })
        .join()
        .unwrap();
    a.join().unwrap();
    assert!(!seen.0, "the second thread ran only after the sleep ended");
    // std sleeps with clock_nanosleep (recent glibc targets) or nanosleep.
    assert!(
        matches!(
            seen.1,
            weft::Blocker::Call {
                call: "nanosleep" | "clock_nanosleep",
                fd: -1
            }
        ),
        "{:?}",
        seen.1
    );
}

/// libc's sleep family on a virtual thread: each parks, each is counted.
#[test]
fn sleep_family_parks() {
    let rt = strict_runtime(1);
    let (n0, u0, c0, s0) = (
        parks("nanosleep"),
        parks("usleep"),
        parks("clock_nanosleep"),
        parks("sleep"),
    );
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let sleeper = rt.spawn(move || {
        // SAFETY: plain libc calls with valid arguments.
        unsafe {
            assert_eq!(libc::usleep(20_000), 0);
            let ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 20_000_000,
            };
            assert_eq!(libc::nanosleep(&ts, std::ptr::null_mut()), 0);
            let mut now = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
            now.tv_nsec += 20_000_000;
            if now.tv_nsec >= 1_000_000_000 {
                now.tv_sec += 1;
                now.tv_nsec -= 1_000_000_000;
            }
            let r = libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &now,
                std::ptr::null_mut(),
            );
            assert_eq!(r, 0);
            assert_eq!(libc::sleep(1), 0);
        }
        f.store(true, Ordering::SeqCst)
    });
    // Runs on the same carrier during those sleeps.
    let ran_during = rt
        .spawn(move || !flag.load(Ordering::SeqCst))
        .join()
        .unwrap();
    sleeper.join().unwrap();
    assert!(ran_during);
    assert!(parks("usleep") > u0);
    assert!(parks("nanosleep") > n0);
    assert!(parks("clock_nanosleep") > c0);
    assert!(parks("sleep") > s0);
}

/// Invalid arguments fail like libc's, on virtual and OS threads alike.
#[test]
fn nanosleep_einval() {
    let bad = libc::timespec {
        tv_sec: 0,
        tv_nsec: 2_000_000_000,
    };
    let check = move || {
        // SAFETY: valid pointers; the value is invalid on purpose.
        let r = unsafe { libc::nanosleep(&bad, std::ptr::null_mut()) };
        (r, std::io::Error::last_os_error().raw_os_error())
    };
    assert_eq!(check(), (-1, Some(libc::EINVAL)));
    let rt = strict_runtime(1);
    assert_eq!(rt.spawn(check).join().unwrap(), (-1, Some(libc::EINVAL)));
}

/// `Thread::interrupt` ends a hooked `nanosleep` with `EINTR` and the time
/// left; `std::thread::sleep` (which retries on `EINTR`) sleeps on.
#[test]
fn interrupt_ends_nanosleep_with_eintr() {
    let rt = strict_runtime(1);
    let a = rt.spawn(|| {
        let req = libc::timespec {
            tv_sec: 3600,
            tv_nsec: 0,
        };
        let mut rem = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid pointers.
        let r = unsafe { libc::nanosleep(&req, &mut rem) };
        let e = std::io::Error::last_os_error().raw_os_error();
        (r, e, rem.tv_sec, weft::interrupted())
    });
    let t = a.thread().clone();
    rt.spawn(move || {
        // Runs once the sleeper parked (one carrier, FIFO).
        assert!(matches!(
            t.blocker(),
            weft::Blocker::Call {
                call: "nanosleep",
                ..
            }
        ));
        t.interrupt();
    })
    .join()
    .unwrap();
    let (r, e, left, still_flagged) = a.join().unwrap();
    assert_eq!((r, e), (-1, Some(libc::EINTR)));
    assert!(left > 3000, "time left {left}");
    assert!(!still_flagged, "the interrupt is consumed by the EINTR");
}

/// On an OS thread the hooks pass through: the sleep happens (and takes
/// its time on that OS thread; there is no virtual thread to park).
#[test]
fn os_thread_sleep_unchanged() {
    let t = std::thread::spawn(|| {
        let t0 = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1,
        };
        // SAFETY: valid pointers.
        let r = unsafe { libc::nanosleep(&ts, &mut ts) };
        (
            t0.elapsed() >= Duration::from_millis(20),
            r,
            weft::is_virtual(),
        )
    });
    assert_eq!(t.join().unwrap(), (true, 0, false));
}

/// Inside `weft::pinned` a hooked call keeps the carrier (the tool for I/O
/// done under a `std::sync::Mutex` shared by virtual threads).
#[test]
fn pinned_sleep_keeps_the_carrier() {
    let rt = strict_runtime(1);
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let a = rt.spawn(move || {
        weft::pinned(|| std::thread::sleep(Duration::from_millis(100)));
        d.store(true, Ordering::SeqCst);
    });
    let after = rt
        .spawn(move || done.load(Ordering::SeqCst))
        .join()
        .unwrap();
    a.join().unwrap();
    assert!(
        after,
        "the second thread ran while the pinned sleep held the carrier"
    );
}

/// A `fork` child has no carriers: its hooked calls pass through.
#[test]
fn fork_child_passes_through() {
    let rt = strict_runtime(1);
    let status = rt
        .spawn(|| {
            std::thread::sleep(Duration::from_millis(1)); // hooks armed
            // SAFETY: the child only makes async-signal-safe calls
            // (nanosleep through the hook's raw path, _exit).
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 1_000_000,
                };
                // SAFETY: valid pointer; _exit ends the child.
                unsafe {
                    let r = libc::nanosleep(&ts, std::ptr::null_mut());
                    libc::_exit(if r == 0 { 7 } else { 1 });
                }
            }
            let mut st = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            libc::WEXITSTATUS(st)
        })
        .join()
        .unwrap();
    assert_eq!(status, 7);
}
