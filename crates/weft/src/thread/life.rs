//! A virtual thread's start and end, in the order they happen.
//!
//! 1. **Spawn** (`builder.rs`, one layer up, calls [`install`]): the body
//!    goes into the new record — in its payload when the closure fits
//!    there, the usual case, so that the record is the one allocation of
//!    a spawn ([`InRecord`]); else in a box of its own, freed when the
//!    thread starts ([`Boxed`]) — with its [`Start`] in the coroutine slot
//!    (`record.rs`, `CoroSlot`: the stack is taken at first run).
//! 2. **First run**: the carrier that first runs the thread builds its
//!    coroutine, a stack from its cache and, where areas are on, the
//!    thread-local area at the stack's top (`sched/carrier/mount.rs`,
//!    `prepare` and `make_area`; `tls/area.rs`), and resumes it. The
//!    first code on the thread's own stack is [`enter`]: the
//!    between-stacks flag goes down (`switching.rs`) and the record learns
//!    its yielder. Then the body runs ([`run_body`]) under
//!    `catch_unwind`; a panic is told to the thread's scheduler
//!    (`Schedule::panicked`: a simulation records it).
//! 3. **End, still on the thread** ([`run_body`], in this order): its
//!    `weft::local!` values are dropped; its result is put in the form its
//!    record keeps (boxed if large: nothing may allocate after the
//!    destructors, `join::Outcome`), or dropped if its handle is gone; its
//!    `thread_local!` destructors
//!    and pthread key destructors run (`tls::run_dtors`, on its own area,
//!    as glibc's at an OS thread's exit); it stops counting as live
//!    (`Schedule::finished`); its state becomes `Terminated`; its result
//!    goes to its join slot and its joiner is woken (`join.rs`,
//!    `complete`). A panic in any of that aborts (as std does for a
//!    panicking thread-local destructor). The between-stacks flag goes up
//!    as the coroutine returns.
//! 4. **End, on the carrier** (`sched/carrier/mount.rs`, `finish`): once
//!    the coroutine has returned nothing runs on the thread's stack, so
//!    the carrier releases its area (`tls::release_area`: the `dtv` and
//!    what glibc made in it), recycles the stack and unregisters the
//!    thread in its next batch. The area is released after the join
//!    wake-up: it can only go once the thread has left its stack.
//!
//! A thread that never runs (no stack could be had: `Carrier::fail_start`;
//! or its record dropped unrun) has its body discarded ([`Start::discard`])
//! and its join completed with an error (`join.rs`, `complete_unrun`).

use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::current::current_virtual;
use super::join::{
    Outcome, complete_outcome, drop_if_detached, payload_fits, payload_put, payload_take,
};
use super::record::{Body, CoroSlot, Kind, Start, VThread, set_state_of};
use super::schedule::Suspend;
use super::state::State;

/// Puts `f` in the new virtual thread `inner`: in its payload when it
/// fits there, else in a box; its [`Start`] and `stack` (if one was
/// reserved) in the coroutine slot.
///
/// # Safety
/// `inner` is a new virtual thread's record, not yet visible to anyone
/// else, with an empty coroutine slot. Everything `f` borrows outlives the
/// thread: its true lifetime is erased here, and the body is run or
/// dropped before the thread's join completes, so after `join` returns
/// nothing of `'a` is touched again (see `CoroSlot::get` for the
/// coroutine's side).
pub(crate) unsafe fn install<'a, F, T>(thread: &VThread, stack: Option<crate::stack::Stack>, f: F)
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    let start: Box<dyn Start + 'a> = if payload_fits::<F>() {
        // SAFETY: the record is new and ours (caller): its payload is empty.
        unsafe { payload_put(&mut *thread.payload.get(), f) };
        Box::new(InRecord::<F, T>(PhantomData))
    } else {
        Box::new(Boxed::<F, T>(f, PhantomData))
    };
    // SAFETY: lifetime erasure only (the layouts are identical); the
    // caller guarantees the borrows outlive the thread.
    let start = unsafe { std::mem::transmute::<Box<dyn Start + 'a>, Box<dyn Start>>(start) };
    if let Kind::Virtual { coro: slot, .. } = &thread.kind {
        // SAFETY: the thread is not yet visible to any carrier (caller).
        unsafe { *slot.get() = CoroSlot::Pending(stack, Body::new(start)) };
    }
}

