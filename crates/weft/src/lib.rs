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
//! assert_eq!(sum, (0..10_000).sum::<u64>());
//! // 10,000 concurrent sleeps of 100 ms take about 100 ms, not 1,000 s.
//! assert!(start.elapsed() < Duration::from_secs(30));
//! ```
//!
//! # Coming from Java
//!
//! | Java | Weft |
//! |---|---|
//! | `Thread.ofVirtual().name("w").start(r)` | `weft::Builder::new().name("w").spawn(f)?` (also `.stack_size(n)`, `.spawn_on(&rt, f)`) |
//! | `Thread.startVirtualThread(r)` | `weft::spawn(f)` → `JoinHandle<T>` |
//! | `t.join()` | `handle.join()` → `std::thread::Result<T>`; `handle.is_finished()`, `handle.thread()` |
//! | `Thread.currentThread()`, `t.isVirtual()` | `weft::current()`, `.is_virtual()` (works on OS threads too) |
//! | `t.getName()`, `t.threadId()` | `t.name()`, `t.id()` |
//! | `LockSupport.park()`, `parkNanos(n)`, `unpark(t)` | `weft::park()`, `weft::park_timeout(d)`, `t.unpark()` |
//! | `Thread.sleep(ms)` | `weft::sleep(d)?` (also `weft::sleep_until(instant)?`) |
//! | `Thread.yield()` | `weft::yield_now()` |
//! | `t.interrupt()`, `t.isInterrupted()`, `Thread.interrupted()` | `t.interrupt()`, `t.is_interrupted()`, `weft::interrupted()`; blocking calls return `ErrorKind::Interrupted` |
//! | `Thread.State` (NEW … TERMINATED), `t.getState()` | `weft::State`, `t.state()` |
//! | scheduler parallelism / `maxPoolSize` system properties | `weft::Runtime::builder().parallelism(n).max_pool_size(m).stack_size(s).build()?`, `rt.spawn(f)` |
//! | `ReentrantLock`, `ReentrantReadWriteLock`, `Condition`, `Semaphore`, `CountDownLatch`, `CyclicBarrier` | `weft::sync::{Mutex, RwLock, Condvar, Semaphore, CountDownLatch, Barrier}` — they park the virtual thread, never the carrier |
//! | `ArrayBlockingQueue` / `LinkedBlockingQueue` | `weft::channel::bounded(n)` / `weft::channel::unbounded()` → `(Sender, Receiver)` |
//! | `Executors.newVirtualThreadPerTaskExecutor()` / `newFixedThreadPool(n)` | `weft::Executor::virtual_per_task()` / `weft::Executor::fixed(n)`; `exec.submit(f)`, `exec.close()` |
//! | `StructuredTaskScope` | `weft::scope(\|s\| { s.spawn(…); … })` — threads may borrow, all joined at the end |
//! | `ThreadLocal` on virtual threads | `std::thread_local!` — per virtual thread, as in Java (see "Thread-locals") |
//! | `ScopedValue` | `weft::local! { static X: T = …; }`, `X.with(\|x\| …)` |
//! | blocking `java.net` sockets | `weft::net::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream, lookup_host}` mirroring `std::net`, with timeouts; features `futures-io` / `tokio` add the async I/O traits |
//! | file I/O | `weft::fs` (mirrors `std::fs`, through the blocking offload) |
//! | managed blocker / pinning | `weft::blocking(\|\| …)`, `weft::pinned(\|\| …)`, `weft::events::{recent, counters}` |
//! | `CompletableFuture.join()` | `weft::block_on(future)` (parks the virtual thread; no nested-runtime panic; with feature `tokio`, inside a Tokio runtime's context: see [`async_interop`]) |
//! | a virtual thread's result from async code | `handle.await` ([`JoinHandle`] is `IntoFuture`), `receiver.recv_async().await` |
//! | `jcmd <pid> Thread.dump_to_file -format=json` | `weft::dump()` (`Display` = jstack-like text, `.to_json()` = JDK-shaped JSON), `kill -QUIT <pid>` |
//! | JMX / Micrometer gauges | `weft::metrics::snapshot()`, `weft::metrics::prometheus()` |
//!
//! # Both kinds of thread
//!
//! Every weft API works on a virtual thread *and* on a plain OS thread. On a
//! virtual thread a blocking call parks the thread and frees its carrier; on
//! an OS thread it blocks that thread like its `std` counterpart. That is
//! what lets one handler run on a fixed OS thread pool or on virtual threads
//! with one setting ([`Executor::fixed`] vs [`Executor::virtual_per_task`]).
//!
//! # Affinity and handoff: a started virtual thread stays home until home is held
//!
//! A virtual thread that has started running resumes on the carrier (OS
//! thread) where it started — after `sleep`, `park`, `yield_now`, every
//! lock, channel, join, socket wait and `block_on` — so it finds its data
//! in that carrier's caches. Threads that have not started yet go to
//! whichever carrier is free (that is where load is balanced: spawn bursts,
//! accept loops).
//!
//! A carrier *held* by one thread past `WEFT_STALL_THRESHOLD` (20 ms) — a
//! CPU-bound computation, a call blocked in the kernel, a pinned wait —
//! hands its other threads off: the monitor sees the hold, and from then
//! on those threads run on other carriers (a spare comes in if every
//! carrier is held), and new connections are still accepted. So one slow
//! request does not stop a server. A thread that moved keeps everything a
//! program can see of it: its thread-locals and their addresses,
//! `std::thread::current()`, `pthread_self()`, C thread-locals, errno; only
//! `gettid()` names the new OS thread. [`Runtime::threads_moved`] and the
//! `weft_threads_moved_total` metric count moves.
//!
//! A hold that is a computation beside threads that run briefly (a
//! server's requests) also gets its carrier's OS thread lowered in
//! priority (nice 5, `WEFT_HELD_CARRIER_NICE`), so that the kernel shares
//! the machine as it would between one `std` thread and many; that OS
//! thread leaves the runtime when the computation suspends, and a fresh one
//! takes its place ([`RuntimeBuilder::held_carrier_nice`]).
//!
//! Some threads **stay** on their carrier for good, and wait for it when it
//! is held: a thread that changed state the kernel keeps per OS thread
//! through libc — `pthread_sigmask`, `sigprocmask`, `sched_setaffinity`,
//! `pthread_setaffinity_np`, `pthread_setname_np`, `prctl`, `setns`,
//! `unshare`, `capset`, `sched_setscheduler`, `sched_setparam`,
//! `pthread_setschedparam`, `setpriority`, `sigaltstack` (Weft sees these
//! calls and marks the thread) — or that called [`stay_on_carrier`] (Go's
//! `runtime.LockOSThread`; use it before a raw `syscall` that sets such
//! state); threads on a runtime with [`RuntimeBuilder::carrier_thread_locals`]
//! (their thread-locals are the carrier's); and a thread that suspended
//! while unwinding a panic.
//!
//! # Thread-locals: each virtual thread has its own
//!
//! As in Java, where every virtual thread has its own `ThreadLocal`s and
//! its own `Thread`, each Weft virtual thread has its own
//! `std::thread_local!` values — fresh (their initialiser runs on first
//! use on that thread), at an address of their own for the thread's whole
//! life (so a `&` to one may be lent, say to a scoped OS thread, across a
//! park), and destroyed when the thread ends, before `join` returns. With
//! them, per virtual thread: `std::thread::current()` (a distinct
//! `ThreadId`; `std::thread::park`/`unpark` act on that thread), the panic
//! count (`std::thread::panicking`), `rand::thread_rng()`, `tracing`'s
//! current span, and the state libraries keep per thread: Tokio's "inside a
//! runtime" context, so the sync `postgres` client (a Tokio runtime inside)
//! runs on many virtual threads of one carrier without "Cannot start a
//! runtime from within a runtime". This needs no feature; it holds on
//! x86_64 Linux with glibc (the platforms Weft runs on otherwise share the
//! carrier's thread-locals between its virtual threads, as before).
//!
//! It costs one page of memory per virtual thread (the thread-local area:
//! glibc's thread control block, the program's thread-locals and libc's,
//! carved from the top of the thread's stack) and a few nanoseconds per
//! switch. [`RuntimeBuilder::carrier_thread_locals`] or
//! `WEFT_THREAD_LOCALS=carrier` goes back to sharing the carrier's
//! thread-locals, for programs that hold a million parked threads and use
//! no thread-local of their own. [`local!`] is the per-virtual-thread
//! storage that works the same everywhere (and on the fixed executor's
//! tasks).
//!
//! The same holds for C and C++ code: a C library's `__thread` variables
//! and a C++ `thread_local` (with its destructor, run when the virtual
//! thread ends) are per virtual thread, whether the library was linked at
//! start-up or loaded with `dlopen`; `errno` is saved with the thread at
//! every switch; `sched_getcpu`, `pthread_getattr_np(pthread_self())` and
//! `setuid` answer as on an OS thread. libc's own per-thread state
//! (malloc's caches, locale, `dlerror`) stays one per carrier, as libc
//! needs (ARCHITECTURE.md, "Thread-local areas", has the table).
//!
//! **C locks pin.** A virtual thread that holds a C lock — a
//! `pthread_mutex_t`, `pthread_rwlock_t`, `pthread_spinlock_t` or a
//! `FILE` lock (`flockfile`) — keeps its carrier until it releases it, as
//! Java pins a virtual thread with a native frame: its waits meanwhile hold
//! the carrier instead of unmounting, and each is recorded as a
//! [`Pinned`](events::EventKind::Pinned) event whose detail names the C
//! lock. So a C library's lock never has two owners, and a second virtual
//! thread of the carrier never blocks behind a parked owner. A virtual
//! thread that has to wait for a C lock someone else holds, or whose wait
//! goes to the kernel while pinned, makes its carrier hand its other
//! threads off when the wait begins, not at the stall threshold
//! (ARCHITECTURE.md, "Affinity and handoff").
//!
//! Holding an OS-level lock (`std::sync::Mutex`, `parking_lot`) across a
//! weft blocking call no longer deadlocks: the holder parks, and if
//! another virtual thread of the same carrier blocks on that lock in the
//! kernel, the carrier is held, and the holder, once woken, resumes on
//! another carrier and releases the lock (the handoff). It costs the stall
//! threshold each time, so prefer [`sync::Mutex`], which parks only the
//! virtual thread — or turn on the `transparent` feature: then a wait in
//! `std::sync` (`Mutex`, `RwLock`, `Condvar`, `Once`),
//! `std::thread::park`, std `mpsc`, `crossbeam-channel` or `parking_lot`
//! parks the virtual thread too (each has its own std parker: see
//! "Thread-locals"), as JDK 24 lifted pinning for `synchronized`. For a
//! holder that *stays* (above) it is still a deadlock (the "pinning"
//! deadlock of Java's `synchronized`): the monitor detects a carrier
//! blocked in the kernel while threads that stay there wait, and records a
//! [`BlockedWithWaiters`](events::EventKind::BlockedWithWaiters) event
//! naming the carrier, the blocking call and the waiting threads
//! (`WEFT_TRACE_PINNED=short` prints it).
//!
//! Work that blocks the OS thread — file I/O, DNS, FFI — goes through
//! [`blocking`]: it runs on an offload thread while the caller parks, so the
//! carrier's other threads keep running.
//!
//! Migration of started threads at any suspension (not only off a held
//! carrier) is available as an `unsafe` opt-in,
//! [`RuntimeBuilder::allow_migration`], without thread-local areas; its
//! caller promises that nothing tied to an OS thread lives across a
//! blocking call.
//!
//! # Configuration
//!
//! The default runtime starts on first use with one carrier per CPU.
//! `WEFT_PARALLELISM`, `WEFT_MAX_POOL_SIZE` and `WEFT_STACK_SIZE` (bytes,
//! or with a `k`/`m`/`g` suffix) override it; a bad value is an error that
//! names the variable. [`Runtime::builder`] builds private runtimes; a
//! virtual thread's [`spawn`] (and [`scope`]'s) starts the new thread on
//! its own runtime, an OS thread's on the default one.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `WEFT_PARALLELISM` | carrier threads running virtual threads at once | number of CPUs, lowered to a cgroup CPU limit rounded up (1.5 CPUs: 2) |
//! | `WEFT_MAX_POOL_SIZE` | upper bound on carriers, counting spares that replace blocked ones | 256 |
//! | `WEFT_STACK_SIZE` | reserved stack per virtual thread, bytes or with a `k`/`m`/`g` suffix (rounded up to a power of two or one and a half times one: 96k stays 96 KiB) | 128 KiB |
//! | `WEFT_THREAD_LOCALS` | `carrier`: virtual threads share their carrier's thread-locals (see "Thread-locals") | each has its own |
//! | `WEFT_STALL_THRESHOLD` | how long one virtual thread may hold a carrier before the monitor reports a stall (`20ms`, `500us`, `1s`) | 20 ms |
//! | `WEFT_HELD_CARRIER_NICE` | nice value (0–19) a carrier's OS thread is lowered to while one thread computes on it beside short ones; `0` never lowers ([`RuntimeBuilder::held_carrier_nice`]) | 5 |
//! | `WEFT_REST_CARRIERS` | `0`: core carriers that only take turns with each other on shared cores never rest ([`RuntimeBuilder::rest_carriers`]) | `1` |
//! | `WEFT_COVER_CARRIERS` | `0`: core carriers never take threads queued for one that waits for a CPU on cores busy with other processes ([`RuntimeBuilder::cover_carriers`]) | `1` |
//! | `WEFT_MAX_BLOCKING_THREADS` | OS threads that run [`blocking`] closures | 512 |
//! | `WEFT_TOKIO_THREADS` | worker threads of the Tokio runtime Weft starts for [`block_on`] (feature `tokio`, see [`async_interop`]); a bad value is reported on stderr and the default kept | 2 |
//! | `WEFT_NETPOLL` | who fetches socket readiness: `carriers` (carriers poll; the `weft-poller` thread only while no runtime runs) or `thread` (the poller thread always) | `carriers` |
//! | `WEFT_TRACE_PINNED` | `short` or `full`: print pinned and stall events with stacks to stderr | off |
//! | `WEFT_DUMP_ON_SIGQUIT` | `0` disables the thread dump on `SIGQUIT` | on |
//! | `WEFT_DUMP_PATH` | write the `SIGQUIT` dump as JSON to this file instead of stderr | — |
//! | `WEFT_SAMPLE_STACKS` | `0` turns off sampling the stacks of running threads by signal | on |
//! | `WEFT_PANIC_HOOK` | `0` leaves the panic hook alone (no thread names in panic messages) | on |
//! | `WEFT_REPORT_QUEUE` | stall reports waiting to be written up (resolved and logged) before new ones are dropped and counted (`weft_event_reports_dropped_total`): a log sink that blocks holds them up; a bad value is reported on stderr and the default kept | 4,096 |
//! | `WEFT_RECORD_KEEP` | freed thread records (192 bytes each) kept for reuse before the monitor gives the memory of the rest back to the kernel; a bad value is reported on stderr and the default kept | 65,536 |
//!
//! # Stacks
//!
//! Each virtual thread reserves `WEFT_STACK_SIZE` (128 KiB by default, as
//! musl gives its threads) of address space, committed page by page as it
//! is used: a sleeping thread costs one page, which it shares with its
//! thread-local area, plus its share of a page-table page (one per 2 MiB
//! of reserved slots: 0.25 KiB per thread at 128 KiB, 2 KiB at 1 MiB).
//! Code that recurses deeply (more than about a hundred KiB of frames;
//! debug builds use several times the stack of release ones) asks for more with [`Builder::stack_size`] or `WEFT_STACK_SIZE`
//! (std's threads default to 2 MiB, Java's to 1 MiB). Guard pages are
//! installed with `MADV_GUARD_INSTALL` (Linux ≥ 6.13), so a million threads fit under the
//! default `vm.max_map_count`; older kernels fall back to `mprotect` (two
//! mappings per thread, roughly 32k threads by default). A stack overflow
//! prints `virtual thread '<name>' (#id) has overflowed its stack` with
//! the two ways to a bigger one, and aborts, like std. A parked thread
//! costs 4.6 KiB in all (its top page, shared with its thread-locals,
//! page tables, record) while its stack stays within the top page's
//! 1.2 KiB left below the thread-locals, one page more per 4 KiB deeper
//! (`stack.rs` in the source has the accounting); `WEFT_STACK_SIZE=96k`
//! trims its page tables to 4.5 KiB in all.
//!
//! # `fork`
//!
//! A `fork` child has one thread, and the runtimes it inherits have no
//! carriers: spawning on one fails with an error that says so
//! ([`Builder::spawn_on`] returns it; [`Runtime::spawn`] and [`spawn`]
//! panic with it). The default runtime (what [`spawn`] uses from an OS
//! thread), sockets' readiness source, the offload threads of
//! [`blocking`] and the writer of stall reports are started afresh in the
//! child at first use. Objects made before the fork — a socket, a
//! [`JoinHandle`], an executor — belong to the parent: make new ones in
//! the child. A child forked on a virtual thread should only `exec` or
//! `_exit`, as POSIX asks of the child of any threaded process.
//!
//! # Finding the culprit
//!
//! - **Thread dumps.** [`dump()`] lists every virtual thread with its
//!   state, what it waits on, what it said it is doing ([`set_activity`];
//!   `weft-http` sets the request line) and its stack, innermost first,
//!   with the first frame outside Weft and std marked. A parked thread's
//!   stack is recorded at its park point; a thread *running* on its carrier
//!   (or blocked in the kernel there) is sampled by a signal to that
//!   carrier (`SIGURG`; `WEFT_SAMPLE_STACKS=0` turns sampling off).
//!   `SIGQUIT` (`kill -3`) writes a text dump to stderr, or the JSON to
//!   `WEFT_DUMP_PATH`, as `jstack` would (`WEFT_DUMP_ON_SIGQUIT=0` turns
//!   it off).
//! - **Stall events.** A virtual thread that holds its carrier past
//!   `WEFT_STALL_THRESHOLD` (20 ms by default) is recorded in [`events`]
//!   with the sampled stack and the call site — the first frame outside
//!   Weft and std, with file and line when the binary has line tables
//!   (`debug = "line-tables-only"` in the release profile).
//!   `WEFT_TRACE_PINNED=short|full` prints them; through `tracing`
//!   they are warnings limited per kind and call site, with a count of
//!   those held back. They are written up — symbols, logging — by one OS
//!   thread of the process, `weft-reports`, not by the monitor that sees
//!   the stall: a slow or blocked log sink delays events, not the
//!   handoffs and spare carriers a stall calls for (and an event appears
//!   in [`events::recent`] a moment after the monitor saw the stall: the
//!   first one of a process after its debug info is read).
//! - **Panics** on a virtual thread name it: `virtual thread 'http
//!   127.0.0.1:5123' (#812) panicked at src/handlers.rs:42:9:`. Weft wraps
//!   Rust's default panic hook when the first runtime starts; a hook the
//!   program installed before is kept as it is, and `WEFT_PANIC_HOOK=0`
//!   leaves the hook alone.
//! - **Context that follows the thread.** [`context`] runs hooks when a
//!   virtual thread unmounts and mounts again, so per-thread context such
//!   as a `tracing` span stays with its virtual thread.
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
//! aarch64) only. `std::sync`, `parking_lot` and `std::thread::park` waits
//! park the virtual thread too (through the `futex` system call), except
//! on a runtime built with `carrier_thread_locals`; regular files, ttys,
//! stdio and C code's `pthread_*` waits still hold the carrier. The module
//! `transparent` (present with the feature) lists the calls, the semantics
//! kept, and the limits; `ureq`, `tungstenite`, `rustls` streams and the
//! `redis` crate run on it unchanged (tested).
//!
//! **Without it**, a blocking call that is not Weft's holds the carrier
//! for its whole length. After `WEFT_STALL_THRESHOLD` the monitor reports
//! the stall, with the blocking thread's stack, and hands the carrier's
//! other threads off (see "Affinity and handoff"), so they wait that long,
//! not longer — threads that stay wait for the call. The cure is this
//! feature, or Weft's own I/O ([`net`], [`sleep`], [`sync`]).

