//! Weft: virtual threads for Rust.
//!
//! Plain blocking code — `sleep`, `lock`, `recv`, `park` — runs on
//! lightweight *virtual threads* that a few OS *carrier* threads multiplex,
//! in the spirit of Java's Project Loom. A blocked virtual thread costs a
//! few kilobytes, not an OS thread.
//!
//! ```
//! use std::time::{Duration, Instant};
//!
//! let start = Instant::now();
//! let handles: Vec<_> = (0..10_000)
//!     .map(|i| weft::spawn(move || {
//!         weft::sleep(Duration::from_millis(100)).unwrap();
//!         i
//!     }))
//!     .collect();
//! let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
//! assert_eq!(sum, (0..10_000).sum());
//! // 10,000 concurrent sleeps of 100 ms take about 100 ms, not 1,000 s.
//! assert!(start.elapsed() < Duration::from_secs(30));
//! ```
//!
//! # Both kinds of thread
//!
//! Every weft API works on a virtual thread *and* on a plain OS thread. On a
//! virtual thread a blocking call parks the thread and frees its carrier; on
//! an OS thread it blocks that thread like its `std` counterpart. That is
//! what lets one handler run on a fixed OS thread pool or on virtual threads
//! with one setting ([`Executor::fixed`] vs [`Executor::virtual_per_task`]).
//!
//! # Thread-locals: read this
//!
//! A virtual thread may resume on a *different carrier* after any blocking
//! weft call (migration is what keeps the runtime alive when a carrier
//! blocks). Therefore:
//!
//! - `std::thread_local!` values belong to the carrier, not to your virtual
//!   thread. **Never keep a value or reference obtained from a
//!   `thread_local!` across a blocking weft call** (`sleep`, `park`, a lock,
//!   a channel, socket I/O): after the call you may be on another OS thread,
//!   and LLVM may even reuse a TLS address computed before the call
//!   (llvm/llvm-project#98479). Use [`local!`] for per-virtual-thread state.
//! - A `std::sync::Mutex` (or any OS-level lock) held across a blocking weft
//!   call blocks the whole carrier and, if the call migrates, is unlocked
//!   from another OS thread. Use [`sync::Mutex`].
//!
//! Weft's own per-thread state is read through `#[inline(never)]`
//! accessors, so the runtime itself never caches a TLS address across a
//! switch.
//!
//! # Configuration
//!
//! The default runtime starts on first use with one carrier per CPU.
//! `WEFT_PARALLELISM`, `WEFT_MAX_POOL_SIZE` and `WEFT_STACK_SIZE` (bytes,
//! or with a `k`/`m`/`g` suffix) override it; a bad value is an error that
//! names the variable. [`Runtime::builder`] builds private runtimes.
//!
//! # Stacks
//!
//! Each virtual thread reserves `WEFT_STACK_SIZE` (1 MiB by default) of
//! address space, committed page by page as it is used: a sleeping thread
//! costs about one page of stack. Guard pages are installed with
//! `MADV_GUARD_INSTALL` (Linux ≥ 6.13), so a million threads fit under the
//! default `vm.max_map_count`; older kernels fall back to `mprotect` (two
//! mappings per thread, roughly 32k threads by default). A stack overflow
//! prints `virtual thread '<name>' (#id) has overflowed its stack` and
//! aborts, like std.

#![warn(missing_docs)]

mod blocking;
pub mod channel;
mod dump;
pub mod events;
mod executor;
pub mod fs;
mod future;
#[cfg(any(feature = "futures-io", feature = "tokio"))]
mod io_compat;
pub mod local;
pub mod metrics;
pub mod net;
mod overflow;
#[doc(hidden)]
pub mod park;
mod poll;
mod runtime;
mod sched;
mod scope;
mod stack;
pub mod sync;
mod thread;
mod timer;

pub use blocking::{DEFAULT_STALL_THRESHOLD, blocking, is_pinned, pinned};
pub use dump::{Container, Dump, Frame, ThreadInfo, dump};
pub use executor::Executor;
pub use future::block_on;
pub use local::LocalKey;
pub use runtime::{
    DEFAULT_MAX_POOL_SIZE, DEFAULT_STACK_SIZE, Runtime, RuntimeBuilder, default_runtime,
};
pub use scope::{Scope, ScopedJoinHandle, scope};
pub use stack::guard_pages_in_place;
pub use thread::{
    Blocker, Builder, JoinHandle, State, Thread, ThreadId, current, interrupted, is_virtual, park,
    park_timeout, sleep, sleep_until, spawn, yield_now,
};
