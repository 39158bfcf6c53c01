//! Threads: the `Thread` handle, identity and state, spawning and joining,
//! and the blocking primitives (`park`, `sleep`, `yield_now`) that every other
//! weft API is built on.
//!
//! Every function here works on both kinds of thread. On a virtual thread it
//! suspends the thread and frees its carrier; on an OS thread it behaves like
//! its `std::thread` counterpart and really blocks.

use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::io;
use std::num::NonZeroU64;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::park::ParkState;
use crate::runtime::Runtime;
use crate::sched::{self, Suspend};

/// The lifecycle state of a thread, after the JDK's `Thread.State` for
/// virtual threads.
///
/// ```text
///  New ──spawn──► Started ──► Runnable ◄──────────────┐
///                               │ mounted on a carrier │ unparked / timer fired / yielded
///                               ▼                      │
///                            Running ──park──► Parking ─► Parked
///                             │   │ yield_now ──► Yielding ─┘
///                             │   └─ blocks inside weft::pinned / a carrier-blocking call ─► Pinned
///                             └─ returns or panics ──► Terminated
/// ```
///
/// OS threads report `Running` while they run weft code and `Parked` while
/// they block in a weft primitive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum State {
    /// Created, not yet handed to the scheduler.
    New = 0,
    /// Handed to the scheduler, never run yet.
    Started = 1,
    /// In a run queue, waiting for a carrier.
    Runnable = 2,
    /// Mounted on a carrier (or an OS thread running).
    Running = 3,
    /// Deciding to park; about to leave its carrier.
    Parking = 4,
    /// Unmounted, waiting for `unpark`, a timer or I/O.
    Parked = 5,
    /// Blocked while holding its carrier (pinned).
    Pinned = 6,
    /// Gave up its carrier voluntarily and is about to be requeued.
    Yielding = 7,
    /// Finished (returned or panicked).
    Terminated = 8,
}

impl State {
    fn from_u8(v: u8) -> State {
        match v {
            0 => State::New,
            1 => State::Started,
            2 => State::Runnable,
            3 => State::Running,
            4 => State::Parking,
            5 => State::Parked,
            6 => State::Pinned,
            7 => State::Yielding,
            _ => State::Terminated,
        }
    }
}

/// A unique identifier for a weft thread (virtual or OS). Never reused.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(NonZeroU64);

impl ThreadId {
    fn next() -> ThreadId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        ThreadId(NonZeroU64::new(id).expect("thread id overflow"))
    }

    /// The id as a number (stable for the thread's life, unique in the process).
    pub fn as_u64(&self) -> NonZeroU64 {
        self.0
    }
}

impl fmt::Debug for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ThreadId({})", self.0)
    }
}

/// What a virtual thread runs: its coroutine, owned by whichever carrier has
/// it mounted (exclusive by the scheduling protocol).
pub(crate) type Coro = corosensei::Coroutine<(), Suspend, (), crate::stack::Stack>;

/// The body of a virtual thread as corosensei runs it, for lifetime `'a`.
pub(crate) type BodyFor<'a> = Box<dyn FnOnce(&corosensei::Yielder<(), Suspend>, ()) + Send + 'a>;

/// [`BodyFor`] with its lifetime erased.
pub(crate) type Body = BodyFor<'static>;

/// A virtual thread's coroutine, created lazily by the carrier that first
/// runs the thread.
///
/// Why lazily, stack included: a thread with the default stack size takes
/// its stack from that carrier's cache only when it first runs, not when it
/// is spawned. A loop that spawns 100,000 short threads then needs only as
/// many stacks as run at once — the cache hands the same few, already
/// resident stacks round — instead of 100,000 fresh ones, each costing a
/// page fault and a page of RSS (Go's `gfget` reuses dead goroutines'
/// stacks the same way). Building the coroutine is what first touches the
/// stack, so that fault, when there is one, lands on a carrier in parallel
/// with the spawner. Running out of address space is still a `spawn` error:
/// spawning promises a slot (`StackPool::promise`). Should taking the slot
/// fail anyway (the kernel refusing a guard page), the thread ends without
/// running and `join` returns `Err` with the reason (see [`Completer`]).
pub(crate) enum CoroSlot {
    /// Finished (or not yet set up).
    Empty,
    /// Spawned, never run; `None`: take a default-size stack at first run.
    Pending(Option<crate::stack::Stack>, Body),
    /// Started.
    Running(Coro),
}

impl CoroSlot {
    /// The coroutine, building it on first use with the reserved stack or,
    /// if none was reserved, one from `alloc`. On error the slot is left
    /// `Pending`.
    pub(crate) fn get(
        &mut self,
        alloc: impl FnOnce() -> io::Result<crate::stack::Stack>,
    ) -> io::Result<&mut Coro> {
        if let CoroSlot::Pending(stack, _) = self {
            let stack = match stack.take() {
                Some(s) => s,
                None => alloc()?,
            };
            let CoroSlot::Pending(_, body) = std::mem::replace(self, CoroSlot::Empty) else {
                unreachable!()
            };
            // SAFETY: `body`'s true lifetime was erased in `spawn_unchecked`,
            // whose caller guarantees the borrows outlive the thread;
            // corosensei's extra requirement (run to completion or drop
            // before the borrows end) holds because joining waits for it.
            *self = CoroSlot::Running(unsafe { Coro::with_stack_unchecked(stack, body) });
        }
        match self {
            CoroSlot::Running(c) => Ok(c),
            _ => panic!("weft: runnable thread without a coroutine"),
        }
    }
}

