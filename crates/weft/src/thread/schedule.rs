//! What a virtual-thread record asks of whatever carries it: the contract
//! between the record (this module) and the scheduler (`sched`), so that
//! the record never names the scheduler's types.
//!
//! # Vocabulary
//!
//! - [`Schedule`]: what a record asks of its runtime — *schedule me*
//!   (after an unpark, from any thread), *I finished*, *I hold my carrier*
//!   (a pinned wait), and the accounting of a panic a thread carries across
//!   a suspension. `sched::Shared` implements it; the runtime's handle
//!   (`runtime.rs`) implements it by handing each call to its `Shared`, and
//!   the record holds that handle as an `Arc<dyn Schedule>`
//!   (`Kind::Virtual::sched`): one pointer that both schedules the thread
//!   and keeps its runtime running. Tokio's tasks hold their scheduler
//!   handle the same way.
//! - [`Suspend`]: what a thread hands its carrier when it switches away
//!   (`thread::suspend`); the carrier carries it out *after* the switch
//!   (the suspend protocol, `crate::park`).
//! - *Mounted*: the carrier says which record it runs with
//!   `thread::set_mounted` (`current.rs` keeps the pointer, a thread-local
//!   of the carrier, or of the thread's own area); `current()` reads it.
//!
//! # Who calls what, and the cost
//!
//! [`Schedule::schedule`] is the one call on a hot path: once per unpark of
//! a parked virtual thread, by whoever moved it out of PARKED (the park
//! state machine makes that party unique), so it is one indirect call per
//! hand-off (measured in the note of issue #33: within the run-to-run
//! spread of ping-pong). The rest run on rare paths: the panic accounting
//! only while `std::thread::panicking()` (checked here first), the carrier
//! hold only in a pinned wait, `finished` once per thread.

use super::record_ref::RecordArc;
use std::sync::Arc;
use std::time::Instant;

use super::VThread;

/// What a virtual thread asks of its carrier when it suspends. Handled by
/// the carrier *after* the switch (the suspend protocol, `crate::park`).
pub(crate) enum Suspend {
    /// Park until unparked.
    Park,
    /// Park until unparked or the deadline passes.
    ParkUntil(Instant),
    /// Go to the back of the run queue.
    Yield,
}

/// What a record asks of the scheduler of its runtime (implemented by
/// `sched::Shared`).
///
/// Every method but [`schedule`](Schedule::schedule) is called by the
/// virtual thread itself, on its carrier.
pub(crate) trait Schedule: Send + Sync + 'static {
    /// Makes `thread`, which has run before (or has never run and was
    /// borrowed by a thread dump), runnable again. Called by whoever moved
    /// it out of PARKED, from any thread; `thread` carries the strong count
    /// its carrier leaked when it parked.
    fn schedule(&self, thread: RecordArc);

    /// The calling virtual thread's body returned: it no longer counts as
    /// live. Called just before it completes its join (`join.rs`), so that
    /// whoever joins it never still counts it.
    fn finished(&self);

    /// The calling virtual thread is about to suspend while its carrier's
    /// OS thread unwinds a panic (`std::thread::panicking()`, and no
    /// thread-local area of its own). Returns whether the panic is the
    /// thread's own (then it calls [`resume_unwinding`] when it resumes);
    /// see `crate::thread::panicking`.
    ///
    /// [`resume_unwinding`]: Schedule::resume_unwinding
    fn suspend_unwinding(&self, thread: &VThread) -> bool;

    /// The counterpart of [`suspend_unwinding`](Schedule::suspend_unwinding),
    /// on the same carrier.
    fn resume_unwinding(&self);

    /// Threads of the calling carrier suspended while unwinding.
    fn suspended_unwinders(&self) -> u32;

    /// The calling virtual thread waits without unmounting (a pinned
    /// wait, a wait in the kernel): its carrier opens a blocking section
    /// (the scheduler's `blocked.rs`) until [`Schedule::unblock_carrier`]
    /// on the same carrier; `pinned_park` for a pinned park (the monitor
    /// reports it as such, not as a stall). False when not called on a
    /// carrier, or when a section is already open (then there is nothing
    /// to close). Neither allocates nor starts a thread: it may run inside
    /// a C allocator's lock hook.
    fn block_carrier(&self, pinned_park: bool) -> bool;
    /// Closes the section a `true` [`Schedule::block_carrier`] opened.
    fn unblock_carrier(&self);
    /// The calling virtual thread's body ended in a panic with `payload`
    /// (`life.rs`): a simulation running on the calling carrier records
    /// it (`crate::sim`), to fail the run if nobody sees it.
    fn panicked(&self, thread: &VThread, payload: &(dyn std::any::Any + Send));

    /// A panic of one of this runtime's threads is being dropped unjoined
    /// (its handle was dropped), on the calling OS thread: a simulation
    /// running on it fails (`crate::sim`), as a panic nobody saw goes
    /// unseen otherwise.
    fn unjoined_panic(&self, payload: &(dyn std::any::Any + Send));

    /// The scheduler's state (`sched::Shared`) as `Any`: how the scheduler
    /// finds its own type behind a record (`sched`'s
    /// `VThread::runtime_shared`).
    fn as_any(&self) -> &dyn std::any::Any;

    /// The object itself as `Any`: how the runtime finds its own handle
    /// behind a record (`runtime::current`).
    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync>;
}
