//! Runtimes: a set of carrier threads with their scheduler, and the lazily
//! started default runtime behind [`crate::spawn`].

use crate::thread::RecordArc;
use std::fmt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::sched::{SchedConfig, Shared, Spawner};
use crate::stack::Stack;
use crate::thread::JoinHandle;
use crate::thread::{Schedule, VThread};

/// Default reserved stack per virtual thread: 128 KiB (musl's default for
/// its threads).
///
/// Chosen by measurement (the crate docs, "Stacks", and `stack.rs`): a
/// parked thread costs one page of stack either way, but page tables cost
/// one 4 KiB page per 2 MiB of reserved slots that hold a live thread, so
/// 1 MiB slots added 2 KiB per parked thread and made a million spawns
/// twice as slow (zeroing the page-table pages); 128 KiB costs a quarter
/// KiB, 256 KiB half a KiB. Deep recursion needs
/// [`Builder::stack_size`](crate::Builder::stack_size),
/// [`RuntimeBuilder::stack_size`] or `WEFT_STACK_SIZE`; an overflow is
/// detected exactly and aborts with a message naming the thread.
pub const DEFAULT_STACK_SIZE: usize = 128 << 10;
/// Default bound on carriers, counting spares that compensate for blocked
/// ones (the JDK's `jdk.virtualThreadScheduler.maxPoolSize` default).
pub const DEFAULT_MAX_POOL_SIZE: usize = 256;

/// A handle to a weft runtime. Cheap to clone; the carriers stop when the
/// last handle is dropped and no virtual thread is left to run (each virtual
/// thread holds a handle while it lives).
#[derive(Clone)]
pub struct Runtime {
    handle: Arc<Handle>,
}

struct Handle {
    shared: Arc<Shared>,
    config: Config,
}

/// What a virtual thread's record asks of its runtime, handed to the
/// scheduler: the record holds the handle (`Kind::Virtual::sched`), which
/// also keeps the runtime running while the thread lives.
impl Schedule for Handle {
    fn schedule(&self, thread: RecordArc) {
        self.shared.schedule(thread)
    }

    fn finished(&self) {
        self.shared.thread_finished()
    }

    fn suspend_unwinding(&self, thread: &VThread) -> bool {
        Schedule::suspend_unwinding(&*self.shared, thread)
    }

    fn resume_unwinding(&self) {
        Schedule::resume_unwinding(&*self.shared)
    }

    fn suspended_unwinders(&self) -> u32 {
        Schedule::suspended_unwinders(&*self.shared)
    }

    fn block_carrier(&self, pinned_park: bool) -> bool {
        Schedule::block_carrier(&*self.shared, pinned_park)
    }

    fn unblock_carrier(&self) {
        Schedule::unblock_carrier(&*self.shared)
    }

    fn panicked(&self, thread: &VThread, payload: &(dyn std::any::Any + Send)) {
        Schedule::panicked(&*self.shared, thread, payload)
    }

    fn unjoined_panic(&self, payload: &(dyn std::any::Any + Send)) {
        Schedule::unjoined_panic(&*self.shared, payload)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        &*self.shared
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.shared.wake_all();
    }
}

#[derive(Clone, Debug)]
struct Config {
    parallelism: usize,
    max_pool_size: usize,
    stack_size: usize,
    name: String,
    stall_threshold: Duration,
    spare_keepalive: Duration,
    held_carrier_nice: u8,
    /// The process copy it was built in (`fork.rs`): in a `fork` child
    /// its carriers are gone, and spawning on it is an error.
    generation: u32,
    /// The Tokio runtime its threads' `block_on` enters (`tokio_context.rs`).
    #[cfg(feature = "tokio")]
    tokio: Option<tokio::runtime::Handle>,
}

/// Default time an idle spare carrier waits for duty before it exits.
pub const DEFAULT_SPARE_KEEPALIVE: Duration = Duration::from_secs(10);