/// The spawned body's end of a join [`Packet`]: completes it exactly once —
/// with the body's result, or, if the body is dropped without having run
/// (no stack could be had at first run, or its runtime went away first),
/// with an `Err` naming why, so that `join` never waits forever.
struct Completer<T> {
    packet: Option<Arc<Packet<T>>>,
}

impl<T> Completer<T> {
    fn complete(mut self, r: std::thread::Result<T>) {
        if let Some(p) = self.packet.take() {
            p.complete(r);
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if let Some(p) = self.packet.take() {
            let why = NEVER_RAN
                .with(|w| w.borrow_mut().take())
                .unwrap_or_else(|| "weft: the virtual thread was dropped before it ran".into());
            p.complete(Err(Box::new(why)));
        }
    }
}

std::thread_local! {
    /// Why the body being dropped on this OS thread never ran (set by the
    /// carrier just before it drops a thread it could not start).
    static NEVER_RAN: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Records why the next body dropped on this OS thread never ran.
pub(crate) fn set_never_ran_reason(why: String) {
    NEVER_RAN.with(|w| *w.borrow_mut() = Some(why));
}

pub(crate) enum Kind {
    /// A virtual thread and the runtime it belongs to.
    Virtual {
        rt: Runtime,
        /// SAFETY (field invariant): accessed only by the carrier that has
        /// the thread mounted or is publishing its suspension; the park state
        /// machine and run queues hand the thread to one carrier at a time.
        coro: UnsafeCell<CoroSlot>,
    },
    /// An OS thread (or a task of a fixed OS-thread pool, bound to its
    /// worker when it starts); blocks with `std::thread::park`.
    Os(OnceLock<std::thread::Thread>),
}

/// [`Inner::home`] of a thread that is not bound to a carrier.
pub(crate) const NO_HOME: u32 = u32::MAX;

pub(crate) struct Inner {
    id: ThreadId,
    name: Option<Box<str>>,
    pub(crate) kind: Kind,
    state: AtomicU8,
    pub(crate) park: ParkState,
    interrupted: AtomicBool,
    /// Bumped whenever a timed park ends, so a stale timer cannot unpark a
    /// later park (it still may: that is a spurious wakeup, which is allowed).
    pub(crate) timer_seq: AtomicU64,
    /// Yielder of the coroutine (set once when it starts).
    pub(crate) yielder: Cell<*const corosensei::Yielder<(), Suspend>>,
    /// Lowest stack address seen at a suspension point (for trimming).
    pub(crate) low_sp: AtomicUsize,
    /// `weft::local!` storage.
    pub(crate) locals: UnsafeCell<crate::local::Locals>,
    /// What the thread is blocked on, for dumps (set around waits by the
    /// primitive that parks).
    pub(crate) blocker: BlockerCell,
    /// Depth of `weft::pinned` sections (touched only by the thread).
    pub(crate) pin_depth: Cell<u32>,
    /// Index of the carrier this thread is bound to ([`NO_HOME`] until its
    /// first run, and for ever on a runtime that allows migration). Written
    /// once, by the carrier that first runs the thread, before the thread
    /// can suspend; read by whoever schedules the thread after a wake-up
    /// (the park state machine's acquire/release hand-off orders the two).
    pub(crate) home: AtomicU32,
    /// The thread suspended while its carrier's OS thread was unwinding a
    /// panic on its behalf (see `crate::thread::panicking`). Touched only
    /// by the thread itself.
    pub(crate) unwinding: Cell<bool>,
    /// Set by a thread dump that moved the thread out of PARKED to record
    /// its stack (see `borrow_parked`); consumed by the thread when it
    /// resumes. Tells a dump's borrow from a real wake-up.
    pub(crate) dump_borrowed: AtomicBool,
    /// Set while the thread waits on its carrier's OS thread (pinned); the
    /// OS thread to unpark is in `pinned_waiter`.
    pub(crate) pinned_waiting: AtomicBool,
    pub(crate) pinned_waiter: std::sync::Mutex<Option<std::thread::Thread>>,
    /// Slot in the dump registry.
    pub(crate) reg_key: AtomicUsize,
    /// Dump container (0 = root; an executor or a scope otherwise).
    pub(crate) container: u64,
    /// A thread dump's request to record this thread's stack (an
    /// `Arc<CaptureJob>` as a raw pointer), or null.
    pub(crate) capture_job: std::sync::atomic::AtomicPtr<()>,
}

/// What a blocked thread waits for (shown in thread dumps).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Blocker {
    /// Not blocked in a weft primitive (or not recorded).
    #[default]
    None,
    /// `sleep` until the given instant.
    Sleep(Instant),
    /// `park` / `park_timeout` called directly.
    Park,
    /// A socket or other descriptor: fd and whether it waits to read.
    Io {
        /// The file descriptor.
        fd: i32,
        /// True for a read (or accept), false for a write (or connect).
        read: bool,
    },
    /// A `weft::sync` primitive at this address, owned by this thread id
    /// (when it has an owner).
    Lock {
        /// The kind of primitive (`"Mutex"`, `"RwLock"`, ...).
        kind: &'static str,
        /// Address of the primitive, to match waiters with owners.
        addr: usize,
        /// The owner's thread id, if known.
        owner: Option<u64>,
    },
    /// A channel operation.
    Channel {
        /// True for `recv`, false for `send`.
        recv: bool,
    },
    /// Joining the thread with this id.
    Join(u64),
    /// Anything else, described.
    Other(&'static str),
    /// A libc call intercepted by the `transparent` feature (`"recv"`,
    /// `"nanosleep"`, …) and the descriptor it waits on (-1 if none).
    Call {
        /// The C function's name.
        call: &'static str,
        /// The file descriptor, or -1.
        fd: i32,
    },
}

/// A [`Blocker`] in atomics, written only by its own thread and read by
/// anyone (dumps) without locks: a sequence lock. The writer makes the
/// sequence odd, stores the words, makes it even again; a reader retries
/// until it sees the same even sequence before and after reading.
#[derive(Default)]
pub(crate) struct BlockerCell {
    seq: AtomicU64,
    w: [AtomicU64; 5],
}

impl BlockerCell {
    fn set(&self, b: Blocker) {
        let words = encode(&b);
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        for (slot, v) in self.w.iter().zip(words) {
            slot.store(v, Ordering::Relaxed);
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    pub(crate) fn get(&self) -> Blocker {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let words: [u64; 5] = std::array::from_fn(|i| self.w[i].load(Ordering::Relaxed));
            std::sync::atomic::fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return decode(words);
            }
        }
    }
}

fn str_words(s: &'static str) -> (u64, u64) {
    (s.as_ptr() as u64, s.len() as u64)
}

fn words_str(ptr: u64, len: u64) -> &'static str {
    // SAFETY: (ptr, len) was produced by `str_words` from a &'static str
    // (the seqlock guarantees the pair is not torn).
    unsafe {
        std::str::from_utf8_unchecked(std::slice::from_raw_parts(ptr as *const u8, len as usize))
    }
}

fn encode(b: &Blocker) -> [u64; 5] {
    match *b {
        Blocker::None => [0; 5],
        Blocker::Sleep(t) => [1, crate::sched::ns_of(t), 0, 0, 0],
        Blocker::Park => [2, 0, 0, 0, 0],
        Blocker::Io { fd, read } => [3, fd as u32 as u64, read as u64, 0, 0],
        Blocker::Lock { kind, addr, owner } => {
            let (p, l) = str_words(kind);
            [4, p, l, addr as u64, owner.unwrap_or(0)]
        }
        Blocker::Channel { recv } => [5, recv as u64, 0, 0, 0],
        Blocker::Join(id) => [6, id, 0, 0, 0],
        Blocker::Other(s) => {
            let (p, l) = str_words(s);
            [7, p, l, 0, 0]
        }
        Blocker::Call { call, fd } => {
            let (p, l) = str_words(call);
            [8, p, l, fd as u32 as u64, 0]
        }
    }
}

fn decode(w: [u64; 5]) -> Blocker {
    match w[0] {
        1 => Blocker::Sleep(crate::sched::instant_of(w[1])),
        2 => Blocker::Park,
        3 => Blocker::Io {
            fd: w[1] as u32 as i32,
            read: w[2] != 0,
        },
        4 => Blocker::Lock {
            kind: words_str(w[1], w[2]),
            addr: w[3] as usize,
            owner: (w[4] != 0).then_some(w[4]),
        },
        5 => Blocker::Channel { recv: w[1] != 0 },
        6 => Blocker::Join(w[1]),
        7 => Blocker::Other(words_str(w[1], w[2])),
        8 => Blocker::Call {
            call: words_str(w[1], w[2]),
            fd: w[3] as u32 as i32,
        },
        _ => Blocker::None,
    }
}

/// Records `b` as the current thread's blocker while `f` runs.
pub(crate) fn with_blocker<R>(b: Blocker, f: impl FnOnce() -> R) -> R {
    fn set(b: Blocker) {
        match current_virtual() {
            Some(inner) => inner.blocker.set(b),
            None => with_os_thread(|t| t.inner.blocker.set(b)),
        }
    }
    set(b);
    let r = f();
    set(Blocker::None);
    r
}

// SAFETY: the non-Sync fields (`coro`, `yielder`, `locals`, `pin_depth`,
// `unwinding`) are only touched by the thread itself or the one carrier that
// owns it at that moment, as documented on each field; everything else is
// atomic or immutable.
unsafe impl Sync for Inner {}
// SAFETY: the record moves between OS threads as a handle (wakers, join
// handles, run queues). Its coroutine, which holds the thread's stack and so
// values that may be tied to an OS thread, runs only on its home carrier
// once started (`home`): by default nothing on the stack ever changes OS
// thread. Only `RuntimeBuilder::allow_migration`, an `unsafe fn` whose
// caller takes on that obligation, lets a started coroutine move.
unsafe impl Send for Inner {}

/// A handle to a thread, virtual or OS. Cheap to clone.
#[derive(Clone)]
pub struct Thread {
    pub(crate) inner: Arc<Inner>,
}

impl Thread {
    pub(crate) fn new_virtual(name: Option<String>, rt: Runtime, container: u64) -> Thread {
        Thread::from_kind(
            name,
            Kind::Virtual {
                rt,
                coro: UnsafeCell::new(CoroSlot::Empty),
            },
            container,
        )
    }

