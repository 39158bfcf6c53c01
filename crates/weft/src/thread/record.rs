//! The virtual-thread record, [`VThread`]: everything the runtime keeps about
//! one thread, and its coroutine slot.
//!
//! Who touches which field when is written on each field. In short: the
//! identity (`id`, `rare.name`, `container`) is immutable; the coroutine, the
//! yielder, the locals, `pin_depth` and `unwinding` belong to the thread
//! itself or to the one carrier that has it mounted; `park` is the park
//! state machine (`crate::park`), the only hand-off between a waker and the
//! carrier; everything else is atomic and documented on the field. The
//! scheduler's queues hold the record as `RecordArc`; the record holds its
//! scheduler as an `Arc<dyn Schedule>` (`schedule.rs`), never its type.
//!
//! What the record is made of sits below it, in files that do not name it:
//! its identity (`id.rs`), life cycle (`state.rs`), blocker (`blocker.rs`)
//! and `local!` storage (`locals.rs`). Only `schedule.rs`, the contract
//! with the scheduler, names the record back: its calls take the record.
//! The handle (`handle.rs`) and the calling thread (`current.rs`) are
//! built on top.

use super::record_ref::RecordArc;
use std::cell::{Cell, UnsafeCell};
use std::io;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use super::blocker::{Blocker, BlockerCell};
use super::id::ThreadId;
use super::locals::Locals;
use super::schedule::{Schedule, Suspend};
use super::state::State;
use crate::park::ParkState;

/// What a virtual thread runs: its coroutine, owned by whichever carrier has
/// it mounted (exclusive by the scheduling protocol).
pub(crate) type Coro = corosensei::Coroutine<(), Suspend, (), crate::stack::Stack>;

/// How a spawned thread starts: implemented in `life.rs` for each body
/// and result type, type-erased here so that the record is not generic.
/// The closure itself lives in the record's `payload` when it fits there
/// (no allocation of its own) or in the box that implements this trait.
pub(crate) trait Start: Send {
    /// Runs the body on the calling virtual thread (its first run, on its
    /// own stack) and completes its join.
    fn run(self: Box<Self>, y: &corosensei::Yielder<(), Suspend>);
    /// Drops the body of `me` without running it (its join is the
    /// caller's business: see [`Body`]).
    fn discard(self: Box<Self>, me: &VThread);
}

/// A spawned thread's body until its first run.
///
/// Exactly one of [`Start::run`] and [`Start::discard`] happens: the
/// carrier that first runs the thread runs it; one that cannot (no stack)
/// discards it and completes the join with an error (`Carrier::fail_start`),
/// and a record dropped with its body unrun (the runtime went away first:
/// no handle is left, or the record would be alive) discards it in
/// `VThread`'s `Drop`. Dropping a `Body` otherwise leaks the closure (a
/// body kept in `payload` cannot be found from here), never frees it
/// twice. Its lifetime is erased (`'static` here): see `CoroSlot::get`.
pub(crate) struct Body(Option<Box<dyn Start>>);

impl Body {
    pub(crate) fn new(start: Box<dyn Start>) -> Body {
        Body(Some(start))
    }

    /// Discards the body of `me`, if it has one (see [`Body`]).
    pub(crate) fn discard(&mut self, me: &VThread) {
        if let Some(s) = self.0.take() {
            s.discard(me);
        }
    }
}

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
/// running and `join` returns `Err` with the reason (see [`Body`]).
///
/// Two variants, not three: a finished slot (or one not yet set up) is
/// `Pending` with neither stack nor body ([`CoroSlot::EMPTY`]), so that the
/// enum needs no tag word beside the coroutine's (8 bytes of every record).
pub(crate) enum CoroSlot {
    /// Spawned, never run (`None`: take a default-size stack at first
    /// run); without a body, finished or not yet set up.
    Pending(Option<crate::stack::Stack>, Body),
    /// Started.
    Running(Coro),
}

