//! Spawning: [`Builder`] and [`spawn`].
//!
//! Spawning creates the thread's record (`thread/record.rs`), puts the
//! body in it (`thread/life.rs`, `install`: the thread's start and end),
//! registers the thread (`thread/registry.rs`) and hands it to its
//! runtime's scheduler. It sits above the runtime: it needs one to spawn
//! onto.

use std::io;

use crate::runtime::Runtime;
use crate::thread::{JoinHandle, State, Thread, install};

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