    fn from_kind(name: Option<String>, kind: Kind, container: u64) -> Thread {
        Thread {
            inner: Arc::new(Inner {
                id: ThreadId::next(),
                name: name.map(String::into_boxed_str),
                kind,
                state: AtomicU8::new(State::New as u8),
                park: ParkState::new(),
                interrupted: AtomicBool::new(false),
                timer_seq: AtomicU64::new(0),
                yielder: Cell::new(std::ptr::null()),
                low_sp: AtomicUsize::new(usize::MAX),
                locals: UnsafeCell::new(crate::local::Locals::default()),
                blocker: BlockerCell::default(),
                pin_depth: Cell::new(0),
                home: AtomicU32::new(NO_HOME),
                unwinding: Cell::new(false),
                dump_borrowed: AtomicBool::new(false),
                pinned_waiting: AtomicBool::new(false),
                pinned_waiter: std::sync::Mutex::new(None),
                reg_key: AtomicUsize::new(0),
                container,
                capture_job: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            }),
        }
    }

    /// The thread's unique id.
    pub fn id(&self) -> ThreadId {
        self.inner.id
    }

    /// The thread's name, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.inner.name.as_deref()
    }

    /// Whether this is a virtual thread (as opposed to an OS thread).
    pub fn is_virtual(&self) -> bool {
        matches!(self.inner.kind, Kind::Virtual { .. })
    }

