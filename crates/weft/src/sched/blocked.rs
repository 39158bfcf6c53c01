//! Marking a carrier blocked while its thread waits without unmounting.
//!
//! A pinned wait (`weft::pinned`, or a weft call inside it) and the few
//! calls that hold the carrier's OS thread raise the carrier's `pinned`
//! flag and count it in the runtime's blocked count (`stall.rs`) for as long
//! as a [`BlockingGuard`] lives; the scheduler then brings in a spare if work
//! is waiting. Only the carrier's own thread creates and drops the guard.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::carrier::carrier;
use super::shared::Shared;

/// Marks the current carrier as blocked while alive (see `blocking.rs`).
pub(super) struct BlockingGuard {
    pub(super) shared: Arc<Shared>,
    pub(super) index: usize,
}

/// Marks the calling carrier blocked and brings in a spare if work is
/// waiting. None when not called on a carrier.
pub(super) fn enter_blocking() -> Option<BlockingGuard> {
    let c = carrier()?;
    let me = c.me();
    me.pinned.store(true, Ordering::SeqCst);
    c.shared.blocked.enter();
    if !c.local.is_empty() || me.has_next() || c.shared.has_visible_work() {
        c.shared.compensate();
    }
    Some(BlockingGuard {
        shared: c.shared.clone(),
        index: c.index,
    })
}

impl Drop for BlockingGuard {
    fn drop(&mut self) {
        self.shared.carriers[self.index]
            .pinned
            .store(false, Ordering::SeqCst);
        self.shared.blocked.exit();
    }
}
