//! The per-descriptor state table: what Weft knows of each descriptor
//! number of the program (one byte each, read without a lock on every
//! hooked call).

use std::sync::atomic::{AtomicU8, Ordering};

use libc::c_int;

/// Descriptors at or above this pass through untouched.
pub(super) const MAX_FDS: usize = 1 << 20;

/// Not looked at since it was opened (or by an OS thread only).
pub(super) const UNKNOWN: u8 = 0;

/// Not a socket: calls pass through.
pub(super) const OTHER: u8 = 1;

/// A socket the program made non-blocking: calls pass through.
pub(super) const USER_NB: u8 = 2;

/// A socket the program believes blocking, non-blocking in the kernel
/// because Weft made it so: calls wait (park or poll) on `EAGAIN`.
pub(super) const MANAGED: u8 = 3;

/// A pipe or FIFO other than descriptors 0, 1 and 2: a call that would
/// wait runs on the offload pool while the virtual thread parks (see
/// [`pipe_call`](super::pipe::pipe_call)).
pub(super) const PIPE: u8 = 4;

// 1 MiB of zeroed .bss: committed by the kernel only where touched.
static STATE: [AtomicU8; MAX_FDS] = [const { AtomicU8::new(UNKNOWN) }; MAX_FDS];

pub(super) fn slot(fd: c_int) -> Option<&'static AtomicU8> {
    usize::try_from(fd).ok().and_then(|i| STATE.get(i))
}

pub(super) fn state(fd: c_int) -> u8 {
    slot(fd).map_or(OTHER, |s| s.load(Ordering::Relaxed))
}

pub(super) fn set_state(fd: c_int, st: u8) {
    if let Some(s) = slot(fd) {
        s.store(st, Ordering::Relaxed);
    }
}