    /// What the thread is blocked on right now, if recorded. A snapshot.
    pub fn blocker(&self) -> Blocker {
        self.inner.blocker.get()
    }

    /// The thread's current state. A snapshot: it may change at once.
    pub fn state(&self) -> State {
        State::from_u8(self.inner.state.load(Ordering::Relaxed))
    }

    pub(crate) fn set_state(&self, s: State) {
        self.inner.state.store(s as u8, Ordering::Relaxed);
    }

    /// Makes the thread's permit available: its next (or current) `park`
    /// returns. Like `std::thread::Thread::unpark`, unparks do not accumulate.
    pub fn unpark(&self) {
        match &self.inner.kind {
            Kind::Os(t) => {
                if let Some(t) = t.get() {
                    t.unpark();
                }
            }
            Kind::Virtual { rt, .. } => {
                if self.inner.park.unpark() == crate::park::Unpark::Schedule {
                    self.set_state(State::Runnable);
                    // SAFETY: a PARKED thread carries one strong count leaked
                    // by its carrier (`Carrier::after_park`); moving it out of
                    // PARKED made that count ours.
                    let task = unsafe { Arc::from_raw(Arc::as_ptr(&self.inner)) };
                    rt.schedule(task);
                } else {
                    // Pairs with the fence in `crate::blocking::pinned_park`.
                    std::sync::atomic::fence(Ordering::SeqCst);
                    if self.inner.pinned_waiting.load(Ordering::SeqCst) {
                        let w = self
                            .inner
                            .pinned_waiter
                            .lock()
                            .unwrap_or_else(|e| e.into_inner());
                        if let Some(t) = &*w {
                            t.unpark();
                        }
                    }
                }
            }
        }
    }

    /// Sets the thread's interrupt flag and wakes it: a weft blocking call it
    /// is in (or makes next) returns `ErrorKind::Interrupted` (or the
    /// `Interrupted` variant of its error type) and clears the flag; `park`
    /// returns early and leaves the flag set, like Java's `LockSupport.park`.
    pub fn interrupt(&self) {
        self.inner.interrupted.store(true, Ordering::SeqCst);
        self.unpark();
    }

    /// Whether the interrupt flag is set (does not clear it).
    pub fn is_interrupted(&self) -> bool {
        self.inner.interrupted.load(Ordering::SeqCst)
    }

    /// Sets the interrupt flag without waking (restoring a flag that an
    /// uninterruptible wait had to clear).
    pub(crate) fn interrupt_flag_restore(&self) {
        self.inner.interrupted.store(true, Ordering::SeqCst);
    }

    pub(crate) fn clear_interrupt(&self) -> bool {
        self.inner.interrupted.swap(false, Ordering::SeqCst)
    }
}

impl PartialEq for Thread {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
impl Eq for Thread {}

impl fmt::Debug for Thread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Thread")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("virtual", &self.is_virtual())
            .field("state", &self.state())
            .finish()
    }
}

