//! [`RwLock`]: a reader-writer lock that parks the virtual thread.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::pin::pin;
use std::sync::{LockResult, TryLockError, TryLockResult};

use super::facade::{AtomicUsize, Interrupts, Lock, LockGuard, Ordering};
use super::poison;
use super::waitq::{WaitList, Waiter, Wake};

/// A writer holds the lock.
const WRITER: usize = 1;
/// Somebody is queued (changed only with the queue lock held).
const QUEUED: usize = 2;
/// One reader; the reader count lives in the bits above.
const ONE_READER: usize = 4;
/// Token: "the lock was handed to you".
const GRANTED: usize = 1;

/// The lock word and queue, without data.
struct RawRwLock {
    state: AtomicUsize,
    /// Waiters; the slot says whether it is a writer.
    queue: Lock<WaitList<bool>>,
}

impl RawRwLock {
    #[cfg(not(loom))]
    const fn new() -> Self {
        RawRwLock {
            state: AtomicUsize::new(0),
            queue: Lock::new(WaitList::new()),
        }
    }

    #[cfg(loom)]
    fn new() -> Self {
        RawRwLock {
            state: AtomicUsize::new(0),
            queue: Lock::new(WaitList::new()),
        }
    }

    #[inline]
    fn try_read(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & (WRITER | QUEUED) != 0 {
                return false;
            }
            let new = s.checked_add(ONE_READER).expect("too many readers");
            match self
                .state
                .compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(x) => s = x,
            }
        }
    }

    #[inline]
    fn try_write(&self) -> bool {
        self.state
            .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    fn read(&self) {
        if !self.try_read() {
            self.lock_slow(false);
        }
    }

    #[inline]
    fn write(&self) {
        if !self.try_write() {
            self.lock_slow(true);
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self, writer: bool) {
        let node = pin!(Waiter::new(writer));
        {
            let mut q = self.queue.lock();
            let mut s = self.state.load(Ordering::Relaxed);
            loop {
                let (new, acquired) = if writer && s == 0 {
                    (WRITER, true)
                } else if !writer && s & (WRITER | QUEUED) == 0 {
                    (s.checked_add(ONE_READER).expect("too many readers"), true)
                } else {
                    (s | QUEUED, false)
                };
                match self
                    .state
                    .compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed)
                {
                    Ok(_) if acquired => return,
                    Ok(_) => break,
                    Err(x) => s = x,
                }
            }
            // SAFETY: the node is fresh and we return only after `wait`
            // returned, i.e. after a releaser detached and notified it.
            unsafe { q.push_back(node.as_ref()) };
        }
        let mut intr = Interrupts::uninterruptible();
        let wake = crate::thread::with_blocker(
            crate::thread::Blocker::Lock {
                kind: crate::thread::SyncKind::RwLock,
                addr: self as *const Self as *const () as usize,
                owner: None,
            },
            || {
                node.as_ref().wait(None, &mut intr, || {
                    unreachable!("no deadline, uninterruptible")
                })
            },
        );
        debug_assert_eq!(wake, Wake::Notified(GRANTED));
    }

    /// # Safety
    ///
    /// The caller holds a read lock.
    #[inline]
    unsafe fn read_unlock(&self) {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & QUEUED != 0 && s >> 2 == 1 {
                // Last reader out with waiters queued: hand over.
                return self.release_slow();
            }
            match self.state.compare_exchange_weak(
                s,
                s - ONE_READER,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(x) => s = x,
            }
        }
    }

    /// # Safety
    ///
    /// The caller holds the write lock.
    #[inline]
    unsafe fn write_unlock(&self) {
        if self
            .state
            .compare_exchange(WRITER, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.release_slow();
        }
    }

    /// Releases the last hold on the lock (the only reader, or the writer)
    /// while waiters are queued, and hands the lock to the head of the
    /// queue.
    ///
    /// While `QUEUED` is set and the caller still holds the lock alone,
    /// nobody else can change the state word (fast paths require `QUEUED`
    /// clear, other readers are gone), so with the queue lock held it is
    /// ours to overwrite.
    #[cold]
    #[inline(never)]
    fn release_slow(&self) {
        let mut q = self.queue.lock();
        // Acquire: synchronize with the `Release` decrements of the readers
        // that left before us, so that their reads happen before the next
        // owner's writes.
        let s = self.state.load(Ordering::Acquire);
        if s >> 2 > 1 {
            // Cannot happen (only the last holder gets here), but be
            // robust: just drop our read hold.
            drop(q);
            self.state.fetch_sub(ONE_READER, Ordering::Release);
            return;
        }
        let grants = Self::dispatch(&mut q, &self.state);
        drop(q);
        let mut grants = grants;
        while let Some(n) = grants.pop() {
            n.notify(GRANTED);
        }
    }

    /// Picks the next owner(s) from the head of the queue and publishes the
    /// new state. Queue lock held, lock otherwise free.
    fn dispatch(
        q: &mut LockGuard<'_, WaitList<bool>>,
        state: &AtomicUsize,
    ) -> super::waitq::NotifyAll<bool> {
        let mut grants = super::waitq::NotifyAll::new();
        let mut new = 0;
        if q.peek_front(|w| *w) == Some(true) {
            grants.push(q.pop_front().expect("peeked"));
            new = WRITER;
        } else {
            while q.peek_front(|w| !*w) == Some(true) {
                grants.push(q.pop_front().expect("peeked"));
                new += ONE_READER;
            }
        }
        if !q.is_empty() {
            new |= QUEUED;
        }
        state.store(new, Ordering::Release);
        grants
    }
}

