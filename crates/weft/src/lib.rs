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
//! # Affinity: a started virtual thread stays on its carrier
//!
//! A virtual thread that has started running resumes only on the OS thread
//! (carrier) where it started, for its whole life: after `sleep`, `park`,
//! `yield_now`, every lock, channel, join, socket wait and `block_on`.
//! Threads that have not started yet go to whichever carrier is free (that
//! is where load is balanced: spawn bursts, accept loops). So everything
//! Rust ties to an OS thread stays correct on a virtual thread:
//! `std::thread_local!` values, `rand::thread_rng()`, a `RefCell` borrowed
//! from a thread-local across a blocking call, `Rc`s taken from one. The
//! thread-locals are *shared by the virtual threads of one carrier*, as
//! they would be by the tasks of one OS thread in a thread pool; use
//! [`local!`] for state that belongs to one virtual thread.
//!
//! The rule affinity brings: **do not hold an OS-level lock
//! (`std::sync::Mutex`, `parking_lot`) across a weft blocking call.** The
//! holder parks; another virtual thread of the same carrier that blocks on
//! that lock blocks the carrier, and the holder can only resume there: a
//! deadlock (the "pinning" deadlock of Java's `synchronized`). The monitor
//! detects a carrier blocked in the kernel while threads bound to it wait
//! and records a [`BlockedWithWaiters`](events::EventKind::BlockedWithWaiters)
//! event naming the carrier, the blocking call and the waiting threads
//! (`WEFT_TRACE_PINNED=short` prints it). Use [`sync::Mutex`], which parks
//! only the virtual thread.
//!
//! Work that blocks the OS thread — file I/O, DNS, FFI — goes through
//! [`blocking`]: it runs on an offload thread while the caller parks, so the
//! carrier's other threads keep running.
//!
//! Migration of started threads is available as an `unsafe` opt-in,
//! [`RuntimeBuilder::allow_migration`], whose caller promises that nothing
//! tied to an OS thread lives across a blocking call.
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
//!
//! # Transparent blocking (feature `transparent`)
//!
//! With the Cargo feature `transparent`, Weft interposes libc's blocking
//! calls (`read`, `recv`, `connect`, `accept`, `poll`, `nanosleep`, …) in
//! the final binary: unmodified `std::net`, `std::thread::sleep` and crates
//! or C libraries built on them park the virtual thread instead of its
//! carrier, and behave exactly as before on OS threads. `WEFT_TRANSPARENT=0`
//! turns it off at run time. Enable it only in the binary's own crate
//! (Cargo unifies features across a build). Linux with glibc (x86_64,
//! aarch64) only; files, pipes and ttys, and `std::sync`/`parking_lot`
//! waits still hold the carrier. The module `transparent` (present with the
//! feature) lists the calls, the semantics kept, and the limits.

#![warn(missing_docs)]

mod blocking;
pub mod channel;
pub mod context;
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
mod offload;
mod overflow;
#[doc(hidden)]
pub mod park;
mod poll;
mod runtime;
mod sample;
mod sched;
mod scope;
mod stack;
#[doc(hidden)]
pub mod stall;
mod symbols;
pub mod sync;
mod thread;
mod timer;
#[cfg(all(
    feature = "transparent",
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub mod transparent;

pub use blocking::{DEFAULT_STALL_THRESHOLD, blocking, is_pinned, pinned};
pub use dump::{Container, Dump, ThreadInfo, dump};
pub use executor::Executor;
pub use future::block_on;
pub use local::LocalKey;
pub use runtime::{
    DEFAULT_MAX_POOL_SIZE, DEFAULT_STACK_SIZE, Runtime, RuntimeBuilder, default_runtime,
};
pub use scope::{Scope, ScopedJoinHandle, scope};
pub use stack::guard_pages_in_place;
pub use symbols::Frame;
pub use thread::{
    Blocker, Builder, JoinHandle, State, Thread, ThreadId, current, interrupted, is_virtual,
    panicking, park, park_timeout, sleep, sleep_until, spawn, yield_now,
};
