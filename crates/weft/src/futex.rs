//! A futex word to sleep on: the kernel's wait/wake on one `AtomicU32`.
//!
//! A carrier sleeps on its own kick word (`sched/slot.rs`): a waker bumps
//! the word, then wakes it; the sleeper snapshots the word before its last
//! checks, so a bump in between makes the wait return at once.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `word` holds `expected`, at most `timeout`. May return
/// spuriously.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let tsp = crate::clock::timespec_ptr(timeout, &mut ts);
    // SAFETY: FUTEX_WAIT on a live, aligned u32 (an AtomicU32 we borrow for
    // the call); the kernel only reads it and the optional timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            tsp,
        );
    }
}

/// Wakes one thread sleeping on `word`.
pub(crate) fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32; wakes at most one waiter.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}
