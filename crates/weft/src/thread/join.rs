//! Joining: the join slot in a thread's record, and [`JoinHandle`].
//!
//! A thread's outcome lives in its record (`VThread::join_state`,
//! `joiner`, `payload`), not in an allocation of its own: a parked thread
//! keeps one allocation, and its handle is one pointer.
//!
//! # Protocol
//!
//! `join_state` is the only hand-off. The finishing thread (or a carrier
//! that could not start it, or a fixed executor's worker) writes `payload`
//! once and then swaps in DONE (release): a joiner that sees DONE (acquire)
//! may read it. The one joiner writes `joiner` before its release CAS
//! RUNNING → WAITING; a finisher whose swap returns WAITING (acquire) takes
//! it and unparks it. (An OS-thread joiner first watches the state for a
//! few microseconds, unregistered: a finish it sees then wakes nobody; see
//! `spin_until_done`.) A handle dropped unjoined swaps in DETACHED: if the
//! thread was done, the handle owns the result and drops it; if not, the
//! finisher's swap returns DETACHED and the finisher drops it. So a result
//! is dropped exactly once, by the joiner, the handle or the finisher, each
//! of which knows its type; the record, which does not, never holds one
//! when it is freed.
//!
//! A handle awaited as a future (`join_async.rs`) is the one joiner too:
//! its waker goes into the record's rare fields (`Rare::async_joiner`,
//! under its lock) before its release CAS RUNNING → WAITING_ASYNC, and a
//! finisher whose swap returns WAITING_ASYNC takes it under that lock and
//! wakes it. A later poll replaces the waker under the lock and reads the
//! state while it holds it, so either it sees DONE or the finisher, whose
//! swap comes after that read, takes the lock after it and finds the new
//! waker.
//!
//! # Payload
//!
//! Two words, holding first the body and then the result. Before the
//! thread starts they hold its closure when the closure fits (at most two
//! words, word-aligned: the usual closure of a handle or two); the thread
//! moves it out at its first run (`life.rs`), and from then until it
//! finishes they are unused. Then they hold the result: the value itself
//! when it fits, else a box of it (one allocation at the end of the
//! thread, for large results only); a panic's payload (a `Box<dyn Any>`,
//! two words) always fits. The state says which of the two it is.

use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;

use super::record::Payload;
use super::*;

const RUNNING: u8 = 0;
const WAITING: u8 = 1;
/// Done, `payload` holds the value.
const DONE_OK: u8 = 2;
/// Done, `payload` holds the panic's payload (or why the thread never ran).
const DONE_ERR: u8 = 3;
/// The handle was dropped unjoined.
const DETACHED: u8 = 4;
/// A future awaits the handle: its waker is in `Rare::async_joiner`.
const WAITING_ASYNC: u8 = 5;

/// Whether a `X` is stored in [`VThread::payload`] itself.
pub(crate) const fn payload_fits<X>() -> bool {
    size_of::<X>() <= size_of::<Payload>() && align_of::<X>() <= align_of::<Payload>()
}

/// Writes `x` into `payload`, which must be empty (panics if an `X` does
/// not fit: a constant, checked at compile time in practice).
///
/// # Safety
/// The caller owns `payload` (the protocol above) and it holds nothing
/// that needs dropping.
pub(crate) unsafe fn payload_put<X>(payload: &mut MaybeUninit<Payload>, x: X) {
    assert!(payload_fits::<X>(), "weft: payload too large");
    // SAFETY: `X` fits in the two words, size and alignment (caller).
    unsafe { payload.as_mut_ptr().cast::<X>().write(x) }
}

/// Moves the `X` out of `payload`, leaving it empty.
///
/// # Safety
/// `payload` holds an `X` written by [`payload_put`], owned by the caller.
pub(crate) unsafe fn payload_take<X>(payload: &mut MaybeUninit<Payload>) -> X {
    // SAFETY: an `X` was written there and is moved out once (caller).
    unsafe { payload.as_mut_ptr().cast::<X>().read() }
}

/// The thread's payload cell.
///
/// # Safety
/// The caller owns the payload by the protocol above, and no other
/// reference to it is live.
#[allow(clippy::mut_from_ref)]
unsafe fn payload(thread: &VThread) -> &mut MaybeUninit<Payload> {
    // SAFETY: exclusive by the protocol (caller).
    unsafe { &mut *thread.payload.get() }
}

/// A thread's result in the form its record stores it: a large value is
/// boxed by [`Outcome::new`], so that storing it ([`complete_outcome`])
/// allocates nothing. A virtual thread makes its outcome *before* its
/// thread-local and pthread-key destructors run (`life.rs`): an
/// allocation after them would make the allocator set up its per-thread
/// state afresh for that thread (mimalloc: a heap and a 64 KiB page), with
/// no destructor left to run to hand it back — kept for ever, 138 KiB per
/// thread ever run (`tests/alloc_mimalloc.rs` in weft-native-tests). On a
/// std thread the same holds: the result goes into a packet the spawner
/// allocated, and glibc runs the key destructors after the body.
pub(crate) enum Outcome<T> {
    Inline(T),
    Boxed(Box<T>),
    Panicked(Box<dyn std::any::Any + Send>),
}