// ---------------------------------------------------------------------------
// The current thread.

std::thread_local! {
    /// Handle for a plain OS thread, created on first use.
    static OS_THREAD: Thread = {
        let std = std::thread::current();
        let t = Thread::from_kind(std.name().map(str::to_owned), Kind::Os(OnceLock::from(std)), 0);
        t.set_state(State::Running);
        t
    };
    /// While a fixed-pool worker runs a task, the task's own identity.
    static OS_TASK: std::cell::RefCell<Option<Thread>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` on this OS thread as the task `t` (fixed executors): `current()`
/// returns `t`, and interrupts of `t` reach blocking calls made by `f`.
pub(crate) fn run_as_os_task<R>(t: &Thread, f: impl FnOnce() -> R) -> R {
    if let Kind::Os(slot) = &t.inner.kind {
        let _ = slot.set(std::thread::current());
    }
    t.set_state(State::Running);
    let prev = OS_TASK.with(|c| c.replace(Some(t.clone())));
    struct Restore(Option<Thread>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            OS_TASK.with(|c| *c.borrow_mut() = prev);
        }
    }
    let _restore = Restore(prev);
    f()
}

/// A new identity for a task queued on a fixed OS-thread pool.
pub(crate) fn new_os_task(name: Option<String>) -> Thread {
    let t = Thread::from_kind(name, Kind::Os(OnceLock::new()), 0);
    t.set_state(State::Runnable);
    t
}

/// The calling OS thread's handle (or the pool task it is running).
fn with_os_thread<R>(f: impl FnOnce(&Thread) -> R) -> R {
    let task = OS_TASK.with(|c| c.borrow().clone());
    match task {
        Some(t) => f(&t),
        None => OS_THREAD.with(f),
    }
}

/// The virtual thread mounted on this carrier, if any. Read through an
/// `#[inline(never)]` accessor: a virtual thread may migrate between carriers
/// at any suspension, and LLVM may otherwise cache this TLS address across
/// the switch (llvm/llvm-project#98479).
#[inline(never)]
pub(crate) fn current_virtual() -> Option<&'static Inner> {
    let p = sched::current_task_ptr();
    // SAFETY: the carrier sets this pointer to the mounted thread's Inner for
    // exactly as long as it runs that thread, and holds an Arc to it
    // meanwhile; the reference is only used before the next suspension.
    unsafe { p.as_ref() }
}

/// Returns a handle to the calling thread, virtual or OS.
pub fn current() -> Thread {
    match sched::current_task_arc() {
        Some(inner) => Thread { inner },
        None => with_os_thread(Thread::clone),
    }
}

/// Whether the calling code runs on a virtual thread.
pub fn is_virtual() -> bool {
    current_virtual().is_some()
}

/// Blocks until the current thread's permit is available (then consumes
/// it), it is interrupted, or spuriously. See `std::thread::park`.
pub fn park() {
    park_deadline(None)
}

/// Like [`park`], returning after at most `dur`.
pub fn park_timeout(dur: Duration) {
    with_blocker(Blocker::Park, || {
        park_deadline(Instant::now().checked_add(dur))
    })
}

/// Parks until unparked, `deadline`, or interrupt; spurious wakeups possible.
pub(crate) fn park_deadline(deadline: Option<Instant>) {
    match current_virtual() {
        Some(inner) => {
            if inner.interrupted.load(Ordering::SeqCst) {
                return;
            }
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return;
            }
            if inner.pin_depth.get() > 0 {
                crate::blocking::pinned_park(inner, deadline);
                return;
            }
            let begin = inner.park.begin_park();
            if begin == crate::park::BeginPark::Consumed {
                return;
            }
            inner.state.store(State::Parking as u8, Ordering::Relaxed);
            let mut s = match deadline {
                None => Suspend::Park,
                Some(d) => Suspend::ParkUntil(d),
            };
            loop {
                suspend(inner, s);
                // Only a thread dump that moved us out of PARKED sets this
                // (before it schedules us), so anything else that resumed
                // us was a real wake-up: never park again for a dump then,
                // or that wake-up is lost.
                if !inner.dump_borrowed.load(Ordering::Acquire) {
                    // A dump may still have left a request we did not
                    // serve; answer it so the dump does not wait for us.
                    if !inner.capture_job.load(Ordering::Acquire).is_null() {
                        crate::dump::capture_here(inner);
                    }
                    break;
                }
                inner.dump_borrowed.store(false, Ordering::Relaxed);
                // Borrowed by a thread dump: record the stack, park again
                // (our timer, if any, is still pending), unless a real
                // unpark arrived meanwhile.
                crate::dump::capture_here(inner);
                if inner.park.begin_park() == crate::park::BeginPark::Consumed {
                    break;
                }
                inner.state.store(State::Parking as u8, Ordering::Relaxed);
                s = Suspend::Park;
            }
            if deadline.is_some() {
                inner.timer_seq.fetch_add(1, Ordering::Relaxed);
            }
        }
        None => with_os_thread(|t| {
            if t.is_interrupted() {
                return;
            }
            t.set_state(State::Parked);
            match deadline {
                None => std::thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if d > now {
                        std::thread::park_timeout(d - now);
                    }
                }
            }
            t.set_state(State::Running);
        }),
    }
}

