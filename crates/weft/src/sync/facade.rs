//! The tiny platform facade the blocking primitives are written against.
//!
//! Everything in [`crate::sync`] and [`crate::channel`] touches atomics,
//! the short internal queue lock, the current thread handle, parking,
//! deadlines and the interrupt flag only through this module. In a normal
//! build it maps onto `std` atomics, `std::sync::Mutex` and the weft core
//! (`crate::thread::park_deadline` and friends). Under `--cfg loom` it maps
//! onto loom's atomics and mutex, a permit-based parker built from loom
//! primitives, and a model of the interrupt flag, so that
//! `tests/loom_sync.rs` model-checks the *real* state machines of the
//! primitives rather than a copy.
//!
//! Loom has no clock. Under loom a deadline is therefore always considered
//! expired the first time a waiter checks it (after it has enqueued itself),
//! which makes every timed wait race its own cancellation against the
//! notifier — precisely the window where a notification must not be lost.

use std::time::Instant;

#[cfg(loom)]
pub(crate) use ::loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

// ---------------------------------------------------------------------------
// Internal queue lock.
// ---------------------------------------------------------------------------

#[cfg(not(loom))]
type InnerLock<T> = std::sync::Mutex<T>;
#[cfg(not(loom))]
pub(crate) type LockGuard<'a, T> = std::sync::MutexGuard<'a, T>;
#[cfg(loom)]
type InnerLock<T> = ::loom::sync::Mutex<T>;
#[cfg(loom)]
pub(crate) type LockGuard<'a, T> = ::loom::sync::MutexGuard<'a, T>;

/// The short internal lock that protects a wait queue (and, for channels,
/// the buffer). It is held for a handful of instructions — never across a
/// park, never while user code (a `Drop` of a message, a closure) runs — so
/// a carrier that contends on it blocks for at most a few microseconds.
pub(crate) struct Lock<T>(InnerLock<T>);

impl<T> Lock<T> {
    /// Creates the lock.
    #[cfg(not(loom))]
    pub(crate) const fn new(value: T) -> Self {
        Lock(InnerLock::new(value))
    }

    /// Creates the lock.
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        Lock(InnerLock::new(value))
    }

    /// Acquires the lock. Poisoning is ignored: no code that can panic runs
    /// while it is held, and the protected state is always consistent
    /// between two statements that touch it.
    #[inline]
    pub(crate) fn lock(&self) -> LockGuard<'_, T> {
        match self.0.lock() {
            Ok(g) => g,
            Err(e) => e.into_inner(),
        }
    }
}

// ---------------------------------------------------------------------------
// UnsafeCell with loom's closure API (loom tracks accesses to these).
// ---------------------------------------------------------------------------

#[cfg(loom)]
pub(crate) use ::loom::cell::UnsafeCell;

/// `std::cell::UnsafeCell` behind loom's `with`/`with_mut` API, so that the
/// loom build can check the accesses made through it.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `value`.
    #[inline]
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Calls `f` with a shared raw pointer to the contents.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Calls `f` with a mutable raw pointer to the contents.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

// ---------------------------------------------------------------------------
// Threads, parking, interrupts, time.
// ---------------------------------------------------------------------------

#[cfg(not(loom))]
mod imp {
    use std::time::Instant;

    /// A handle that can wake a parked waiter.
    pub(crate) type Thread = crate::thread::Thread;

    /// The current (virtual or OS) thread.
    #[inline]
    pub(crate) fn current() -> Thread {
        crate::thread::current()
    }

    /// Wakes `t` if it is parked, or makes its next park return.
    #[inline]
    pub(crate) fn unpark(t: &Thread) {
        t.unpark();
    }

    /// Parks the current thread (the virtual thread, never its carrier)
    /// until unparked, interrupted, or `deadline` passes. May wake
    /// spuriously. Returns immediately while the interrupt flag is set.
    #[inline]
    pub(crate) fn park(deadline: Option<Instant>) {
        crate::thread::park_deadline(deadline);
    }

    /// Is the current thread's interrupt flag set? (Not cleared.)
    #[inline]
    pub(crate) fn interrupt_pending() -> bool {
        crate::thread::current_interrupted()
    }

    /// Clears the current thread's interrupt flag, returning its old value.
    #[inline]
    pub(crate) fn take_interrupt() -> bool {
        crate::thread::take_interrupt()
    }

    /// Sets the current thread's interrupt flag again (after an
    /// uninterruptible wait swallowed it).
    pub(crate) fn reinterrupt() {
        crate::thread::current().interrupt_flag_restore();
    }

    /// Has `deadline` passed?
    #[inline]
    pub(crate) fn expired(deadline: Instant) -> bool {
        crate::clock::now() >= deadline
    }

    /// Lets another OS thread run while we wait (without parking) for a
    /// notifier that is about to finish.
    pub(crate) fn relax() {
        std::thread::yield_now();
    }