/// A reader-writer lock whose waiters park their virtual thread, never the
/// carrier. API and poisoning mirror [`std::sync::RwLock`].
///
/// Only a writer that panics poisons the lock. Waiting is not
/// interruptible.
///
/// # Policy
///
/// Fair and phase-alternating: when nobody waits, readers share the lock
/// with one CAS each and a writer takes a free lock with one CAS. As soon as
/// anybody has to wait, newcomers — readers included — queue behind it
/// (FIFO), so writers never starve behind a stream of readers and readers
/// never starve behind writers. On release the lock is handed over
/// directly: to the writer at the head of the queue, or to the whole run of
/// readers at the head of the queue.
///
/// Consequence (as with std on most platforms): a thread that already holds
/// a read lock and asks for another one may deadlock if a writer is queued
/// in between. Do not take a read lock recursively.
///
/// # Examples
///
/// ```
/// use weft::sync::RwLock;
///
/// let lock = RwLock::new(5);
/// {
///     let r1 = lock.read().unwrap();
///     let r2 = lock.read().unwrap();
///     assert_eq!(*r1 + *r2, 10);
/// }
/// *lock.write().unwrap() += 1;
/// assert_eq!(*lock.read().unwrap(), 6);
/// ```
pub struct RwLock<T: ?Sized> {
    raw: RawRwLock,
    poison: poison::Flag,
    data: UnsafeCell<T>,
}

// SAFETY: like std: the lock hands out `&mut T` to one thread or `&T` to
// several at a time.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: as above; readers share `&T` across threads, hence `T: Sync`.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

/// RAII shared access to an [`RwLock`]; released on drop.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized + 'a> {
    lock: &'a RwLock<T>,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: sharing the guard shares `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}

/// RAII exclusive access to an [`RwLock`]; released on drop.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized + 'a> {
    lock: &'a RwLock<T>,
    poison: poison::Guard,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: sharing the guard shares `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<T> RwLock<T> {
    /// Creates an unlocked lock holding `t`.
    #[cfg(not(loom))]
    pub const fn new(t: T) -> RwLock<T> {
        RwLock {
            raw: RawRwLock::new(),
            poison: poison::Flag::new(),
            data: UnsafeCell::new(t),
        }
    }

    /// Creates an unlocked lock holding `t`.
    #[cfg(loom)]
    pub fn new(t: T) -> RwLock<T> {
        RwLock {
            raw: RawRwLock::new(),
            poison: poison::Flag::new(),
            data: UnsafeCell::new(t),
        }
    }

    /// Consumes the lock, returning the data (`Err` if poisoned).
    pub fn into_inner(self) -> LockResult<T> {
        self.poison.wrap(self.data.into_inner())
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Acquires shared access, parking while a writer holds or waits for
    /// the lock.
    ///
    /// # Errors
    ///
    /// `Err(PoisonError)` holding the guard if a writer panicked.
    #[inline]
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        self.raw.read();
        self.read_guard()
    }

    /// Acquires shared access if that is possible without waiting.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`] or [`TryLockError::Poisoned`].
    #[inline]
    pub fn try_read(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        if self.raw.try_read() {
            Ok(self.read_guard()?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Acquires exclusive access, parking until it is available.
    ///
    /// # Errors
    ///
    /// `Err(PoisonError)` holding the guard if a writer panicked.
    #[inline]
    pub fn write(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        self.raw.write();
        self.write_guard()
    }

    /// Acquires exclusive access if the lock is free right now.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`] or [`TryLockError::Poisoned`].
    #[inline]
    pub fn try_write(&self) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        if self.raw.try_write() {
            Ok(self.write_guard()?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Whether a writer panicked while holding the lock.
    #[inline]
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Clears the poisoned state.
    #[inline]
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// Mutable access without locking.
    ///
    /// # Errors
    ///
    /// `Err(PoisonError)` wrapping the reference if poisoned.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.poison.wrap(self.data.get_mut())
    }

    fn read_guard(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        self.poison.wrap(RwLockReadGuard {
            lock: self,
            _not_send: PhantomData,
        })
    }

    fn write_guard(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        poison::map_result(self.poison.guard(), |poison| RwLockWriteGuard {
            lock: self,
            poison,
            _not_send: PhantomData,
        })
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard proves shared access.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard proves we hold a read lock.
        unsafe { self.lock.raw.read_unlock() }
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard proves exclusive access.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves exclusive access.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.poison.done(&self.poison);
        // SAFETY: the guard proves we hold the write lock.
        unsafe { self.lock.raw.write_unlock() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> RwLock<T> {
        RwLock::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    fn from(t: T) -> Self {
        RwLock::new(t)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Ok(guard) => d.field("data", &&*guard),
            Err(TryLockError::Poisoned(err)) => d.field("data", &&**err.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.poison.get());
        d.finish_non_exhaustive()
    }
}
