//! One way to take a lock whose holder may have panicked.
//!
//! A handler runs user code, and a panic in it is caught and answered with
//! `500`; the server's own locks must keep working after that. Their data
//! stays consistent across a panic (each critical section is a few plain
//! assignments), so a poisoned lock is simply taken: `lock().unpoison()`.

use std::sync::{LockResult, PoisonError};

/// Takes the guard out of a [`LockResult`] whether or not the lock was
/// poisoned — for `std::sync` and `weft::sync` locks and condition-variable
/// waits alike.
pub(crate) trait Unpoison<G> {
    /// The guard, poisoned or not.
    fn unpoison(self) -> G;
}

impl<G> Unpoison<G> for LockResult<G> {
    fn unpoison(self) -> G {
        self.unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::Unpoison;
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_poisoned_lock_is_still_taken() {
        let m = Arc::new(Mutex::new(1));
        let m2 = Arc::clone(&m);
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *m.lock().unpoison() += 1;
        assert_eq!(*m.lock().unpoison(), 2);
    }
}
