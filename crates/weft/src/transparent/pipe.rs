//! Calls on pipes and FIFOs (state `PIPE`): tried with `RWF_NOWAIT`,
//! parked on the poller (module docs, "Open-ended waits").

use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use libc::c_int;

use super::fds::on_virtual;
use super::iov::{Iov, advance};
use super::regs::registration;
use super::sys::{self, fail, raw, unless_eagain};
use super::wait::{Offloaded, Stop, park_hooked, park_io};
use crate::poll::Interest;
use crate::thread::Blocker;

/// `RWF_NOWAIT` on pipes: 0 not tried yet, 1 works, 2 refused
/// (`EOPNOTSUPP`/`EINVAL`/`ENOSYS`: a kernel older than 5.8).
static NOWAIT: AtomicU8 = AtomicU8::new(0);

fn nowait_refused(r: isize) -> bool {
    r < 0 && matches!(sys::errno(), libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS)
}

/// `preadv2`/`pwritev2(fd, iov, cnt, -1, RWF_NOWAIT)`: the call at the
/// file's own position (a pipe has none) that returns `EAGAIN` instead of
/// waiting, whatever the description's `O_NONBLOCK` says.
fn rw_nowait(fd: c_int, read: bool, iov: *const libc::iovec, cnt: c_int) -> isize {
    let n = if read {
        libc::SYS_preadv2
    } else {
        libc::SYS_pwritev2
    };
    raw!(n, fd, iov, cnt, usize::MAX, 0usize, libc::RWF_NOWAIT) as isize
}

/// A call on a pipe (state [`PIPE`](super::state::PIPE)) from a virtual thread. Pipes are
/// shared with another process, so Weft does not change their
/// `O_NONBLOCK` flag as it does a socket's. Instead the call is tried with
/// `RWF_NOWAIT` (Linux 5.8+: a non-blocking attempt on a blocking
/// description, which affects no one else), and on `EAGAIN` the virtual
/// thread parks on Weft's poller (a pipe can be registered with epoll
/// whatever its flags) until the pipe is ready, then tries again. No OS
/// thread is held while it waits (module docs, "Open-ended waits").
///
/// - On an OS thread, or on a pipe the program made non-blocking, the call
///   passes through (`EAGAIN` stays `EAGAIN`).
/// - A blocking write returns when all of it is written, as the kernel's
///   does; a write of at most `PIPE_BUF` bytes stays atomic (`RWF_NOWAIT`
///   writes it whole or not at all, as `O_NONBLOCK` does). An interrupt
///   ([`Thread::interrupt`](crate::Thread::interrupt)) ends the wait: with
///   the count written so far, or `EINTR` if nothing was.
/// - Where the kernel refuses `RWF_NOWAIT` the call runs on the offload
///   pool while the virtual thread parks, as before (not interruptible).
pub(super) fn pipe_call(
    fd: c_int,
    read: bool,
    call: &'static str,
    iov: Iov,
    mut op: impl FnMut() -> isize,
) -> isize {
    if !on_virtual() || fd <= 2 {
        return op();
    }
    let fl = sys::fcntl(fd, libc::F_GETFL, 0);
    if fl < 0 || fl & libc::O_NONBLOCK != 0 {
        return op();
    }
    let one;
    let (v, cnt) = match iov {
        Iov::None | Iov::Sock(_) | Iov::Msg(_) => return op(), // ENOTSOCK
        Iov::One(p, n) => {
            one = libc::iovec {
                iov_base: p as *mut libc::c_void,
                iov_len: n,
            };
            (&one as *const libc::iovec, 1)
        }
        Iov::Vec(v, c) => (v, c),
    };
    if NOWAIT.load(Ordering::Relaxed) != 2 {
        match pipe_nowait(fd, read, call, v, cnt) {
            Some(r) => return r,
            None => NOWAIT.store(2, Ordering::Relaxed),
        }
    }
    pipe_offload(fd, read, call, op)
}

