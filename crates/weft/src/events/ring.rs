//! The ring of the most recent events.

use super::event::Event;
use crate::unpoison::Unpoison;
use std::collections::VecDeque;
use std::sync::Mutex;

/// How many events the ring keeps.
pub const RING_CAPACITY: usize = 1024;

pub(super) static RING: Mutex<VecDeque<Event>> = Mutex::new(VecDeque::new());

/// The most recent events, in the order they were recorded (at most
/// [`RING_CAPACITY`]). A stall is recorded when it has been written up,
/// off the monitor, so a pinned event with a later [`Event::at`] can come
/// before it.
pub fn recent() -> Vec<Event> {
    RING.lock().unpoison().iter().cloned().collect()
}
