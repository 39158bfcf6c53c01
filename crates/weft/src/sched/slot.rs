//! A carrier's slot: the part of a carrier that other threads may touch.
//!
//! [`CarrierSlot`] lives in the runtime's [`Shared`](super::shared::Shared), one per
//! carrier index (core carriers and spares alike). Its owner, the carrier
//! thread, pops the inbox, runs what it takes and writes
//! `mounted`/`switches`; anyone may push to the inbox and kick the
//! carrier (the inbox handshake, invariant 5 in `mod.rs`); a handoff, and
//! a carrier covering for this one (`Carrier::cover`), pop it too, and
//! whoever pops a thread owns it; a thief may take
//! the `next` slot on a runtime that allows migration; the monitor reads
//! the counters, and the mounted thread only under the `inspect` handshake
//! ([`CarrierSlot::mounted_identity`]). Its timer queue is the one data
//! structure of `timers.rs`; pushing, peeking and firing are here.

use crate::doorbell::Ring;
use crate::thread::RecordArc;
use crate::unpoison::Unpoison;
use std::sync::Mutex;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
use std::time::Instant;

use crossbeam_deque::{Injector, Steal};

use super::timers::{SCAN_MIN, TimerEntry, TimerQueue, compact};
use crate::clock::ns_of;
use crate::thread::VThread;
use crate::thread::{NO_HOME, State, set_state_of};

/// A virtual thread as read off its carrier while it held it: its id, its
/// name, and what it said it was doing (`weft::set_activity`).
#[derive(Clone, Debug)]
pub(super) struct Identity {
    pub(super) id: u64,
    pub(super) name: Option<String>,
    pub(super) activity: Option<String>,
}

pub(super) struct CarrierSlot {
    /// Set by a notifier that removed this carrier from the sleeper list.
    pub(super) notified: AtomicBool,
    /// The LIFO `next` slot: an `RecordArc` turned into a raw pointer, or
    /// null. Atomic so that a thief can take it from a carrier that is stuck
    /// in one long-running thread (Go steals `runnext` the same way).
    pub(super) next: AtomicPtr<VThread>,
    /// Count of threads this carrier has mounted (the monitor compares
    /// snapshots to find a carrier stuck in one thread).
    pub(super) switches: AtomicU64,
    /// Timers of threads that parked on this carrier. Locked by the owner
    /// (uncontended) and, rarely, by the monitor when the owner is blocked.
    pub(super) timers: Mutex<TimerQueue>,
    /// The carrier's thread is pinned: inside `weft::blocking` or a pinned
    /// wait (the carrier counts as blocked meanwhile).
    pub(super) pinned: AtomicBool,
    /// The monitor counted this carrier as blocked (a stall); cleared, and
    /// uncounted, by the carrier when its thread next leaves it.
    pub(super) stalled: crate::stall::StallFlag,
    /// Earliest timer deadline (ns since `now_ns` epoch), `u64::MAX` if
    /// none: lets `find_local` skip the heap (and the clock) when empty.
    pub(super) timer_next: AtomicU64,
    /// Heap size at which `push_timer` next looks for stale entries
    /// (written under the `timers` lock).
    pub(super) timer_scan_at: AtomicUsize,
    /// `switches` value for which a stall was already reported.
    pub(super) reported: AtomicU64,
    /// Kernel thread id of the carrier (for /proc lookups).
    pub(super) tid: AtomicI32,
    /// A spare in keep-alive was picked for duty.
    pub(super) spare_wake: AtomicBool,
    /// What wakes the carrier when it sleeps, on its futex word or in the
    /// readiness source (`crate::doorbell`). Anyone who wants a sleeping
    /// carrier to look again rings it. Its own word, not the OS thread's
    /// park token: code running on the carrier thread can never consume a
    /// wake-up meant for the scheduler.
    pub(super) bell: crate::doorbell::Doorbell,
    /// The mounted thread, null when none (a borrowed pointer; the monitor
    /// reads through it only under the `inspect` handshake).
    pub(super) mounted: AtomicPtr<VThread>,
    /// Set by the monitor while it reads through `mounted`. A carrier that
    /// finds it set after a thread left it waits before letting go of that
    /// thread (see `mounted_identity`).
    pub(super) inspect: AtomicBool,
    /// Runnable threads bound to this carrier (affinity), and new threads
    /// placed here that have not started (still unbound; `Carrier::run`):
    /// only this carrier runs them; anyone may push (a wake-up from another
    /// carrier, an OS thread, a poll, the monitor's timers). Never stolen;
    /// the monitor takes the unstarted ones back to the injector when this
    /// carrier stalls (and puts the bound ones back).
    pub(super) inbox: Injector<RecordArc>,
    /// Set while the carrier sleeps (or waits off duty): a pusher to
    /// `inbox` that sees it kicks the carrier. Dekker-style with the
    /// inbox: the pusher publishes its thread then reads this (SeqCst); the
    /// carrier sets this then re-checks the inbox (SeqCst).
    pub(super) sleeping: AtomicBool,
    /// Live threads bound to this carrier. A spare carrier with bound
    /// threads cannot exit: it keeps serving them off duty.
    pub(super) homed: AtomicUsize,
    /// `switches` value for which a blocked-with-waiters event was recorded.
    pub(super) reported_waiters: AtomicU64,
    /// Why this carrier's threads that may move go elsewhere (handoff,
    /// ARCHITECTURE.md "Affinity and handoff"): held past the stall
    /// threshold (the monitor's mark) or a spare off duty.
    pub(super) handoff: crate::stall::Handoff,
    /// Threads a handoff moved onto this carrier from another (metrics):
    /// counted when such a thread first mounts here, so a released thread
    /// that lands back where it was (a carrier descheduled past the
    /// threshold looks held) is not a move.
    pub(super) moved: AtomicUsize,
    /// The monitor asks this core carrier to rest (`sched/rest.rs`): set
    /// and cleared by the monitor, which kicks the carrier after either;
    /// the carrier goes off duty while it is set ([`Carrier::rest`]).
    ///
    /// [`Carrier::rest`]: super::carrier::Carrier::rest
    pub(super) rest: AtomicBool,
    /// A carrier back from rest, or one this carrier took threads from
    /// while covering for it, that this one hands woken threads to until
    /// their populations are level (`Shared::schedule`), or [`NO_SHED`].
    /// Set by the monitor (a return) or by this carrier (`Carrier::cover`),
    /// cleared by whoever finds the populations level or that carrier off
    /// duty.
    pub(super) shed_to: AtomicU32,
}

