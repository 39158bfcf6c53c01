//! [`Mutex`]: mutual exclusion that parks the virtual thread.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::pin::pin;
use std::sync::{LockResult, TryLockError, TryLockResult};

use super::error::LockError;
use super::facade::{self, AtomicUsize, Interrupts, Lock, Ordering};
use super::poison;
use super::waitq::{WaitList, Waiter, Wake};

/// Held.
const LOCKED: usize = 1;
/// The wait queue is non-empty (changed only with the queue lock held).
const QUEUED: usize = 2;
/// A woken waiter is on its way to retry; unlock need not wake another.
const WOKEN: usize = 4;
/// Starvation mode: unlock hands off to the head; nobody barges.
/// Invariant: `STARVING` implies `LOCKED`.
const STARVING: usize = 8;

/// Token: "you were woken; compete for the lock".
const RETRY: usize = 1;
/// Token: "you own the lock now".
const HANDOFF: usize = 2;

/// How long a waiter may lose races before it asks for direct handoff.
#[cfg(not(loom))]
const STARVATION_THRESHOLD: std::time::Duration = std::time::Duration::from_millis(1);

/// Tracks how long a waiter has been waiting.
struct Patience {
    #[cfg(not(loom))]
    since: Option<std::time::Instant>,
    #[cfg(loom)]
    retries: u32,
}

impl Patience {
    fn new() -> Self {
        Patience {
            #[cfg(not(loom))]
            since: None,
            #[cfg(loom)]
            retries: 0,
        }
    }

    /// Called when the waiter first queues.
    fn start(&mut self) {
        #[cfg(not(loom))]
        if self.since.is_none() {
            // Weft's clock: virtual in a simulation, where a decision
            // taken on real time would differ from run to run.
            self.since = Some(crate::clock::now());
        }
    }

    /// Called after a lost race: has it waited too long?
    fn lost_race(&mut self) -> bool {
        #[cfg(not(loom))]
        {
            self.exhausted()
        }
        #[cfg(loom)]
        {
            // Deterministic for the model checker: ask for handoff after the
            // first lost race, so the models exercise starvation mode.
            self.retries += 1;
            true
        }
    }

    /// Has it waited longer than the starvation threshold?
    fn exhausted(&self) -> bool {
        #[cfg(not(loom))]
        {
            self.since.is_some_and(|s| {
                crate::clock::now().saturating_duration_since(s) >= STARVATION_THRESHOLD
            })
        }
        #[cfg(loom)]
        {
            self.retries > 0
        }
    }
}

/// The lock word and the wait queue, without data or poisoning. Shared by
/// [`Mutex`] and [`Condvar`](super::Condvar).
pub(crate) struct RawMutex {
    state: AtomicUsize,
    queue: Lock<WaitList<()>>,
}

impl RawMutex {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        RawMutex {
            state: AtomicUsize::new(0),
            queue: Lock::new(WaitList::new()),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        RawMutex {
            state: AtomicUsize::new(0),
            queue: Lock::new(WaitList::new()),
        }
    }