/// Switches from the virtual thread to its carrier, handing it `s`.
#[inline(never)]
pub(crate) fn suspend(inner: &Inner, s: Suspend) {
    let marker = 0u8;
    let sp = &marker as *const u8 as usize;
    if sp < inner.low_sp.load(Ordering::Relaxed) {
        inner.low_sp.store(sp, Ordering::Relaxed);
    }
    // Per-OS-thread context (tracing spans, registered hooks) leaves the
    // carrier with us and comes back when we do.
    let context = crate::context::unmount();
    // A panic being unwound belongs to the OS thread's panic count, which
    // the other virtual threads of this carrier see while we are away.
    let unwinding = sched::suspend_unwinding(inner);
    let y = inner.yielder.get();
    // SAFETY: `yielder` was set when this coroutine started and points into
    // its own stack, which is the stack we are running on now; it is valid
    // for the coroutine's whole life.
    unsafe { (*y).suspend(s) };
    if unwinding {
        sched::resume_unwinding();
    }
    crate::context::mount(context);
}

/// Whether the calling thread is unwinding a panic: `std::thread::panicking`
/// for the calling *virtual* thread.
///
/// Rust counts panics per OS thread. A virtual thread that blocks while it
/// unwinds (a `Drop` that takes a contended [`weft::sync::Mutex`](crate::sync::Mutex))
/// leaves that count raised on its carrier, so `std::thread::panicking()`
/// answers `true` to every other virtual thread that runs there meanwhile.
/// This function subtracts the carrier's suspended unwinders; weft's locks
/// use it for poisoning. When two virtual threads of one carrier unwind at
/// once, the one not suspended may be reported as not panicking (its
/// locks are then not poisoned), never the other way round.
pub fn panicking() -> bool {
    if !std::thread::panicking() {
        return false;
    }
    match current_virtual() {
        None => true,
        Some(inner) => inner.unwinding.get() || sched::suspended_unwinders() == 0,
    }
}

/// Takes a PARKED virtual thread off its park for a thread dump and
/// schedules it; false if it was not parked (then nothing happened).
pub(crate) fn borrow_parked(t: &Arc<Inner>) -> bool {
    let Kind::Virtual { rt, .. } = &t.kind else {
        return false;
    };
    if !t.park.borrow_parked() {
        return false;
    }
    // Before scheduling: the thread reads it when it resumes.
    t.dump_borrowed.store(true, Ordering::Release);
    set_inner_state(t, State::Runnable);
    // SAFETY: moving the thread out of PARKED made the count its carrier
    // leaked at park ours (as in `Thread::unpark`).
    let task = unsafe { Arc::from_raw(Arc::as_ptr(t)) };
    rt.schedule(task);
    true
}

/// The calling thread's id as a number (virtual or OS).
pub(crate) fn current_id() -> u64 {
    match current_virtual() {
        Some(inner) => inner.id.0.get(),
        None => with_os_thread(|t| t.inner.id.0.get()),
    }
}

/// Whether the current thread's interrupt flag is set (not cleared).
pub(crate) fn current_interrupted() -> bool {
    match current_virtual() {
        Some(inner) => inner.interrupted.load(Ordering::SeqCst),
        None => with_os_thread(|t| t.is_interrupted()),
    }
}

/// Clears the current thread's interrupt flag, returning whether it was set.
pub(crate) fn take_interrupt() -> bool {
    match current_virtual() {
        Some(inner) => inner.interrupted.swap(false, Ordering::SeqCst),
        None => with_os_thread(|t| t.clear_interrupt()),
    }
}

/// Returns whether the current thread was interrupted, and clears the flag
/// (Java's `Thread.interrupted()`).
pub fn interrupted() -> bool {
    take_interrupt()
}

/// Puts the current thread to sleep for at least `dur`.
///
/// Unlike `std::thread::sleep` this returns a `Result`: if the thread is
/// interrupted (before or during the sleep) it returns
/// `Err(ErrorKind::Interrupted)` and clears the flag.
pub fn sleep(dur: Duration) -> io::Result<()> {
    let Some(deadline) = Instant::now().checked_add(dur) else {
        // Effectively forever.
        loop {
            park();
            if take_interrupt() {
                return Err(interrupted_error());
            }
        }
    };
    loop {
        if take_interrupt() {
            return Err(interrupted_error());
        }
        if Instant::now() >= deadline {
            return Ok(());
        }
        with_blocker(Blocker::Sleep(deadline), || park_deadline(Some(deadline)));
    }
}

/// Like [`sleep`], until `deadline`.
pub fn sleep_until(deadline: Instant) -> io::Result<()> {
    sleep(deadline.saturating_duration_since(Instant::now()))
}

pub(crate) fn interrupted_error() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "weft: thread interrupted")
}