/// [`CarrierSlot::shed_to`] when this carrier hands nothing over.
pub(super) const NO_SHED: u32 = u32::MAX;

/// How many more threads than another carrier (beyond an eighth of its
/// own) one must be home to before it hands threads over to it.
const POPULATION_SLACK: usize = 4;

/// Whether a carrier home to `mine` threads is clearly more populated than
/// one home to `theirs`: more than `theirs + theirs/8 + 4`. Placement
/// (`Carrier::placement`) and a carrier back from rest
/// ([`CarrierSlot::shed_target`]) balance by it.
pub(super) fn outnumbers(mine: usize, theirs: usize) -> bool {
    theirs + theirs / 8 + POPULATION_SLACK < mine
}

impl CarrierSlot {
    /// Makes a sleeping carrier look again, however it sleeps (see
    /// `crate::doorbell`).
    pub(super) fn kick(&self) {
        self.bell.ring(|how| match (how, crate::netpoll::get()) {
            (Ring::Source, Some(source)) => source.wake(),
            _ => crate::futex::futex_wake(self.bell.word()),
        });
    }

    /// Sleeps while the kick count still equals `seen`, at most until `until`.
    pub(super) fn wait_kick(&self, seen: u32, until: Option<Instant>) {
        let timeout = match until {
            None => None,
            Some(d) => {
                let now = Instant::now();
                if d <= now {
                    return;
                }
                Some(d - now)
            }
        };
        crate::futex::futex_wait(self.bell.word(), seen, timeout);
    }

    pub(super) fn new() -> CarrierSlot {
        CarrierSlot {
            notified: AtomicBool::new(false),
            next: AtomicPtr::new(std::ptr::null_mut()),
            switches: AtomicU64::new(0),
            timers: Mutex::new(TimerQueue::default()),
            pinned: AtomicBool::new(false),
            stalled: crate::stall::StallFlag::new(),
            timer_next: AtomicU64::new(u64::MAX),
            timer_scan_at: AtomicUsize::new(super::timers::SCAN_MIN),
            reported: AtomicU64::new(u64::MAX),
            tid: AtomicI32::new(0),
            spare_wake: AtomicBool::new(false),
            bell: crate::doorbell::Doorbell::new(),
            mounted: AtomicPtr::new(std::ptr::null_mut()),
            inspect: AtomicBool::new(false),
            inbox: Injector::new(),
            sleeping: AtomicBool::new(false),
            homed: AtomicUsize::new(0),
            reported_waiters: AtomicU64::new(u64::MAX),
            handoff: crate::stall::Handoff::new(),
            moved: AtomicUsize::new(0),
            rest: AtomicBool::new(false),
            shed_to: AtomicU32::new(NO_SHED),
        }
    }

