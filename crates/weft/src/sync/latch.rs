//! [`CountDownLatch`]: a one-shot gate opened by counting down to zero.

use std::fmt;
use std::io;
use std::pin::pin;
use std::time::{Duration, Instant};

use super::error::interrupted_error;
use super::facade::{self, AtomicUsize, Interrupts, Lock, Ordering};
use super::waitq::{WaitList, Waiter, Wake};

/// Token: "the count reached zero".
const OPEN: usize = 1;

/// Java's `java.util.concurrent.CountDownLatch`: threads
/// [`wait`](CountDownLatch::wait) until [`count_down`](CountDownLatch::count_down)
/// has been called `n` times. One-shot: once the count is zero it stays
/// zero and every wait returns at once.
///
/// Waiting parks the virtual thread (or blocks the OS thread) and is
/// interruptible: it returns [`io::ErrorKind::Interrupted`] and clears the
/// flag. The flag is only looked at when the call has to wait; if the latch
/// opens at the same moment as the interrupt arrives, the wait succeeds.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use weft::sync::CountDownLatch;
///
/// let latch = Arc::new(CountDownLatch::new(3));
/// for _ in 0..3 {
///     let latch = Arc::clone(&latch);
///     weft::spawn(move || latch.count_down());
/// }
/// latch.wait().unwrap();
/// assert_eq!(latch.count(), 0);
/// ```
pub struct CountDownLatch {
    count: AtomicUsize,
    queue: Lock<WaitList<()>>,
}

impl CountDownLatch {
    /// Creates a latch that opens after `count` calls to `count_down`
    /// (`0` = already open).
    #[cfg(not(loom))]
    #[must_use]
    pub const fn new(count: usize) -> CountDownLatch {
        CountDownLatch {
            count: AtomicUsize::new(count),
            queue: Lock::new(WaitList::new()),
        }
    }

    /// Creates a latch that opens after `count` calls to `count_down`
    /// (`0` = already open).
    #[cfg(loom)]
    #[must_use]
    pub fn new(count: usize) -> CountDownLatch {
        CountDownLatch {
            count: AtomicUsize::new(count),
            queue: Lock::new(WaitList::new()),
        }
    }

    /// The current count.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Decrements the count; at zero, wakes every waiter. No effect if the
    /// count is already zero.
    pub fn count_down(&self) {
        let mut c = self.count.load(Ordering::Relaxed);
        loop {
            if c == 0 {
                return;
            }
            match self
                .count
                .compare_exchange_weak(c, c - 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(x) => c = x,
            }
        }
        if c == 1 {
            // Waiters check the count with the queue lock held before they
            // enqueue, so after this lock/unlock every waiter either saw zero
            // or is in the list we drain.
            let all = self.queue.lock().drain();
            all.notify_all(OPEN);
        }
    }

    /// Parks until the count reaches zero.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::Interrupted`] if interrupted while waiting.
    pub fn wait(&self) -> io::Result<()> {
        if self.count() == 0 {
            return Ok(());
        }
        self.wait_slow(None).map(|_| ())
    }

    /// Parks until the count reaches zero or `timeout` elapses. `Ok(true)`
    /// if the latch is open.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::Interrupted`] if interrupted while waiting.
    pub fn wait_timeout(&self, timeout: Duration) -> io::Result<bool> {
        if self.count() == 0 {
            return Ok(true);
        }
        match facade::deadline_after(timeout) {
            Some(d) => self.wait_slow(Some(d)),
            None => self.wait_slow(None),
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_slow(&self, deadline: Option<Instant>) -> io::Result<bool> {
        let node = pin!(Waiter::new(()));
        {
            let mut q = self.queue.lock();
            if self.count() == 0 {
                return Ok(true);
            }
            // SAFETY: fresh node; we return only after `wait` returned.
            unsafe { q.push_back(node.as_ref()) };
        }
        let mut intr = Interrupts::interruptible();
        let wake = crate::thread::with_blocker(
            crate::thread::Blocker::Lock {
                kind: crate::thread::SyncKind::CountDownLatch,
                addr: self as *const Self as *const () as usize,
                owner: None,
            },
            || {
                node.as_ref().wait(deadline, &mut intr, || {
                    // SAFETY: if queued, the node is in this latch's list.
                    unsafe { self.queue.lock().remove(&node) }
                })
            },
        );
        match wake {
            Wake::Notified(_) => Ok(true),
            Wake::TimedOut => Ok(false),
            Wake::Interrupted => Err(interrupted_error()),
        }
    }
}

impl fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("count", &self.count())
            .finish_non_exhaustive()
    }
}
