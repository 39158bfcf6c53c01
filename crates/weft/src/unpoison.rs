//! One way to take a lock whose holder may have panicked.
//!
//! Weft's own locks guard data that stays consistent across a panic (each
//! critical section is a few plain assignments or a queue operation), and
//! a runtime must keep working after a virtual thread's panic was caught.
//! So a poisoned lock is simply taken: `lock().unpoison()`. Re-exported as
//! [`weft::sync::Unpoison`](crate::sync::Unpoison) for code that makes the
//! same choice. A leaf: it depends on nothing of the runtime.

use std::sync::{LockResult, PoisonError};

/// Takes the guard out of a [`LockResult`] whether or not the lock was
/// poisoned — for `std::sync` and [`weft::sync`](crate::sync) locks and
/// condition-variable waits alike.
///
/// Use it where the data a lock guards cannot be left half-updated by a
/// panic; otherwise handle the [`PoisonError`].
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use weft::sync::Unpoison;
///
/// let m = Arc::new(Mutex::new(1));
/// let m2 = Arc::clone(&m);
/// let _ = std::thread::spawn(move || {
///     let _g = m2.lock().unwrap();
///     panic!("poisons the lock");
/// })
/// .join();
/// assert!(m.is_poisoned());
/// *m.lock().unpoison() += 1;
/// assert_eq!(*m.lock().unpoison(), 2);
/// ```
pub trait Unpoison<G> {
    /// The guard, poisoned or not.
    fn unpoison(self) -> G;
}

impl<G> Unpoison<G> for LockResult<G> {
    fn unpoison(self) -> G {
        self.unwrap_or_else(PoisonError::into_inner)
    }
}
