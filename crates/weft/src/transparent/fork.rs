//! Whether this process is a `fork` child of the one that loaded Weft
//! (module docs, "Semantics kept": a child's calls pass through and take
//! no lock).

use std::sync::atomic::{AtomicBool, Ordering};

/// Set in a `fork` child: it has no carriers, every call passes through,
/// and no hook takes a lock (another carrier may have held it at the fork:
/// its owner does not exist in the child).
static FORKED: AtomicBool = AtomicBool::new(false);

extern "C" fn in_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// Whether this process is a `fork` child of the one that loaded Weft.
pub(super) fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// Registers [`in_child`] with `pthread_atfork` before `main` (an
/// `.init_array` constructor): a fork made before the first hooked call
/// must mark its child too. A lazy registration (at the first call on a
/// virtual thread) left a child forked earlier by a virtual thread
/// believing it ran on one, parking on carriers it does not have.
extern "C" fn register_atfork() {
    // SAFETY: registers a handler that only stores an atomic; libc is
    // initialised before the executable's constructors run.
    unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
}

#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_ATFORK: extern "C" fn() = register_atfork;