impl<T> Outcome<T> {
    /// The stored form of `r` (boxed now if a `T` does not fit the record).
    pub(crate) fn new(r: std::thread::Result<T>) -> Outcome<T> {
        match r {
            Ok(v) if payload_fits::<T>() => Outcome::Inline(v),
            Ok(v) => Outcome::Boxed(Box::new(v)),
            Err(e) => Outcome::Panicked(e),
        }
    }

    /// Back to a `Result` (dropped or handed to a joiner).
    fn into_result(self) -> std::thread::Result<T> {
        match self {
            Outcome::Inline(v) => Ok(v),
            Outcome::Boxed(b) => Ok(*b),
            Outcome::Panicked(e) => Err(e),
        }
    }
}

/// Stores the thread's result and wakes its joiner, or drops the result
/// if the handle is gone. Called once per thread, by the thread as it
/// finishes (or by whoever gives up on running it); a panic in the
/// result's `Drop` reaches the caller.
pub(crate) fn complete<T>(thread: &VThread, r: std::thread::Result<T>) {
    complete_outcome(thread, Outcome::new(r));
}

/// Drops `outcome` now if the thread's handle is already gone, as std
/// drops a detached thread's result before the thread's thread-locals are
/// destroyed; else gives it back for [`complete_outcome`]. A handle
/// dropped after this look leaves the result to `complete_outcome`, which
/// drops it there.
pub(crate) fn drop_if_detached<T>(thread: &VThread, outcome: Outcome<T>) -> Option<Outcome<T>> {
    if thread.join_state.load(Ordering::Acquire) != DETACHED {
        return Some(outcome);
    }
    report_unjoined(thread, outcome.into_result());
    None
}

/// [`complete`] of a result already in its stored form (`None`: dropped
/// already by [`drop_if_detached`]; the join is completed all the same).
/// Allocates nothing.
pub(crate) fn complete_outcome<T>(thread: &VThread, outcome: impl Into<Option<Outcome<T>>>) {
    let outcome = outcome.into();
    let stored = outcome.is_some();
    // SAFETY: nobody reads `payload` before DONE, and the body has been
    // moved out of it (or never was in it): it is ours and empty. A
    // `Box<dyn Any + Send>` is two words.
    let done = unsafe {
        match outcome {
            Some(Outcome::Inline(v)) => {
                payload_put(payload(thread), v);
                DONE_OK
            }
            Some(Outcome::Boxed(b)) => {
                payload_put(payload(thread), b);
                DONE_OK
            }
            Some(Outcome::Panicked(e)) => {
                payload_put(payload(thread), e);
                DONE_ERR
            }
            // Only after `drop_if_detached` saw DETACHED, which is final:
            // no handle is left to read the (empty) payload.
            None => DONE_OK,
        }
    };
    match thread.join_state.swap(done, Ordering::AcqRel) {
        WAITING => {
            // SAFETY: the joiner wrote `joiner` before its release CAS to
            // WAITING, which our AcqRel swap observed; it no longer touches it.
            if let Some(t) = unsafe { (*thread.joiner.get()).take() } {
                Thread { inner: t }.unpark();
            }
        }
        WAITING_ASYNC => wake_async_joiner(thread),
        // SAFETY: the handle is gone: the result we just stored is ours
        // again (the handle read DETACHED's predecessor, not DONE, so it
        // did not touch it).
        DETACHED if stored => unsafe { drop_result::<T>(thread, done) },
        _ => {}
    }
}

/// Wakes the future that awaits `thread`'s handle (the finisher's swap
/// returned WAITING_ASYNC, with acquire: the waiter's rare fields are
/// there).
#[cold]
fn wake_async_joiner(thread: &VThread) {
    use crate::unpoison::Unpoison;
    let waker = thread
        .rare
        .get()
        .and_then(|r| r.async_joiner.lock().unpoison().take());
    // Woken outside the lock: an executor's `wake` may do anything.
    if let Some(w) = waker {
        w.wake();
    }
}

