//! The errors of the interruptible waits: [`LockError`] (a mutex),
//! [`WaitError`] (a condition variable), and the `io::Error` that the
//! waits returning `io::Result` report an interrupt with. A leaf of
//! `sync/`: every primitive names it, it names none of them.

use std::error::Error;
use std::fmt;
use std::io;
use std::sync::PoisonError;

/// Error of [`Mutex::lock_interruptibly`].
///
/// Unlike `std`'s lock errors it has an `Interrupted` case, which carries no
/// guard (the lock was not acquired). Converts into an [`io::Error`] (kind
/// `Interrupted`, or `Other` for poisoning) for `?` in `io::Result` code.
///
/// [`Mutex::lock_interruptibly`]: super::Mutex::lock_interruptibly
pub enum LockError<G> {
    /// The thread was interrupted while waiting; the lock is not held and
    /// the interrupt flag has been cleared.
    Interrupted,
    /// The lock was acquired but is poisoned; the guard is inside.
    Poisoned(PoisonError<G>),
}

impl<G> LockError<G> {
    /// `true` for [`LockError::Interrupted`].
    pub fn is_interrupted(&self) -> bool {
        matches!(self, LockError::Interrupted)
    }
}

impl<G> From<PoisonError<G>> for LockError<G> {
    fn from(e: PoisonError<G>) -> Self {
        LockError::Poisoned(e)
    }
}

impl<G> fmt::Debug for LockError<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Interrupted => f.write_str("Interrupted"),
            LockError::Poisoned(_) => f.write_str("Poisoned(..)"),
        }
    }
}

impl<G> fmt::Display for LockError<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Interrupted => f.write_str("interrupted while waiting for a lock"),
            LockError::Poisoned(_) => f.write_str("poisoned lock: another task failed inside"),
        }
    }
}

impl<G> Error for LockError<G> {}

impl<G> From<LockError<G>> for io::Error {
    fn from(e: LockError<G>) -> io::Error {
        match e {
            LockError::Interrupted => interrupted_error(),
            LockError::Poisoned(_) => io::Error::other("poisoned lock: another task failed inside"),
        }
    }
}

/// Error of [`Condvar::wait_interruptibly`] and
/// [`Condvar::wait_timeout_interruptibly`]. Either way the mutex has been
/// re-acquired and its guard is inside.
///
/// [`Condvar::wait_interruptibly`]: super::Condvar::wait_interruptibly
/// [`Condvar::wait_timeout_interruptibly`]: super::Condvar::wait_timeout_interruptibly
pub enum WaitError<G> {
    /// The thread was interrupted while waiting (flag cleared).
    Interrupted(G),
    /// The mutex is poisoned.
    Poisoned(PoisonError<G>),
}

impl<G> WaitError<G> {
    /// The guard, whatever the error.
    pub fn into_inner(self) -> G {
        match self {
            WaitError::Interrupted(g) => g,
            WaitError::Poisoned(e) => e.into_inner(),
        }
    }

    /// `true` for [`WaitError::Interrupted`].
    pub fn is_interrupted(&self) -> bool {
        matches!(self, WaitError::Interrupted(_))
    }
}

impl<G> fmt::Debug for WaitError<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Interrupted(_) => f.write_str("Interrupted(..)"),
            WaitError::Poisoned(_) => f.write_str("Poisoned(..)"),
        }
    }
}

impl<G> fmt::Display for WaitError<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Interrupted(_) => {
                f.write_str("interrupted while waiting on a condition variable")
            }
            WaitError::Poisoned(_) => f.write_str("poisoned lock: another task failed inside"),
        }
    }
}

impl<G> Error for WaitError<G> {}

/// The error blocking calls return when interrupted.
pub(crate) fn interrupted_error() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "interrupted")
}