impl CoroSlot {
    /// A finished slot, or one not yet set up.
    pub(crate) const EMPTY: CoroSlot = CoroSlot::Pending(None, Body(None));

    /// Whether the thread has a body that has not run yet.
    pub(crate) fn is_unstarted(&self) -> bool {
        matches!(self, CoroSlot::Pending(_, Body(Some(_))))
    }

    /// The coroutine, building it on first use with the reserved stack or,
    /// if none was reserved, one from `alloc`. On error the slot is left
    /// `Pending`.
    ///
    /// `area`: bytes to keep at the top of a new stack for the thread's
    /// thread-local area (`tls/`; 0 for none). The second value is the
    /// slot's top and the stack's lowest usable byte when such a reserve
    /// was made now. A stack too small to keep the area and
    /// [`MIN_STACK_LEFT`](crate::stack::MIN_STACK_LEFT) below it is
    /// exchanged for a slot of a larger pool
    /// ([`with_room_for`](crate::stack::with_room_for)): every thread of a
    /// runtime with areas gets one, whatever its static TLS size.
    pub(crate) fn get(
        &mut self,
        alloc: impl FnOnce() -> io::Result<crate::stack::Stack>,
        area: usize,
    ) -> io::Result<(&mut Coro, Option<(usize, usize)>)> {
        let mut area_top = None;
        if let CoroSlot::Pending(stack, body) = self {
            assert!(
                body.0.is_some(),
                "weft: runnable thread without a coroutine"
            );
            let mut stack = match stack.take() {
                Some(s) => s,
                None => alloc()?,
            };
            if area > 0 {
                if !stack.reserve_top(area) {
                    stack = crate::stack::with_room_for(stack, area)?;
                }
                area_top = Some((stack.base_addr(), stack.limit_addr()));
            }
            let CoroSlot::Pending(_, Body(Some(body))) = std::mem::replace(self, CoroSlot::EMPTY)
            else {
                unreachable!()
            };
            // A thread starts with errno 0, as glibc's do: libc's block,
            // errno's home, is the carrier's (mirrored), and still holds
            // what the carrier's previous thread left there.
            let start = move |y: &corosensei::Yielder<(), Suspend>, ()| {
                crate::errno::set(0);
                body.run(y)
            };
            // SAFETY: `body`'s true lifetime was erased in `spawn_unchecked`,
            // whose caller guarantees the borrows outlive the thread;
            // corosensei's extra requirement (run to completion or drop
            // before the borrows end) holds because joining waits for it.
            *self = CoroSlot::Running(unsafe { Coro::with_stack_unchecked(stack, start) });
        }
        match self {
            CoroSlot::Running(c) => Ok((c, area_top)),
            _ => panic!("weft: runnable thread without a coroutine"),
        }
    }
}

pub(crate) enum Kind {
    /// A virtual thread and the runtime it belongs to.
    Virtual {
        /// The thread's runtime, as what the record asks of it
        /// ([`Schedule`]): a clone of the runtime's own handle (so spawning
        /// allocates nothing for it, and the record does not depend on the
        /// layer above it). It also keeps the runtime running: the runtime
        /// stops only when no thread of it is left. And it is how
        /// `weft::spawn` finds the caller's runtime (`runtime::current`).
        sched: Arc<dyn Schedule>,
        /// SAFETY (field invariant): accessed only by the carrier that has
        /// the thread mounted or is publishing its suspension; the park state
        /// machine and run queues hand the thread to one carrier at a time.
        coro: UnsafeCell<CoroSlot>,
    },
    /// An OS thread (or a task of a fixed OS-thread pool, bound to its
    /// worker when it starts); blocks with `std::thread::park`.
    Os(OnceLock<std::thread::Thread>),
}

/// [`VThread::home`] of a thread that is not bound to a carrier.
pub(crate) const NO_HOME: u32 = u32::MAX;

