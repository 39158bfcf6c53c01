//! Spawning: [`Builder`] and [`spawn`].
//!
//! Spawning creates the thread's record (`thread/record.rs`), puts the
//! body in it — in the record's payload when the closure fits there, the
//! usual case, so that the record is the one allocation of a spawn; else
//! in a box of its own, freed when the thread starts — with its [`Start`]
//! in the coroutine slot (the stack is taken at first run), registers the
//! thread (`thread/registry.rs`) and hands it to its runtime's scheduler.
//! The thread's result goes to the same record (`thread/join.rs`). It sits
//! above the runtime: it needs one to spawn onto.

use std::io;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::runtime::Runtime;
use crate::thread::{
    Body, CoroSlot, JoinHandle, Kind, Outcome, Start, State, Suspend, Thread, VThread,
    complete_outcome, current_virtual, drop_if_detached, payload_fits, payload_put, payload_take,
    set_inner_state,
};

/// Configures a new virtual thread: name, stack size, runtime.
///
/// # Examples
///
/// ```
/// let h = weft::Builder::new()
///     .name("worker-1")
///     .stack_size(64 * 1024)
///     .spawn(|| weft::current().name().map(str::to_owned))
///     .expect("spawn");
/// assert_eq!(h.join().unwrap().as_deref(), Some("worker-1"));
///
/// // On a private runtime, with the error instead of a panic:
/// let rt = weft::Runtime::builder().parallelism(1).build().unwrap();
/// let h = weft::Builder::new().spawn_on(&rt, || 6 * 7).unwrap();
/// assert_eq!(h.join().unwrap(), 42);
/// ```
#[derive(Debug, Default)]
#[must_use = "a Builder does nothing until `spawn` is called"]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    container: u64,
}

impl Builder {
    /// A builder with default settings.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the thread (shown in panics, dumps and events).
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = Some(name.into());
        self
    }

    /// Puts the thread in a dump container (executor or scope).
    pub(crate) fn container(mut self, id: u64) -> Builder {
        self.container = id;
        self
    }

    /// Reserves at least `size` bytes of stack (rounded up to the next
    /// power of two or one and a half times one, at least 16 KiB, at most
    /// 1 GiB). Memory is committed only as the stack grows.
    pub fn stack_size(mut self, size: usize) -> Builder {
        self.stack_size = Some(size);
        self
    }

    /// Spawns a virtual thread on the caller's runtime — the one whose
    /// virtual thread calls it — or, from an OS thread, on the default
    /// runtime.
    ///
    /// Returns an error, never aborts, when memory or address space for the
    /// stack cannot be had, or the default runtime cannot start.
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        crate::runtime::with_for_spawn(|rt| self.spawn_on(rt, f))?
    }

    /// Spawns a virtual thread on `rt`.
    pub fn spawn_on<F, T>(self, rt: &Runtime, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // SAFETY: F and T are 'static, so nothing borrowed can dangle.
        unsafe { self.spawn_unchecked(rt, f) }
    }

    /// Spawns without the `'static` bound.
    ///
    /// # Safety
    /// Everything `f` borrows must outlive the thread: the caller must join
    /// it (as `weft::scope` does) before those borrows end.
    pub(crate) unsafe fn spawn_unchecked<'a, F, T>(
        self,
        rt: &Runtime,
        f: F,
    ) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'a,
        T: Send + 'a,
    {
        rt.check_spawnable()?;
        // An explicit size is reserved now (rare; its own pool); the default
        // stack is taken at first run (see `CoroSlot`).
        let stack = match self.stack_size {
            Some(_) => Some(rt.alloc_stack(self.stack_size)?),
            None => {
                rt.promise_stack()?;
                None
            }
        };
        let thread = Thread::new_virtual(self.name, rt.keep_alive(), self.container);
        // SAFETY: the caller guarantees that everything `f` borrows
        // outlives the thread (see `install`).
        unsafe { install::<F, T>(&thread.inner, stack, f) };
        thread.set_state(State::Started);
        if let Some(sim) = crate::sched::simulation() {
            // What a simulation keeps per thread (its host) is inherited.
            let parent = crate::thread::current().id().as_u64().get();
            sim.spawned(parent, thread.id().as_u64().get());
        }
        crate::thread::registry::register(&thread.inner);
        rt.spawn_thread(thread.inner.clone());
        Ok(JoinHandle::new(thread))
    }
}

/// Spawns a virtual thread and returns its handle: on the caller's runtime
/// when called from a virtual thread, on the default runtime from an OS
/// thread.
///
/// # Panics
/// If the thread cannot be created (out of memory or address space, or the
/// default runtime failed to start, e.g. a bad `WEFT_*` variable); use
/// [`Builder::spawn`] to get the error instead, as with `std::thread::spawn`.
///
/// # Examples
///
/// ```
/// let h = weft::spawn(|| {
///     // Blocks this virtual thread only; its carrier runs others meanwhile.
///     weft::sleep(std::time::Duration::from_millis(10)).unwrap();
///     "done"
/// });
/// assert!(weft::current().id() != h.thread().id());
/// assert_eq!(h.join().unwrap(), "done");
/// ```
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new()
        .spawn(f)
        .unwrap_or_else(|e| panic!("weft::spawn failed: {e}"))
}

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
unsafe fn install<'a, F, T>(inner: &VThread, stack: Option<crate::stack::Stack>, f: F)
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    let start: Box<dyn Start + 'a> = if payload_fits::<F>() {
        // SAFETY: the record is new and ours (caller): its payload is empty.
        unsafe { payload_put(&mut *inner.payload.get(), f) };
        Box::new(InRecord::<F, T>(PhantomData))
    } else {
        Box::new(Boxed::<F, T>(f, PhantomData))
    };
    // SAFETY: lifetime erasure only (the layouts are identical); the
    // caller guarantees the borrows outlive the thread.
    let start = unsafe { std::mem::transmute::<Box<dyn Start + 'a>, Box<dyn Start>>(start) };
    if let Kind::Virtual { coro: slot, .. } = &inner.kind {
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
        && let Some(sim) = crate::sched::simulation()
    {
        sim.thread_panicked(me, &**payload);
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
        // it back: see `thread::Outcome`). A detached thread's result is
        // dropped here, before its thread-locals, as std drops it.
        let outcome = drop_if_detached(me, Outcome::new(r));
        // Then its `thread_local!` values and pthread key values, as an
        // OS thread's at its exit (on a thread-local area of its own).
        crate::tls::run_dtors();
        if let Kind::Virtual { sched, .. } = &me.kind {
            sched.finished();
        }
        // Before the joiner can return: it may look at our state.
        set_inner_state(me, State::Terminated);
        complete_outcome(me, outcome);
        // Whatever registered a destructor after the pass above (a result
        // whose handle was dropped meanwhile, dropped by `complete_outcome`,
        // whose `Drop` set a pthread key or allocated) is run now: late,
        // after the join, but never left behind.
        crate::tls::run_dtors();
    }));
    if finish.is_err() {
        crate::thread::abort_after_drop_panic(me);
    }
    // Back to the carrier's stack as this returns.
    crate::switching::set_switching(true);
}

#[cfg(test)]
mod tests {
    use super::*;
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