    /// Takes the lock if it is free (barging allowed in normal mode; in
    /// starvation mode the lock is never free).
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & LOCKED != 0 {
                return false;
            }
            match self.state.compare_exchange_weak(
                s,
                s | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(x) => s = x,
            }
        }
    }

    /// Acquires the lock, ignoring interrupts.
    #[inline]
    pub(crate) fn lock(&self) {
        if self
            .state
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            let mut intr = Interrupts::uninterruptible();
            let acquired = self.lock_slow(&mut intr);
            debug_assert!(acquired);
        }
    }

    /// Acquires the lock; `false` if interrupted while it had to wait (the
    /// interrupt flag is then cleared).
    #[inline]
    pub(crate) fn lock_interruptibly(&self) -> bool {
        if self
            .state
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return true;
        }
        let mut intr = Interrupts::interruptible();
        self.lock_slow(&mut intr)
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self, intr: &mut Interrupts) -> bool {
        // Brief spin while the holder is (presumably) running elsewhere and
        // nobody is queued: short critical sections end before we park.
        let mut step = 0;
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & LOCKED == 0 {
                if self.try_lock() {
                    return true;
                }
                continue;
            }
            if s & (QUEUED | STARVING) != 0 || !facade::spin(step) {
                break;
            }
            step += 1;
        }

        let node = pin!(Waiter::new(()));
        let mut patience = Patience::new();
        // Where to queue: a waiter that lost a race keeps its place at the front.
        let mut front = false;
        // Ask for starvation mode when queueing?
        let mut starving = false;
        loop {
            {
                let mut q = self.queue.lock();
                let mut s = self.state.load(Ordering::Relaxed);
                loop {
                    if s & LOCKED == 0 {
                        match self.state.compare_exchange_weak(
                            s,
                            s | LOCKED,
                            Ordering::Acquire,
                            Ordering::Relaxed,
                        ) {
                            Ok(_) => return true,
                            Err(x) => {
                                s = x;
                                continue;
                            }
                        }
                    }
                    let new = s | QUEUED | if starving { STARVING } else { 0 };
                    match self.state.compare_exchange_weak(
                        s,
                        new,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => break,
                        Err(x) => s = x,
                    }
                }
                // SAFETY: the node is not queued (fresh, or reset after a
                // notification) and outlives the wait: we return only after
                // `wait` below returned, and `wait` returns only once the
                // node is unqueued and notified, or unlinked by `cancel`.
                unsafe {
                    if front {
                        q.push_front(node.as_ref());
                    } else {
                        q.push_back(node.as_ref());
                    }
                }
            }
            patience.start();

            let wake = node.as_ref().wait(None, intr, || self.cancel(&node));
            match wake {
                Wake::Notified(HANDOFF) => {
                    // We own the lock. Leave starvation mode if we did not
                    // actually have to wait long (Go's exit condition).
                    if !patience.exhausted() {
                        self.state.fetch_and(!STARVING, Ordering::Relaxed);
                    }
                    return true;
                }
                Wake::Notified(_) => {
                    // RETRY: compete. Either take the free lock, or clear
                    // WOKEN while it is held: its holder then wakes the next
                    // waiter on unlock.
                    node.reset();
                    let mut s = self.state.load(Ordering::Relaxed);
                    loop {
                        let (new, acquire) = if s & LOCKED == 0 {
                            ((s | LOCKED) & !WOKEN, true)
                        } else {
                            (s & !WOKEN, false)
                        };
                        match self.state.compare_exchange_weak(
                            s,
                            new,
                            Ordering::Acquire,
                            Ordering::Relaxed,
                        ) {
                            Ok(_) if acquire => return true,
                            Ok(_) => break,
                            Err(x) => s = x,
                        }
                    }
                    if intr.is_interruptible() && facade::interrupt_pending() {
                        facade::take_interrupt();
                        return false;
                    }
                    front = true;
                    starving = patience.lost_race();
                }
                Wake::Interrupted => return false,
                Wake::TimedOut => unreachable!("mutex waits have no deadline"),
            }
        }
    }

    /// Unlinks a waiter that gives up; `false` if it was already woken.
    fn cancel(&self, node: &Waiter<()>) -> bool {
        let mut q = self.queue.lock();
        // SAFETY: if queued, the node is queued in this mutex's list.
        if !unsafe { q.remove(node) } {
            return false;
        }
        if q.is_empty() {
            self.state
                .fetch_and(!(QUEUED | STARVING), Ordering::Relaxed);
        }
        true
    }

    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// The lock must be held by the caller (ownership may have been handed
    /// to it, and it may have migrated carriers since).
    #[inline]
    pub(crate) unsafe fn unlock(&self) {
        if self
            .state
            .compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.unlock_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn unlock_slow(&self) {
        // Nobody to wake (no queue, or a woken waiter is already competing):
        // just release, without the queue lock.
        let mut s = self.state.load(Ordering::Relaxed);
        while s & STARVING == 0 && (s & QUEUED == 0 || s & WOKEN != 0) {
            match self.state.compare_exchange_weak(
                s,
                s & !LOCKED,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(x) => s = x,
            }
        }

        let (notifier, token) = {
            let mut q = self.queue.lock();
            let mut s = self.state.load(Ordering::Relaxed);
            loop {
                if s & STARVING != 0 {
                    // Hand off: LOCKED stays set, ownership moves to the head.
                    let Some(n) = q.pop_front() else {
                        // Unreachable in practice (STARVING is cleared when
                        // the queue drains); release to be safe.
                        self.state
                            .fetch_and(!(LOCKED | STARVING | QUEUED), Ordering::Release);
                        return;
                    };
                    if q.is_empty() {
                        self.state
                            .fetch_and(!(QUEUED | STARVING), Ordering::Relaxed);
                    }
                    break (n, HANDOFF);
                }
                if s & QUEUED == 0 || s & WOKEN != 0 {
                    match self.state.compare_exchange_weak(
                        s,
                        s & !LOCKED,
                        Ordering::Release,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return,
                        Err(x) => {
                            s = x;
                            continue;
                        }
                    }
                }
                let mut new = (s & !LOCKED) | WOKEN;
                if q.len() == 1 {
                    new &= !QUEUED;
                }
                match self
                    .state
                    .compare_exchange_weak(s, new, Ordering::Release, Ordering::Relaxed)
                {
                    Ok(_) => {
                        let n = q.pop_front().expect("QUEUED implies a waiter");
                        break (n, RETRY);
                    }
                    Err(x) => s = x,
                }
            }
        };
        notifier.notify(token);
    }
}