pub(crate) struct VThread {
    pub(super) id: ThreadId,
    /// The name, the activity and the pinned waiter (see [`Rare`]).
    pub(crate) rare: RareCell,
    pub(crate) kind: Kind,
    pub(super) state: AtomicU8,
    pub(crate) park: ParkState,
    pub(super) interrupted: AtomicBool,
    /// Bumped whenever a timed park ends, so a stale timer cannot unpark a
    /// later park. It still may: after 2^32 timed parks of this thread the
    /// sequence wraps, and a timer left from 2^32 parks ago (ended early,
    /// not yet due nor compacted away) matches again. That is a spurious
    /// wakeup, which `park` allows and every caller of a timed park
    /// (`sleep`, the `weft::sync` waits) loops on; 32 bits instead of 64
    /// keep the record 8 bytes smaller with `reg_key`.
    pub(crate) timer_seq: AtomicU32,
    /// Yielder of the coroutine (set once when it starts).
    pub(crate) yielder: Cell<*const corosensei::Yielder<(), Suspend>>,
    /// The low 32 bits of the lowest stack address seen at a suspension
    /// point, 0 before the first (for trimming: `Carrier::finish`). A
    /// stack is at most 1 GiB, so any two of its addresses differ by less
    /// than 2^31 and 32 bits compare them ([`VThread::note_sp`]), and its
    /// base and these bits give the depth ([`VThread::stack_depth`]).
    /// Written by the thread itself, read by the carrier it finished on.
    pub(crate) low_sp: AtomicU32,
    /// The thread pointer of the thread's own thread-local area (`tls/`),
    /// or 0 (none: it shares its carrier's). Set by the carrier that first
    /// runs the thread, read by that carrier on every mount.
    pub(crate) tls_tp: Cell<usize>,
    /// What the thread is blocked on, for dumps (set around waits by the
    /// primitive that parks).
    pub(crate) blocker: BlockerCell,
    /// Depth of `weft::pinned` sections (touched only by the thread).
    pub(crate) pin_depth: Cell<u32>,
    /// Index of the carrier this thread is bound to ([`NO_HOME`] until its
    /// first run, after a handoff released it until it runs again, and for
    /// ever on a runtime that allows migration). Written by whoever owns
    /// the thread — the carrier that runs it (binding), or the party that
    /// took it from a queue or from the park state machine (a handoff's
    /// release) — and read by whoever owns it next (the hand-offs'
    /// acquire/release orders the two).
    pub(crate) home: AtomicU32,
    /// The thread suspended while its carrier's OS thread was unwinding a
    /// panic on its behalf (see `crate::thread::panicking`). Touched only
    /// by the thread itself.
    pub(crate) unwinding: Cell<bool>,
    /// The thread never changes OS thread (`stay.rs`): it has no
    /// thread-local area of its own, asked to (`weft::stay_on_carrier`),
    /// changed kernel state kept per OS thread, or suspended while
    /// unwinding. Set by the thread itself or by the carrier that binds it,
    /// while it owns the thread; read by whoever owns the thread next (a
    /// queue's or the park state machine's hand-off orders the two).
    pub(crate) stays: AtomicBool,
    /// Set by a thread dump that moved the thread out of PARKED to record
    /// its stack (see `borrow_parked`); consumed by the thread when it
    /// resumes. Tells a dump's borrow from a real wake-up.
    pub(crate) dump_borrowed: AtomicBool,
    /// Set while the thread waits on its carrier's OS thread (pinned); the
    /// OS thread to unpark is in `rare.pinned_waiter`.
    pub(crate) pinned_waiting: AtomicBool,
    /// Slot in the dump registry: the shard in the low 4 bits, the index
    /// in that shard's vector above them (28 bits: 268 million live
    /// threads per shard). Written by the spawner before the thread can
    /// run, read by the carrier that unregisters it.
    pub(crate) reg_key: AtomicU32,
    /// Dump container (0 = root; an executor or a scope otherwise): the
    /// registry's ids are 32 bits (`registry::new_container`).
    container: u32,
    /// The join slot's state (`join.rs`): running, a joiner waits, done
    /// (with a value or a panic), or the handle is gone. It hands
    /// `joiner` and `payload` from one side to the other.
    pub(crate) join_state: AtomicU8,
    /// The thread waiting in `join` (`join.rs`).
    pub(crate) joiner: UnsafeCell<Option<RecordArc>>,
    /// The body, before the thread starts, when it fits; the result, once
    /// it has finished (`join.rs`, "Payload"). Spawning a thread whose
    /// closure fits allocates nothing but the record.
    pub(crate) payload: UnsafeCell<MaybeUninit<Payload>>,
}