/// The nice value a held carrier's OS thread is lowered to by default
/// ([`RuntimeBuilder::held_carrier_nice`]): a third of the CPU weight of a
/// carrier at nice 0 (the kernel weighs nice 0 at 1024, nice 5 at 335).
/// Nice 10 served more `/hello` beside a computation but left the
/// computation a quarter of what a `std` thread's got beside busy
/// processes; nice 5 about half, and more than `std`'s on a quiet machine
/// (docs/bench.md, "A computation beside short requests").
pub const DEFAULT_HELD_CARRIER_NICE: u8 = 5;

/// Configures and starts a [`Runtime`].
#[derive(Debug, Default)]
#[must_use = "a RuntimeBuilder does nothing until `build` is called"]
pub struct RuntimeBuilder {
    parallelism: Option<usize>,
    max_pool_size: Option<usize>,
    stack_size: Option<usize>,
    name: Option<String>,
    stall_threshold: Option<Duration>,
    spare_keepalive: Option<Duration>,
    held_carrier_nice: Option<u8>,
    migrate: bool,
    carrier_thread_locals: bool,
    rest_carriers: Option<bool>,
    cover_carriers: Option<bool>,
    sim: Option<Arc<crate::sched::Simulation>>,
    #[cfg(feature = "tokio")]
    tokio: Option<tokio::runtime::Handle>,
}

impl RuntimeBuilder {
    /// Lets a started virtual thread resume on any carrier after it blocks,
    /// instead of only on the carrier where it first ran (the default).
    ///
    /// Migration lets an idle carrier take over threads of a busy or
    /// blocked one (work stealing of started threads, as Go and Java do),
    /// and lets a carrier blocked in an OS-level lock be rescued. It is
    /// not sound for arbitrary Rust code: a virtual thread's stack holds
    /// values that may belong to the OS thread they were made on.
    ///
    /// # Safety
    ///
    /// The caller promises, for every virtual thread this runtime runs,
    /// that nothing tied to an OS thread is alive across a call that may
    /// block (any weft `sleep`, `park`, `yield_now`, lock, channel, join,
    /// socket or file call, `block_on`):
    ///
    /// - no reference to, or value taken from, a `std::thread_local!` —
    ///   including the ones libraries keep for you (`rand::thread_rng()`'s
    ///   `ThreadRng`, `tracing` span guards, a `RefCell` borrow of a
    ///   thread-local);
    /// - no guard of an OS-level lock (`std::sync::MutexGuard`,
    ///   `RwLock` guards, `parking_lot` guards), which must be released by
    ///   the OS thread that acquired it;
    /// - no other value that is not `Send`.
    ///
    /// Also, code that reads a thread-local before and after such a call
    /// *in one function* may be compiled to reuse the first OS thread's
    /// address (llvm/llvm-project#98479); the caller accepts that no such
    /// code runs on this runtime. errno is such a thread-local: Weft's own
    /// code finds its slot afresh on each side of a switch, but a caller's
    /// function that reads errno after a call that parks (a libc call the
    /// `transparent` hooks turn into a park, then
    /// `io::Error::last_os_error()`) may read the slot of the carrier it
    /// left. Breaking any of these is undefined
    /// behaviour. Weft itself keeps a thread that blocks while unwinding a
    /// panic on its carrier (its panic count belongs to that OS thread).
    pub unsafe fn allow_migration(mut self) -> Self {
        self.migrate = true;
        self
    }

    /// Lets this runtime's virtual threads share their carrier's
    /// thread-locals instead of having their own (the default; see the
    /// crate docs, "Thread-locals"). Saves a page of memory per parked
    /// thread and a few nanoseconds per switch, at the price of
    /// `thread_local!` values, `std::thread::current()` and the libraries
    /// built on them (Tokio's runtime context, per-thread parkers) being
    /// per *carrier*: a value set before a park may be another thread's
    /// after it. The environment variable `WEFT_THREAD_LOCALS=carrier` does
    /// the same for every runtime.
    pub fn carrier_thread_locals(mut self) -> Self {
        self.carrier_thread_locals = true;
        self
    }

    /// Number of carrier threads running virtual threads at once (default:
    /// the CPUs this process may run on, lowered to its cgroup's CPU limit
    /// rounded up — a quota of 1.5 CPUs gives 2 — as Java and Go 1.25 do;
    /// read when the runtime is built).
    pub fn parallelism(mut self, n: usize) -> Self {
        self.parallelism = Some(n);
        self
    }

