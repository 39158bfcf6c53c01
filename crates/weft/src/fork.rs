//! Which copy of the process this is: the one that loaded Weft, or a
//! `fork` child of it (or of a child, and so on).
//!
//! A child has one thread, the one that called `fork`: the runtimes it
//! inherits have no carriers and no monitor, so a thread spawned on one
//! would never run and its `join` would wait for ever. Each runtime
//! remembers the generation it was built in ([`generation`]); spawning on
//! a runtime of another generation is an error that says so, and the
//! default runtime is built afresh in each child at its first use
//! (`runtime.rs`), as are the offload pool (`offload.rs`) and the report
//! writer's thread (`sched/report.rs`).
//!
//! What a child cannot start afresh are the locks it inherits: a lock a
//! thread of the parent held at the fork stays held in the child, whose
//! copy of that thread does not exist. Weft's global locks are held
//! briefly (the record slab's, the stack pools', the registry's), and a
//! child that meets one held blocks on it (`thread/slab.rs`, "Limits").
//! The one held long is the symbolizer's, while the parent's report
//! writer resolves a stack: a child forked then never writes a report
//! (its writer waits on that lock), though its threads run on.
//!
//! The generation is bumped by a `pthread_atfork` child handler,
//! registered by a constructor before `main`, so a fork made before Weft
//! is first used counts too. A child made with `_Fork`, `vfork` or a raw
//! `clone` runs no handler: it must only `exec`, as POSIX asks of the
//! child of any process with more than one thread.

use std::sync::atomic::{AtomicU32, Ordering};

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
/// not survive the fork. A child's value is leaked, as the first one is
/// kept for good.
///
/// Making a child's value takes a lock that a thread of the parent may
/// have held at the fork (only if that thread was itself making a child's
/// value: a child that forks again while another of its threads does).
pub(crate) struct PerProcess<T: 'static> {
    first: once_cell::sync::OnceCell<T>,
    child: std::sync::Mutex<Option<(u32, &'static T)>>,
}

impl<T: Send + Sync + 'static> PerProcess<T> {
    pub(crate) const fn new() -> Self {
        PerProcess {
            first: once_cell::sync::OnceCell::new(),
            child: std::sync::Mutex::new(None),
        }
    }

    /// This process copy's value, made by `make` if it has none yet. A
    /// failed `make` is not remembered: the next call tries again.
    pub(crate) fn get_or_try_init<E>(
        &'static self,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Result<&'static T, E> {
        use crate::unpoison::Unpoison;
        match generation() {
            0 => self.first.get_or_try_init(make),
            g => {
                let mut child = self.child.lock().unpoison();
                if let Some((born, v)) = *child
                    && born == g
                {
                    return Ok(v);
                }
                let v: &'static T = Box::leak(Box::new(make()?));
                *child = Some((g, v));
                Ok(v)
            }
        }
    }

    /// As [`PerProcess::get_or_try_init`], with a `make` that cannot fail.
    pub(crate) fn get_or_init(&'static self, make: impl FnOnce() -> T) -> &'static T {
        match self.get_or_try_init(|| Ok::<T, std::convert::Infallible>(make())) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }
}
