//! The calling thread: [`current`], whether it is virtual, and its
//! interrupt flag.
//!
//! On a carrier, the current virtual thread is the carrier's mounted thread
//! (`sched::mounted_ptr`); elsewhere it is a lazily created record for
//! the OS thread, or the task a fixed executor's worker is running.

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use super::*;
use crate::sched::{self};

std::thread_local! {
    /// Handle for a plain OS thread, created on first use.
    static OS_THREAD: Thread = {
        let std = std::thread::current();
        let t = Thread::from_kind(std.name().map(str::to_owned), Kind::Os(OnceLock::from(std)), 0);
        t.set_state(State::Running);
        t
    };
    /// While a fixed-pool worker runs a task, the task's own identity.
    static OS_TASK: std::cell::RefCell<Option<Thread>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` on this OS thread as the task `t` (fixed executors): `current()`
/// returns `t`, and interrupts of `t` reach blocking calls made by `f`.
pub(crate) fn run_as_os_task<R>(t: &Thread, f: impl FnOnce() -> R) -> R {
    if let Kind::Os(slot) = &t.inner.kind {
        let _ = slot.set(std::thread::current());
    }
    t.set_state(State::Running);
    let prev = OS_TASK.with(|c| c.replace(Some(t.clone())));
    struct Restore(Option<Thread>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            OS_TASK.with(|c| *c.borrow_mut() = prev);
        }
    }
    let _restore = Restore(prev);
    f()
}

/// A new identity for a task queued on a fixed OS-thread pool.
pub(crate) fn new_os_task(name: Option<String>) -> Thread {
    let t = Thread::from_kind(name, Kind::Os(OnceLock::new()), 0);
    t.set_state(State::Runnable);
    t
}

/// The calling OS thread's handle (or the pool task it is running).
pub(super) fn with_os_thread<R>(f: impl FnOnce(&Thread) -> R) -> R {
    let task = OS_TASK.with(|c| c.borrow().clone());
    match task {
        Some(t) => f(&t),
        None => OS_THREAD.with(f),
    }
}

/// The virtual thread mounted on this carrier, if any. Read through an
/// `#[inline(never)]` accessor: a virtual thread may migrate between carriers
/// at any suspension, and LLVM may otherwise cache this TLS address across
/// the switch (llvm/llvm-project#98479).
#[inline(never)]
pub(crate) fn current_virtual() -> Option<&'static VThread> {
    let p = sched::mounted_ptr();
    // SAFETY: the carrier sets this pointer to the mounted thread's VThread for
    // exactly as long as it runs that thread, and holds an Arc to it
    // meanwhile; the reference is only used before the next suspension.
    unsafe { p.as_ref() }
}

/// Returns a handle to the calling thread, virtual or OS.
pub fn current() -> Thread {
    match sched::mounted_arc() {
        Some(inner) => Thread { inner },
        None => with_os_thread(Thread::clone),
    }
}

/// Whether the calling code runs on a virtual thread.
pub fn is_virtual() -> bool {
    current_virtual().is_some()
}

/// The calling thread's id as a number (virtual or OS).
pub(crate) fn current_id() -> u64 {
    match current_virtual() {
        Some(inner) => inner.id.0.get(),
        None => with_os_thread(|t| t.inner.id.0.get()),
    }
}

/// Whether the current thread's interrupt flag is set (not cleared).
pub(crate) fn current_interrupted() -> bool {
    match current_virtual() {
        Some(inner) => inner.interrupted.load(Ordering::SeqCst),
        None => with_os_thread(|t| t.is_interrupted()),
    }
}

/// Clears the current thread's interrupt flag, returning whether it was set.
pub(crate) fn take_interrupt() -> bool {
    match current_virtual() {
        Some(inner) => inner.interrupted.swap(false, Ordering::SeqCst),
        None => with_os_thread(|t| t.clear_interrupt()),
    }
}

/// Returns whether the current thread was interrupted, and clears the flag
/// (Java's `Thread.interrupted()`).
pub fn interrupted() -> bool {
    take_interrupt()
}

pub(crate) fn interrupted_error() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "weft: thread interrupted")
}
