//! The socket-call engine: a read or write family call on a socket Weft
//! manages, tried without waiting and, on `EAGAIN`, parked on the poller
//! (a virtual thread) or waited for in libc's `ppoll` (an OS thread),
//! until it is whole.

use std::sync::Arc;
use std::time::{Duration, Instant};

use libc::c_int;

use super::fds::{classify, on_virtual};
use super::iov::Iov;
use super::pipe::pipe_call;
use super::regs::{Hooked, registration};
use super::state::{MANAGED, OTHER, PIPE, UNKNOWN, USER_NB, state};
use super::sys::{self, fail, raw, unless_eagain};
use super::wait::{Stop, park_hooked};
use crate::libc_next;
use crate::poll::Interest;
use crate::thread::Blocker;

/// Whether a call on `fd` is left to the kernel, Weft not waiting for it
/// (then it is libc's own call: `libc_next.rs`): the caller asked not to wait,
/// the program made the descriptor non-blocking, Weft does not manage it,
/// or an OS thread calls on a descriptor no virtual thread made Weft's.
/// `sock_call` waits for exactly the others.
pub(super) fn kernel_waits(fd: c_int, dontwait: bool) -> bool {
    let st = state(fd);
    dontwait || st == OTHER || st == USER_NB || ((st == UNKNOWN || st == PIPE) && !on_virtual())
}

/// A stream/datagram call on a socket: the shared logic of the read and
/// write families. `op(done, nb)` is the raw call for the caller's buffers
/// past their first `done` bytes (only ever 0 unless `whole`), with `nb`
/// (0 or `MSG_DONTWAIT`) added to its flags — a `read` or `write` made as
/// `recv*`/`send*` when `nb` is not 0; `dontwait` if the caller passed
/// `MSG_DONTWAIT`; `iov` the buffers if the call is one a pipe takes (see
/// [`pipe_call`]).
///
/// On a managed socket every attempt is made with `MSG_DONTWAIT`: the
/// kernel's `O_NONBLOCK` that Weft set is not enough, because the file
/// description may have been handed to a child since (`fds::hand_over`),
/// which clears that flag for the parent too.
///
/// `whole` (the total length) makes a call on a managed socket go on
/// until all of it is transferred, as the kernel does on a blocking socket:
/// every stream write (`write`, `send`, …, which the kernel completes
/// unless a signal, a timeout or an error ends it, returning the count so
/// far), and a stream read with `MSG_WAITALL`. A partial count is returned
/// if an interrupt, the `SO_*TIMEO` deadline, end of file or an error
/// ends it after some bytes moved.
pub(super) fn sock_call(
    fd: c_int,
    read: bool,
    call: &'static str,
    dontwait: bool,
    iov: Iov,
    whole: Option<fn(Iov) -> usize>,
    mut op: impl FnMut(usize, c_int) -> isize,
) -> isize {
    let mut st = state(fd);
    if dontwait || st == OTHER || st == USER_NB {
        return op(0, 0);
    }
    let virt = on_virtual();
    if st == UNKNOWN {
        if !virt {
            return op(0, 0);
        }
        st = classify(fd);
    }
    if st == PIPE {
        return pipe_call(fd, read, call, iov, || op(0, 0));
    }
    if st != MANAGED {
        return op(0, 0);
    }
    let mut op = |done| op(done, libc::MSG_DONTWAIT);
    if !virt {
        // A cancellation point acts on a pending cancellation on entry,
        // even when the call would not wait (`libc_next.rs`).
        // SAFETY: glibc's pthread_testcancel takes nothing; it may unwind
        // (a forced unwind, through frames without destructors).
        unsafe { pthread_testcancel() };
    }
    // MANAGED from here on. Inside a signal handler a call that moved
    // part of its length returns the count (no copy of the caller's
    // iovecs is made for the rest: no allocation there).
    let whole = if !virt && super::signals::in_handler() {
        None
    } else {
        whole
    };
    let mut p = Progress {
        fd,
        read,
        iov,
        whole,
        done: 0,
        total: usize::MAX,
    };
    if let Some(r) = unless_eagain(op(0))
        && let Some(end) = p.step(r)
    {
        return end;
    }
    let timeout = sys::sock_timeout(fd, read);
    let deadline = timeout.and_then(|d| crate::clock::now().checked_add(d));
    // A socket Weft manages that was `dup2`ed onto 0, 1 or 2 keeps its
    // `O_NONBLOCK` (the file description is already Weft's), but a call
    // on those numbers blocks the carrier (std's stdio locks, above).
    if !(virt && fd > 2) {
        return poll_loop(p, deadline, op);
    }
    match registration(fd) {
        Some(h) => park_loop(h, p, call, deadline, op),
        None => poll_loop(p, deadline, op),
    }
}

/// Where a managed socket call stands: what moved so far, and what makes
/// it whole. Plain data (no destructor: `poll_loop` runs under it, and a
/// cancelled OS thread unwinds through its frame).
#[derive(Clone, Copy)]
struct Progress {
    fd: c_int,
    read: bool,
    iov: Iov,
    /// The length that ends the call (`write`, `MSG_WAITALL`), if any.
    whole: Option<fn(Iov) -> usize>,
    done: usize,
    /// `whole`'s length once read (`usize::MAX` before).
    total: usize,
}

