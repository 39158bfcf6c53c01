//! Whether an OS thread is between two stacks.
//!
//! A context switch (corosensei's `resume` and `suspend`) moves the stack
//! pointer to the other stack a few instructions before the frame being
//! left stops looking current. In that window the unwind tables do not
//! describe the machine, and an unwinder started there — by the stack
//! sampler's signal handler (`sample.rs`) — follows garbage. So every
//! switch is bracketed: the side that leaves raises this OS thread's flag
//! with [`set_switching`] just before switching, and the side that runs
//! next lowers it first thing:
//!
//! | leaving                         | raises before | lowered by                   |
//! |---------------------------------|---------------|------------------------------|
//! | a carrier mounting a thread     | `resume`      | the thread (body start, or after its `suspend` returns) |
//! | a virtual thread parking        | `suspend`     | the carrier, after `resume` returns |
//! | a virtual thread's body ending  | its return    | the carrier, after `resume` returns |
//!
//! The flag is a `const` thread-local `Cell<bool>`: no lazy initialisation
//! and no destructor, so a signal handler reads it with one plain TLS load.
//! This module is a leaf: the scheduler and the thread record write the
//! flag, diagnostics only read it.

use std::cell::Cell;
use std::sync::atomic::{Ordering, compiler_fence};

thread_local! {
    /// Up while this OS thread is between two stacks.
    static SWITCHING: Cell<bool> = const { Cell::new(false) };
}

/// Raises (`true`) or lowers the calling OS thread's "between stacks" flag.
///
/// Not inlined: with migration a virtual thread may continue on another
/// OS thread after a switch, and the thread-local's address must be
/// computed afresh on each call.
#[inline(never)]
pub(crate) fn set_switching(on: bool) {
    SWITCHING.with(|s| s.set(on));
    // Read by a signal handler on this same thread: keep the store ahead
    // of the switch's instructions.
    compiler_fence(Ordering::SeqCst);
}

/// The calling OS thread's flag itself (for seeding a thread-local area:
/// `tls::seed`).
pub(crate) fn flag() -> *const Cell<bool> {
    SWITCHING.with(|s| s as *const Cell<bool>)
}

/// Whether the calling OS thread is between stacks (async-signal-safe).
#[inline(never)]
pub(crate) fn switching() -> bool {
    SWITCHING.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_is_per_os_thread() {
        set_switching(true);
        assert!(switching());
        assert!(!std::thread::spawn(switching).join().unwrap());
        set_switching(false);
        assert!(!switching());
    }
}
