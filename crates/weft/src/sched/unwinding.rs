//! Panics carried across a suspension: which threads of a carrier are
//! suspended while its OS thread unwinds on their behalf.
//!
//! Rust counts panics per OS thread. A virtual thread without a
//! thread-local area of its own that suspends while it unwinds (a `Drop`
//! that takes a contended `weft::sync::Mutex`) leaves its carrier's panic
//! count raised, and every other thread that runs there meanwhile would see
//! `std::thread::panicking()`. The carrier counts such threads
//! ([`Carrier::suspended_unwinders`](super::carrier::Carrier)) so that
//! `weft::thread::panicking` can subtract them. Only the carrier's own OS
//! thread touches the count (a `Cell`); the thread calls in through
//! [`Schedule`](crate::thread::Schedule) only while
//! `std::thread::panicking()`, so the common suspend pays nothing.

use std::sync::atomic::Ordering;

use super::carrier::carrier;
use crate::thread::{NO_HOME, VThread};

/// Called by a virtual thread about to suspend while its carrier's OS
/// thread is unwinding a panic. If the panic is the thread's own, counts
/// it among the carrier's suspended unwinders and returns true; the thread
/// calls [`resume_unwinding`] when it resumes.
///
/// The panic is "ours" when no other suspended thread of this carrier
/// accounts for the raised count (or we were already unwinding when we last
/// suspended). On a runtime that allows migration, such a thread becomes
/// bound to this carrier: its unwinding lives in this OS thread's panic
/// count, and moving it would corrupt two threads' counts.
pub(super) fn suspend_unwinding(thread: &VThread) -> bool {
    let Some(c) = carrier() else { return false };
    let mine = thread.unwinding.get() || c.suspended_unwinders.get() == 0;
    thread.unwinding.set(mine);
    if !mine {
        return false;
    }
    c.suspended_unwinders.set(c.suspended_unwinders.get() + 1);
    // The count is this carrier's: the thread stays (`thread::stay`).
    thread.stays.store(true, Ordering::Relaxed);
    if thread.home.load(Ordering::Relaxed) == NO_HOME {
        thread.home.store(c.index as u32, Ordering::Relaxed);
        c.me().homed.fetch_add(1, Ordering::Relaxed);
    }
    true
}

/// The counterpart of [`suspend_unwinding`], on the same carrier.
pub(super) fn resume_unwinding() {
    if let Some(c) = carrier() {
        c.suspended_unwinders
            .set(c.suspended_unwinders.get().saturating_sub(1));
    }
}

/// Threads of the calling carrier suspended while unwinding.
pub(super) fn suspended_unwinders() -> u32 {
    carrier().map_or(0, |c| c.suspended_unwinders.get())
}