    /// Upper bound on carriers including spares that replace blocked ones
    /// (default 256).
    pub fn max_pool_size(mut self, n: usize) -> Self {
        self.max_pool_size = Some(n);
        self
    }

    /// Default reserved stack size of this runtime's virtual threads
    /// (default [`DEFAULT_STACK_SIZE`], 128 KiB; committed lazily). At
    /// least `bytes` are reserved: the size is rounded up to the next
    /// power of two or one and a half times one (96 KiB stays 96 KiB,
    /// 100 KiB becomes 128), which [`Runtime::stack_size`] reports.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// How long one virtual thread may hold a carrier without yielding
    /// before the monitor reports a stall and brings in a spare carrier
    /// (default 20 ms, `WEFT_STALL_THRESHOLD` for the default runtime).
    pub fn stall_threshold(mut self, d: Duration) -> Self {
        self.stall_threshold = Some(d);
        self
    }

    /// How long an idle spare carrier waits for duty before its OS thread
    /// exits (default 10 s).
    pub fn spare_keepalive(mut self, d: Duration) -> Self {
        self.spare_keepalive = Some(d);
        self
    }

    /// The nice value a carrier's OS thread is lowered to while one
    /// virtual thread computes on it past the stall threshold beside
    /// virtual threads that run briefly, as a server's requests do
    /// (default [`DEFAULT_HELD_CARRIER_NICE`], 5;
    /// `WEFT_HELD_CARRIER_NICE` for the default runtime; 0 never lowers).
    ///
    /// The kernel shares the CPU per OS thread, so without it a long
    /// computation gets as much of the machine as a carrier serving every
    /// other virtual thread; lowered, it gets about what one `std` thread
    /// among many would. Computations beside other computations only, or
    /// alone, are not lowered, nor is anything on a runtime whose
    /// `max_pool_size` leaves no room for a spare. An unprivileged process
    /// cannot raise a priority back, so the lowered OS thread leaves the
    /// runtime when the computation suspends (a fresh one takes its
    /// place), and OS threads started on it meanwhile start at the
    /// runtime's own priority. A thread that stays on its carrier
    /// ([`stay_on_carrier`](crate::stay_on_carrier)) keeps running there,
    /// lowered, and starts its OS threads lowered. The count so far is
    /// [`Runtime::carriers_lowered`]. Values above 19 are an error at
    /// [`build`](Self::build).
    pub fn held_carrier_nice(mut self, nice: u8) -> Self {
        self.held_carrier_nice = Some(nice);
        self
    }

    /// Whether core carriers that only take turns with each other rest
    /// (default `true`; `WEFT_REST_CARRIERS=0` turns it off for the
    /// default runtime).
    ///
    /// When the runtime gets about one CPU fewer than it has carriers — a
    /// load generator on the same cores, more carriers than CPUs — the
    /// carriers take turns on the CPUs they get, and every wake-up that
    /// crosses carriers waits for the woken one to be scheduled. The
    /// monitor then rests a carrier (its threads move to those still on
    /// duty) and brings it back when those never sleep and it brings
    /// more CPU. Beside CPU-bound processes, a computation on every
    /// carrier, or on a quiet machine, every carrier stays on duty. The
    /// rule and its measurements are in ARCHITECTURE.md, "Sharing the
    /// cores"; [`Runtime::carriers_resting`] says how many rest now.
    pub fn rest_carriers(mut self, on: bool) -> Self {
        self.rest_carriers = Some(on);
        self
    }

    /// Whether core carriers cover for each other while the cores are
    /// busy with other processes (default `true`; `WEFT_COVER_CARRIERS=0`
    /// turns it off for the default runtime).
    ///
    /// A started thread runs on the carrier it is bound to. Beside
    /// CPU-bound processes each carrier is off a CPU about half the time,
    /// and the threads bound to it wait with it. While the monitor sees
    /// the carriers wait for a CPU at least as long as they run, a
    /// carrier with nothing to do takes half of the queued threads of
    /// another (those that may move, which then live with it) and hands
    /// its own woken threads back until their numbers are level again.
    /// On a quiet machine, or one the carriers share only with each other,
    /// it never acts. The rule and its measurements are in
    /// ARCHITECTURE.md, "Sharing the cores"; [`Runtime::carriers_covering`]
    /// says whether they do now.
    pub fn cover_carriers(mut self, on: bool) -> Self {
        self.cover_carriers = Some(on);
        self
    }