/// The [`Start`] of a body kept in its record's payload until it starts
/// (a zero-sized value: its box allocates nothing).
///
/// Field protocol of the payload, until the first run: written at spawn
/// (`install`), before the thread is visible; moved out exactly once,
/// by the thread's one [`Body`] — by `run` on the thread's first run, or by
/// `discard` on whoever owns the thread unrun.
struct InRecord<F, T>(PhantomData<fn(F) -> T>);

/// The [`Start`] of a body too large for its record's payload: in a box of
/// its own, freed as the thread starts (the body moves onto its stack).
struct Boxed<F, T>(F, PhantomData<fn() -> T>);

impl<F, T> Start for InRecord<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(self: Box<Self>, y: &corosensei::Yielder<(), Suspend>) {
        let me = enter(y);
        // SAFETY: `install` put an `F` in the payload, and the one `Body`
        // takes it once (field protocol); we run on the thread, which its
        // carrier owns.
        let f = unsafe { payload_take::<F>(&mut *me.payload.get()) };
        run_body(me, f);
    }

    fn discard(self: Box<Self>, me: &VThread) {
        // SAFETY: as in `run`; the caller owns the unrun thread.
        drop(unsafe { payload_take::<F>(&mut *me.payload.get()) });
    }
}

impl<F, T> Start for Boxed<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(self: Box<Self>, y: &corosensei::Yielder<(), Suspend>) {
        let me = enter(y);
        let Boxed(f, _) = *self;
        run_body(me, f);
    }

    fn discard(self: Box<Self>, _: &VThread) {
        drop(self);
    }
}

/// The first thing a thread runs, on its own stack: the record it is,
/// with its yielder set.
fn enter(y: &corosensei::Yielder<(), Suspend>) -> &'static VThread {
    // On our own stack now (raised by the carrier's `resume`).
    crate::switching::set_switching(false);
    let me = current_virtual().expect("weft: coroutine started off its carrier");
    me.yielder.set(y as *const _);
    me
}

