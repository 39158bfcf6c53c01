//! Spawning: [`Builder`] and [`spawn`].
//!
//! Spawning creates the thread's record (`thread/record.rs`) and its
//! [`Spawned`] — the body and the join packet in one allocation — puts it
//! in the record's coroutine slot (the stack is taken at first run),
//! registers the thread (`thread/registry.rs`) and hands it to its
//! runtime's scheduler. It sits above the runtime: it needs one to spawn
//! onto.

use std::cell::UnsafeCell;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::runtime::Runtime;
use crate::thread::Suspend;
use crate::thread::{
    Body, CoroSlot, JoinHandle, Joinable, Kind, Packet, Start, State, Thread, current_virtual,
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

    /// Reserves at least `size` bytes of stack (rounded up to a power of
    /// two, at least 16 KiB, at most 1 GiB). Memory is
    /// committed only as the stack grows.
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
        let rt = crate::runtime::for_spawn()?;
        self.spawn_on(&rt, f)
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
        // A large body is boxed apart: its bytes are freed when the thread
        // starts instead of staying in the `Spawned` until the join.
        let (start, joinable) = if size_of::<F>() > INLINE_BODY_MAX {
            spawned(Box::new(f))
        } else {
            spawned(f)
        };
        // SAFETY: lifetime erasure only (the layouts are identical). The
        // caller guarantees that everything `f` borrows outlives the
        // thread, and the body is run or dropped before the packet
        // completes (`Spawned`), so after `join` returns nothing of `'a` is
        // touched again; see `CoroSlot::get` for the coroutine's side.
        let (start, joinable) = unsafe {
            (
                std::mem::transmute::<Arc<dyn Start + 'a>, Arc<dyn Start>>(start),
                std::mem::transmute::<Arc<dyn Joinable<T> + 'a>, Arc<dyn Joinable<T>>>(joinable),
            )
        };
        if let Kind::Virtual { coro: slot, .. } = &thread.inner.kind {
            // SAFETY: the thread is not yet visible to any carrier.
            unsafe { *slot.get() = CoroSlot::Pending(stack, Body::new(start)) };
        }
        thread.set_state(State::Started);
        if let Some(sim) = crate::sched::simulation() {
            // What a simulation keeps per thread (its host) is inherited.
            let parent = crate::thread::current().id().as_u64().get();
            sim.spawned(parent, thread.id().as_u64().get());
        }
        crate::thread::registry::register(&thread.inner);
        rt.spawn_thread(thread.inner.clone());
        Ok(JoinHandle::new(joinable, thread))
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

/// Bodies (closures with what they capture) up to this size live inside
/// their [`Spawned`]; larger ones get a box of their own, freed when the
/// thread starts. A body is moved onto the thread's stack when it starts, so
/// an inline body's bytes sit unused in the allocation until the join: a few
/// words for the usual closure (handles, `Arc`s, a `Vec`), but a closure
/// that captures a buffer by value would keep that buffer's size twice.
const INLINE_BODY_MAX: usize = 64;

/// The [`Spawned`] of `f`, as the record and the join handle hold it.
fn spawned<'a, F, T>(f: F) -> (Arc<dyn Start + 'a>, Arc<dyn Joinable<T> + 'a>)
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    let spawned = Arc::new(Spawned {
        packet: Packet::new(),
        body: UnsafeCell::new(Some(f)),
    });
    (spawned.clone(), spawned)
}

/// A spawned virtual thread's body and its join packet, in one allocation.
///
/// The record's coroutine slot holds it as a [`Start`] until the first run,
/// the [`JoinHandle`] as a [`Joinable`]. One allocation instead of a boxed
/// body beside the packet: half the allocator traffic per spawn, and the
/// carrier that starts the thread frees nothing the spawner allocated
/// (glibc's arena lock was the contended part of spawning: a free from
/// another thread takes the allocating thread's arena lock).
///
/// Field protocol: `body` is touched only through the thread's one
/// [`Body`], which either runs it (first run, on the thread's carrier) or
/// abandons it (dropped unrun), exactly once; `packet` follows its own
/// protocol (`thread/join.rs`). The body is gone — run or dropped — before
/// the packet completes, so a joiner never outlives a live body.
struct Spawned<F, T> {
    packet: Packet<T>,
    body: UnsafeCell<Option<F>>,
}

impl<F, T> Drop for Spawned<F, T> {
    /// A panic nobody joined fails a simulation (`crate::sim`): it goes
    /// unseen otherwise.
    fn drop(&mut self) {
        if let Some(payload) = self.packet.unjoined_panic()
            && let Some(sim) = crate::sched::simulation()
        {
            sim.panic_lost(payload);
        }
    }
}

// SAFETY: `body` is taken exactly once, by one thread (field protocol
// above), and `F: Send` lets it move there; `packet` is `Sync` for `T: Send`.
unsafe impl<F: Send, T: Send> Sync for Spawned<F, T> {}