    /// Prefix of the carriers' OS thread names (default `weft-carrier`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The Tokio runtime that [`block_on`](crate::block_on) on this
    /// runtime's virtual threads runs futures in, when the thread is not
    /// in a multi-thread Tokio runtime's context already (feature `tokio`;
    /// see [`async_interop`](crate::async_interop)). Without it they use a
    /// Tokio runtime Weft starts at the first such `block_on`. A
    /// current-thread runtime given here must be driven by some thread
    /// (one inside its `block_on`): the virtual threads only register
    /// with it.
    #[cfg(feature = "tokio")]
    pub fn tokio_handle(mut self, handle: tokio::runtime::Handle) -> Self {
        self.tokio = Some(handle);
        self
    }

    /// Makes this a simulated runtime (`crate::sim`): one carrier that
    /// runs `sim`'s policy, no monitor, no spare carriers.
    pub(crate) fn simulation(mut self, sim: Arc<crate::sched::Simulation>) -> Self {
        self.parallelism = Some(1);
        self.max_pool_size = Some(1);
        self.sim = Some(sim);
        self
    }

    /// Starts the carriers.
    pub fn build(self) -> io::Result<Runtime> {
        // The CPUs this thread may use, within its cgroup's quota: the
        // default parallelism, and what resting carriers compare with
        // (read only when one of them needs it: it reads cgroup files).
        let rest = self.rest_carriers.unwrap_or(true);
        let default_cpus = self
            .parallelism
            .is_none_or(|n| rest && n >= 2)
            .then(crate::cpu_limit::default_parallelism);
        let parallelism = self.parallelism.or(default_cpus).unwrap_or(1);
        let cpus = default_cpus.unwrap_or(parallelism);
        let max_pool_size = self.max_pool_size.unwrap_or(DEFAULT_MAX_POOL_SIZE);
        let stack_size = self.stack_size.unwrap_or(DEFAULT_STACK_SIZE);
        if parallelism == 0 {
            return Err(invalid("parallelism must be at least 1"));
        }
        if max_pool_size < parallelism {
            return Err(invalid(format!(
                "max_pool_size ({max_pool_size}) must be at least parallelism ({parallelism})"
            )));
        }
        if parallelism > 32_767 {
            return Err(invalid("parallelism must be at most 32767"));
        }
        if !(16 * 1024..=(1 << 30)).contains(&stack_size) {
            return Err(invalid(format!(
                "stack_size must be between 16 KiB and 1 GiB, got {stack_size} bytes"
            )));
        }
        let stall_threshold = self
            .stall_threshold
            .unwrap_or(crate::blocking::DEFAULT_STALL_THRESHOLD);
        if stall_threshold < Duration::from_millis(1) {
            return Err(invalid("stall_threshold must be at least 1 ms"));
        }
        if max_pool_size > 32_767 {
            return Err(invalid("max_pool_size must be at most 32767"));
        }
        let held_carrier_nice = self.held_carrier_nice.unwrap_or(DEFAULT_HELD_CARRIER_NICE);
        if held_carrier_nice > 19 {
            return Err(invalid(format!(
                "held_carrier_nice must be between 0 and 19, got {held_carrier_nice}"
            )));
        }
        let config = Config {
            parallelism,
            max_pool_size,
            stack_size: crate::stack::pool_stack_size(stack_size),
            name: self.name.unwrap_or_else(|| "weft-carrier".into()),
            stall_threshold,
            spare_keepalive: self.spare_keepalive.unwrap_or(DEFAULT_SPARE_KEEPALIVE),
            held_carrier_nice,
            generation: crate::fork::generation(),
            #[cfg(feature = "tokio")]
            tokio: self.tokio,
        };
        crate::overflow::install();
        crate::panic::install();
        crate::dump::install_sigquit();
        let (shared, locals) = Shared::new(
            SchedConfig {
                core: parallelism,
                max: max_pool_size,
                name: config.name.clone(),
                stall_threshold: config.stall_threshold,
                spare_keepalive: config.spare_keepalive,
                held_nice: config.held_carrier_nice,
                migrate: self.migrate,
                thread_local_areas: !self.carrier_thread_locals,
                rest,
                cover: self.cover_carriers.unwrap_or(true),
                cpus,
                sim: self.sim.clone(),
            },
            crate::stack::pool_for(stack_size),
        );
        for (i, local) in locals.into_iter().enumerate() {
            let s = shared.clone();
            std::thread::Builder::new()
                .name(format!("{}-{i}", config.name))
                .spawn(move || crate::sched::run_carrier(s, i, local))
                .map_err(|e| {
                    shared.shutdown.store(true, Ordering::SeqCst);
                    shared.wake_all();
                    io::Error::new(e.kind(), format!("weft: cannot start carrier thread: {e}"))
                })?;
        }
        crate::sched::register_runtime(&shared);
        if self.sim.is_some() {
            // Nothing to watch: a simulation's carrier is never held in
            // virtual time, and a monitor would act on real time.
            return Ok(Runtime {
                handle: Arc::new(Handle { shared, config }),
            });
        }
        let weak = Arc::downgrade(&shared);
        // No thread of this runtime has run yet: nobody has its handle.
        let built = std::time::Instant::now();
        std::thread::Builder::new()
            .name(format!("{}-monitor", config.name))
            .spawn(move || crate::sched::run_monitor(weak, built))
            .map_err(|e| {
                // The carriers already started exit on shutdown.
                shared.shutdown.store(true, Ordering::SeqCst);
                shared.wake_all();
                io::Error::new(e.kind(), format!("weft: cannot start monitor thread: {e}"))
            })?;
        Ok(Runtime {
            handle: Arc::new(Handle { shared, config }),
        })
    }
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("weft: {}", msg.into()))
}