/// What [`VThread::payload`] holds: two words.
pub(crate) type Payload = [usize; 2];

impl Drop for VThread {
    /// A body that never ran is dropped with its record (see [`Body`]).
    fn drop(&mut self) {
        if let Kind::Virtual { coro, .. } = &mut self.kind
            && let CoroSlot::Pending(_, body) = coro.get_mut()
        {
            let mut body = std::mem::replace(body, Body(None));
            body.discard(self);
        }
    }
}

/// A record's rarely used fields, in a box of their own that only threads
/// using one of them pay for: 8 bytes in every record instead of 96 (a
/// named thread allocates it at spawn, the first `set_activity`, pinned
/// wait or `local!` use on an unnamed one, or a dump's request to record
/// its stack). Multiplied by a million
/// records it is memory and first-touched pages.
#[derive(Default)]
pub(crate) struct Rare {
    /// The thread's name; set only when the record is created.
    pub(crate) name: Option<Box<str>>,
    /// What the thread says it is doing (`weft::set_activity`), for dumps.
    /// Written by the thread itself, read by a dump; the lock is never
    /// held across a park.
    pub(crate) activity: std::sync::Mutex<String>,
    /// The OS thread to unpark while the thread waits pinned
    /// (`VThread::pinned_waiting`).
    pub(crate) pinned_waiter: std::sync::Mutex<Option<std::thread::Thread>>,
    /// `weft::local!` storage. Touched only by the thread itself (and
    /// cleared by it as it finishes).
    pub(crate) locals: UnsafeCell<Locals>,
    /// A thread dump's request to record this thread's stack (an
    /// `Arc<CaptureJob>` as a raw pointer), or null: the fallback of a dump
    /// that cannot read a parked stack in place (`thread/capture.rs`).
    pub(crate) capture_job: std::sync::atomic::AtomicPtr<()>,
    /// The waker of the future that awaits the thread's `JoinHandle`
    /// (`join_async.rs`), while the join state says one waits.
    pub(crate) async_joiner: std::sync::Mutex<Option<std::task::Waker>>,
}

// SAFETY: `locals`, the one field that is neither `Sync` nor `Send`, is
// touched only by its own thread, wherever that runs (as `VThread`'s
// thread-owned fields); the rest are `Sync` and `Send`.
unsafe impl Sync for Rare {}
// SAFETY: as above.
unsafe impl Send for Rare {}

/// Where a record keeps its [`Rare`] fields: empty until first needed, then
/// installed once (lock-free: racing first uses allocate, one box wins) and
/// freed with the record, so a `&Rare` lives as long as the `&VThread` it
/// came from.
pub(crate) type RareCell = once_cell::race::OnceBox<Rare>;

/// A new record's [`RareCell`]: allocated now only for a name.
fn rare_cell(name: Option<Box<str>>) -> RareCell {
    match name {
        None => RareCell::new(),
        Some(n) => RareCell::with_value(Box::new(Rare {
            name: Some(n),
            ..Rare::default()
        })),
    }
}