impl<F: Send, T: Send> Joinable<T> for Spawned<F, T> {
    fn packet(&self) -> &Packet<T> {
        &self.packet
    }
}

impl<F, T> Start for Spawned<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(self: Arc<Self>, y: &corosensei::Yielder<(), Suspend>) {
        // On our own stack now (raised by the carrier's `resume`).
        crate::switching::set_switching(false);
        let me = current_virtual().expect("weft: coroutine started off its carrier");
        me.yielder.set(y as *const _);
        // SAFETY: the one `Body` runs the body once (field protocol).
        let f = unsafe { (*self.body.get()).take() }.expect("weft: thread body run twice");
        let r = catch_unwind(AssertUnwindSafe(f));
        if let Err(payload) = &r
            && let Some(sim) = crate::sched::simulation()
        {
            sim.thread_panicked(me, &**payload);
        }
        // What follows runs user `Drop`s too (`local!` values; the result or
        // panic payload of a detached thread, dropped with our share of the
        // allocation). A panic there must not unwind into the carrier: abort with
        // a message, as std does for a panicking thread-local destructor or
        // thread result.
        let finish = catch_unwind(AssertUnwindSafe(move || {
            // Drop weft::local! values while still on this thread.
            // SAFETY: locals are only touched by the running thread.
            unsafe { (*me.locals.get()).clear() };
            // Then its `thread_local!` values and pthread key values, as an
            // OS thread's at its exit (on a thread-local area of its own).
            crate::tls::run_dtors();
            if let Kind::Virtual { sched, .. } = &me.kind {
                sched.finished();
            }
            // Before the joiner can return: it may look at our state.
            set_inner_state(me, State::Terminated);
            self.packet.complete(r);
            drop(self);
        }));
        if finish.is_err() {
            crate::thread::abort_after_drop_panic(me);
        }
        // Back to the carrier's stack as this returns.
        crate::switching::set_switching(true);
    }

    fn abandon(self: Arc<Self>) {
        let why = crate::thread::take_never_ran_reason();
        // SAFETY: the one `Body` abandons the body once, unrun (field protocol).
        let body = unsafe { (*self.body.get()).take() };
        // The body goes before the packet completes (a scoped joiner may
        // end its borrows then), and the packet completes even if a `Drop`
        // in the body panics, so that `join` cannot wait for ever.
        let dropped = catch_unwind(AssertUnwindSafe(move || drop(body)));
        self.packet.complete(Err(Box::new(why)));
        if let Err(p) = dropped {
            std::panic::resume_unwind(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Sets its flag when dropped; panics then if asked to.
    struct OnDrop(Arc<AtomicBool>, bool);

    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
            if self.1 {
                panic!("drop of the body panicked");
            }
        }
    }

    /// A `Spawned` whose body holds an `OnDrop`: its `Body` and its joinable end.
    fn spawned_on_drop(panics: bool) -> (Body, Arc<dyn Joinable<u32>>, Arc<AtomicBool>) {
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = OnDrop(dropped.clone(), panics);
        let spawned = Arc::new(Spawned {
            packet: Packet::new(),
            body: UnsafeCell::new(Some(move || {
                let _guard = &guard;
                7
            })),
        });
        (Body::new(spawned.clone()), spawned, dropped)
    }

    #[test]
    fn large_bodies_run_and_fail_unrun_like_small_ones() {
        let big = [3u8; 4 * INLINE_BODY_MAX];
        let small = 5u8;
        let b = crate::spawn(move || big.iter().map(|&x| u32::from(x)).sum::<u32>());
        let s = crate::spawn(move || u32::from(small));
        assert_eq!(b.join().unwrap(), 3 * 4 * INLINE_BODY_MAX as u32);
        assert_eq!(s.join().unwrap(), 5);
        // A large body dropped unrun completes its join too.
        let (body, joinable) = spawned(Box::new(move || big.len()));
        drop(Body::new(body));
        assert!(joinable.packet().wait().is_err());
    }

    #[test]
    fn a_body_dropped_unrun_drops_the_closure_and_fails_the_join_with_the_reason() {
        let (body, joinable, dropped) = spawned_on_drop(false);
        assert!(!joinable.packet().is_done());
        crate::thread::set_never_ran_reason("no stack: test".into());
        drop(body);
        assert!(dropped.load(Ordering::SeqCst));
        let err = joinable.packet().wait().unwrap_err();
        assert_eq!(err.downcast_ref::<String>().unwrap(), "no stack: test");
    }

    #[test]
    fn a_panicking_drop_of_an_unrun_body_still_completes_the_join() {
        let (body, joinable, dropped) = spawned_on_drop(true);
        let r = catch_unwind(AssertUnwindSafe(move || drop(body)));
        assert!(r.is_err(), "the drop's panic reaches the dropper");
        assert!(dropped.load(Ordering::SeqCst));
        assert!(joinable.packet().is_done());
        let err = joinable.packet().wait().unwrap_err();
        assert!(
            err.downcast_ref::<String>()
                .unwrap()
                .contains("before it ran")
        );
    }
}