/// The poll of an awaited handle's thread (`join_async.rs`): its DONE
/// state if it is done, else `None` with `waker` registered in place of
/// an earlier poll's (see "Protocol").
pub(super) fn poll_done(thread: &VThread, waker: &std::task::Waker) -> Option<u8> {
    use crate::unpoison::Unpoison;
    if let Some(s) = done_state(thread.join_state.load(Ordering::Acquire)) {
        return Some(s);
    }
    let rare = thread.rare.get_or_init(Box::default);
    let mut slot = rare.async_joiner.lock().unpoison();
    if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
        *slot = Some(waker.clone());
    }
    // The state is read with the lock held (a failed CAS is a load).
    match thread.join_state.compare_exchange(
        RUNNING,
        WAITING_ASYNC,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) | Err(WAITING_ASYNC) => None,
        Err(s) => {
            // Done before the finisher could see a waiter: nobody takes
            // the waker but us.
            *slot = None;
            Some(done_state(s).expect("weft: an awaited thread joined twice"))
        }
    }
}

/// Takes the waker of an awaiting future that gives up (dropped before its
/// thread was done), so that the executor's task is not kept alive by it.
pub(super) fn forget_async_joiner(thread: &VThread) {
    use crate::unpoison::Unpoison;
    if let Some(r) = thread.rare.get() {
        drop(r.async_joiner.lock().unpoison().take());
    }
}

/// Ends the join of a thread that will never run: its `join` returns
/// `Err(why)`.
pub(crate) fn complete_unrun(thread: &VThread, why: String) {
    // An error's payload is the same whatever the result type.
    complete::<()>(thread, Err(Box::new(why)));
}

/// Drops the result in `payload`, of a thread that nobody will join (a
/// panic nobody saw fails a simulation: `Schedule::unjoined_panic`).
///
/// # Safety
/// `payload` holds a result stored by [`complete`] with state `done`, and
/// the caller owns it.
unsafe fn drop_result<T>(thread: &VThread, done: u8) {
    // SAFETY: owned by the caller; `done` says what it holds.
    report_unjoined(thread, unsafe { take_result::<T>(thread, done) });
}

/// Drops the result of a thread nobody will join, reporting a panic to
/// the thread's scheduler first.
fn report_unjoined<T>(thread: &VThread, r: std::thread::Result<T>) {
    if let Err(payload) = &r
        && let Some(sched) = thread.scheduler()
    {
        sched.unjoined_panic(&**payload);
    }
    drop(r);
}

/// Moves the result out of `payload`.
///
/// # Safety
/// As [`drop_result`].
unsafe fn take_result<T>(thread: &VThread, done: u8) -> std::thread::Result<T> {
    // SAFETY: `complete` stored, with this `done`, a `T` (inline when it
    // fits, else boxed) or a panic's payload; the caller owns it.
    unsafe {
        let p = payload(thread);
        if done == DONE_ERR {
            Err(payload_take::<Box<dyn std::any::Any + Send>>(p))
        } else if payload_fits::<T>() {
            Ok(payload_take::<T>(p))
        } else {
            Ok(*payload_take::<Box<T>>(p))
        }
    }
}

/// An owned permission to join a thread (virtual or an executor's OS
/// thread). Dropping it detaches the thread.
pub struct JoinHandle<T> {
    thread: Thread,
    /// The result type. It may hold borrows shorter than `'static`
    /// (erased in `Builder::spawn_unchecked`, whose caller joins in time).
    _result: PhantomData<T>,
}

// SAFETY: as std's `JoinHandle`, for every `T`: a handle is made only by
// `JoinHandle::new`, which requires `T: Send`, so the result may move with
// it; and a shared handle gives no access to the result (only `thread`
// and `is_finished`).
unsafe impl<T> Send for JoinHandle<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for JoinHandle<T> {}

impl<T: Send> JoinHandle<T> {
    /// The handle of `thread`, whose result is a `T` (the caller's
    /// promise: it completes the thread's join with a `T`, and makes no
    /// other handle).
    pub(crate) fn new(thread: Thread) -> JoinHandle<T> {
        JoinHandle {
            thread,
            _result: PhantomData,
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    /// Whichever side lets go last drops an unjoined result: the finishing
    /// thread (in `complete`, inside its own guard), or the handle here.
    /// A result whose `Drop` panics must not unwind out of a detach (the
    /// dropper would see a panic that is not its own, and which side drops
    /// last is a race): abort with the thread's name, as the finishing
    /// side does and as std does ("thread result panicked on drop").
    fn drop(&mut self) {
        let thread = &*self.thread.inner;
        let prev = thread.join_state.swap(DETACHED, Ordering::AcqRel);
        if prev == DONE_OK || prev == DONE_ERR {
            // SAFETY: DONE observed with acquire: the result is stored and,
            // with the finisher gone and no joiner (`join` consumes the
            // handle), ours.
            let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                drop_result::<T>(thread, prev)
            }));
            if dropped.is_err() {
                super::abort_after_drop_panic(thread);
            }
        }
    }
}

