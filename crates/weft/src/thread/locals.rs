//! The storage behind `weft::local!`: one slot vector per thread.
//!
//! [`Locals`] lives in the record (`VThread::locals`) of a virtual thread, or
//! in a thread-local for an OS thread; only its own thread touches it
//! (`crate::local` borrows it through `current_locals`, `current.rs`).
//! Values are dropped when the thread finishes, still on that thread. A
//! leaf of `thread/`: it names nothing else here.

use std::any::Any;

/// Values of every `local!` key for one thread, indexed by key id.
#[derive(Default)]
pub(crate) struct Locals {
    pub(crate) slots: Vec<Option<Box<dyn Any>>>,
}
impl Locals {
    /// Drops every value (at thread exit). Values are moved out first, so a
    /// destructor that touches a local sees a fresh slot, not a dangling one.
    pub(crate) fn clear(&mut self) {
        let slots = std::mem::take(&mut self.slots);
        drop(slots);
    }
}
