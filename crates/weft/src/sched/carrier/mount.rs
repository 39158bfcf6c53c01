//! Running one virtual thread: [`Carrier::run`] in named steps.
//!
//! A thread taken from a queue either goes elsewhere before it starts
//! (placement, `steal.rs`), or gets its coroutine — a stack from the cache
//! and a thread-local area on its first run — is bound to this carrier if
//! it was not, is mounted and resumed until it suspends or returns, and is
//! unmounted; then the carrier carries out what it asked for (the suspend
//! protocol of `crate::park`: park, timed park, yield) or ends it.
//!
//! Mounted, a thread is named in three places, all written here by the
//! carrier's own thread: `thread::set_mounted` (what `current()` reads),
//! the slot's `mounted` pointer and `switches` count (what the monitor and
//! dumps read; the `inspect` handshake keeps the record alive while they
//! do, see `CarrierSlot::mounted_identity`).

use crate::thread::RecordArc;
use std::cell::Cell;
use std::sync::atomic::Ordering;

use corosensei::CoroutineResult;

use super::{Carrier, FINISHED_BATCH};
use crate::park::AfterSwitch;

use crate::sched::timers::TimerEntry;
use crate::stack::TRIM_DEPTH;
use crate::thread::{CoroSlot, Kind, NO_HOME, State, Suspend, VThread, set_state_of};

impl Carrier {
    /// Runs `thread` until it suspends or finishes, then carries out what it
    /// asked for (the suspend protocol).
    pub(in crate::sched) fn run(&self, thread: RecordArc) {
        let Kind::Virtual { coro, .. } = &thread.kind else {
            unreachable!("OS thread in a run queue")
        };
        // SAFETY: this carrier owns the thread exclusively (invariant 1), so no
        // one else touches its coroutine while it runs or until it is
        // published by `after_suspend`.
        let slot = unsafe { &mut *coro.get() };
        // Unbound: a thread about to start, or one moved off a held
        // carrier (handoff), which binds here.
        let bind = !self.shared.migrate && thread.home.load(Ordering::Relaxed) == NO_HOME;
        let starting = slot.is_unstarted();
        if bind
            && starting
            && let Some(to) = self.placement()
        {
            self.hand_over(to, thread);
            return;
        }
        if let Err(e) = self.prepare(&thread, slot) {
            self.fail_start(&thread, slot, e);
            return;
        }
        if bind {
            self.bind(&thread, starting);
        }
        // A started thread that binds here was moved by a handoff: its area
        // may name another carrier.
        let moved = bind && !starting;
        let result = self.mount(&thread, slot, moved);
        self.after_suspend(thread, slot, result);
    }

    /// Hands a thread about to start to carrier `to` (placement): started
    /// there, it will live there. Its inbox and kick, as for any wake-up of
    /// a bound thread; still unbound, it binds where it first runs, and
    /// until then the monitor may move it on if that carrier stalls (an
    /// unbound thread in an inbox has never run; `run_monitor`).
    fn hand_over(&self, to: usize, thread: RecordArc) {
        self.shared.placed.fetch_add(1, Ordering::Relaxed);
        self.shared.carriers[to].push_home(thread);
    }

    /// Builds the coroutine of a thread about to start — a stack from this
    /// carrier's cache (see `CoroSlot`) and, where areas are on, its
    /// thread-local area; nothing for a started thread.
    fn prepare(&self, thread: &RecordArc, slot: &mut CoroSlot) -> std::io::Result<()> {
        let area = self.areas.map_or(0, crate::tls::Layout::reserve);
        let first_stack = || {
            self.shared.stacks.fulfil();
            if crate::stack::has_room_for(self.shared.stacks, area) {
                self.alloc_default_stack()
            } else {
                // A static TLS larger than the default stack keeps room
                // for: a slot of a larger pool (`stack::with_room_for`).
                crate::stack::room_pool(self.shared.stacks, area).alloc()
            }
        };
        if let (_, Some((top, stack_lo))) = slot.get(first_stack, area)? {
            thread.tls_tp.set(self.make_area(top, stack_lo, thread));
        }
        Ok(())
    }

    /// Affinity: from now on `thread` runs on this carrier only, until a
    /// handoff moves it. A thread about to start that has no thread-local
    /// area it could take along (`thread::stay`) stays here for good.
    fn bind(&self, thread: &VThread, starting: bool) {
        thread.home.store(self.index as u32, Ordering::Relaxed);
        self.me().homed.fetch_add(1, Ordering::Relaxed);
        if starting && (thread.tls_tp.get() == 0 || !self.areas.is_some_and(|l| l.movable())) {
            thread.stays.store(true, Ordering::Relaxed);
        }
    }