/// [`pipe_call`]'s `RWF_NOWAIT` form; `None` if the kernel refuses it
/// (nothing was transferred).
fn pipe_nowait(
    fd: c_int,
    read: bool,
    call: &'static str,
    v: *const libc::iovec,
    cnt: c_int,
) -> Option<isize> {
    if read {
        let r = rw_nowait(fd, true, v, cnt);
        if nowait_refused(r) {
            return None;
        }
        NOWAIT.store(1, Ordering::Relaxed);
        if unless_eagain(r).is_some() {
            return Some(r);
        }
        let op = || unless_eagain(rw_nowait(fd, true, v, cnt));
        return Some(match park_io(fd, Interest::Read, None, call, op) {
            Ok(r) => r,
            Err(Some(Stop::Interrupted)) => fail(libc::EINTR),
            Err(Some(Stop::TimedOut)) => fail(libc::EAGAIN), // no deadline
            Err(Some(Stop::Gone)) => fail(libc::EBADF),
            Err(None) => pipe_blocking(fd, true, v, cnt),
        });
    }
    // A write: what is left of the caller's buffers, in a copy of its
    // iovec array (the kernel's limit, IOV_MAX, bounds `cnt`).
    let cnt = usize::try_from(cnt).unwrap_or(0);
    // SAFETY: `writev`'s contract: `v` points to `cnt` iovecs (one of
    // ours for `write`).
    let mut left: Vec<libc::iovec> = unsafe { std::slice::from_raw_parts(v, cnt) }.to_vec();
    let total: usize = left.iter().map(|x| x.iov_len).sum();
    let done = Cell::new(0usize);
    // `Err(())`: the kernel refused RWF_NOWAIT (nothing written).
    let attempt = |left: &mut Vec<libc::iovec>, first: bool| -> Result<Option<isize>, ()> {
        loop {
            let r = rw_nowait(fd, false, left.as_ptr(), left.len() as c_int);
            if first && done.get() == 0 {
                if nowait_refused(r) {
                    return Err(());
                }
                NOWAIT.store(1, Ordering::Relaxed);
            }
            if r < 0 {
                if unless_eagain(r).is_none() {
                    return Ok(None);
                }
                // EPIPE, EBADF, ...: what was written counts, as for a
                // blocking write that a signal ends.
                let d = done.get();
                return Ok(Some(if d > 0 { d as isize } else { -1 }));
            }
            done.set(done.get() + r as usize);
            if done.get() >= total {
                return Ok(Some(done.get() as isize));
            }
            advance(left, r as usize);
        }
    };
    match attempt(&mut left, true) {
        Err(()) => return None,
        Ok(Some(r)) => return Some(r),
        Ok(None) => {}
    }
    let Some(h) = registration(fd) else {
        let r = pipe_blocking(fd, false, left.as_ptr(), left.len() as c_int);
        let d = done.get();
        return Some(if r < 0 && d == 0 {
            r
        } else {
            (d + r.max(0) as usize) as isize
        });
    };
    let b = Blocker::Call { call, fd };
    let op = || attempt(&mut left, false).unwrap_or(None);
    Some(match park_hooked(&h, Interest::Write, None, b, call, op) {
        Ok(r) => r,
        Err(_) if done.get() > 0 => done.get() as isize,
        // Closed under the call: never written to again (`park_hooked`).
        Err(Stop::Gone) => fail(libc::EBADF),
        Err(_) => fail(libc::EINTR),
    })
}

/// The plain blocking form, on the carrier (the pipe could not be
/// registered with the poller: out of memory, a closed descriptor).
fn pipe_blocking(fd: c_int, read: bool, v: *const libc::iovec, cnt: c_int) -> isize {
    let n = if read {
        libc::SYS_readv
    } else {
        libc::SYS_writev
    };
    raw!(n, fd, v, cnt) as isize
}

/// The pre-5.8 fallback: a call that would wait runs on the offload pool.
/// A write cannot be tried without waiting (`POLLOUT` promises room for
/// `PIPE_BUF` bytes, not for the whole write), so every write goes there.
fn pipe_offload(fd: c_int, read: bool, call: &'static str, mut op: impl FnMut() -> isize) -> isize {
    if read && sys::poll_one(fd, libc::POLLIN, Some(Duration::ZERO)) != 0 {
        return op(); // data or end of file (or poll failed: let read say)
    }
    super::count_park(call);
    let job = Offloaded(&mut op);
    let (r, e) = crate::blocking::blocking_as(Blocker::Call { call, fd }, move || job.run());
    sys::set_errno(e);
    r
}
