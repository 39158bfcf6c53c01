//! Blocking synchronization primitives for virtual threads.
//!
//! [`Mutex`], [`RwLock`], [`Condvar`], [`Semaphore`], [`Barrier`] and
//! [`CountDownLatch`] have the APIs of their `std::sync` / `java.util.concurrent`
//! namesakes, but a thread that has to wait **parks its virtual thread**:
//! the carrier OS thread goes on running other virtual threads. Called from
//! a plain OS thread, they really block that thread, so the same code runs
//! in "platform" and "virtual" mode.
//!
//! # Interrupts
//!
//! [`Thread::interrupt`](crate::Thread::interrupt) ends the interruptible
//! waits, which then clear the interrupt flag and report it (Java
//! semantics):
//!
//! | call | on interrupt |
//! |---|---|
//! | [`Mutex::lock_interruptibly`] | `Err(LockError::Interrupted)` |
//! | [`Condvar::wait_interruptibly`], [`Condvar::wait_timeout_interruptibly`] | `Err(WaitError::Interrupted(guard))`, mutex re-locked |
//! | [`Semaphore::acquire`], [`Semaphore::acquire_timeout`] | `Err` of kind [`std::io::ErrorKind::Interrupted`] |
//! | [`CountDownLatch::wait`], [`CountDownLatch::wait_timeout`] | `Err` of kind [`std::io::ErrorKind::Interrupted`] |
//!
//! The flag is looked at only when a call actually has to wait: locking a
//! free mutex or waiting on an open latch succeeds even if it is set. When
//! the thing waited for (the lock, a permit, a notification, the latch
//! opening) arrives at the same moment as the interrupt, the call succeeds
//! and the interrupt stays pending — nothing handed to a waiter is ever
//! dropped. [`Mutex::lock`], [`RwLock`], [`Barrier::wait`] and the plain
//! [`Condvar`] waits are *not* interruptible (like Java's `lock()` and
//! `awaitUninterruptibly()`): they keep waiting and leave the flag set for
//! the next interruptible call.
//!
//! # How waiting works
//!
//! Every primitive keeps a lock word for its fast path (one CAS when
//! uncontended; no allocation, no system call) and, for the slow path, an
//! intrusive FIFO of waiter nodes that live on the waiting threads' own
//! stacks, protected by a short internal lock that is never held across a
//! park. Wake-ups carry a token (and, where it matters, ownership: a lock, a
//! permit, a message) directly to the chosen waiter. See [`Mutex`] for the
//! fairness policy of the mutex.
//!
//! # Files, bottom-up
//!
//! Each file names only files listed before it:
//!
//! - `facade.rs`: the atomics, the internal lock, parking and the
//!   interrupt flag, as the primitives see them (loom's under `--cfg
//!   loom`); `error.rs`: [`LockError`], [`WaitError`]; `poison.rs`:
//!   poisoning.
//! - `waitq.rs`: the wait queue every primitive keeps its waiters in.
//! - `mutex.rs`, `rwlock.rs`, `semaphore.rs`, `latch.rs`: the primitives;
//!   `condvar.rs` waits on a [`Mutex`]; `barrier.rs` is a mutex and a
//!   condition variable.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use weft::sync::{Condvar, Mutex};
//!
//! // A tiny bounded buffer built from a mutex and two condition variables.
//! struct Buffer {
//!     items: Mutex<Vec<u32>>,
//!     not_empty: Condvar,
//!     not_full: Condvar,
//! }
//!
//! let buf = Arc::new(Buffer {
//!     items: Mutex::new(Vec::new()),
//!     not_empty: Condvar::new(),
//!     not_full: Condvar::new(),
//! });
//! let producer = {
//!     let buf = Arc::clone(&buf);
//!     weft::spawn(move || {
//!         for i in 1..=100 {
//!             let items = buf.items.lock().unwrap();
//!             let mut items = buf.not_full.wait_while(items, |v| v.len() >= 4).unwrap();
//!             items.push(i);
//!             buf.not_empty.notify_one();
//!         }
//!     })
//! };
//! let mut sum = 0;
//! for _ in 0..100 {
//!     let items = buf.items.lock().unwrap();
//!     let mut items = buf.not_empty.wait_while(items, |v| v.is_empty()).unwrap();
//!     sum += items.remove(0);
//!     buf.not_full.notify_one();
//! }
//! producer.join().unwrap();
//! assert_eq!(sum, 5050);
//! ```

mod barrier;
mod condvar;
mod error;
pub(crate) mod facade;
mod latch;
mod mutex;
mod poison;
mod rwlock;
mod semaphore;
pub(crate) mod waitq;

pub use crate::unpoison::Unpoison;
pub use barrier::{Barrier, BarrierWaitResult};
pub use condvar::{Condvar, WaitTimeoutResult};
pub(crate) use error::interrupted_error;
pub use error::{LockError, WaitError};
pub use latch::CountDownLatch;
pub use mutex::{Mutex, MutexGuard};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};

/// Hooks for the loom model checks (`tests/loom_sync.rs`); only built with
/// `--cfg loom`. Not part of the public API.
#[cfg(loom)]
#[doc(hidden)]
pub mod __loom {
    /// A modelled thread handle that can be interrupted.
    #[derive(Clone)]
    pub struct Handle(super::facade::Thread);

    /// The current loom thread's handle.
    pub fn current() -> Handle {
        Handle(super::facade::current())
    }

    impl Handle {
        /// Sets the thread's (modelled) interrupt flag and unparks it.
        pub fn interrupt(&self) {
            self.0.interrupt();
        }
    }

    /// Is the current thread's interrupt flag set?
    pub fn is_interrupted() -> bool {
        super::facade::interrupt_pending()
    }
}
