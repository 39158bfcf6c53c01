//! Each carrier asks the kernel for a time slice of its own
//! (`sched/slice.rs`, ARCHITECTURE.md "Sharing the cores"), keeps its
//! policy and nice value while it does, and the OS threads and processes
//! started on it start with the kernel's default.
//!
//! The slice a thread runs with is read from `/proc/self/task/TID/sched`
//! (`se.slice`, in nanoseconds). A kernel that does not show it, or that
//! is older than 6.12 (it accepts the request and ignores it), cannot be
//! checked: those tests say so and pass.

mod common;

use std::time::Duration;
use weft::Runtime;

/// The slice of this process's thread `tid`, in nanoseconds.
fn slice_of(tid: i32) -> Option<u64> {
    let sched = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).ok()?;
    let line = sched.lines().find(|l| l.starts_with("se.slice"))?;
    line.split(':').nth(1)?.trim().parse().ok()
}

/// The calling OS thread's slice (on a virtual thread: its carrier's).
fn own_slice() -> Option<u64> {
    slice_of(common::gettid())
}

/// Whether custom slices can be seen here: Linux 6.12 or later, showing
/// `se.slice`. Says why not otherwise.
fn observable() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    if (major, minor) < (6, 12) {
        eprintln!("skipped: Linux {release} predates per-thread slices (6.12)");
        return false;
    }
    if own_slice().is_none() {
        eprintln!("skipped: this kernel does not show se.slice in /proc/self/task/TID/sched");
        return false;
    }
    true
}

/// Runs `f` on a virtual thread of a fresh two-carrier runtime built with
/// `slice` (None: the default), and returns its result.
fn on_runtime<T: Send + 'static>(
    slice: Option<Duration>,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let mut b = Runtime::builder().parallelism(2);
    if let Some(s) = slice {
        b = b.carrier_time_slice(s);
    }
    let rt = b.build().expect("runtime");
    rt.spawn(f).join().expect("virtual thread")
}

#[test]
fn carriers_ask_for_the_default_slice() {
    if !observable() {
        return;
    }
    let carrier = on_runtime(None, own_slice);
    assert_eq!(
        carrier,
        Some(weft::DEFAULT_CARRIER_TIME_SLICE.as_nanos() as u64)
    );
    // The test's own thread was left alone.
    assert_ne!(own_slice(), carrier);
}

#[test]
fn the_slice_is_configurable_and_zero_keeps_the_kernels() {
    if !observable() {
        return;
    }
    let kernels = own_slice();
    assert_eq!(
        on_runtime(Some(Duration::from_millis(2)), own_slice),
        Some(2_000_000)
    );
    assert_eq!(on_runtime(Some(Duration::ZERO), own_slice), kernels);
}

#[test]
fn os_threads_started_on_a_carrier_get_the_kernels_default() {
    if !observable() {
        return;
    }
    let kernels = own_slice();
    let (carrier, started) = on_runtime(None, || {
        let started = std::thread::spawn(own_slice).join().expect("OS thread");
        (own_slice(), started)
    });
    assert_eq!(
        carrier,
        Some(weft::DEFAULT_CARRIER_TIME_SLICE.as_nanos() as u64)
    );
    assert_eq!(started, kernels, "the OS thread kept its creator's slice");
}

#[test]
fn processes_started_on_a_carrier_get_the_kernels_default() {
    if !observable() {
        return;
    }
    let kernels = own_slice();
    let child = on_runtime(None, || {
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", "grep '^se.slice' /proc/self/sched"])
            .output()
            .expect("sh");
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    let child: Option<u64> = child.split(':').nth(1).and_then(|v| v.trim().parse().ok());
    assert_eq!(child, kernels, "the process kept its creator's slice");
}

/// A carrier's request writes back the nice value it read: built from an
/// OS thread at nice 3 (which its carriers inherit), they stay at 3. A
/// request that wrote nice 0 would fail unprivileged (`EPERM`) and, as
/// root, raise the carriers.
#[test]
fn the_request_keeps_the_nice_value() {
    if !observable() {
        return;
    }
    let (nice, slice) = std::thread::spawn(|| {
        // SAFETY: setpriority of the calling OS thread (raising one's own
        // nice value needs no privilege).
        let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 3) };
        assert_eq!(r, 0, "setpriority: {}", std::io::Error::last_os_error());
        on_runtime(None, || {
            // SAFETY: clearing errno, then getpriority of the calling thread.
            let nice = unsafe {
                *libc::__errno_location() = 0;
                libc::getpriority(libc::PRIO_PROCESS, 0)
            };
            (nice, own_slice())
        })
    })
    .join()
    .expect("builder thread");
    assert_eq!(nice, 3);
    assert_eq!(
        slice,
        Some(weft::DEFAULT_CARRIER_TIME_SLICE.as_nanos() as u64)
    );
}

#[test]
fn slices_outside_the_kernels_range_are_refused() {
    for bad in [Duration::from_micros(50), Duration::from_millis(101)] {
        let e = Runtime::builder()
            .parallelism(1)
            .carrier_time_slice(bad)
            .build()
            .expect_err("out of range");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("carrier_time_slice"), "{e}");
    }
    for good in [
        Duration::ZERO,
        Duration::from_micros(100),
        Duration::from_millis(100),
    ] {
        Runtime::builder()
            .parallelism(1)
            .carrier_time_slice(good)
            .build()
            .expect("in range");
    }
}