#![warn(missing_docs)]

pub mod async_interop;
mod blocking;
mod builder;
pub mod channel;
pub mod clock;
pub mod context;
// Public only to the loom model checks (`tests/loom_doorbell.rs`, built with
// `--cfg loom`); private otherwise.
mod cpu_limit;
#[cfg(loom)]
#[doc(hidden)]
pub mod doorbell;
#[cfg(not(loom))]
mod doorbell;
mod dump;
mod errno;
pub mod events;
mod executor;
mod fork;
pub mod fs;
mod futex;
mod future;
#[cfg(any(feature = "futures-io", feature = "tokio"))]
mod io_compat;
mod knob;
mod libc_next;
pub mod local;
pub mod metrics;
pub mod net;
mod netpoll;
mod offload;
mod overflow;
mod panic;
// Public only to the loom model checks (`tests/loom_park.rs`, built with
// `--cfg loom`); private otherwise.
#[cfg(loom)]
#[doc(hidden)]
pub mod park;
#[cfg(not(loom))]
mod park;
mod poll;
// Public only to the loom model checks (`tests/loom_refcount.rs`, built
// with `--cfg loom`); private otherwise.
#[cfg(loom)]
#[doc(hidden)]
pub mod refcount;
#[cfg(not(loom))]
mod refcount;
mod runtime;
mod sample;
mod sched;
mod scope;
mod sigchain;
pub mod sim;
mod stack;
// Public only to the loom model checks (`tests/loom_stall.rs`, built with
// `--cfg loom`); private otherwise.
#[cfg(loom)]
#[doc(hidden)]
pub mod stall;
#[cfg(not(loom))]
mod stall;
mod switching;
mod symbols;
pub mod sync;
mod thread;
mod tls;
#[cfg(feature = "tokio")]
mod tokio_context;
#[cfg(all(
    feature = "transparent",
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub mod transparent;
mod unpoison;

pub use blocking::{DEFAULT_STALL_THRESHOLD, blocking, is_pinned, pinned};
pub use builder::{Builder, spawn};
pub use dump::{
    CarrierInfo, CarrierState, Container, Dump, StackGroup, StateCounts, ThreadGroups, ThreadInfo,
    carriers, dump, state_counts,
};
pub use executor::Executor;
pub use future::block_on;
pub use local::LocalKey;
pub use runtime::{
    DEFAULT_HELD_CARRIER_NICE, DEFAULT_MAX_POOL_SIZE, DEFAULT_STACK_SIZE, Runtime, RuntimeBuilder,
    default_runtime,
};
pub use scope::{Scope, ScopedJoinHandle, scope};
pub use stack::guard_pages_in_place;
pub use symbols::Frame;
pub use thread::{
    Blocker, JoinFuture, JoinHandle, MAX_ACTIVITY_LEN, State, SyncKind, Thread, ThreadId, current,
    interrupted, is_virtual, panicking, park, park_timeout, set_activity, sleep, sleep_until,
    stay_on_carrier, yield_now,
};
#[cfg(feature = "tokio")]
pub use tokio_context::DEFAULT_TOKIO_THREADS;