/// Runs the body `f` of the thread `me` and ends the thread: its locals,
/// its result to its join.
fn run_body<F, T>(me: &'static VThread, f: F)
where
    F: FnOnce() -> T,
{
    let r = catch_unwind(AssertUnwindSafe(f));
    if let Err(payload) = &r
        && let Kind::Virtual { sched, .. } = &me.kind
    {
        sched.panicked(me, &**payload);
    }
    // What follows runs user `Drop`s too (`local!` values; the result or
    // panic payload of a detached thread). A panic there must not unwind
    // into the carrier: abort with a message, as std does for a panicking
    // thread-local destructor or thread result.
    let finish = catch_unwind(AssertUnwindSafe(move || {
        // Drop weft::local! values while still on this thread.
        if let Some(rare) = me.rare.get() {
            // SAFETY: locals are only touched by the running thread.
            unsafe { (*rare.locals.get()).clear() };
        }
        // The result in its stored form, made now: nothing the thread
        // does after its destructors may allocate (an allocator would set
        // up its per-thread state again, with no destructor left to hand
        // it back: see `join::Outcome`). A detached thread's result is
        // dropped here, before its thread-locals, as std drops it.
        let outcome = drop_if_detached(me, Outcome::new(r));
        // Then its `thread_local!` values and pthread key values, as an
        // OS thread's at its exit (on a thread-local area of its own).
        crate::tls::run_dtors();
        if let Kind::Virtual { sched, .. } = &me.kind {
            sched.finished();
        }
        // Before the joiner can return: it may look at our state.
        set_state_of(me, State::Terminated);
        complete_outcome(me, outcome);
        // Whatever registered a destructor after the pass above (a result
        // whose handle was dropped meanwhile, dropped by `complete_outcome`,
        // whose `Drop` set a pthread key or allocated) is run now: late,
        // after the join, but never left behind.
        crate::tls::run_dtors();
    }));
    if finish.is_err() {
        super::abort_after_drop_panic(me);
    }
    // Back to the carrier's stack as this returns.
    crate::switching::set_switching(true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::{JoinHandle, Thread};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops; panics when dropped if asked to.
    struct OnDrop(Arc<AtomicUsize>, bool);

    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
            if self.1 {
                panic!("drop of the body panicked");
            }
        }
    }

    /// A new, unstarted record on the default runtime with `f` installed.
    fn unstarted<F, T>(f: F) -> Thread
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let rt = crate::runtime::default_runtime().unwrap();
        let thread = Thread::new_virtual(None, rt.keep_alive(), 0);
        // SAFETY: a new record; `f` is 'static.
        unsafe { install::<F, T>(&thread.inner, None, f) };
        thread
    }

    /// The body in the record's payload, or in a box: both run, and both
    /// are dropped when their record is dropped unrun.
    #[test]
    fn bodies_in_the_record_and_boxed_run_or_drop_with_their_record() {
        let big = [3u8; 64];
        let small = 5u8;
        let b = crate::spawn(move || big.iter().map(|&x| u32::from(x)).sum::<u32>());
        let s = crate::spawn(move || u32::from(small));
        assert_eq!(b.join().unwrap(), 3 * 64);
        assert_eq!(s.join().unwrap(), 5);
        let drops = Arc::new(AtomicUsize::new(0));
        let (d1, d2) = (OnDrop(drops.clone(), false), OnDrop(drops.clone(), false));
        assert!(payload_fits::<OnDrop>() && !payload_fits::<(OnDrop, [u8; 64])>());
        drop(unstarted(move || drop(d1)));
        drop(unstarted(move || drop((d2, big))));
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    /// What `Carrier::fail_start` does to a thread it cannot start.
    fn fail_start(thread: &Thread) {
        if let Kind::Virtual { coro, .. } = &thread.inner.kind {
            // SAFETY: the thread is ours: never handed to a scheduler.
            if let CoroSlot::Pending(_, body) = unsafe { &mut *coro.get() } {
                body.discard(&thread.inner);
            }
        }
        crate::thread::complete_unrun(&thread.inner, "no stack: test".into());
    }

    #[test]
    fn a_body_discarded_unrun_drops_the_closure_and_fails_the_join_with_the_reason() {
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = OnDrop(drops.clone(), false);
        let thread = unstarted(move || {
            let _guard = &guard;
            7u32
        });
        let handle = JoinHandle::<u32>::new(thread.clone());
        assert!(!handle.is_finished());
        fail_start(&thread);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert!(handle.is_finished());
        let err = handle.join().unwrap_err();
        assert_eq!(err.downcast_ref::<String>().unwrap(), "no stack: test");
        drop(thread);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
    }

    #[test]
    fn a_panicking_drop_of_a_discarded_body_reaches_the_caller() {
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = OnDrop(drops.clone(), true);
        let thread = unstarted(move || {
            let _guard = &guard;
        });
        let r = catch_unwind(AssertUnwindSafe(|| fail_start(&thread)));
        assert!(r.is_err(), "the drop's panic reaches the caller");
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    /// A result is dropped exactly once, by whichever side lets go last:
    /// the joiner, the thread (handle dropped before it finished) or the
    /// handle (dropped after) — inline in the payload or boxed.
    #[test]
    fn a_result_is_dropped_once_whoever_lets_go_last() {
        fn check<R: Send + 'static>(make: fn(OnDrop) -> R) {
            let drops = Arc::new(AtomicUsize::new(0));
            let count = || drops.load(Ordering::SeqCst);
            // Joined: the joiner owns it.
            let d = OnDrop(drops.clone(), false);
            let r = crate::spawn(move || make(d)).join().unwrap();
            assert_eq!(count(), 0);
            drop(r);
            assert_eq!(count(), 1);
            // Detached before it finishes: the thread drops it.
            let gate = Arc::new(AtomicUsize::new(0));
            let (g, d) = (gate.clone(), OnDrop(drops.clone(), false));
            let h = crate::spawn(move || {
                while g.load(Ordering::SeqCst) == 0 {
                    crate::park();
                }
                make(d)
            });
            let t = h.thread().clone();
            drop(h);
            gate.store(1, Ordering::SeqCst);
            t.unpark();
            while count() < 2 {
                std::thread::yield_now();
            }
            // Detached after it finished: the handle drops it.
            let d = OnDrop(drops.clone(), false);
            let h = crate::spawn(move || make(d));
            while !h.is_finished() {
                std::thread::yield_now();
            }
            assert_eq!(count(), 2);
            drop(h);
            assert_eq!(count(), 3);
        }
        assert!(payload_fits::<OnDrop>() && !payload_fits::<(OnDrop, [u64; 4])>());
        check(|d| d);
        check(|d| (d, [7u64; 4]));
    }
}