impl Runtime {
    /// A share of this runtime that keeps it running and schedules its
    /// threads (held by each of its virtual threads; no allocation).
    pub(crate) fn keep_alive(&self) -> Arc<dyn Schedule> {
        self.handle.clone()
    }

    /// A builder for a new runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = weft::Runtime::builder()
    ///     .parallelism(2)
    ///     .build()
    ///     .expect("runtime");
    /// assert_eq!(rt.parallelism(), 2);
    /// let h = rt.spawn(|| weft::is_virtual());
    /// assert!(h.join().unwrap());
    /// ```
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// A runtime with default settings.
    pub fn new() -> io::Result<Runtime> {
        Runtime::builder().build()
    }

    /// Spawns a virtual thread on this runtime.
    ///
    /// # Panics
    /// If the thread cannot be created; see [`crate::Builder::spawn_on`].
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        crate::builder::Builder::new()
            .spawn_on(self, f)
            .unwrap_or_else(|e| panic!("weft: spawn failed: {e}"))
    }

    /// Number of carriers running virtual threads at once.
    pub fn parallelism(&self) -> usize {
        self.handle.config.parallelism
    }

    /// Upper bound on carriers including spares.
    pub fn max_pool_size(&self) -> usize {
        self.handle.config.max_pool_size
    }

    /// Default reserved stack size of this runtime's threads: the size
    /// asked of [`RuntimeBuilder::stack_size`] rounded up as it says (the
    /// slot each thread gets, its guard page not counted; a thread-local
    /// area of its own, when it has one, takes its top few KiB).
    pub fn stack_size(&self) -> usize {
        self.handle.config.stack_size
    }

    /// The stall threshold of this runtime's monitor.
    pub fn stall_threshold(&self) -> Duration {
        self.handle.config.stall_threshold
    }

    /// Carriers running right now, including spares on duty.
    pub fn active_carriers(&self) -> usize {
        self.handle.shared.active_carriers()
    }

    /// Carriers blocked (in `weft::blocking`, pinned, or stalled) right now.
    pub fn blocked_carriers(&self) -> usize {
        self.handle.shared.blocked_carriers()
    }

    /// Virtual threads started on this runtime and not yet finished. A
    /// thread stops counting before its `join` can return.
    pub fn live_threads(&self) -> usize {
        self.handle.shared.live_threads()
    }

    /// Started threads moved so far from a stalled carrier to another
    /// (handoff; see the crate docs, "Affinity and handoff").
    pub fn threads_moved(&self) -> usize {
        self.handle.shared.threads_moved()
    }

    /// Carriers' OS threads lowered in priority so far while one virtual
    /// thread computed on them and others waited (see
    /// [`RuntimeBuilder::held_carrier_nice`]).
    pub fn carriers_lowered(&self) -> usize {
        self.handle.shared.demoted.load(Ordering::Relaxed)
    }

    /// Core carriers resting now (see [`RuntimeBuilder::rest_carriers`]).
    pub fn carriers_resting(&self) -> usize {
        self.handle.shared.resting.load(Ordering::Relaxed)
    }

    /// Rests the last `n` core carriers now and calls the others back, as
    /// the monitor would by its rule (at least one stays on duty). For
    /// tests that move threads at will: not part of the API, and the
    /// monitor may undo it at its next window unless the runtime was
    /// built with [`RuntimeBuilder::rest_carriers`]`(false)`.
    #[doc(hidden)]
    pub fn set_resting_for_tests(&self, n: usize) {
        self.handle.shared.set_resting(n);
    }

    /// Times a core carrier was sent to rest so far (see
    /// [`RuntimeBuilder::rest_carriers`]).
    pub fn carrier_rests(&self) -> usize {
        self.handle.shared.rests.load(Ordering::Relaxed)
    }

    /// Whether the core carriers cover for each other now (see
    /// [`RuntimeBuilder::cover_carriers`]).
    pub fn carriers_covering(&self) -> bool {
        self.handle.shared.covering.load(Ordering::Relaxed)
    }

    /// Times a carrier took threads queued for another so far (see
    /// [`RuntimeBuilder::cover_carriers`]).
    pub fn carrier_covers(&self) -> usize {
        self.handle.shared.covers.load(Ordering::Relaxed)
    }

    /// Has the core carriers cover for each other (`true`) or not, as
    /// the monitor would by its rule, and keeps it so: the monitor no
    /// longer changes it. For tests that move threads at will: not part
    /// of the API.
    #[doc(hidden)]
    pub fn set_covering_for_tests(&self, on: bool) {
        let shared = &self.handle.shared;
        shared.covering_forced.store(true, Ordering::Relaxed);
        shared.covering.store(on, Ordering::Relaxed);
    }

    /// Whether started threads of this runtime may change carriers (see
    /// [`RuntimeBuilder::allow_migration`]).
    pub fn allows_migration(&self) -> bool {
        self.handle.shared.migrate
    }

    /// The Tokio runtime given to [`RuntimeBuilder::tokio_handle`].
    #[cfg(feature = "tokio")]
    pub(crate) fn tokio_handle(&self) -> Option<&tokio::runtime::Handle> {
        self.handle.config.tokio.as_ref()
    }

    /// Stops the carriers now, with threads possibly left parked (a
    /// simulation that deadlocked or hit its limit: its threads are never
    /// resumed).
    pub(crate) fn shutdown_now(&self) {
        self.handle.shared.shutdown.store(true, Ordering::SeqCst);
        self.handle.shared.wake_all();
    }

    pub(crate) fn spawn_thread(&self, thread: RecordArc) {
        Spawner(&self.handle.shared).spawn(thread);
    }

    /// Whether threads can be spawned on this runtime in this process: not
    /// in a `fork` child of the process that built it, where its carriers
    /// are gone (`fork.rs`) and a thread would never run.
    #[inline]
    pub(crate) fn check_spawnable(&self) -> io::Result<()> {
        if self.handle.config.generation == crate::fork::generation() {
            return Ok(());
        }
        Err(Self::forked_error())
    }

    /// [`Runtime::check_spawnable`]'s error.
    #[cold]
    fn forked_error() -> io::Error {
        io::Error::other(
            "weft: this process is a fork() child and the runtime was built before the fork: \
             its carriers did not survive it, so a thread spawned on it would never run \
             (build a runtime in the child, or spawn from an OS thread: the default runtime \
             is built afresh in each child)",
        )
    }

    /// Promises a default-size stack to a thread that takes it at first run.
    pub(crate) fn promise_stack(&self) -> io::Result<()> {
        self.handle.shared.stacks.promise()
    }

    pub(crate) fn alloc_stack(&self, size: Option<usize>) -> io::Result<Stack> {
        let shared = &self.handle.shared;
        match size {
            None => match crate::sched::carrier() {
                Some(c) if c.owned_by(shared) => c.alloc_default_stack(),
                _ => shared.stacks.alloc(),
            },
            Some(s) => {
                if s > (1 << 30) {
                    return Err(invalid(format!(
                        "stack_size must be at most 1 GiB, got {s} bytes"
                    )));
                }
                crate::stack::pool_for(s).alloc()
            }
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("parallelism", &self.parallelism())
            .field("max_pool_size", &self.max_pool_size())
            .field("stack_size", &self.stack_size())
            .field("live_threads", &self.live_threads())
            .finish()
    }
}

