//! [`Condvar`]: condition variables that park the virtual thread.

use std::fmt;
use std::pin::pin;
use std::sync::{LockResult, PoisonError};
use std::time::{Duration, Instant};

use super::error::WaitError;
use super::facade::{self, AtomicUsize, Interrupts, Lock, Ordering};
use super::mutex::{Mutex, MutexGuard};
use super::waitq::{WaitList, Waiter, Wake};

/// Token published by `notify_*`.
const NOTIFIED: usize = 1;

/// Whether a timed wait on a [`Condvar`] returned because of the timeout.
///
/// Mirrors [`std::sync::WaitTimeoutResult`] (which cannot be constructed
/// outside `std`).
#[derive(Debug, PartialEq, Eq, Copy, Clone)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// `true` if the wait ended because the timeout elapsed (and, for the
    /// `_while` variants, the condition still held). A notification that
    /// races with the timeout is never lost: the waiter then reports
    /// `false`.
    #[must_use]
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

/// A condition variable for [`weft::sync::Mutex`](Mutex), with the API of
/// [`std::sync::Condvar`] plus interruptible waits.
///
/// Waiting parks the virtual thread (or blocks the OS thread) after
/// atomically releasing the mutex, and re-acquires the mutex before
/// returning. Spurious wake-ups are possible, as with std: wait in a loop or
/// use [`wait_while`](Condvar::wait_while). Waiters are served FIFO by
/// [`notify_one`](Condvar::notify_one).
///
/// `wait`, `wait_while`, `wait_timeout` and `wait_timeout_while` are not
/// interruptible (an interrupt stays pending);
/// [`wait_interruptibly`](Condvar::wait_interruptibly) and
/// [`wait_timeout_interruptibly`](Condvar::wait_timeout_interruptibly) return
/// [`WaitError::Interrupted`] (Java's `Condition.await`). In every case the
/// mutex is held again when the call returns.
///
/// A `Condvar` should be used with a single mutex at a time.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use weft::sync::{Condvar, Mutex};
///
/// let pair = Arc::new((Mutex::new(false), Condvar::new()));
/// let pair2 = Arc::clone(&pair);
/// weft::spawn(move || {
///     let (lock, cvar) = &*pair2;
///     *lock.lock().unwrap() = true;
///     cvar.notify_one();
/// });
///
/// let (lock, cvar) = &*pair;
/// let started = cvar.wait_while(lock.lock().unwrap(), |started| !*started).unwrap();
/// assert!(*started);
/// ```
pub struct Condvar {
    queue: Lock<WaitList<()>>,
    /// Number of queued waiters; lets `notify_*` skip the lock when idle.
    /// Changed only with `queue` locked.
    waiters: AtomicUsize,
}

impl Condvar {
    /// Creates a condition variable with no waiters.
    #[cfg(not(loom))]
    #[must_use]
    pub const fn new() -> Condvar {
        Condvar {
            queue: Lock::new(WaitList::new()),
            waiters: AtomicUsize::new(0),
        }
    }

    /// Creates a condition variable with no waiters.
    #[cfg(loom)]
    #[must_use]
    pub fn new() -> Condvar {
        Condvar {
            queue: Lock::new(WaitList::new()),
            waiters: AtomicUsize::new(0),
        }
    }

    /// Releases the mutex, waits, re-locks. Returns why the wait ended.
    fn wait_raw<T: ?Sized>(
        &self,
        mutex: &Mutex<T>,
        deadline: Option<Instant>,
        intr: &mut Interrupts,
    ) -> Wake {
        let node = pin!(Waiter::new(()));
        {
            let mut q = self.queue.lock();
            // SAFETY: the node is fresh, and we return only after `wait`
            // returned (node notified or unlinked by the cancel closure).
            unsafe { q.push_back(node.as_ref()) };
            self.waiters.fetch_add(1, Ordering::Relaxed);
        }
        // Queued before unlocking: a notifier that takes the mutex after us
        // is guaranteed to see us.
        mutex.clear_owner();
        // SAFETY: the caller's guard proves the mutex is held.
        unsafe { mutex.raw().unlock() };
        let wake = crate::thread::with_blocker(
            crate::thread::Blocker::Lock {
                kind: crate::thread::SyncKind::Condvar,
                addr: self as *const Self as *const () as usize,
                owner: None,
            },
            || {
                node.as_ref().wait(deadline, intr, || {
                    let mut q = self.queue.lock();
                    // SAFETY: if queued, the node is in this condvar's list.
                    let removed = unsafe { q.remove(&node) };
                    if removed {
                        self.waiters.fetch_sub(1, Ordering::Relaxed);
                    }
                    removed
                })
            },
        );
        mutex.raw().lock();
        mutex.mark_owner();
        wake
    }

