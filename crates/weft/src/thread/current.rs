//! The calling thread: [`current`], whether it is virtual, its interrupt
//! flag, what it waits for ([`with_blocker`]) and its `local!` storage
//! ([`current_locals`]).
//!
//! On a carrier, the current virtual thread is the record the carrier has
//! mounted: the carrier writes it to [`MOUNTED`] around each run
//! ([`set_mounted`]; a thread with a thread-local area of its own finds
//! itself there, seeded when the area is made). Elsewhere it is a lazily
//! created record for the OS thread, or the task a fixed executor's worker
//! is running.
//!
//! Who touches [`MOUNTED`]: the carrier's own OS thread writes its copy
//! (before it resumes a thread and after the thread comes back); code on
//! the virtual thread, and a signal handler, only read it. A thread's own
//! area holds a copy written once, before the thread first runs
//! (`Carrier::make_area`), naming that thread — the only one that ever
//! runs with that area. No other thread reads it: plain `Cell`s.

use super::record_ref::RecordArc;
use std::cell::{Cell, UnsafeCell};
use std::io;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use super::blocker::Blocker;
use super::handle::Thread;
use super::locals::Locals;
use super::record::{Kind, VThread};
use super::state::State;

std::thread_local! {
    /// The record mounted on this carrier (null: none, or not a carrier).
    static MOUNTED: Cell<*const VThread> = const { Cell::new(std::ptr::null()) };
    /// Handle for a plain OS thread, created on first use.
    static OS_THREAD: Thread = {
        let std = std::thread::current();
        let t = Thread::from_kind(std.name().map(str::to_owned), Kind::Os(OnceLock::from(std)), 0);
        t.set_state(State::Running);
        t
    };
    /// While a fixed-pool worker runs a task, the task's own identity.
    static OS_TASK: std::cell::RefCell<Option<Thread>> = const { std::cell::RefCell::new(None) };
    /// A plain OS thread's `local!` storage (a virtual thread's is in its
    /// record).
    static OS_LOCALS: UnsafeCell<Locals> = UnsafeCell::new(Locals::default());
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

/// Sets the record mounted on the calling carrier (null: none). Called by
/// the carrier around each run of a thread, on its own OS thread (with its
/// own thread pointer).
pub(crate) fn set_mounted(thread: *const VThread) {
    MOUNTED.with(|m| m.set(thread));
}

/// The calling OS thread's [`MOUNTED`] cell, for seeding a thread-local
/// area (`tls::seed`) with the record that runs on it.
pub(crate) fn mounted_cell() -> *const Cell<*const VThread> {
    MOUNTED.with(|m| m as *const _)
}

/// Raw pointer to the record mounted on this carrier (null if none).
///
/// `#[inline(never)]`: a virtual thread may migrate between carriers at
/// any suspension, and LLVM may otherwise cache this TLS address across the
/// switch (llvm/llvm-project#98479).
#[inline(never)]
fn mounted_ptr() -> *const VThread {
    MOUNTED.with(Cell::get)
}

/// The virtual thread mounted on this carrier, if any.
pub(crate) fn current_virtual() -> Option<&'static VThread> {
    let p = mounted_ptr();
    // SAFETY: the carrier sets this pointer to the mounted thread's VThread for
    // exactly as long as it runs that thread, and holds a `RecordArc` to it
    // meanwhile (an area's copy names its own thread, which is running
    // whenever that copy can be read); the reference is only used before
    // the next suspension.
    unsafe { p.as_ref() }
}

/// [`current_virtual`] for code that never switches between reading it
/// and using it (no park, no yield: the C-lock counters of `native.rs`),
/// inlined: the TLS address cannot be cached across a switch there.
#[inline(always)]
pub(crate) fn current_virtual_no_switch() -> Option<&'static VThread> {
    // SAFETY: as in `current_virtual`; the caller does not switch before
    // it is done with the reference.
    unsafe { MOUNTED.with(Cell::get).as_ref() }
}

/// Returns a handle to the calling thread, virtual or OS.
pub fn current() -> Thread {
    let p = mounted_ptr();
    if p.is_null() {
        return with_os_thread(Thread::clone);
    }
    // SAFETY: `p` came from `RecordArc::as_ptr` of a `RecordArc` the carrier
    // holds for as long as it is mounted, so the count is at least one
    // while we add ours.
    let thread = unsafe {
        RecordArc::increment_strong_count(p);
        RecordArc::from_raw(p)
    };
    Thread { inner: thread }
}

/// Whether the calling code runs on a virtual thread.
pub fn is_virtual() -> bool {
    current_virtual().is_some()
}

/// The calling thread's id as a number (virtual or OS).
pub(crate) fn current_id() -> u64 {
    match current_virtual() {
        Some(thread) => thread.id.0.get(),
        None => with_os_thread(|t| t.inner.id.0.get()),
    }
}

/// Whether the current thread's interrupt flag is set (not cleared).
pub(crate) fn current_interrupted() -> bool {
    match current_virtual() {
        Some(thread) => thread.interrupted.load(Ordering::SeqCst),
        None => with_os_thread(|t| t.is_interrupted()),
    }
}

/// Clears the current thread's interrupt flag, returning whether it was set.
pub(crate) fn take_interrupt() -> bool {
    match current_virtual() {
        Some(thread) => thread.interrupted.swap(false, Ordering::SeqCst),
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

/// Records `b` as the current thread's blocker while `f` runs.
pub(crate) fn with_blocker<R>(b: Blocker, f: impl FnOnce() -> R) -> R {
    fn set(b: Blocker) {
        match current_virtual() {
            Some(thread) => thread.blocker.set(b),
            None => with_os_thread(|t| t.inner.blocker.set(b)),
        }
    }
    set(b);
    let r = f();
    set(Blocker::None);
    r
}

/// The calling thread's locals (its own thread only touches them).
pub(crate) fn current_locals() -> *mut Locals {
    match current_virtual() {
        Some(thread) => thread.rare.get_or_init(Box::default).locals.get(),
        None => OS_LOCALS.with(|l| l.get()),
    }
}