/// Gives up the carrier: the current virtual thread goes to the back of the
/// run queue. On an OS thread, `std::thread::yield_now`.
pub fn yield_now() {
    match current_virtual() {
        // Inside `weft::pinned` the thread keeps its carrier.
        Some(inner) if inner.pin_depth.get() == 0 => {
            inner.state.store(State::Yielding as u8, Ordering::Relaxed);
            suspend(inner, Suspend::Yield);
        }
        _ => std::thread::yield_now(),
    }
}

// ---------------------------------------------------------------------------
// Spawning and joining.

/// Result slot shared by a thread and its `JoinHandle`.
pub(crate) struct Packet<T> {
    /// 0 = running, 1 = a joiner is registered, 2 = done.
    state: AtomicU8,
    result: UnsafeCell<Option<std::thread::Result<T>>>,
    joiner: UnsafeCell<Option<Thread>>,
}

const P_RUNNING: u8 = 0;
const P_WAITING: u8 = 1;
const P_DONE: u8 = 2;

// SAFETY: `result` is written once by the finishing thread before it
// publishes P_DONE (release) and read only by the joiner after observing
// P_DONE (acquire). `joiner` is written by the joiner before publishing
// P_WAITING and read by the finisher only after observing P_WAITING.
unsafe impl<T: Send> Sync for Packet<T> {}
// SAFETY: as above; T: Send is required to move the result across threads.
unsafe impl<T: Send> Send for Packet<T> {}

impl<T> Packet<T> {
    pub(crate) fn new() -> Arc<Packet<T>> {
        Arc::new(Packet {
            state: AtomicU8::new(P_RUNNING),
            result: UnsafeCell::new(None),
            joiner: UnsafeCell::new(None),
        })
    }

    /// Stores the result and wakes the joiner. Called exactly once.
    pub(crate) fn complete(&self, r: std::thread::Result<T>) {
        // SAFETY: only the finishing thread writes `result`, once, before
        // publishing P_DONE; nobody reads it before P_DONE.
        unsafe { *self.result.get() = Some(r) };
        if self.state.swap(P_DONE, Ordering::AcqRel) == P_WAITING {
            // SAFETY: the joiner wrote `joiner` before its release CAS to
            // P_WAITING, which our AcqRel swap observed; it no longer touches it.
            if let Some(t) = unsafe { (*self.joiner.get()).take() } {
                t.unpark();
            }
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == P_DONE
    }

    /// Waits for the result. Called at most once.
    pub(crate) fn wait(&self) -> std::thread::Result<T> {
        if !self.is_done() {
            // SAFETY: only the single joiner writes `joiner`, before
            // publishing P_WAITING; the finisher reads it only after that.
            unsafe { *self.joiner.get() = Some(current()) };
            if self
                .state
                .compare_exchange(P_RUNNING, P_WAITING, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                while !self.is_done() {
                    // Join is not interruptible (like std); an interrupt
                    // must not turn this into a spin, so we clear-and-restore.
                    let was = take_interrupt();
                    park_deadline(None);
                    if was {
                        current().interrupt_flag_restore();
                    }
                }
            }
        }
        // SAFETY: P_DONE observed with acquire; the finisher wrote `result`
        // before its release and never touches it again.
        unsafe { (*self.result.get()).take() }.expect("weft: join result taken twice")
    }
}

/// An owned permission to join a thread (virtual or an executor's OS
/// thread). Dropping it detaches the thread.
pub struct JoinHandle<T> {
    pub(crate) packet: Arc<Packet<T>>,
    pub(crate) thread: Thread,
}

impl<T> JoinHandle<T> {
    /// Waits for the thread to finish. `Err` carries the panic payload if it
    /// panicked. Not interruptible, like `std::thread::JoinHandle::join`.
    pub fn join(self) -> std::thread::Result<T> {
        let id = self.thread.id().as_u64().get();
        with_blocker(Blocker::Join(id), || self.packet.wait())
    }

    /// The thread's handle.
    pub fn thread(&self) -> &Thread {
        &self.thread
    }

    /// Whether the thread has finished running its closure.
    pub fn is_finished(&self) -> bool {
        self.packet.is_done()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("thread", &self.thread)
            .finish_non_exhaustive()
    }
}

/// Configures a new virtual thread: name, stack size, runtime.
#[derive(Debug, Default)]
#[must_use = "a Builder does nothing until `spawn` is called"]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    container: u64,
}