    /// Spins for the `step`-th time (busy-waiting `1 << step` pause
    /// instructions) and returns `true`, or returns `false` once the spin
    /// budget (1 + 2 + … + 32 pauses, well under a microsecond) is spent.
    #[inline]
    pub(crate) fn spin(step: u32) -> bool {
        if step >= 6 {
            return false;
        }
        for _ in 0..(1u32 << step) {
            std::hint::spin_loop();
        }
        true
    }
}

#[cfg(loom)]
mod imp {
    //! Loom's own `thread::park`/`unpark` cannot be used: loom's `unpark`
    //! also wakes a thread blocked in a loom `Mutex` or in `join`, which
    //! makes loom fail an internal assertion, while a real unpark that
    //! arrives late (a stale permit) is harmless. So each modelled thread
    //! gets a permit-based parker made of a loom `Mutex<bool>` + `Condvar`,
    //! which has exactly the semantics of `std::thread::park` (and of
    //! `weft::park`): one sticky permit, spurious returns allowed.
    use super::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    struct State {
        interrupted: AtomicBool,
        permit: ::loom::sync::Mutex<bool>,
        cv: ::loom::sync::Condvar,
    }

    ::loom::thread_local! {
        static CURRENT: Arc<State> = Arc::new(State {
            interrupted: AtomicBool::new(false),
            permit: ::loom::sync::Mutex::new(false),
            cv: ::loom::sync::Condvar::new(),
        });
    }

    /// A modelled thread: its parker and interrupt flag.
    #[derive(Clone)]
    pub(crate) struct Thread(Arc<State>);

    impl Thread {
        /// Sets the thread's interrupt flag and unparks it.
        pub(crate) fn interrupt(&self) {
            self.0.interrupted.store(true, Ordering::SeqCst);
            unpark(self);
        }
    }

    pub(crate) fn current() -> Thread {
        Thread(CURRENT.with(Arc::clone))
    }

    pub(crate) fn unpark(t: &Thread) {
        let mut permit = t.0.permit.lock().unwrap();
        *permit = true;
        drop(permit);
        t.0.cv.notify_one();
    }

    pub(crate) fn park(deadline: Option<Instant>) {
        if interrupt_pending() || deadline.is_some() {
            // A timed park always "times out"; an interrupted one returns at
            // once. Yield so that loom lets the other threads progress.
            ::loom::thread::yield_now();
            return;
        }
        let me = current();
        let mut permit = me.0.permit.lock().unwrap();
        while !*permit {
            permit = me.0.cv.wait(permit).unwrap();
        }
        *permit = false;
    }

    pub(crate) fn interrupt_pending() -> bool {
        CURRENT.with(|s| s.interrupted.load(Ordering::SeqCst))
    }

    pub(crate) fn take_interrupt() -> bool {
        CURRENT.with(|s| s.interrupted.swap(false, Ordering::SeqCst))
    }

    pub(crate) fn reinterrupt() {
        CURRENT.with(|s| s.interrupted.store(true, Ordering::SeqCst));
    }

    pub(crate) fn expired(_deadline: Instant) -> bool {
        true
    }

    pub(crate) fn relax() {
        ::loom::thread::yield_now();
    }

    /// No spinning in the model: queue at once.
    pub(crate) fn spin(_step: u32) -> bool {
        false
    }
}

pub(crate) use imp::*;

/// Turns a timeout into a deadline; `None` if it is too far away to
/// represent (treated as "no deadline").
#[inline]
pub(crate) fn deadline_after(timeout: std::time::Duration) -> Option<Instant> {
    crate::clock::now().checked_add(timeout)
}

/// How a blocking call treats `Thread::interrupt()`.
///
/// An interruptible call returns `Interrupted` (clearing the flag). An
/// uninterruptible one clears the flag while it keeps waiting (otherwise
/// `park` would return at once forever) and sets it again when it is done,
/// as `AbstractQueuedSynchronizer.acquire` does in Java.
pub(crate) struct Interrupts {
    interruptible: bool,
    swallowed: bool,
}

impl Interrupts {
    /// For a call that returns `Interrupted` when interrupted.
    #[inline]
    pub(crate) fn interruptible() -> Self {
        Interrupts {
            interruptible: true,
            swallowed: false,
        }
    }

    /// For a call that ignores interrupts (and keeps the flag for later).
    #[inline]
    pub(crate) fn uninterruptible() -> Self {
        Interrupts {
            interruptible: false,
            swallowed: false,
        }
    }

    /// Whether interrupts end the wait.
    #[inline]
    pub(crate) fn is_interruptible(&self) -> bool {
        self.interruptible
    }

    /// Called when the flag is found set during an uninterruptible wait.
    #[inline]
    pub(crate) fn swallow(&mut self) {
        if take_interrupt() {
            self.swallowed = true;
        }
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        if self.swallowed {
            reinterrupt();
        }
    }
}
