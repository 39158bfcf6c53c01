//! `connect`, `accept` and `accept4`.

use std::time::Duration;

use libc::{c_int, sockaddr, socklen_t};

use crate::libc_next::libc_own;
use crate::poll::Interest;
use crate::thread::Blocker;
use crate::transparent::call::{self, kernel_waits, sock_call};
use crate::transparent::fds::{self, classify, on_virtual};
use crate::transparent::iov::Iov;
use crate::transparent::state::{self, MANAGED, OTHER, UNKNOWN, USER_NB, state};
use crate::transparent::sys::{self, fail, raw, raw_nanosleep, ts_of};
use crate::transparent::wait::{self, Stop, park_io};

/// # Safety
/// libc's `connect(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    libc_own!(CONNECT(fd, addr, len) if kernel_waits(fd, false));
    let go = || raw!(libc::SYS_connect, fd, addr, len) as c_int;
    let st = state(fd);
    if st == OTHER || st == USER_NB {
        return go();
    }
    let virt = on_virtual();
    if st == UNKNOWN && !(virt && classify(fd) == MANAGED) {
        return go();
    }
    let r = go();
    if r == 0 {
        return r;
    }
    match sys::errno() {
        libc::EINPROGRESS => {}
        libc::EAGAIN if is_unix(fd) => return unix_connect_retry(fd, virt, go),
        _ => return r,
    }
    let timeout = sys::sock_timeout(fd, false);
    let deadline = wait::deadline_after(timeout);
    let mut done = false;
    if virt {
        let ready = || (sys::poll_one(fd, libc::POLLOUT, Some(Duration::ZERO)) != 0).then_some(());
        match park_io(fd, Interest::Write, deadline, "connect", ready) {
            Ok(()) => done = true,
            Err(Some(Stop::TimedOut)) => return fail(libc::EINPROGRESS) as c_int,
            Err(Some(Stop::Gone)) => return fail(libc::EBADF) as c_int,
            Err(Some(Stop::Interrupted)) => return fail(libc::EINTR) as c_int,
            Err(None) => {}
        }
    }
    if !done {
        match call::wait_one(fd, libc::POLLOUT, timeout) {
            0 => return fail(libc::EINPROGRESS) as c_int,
            p if p < 0 => return -1,
            _ => {}
        }
    }
    match sys::so_error(fd) {
        0 => 0,
        e => fail(e) as c_int,
    }
}

/// Whether `fd` is an `AF_UNIX` socket (`SO_DOMAIN`). Keeps errno.
fn is_unix(fd: c_int) -> bool {
    sys::socket_int(fd, libc::SO_DOMAIN) == Some(libc::AF_UNIX)
}

/// A blocking `connect` on a Unix stream socket whose listener's backlog
/// is full waits (in the kernel, until the listener accepts) where a
/// non-blocking one fails with `EAGAIN`. That wait has no readiness to
/// poll for, so the call is retried after sleeps that double from 1 ms to
/// 64 ms (parking a virtual thread; on an OS thread a plain sleep), until
/// it succeeds, fails otherwise, the `SO_SNDTIMEO` deadline passes
/// (`EAGAIN`, as the kernel's) or the thread is interrupted (`EINTR`).
fn unix_connect_retry(fd: c_int, virt: bool, mut go: impl FnMut() -> c_int) -> c_int {
    let deadline = wait::deadline_after(sys::sock_timeout(fd, false));
    let mut step = Duration::from_millis(1);
    let mut counted = false;
    loop {
        let now = crate::clock::now();
        if deadline.is_some_and(|d| now >= d) {
            return fail(libc::EAGAIN) as c_int;
        }
        let until = now + step;
        let until = deadline.map_or(until, |d| d.min(until));
        if virt && fd > 2 {
            if !counted {
                counted = true;
                crate::transparent::count_park("connect");
            }
            if crate::thread::take_interrupt() {
                return fail(libc::EINTR) as c_int;
            }
            let saved = sys::errno();
            crate::thread::with_blocker(
                Blocker::Call {
                    call: "connect",
                    fd,
                },
                || crate::thread::park_deadline(Some(until)),
            );
            sys::set_errno(saved);
        } else {
            let ts = ts_of(until.saturating_duration_since(crate::clock::now()));
            if raw_nanosleep(&ts, std::ptr::null_mut()) < 0 {
                return -1; // EINTR: a signal, as the kernel's wait would
            }
        }
        step = (step * 2).min(Duration::from_millis(64));
        let r = go();
        if r == 0 || sys::errno() != libc::EAGAIN {
            return r;
        }
    }
}

fn accepted(r: isize, flags: c_int) -> c_int {
    if r >= 0 {
        let fd = r as c_int;
        fds::forget(fd);
        if flags & libc::SOCK_NONBLOCK != 0 {
            state::set_state(fd, USER_NB);
        }
    }
    r as c_int
}

/// # Safety
/// libc's `accept(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn accept(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    libc_own!(ACCEPT(fd, addr, len) if kernel_waits(fd, false), then |r| accepted(r as isize, 0));
    let r = sock_call(fd, true, "accept", false, Iov::None, None, |_, _| {
        raw!(libc::SYS_accept4, fd, addr, len, 0) as isize
    });
    accepted(r, 0)
}

/// # Safety
/// libc's `accept4(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    libc_own!(
        ACCEPT4(fd, addr, len, flags) if kernel_waits(fd, false),
        then |r| accepted(r as isize, flags)
    );
    let r = sock_call(fd, true, "accept4", false, Iov::None, None, |_, _| {
        raw!(libc::SYS_accept4, fd, addr, len, flags) as isize
    });
    accepted(r, flags)
}
