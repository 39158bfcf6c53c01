//! Threads: the virtual-thread record and its handle, identity and state,
//! joining, the registry of live threads, and the blocking primitives
//! (`park`, `sleep`, `yield_now`) that every other weft API is built on.
//! Spawning, which needs a runtime, is one layer up (`builder.rs`); what a
//! spawned thread runs first and last is here (`life.rs`).
//!
//! Every function here works on both kinds of thread. On a virtual thread it
//! suspends the thread and frees its carrier; on an OS thread it behaves like
//! its `std::thread` counterpart and really blocks.
//!
//! # Files, bottom-up
//!
//! Each file names only files listed before it (and `record.rs`,
//! `schedule.rs` and `record_ref.rs` name each other: the record holds
//! its scheduler and its joiner's reference, and the scheduler's calls
//! take the reference), so the files read in this order.
//!
//! - `id.rs`: [`ThreadId`]. `state.rs`: [`State`], the life cycle.
//!   `blocker.rs`: [`Blocker`], what a thread waits for, in a seqlock
//!   (`BlockerCell`). `locals.rs`: the storage behind `weft::local!`. None
//!   of them names the record.
//! - `slab.rs`: fixed-size memory for records (huge-page-backed regions,
//!   per-OS-thread caches); it names nothing here.
//! - `record.rs`: [`VThread`], the record of one virtual (or OS) thread,
//!   made of the above, and its coroutine slot; `schedule.rs`:
//!   [`Schedule`], what a record asks of the scheduler that carries it
//!   (implemented by `sched`), and [`Suspend`]. `record_ref.rs`:
//!   [`RecordArc`] and [`RecordWeak`], the shared ownership of a record
//!   (`Arc`'s protocol, `crate::refcount`) over slab memory.
//! - `handle.rs`: [`Thread`], the handle (`unpark`, `interrupt`).
//! - `current.rs`: the calling thread, its interrupt flag, its blocker
//!   (`with_blocker`) and its locals (`current_locals`).
//! - `registry.rs`: every live virtual thread, and dump containers.
//!   `capture.rs`: a thread dump's request that a parked thread record its
//!   own stack.
//! - `activity.rs`: what a thread says it is doing, for dumps.
//! - `native.rs`: C locks (`pthread_mutex_lock`, …) counted in
//!   `pin_depth`: a thread that holds one keeps its carrier.
//! - `stay.rs`: threads that never change OS thread
//!   ([`stay_on_carrier`], and what marks a thread so); `os_state.rs`:
//!   the libc calls that change kernel per-OS-thread state, which mark it.
//! - `pinned.rs`: the park that holds the carrier (`weft::pinned`).
//! - `park.rs`: `park`, `sleep`, `yield_now`, the switch to the carrier.
//! - `join.rs`: the join slot (a thread's result, in its record) and
//!   [`JoinHandle`]. `join_async.rs`: the handle awaited
//!   ([`JoinFuture`]).
//! - `life.rs`: a virtual thread's start and end, in order: what runs
//!   first on its stack, what runs last (`local!` values, thread-local
//!   and key destructors, the join wake-up), and what its carrier does
//!   after (the area released).
//!
//! Nothing here names the scheduler: the record holds an
//! `Arc<dyn Schedule>`, the carrier says which record it runs through
//! `set_mounted`, and the scheduler (one layer up) names this module.

mod activity;
mod blocker;
pub(crate) mod capture;
mod current;
mod handle;
mod id;
mod join;
mod join_async;
mod life;
mod locals;
mod native;
#[cfg_attr(not(feature = "transparent"), allow(unused_imports))]
pub(crate) use native::C_LOCK;
mod os_state;
mod park;
mod pinned;
mod record;
mod record_ref;
pub(crate) mod registry;
mod schedule;
mod slab;
mod state;
mod stay;

pub use activity::{MAX_ACTIVITY_LEN, set_activity};
pub(crate) use activity::{activity_of, try_activity_of};
pub use blocker::{Blocker, SyncKind};
use current::with_os_thread;
pub use current::{current, interrupted, is_virtual};
pub(crate) use current::{
    current_id, current_interrupted, current_locals, current_virtual, interrupted_error,
    mounted_cell, new_os_task, run_as_os_task, set_mounted, take_interrupt, with_blocker,
};
pub use handle::Thread;
pub use id::ThreadId;
pub use join::JoinHandle;
pub(crate) use join::{complete, complete_unrun, panic_message};
pub use join_async::JoinFuture;
pub(crate) use life::install;
pub(crate) use park::{borrow_parked, park_deadline};
pub use park::{panicking, park, park_timeout, sleep, sleep_until, yield_now};
pub(crate) use pinned::{hold_carrier, pinned_park};
pub(crate) use record::{
    CoroSlot, Kind, NO_HOME, VThread, abort_after_drop_panic, blocker_of, set_state_of, state_of,
};
pub(crate) use record_ref::{RecordArc, RecordWeak, seed_cache, trim_records};
pub(crate) use schedule::{Schedule, Suspend};
pub use state::State;
pub(crate) use stay::may_move;
pub use stay::stay_on_carrier;