    /// Mounts `thread`, resumes it (on its own thread-local area if it has
    /// one, adopted first if the thread `moved` here) until it suspends or
    /// returns, and unmounts it.
    fn mount(
        &self,
        thread: &RecordArc,
        slot: &mut CoroSlot,
        moved: bool,
    ) -> CoroutineResult<Suspend, ()> {
        let me = self.me();
        set_state_of(thread, State::Running);
        crate::thread::set_mounted(RecordArc::as_ptr(thread));
        me.mounted
            .store(RecordArc::as_ptr(thread).cast_mut(), Ordering::Relaxed);
        // Single writer: a plain increment, no locked instruction.
        me.switches.store(
            me.switches.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );

        // Between stacks from here until the thread lowers the flag (see
        // `sample.rs`); lowered again below when the thread comes back.
        crate::switching::set_switching(true);
        let tp = thread.tls_tp.get();
        let result = match (slot, self.areas) {
            (CoroSlot::Running(c), Some(l)) if tp != 0 => {
                // SAFETY: `tp` is the thread's area, made by `make_area` on
                // this carrier or, for a thread moved here by a handoff, on
                // another and adopted now, before the thread runs (areas
                // are off on runtimes that allow migration, where a thread
                // may move at any suspension); resuming touches no
                // thread-local of the carrier.
                unsafe {
                    if moved && crate::tls::adopt(l, tp) {
                        self.seed_carrier(tp);
                        me.moved.fetch_add(1, Ordering::Relaxed);
                    }
                    crate::tls::run_on(l, tp, || c.resume(()))
                }
            }
            (CoroSlot::Running(c), _) => c.resume(()),
            _ => unreachable!("started by `prepare`"),
        };
        crate::switching::set_switching(false);
        self.unmount();
        result
    }

    /// Clears what [`Carrier::mount`] set, once the thread is back.
    fn unmount(&self) {
        let me = self.me();
        crate::thread::set_mounted(std::ptr::null());
        me.mounted.swap(std::ptr::null_mut(), Ordering::SeqCst);
        // The monitor may be reading through `mounted`: keep the thread
        // alive until it is done (see `CarrierSlot::mounted_identity`; the
        // caller still holds it).
        while me.inspect.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        // The hold, if the monitor found one, is over: serve our threads
        // again. After the `mounted` swap above (the rule of
        // `stall::Handoff`).
        if me.handoff.hold_ended() {
            // Lowered during the hold (`demote.rs`): leave the slot.
            self.leaving.set(true);
        }
        if me.stalled.is_set() {
            // The monitor counted us as blocked while the thread held us.
            self.shared.blocked.clear(&me.stalled);
        }
    }

    /// Carries out what a thread asked for when it suspended, or ends it.
    fn after_suspend(
        &self,
        thread: RecordArc,
        slot: &mut CoroSlot,
        result: CoroutineResult<Suspend, ()>,
    ) {
        match result {
            CoroutineResult::Yield(Suspend::Park) => self.after_park(thread),
            CoroutineResult::Yield(Suspend::ParkUntil(deadline)) => {
                let seq = thread.timer_seq.load(Ordering::Relaxed);
                self.me().push_timer(TimerEntry {
                    deadline,
                    seq,
                    thread: RecordArc::downgrade(&thread),
                });
                self.after_park(thread);
            }
            CoroutineResult::Yield(Suspend::Yield) => {
                set_state_of(&thread, State::Runnable);
                self.push_back(thread);
            }
            CoroutineResult::Return(()) => self.finish(thread, slot),
        }
    }

    /// A thread whose body returned: its stack goes back to the cache
    /// (trimmed if it ran deep), and it leaves the registry with the next
    /// batch ([`Carrier::flush_finished`]).
    fn finish(&self, thread: RecordArc, slot: &mut CoroSlot) {
        set_state_of(&thread, State::Terminated);
        if thread.home.load(Ordering::Relaxed) != NO_HOME {
            self.me().homed.fetch_sub(1, Ordering::Relaxed);
        }
        let CoroSlot::Running(coro) = std::mem::replace(slot, CoroSlot::EMPTY) else {
            unreachable!("finished thread without a coroutine")
        };
        let stack = coro.into_stack();
        let tp = thread.tls_tp.get();
        if tp != 0 {
            // SAFETY: the thread's body has returned (its coroutine is
            // done), so nothing runs on its area any more; its stack, which
            // holds the area, goes back to the cache only below.
            let dtv = unsafe { crate::tls::release_area(tp) };
            let mut spares = self.spare_dtvs.borrow_mut();
            if spares.len() < super::SPARE_DTVS {
                spares.push(dtv);
            }
        }
        let deep = thread.stack_depth(stack.base_addr()) > TRIM_DEPTH;
        self.recycle_stack(stack, deep);
        // `live` was decremented by the thread itself, before it
        // completed its join (`Schedule::finished`).
        let mut finished = self.finished.borrow_mut();
        finished.push(thread);
        if finished.len() >= FINISHED_BATCH {
            drop(finished);
            self.flush_finished();
        }
    }

