//! Marking a carrier blocked while its thread waits without unmounting.
//!
//! A wait that holds the carrier's OS thread and that Weft sees coming —
//! a pinned park (`weft::pinned`, or a weft call while a C lock is held), a
//! futex wait that goes to the kernel, a C lock found taken — opens a
//! blocking section ([`enter_blocking`]) for as long as a
//! [`BlockingGuard`] lives. The carrier
//! 1. raises its `pinned` flag and counts itself in the runtime's blocked
//!    count (`stall.rs`), so a spare comes in if work is waiting;
//! 2. raises its own blocked mark in `handoff` (`stall::Handoff`): from
//!    then on a wake-up of one of its threads that may move queues it
//!    elsewhere (handoff rule 2, ARCHITECTURE.md "Affinity and handoff");
//! 3. hands off what is queued for it now — its `next` slot and inbox
//!    (unstarted threads and those that may move) and its stealable
//!    queue — to the injector, and wakes a carrier for them.
//!
//! So its threads run elsewhere when it blocks, as Go's
//! `entersyscallblock` hands its P off at once, instead of when the
//! monitor finds the hold past the stall threshold (20 ms). A waker that
//! read the mark just before it was raised queues its thread in the inbox
//! after step 3 emptied it; the monitor moves it at its next look (it
//! hands off a blocked carrier's queues at every look, as a held one's),
//! so such a thread waits at most one tick.
//!
//! Only the carrier's own thread creates and drops the guard. A section
//! opened inside another (a futex wait inside a pinned park's
//! `std::thread::park`) changes nothing.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::carrier::carrier;
use super::shared::Shared;

/// Marks the current carrier as blocked while alive.
pub(super) struct BlockingGuard {
    pub(super) shared: Arc<Shared>,
    pub(super) index: usize,
}

/// Opens a blocking section on the calling carrier (module docs). None
/// when not called on a carrier, or inside a section already open.
pub(super) fn enter_blocking() -> Option<BlockingGuard> {
    let c = carrier()?;
    let me = c.me();
    if me.pinned.load(Ordering::Relaxed) {
        return None;
    }
    me.pinned.store(true, Ordering::SeqCst);
    c.shared.blocked.enter();
    me.handoff.set_blocked(true);
    let mut moved = me.hand_off_queued(|t| c.shared.injector.push(t));
    while let Some(t) = c.local.pop() {
        c.shared.injector.push(t);
        moved += 1;
    }
    if moved > 0 || c.shared.has_visible_work() {
        // Wakes an idle carrier, or brings in a spare when none is idle
        // (the blocked count went up first).
        c.shared.notify_work();
    }
    Some(BlockingGuard {
        shared: c.shared.clone(),
        index: c.index,
    })
}

impl Drop for BlockingGuard {
    fn drop(&mut self) {
        let me = &self.shared.carriers[self.index];
        me.handoff.set_blocked(false);
        me.pinned.store(false, Ordering::SeqCst);
        self.shared.blocked.exit();
    }
}
