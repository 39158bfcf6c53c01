//! Which copy of the process this is: the one that loaded Weft, or a
//! `fork` child of it (or of a child, and so on).
//!
//! A child has one thread, the one that called `fork`: the runtimes it
//! inherits have no carriers and no monitor, so a thread spawned on one
//! would never run and its `join` would wait for ever. Each runtime
//! remembers the generation it was built in ([`generation`]); spawning on
//! a runtime of another generation is an error that says so. What a
//! child cannot share with its parent is made afresh in the child at its
//! first use ([`PerProcess`]), the parent's copy left untouched (leaked:
//! dropping it would touch state a vanished thread may have been
//! changing):
//!
//! - the default runtime (`runtime.rs`);
//! - the readiness source and the poller thread (`netpoll.rs`, `poll.rs`):
//!   the child's copies of the epoll descriptors are the parent's sets,
//!   so both processes would wait on them, each taking the other's
//!   edge-triggered events and reading the other's tokens — addresses in
//!   the other address space;
//! - the offload pool (`offload.rs`), the report writer's queue and count
//!   (`sched/report.rs`), the stack sampler's lock (`sample.rs`), the
//!   symbol cache (`symbols.rs`) and the `SIGQUIT` dump thread
//!   (`dump.rs`: until the child has its own, a `SIGQUIT` to it takes
//!   the default action rather than waking the parent's).
//!
//! What a child cannot start afresh:
//!
//! - objects made before the fork: a socket Weft registered in the
//!   parent waits in the child for readiness that goes to the parent's
//!   set (dropped in the child, it leaves the parent's registration, its
//!   count and its waiters alone: `poll.rs`, `Registration`); a
//!   `JoinHandle` of the parent's, or an `Executor::fixed` pool,
//!   waits for threads that do not exist here. Make them in the child (a
//!   socket from an inherited `std` one: `TcpListener::from_std`);
//! - locks held at the fork by a thread of the parent. Weft's other
//!   global locks (the record slab's, the stack pools', the registry's)
//!   are held briefly, and a child that meets one held blocks on it
//!   (`thread/slab.rs`, "Limits"). The `backtrace` crate's lock is held
//!   while the parent resolves symbols (a stall report, a dump, a pinned
//!   wait): a child forked then blocks where it first resolves — its
//!   report writer, or the carrier of a pinned wait that ends;
//! - the `transparent` hooks, which pass through in every child: a
//!   hooked call of a child's virtual thread blocks its carrier (spares
//!   compensate), as a call of a C thread would.
//!
//! A child forked on a virtual thread should only `exec` or `_exit`, as
//! POSIX asks of the child of any process with more than one thread.
//!
//! The generation is bumped by a `pthread_atfork` child handler,
//! registered by a constructor before `main`, so a fork made before Weft
//! is first used counts too. A child made with `_Fork`, `vfork` or a raw
//! `clone` runs no handler: it must only `exec`.

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// Forks between the process that loaded Weft and this one: 0 in that
/// process, 1 in its children, 2 in theirs.
static GENERATION: AtomicU32 = AtomicU32::new(0);

extern "C" fn in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Forks between the process that loaded Weft and this one (see the
/// module docs). Relaxed: the child's one thread wrote it before it could
/// run anything else.
#[inline]
pub(crate) fn generation() -> u32 {
    GENERATION.load(Ordering::Relaxed)
}

/// Registers [`in_child`] with `pthread_atfork` before `main` (an
/// `.init_array` constructor): a fork made before Weft is first used must
/// mark its child too. (A lazy registration, at the first hooked call of
/// the `transparent` feature, left a child forked earlier by a virtual
/// thread believing it ran on one, parking on carriers it does not have.)
extern "C" fn register_atfork() {
    // SAFETY: registers a handler that only bumps an atomic; libc is
    // initialised before the executable's constructors run.
    unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
}

#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_ATFORK: extern "C" fn() = register_atfork;

/// A value made once per process copy: in the process that loaded Weft,
/// and again in each `fork` child at its first use there — for what a
/// child cannot share with its parent, such as a pool whose threads did
/// not survive the fork, or an epoll set (the child's copy of the
/// descriptor is the parent's set). A child's value is leaked, as the
/// first one is kept for good.
///
/// Reading a child's value is two atomic loads once it is made; making it
/// takes a lock that a thread of the parent may have held at the fork
/// (only if that thread was itself making a child's value: a child that
/// forks again while another of its threads does).
pub(crate) struct PerProcess<T: 'static> {
    first: once_cell::sync::OnceCell<T>,
    /// The generation `child_ptr` was made in (0: none yet), stored after
    /// it with Release: a reader that sees its own generation (Acquire)
    /// sees the pointer.
    child_gen: AtomicU32,
    child_ptr: AtomicPtr<T>,
    making: std::sync::Mutex<()>,
}

impl<T: Send + Sync + 'static> PerProcess<T> {
    pub(crate) const fn new() -> Self {
        PerProcess {
            first: once_cell::sync::OnceCell::new(),
            child_gen: AtomicU32::new(0),
            child_ptr: AtomicPtr::new(std::ptr::null_mut()),
            making: std::sync::Mutex::new(()),
        }
    }

    /// This process copy's value, if it has been made.
    #[inline]
    pub(crate) fn get(&'static self) -> Option<&'static T> {
        match generation() {
            0 => self.first.get(),
            g => self.child(g),
        }
    }

    #[inline]
    fn child(&'static self, g: u32) -> Option<&'static T> {
        if self.child_gen.load(Ordering::Acquire) != g {
            return None;
        }
        // SAFETY: `child_ptr` was stored before `child_gen` (Release, read
        // above with Acquire) and points at a leaked box, never freed.
        Some(unsafe { &*self.child_ptr.load(Ordering::Relaxed) })
    }

    /// This process copy's value, made by `make` if it has none yet. A
    /// failed `make` is not remembered: the next call tries again.
    #[inline]
    pub(crate) fn get_or_try_init<E>(
        &'static self,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Result<&'static T, E> {
        match self.get() {
            Some(v) => Ok(v),
            None => self.make(make),
        }
    }

    /// The first use in this process copy (or a race with it).
    #[cold]
    fn make<E>(&'static self, make: impl FnOnce() -> Result<T, E>) -> Result<&'static T, E> {
        use crate::unpoison::Unpoison;
        let g = generation();
        if g == 0 {
            return self.first.get_or_try_init(make);
        }
        let _making = self.making.lock().unpoison();
        if let Some(v) = self.child(g) {
            return Ok(v);
        }
        let v: &'static T = Box::leak(Box::new(make()?));
        self.child_ptr
            .store(v as *const T as *mut T, Ordering::Relaxed);
        self.child_gen.store(g, Ordering::Release);
        Ok(v)
    }

    /// As [`PerProcess::get_or_try_init`], with a `make` that cannot fail.
    #[inline]
    pub(crate) fn get_or_init(&'static self, make: impl FnOnce() -> T) -> &'static T {
        match self.get_or_try_init(|| Ok::<T, std::convert::Infallible>(make())) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }
}
