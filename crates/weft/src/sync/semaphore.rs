//! [`Semaphore`]: a counting semaphore that parks the virtual thread.

use std::fmt;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::interrupted_error;
use super::facade::{self, AtomicUsize, Interrupts, Lock, Ordering};
use super::waitq::{WaitList, Waiter, Wake};

/// Somebody is queued (changed only with the queue lock held). Invariant:
/// while set, no permit is available (released permits go to the queue).
const QUEUED: usize = 1;
/// One permit; the count lives in the bits above.
const ONE_PERMIT: usize = 2;
/// Token: "a permit was handed to you".
const GRANTED: usize = 1;

/// A counting semaphore (Java's `java.util.concurrent.Semaphore` in fair
/// mode, with RAII permits).
///
/// [`acquire`](Semaphore::acquire) takes a permit, parking the virtual
/// thread (or blocking the OS thread) while none is available; the returned
/// [`SemaphorePermit`] gives it back when dropped.
///
/// Fairness: strictly FIFO. While anybody waits, newcomers (including
/// [`try_acquire`](Semaphore::try_acquire)) do not get permits ahead of it:
/// a released permit is handed directly to the head of the queue.
///
/// Interrupts: `acquire` and `acquire_timeout` return an error of kind
/// [`io::ErrorKind::Interrupted`] (and clear the flag) when the thread is
/// interrupted while it waits. A permit granted at the same moment as the
/// interrupt or the timeout is kept, not lost: the call then succeeds.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use weft::sync::Semaphore;
///
/// let sem = Arc::new(Semaphore::new(2));
/// let active = Arc::new(AtomicUsize::new(0));
/// let handles: Vec<_> = (0..8)
///     .map(|_| {
///         let (sem, active) = (Arc::clone(&sem), Arc::clone(&active));
///         weft::spawn(move || {
///             let _permit = sem.acquire().unwrap();
///             assert!(active.fetch_add(1, Ordering::SeqCst) < 2);
///             weft::yield_now();
///             active.fetch_sub(1, Ordering::SeqCst);
///         })
///     })
///     .collect();
/// for h in handles {
///     h.join().unwrap();
/// }
/// assert_eq!(sem.available_permits(), 2);
/// ```
pub struct Semaphore {
    state: AtomicUsize,
    queue: Lock<WaitList<()>>,
}

/// A permit from [`Semaphore::acquire`]; released when dropped.
#[must_use = "the permit is released immediately if unused"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
}

/// An owned permit from [`Semaphore::acquire_owned`]; released when
/// dropped.
#[must_use = "the permit is released immediately if unused"]
pub struct OwnedSemaphorePermit {
    sem: Arc<Semaphore>,
}

impl Semaphore {
    /// The largest number of permits a semaphore can hold.
    pub const MAX_PERMITS: usize = usize::MAX >> 1;

    /// Creates a semaphore with `permits` permits.
    ///
    /// # Panics
    ///
    /// If `permits` exceeds [`Semaphore::MAX_PERMITS`].
    #[cfg(not(loom))]
    #[must_use]
    pub const fn new(permits: usize) -> Semaphore {
        assert!(permits <= Self::MAX_PERMITS, "too many permits");
        Semaphore {
            state: AtomicUsize::new(permits * ONE_PERMIT),
            queue: Lock::new(WaitList::new()),
        }
    }

    /// Creates a semaphore with `permits` permits.
    ///
    /// # Panics
    ///
    /// If `permits` exceeds [`Semaphore::MAX_PERMITS`].
    #[cfg(loom)]
    #[must_use]
    pub fn new(permits: usize) -> Semaphore {
        assert!(permits <= Self::MAX_PERMITS, "too many permits");
        Semaphore {
            state: AtomicUsize::new(permits * ONE_PERMIT),
            queue: Lock::new(WaitList::new()),
        }
    }

    /// The number of permits available right now (racy, for monitoring).
    pub fn available_permits(&self) -> usize {
        self.state.load(Ordering::Relaxed) / ONE_PERMIT
    }

