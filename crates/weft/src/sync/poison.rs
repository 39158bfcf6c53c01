//! Poisoning, exactly as `std` does it: a lock is poisoned when a guard
//! that grants write access is dropped while its thread is panicking (and
//! was not already panicking when it acquired the lock) — "its thread"
//! being the virtual thread ([`crate::panicking`]), not the carrier whose
//! panic count other virtual threads' unwinding may have raised.

use std::sync::{LockResult, PoisonError};

use super::facade::{AtomicBool, Ordering};

#[cfg(not(loom))]
use crate::thread::panicking;
#[cfg(loom)]
use std::thread::panicking;

/// The poison flag of a lock.
pub(crate) struct Flag(AtomicBool);

/// Remembers whether the thread was already panicking when it locked.
#[derive(Clone, Copy)]
pub(crate) struct Guard {
    panicking: bool,
}

impl Flag {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Flag(AtomicBool::new(false))
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Flag(AtomicBool::new(false))
    }

    /// Called right after acquiring: `Err` wraps the guard if poisoned.
    #[inline]
    pub(crate) fn guard(&self) -> LockResult<Guard> {
        self.wrap(Guard {
            panicking: panicking(),
        })
    }

    /// `t` (a guard, the data, a reference to it), in `Err` if the lock is
    /// poisoned.
    #[inline]
    pub(crate) fn wrap<T>(&self, t: T) -> LockResult<T> {
        if self.get() {
            Err(PoisonError::new(t))
        } else {
            Ok(t)
        }
    }

    /// Called right before releasing write access.
    #[inline]
    pub(crate) fn done(&self, guard: &Guard) {
        if !guard.panicking && panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    #[inline]
    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn clear(&self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// Maps the result of [`Flag::guard`] onto a user-facing guard.
#[inline]
pub(crate) fn map_result<T, U>(result: LockResult<T>, f: impl FnOnce(T) -> U) -> LockResult<U> {
    match result {
        Ok(t) => Ok(f(t)),
        Err(e) => Err(PoisonError::new(f(e.into_inner()))),
    }
}