    /// Queues `thread`, a runnable thread bound to this carrier, and kicks
    /// the carrier if it sleeps (see `sleeping`).
    pub(super) fn push_home(&self, thread: RecordArc) {
        self.inbox.push(thread);
        // The inbox handshake (invariant 5 in `mod.rs`; ARCHITECTURE.md,
        // "The three no-lost-wake-up protocols", 2), a Dekker pair: the push
        // above must be visible before we read `sleeping`. Pairs with the
        // SeqCst store of `sleeping` in `Carrier::sleep` (and
        // `Carrier::retire`), made before that carrier re-reads its inbox:
        // either we see the flag and kick, or it sees the thread.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            self.kick();
        }
    }

    /// The carrier back from rest, or the one this carrier took threads
    /// from while covering for it (`Carrier::cover`), that a woken thread
    /// of this one goes to instead ([`shed_to`](Self::shed_to)), while
    /// this carrier's population [`outnumbers`] that one's (not before it
    /// is on duty again); the mark is cleared once they are level or that
    /// carrier rests again (or is off duty for another reason: held,
    /// blocked). One relaxed load when no mark is up (every wake-up of a
    /// bound thread pays it).
    pub(super) fn shed_target(&self, carriers: &[CarrierSlot]) -> Option<usize> {
        let to = self.shed_to.load(Ordering::Relaxed);
        if to == NO_SHED {
            return None;
        }
        let other = &carriers[to as usize];
        if other.handing_off() && !other.rest.load(Ordering::Relaxed) {
            // Called back, and not on duty yet: soon.
            return None;
        }
        if other.handing_off()
            || !outnumbers(
                self.homed.load(Ordering::Relaxed),
                other.homed.load(Ordering::Relaxed),
            )
        {
            self.shed_to.store(NO_SHED, Ordering::Relaxed);
            return None;
        }
        Some(to as usize)
    }

    /// Whether this carrier's threads that may move go elsewhere now.
    pub(super) fn handing_off(&self) -> bool {
        self.handoff.handing_off()
    }

    /// Lets `thread`, bound to this carrier, go: if it may move
    /// (`thread::may_move`), it is no longer homed here and binds where it
    /// next runs; returns whether it went. The caller owns the thread (it
    /// took it from a queue or from the park state machine), so no one
    /// else reads or writes its home meanwhile.
    pub(super) fn release(&self, thread: &VThread) -> bool {
        if !crate::thread::may_move(thread) {
            return false;
        }
        thread.home.store(NO_HOME, Ordering::Relaxed);
        self.homed.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// Takes the threads queued for this carrier (its `next` slot and
    /// inbox) that need not wait for it: those that never started (placed
    /// here, still unbound) and those [`release`](Self::release) lets go.
    /// Each goes to `elsewhere`; the rest stay in the inbox. Returns how
    /// many went.
    pub(super) fn hand_off_queued(&self, mut elsewhere: impl FnMut(RecordArc)) -> usize {
        let mut stay = Vec::new();
        let mut n = 0;
        let next = self.take_next();
        for t in next
            .into_iter()
            .chain(std::iter::from_fn(|| self.pop_home()))
        {
            if t.home.load(Ordering::Relaxed) == NO_HOME || self.release(&t) {
                elsewhere(t);
                n += 1;
            } else {
                stay.push(t);
            }
        }
        for t in stay {
            self.inbox.push(t);
        }
        n
    }

    /// Takes the oldest runnable thread bound to this carrier.
    pub(super) fn pop_home(&self) -> Option<RecordArc> {
        loop {
            match self.inbox.steal() {
                Steal::Success(t) => return Some(t),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// Whether threads bound to this carrier wait to run on it.
    pub(super) fn has_home_work(&self) -> bool {
        !self.inbox.is_empty() || self.has_next()
    }

    pub(super) fn take_next(&self) -> Option<RecordArc> {
        if self.next.load(Ordering::Relaxed).is_null() {
            return None;
        }
        let p = self.next.swap(std::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: non-null values in `next` come from `RecordArc::into_raw` in
        // `push_next`, and the swap gives us sole ownership of that count.
        (!p.is_null()).then(|| unsafe { RecordArc::from_raw(p) })
    }

    pub(super) fn has_next(&self) -> bool {
        !self.next.load(Ordering::Relaxed).is_null()
    }

    /// Id, name and activity of the thread mounted here (for stall
    /// reports), if it is still the one mounted at switch count `sw`: read
    /// now, while it holds the carrier (a report is written later, when
    /// the thread may have ended).
    ///
    /// Handshake: we raise `inspect`, then read `mounted` and `switches`.
    /// The carrier swaps `mounted` to null *before* it checks `inspect`
    /// after a thread leaves it (both SeqCst), so if we still see the thread
    /// mounted on switch `sw`, the carrier has not yet passed that check and
    /// will wait for us before it can let go of the thread: the pointer is
    /// valid until we lower `inspect`.
    pub(super) fn mounted_identity(&self, sw: u64) -> Option<Identity> {
        self.inspect.store(true, Ordering::SeqCst);
        let mut out = None;
        let p = self.mounted.load(Ordering::SeqCst);
        if !p.is_null() && self.switches.load(Ordering::SeqCst) == sw {
            // SAFETY: see the handshake above; the carrier holds the
            // thread's Arc until it has seen `inspect` lowered.
            if let Some(t) = unsafe { p.as_ref() } {
                let (name, id) = crate::thread::Thread::peek_name_id(t);
                out = Some(Identity {
                    id,
                    name: name.map(str::to_owned),
                    activity: crate::thread::try_activity_of(t),
                });
            }
        }
        self.inspect.store(false, Ordering::SeqCst);
        out
    }

    // Timers (the queue is `timers.rs`; only the owner fires them, or the
    // monitor for a stalled carrier).

    pub(super) fn push_timer(&self, e: TimerEntry) {
        let mut timers = self.timers.lock().unpoison();
        timers.push(e);
        if timers.len() >= self.timer_scan_at.load(Ordering::Relaxed) {
            compact(&mut timers);
            self.timer_scan_at
                .store((2 * timers.len()).max(SCAN_MIN), Ordering::Relaxed);
        }
        self.update_timer_next(&timers);
    }

    pub(super) fn update_timer_next(&self, timers: &TimerQueue) {
        let next = timers.peek().map_or(u64::MAX, |t| ns_of(t.deadline));
        self.timer_next.store(next, Ordering::Relaxed);
    }

    /// Whether a timer is due at `now` (ns), without locking.
    pub(super) fn timer_due(&self, now: u64) -> bool {
        self.timer_next.load(Ordering::Relaxed) <= now
    }

    /// Pops due timers, handing each woken thread to `wake`.
    pub(super) fn fire_timers(&self, now: Instant, mut wake: impl FnMut(RecordArc)) -> usize {
        let mut timers = self.timers.lock().unpoison();
        let mut n = 0;
        while let Some(t) = timers.peek() {
            if t.deadline > now {
                break;
            }
            let t = timers.pop().expect("peeked");
            // A thread that is gone (the entry holds it weakly) has nothing
            // to wake.
            let Some(thread) = t.thread.upgrade() else {
                continue;
            };
            if thread.timer_seq.load(Ordering::Relaxed) == t.seq
                && thread.park.unpark() == crate::park::Unpark::Schedule
            {
                // SAFETY: a PARKED thread carries one strong count leaked by
                // its carrier (`after_park`); we moved it out of PARKED, so
                // that count is ours. We run it with the upgraded count.
                unsafe { RecordArc::decrement_strong_count(RecordArc::as_ptr(&thread)) };
                set_state_of(&thread, State::Runnable);
                wake(thread);
                n += 1;
            }
        }
        self.update_timer_next(&timers);
        n
    }

    /// Fires due timers: bound threads go to this carrier's inbox (they run
    /// only here), unbound ones to `unbound` — and so do bound ones that
    /// may move while this carrier hands off its threads. Returns how many
    /// went there.
    pub(super) fn fire_timers_home(
        &self,
        now: Instant,
        mut unbound: impl FnMut(RecordArc),
    ) -> usize {
        let mut n = 0;
        let handing_off = self.handing_off();
        self.fire_timers(now, |t| {
            if t.home.load(Ordering::Relaxed) == NO_HOME || (handing_off && self.release(&t)) {
                unbound(t);
                n += 1;
            } else {
                self.inbox.push(t);
            }
        });
        n
    }

    pub(super) fn next_timer(&self) -> Option<Instant> {
        self.timers.lock().unpoison().peek().map(|t| t.deadline)
    }
}
