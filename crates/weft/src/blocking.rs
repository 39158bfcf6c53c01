//! Work that cannot unmount: blocking offload ([`blocking`]) and pinned
//! sections ([`pinned`]).
//!
//! A virtual thread unmounts only at weft's own blocking calls. File I/O,
//! DNS, FFI and `std::sync` waits block the carrier's OS thread instead —
//! and with it, until the monitor hands them off past the stall threshold,
//! every other virtual thread homed on that carrier (see the crate docs,
//! "Affinity and handoff").
//! Wrapping such work in [`blocking`] hands it to a pool of OS threads
//! while the calling virtual thread parks: its carrier runs the others
//! meanwhile.
//!
//! Work that blocks *without* being wrapped is caught by the monitor (the
//! stall watchdog, like Go's sysmon): a carrier that runs one virtual thread
//! for longer than `WEFT_STALL_THRESHOLD` (default 20 ms) is reported with
//! a stall event (see [`crate::events`]), and a spare carrier is brought in
//! for threads that have not started yet.
//!
//! [`pinned`] is Java's critical section: inside it, a weft blocking call
//! does not unmount; it parks the carrier itself (state
//! [`State::Pinned`](crate::State::Pinned)) and records a pinned event with
//! the thread's stack.

use std::cell::UnsafeCell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::thread::{Blocker, VThread, current_virtual};

/// Runs `f`, which may block its OS thread, without stalling other virtual
/// threads.
///
/// On a virtual thread, `f` runs on an offload OS thread (a pool of up to
/// `WEFT_MAX_BLOCKING_THREADS`, default 512) while the caller parks; its
/// carrier runs other virtual threads meanwhile. `f` may borrow from the
/// caller's stack: the caller does not return before `f` has finished, even
/// if it is interrupted (the interrupt stays set for its next call). A
/// panic in `f` resumes in the caller. Because `f` runs on another OS
/// thread, it must be `Send`, and `std::thread_local!`s it reads are that
/// thread's.
///
/// On an OS thread, or inside [`pinned`], it simply calls `f`.
///
/// # Examples
///
/// ```
/// let data = vec![1u8, 2, 3];
/// let n = weft::spawn(move || {
///     // Borrows `data` from this thread's stack while it waits.
///     weft::blocking(|| data.iter().map(|&b| b as u32).sum::<u32>())
/// })
/// .join()
/// .unwrap();
/// assert_eq!(n, 6);
/// ```
///
/// ```
/// let len = weft::spawn(|| {
///     // Offloaded: this virtual thread parks while an OS thread reads.
///     weft::blocking(|| std::fs::read("Cargo.toml").map(|b| b.len()))
/// })
/// .join()
/// .unwrap()
/// .unwrap();
/// assert!(len > 0);
/// ```
pub fn blocking<F, R>(f: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    blocking_as(Blocker::Other("weft::blocking"), f)
}

/// [`blocking`], shown in dumps as waiting on `b` while the job runs (the
/// `transparent` hooks name the C call they offloaded).
pub(crate) fn blocking_as<F, R>(b: Blocker, f: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    match current_virtual() {
        // A simulation has no offload threads: the closure runs in place,
        // in zero virtual time.
        Some(inner) if inner.pin_depth.get() == 0 && !crate::clock::is_virtual() => offload(b, f),
        _ => f(),
    }
}

/// Where an offloaded closure leaves its result.
struct Slot<R> {
    result: UnsafeCell<Option<std::thread::Result<R>>>,
    done: AtomicBool,
}

/// The slot's address, sent to the offload thread.
struct SlotPtr<R>(*const Slot<R>);

// SAFETY: the offload thread only writes the result (an `R: Send`) through
// it, before publishing `done`; see `offload`.
unsafe impl<R: Send> Send for SlotPtr<R> {}

fn offload<F, R>(b: Blocker, f: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let slot = Slot {
        result: UnsafeCell::new(None),
        done: AtomicBool::new(false),
    };
    let ptr = SlotPtr(&slot as *const Slot<R>);
    let waiter = crate::thread::current();
    let job = move || {
        let ptr = ptr;
        let r = catch_unwind(AssertUnwindSafe(f));
        // SAFETY: the caller keeps `slot` alive and untouched until it sees
        // `done` (below); we write the result once, before publishing it.
        unsafe { *(*ptr.0).result.get() = Some(r) };
        // SAFETY: as above; after this store we never touch the slot again
        // (the caller may free it at once), only our own `waiter`.
        unsafe { (*ptr.0).done.store(true, Ordering::Release) };
        waiter.unpark();
    };
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(job);
    // SAFETY: lifetime erasure only. Everything the job borrows (through
    // `f`, and `slot`) lives on this frame, and this function does not
    // return or unwind before the job has published `done`, after which
    // the job touches none of it: the wait below cannot fail or unwind.
    let job: crate::offload::Job = unsafe { std::mem::transmute(job) };
    if let Err(job) = crate::offload::submit(job) {
        // No offload thread could be had: run it here rather than never.
        job();
    }
    let mut interrupted = false;
    crate::thread::with_blocker(b, || {
        while !slot.done.load(Ordering::Acquire) {
            // Not interruptible (the borrows must outlive the job): keep
            // the flag for the caller's next call.
            interrupted |= crate::thread::take_interrupt();
            crate::thread::park_deadline(None);
        }
    });
    if interrupted {
        crate::thread::current().interrupt_flag_restore();
    }
    match slot.result.into_inner() {
        Some(Ok(r)) => r,
        Some(Err(payload)) => resume_unwind(payload),
        None => unreachable!("weft: offloaded job finished without a result"),
    }
}

/// Runs `f` pinned to the current carrier: weft blocking calls inside it
/// park the carrier's OS thread instead of unmounting (state `Pinned`), and
/// each such wait records a pinned event (`WEFT_TRACE_PINNED=short|full`
/// prints it). On an OS thread it simply calls `f`.
pub fn pinned<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    let Some(inner) = current_virtual() else {
        return f();
    };
    inner.pin_depth.set(inner.pin_depth.get() + 1);
    struct Exit<'a>(&'a VThread);
    impl Drop for Exit<'_> {
        fn drop(&mut self) {
            self.0.pin_depth.set(self.0.pin_depth.get() - 1);
        }
    }
    let _exit = Exit(inner);
    f()
}

/// Whether the current virtual thread is inside [`pinned`].
pub fn is_pinned() -> bool {
    current_virtual().is_some_and(|i| i.pin_depth.get() > 0)
}

/// Default stall threshold (the JFR `VirtualThreadPinned` threshold).
pub const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_millis(20);
