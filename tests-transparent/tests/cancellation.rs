//! The hooked blocking calls are pthread cancellation points on OS
//! threads, as libc's are: a C thread blocked in `read`, in a wait on a
//! socket Weft manages, or in `nanosleep` is cancelled by `pthread_cancel`
//! (it stayed blocked for ever when the hooks issued raw system calls).
//!
//! The cancelled threads run `extern "C-unwind"` code with nothing to drop
//! (glibc unwinds them), and declare the hooked functions `C-unwind` too,
//! as C code that can be cancelled is.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use libc::{c_int, c_void, pthread_t, size_t, ssize_t, timespec};
use weft_transparent_tests::{one_at_a_time, socketpair, strict_runtime, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

/// glibc's `PTHREAD_CANCELED`, `((void *) -1)`: what a cancelled thread's
/// join returns.
const PTHREAD_CANCELED: *mut c_void = usize::MAX as *mut c_void;

unsafe extern "C-unwind" {
    #[link_name = "read"]
    fn c_read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t;
    #[link_name = "nanosleep"]
    fn c_nanosleep(req: *const timespec, rem: *mut timespec) -> c_int;
    #[link_name = "pthread_create"]
    fn c_pthread_create(
        th: *mut pthread_t,
        attr: *const libc::pthread_attr_t,
        start: extern "C-unwind" fn(*mut c_void) -> *mut c_void,
        arg: *mut c_void,
    ) -> c_int;
}

/// What a cancellable thread does, and where it tells its kernel id.
struct Job {
    tid: AtomicI32,
    fd: c_int,
}

extern "C-unwind" fn reads(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `arg` is the `Job` the test keeps alive until the join.
    let job = unsafe { &*(arg as *const Job) };
    // SAFETY: gettid takes nothing.
    job.tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
    let mut b = 0u8;
    // SAFETY: one byte into a local.
    unsafe { c_read(job.fd, (&mut b as *mut u8).cast(), 1) };
    std::ptr::null_mut()
}

extern "C-unwind" fn sleeps(arg: *mut c_void) -> *mut c_void {
    // SAFETY: as in `reads`.
    let job = unsafe { &*(arg as *const Job) };
    // SAFETY: gettid takes nothing.
    job.tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
    let ts = timespec {
        tv_sec: 3600,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec; no remainder asked for.
    unsafe { c_nanosleep(&ts, std::ptr::null_mut()) };
    std::ptr::null_mut()
}

/// The system call thread `tid` of this process is blocked in, if it is
/// sleeping in one (`/proc/self/task/<tid>/syscall`'s first field).
fn blocked_in(tid: i32) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let state = stat.rsplit(')').next()?.split_whitespace().next()?;
    if state != "S" {
        return None;
    }
    let sc = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    sc.split_whitespace().next()?.parse().ok()
}

/// Starts `body` on a new OS thread, waits until it is blocked in one of
/// the system calls `calls`, cancels it, and returns what its join gave:
/// `PTHREAD_CANCELED` if it was cancelled. `release` ends the wait if the
/// cancellation did not (so the test fails rather than hangs).
fn cancel_while_blocked(
    body: extern "C-unwind" fn(*mut c_void) -> *mut c_void,
    fd: c_int,
    calls: &[i64],
    release: impl FnOnce(),
) -> *mut c_void {
    let job = Box::new(Job {
        tid: AtomicI32::new(0),
        fd,
    });
    let mut th: pthread_t = 0;
    let arg = &*job as *const Job as *mut c_void;
    // SAFETY: a valid start routine and an argument alive until the join.
    assert_eq!(
        unsafe { c_pthread_create(&mut th, std::ptr::null(), body, arg) },
        0
    );
    let seen = Instant::now();
    loop {
        let tid = job.tid.load(Ordering::SeqCst);
        if tid != 0 && blocked_in(tid).is_some_and(|n| calls.contains(&n)) {
            break;
        }
        assert!(
            seen.elapsed() < LIMIT / 2,
            "the thread never blocked in {calls:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: `th` is a joinable thread of ours.
    assert_eq!(unsafe { libc::pthread_cancel(th) }, 0);
    let tid = job.tid.load(Ordering::SeqCst);
    let asked = Instant::now();
    while std::path::Path::new(&format!("/proc/self/task/{tid}")).exists() {
        if asked.elapsed() > Duration::from_secs(10) {
            release();
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut ret = std::ptr::null_mut();
    // SAFETY: joining our own thread once.
    assert_eq!(unsafe { libc::pthread_join(th, &mut ret) }, 0);
    drop(job);
    ret
}

fn write1(fd: c_int) {
    // SAFETY: one byte from a local to our own descriptor.
    unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) };
}

/// An OS thread blocked in `read` on a pipe (a descriptor Weft leaves to
/// the kernel).
#[test]
fn a_read_on_an_os_thread_is_a_cancellation_point() {
    let _one = one_at_a_time();
    let _dog = watchdog("a_read_on_an_os_thread_is_a_cancellation_point", LIMIT);
    let mut p = [0 as c_int; 2];
    // SAFETY: a pipe into a 2-int array.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    let ret = cancel_while_blocked(reads, p[0], &[libc::SYS_read], || write1(p[1]));
    assert_eq!(ret, PTHREAD_CANCELED, "the blocked read was not cancelled");
    for fd in p {
        // SAFETY: closing our own descriptors.
        unsafe { libc::close(fd) };
    }
}

/// An OS thread blocked reading a socket Weft manages (a virtual thread
/// read it first, so it is non-blocking in the kernel and the hook waits
/// in `ppoll`).
#[test]
fn a_wait_on_a_managed_socket_is_a_cancellation_point() {
    let _one = one_at_a_time();
    let _dog = watchdog("a_wait_on_a_managed_socket_is_a_cancellation_point", LIMIT);
    let rt = strict_runtime(1);
    let sv = socketpair();
    let fd = sv[0];
    write1(sv[1]);
    let first = rt
        .spawn(move || {
            let mut b = 0u8;
            // SAFETY: one byte into a local.
            unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) }
        })
        .join()
        .unwrap();
    assert_eq!(first, 1);
    let ret = cancel_while_blocked(reads, fd, &[libc::SYS_ppoll, libc::SYS_poll], || {
        write1(sv[1])
    });
    assert_eq!(ret, PTHREAD_CANCELED, "the blocked wait was not cancelled");
    for fd in sv {
        // SAFETY: closing our own descriptors.
        unsafe { libc::close(fd) };
    }
}

/// An OS thread in a long `nanosleep`.
#[test]
fn a_sleep_on_an_os_thread_is_a_cancellation_point() {
    let _one = one_at_a_time();
    let _dog = watchdog("a_sleep_on_an_os_thread_is_a_cancellation_point", LIMIT);
    let calls = [libc::SYS_nanosleep, libc::SYS_clock_nanosleep];
    // Nothing to release it early: the watchdog ends a test whose sleep
    // was not cancelled.
    let ret = cancel_while_blocked(sleeps, -1, &calls, || {});
    assert_eq!(ret, PTHREAD_CANCELED, "the sleep was not cancelled");
}
