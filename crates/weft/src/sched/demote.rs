//! Lowering a held carrier's priority (ARCHITECTURE.md, "Sharing the
//! cores").
//!
//! The kernel shares the CPU per OS thread. A `std` server's computation
//! is one thread among the fifty that serve requests, each of which runs
//! ahead of it when it wakes; a virtual thread that computes for seconds
//! holds one carrier, an OS thread the kernel weighs like the two that
//! serve everything else. So beside such a computation `std` threads
//! served 11–17 % more `/hello` than Weft (issue #54's hog row). Preempting
//! the computing thread would be the full answer; it needs safe points
//! Rust code does not have.
//!
//! What Weft does instead, in three parts:
//!
//! 1. **The monitor lowers the OS thread** ([`lower`]; the judgement is
//!    `monitor.rs`'s `lower_if_busy_beside`): a hold past the stall
//!    threshold, on a CPU (the kernel says `R`), while the runtime's
//!    other carriers run many short threads, gets the carrier's OS thread
//!    lowered to the runtime's held-carrier nice value (default 5,
//!    `RuntimeBuilder::held_carrier_nice`). The mark first, then the
//!    system call, under the rule of `stall::Handoff` (the hold must still
//!    be on after the mark is up). Computations alone or beside other
//!    computations are never lowered: lowering gives their neighbours
//!    nothing they need, and replaces an OS thread for nothing.
//! 2. **The carrier leaves its slot when the hold ends**
//!    (`carrier/retire.rs`): an unprivileged process cannot raise a
//!    thread's priority back (`RLIMIT_NICE` is 0 by default), so the OS
//!    thread goes off duty as a spare does — its threads that may move go
//!    elsewhere, it serves those that stay — and exits once none is left.
//!    A spare comes in meanwhile (compensation), and a core slot gets a
//!    new OS thread when the old one exits.
//! 3. **OS threads started on a lowered carrier start at the runtime's
//!    own priority** (`starter.rs`): a new
//!    thread inherits its creator's nice value, so a spare started by a
//!    lowered carrier — or a `std::thread::spawn` in the computation —
//!    would be lowered for good. Such a start is carried out by the
//!    *starter*, an OS thread the monitor starts before it lowers anything,
//!    with the caller's signal mask and CPU affinity (what a new thread
//!    inherits besides its priority). A virtual thread that stays on its
//!    carrier (`thread/stay.rs`: it may have changed other state the
//!    kernel keeps per OS thread, such as capabilities) starts its OS
//!    threads itself, lowered.

use std::ffi::c_int;
use std::sync::atomic::Ordering;

use super::slot::CarrierSlot;
use super::starter;

/// Lowers the OS thread of carrier `w`, held on switch `sw` past the
/// stall threshold by a computation that other virtual threads wait
/// behind (the monitor's judgement, `monitor.rs`), to nice value `nice`;
/// once per hold (the caller checks that it is not lowered already).
/// False if nothing was lowered: the starter could not be started (a
/// spare started by the lowered carrier would be lowered for good), or
/// the hold ended.
pub(super) fn lower(w: &CarrierSlot, sw: u64, nice: u8) -> bool {
    if !starter::ready() {
        return false;
    }
    let still_held =
        || !w.mounted.load(Ordering::SeqCst).is_null() && w.switches.load(Ordering::SeqCst) == sw;
    if !w.handoff.mark_demoted(still_held) {
        return false;
    }
    let tid = w.tid.load(Ordering::Relaxed);
    // Before the system call: from then on the OS threads it starts come
    // from the starter.
    starter::lowered(tid);
    // SAFETY: setpriority on a thread id of this process; no memory is
    // passed. The system call directly: Weft's own `setpriority` (thread
    // state a virtual thread changes, `thread/os_state.rs`) is for code
    // running on virtual threads.
    let r = unsafe {
        libc::syscall(
            libc::SYS_setpriority,
            libc::PRIO_PROCESS,
            tid,
            c_int::from(nice),
        )
    };
    // On failure (the thread exited meanwhile) the carrier still leaves
    // its slot when the hold ends: one OS thread, not correctness.
    r == 0
}
