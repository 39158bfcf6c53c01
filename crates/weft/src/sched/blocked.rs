//! Marking a carrier blocked while its thread waits without unmounting.
//!
//! A wait that holds the carrier's OS thread and that Weft sees coming —
//! a pinned park (`weft::pinned`, or a weft call while a C lock is held), a
//! futex wait that goes to the kernel (from a virtual thread, or from the
//! carrier's own loop while it hands out readiness events:
//! [`hold_carrier_loop`]), a C lock found taken — opens a
//! blocking section ([`enter_blocking`], until [`exit_blocking`]; the
//! thread side's guard is `thread::CarrierHeld`). The carrier
//! 1. counts itself in the runtime's blocked count (`stall.rs`), so a
//!    spare may come in, and for a pinned park raises its `pinned` flag
//!    (the monitor then reports the wait as the pinned event it is, not
//!    as a stall; any other wait is reported as before, with its system
//!    call, if it lasts past the threshold);
//! 2. raises its own blocked mark in `handoff` (`stall::Handoff`): from
//!    then on a wake-up of one of its threads that may move queues it
//!    elsewhere (handoff rule 2, ARCHITECTURE.md "Affinity and handoff");
//! 3. has what is queued for it now — its `next` slot and inbox
//!    (unstarted threads and those that may move) and its stealable
//!    queue — handed off to the injector, and a carrier woken for them.
//!
//! The carrier itself only raises flags and counts: the section may open
//! inside a C allocator's lock hook (jemalloc takes its arena locks with
//! `pthread_mutex_lock`), where allocating — a crossbeam queue's new
//! block, a spare's thread — could re-enter the allocator. Step 3 and any
//! spare are the monitor's: when threads are queued behind it the carrier
//! pokes it (`Thread::unpark`, a futex wake, at most one per pass), and
//! its next pass, at once, finds the blocked mark, hands the queues off
//! (as it does every pass while the mark is up) and wakes or starts a
//! carrier for them. So its threads run elsewhere when it
//! blocks, as Go's `entersyscallblock` hands its P off at once, instead of
//! when the monitor finds the hold past the stall threshold (20 ms). A
//! waker that read the mark just before it was raised queues its thread
//! in the inbox; the same pass, or the next, moves it.
//!
//! Only the carrier's own thread opens and closes a section. A section
//! opened inside another (a futex wait inside a pinned park's
//! `std::thread::park`) changes nothing.

use std::sync::atomic::Ordering;

use super::carrier::carrier;

/// Opens a blocking section on the calling carrier (module docs);
/// `pinned_park`: for a pinned park. False when not called on a carrier,
/// or inside a section already open.
pub(super) fn enter_blocking(pinned_park: bool) -> bool {
    let Some(c) = carrier() else { return false };
    let me = c.me();
    if me.handoff.is_blocked() {
        return false;
    }
    if pinned_park {
        me.pinned.store(true, Ordering::SeqCst);
    }
    c.shared.blocked.enter();
    me.handoff.set_blocked(true);
    // Threads queued behind the carrier now: the monitor moves them. (A
    // thread woken later is routed elsewhere by its waker, rule 2.)
    if me.has_home_work() || !c.local.is_empty() {
        c.shared.poke_monitor();
    }
    true
}

/// A blocking section of a carrier's own loop, closed on drop (see
/// [`hold_carrier_loop`]).
#[cfg(feature = "transparent")]
pub(crate) struct LoopHeld {
    /// The carrier was on the sleeper list and took itself off it.
    off_list: bool,
}

#[cfg(feature = "transparent")]
impl Drop for LoopHeld {
    fn drop(&mut self) {
        exit_blocking();
        if self.off_list
            && let Some(c) = carrier()
        {
            // Back as a sleeper a notifier took off the list (as
            // `Idle::carrier_to_notify` does): its sleep loop takes the
            // flag and searches before it sleeps again.
            c.shared.idle.searching.fetch_add(1, Ordering::SeqCst);
            c.me().notified.store(true, Ordering::SeqCst);
        }
    }
}

/// Opens a blocking section on the calling carrier if it is handing out
/// readiness events in its own loop (no virtual thread mounted), for a
/// wait that will hold it: a waker the readiness handler runs takes a lock
/// (through the `transparent` futex hook). A thread holding that lock may
/// be bound to this carrier and queued behind it; it runs elsewhere
/// meanwhile, if it may move. Any futex wait there opens one, the
/// scheduler's own brief locks' included: a section costs a few flags.
/// `None` elsewhere (a virtual thread's waits open theirs with
/// `thread::hold_carrier`), or when a section is already open.
///
/// A carrier that polls on its way to sleep is on the sleeper list, where
/// a notifier would pick it for new work it cannot run now: it takes
/// itself off the list for the section, and work already queued gets
/// another carrier (a spare, counted against the blocked one).
#[cfg(feature = "transparent")]
pub(crate) fn hold_carrier_loop() -> Option<LoopHeld> {
    let c = carrier()?;
    let me = c.me();
    if !c.polling.get() || !me.mounted.load(Ordering::Relaxed).is_null() {
        return None;
    }
    if !enter_blocking(false) {
        return None;
    }
    let off_list = me.sleeping.load(Ordering::SeqCst) && c.shared.idle.wake_self(c.index);
    if c.shared.has_visible_work() {
        c.shared.notify_work();
    }
    Some(LoopHeld { off_list })
}

/// Closes the section [`enter_blocking`] opened on the calling carrier.
pub(super) fn exit_blocking() {
    let Some(c) = carrier() else { return };
    let me = c.me();
    me.handoff.set_blocked(false);
    me.pinned.store(false, Ordering::SeqCst);
    c.shared.blocked.exit();
}