impl Builder {
    /// A builder with default settings.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the thread (shown in panics, dumps and events).
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = Some(name.into());
        self
    }

    /// Puts the thread in a dump container (executor or scope).
    pub(crate) fn container(mut self, id: u64) -> Builder {
        self.container = id;
        self
    }

    /// Reserves at least `size` bytes of stack (rounded up to a power of
    /// two, at least 16 KiB, at most 1 GiB). Memory is
    /// committed only as the stack grows.
    pub fn stack_size(mut self, size: usize) -> Builder {
        self.stack_size = Some(size);
        self
    }

    /// Spawns a virtual thread on the default runtime.
    ///
    /// Returns an error, never aborts, when memory or address space for the
    /// stack cannot be had, or the default runtime cannot start.
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let rt = crate::runtime::default_runtime()?;
        self.spawn_on(&rt, f)
    }

    /// Spawns a virtual thread on `rt`.
    pub fn spawn_on<F, T>(self, rt: &Runtime, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // SAFETY: F and T are 'static, so nothing borrowed can dangle.
        unsafe { self.spawn_unchecked(rt, f) }
    }

    /// Spawns without the `'static` bound.
    ///
    /// # Safety
    /// Everything `f` borrows must outlive the thread: the caller must join
    /// it (as `weft::scope` does) before those borrows end.
    pub(crate) unsafe fn spawn_unchecked<'a, F, T>(
        self,
        rt: &Runtime,
        f: F,
    ) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'a,
        T: Send + 'a,
    {
        // An explicit size is reserved now (rare; its own pool); the default
        // stack is taken at first run (see `CoroSlot`).
        let stack = match self.stack_size {
            Some(_) => Some(rt.alloc_stack(self.stack_size)?),
            None => {
                rt.promise_stack()?;
                None
            }
        };
        let thread = Thread::new_virtual(self.name, rt.clone(), self.container);
        let packet: Arc<Packet<T>> = Packet::new();
        let their_packet = Completer {
            packet: Some(packet.clone()),
        };
        let body = move |y: &corosensei::Yielder<(), Suspend>, (): ()| {
            let me = current_virtual().expect("weft: coroutine started off its carrier");
            me.yielder.set(y as *const _);
            let r = catch_unwind(AssertUnwindSafe(f));
            // What follows runs user `Drop`s too (`local!` values; the
            // result or panic payload of a detached thread, dropped inside
            // `complete`). A panic there must not unwind into the carrier:
            // abort with a message, as std does for a panicking thread-local
            // destructor or thread result.
            let finish = catch_unwind(AssertUnwindSafe(move || {
                // Drop weft::local! values while still on this thread.
                // SAFETY: locals are only touched by the running thread.
                unsafe { (*me.locals.get()).clear() };
                if let Kind::Virtual { rt, .. } = &me.kind {
                    rt.thread_finished();
                }
                // Before the joiner can return: it may look at our state.
                set_inner_state(me, State::Terminated);
                their_packet.complete(r);
            }));
            if finish.is_err() {
                abort_after_drop_panic(me);
            }
        };
        // SAFETY: the caller guarantees that everything `body` borrows
        // outlives the coroutine (see above); corosensei's only extra
        // requirement is that the coroutine is run to completion or dropped
        // before those borrows end, which joining guarantees.
        let body: BodyFor<'a> = Box::new(body);
        // SAFETY: lifetime erasure only; see `CoroSlot::get` for why the
        // borrows stay valid for as long as the coroutine runs.
        let body: Body = unsafe { std::mem::transmute(body) };
        if let Kind::Virtual { coro: slot, .. } = &thread.inner.kind {
            // SAFETY: the thread is not yet visible to any carrier.
            unsafe { *slot.get() = CoroSlot::Pending(stack, body) };
        }
        thread.set_state(State::Started);
        crate::dump::register(&thread.inner);
        rt.spawn_thread(thread.inner.clone());
        Ok(JoinHandle { packet, thread })
    }
}

/// A `Drop` panicked after a virtual thread's body had returned.
#[cold]
pub(crate) fn abort_after_drop_panic(inner: &Inner) -> ! {
    let (name, id) = Thread::peek_name_id(inner);
    eprintln!(
        "weft: virtual thread #{id} '{}' panicked while dropping its `local!` values or its result; aborting",
        name.unwrap_or("")
    );
    std::process::abort()
}

/// Spawns a virtual thread on the default runtime and returns its handle.
///
/// # Panics
/// If the thread cannot be created (out of memory or address space, or the
/// default runtime failed to start, e.g. a bad `WEFT_*` variable); use
/// [`Builder::spawn`] to get the error instead, as with `std::thread::spawn`.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new()
        .spawn(f)
        .unwrap_or_else(|e| panic!("weft::spawn failed: {e}"))
}

impl Thread {
    /// Name and id of a thread, without allocating (for signal handlers).
    pub(crate) fn peek_name_id(inner: &Inner) -> (Option<&str>, u64) {
        (inner.name.as_deref(), inner.id.0.get())
    }
}

impl Inner {
    /// The scheduler of a virtual thread's runtime.
    pub(crate) fn runtime_shared(&self) -> Option<&Arc<crate::sched::Shared>> {
        match &self.kind {
            Kind::Virtual { rt, .. } => Some(rt.shared()),
            Kind::Os(_) => None,
        }
    }

    /// The carrier a virtual thread is bound to, if any.
    pub(crate) fn home_carrier(&self) -> Option<usize> {
        let h = self.home.load(Ordering::Relaxed);
        (h != NO_HOME).then_some(h as usize)
    }
}

pub(crate) fn inner_state(inner: &Inner) -> State {
    State::from_u8(inner.state.load(Ordering::Relaxed))
}

pub(crate) fn inner_blocker(inner: &Inner) -> Blocker {
    inner.blocker.get()
}

pub(crate) fn set_inner_state(inner: &Inner, s: State) {
    inner.state.store(s as u8, Ordering::Relaxed);
}