/// The runtime of the calling virtual thread; `None` on an OS thread.
pub(crate) fn current() -> Option<Runtime> {
    let sched = crate::thread::current_virtual()?.scheduler()?.clone();
    let handle = sched.into_any().downcast::<Handle>().ok()?;
    Some(Runtime { handle })
}

/// Where `weft::spawn`, `weft::scope` and an executor without a runtime
/// start threads: the caller's runtime when called from one of its virtual
/// threads (as `std::thread::spawn` keeps a program in one process, a
/// runtime's threads stay in their runtime), the default runtime from an
/// OS thread.
pub(crate) fn for_spawn() -> io::Result<Runtime> {
    with_for_spawn(Runtime::clone)
}

/// [`for_spawn`]'s runtime, lent to `f`: from an OS thread the default
/// runtime is borrowed, so spawning touches no reference count of it (its
/// count is shared with every live thread's record, on the carriers).
pub(crate) fn with_for_spawn<R>(f: impl FnOnce(&Runtime) -> R) -> io::Result<R> {
    Ok(match current() {
        Some(rt) => f(&rt),
        None => f(default_runtime_ref()?),
    })
}

/// The process-wide runtime used by [`crate::spawn`] from OS threads, started on first use
/// and configured by `WEFT_PARALLELISM`, `WEFT_MAX_POOL_SIZE` and
/// `WEFT_STACK_SIZE`. A bad value is an error naming the variable.
pub fn default_runtime() -> io::Result<Runtime> {
    default_runtime_ref().cloned()
}