impl Progress {
    /// Counts a completed attempt `r`; `Some(result)` ends the call.
    fn step(&mut self, r: isize) -> Option<isize> {
        if r <= 0 || self.whole.is_none() {
            return Some(if self.done > 0 { self.done as isize } else { r });
        }
        if self.total == usize::MAX {
            self.total = self.whole.map_or(0, |len| len(self.iov));
            if self.done == 0 && (r as usize >= self.total || (self.read && !is_stream(self.fd))) {
                return Some(r);
            }
        }
        self.done += r as usize;
        (self.done >= self.total).then_some(self.done as isize)
    }

    /// What ends the call with error `e` after `done` bytes: the count,
    /// or the error.
    fn partial(&self, e: c_int) -> isize {
        if self.done > 0 {
            self.done as isize
        } else {
            fail(e)
        }
    }

    fn interest(&self) -> Interest {
        if self.read {
            Interest::Read
        } else {
            Interest::Write
        }
    }
}

/// A virtual thread's wait for a managed socket: parks on the poller
/// between attempts.
fn park_loop(
    h: Arc<Hooked>,
    mut p: Progress,
    call: &'static str,
    deadline: Option<Instant>,
    mut op: impl FnMut(usize) -> isize,
) -> isize {
    let fd = p.fd;
    loop {
        let b = Blocker::Call { call, fd };
        let done = p.done;
        let r = match park_hooked(&h, p.interest(), deadline, b, call, || {
            unless_eagain(op(done))
        }) {
            Ok(r) => r,
            Err(Stop::TimedOut) => return p.partial(libc::EAGAIN),
            Err(Stop::Interrupted) => return p.partial(libc::EINTR),
            // Closed (or its number given to another file) under the
            // call: it ends without touching the number again.
            Err(Stop::Gone) => return p.partial(libc::EBADF),
        };
        if let Some(end) = p.step(r) {
            return end;
        }
    }
}

unsafe extern "C-unwind" {
    fn pthread_testcancel();
}

/// Blocks until `fd` has `events` or `timeout` passes: 1 ready, 0 timed
/// out, -1 error (errno set). In libc's `ppoll` (a cancellation point),
/// else a raw one.
pub(super) fn wait_one(fd: c_int, events: i16, timeout: Option<Duration>) -> c_int {
    match libc_next::PPOLL.get() {
        // SAFETY: one pollfd and an optional timespec, locals of
        // `poll_one_via`'s frame (which, like this one, drops nothing).
        Some(f) => sys::poll_one_via(fd, events, timeout, |p, tsp| unsafe {
            f(p, 1, tsp, std::ptr::null())
        }),
        None => sys::poll_one(fd, events, timeout),
    }
}

/// An OS thread's wait for a managed socket (or a virtual thread's with
/// no registration to be had): blocks in libc's `ppoll`, a cancellation
/// point (`libc_next.rs`); nothing in this frame or its callers' up to the hook
/// has a destructor.
fn poll_loop(
    mut p: Progress,
    deadline: Option<Instant>,
    mut op: impl FnMut(usize) -> isize,
) -> isize {
    let ev = if p.read { libc::POLLIN } else { libc::POLLOUT };
    loop {
        let left = match deadline {
            None => None,
            Some(d) => match d.checked_duration_since(crate::clock::now()) {
                Some(l) if !l.is_zero() => Some(l),
                _ => return p.partial(libc::EAGAIN),
            },
        };
        let r = wait_one(p.fd, ev, left);
        if r < 0 {
            let e = sys::errno();
            // A signal handler ran. The kernel would have restarted the
            // blocking call if every handler asked for it (`SA_RESTART`),
            // as Weft's own sampling signal does.
            if e == libc::EINTR && deadline.is_none() && all_handlers_restart() {
                continue;
            }
            return p.partial(e);
        }
        if r == 0 {
            return p.partial(libc::EAGAIN);
        }
        if let Some(r) = unless_eagain(op(p.done))
            && let Some(end) = p.step(r)
        {
            return end;
        }
    }
}

/// Whether `fd` is a stream socket (`SO_TYPE`), where a read with
/// `MSG_WAITALL` waits for all of its length; on a datagram socket it is
/// one message.
fn is_stream(fd: c_int) -> bool {
    sys::socket_int(fd, libc::SO_TYPE) == Some(libc::SOCK_STREAM)
}

/// Whether every signal with a handler has `SA_RESTART` (the kernel then
/// restarts a blocking socket call without a timeout that a handler
/// interrupted). Read only after an `EINTR`, with raw `rt_sigaction`. The
/// signal that interrupted is not known: one handler without the flag
/// anywhere makes the answer `EINTR`, as before.
fn all_handlers_restart() -> bool {
    // The kernel's struct sigaction (x86-64, AArch64): handler, flags,
    // restorer (x86-64 only, unused here), mask.
    #[repr(C)]
    struct KSigaction {
        handler: usize,
        flags: libc::c_ulong,
        restorer: usize,
        mask: u64,
    }
    let saved = sys::errno();
    let mut ok = true;
    for sig in 1..=64 {
        // Faults are delivered by the faulting instruction, never to a
        // thread waiting in the kernel (std handles SIGSEGV and SIGBUS
        // without SA_RESTART, for its stack overflow message).
        if matches!(
            sig,
            libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP
        ) {
            continue;
        }
        let mut old = KSigaction {
            handler: 0,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        let r = raw!(
            libc::SYS_rt_sigaction,
            sig,
            0usize,
            &mut old as *mut KSigaction,
            8usize
        );
        let has_handler = old.handler != libc::SIG_DFL && old.handler != libc::SIG_IGN;
        if r == 0 && has_handler && old.flags & libc::SA_RESTART as libc::c_ulong == 0 {
            ok = false;
            break;
        }
    }
    sys::set_errno(saved);
    ok
}
