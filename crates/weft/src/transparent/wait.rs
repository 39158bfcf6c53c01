//! Parking a virtual thread in a hooked call: on the poller until a
//! descriptor is ready (`park_io`, `park_hooked`, `park_reg`,
//! `park_on_own`), on a timer (`vsleep`), or inside `weft::blocking`
//! while an offload thread makes the call (`Offloaded`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use libc::c_int;

use super::regs::{Hooked, registration};
use super::sys::{self, raw};
use crate::poll::{Interest, Registration, WaitError};
use crate::thread::Blocker;

/// Why a park ended without the operation completing.
pub(super) enum Stop {
    TimedOut,
    Interrupted,
    /// The registration waited on was let go of: the number no longer
    /// names the file the call was made on (see [`park_hooked`]).
    Gone,
}

/// Runs `op` (`None` = would block) on a virtual thread, parking on the
/// poller between attempts. `Err(None)` if `fd` cannot be registered;
/// `Err(Some(Stop::Gone))` if it was closed (or its number given to
/// another file) while the call waited.
pub(super) fn park_io<R>(
    fd: c_int,
    i: Interest,
    deadline: Option<Instant>,
    call: &'static str,
    op: impl FnMut() -> Option<R>,
) -> Result<R, Option<Stop>> {
    let h = registration(fd).ok_or(None)?;
    let b = Blocker::Call { call, fd };
    park_hooked(&h, i, deadline, b, call, op).map_err(Some)
}

/// [`park_reg`] on one of the hooks' registrations: ends with
/// [`Stop::Gone`] when the hooks let go of it while the call waited, and
/// then without running `op` again.
///
/// A registration is let go of (`regs.rs`) when its number is closed,
/// replaced (`dup2`), or found to name another file; its `dead` flag is
/// set before its waiters are woken, and, for a hooked `close` or `dup2`,
/// before the kernel frees the number. So a waiter that wakes and finds
/// the flag clear runs `op` on the file the call was made on, and one that
/// finds it set never touches the number again: by then it may name
/// another file (a socket the program just made), and a `read` there would
/// take another connection's bytes or block the carrier on it (issue #38,
/// `tests-transparent/tests/close_reuse.rs`). That is the kernel's rule:
/// a call in progress keeps the old file and never sees the new one. A
/// call that has not parked yet can meet the new file, as a call that has
/// not entered the kernel can; only a close concurrent with the call
/// itself (which I/O safety excludes) reaches that window.
pub(super) fn park_hooked<R>(
    h: &Hooked,
    i: Interest,
    deadline: Option<Instant>,
    b: Blocker,
    call: &'static str,
    mut op: impl FnMut() -> Option<R>,
) -> Result<R, Stop> {
    let r = park_reg(&h.reg, i, deadline, b, call, || {
        if h.dead.load(Ordering::SeqCst) {
            return Some(None);
        }
        op().map(Some)
    })?;
    r.ok_or(Stop::Gone)
}

/// [`park_io`] on a registration the caller holds: a descriptor of the
/// program's (through [`registration`]), or one the hook made for this
/// call only (a temporary epoll set, a pidfd), shown in dumps as `b`.
pub(super) fn park_reg<R>(
    reg: &Registration,
    i: Interest,
    deadline: Option<Instant>,
    b: Blocker,
    call: &'static str,
    mut op: impl FnMut() -> Option<R>,
) -> Result<R, Stop> {
    let mut counted = false;
    loop {
        let (ready, snap) = reg.snapshot(i);
        if ready {
            if let Some(r) = op() {
                return Ok(r);
            }
            reg.clear_if(i, snap);
        }
        if !counted {
            counted = true;
            super::count_park(call);
        }
        let saved = sys::errno();
        let w = reg.wait_as(i, deadline, b.clone());
        sys::set_errno(saved);
        match w {
            Ok(()) => {}
            Err(WaitError::TimedOut) => return Err(Stop::TimedOut),
            Err(WaitError::Interrupted) => return Err(Stop::Interrupted),
        }
    }
}

/// Parks on a descriptor the hook itself opened for this one wait (an
/// epoll set, a pidfd): registers it, runs `op` until it is `Some` with
/// [`park_reg`] (waiting for `fd` to read ready), deregisters it and
/// closes it. `None` if it cannot be registered (the caller falls back);
/// `fd` is closed in every case.
pub(super) fn park_on_own<R>(
    fd: c_int,
    deadline: Option<Instant>,
    b: Blocker,
    call: &'static str,
    op: impl FnMut() -> Option<R>,
) -> Option<Result<R, Stop>> {
    let saved = sys::errno();
    let reg = Registration::new(fd).ok();
    sys::set_errno(saved);
    let r = reg
        .as_ref()
        .map(|reg| park_reg(reg, Interest::Read, deadline, b, call, op));
    // Out of the poller while `fd` is open (`Registration`'s drop), then
    // closed: the number is ours until then.
    drop(reg);
    let saved = sys::errno();
    raw!(libc::SYS_close, fd);
    sys::set_errno(saved);
    r
}

/// A hooked call's raw system call, sent to the offload pool.
pub(super) struct Offloaded<'a, F>(pub(super) &'a mut F);

// SAFETY: the closure only makes one raw system call with the caller's
// arguments (integers, and pointers into buffers the caller owns). The
// caller is a virtual thread parked inside `blocking` until the offload
// thread has returned from the closure, so those buffers outlive the call
// and nothing else touches them meanwhile; `blocking` runs the closure
// exactly once and does not unwind the caller before it finished.
unsafe impl<F> Send for Offloaded<'_, F> {}

impl<F: FnMut() -> isize> Offloaded<'_, F> {
    /// Runs the call; its result and the offload thread's `errno`.
    pub(super) fn run(self) -> (isize, c_int) {
        let r = (self.0)();
        (r, sys::errno())
    }
}

/// `Duration` to a deadline, `None` for "forever" or overflow.
pub(super) fn deadline_after(d: Option<Duration>) -> Option<Instant> {
    d.and_then(|d| crate::clock::now().checked_add(d))
}

/// Parks the virtual thread for `d`; `Err(left)` if interrupted. Keeps
/// `errno` (the park's own system calls may set it).
pub(super) fn vsleep(d: Duration, call: &'static str) -> Result<(), Duration> {
    let saved = sys::errno();
    let r = vsleep_inner(d, call);
    sys::set_errno(saved);
    r
}

fn vsleep_inner(d: Duration, call: &'static str) -> Result<(), Duration> {
    let Some(deadline) = crate::clock::now().checked_add(d) else {
        // Forever: park until interrupted.
        super::count_park(call);
        loop {
            if crate::thread::take_interrupt() {
                return Err(d);
            }
            crate::thread::with_blocker(Blocker::Call { call, fd: -1 }, || {
                crate::thread::park_deadline(None)
            });
        }
    };
    let mut counted = false;
    loop {
        if crate::thread::take_interrupt() {
            return Err(deadline.saturating_duration_since(crate::clock::now()));
        }
        if crate::clock::now() >= deadline {
            return Ok(());
        }
        if !counted {
            counted = true;
            super::count_park(call);
        }
        crate::thread::with_blocker(Blocker::Call { call, fd: -1 }, || {
            crate::thread::park_deadline(Some(deadline))
        });
    }
}