    /// Makes the thread-local area of a thread about to start here, at the
    /// top of its stack (`top`), and returns its thread pointer. The area
    /// gets this carrier's values of the scheduler's own thread-locals:
    /// code on the thread that asks "which carrier am I on" (or "what time
    /// is it", on a simulated carrier) reads them; and names `thread` as
    /// the mounted record (the only one that ever runs on
    /// this area).
    fn make_area(&self, top: usize, stack_lo: usize, thread: &RecordArc) -> usize {
        let l = self.areas.expect("areas are on");
        // SAFETY: the `reserve()` bytes below `top` were kept out of the
        // thread's stack (`CoroSlot::get`) and live as long as it; a
        // carrier it moves to later adopts the area (`tls::adopt`). The
        // seeded thread-locals are `const` Cells of this crate; the thread
        // has not run yet. It starts "between stacks" (its body lowers the
        // flag first thing; see `switching`).
        unsafe {
            let spare = self.spare_dtvs.borrow_mut().pop();
            let tp = crate::tls::init_area(l, top, stack_lo, spare);
            self.seed_carrier(tp);
            crate::tls::seed(tp, crate::switching::flag(), Cell::new(true));
            let (clock, now) = crate::clock::cell();
            crate::tls::seed(tp, clock, Cell::new(now));
            crate::tls::seed(
                tp,
                crate::thread::mounted_cell(),
                Cell::new(RecordArc::as_ptr(thread)),
            );
            tp
        }
    }

    /// Writes this carrier into the area at `tp` as the one it runs on
    /// (what `carrier()` reads there), and this carrier's record cache as
    /// the one code there allocates records from (`thread/record_ref.rs`).
    ///
    /// # Safety
    ///
    /// `tp` is an area made by `tls::init_area` whose thread is not running
    /// and is about to run on this carrier.
    unsafe fn seed_carrier(&self, tp: usize) {
        // SAFETY: `CARRIER` is a `const` Cell of this crate (the caller
        // gives the rest).
        unsafe {
            crate::tls::seed(
                tp,
                super::CARRIER.with(|c| c as *const _),
                Cell::new(self as *const Carrier),
            );
            crate::thread::seed_cache(tp);
        };
    }

    /// A thread that cannot get a stack ends without running: its body is
    /// dropped, and its join completed with `Err(why)`.
    #[cold]
    pub(in crate::sched) fn fail_start(
        &self,
        thread: &RecordArc,
        slot: &mut CoroSlot,
        e: std::io::Error,
    ) {
        let why = format!(
            "weft: virtual thread #{} could not start: no stack: {e}",
            crate::thread::Thread::peek_name_id(thread).1
        );
        eprintln!("{why}");
        set_state_of(thread, State::Terminated);
        if thread.home.load(Ordering::Relaxed) != NO_HOME {
            // Bound by placement before its first run (on this carrier).
            self.me().homed.fetch_sub(1, Ordering::Relaxed);
        }
        crate::thread::registry::unregister(thread);
        // Dropping the body runs user `Drop`s: never unwind into the carrier.
        // The body goes before the join completes (a scoped joiner may end
        // its borrows then).
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if let CoroSlot::Pending(_, body) = slot {
                body.discard(thread);
            }
            *slot = CoroSlot::EMPTY;
        }));
        if dropped.is_err() {
            crate::thread::abort_after_drop_panic(thread);
        }
        crate::thread::complete_unrun(thread, why);
        self.shared.thread_finished();
    }

    pub(in crate::sched) fn after_park(&self, thread: RecordArc) {
        set_state_of(&thread, State::Parked);
        match thread.park.publish_parked() {
            // Whoever unparks it owns it now: our strong count goes with it
            // (taken back by `Thread::unpark` or the timer that fires), which
            // saves a clone and a drop on every hand-off.
            AfterSwitch::Parked => std::mem::forget(thread),
            AfterSwitch::Reschedule => self.push_next(thread),
        }
    }
}