    fn try_take(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & QUEUED != 0 || s < ONE_PERMIT {
                return false;
            }
            match self.state.compare_exchange_weak(
                s,
                s - ONE_PERMIT,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(x) => s = x,
            }
        }
    }

    /// Takes a permit if one is available right now and nobody is queued.
    pub fn try_acquire(&self) -> Option<SemaphorePermit<'_>> {
        self.try_take().then(|| SemaphorePermit { sem: self })
    }

    /// Takes a permit, parking until one is available.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::Interrupted`] if the thread is interrupted while it
    /// waits (the interrupt flag is cleared). The flag is only looked at when
    /// the call has to wait.
    pub fn acquire(&self) -> io::Result<SemaphorePermit<'_>> {
        if self.try_take() || self.acquire_slow(None)? {
            Ok(SemaphorePermit { sem: self })
        } else {
            unreachable!("no deadline")
        }
    }

    /// Takes a permit, waiting at most `timeout`. `Ok(None)` on timeout.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Semaphore::acquire).
    pub fn acquire_timeout(&self, timeout: Duration) -> io::Result<Option<SemaphorePermit<'_>>> {
        if self.try_take() || self.acquire_slow(Some(facade::deadline_after(timeout)))? {
            Ok(Some(SemaphorePermit { sem: self }))
        } else {
            Ok(None)
        }
    }

    /// Like [`acquire`](Semaphore::acquire), for a semaphore in an `Arc`;
    /// the permit keeps the semaphore alive.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Semaphore::acquire).
    pub fn acquire_owned(self: Arc<Self>) -> io::Result<OwnedSemaphorePermit> {
        self.acquire()?.forget();
        Ok(OwnedSemaphorePermit { sem: self })
    }

    /// Like [`try_acquire`](Semaphore::try_acquire), for a semaphore in an
    /// `Arc`.
    pub fn try_acquire_owned(self: Arc<Self>) -> Option<OwnedSemaphorePermit> {
        self.try_take().then(|| OwnedSemaphorePermit { sem: self })
    }

    /// Returns `Ok(true)` with a permit taken, `Ok(false)` on timeout.
    ///
    /// `deadline`: `None` = no timeout, `Some(None)` = timeout too far away
    /// to represent (same as none), `Some(Some(t))` = until `t`.
    #[cold]
    #[inline(never)]
    fn acquire_slow(&self, deadline: Option<Option<Instant>>) -> io::Result<bool> {
        let deadline = deadline.flatten();
        let node = pin!(Waiter::new(()));
        {
            let mut q = self.queue.lock();
            let mut s = self.state.load(Ordering::Relaxed);
            loop {
                let (new, acquired) = if s & QUEUED == 0 && s >= ONE_PERMIT {
                    (s - ONE_PERMIT, true)
                } else {
                    (s | QUEUED, false)
                };
                match self
                    .state
                    .compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed)
                {
                    Ok(_) if acquired => return Ok(true),
                    Ok(_) => break,
                    Err(x) => s = x,
                }
            }
            // SAFETY: fresh node; we return only after `wait` returned.
            unsafe { q.push_back(node.as_ref()) };
        }
        let mut intr = Interrupts::interruptible();
        let wake = crate::thread::with_blocker(
            crate::thread::Blocker::Lock {
                kind: crate::thread::SyncKind::Semaphore,
                addr: self as *const Self as *const () as usize,
                owner: None,
            },
            || {
                node.as_ref().wait(deadline, &mut intr, || {
                    let mut q = self.queue.lock();
                    // SAFETY: if queued, the node is in this semaphore's list.
                    let removed = unsafe { q.remove(&node) };
                    if removed && q.is_empty() {
                        self.state.fetch_and(!QUEUED, Ordering::Relaxed);
                    }
                    removed
                })
            },
        );
        match wake {
            Wake::Notified(_) => Ok(true),
            Wake::TimedOut => Ok(false),
            Wake::Interrupted => Err(interrupted_error()),
        }
    }

    /// Adds one permit (it may exceed the initial count, as in Java). If a
    /// thread is waiting, the permit is handed to the longest waiter.
    ///
    /// # Panics
    ///
    /// If the count would exceed [`Semaphore::MAX_PERMITS`].
    pub fn release(&self) {
        self.add_permits(1);
    }

    /// Adds `n` permits, handing them to waiters first (FIFO).
    ///
    /// # Panics
    ///
    /// If the count would exceed [`Semaphore::MAX_PERMITS`].
    pub fn add_permits(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut s = self.state.load(Ordering::Relaxed);
        while s & QUEUED == 0 {
            let new = n
                .checked_mul(ONE_PERMIT)
                .and_then(|add| s.checked_add(add))
                .expect("semaphore permit count overflow");
            match self
                .state
                .compare_exchange_weak(s, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(x) => s = x,
            }
        }
        self.add_permits_slow(n);
    }

    #[cold]
    #[inline(never)]
    fn add_permits_slow(&self, mut n: usize) {
        let mut grants = super::waitq::NotifyAll::new();
        {
            let mut q = self.queue.lock();
            while n > 0 {
                match q.pop_front() {
                    Some(w) => {
                        grants.push(w);
                        n -= 1;
                    }
                    None => break,
                }
            }
            if q.is_empty() {
                // QUEUED is only changed with the lock held, and permits are
                // zero while it is set, so this is the whole state.
                let add = n
                    .checked_mul(ONE_PERMIT)
                    .expect("semaphore permit count overflow");
                let mut s = self.state.load(Ordering::Relaxed);
                loop {
                    let new = (s & !QUEUED)
                        .checked_add(add)
                        .expect("semaphore permit count overflow");
                    match self.state.compare_exchange_weak(
                        s,
                        new,
                        Ordering::Release,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => break,
                        Err(x) => s = x,
                    }
                }
            }
        }
        grants.notify_all(GRANTED);
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("permits", &self.available_permits())
            .finish_non_exhaustive()
    }
}

impl SemaphorePermit<'_> {
    /// Consumes the permit without releasing it (the semaphore keeps one
    /// permit fewer).
    pub fn forget(self) {
        std::mem::forget(self);
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.sem.release();
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit").finish_non_exhaustive()
    }
}

impl OwnedSemaphorePermit {
    /// Consumes the permit without releasing it.
    pub fn forget(self) {
        // Drop the Arc, not the permit.
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again.
        drop(unsafe { std::ptr::read(&this.sem) });
    }

    /// The semaphore this permit belongs to.
    pub fn semaphore(&self) -> &Arc<Semaphore> {
        &self.sem
    }
}

impl Drop for OwnedSemaphorePermit {
    fn drop(&mut self) {
        self.sem.release();
    }
}

impl fmt::Debug for OwnedSemaphorePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedSemaphorePermit")
            .finish_non_exhaustive()
    }
}