    /// Blocks until notified (or a spurious wake-up). Not interruptible.
    ///
    /// # Errors
    ///
    /// `Err(PoisonError)` holding the re-acquired guard if the mutex is
    /// poisoned.
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        let mutex = guard.mutex();
        let mut intr = Interrupts::uninterruptible();
        self.wait_raw(mutex, None, &mut intr);
        if mutex.poison().get() {
            Err(PoisonError::new(guard))
        } else {
            Ok(guard)
        }
    }

    /// Blocks while `condition` returns `true` for the protected data.
    ///
    /// # Errors
    ///
    /// As [`wait`](Condvar::wait).
    pub fn wait_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: F,
    ) -> LockResult<MutexGuard<'a, T>>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut *guard) {
            guard = self.wait(guard)?;
        }
        Ok(guard)
    }

    /// Blocks until notified or until `dur` has elapsed. Not interruptible.
    ///
    /// # Errors
    ///
    /// As [`wait`](Condvar::wait).
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        dur: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        self.wait_deadline(guard, facade::deadline_after(dur))
    }

    fn wait_deadline<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Option<Instant>,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let mutex = guard.mutex();
        let mut intr = Interrupts::uninterruptible();
        let wake = self.wait_raw(mutex, deadline, &mut intr);
        let res = (guard, WaitTimeoutResult(wake == Wake::TimedOut));
        if mutex.poison().get() {
            Err(PoisonError::new(res))
        } else {
            Ok(res)
        }
    }

    /// Blocks while `condition` holds, for at most `dur` in total.
    ///
    /// The result reports a timeout only if the condition still held when
    /// the time ran out.
    ///
    /// # Errors
    ///
    /// As [`wait`](Condvar::wait).
    pub fn wait_timeout_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        dur: Duration,
        mut condition: F,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)>
    where
        F: FnMut(&mut T) -> bool,
    {
        let deadline = facade::deadline_after(dur);
        loop {
            if !condition(&mut *guard) {
                return Ok((guard, WaitTimeoutResult(false)));
            }
            let (g, res) = self.wait_deadline(guard, deadline)?;
            guard = g;
            if res.timed_out() {
                let timed_out = condition(&mut *guard);
                return Ok((guard, WaitTimeoutResult(timed_out)));
            }
        }
    }

    /// Blocks until notified or interrupted (Java's `Condition.await`).
    ///
    /// If a notification and an interrupt race, the notification wins: the
    /// call returns `Ok` and the interrupt stays pending.
    ///
    /// # Errors
    ///
    /// [`WaitError::Interrupted`] with the re-acquired guard (interrupt flag
    /// cleared), or [`WaitError::Poisoned`] if the mutex is poisoned (an
    /// interrupt that ended the wait is then left pending).
    pub fn wait_interruptibly<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
    ) -> Result<MutexGuard<'a, T>, WaitError<MutexGuard<'a, T>>> {
        self.wait_deadline_interruptibly(guard, None)
            .map(|(g, _)| g)
    }

    /// Blocks until notified, interrupted, or `dur` has elapsed.
    ///
    /// # Errors
    ///
    /// As [`wait_interruptibly`](Condvar::wait_interruptibly).
    pub fn wait_timeout_interruptibly<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        dur: Duration,
    ) -> Result<(MutexGuard<'a, T>, WaitTimeoutResult), WaitError<MutexGuard<'a, T>>> {
        self.wait_deadline_interruptibly(guard, facade::deadline_after(dur))
    }

    fn wait_deadline_interruptibly<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Option<Instant>,
    ) -> Result<(MutexGuard<'a, T>, WaitTimeoutResult), WaitError<MutexGuard<'a, T>>> {
        let mutex = guard.mutex();
        let mut intr = Interrupts::interruptible();
        let wake = self.wait_raw(mutex, deadline, &mut intr);
        if mutex.poison().get() {
            if wake == Wake::Interrupted {
                facade::reinterrupt();
            }
            return Err(WaitError::Poisoned(PoisonError::new(guard)));
        }
        match wake {
            Wake::Interrupted => Err(WaitError::Interrupted(guard)),
            Wake::TimedOut => Ok((guard, WaitTimeoutResult(true))),
            Wake::Notified(_) => Ok((guard, WaitTimeoutResult(false))),
        }
    }

    /// Wakes the longest-waiting waiter, if any.
    pub fn notify_one(&self) {
        if self.waiters.load(Ordering::Relaxed) == 0 {
            return;
        }
        let n = {
            let mut q = self.queue.lock();
            let n = q.pop_front();
            if n.is_some() {
                self.waiters.fetch_sub(1, Ordering::Relaxed);
            }
            n
        };
        if let Some(n) = n {
            n.notify(NOTIFIED);
        }
    }

    /// Wakes every current waiter.
    pub fn notify_all(&self) {
        if self.waiters.load(Ordering::Relaxed) == 0 {
            return;
        }
        let all = {
            let mut q = self.queue.lock();
            self.waiters.store(0, Ordering::Relaxed);
            q.drain()
        };
        all.notify_all(NOTIFIED);
    }
}

impl Default for Condvar {
    fn default() -> Condvar {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar").finish_non_exhaustive()
    }
}