// SAFETY: the non-Sync fields (`coro`, `yielder`, `locals`, `pin_depth`,
// `unwinding`) are only touched by the thread itself or the one carrier that
// owns it at that moment, as documented on each field; `joiner` and
// `payload` are handed between the spawner, the thread, its joiner and its
// handle by `join_state` (`join.rs`); everything else is atomic or
// immutable.
unsafe impl Sync for VThread {}
// SAFETY: the record moves between OS threads as a handle (wakers, join
// handles, run queues). Its coroutine, which holds the thread's stack and so
// values that may be tied to an OS thread, runs on one carrier at a time
// (the run queues and the park state machine hand it over with
// release/acquire). It changes OS thread only off a stalled carrier, and only
// when everything it reaches through the thread pointer is its own (its
// thread-local area, refreshed by `tls::adopt`) and it changed no kernel
// per-thread state (`thread::may_move`); or on a runtime built with
// `RuntimeBuilder::allow_migration`, an `unsafe fn` whose caller takes on
// that obligation.
unsafe impl Send for VThread {}

impl VThread {
    /// A new record, of a thread that has not started (`State::New`).
    pub(super) fn new(name: Option<String>, kind: Kind, container: u64) -> VThread {
        VThread {
            id: ThreadId::next(),
            rare: rare_cell(name.map(String::into_boxed_str)),
            kind,
            state: AtomicU8::new(State::New as u8),
            park: ParkState::new(),
            interrupted: AtomicBool::new(false),
            timer_seq: AtomicU32::new(0),
            yielder: Cell::new(std::ptr::null()),
            low_sp: AtomicU32::new(0),
            tls_tp: Cell::new(0),
            blocker: BlockerCell::default(),
            pin_depth: Cell::new(0),
            home: AtomicU32::new(NO_HOME),
            unwinding: Cell::new(false),
            stays: AtomicBool::new(false),
            dump_borrowed: AtomicBool::new(false),
            pinned_waiting: AtomicBool::new(false),
            reg_key: AtomicU32::new(0),
            container: u32::try_from(container).expect("weft: container ids are 32 bits"),
            join_state: AtomicU8::new(0),
            joiner: UnsafeCell::new(None),
            payload: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Where a dump leaves its request to record this thread's stack
    /// (`Rare::capture_job`), made on first use.
    pub(crate) fn capture_slot(&self) -> &std::sync::atomic::AtomicPtr<()> {
        &self.rare.get_or_init(Box::default).capture_job
    }

    /// Takes a dump's request to record this thread's stack (null: none).
    /// A request is published after the box that holds it (`OnceBox`'s
    /// release), so a thread that finds no box has no request.
    pub(crate) fn take_capture_job(&self) -> *mut () {
        self.rare.get().map_or(std::ptr::null_mut(), |r| {
            r.capture_job.swap(std::ptr::null_mut(), Ordering::AcqRel)
        })
    }

    /// Whether a dump's request to record this thread's stack is waiting.
    pub(crate) fn capture_requested(&self) -> bool {
        self.rare
            .get()
            .is_some_and(|r| !r.capture_job.load(Ordering::Acquire).is_null())
    }

    /// The thread's dump container (0 = root).
    pub(crate) fn container(&self) -> u64 {
        u64::from(self.container)
    }

    /// Notes the stack pointer `sp` of a suspension (see `low_sp`).
    pub(crate) fn note_sp(&self, sp: usize) {
        let sp = sp as u32;
        let low = self.low_sp.load(Ordering::Relaxed);
        // Lower by less than 2^31 (the same stack): below the lowest yet.
        if low == 0 || (low.wrapping_sub(sp) as i32) > 0 {
            self.low_sp.store(sp, Ordering::Relaxed);
        }
    }

    /// How deep below `base`, its stack's top, the thread's stack went at
    /// its suspensions (0 if it never suspended).
    pub(crate) fn stack_depth(&self, base: usize) -> usize {
        match self.low_sp.load(Ordering::Relaxed) {
            0 => 0,
            low => (base as u32).wrapping_sub(low) as usize,
        }
    }

    /// The thread's name, if it has one.
    pub(super) fn name(&self) -> Option<&str> {
        self.rare.get().and_then(|r| r.name.as_deref())
    }

    /// The scheduler of a virtual thread's runtime, as the record holds it
    /// (`Kind::Virtual::sched`: the runtime's handle, which also keeps the
    /// runtime running). The scheduler's own view of it, as its own type,
    /// is `VThread::runtime_shared` (`sched/schedule.rs`).
    pub(crate) fn scheduler(&self) -> Option<&Arc<dyn Schedule>> {
        match &self.kind {
            Kind::Virtual { sched, .. } => Some(sched),
            Kind::Os(_) => None,
        }
    }

    /// The carrier a virtual thread is bound to, if any.
    pub(crate) fn home_carrier(&self) -> Option<usize> {
        let h = self.home.load(Ordering::Relaxed);
        (h != NO_HOME).then_some(h as usize)
    }
}

pub(crate) fn state_of(thread: &VThread) -> State {
    State::from_u8(thread.state.load(Ordering::Relaxed))
}

pub(crate) fn blocker_of(thread: &VThread) -> Blocker {
    thread.blocker.get()
}

pub(crate) fn set_state_of(thread: &VThread, s: State) {
    thread.state.store(s as u8, Ordering::Relaxed);
}

/// A `Drop` panicked after a virtual thread's body had returned.
#[cold]
pub(crate) fn abort_after_drop_panic(thread: &VThread) -> ! {
    eprintln!(
        "weft: virtual thread #{} '{}' panicked while dropping its `local!` values or its result; aborting",
        thread.id.0,
        thread.name().unwrap_or("")
    );
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rare_fields_are_allocated_once_and_only_when_needed() {
        let cell = rare_cell(None);
        assert!(cell.get().is_none());
        let c = &cell;
        // Racing first uses all get the one installed box.
        let ptrs: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(move || c.get_or_init(Box::default) as *const Rare as usize))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ptrs.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(cell.get().map(|r| r as *const Rare as usize), Some(ptrs[0]));
        let named = rare_cell(Some("n".into()));
        assert_eq!(named.get().unwrap().name.as_deref(), Some("n"));
    }

    /// `low_sp` keeps 32 bits: depths still come out right when the stack
    /// straddles a 4 GiB boundary.
    #[test]
    fn the_lowest_stack_pointer_survives_32_bits() {
        let t = VThread::new(None, Kind::Os(OnceLock::new()), 0);
        let base = (5usize << 32) + 0x1000;
        assert_eq!(t.stack_depth(base), 0, "never suspended");
        for sp in [
            base - 0x800,
            base - 0x2000,
            base - 0x1800,
            base - 0x1_0000,
            base - 0x40,
        ] {
            t.note_sp(sp);
        }
        assert_eq!(t.stack_depth(base), 0x1_0000);
        t.note_sp(base - (1 << 30));
        assert_eq!(t.stack_depth(base), 1 << 30);
    }

    /// Every parked thread carries one record, its only allocation: it
    /// stays small. 184 bytes on x86-64 when this was written (280 before
    /// `Rare`, 240 with the thread-local area's pointer; then the join slot
    /// and the body's payload moved in, +32, and the blocker's words, the
    /// coroutine slot's tag, `timer_seq`, `reg_key`, `low_sp` and
    /// `container` shrank and the `local!` vector and the dump's capture
    /// request moved to `Rare`, -80; the stack's top reserve went into its
    /// slot's low bit, -8). With its two 32-bit counts a record takes 192
    /// bytes of the record slab (`slab.rs`; an `Arc` took a 208-byte
    /// malloc chunk).
    #[test]
    fn the_record_stays_small() {
        assert!(
            size_of::<VThread>() <= 184,
            "VThread is {} bytes",
            size_of::<VThread>()
        );
    }
}
