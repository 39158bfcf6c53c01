//! Threads that never change OS thread.
//!
//! A started virtual thread runs on its home carrier, and moves to another
//! only when that carrier is held (ARCHITECTURE.md, "Affinity and
//! handoff"): its thread-locals, `pthread_self()` and C thread-locals are
//! in its own thread-local area, and the carrier refreshes the kernel
//! thread id in it at each mount. What the kernel keeps per OS thread and
//! the area cannot carry — a signal mask, CPU affinity, a thread name,
//! namespaces, capabilities, a scheduling policy or nice value, an
//! alternate signal stack — would stay behind. So a thread that changes
//! one *stays*: from then on it runs only on the carrier it is on, as a
//! goroutine after Go's `runtime.LockOSThread`. Also staying: a thread
//! without an area of its own (a runtime with carrier thread-locals) and a thread that suspended while unwinding a
//! panic (the unwinding is counted on its carrier).
//!
//! The flag is `VThread::stays`, written by the thread itself (or by the
//! carrier that binds it) and read by whoever owns the thread after it
//! suspends; it is never cleared.

use std::sync::atomic::Ordering;

use super::current::current_virtual_no_switch;
use super::record::VThread;

/// Keeps the calling virtual thread on its current carrier (its OS thread)
/// for the rest of its life, as Go's `runtime.LockOSThread` keeps a
/// goroutine on its OS thread. Call it before changing state the kernel
/// keeps per OS thread that Weft does not see (a `syscall` that sets a
/// per-thread attribute, an OS-thread-bound handle of a C library). The
/// libc calls for such state that Weft sees do it for you:
/// `pthread_sigmask`, `sigprocmask`, `sched_setaffinity`,
/// `pthread_setaffinity_np`, `pthread_setname_np`, `prctl`, `setns`,
/// `unshare`, `capset`, `sched_setscheduler`, `sched_setparam`,
/// `pthread_setschedparam`, `setpriority` and `sigaltstack`.
///
/// The price: while that carrier is held (a CPU-bound or blocked thread on
/// it), this thread waits for it instead of moving. On an OS thread this
/// does nothing (it never moves).
pub fn stay_on_carrier() {
    if let Some(t) = current_virtual_no_switch() {
        t.stays.store(true, Ordering::Relaxed);
    }
}

/// Whether `thread`, which the caller owns (taken from a queue or from the
/// park state machine), may start running on another carrier than its
/// home: it has a thread-local area of its own and does not stay.
pub(crate) fn may_move(thread: &VThread) -> bool {
    thread.tls_tp.get() != 0 && !thread.stays.load(Ordering::Relaxed)
}