/// The default runtime, borrowed (see [`with_for_spawn`]).
fn default_runtime_ref() -> io::Result<&'static Runtime> {
    // A failed start is not remembered: the next call tries again (after a
    // transient error, or once the variable is fixed). A `fork` child
    // builds its own (`fork.rs`): the parent's lost its carriers in the
    // fork. Building it takes Weft's global locks (the record slab's, the
    // stack pools'), which a thread of the parent may have held at the
    // fork: the child then blocks, as `thread/slab.rs` says under "Limits".
    static DEFAULT: crate::fork::PerProcess<Runtime> = crate::fork::PerProcess::new();
    DEFAULT.get_or_try_init(build_default)
}

fn build_default() -> io::Result<Runtime> {
    let mut b = Runtime::builder();
    if let Some(n) = env_usize("WEFT_PARALLELISM")? {
        b = b.parallelism(n);
    }
    if let Some(n) = env_usize("WEFT_MAX_POOL_SIZE")? {
        b = b.max_pool_size(n);
    }
    if let Some(n) = env_size("WEFT_STACK_SIZE")? {
        b = b.stack_size(n);
    }
    if let Some(d) = env_duration("WEFT_STALL_THRESHOLD")? {
        b = b.stall_threshold(d);
    }
    if let Some(n) = env_nice("WEFT_HELD_CARRIER_NICE")? {
        b = b.held_carrier_nice(n);
    }
    if let Some(on) = env_bool("WEFT_REST_CARRIERS")? {
        b = b.rest_carriers(on);
    }
    if let Some(on) = env_bool("WEFT_COVER_CARRIERS")? {
        b = b.cover_carriers(on);
    }
    // Keep the implicit pool bound consistent with a large parallelism.
    if b.max_pool_size.is_none()
        && let Some(p) = b.parallelism
    {
        b = b.max_pool_size(p.max(DEFAULT_MAX_POOL_SIZE));
    }
    b.build().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{e} (default runtime, configured by WEFT_PARALLELISM / WEFT_MAX_POOL_SIZE / WEFT_STACK_SIZE / WEFT_STALL_THRESHOLD / WEFT_HELD_CARRIER_NICE / WEFT_REST_CARRIERS / WEFT_COVER_CARRIERS)"),
        )
    })
}