/// A mutual-exclusion lock whose waiters park their virtual thread (or
/// block their OS thread), never the carrier.
///
/// API and semantics mirror [`std::sync::Mutex`], including poisoning with
/// [`std::sync::PoisonError`]/[`LockResult`]/[`TryLockError`]. In addition
/// [`lock_interruptibly`](Mutex::lock_interruptibly) gives up when the
/// thread is interrupted (Java's `lockInterruptibly`); plain
/// [`lock`](Mutex::lock) is not interruptible (Java's `lock`): an interrupt
/// that arrives while it waits is kept pending for the next interruptible
/// call. The lock is not re-entrant: locking it twice on one thread
/// deadlocks.
///
/// # Fairness policy
///
/// The lock has two modes, after Go's `sync.Mutex`:
///
/// * **Normal mode** (throughput). An unlocked mutex is taken by whoever
///   gets there first, including a thread that just released it
///   ("barging"); the uncontended path is a single CAS. Waiters queue FIFO.
///   On unlock, if waiters are queued and none is already awake, the head is
///   woken to *compete* for the lock; if it loses, it goes back to the
///   **front** of the queue, keeping its place. At most one woken waiter
///   competes at a time, so a hot lock does not stampede the queue.
/// * **Starvation mode** (fairness). A woken waiter that loses the race
///   after having waited for more than **1 ms** switches the mutex to
///   starvation mode. Then unlock hands ownership *directly* to the head of
///   the queue (the lock never looks free), newcomers queue at the tail
///   without trying, and nobody can barge. The mode ends when the queue
///   drains, or when a waiter receives the lock after less than 1 ms of
///   waiting.
///
/// So no waiter starves: a waiter at the head of the queue gets the lock
/// within roughly 1 ms plus a few critical sections, and the waiters behind
/// it follow in FIFO order.
///
/// Waiters are nodes on their own stacks in an intrusive FIFO queue,
/// guarded by a short internal lock that is never held across a park.
/// Before queueing, a contender spins very briefly (a few dozen pause
/// instructions) while the lock is held by someone else and nobody is
/// queued.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use weft::sync::Mutex;
///
/// let counter = Arc::new(Mutex::new(0));
/// let handles: Vec<_> = (0..10)
///     .map(|_| {
///         let counter = Arc::clone(&counter);
///         weft::spawn(move || *counter.lock().unwrap() += 1)
///     })
///     .collect();
/// for h in handles {
///     h.join().unwrap();
/// }
/// assert_eq!(*counter.lock().unwrap(), 10);
/// ```
pub struct Mutex<T: ?Sized> {
    raw: RawMutex,
    poison: poison::Flag,
    /// Id of the holding thread (0 if free), for thread dumps and
    /// deadlock detection. Written by the holder only.
    owner: std::sync::atomic::AtomicU64,
    data: UnsafeCell<T>,
}

// SAFETY: like std: the mutex gives exclusive access to `T` to one thread
// at a time, so it can be shared and sent if `T` can be sent.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

