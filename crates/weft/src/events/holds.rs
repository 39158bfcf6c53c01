//! The holds of a carrier the stalls saw: kept for the
//! blocked-with-waiters event of the same hold and until the hold ends.

use crate::unpoison::Unpoison;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// What a stall event saw of a hold of a carrier, kept for the
/// blocked-with-waiters event of the same hold (which the monitor raises
/// without sampling again), and until the hold ends.
pub(super) struct Hold {
    pub(super) thread_id: u64,
    /// When the event was recorded.
    pub(super) at: SystemTime,
    /// When the hold began, as far as the monitor knows (`at` less the
    /// hold so far).
    pub(super) began: SystemTime,
    pub(super) stack: Option<String>,
    pub(super) call_site: Option<String>,
    /// The stall was Weft's own diagnostics at work (not recorded).
    pub(super) own: bool,
    /// The monitor has not seen the hold end yet.
    pub(super) open: bool,
}

/// The last stalls seen, newest last (a few: only the hold a
/// blocked-with-waiters event belongs to is looked up).
pub(super) static HOLDS: Mutex<VecDeque<Hold>> = Mutex::new(VecDeque::new());

pub(super) const HOLDS_KEPT: usize = 64;

/// Whether a stack (as an event keeps it) runs inside Weft's own
/// diagnostics: a dump, a stack sample, symbol lookup.
pub(super) fn inside_own_diagnostics(stack: Option<&str>) -> bool {
    stack.is_some_and(|s| {
        crate::symbols::parse_stack(s)
            .iter()
            .any(crate::symbols::is_own_diagnostics)
    })
}

/// How long thread `thread_id` has held its carrier, if it holds one in a
/// stall the monitor reported and has not seen end (for the live page's
/// carriers table).
pub(crate) fn holding(thread_id: u64) -> Option<Duration> {
    let holds = HOLDS.lock().unpoison();
    let h = holds
        .iter()
        .rev()
        .find(|h| h.open && h.thread_id == thread_id)?;
    Some(
        SystemTime::now()
            .duration_since(h.began)
            .unwrap_or_default(),
    )
}