/// `0` or `1`.
fn env_bool(var: &str) -> io::Result<Option<bool>> {
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(invalid(format!("{var} is not valid UTF-8"))),
        Ok(v) => match v.trim() {
            "0" => Ok(Some(false)),
            "1" => Ok(Some(true)),
            _ => Err(invalid(format!("{var}={v:?} is not 0 or 1"))),
        },
    }
}

/// A nice value, 0 to 19.
fn env_nice(var: &str) -> io::Result<Option<u8>> {
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(invalid(format!("{var} is not valid UTF-8"))),
        Ok(v) => match v.trim().parse::<u8>() {
            Ok(n) if n <= 19 => Ok(Some(n)),
            _ => Err(invalid(format!(
                "{var}={v:?} is not a nice value from 0 to 19"
            ))),
        },
    }
}

fn env_usize(var: &str) -> io::Result<Option<usize>> {
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(invalid(format!("{var} is not valid UTF-8"))),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(invalid(format!("{var}={v:?} is not a positive integer"))),
        },
    }
}

/// Parses a byte size with an optional k/K/m/M/g/G suffix (binary units).
fn env_size(var: &str) -> io::Result<Option<usize>> {
    let v = match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => return Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(invalid(format!("{var} is not valid UTF-8")));
        }
        Ok(v) => v,
    };
    parse_size(&v).map(Some).ok_or_else(|| {
        invalid(format!(
            "{var}={v:?} is not a size (examples: 65536, 256k, 1m)"
        ))
    })
}

/// Parses a duration: a number of milliseconds, or with a unit suffix
/// (`us`, `ms`, `s`).
fn env_duration(var: &str) -> io::Result<Option<Duration>> {
    let v = match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => return Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(invalid(format!("{var} is not valid UTF-8")));
        }
        Ok(v) => v,
    };
    parse_duration(&v).map(Some).ok_or_else(|| {
        invalid(format!(
            "{var}={v:?} is not a duration (examples: 20, 20ms, 500us, 1s)"
        ))
    })
}

fn parse_duration(v: &str) -> Option<Duration> {
    let t = v.trim();
    let (num, unit) = if let Some(n) = t.strip_suffix("us") {
        (n, 1u64)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1_000)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1_000_000)
    } else {
        (t, 1_000)
    };
    let n: u64 = num.trim().parse().ok()?;
    let us = n.checked_mul(unit)?;
    (us > 0).then(|| Duration::from_micros(us))
}

fn parse_size(v: &str) -> Option<usize> {
    let t = v.trim();
    let (num, mult) = match t.char_indices().last()? {
        (i, 'k' | 'K') => (&t[..i], 1usize << 10),
        (i, 'm' | 'M') => (&t[..i], 1 << 20),
        (i, 'g' | 'G') => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let n: usize = num.trim().parse().ok()?;
    n.checked_mul(mult).filter(|&b| b > 0)
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_size};
    use std::time::Duration;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("20"), Some(Duration::from_millis(20)));
        assert_eq!(parse_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(parse_duration("500us"), Some(Duration::from_micros(500)));
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("0"), None);
        assert_eq!(parse_duration("fast"), None);
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("65536"), Some(65536));
        assert_eq!(parse_size("256k"), Some(256 << 10));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("12q"), None);
        assert_eq!(parse_size("-1"), None);
    }
}