impl<T> JoinHandle<T> {
    /// Waits for the thread to finish. `Err` carries the panic payload if it
    /// panicked. Not interruptible, like `std::thread::JoinHandle::join`.
    pub fn join(self) -> std::thread::Result<T> {
        // Joined, the handle detaches nothing: its `Drop` does not run.
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `thread` is read once and `this` never used again.
        let Thread { inner } = unsafe { std::ptr::read(&this.thread) };
        // A thread already done is joined without recording a blocker
        // (two writes of the blocker's seqlock and a clock read saved).
        let done = match done_state(inner.join_state.load(Ordering::Acquire))
            .or_else(|| spin_until_done(&inner))
        {
            Some(s) => s,
            None => with_blocker(Blocker::Join(inner.id.0.get()), || wait(&inner)),
        };
        // SAFETY: DONE observed with acquire (`wait`); the finisher
        // stored the result before and never touches it again, and the
        // handle, consumed, was the only other owner.
        unsafe { take_result::<T>(&inner, done) }
    }

    /// The result of the thread, found done in state `done` (read with
    /// acquire), consuming the handle: its `Drop` does not run.
    pub(super) fn into_result(self, done: u8) -> std::thread::Result<T> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `thread` is read once and `this` never used again.
        let Thread { inner } = unsafe { std::ptr::read(&this.thread) };
        // SAFETY: as in `join`: DONE was observed with acquire, the
        // finisher is done with the result, the handle was its only other
        // owner.
        unsafe { take_result::<T>(&inner, done) }
    }

    /// The thread's handle.
    pub fn thread(&self) -> &Thread {
        &self.thread
    }

    /// Whether the thread has finished running its closure.
    pub fn is_finished(&self) -> bool {
        done_state(self.thread.inner.join_state.load(Ordering::Acquire)).is_some()
    }
}

/// `s` if it is a DONE state.
fn done_state(s: u8) -> Option<u8> {
    (s == DONE_OK || s == DONE_ERR).then_some(s)
}

/// Doubling spins of [`spin_until_done`]: 1 + 2 + … + 64 pauses.
const JOIN_WATCH_STEPS: u32 = 7;

/// An OS thread's join of a thread about to finish: watches the join
/// state for a few microseconds (doubling spins, 127 pause instructions
/// in all: about 10 µs on this 2-core VM) before it registers as the
/// joiner, and returns
/// the DONE state if the thread finished meanwhile. `None` from a virtual
/// thread, which never spins (it would hold its carrier; its park costs
/// no system call).
///
/// Why: an OS thread that parks must be woken with a futex system call,
/// made by the *finishing* thread's carrier — 3–5 µs of carrier time per
/// join on this 2-core VM, in `try_to_wake_up`. A program that joins its
/// threads in the order they finish (a million sleepers joined from
/// `main`: each join finds the next thread microseconds from done) made
/// one such wake-up per join it reached too early, about 160,000 in a run,
/// on the carriers' critical path. A joiner that finds the thread done
/// while it watches is never registered, so the finisher wakes nobody. A
/// thread that is far from done costs its OS-thread joiner about 10 µs
/// of watching once.
///
/// It never yields its core (`sched_yield`): beside busy processes a yield
/// hands the core to one of them for the rest of its time slice,
/// milliseconds (ARCHITECTURE.md, "Sharing the cores").
fn spin_until_done(thread: &VThread) -> Option<u8> {
    if super::is_virtual() {
        return None;
    }
    for step in 0..JOIN_WATCH_STEPS {
        for _ in 0..(1u32 << step) {
            std::hint::spin_loop();
        }
        if let Some(s) = done_state(thread.join_state.load(Ordering::Acquire)) {
            return Some(s);
        }
    }
    None
}

/// Waits until `inner`, found not done, is done (the caller is its one
/// joiner) and returns the DONE state.
fn wait(thread: &VThread) -> u8 {
    // SAFETY: only the single joiner writes `joiner`, before publishing
    // WAITING; the finisher reads it only after that.
    unsafe { *thread.joiner.get() = Some(current().inner) };
    match thread
        .join_state
        .compare_exchange(RUNNING, WAITING, Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => loop {
            if let Some(s) = done_state(thread.join_state.load(Ordering::Acquire)) {
                return s;
            }
            // Join is not interruptible (like std); an interrupt must not
            // turn this into a spin, so we clear-and-restore.
            let was = take_interrupt();
            park_deadline(None);
            if was {
                current().interrupt_flag_restore();
            }
        },
        Err(s) => {
            // Finished meanwhile: the finisher never saw WAITING, so the
            // joiner we wrote is still ours to drop.
            // SAFETY: as above: the finisher does not read it.
            drop(unsafe { (*thread.joiner.get()).take() });
            done_state(s).expect("weft: a thread joined twice")
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("thread", &self.thread)
            .finish_non_exhaustive()
    }
}

/// A panic's message, as Rust's default hook shows it: the payload's
/// `&str` or `String`, else `Box<dyn Any>`.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "Box<dyn Any>"
    }
}