/// RAII guard of a locked [`Mutex`]; unlocks when dropped.
///
/// Derefs to the protected data. Like std's, it is not `Send`.
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized + 'a> {
    lock: &'a Mutex<T>,
    poison: poison::Guard,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: sharing the guard only shares `&T`.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    /// Creates an unlocked mutex holding `t`.
    #[cfg(not(loom))]
    pub const fn new(t: T) -> Mutex<T> {
        Mutex {
            raw: RawMutex::new(),
            poison: poison::Flag::new(),
            owner: std::sync::atomic::AtomicU64::new(0),
            data: UnsafeCell::new(t),
        }
    }

    /// Creates an unlocked mutex holding `t`.
    #[cfg(loom)]
    pub fn new(t: T) -> Mutex<T> {
        Mutex {
            raw: RawMutex::new(),
            poison: poison::Flag::new(),
            owner: std::sync::atomic::AtomicU64::new(0),
            data: UnsafeCell::new(t),
        }
    }

    /// Consumes the mutex, returning the data (`Err` if poisoned, with the
    /// data inside).
    pub fn into_inner(self) -> LockResult<T> {
        self.poison.wrap(self.data.into_inner())
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Acquires the mutex, parking until it is available.
    ///
    /// Not interruptible: if the thread is interrupted while waiting, it
    /// keeps waiting and the interrupt stays pending.
    ///
    /// # Errors
    ///
    /// `Err(PoisonError)` (still holding the lock) if another holder
    /// panicked.
    #[inline]
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        if !self.raw.try_lock() {
            crate::thread::with_blocker(self.blocker(), || self.raw.lock());
        }
        // SAFETY: we hold the lock.
        unsafe { self.guard() }
    }

    /// What a thread waiting for this mutex is blocked on (for dumps).
    fn blocker(&self) -> crate::thread::Blocker {
        let owner = self.owner.load(std::sync::atomic::Ordering::Relaxed);
        crate::thread::Blocker::Lock {
            kind: crate::thread::SyncKind::Mutex,
            addr: self as *const Self as *const () as usize,
            owner: (owner != 0).then_some(owner),
        }
    }

    /// Id of the thread holding the mutex, if any (a snapshot).
    pub fn owner_id(&self) -> Option<u64> {
        let o = self.owner.load(std::sync::atomic::Ordering::Relaxed);
        (o != 0).then_some(o)
    }

    /// Records the calling thread as the holder (after any acquisition).
    pub(crate) fn mark_owner(&self) {
        self.owner.store(
            crate::thread::current_id(),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Clears the holder (before any release).
    pub(crate) fn clear_owner(&self) {
        self.owner.store(0, std::sync::atomic::Ordering::Relaxed);
    }

    /// Acquires the mutex unless the thread is interrupted while it has to
    /// wait (Java's `lockInterruptibly`).
    ///
    /// The interrupt flag is only looked at when the call would block; an
    /// uncontended lock succeeds even if it is set. If the lock is handed
    /// over at the same moment as the interrupt arrives, the call succeeds
    /// and the flag stays set.
    ///
    /// # Errors
    ///
    /// [`LockError::Interrupted`] (and the interrupt flag is cleared), or
    /// [`LockError::Poisoned`] holding the guard.
    pub fn lock_interruptibly(&self) -> Result<MutexGuard<'_, T>, LockError<MutexGuard<'_, T>>> {
        if !self.raw.try_lock()
            && !crate::thread::with_blocker(self.blocker(), || self.raw.lock_interruptibly())
        {
            return Err(LockError::Interrupted);
        }
        // SAFETY: we hold the lock.
        unsafe { self.guard() }.map_err(LockError::Poisoned)
    }

    /// Acquires the mutex if it is free right now.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`] if it is held (or waiters are being
    /// served in starvation mode), [`TryLockError::Poisoned`] if poisoned.
    #[inline]
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        if self.raw.try_lock() {
            // SAFETY: we hold the lock.
            Ok(unsafe { self.guard() }?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Whether a holder panicked.
    #[inline]
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Clears the poisoned state.
    #[inline]
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// Mutable access without locking (the borrow checker proves
    /// exclusivity).
    ///
    /// # Errors
    ///
    /// `Err(PoisonError)` wrapping the reference if poisoned.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.poison.wrap(self.data.get_mut())
    }

    /// # Safety
    ///
    /// The raw lock must be held by the caller.
    unsafe fn guard(&self) -> LockResult<MutexGuard<'_, T>> {
        self.mark_owner();
        poison::map_result(self.poison.guard(), |poison| MutexGuard {
            lock: self,
            poison,
            _not_send: PhantomData,
        })
    }

    pub(crate) fn raw(&self) -> &RawMutex {
        &self.raw
    }

    pub(crate) fn poison(&self) -> &poison::Flag {
        &self.poison
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    pub(crate) fn mutex(&self) -> &'a Mutex<T> {
        self.lock
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard proves we hold the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves we hold the lock, exclusively.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.poison.done(&self.poison);
        self.lock.clear_owner();
        // SAFETY: the guard proves we hold the lock.
        unsafe { self.lock.raw.unlock() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(t: T) -> Self {
        Mutex::new(t)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Ok(guard) => d.field("data", &&*guard),
            Err(TryLockError::Poisoned(err)) => d.field("data", &&**err.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.poison.get());
        d.finish_non_exhaustive()
    }
}
