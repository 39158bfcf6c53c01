//! The count of blocked carriers, the monitor's stall marks on it, and
//! its handoff mark ([`Handoff`]).
//!
//! A runtime counts the carriers that cannot run virtual threads right now:
//! a carrier in a pinned wait counts itself ([`Blocked::enter`] /
//! [`Blocked::exit`]), and the monitor counts a carrier that one thread has
//! held past the stall threshold ([`Blocked::mark`]) until that thread
//! leaves it ([`Blocked::clear`], by the carrier) or the monitor finds it
//! has already moved on (also `clear`). `running = active − blocked` decides
//! whether a spare carrier is brought in, so the count must never be read
//! too high — and a count that wraps below zero reads as `usize::MAX`,
//! which starts spares up to `max_pool_size` at once.
//!
//! # The rule
//!
//! Marking *counts first, then raises the flag*; clearing *lowers the flag
//! first, then uncounts*, and only if it lowered it. Whoever lowers the
//! flag uncounts, exactly once, and it can only lower a flag that was
//! raised after the count went up. So the count never goes below the
//! number of pinned waits, and in particular never wraps.
//!
//! The first version raised the flag first and counted after: a carrier
//! that moved on between the two lowered the flag and uncounted before the
//! monitor had counted — a wrap for that moment (`tests/loom_stall.rs`
//! finds it in one preemption).

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

/// A runtime's count of blocked carriers.
#[derive(Debug, Default)]
pub struct Blocked(AtomicUsize);

/// One carrier's "counted as stalled by the monitor" mark.
#[derive(Debug, Default)]
pub struct StallFlag(AtomicBool);

impl StallFlag {
    /// A lowered flag.
    pub fn new() -> StallFlag {
        StallFlag(AtomicBool::new(false))
    }

    /// Whether the monitor counts this carrier as stalled.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl Blocked {
    /// No carrier blocked.
    pub fn new() -> Blocked {
        Blocked(AtomicUsize::new(0))
    }

    /// Carriers blocked now.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// A carrier enters a wait that holds it (a pinned wait).
    pub fn enter(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    /// The carrier leaves that wait.
    pub fn exit(&self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }

    /// The monitor counts `flag`'s carrier as stalled. False if it already
    /// was (nothing changed).
    pub fn mark(&self, flag: &StallFlag) -> bool {
        self.0.fetch_add(1, Ordering::SeqCst);
        if flag.0.swap(true, Ordering::SeqCst) {
            self.0.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Uncounts `flag`'s carrier if it was marked. True if this call did.
    pub fn clear(&self, flag: &StallFlag) -> bool {
        if flag.0.swap(false, Ordering::SeqCst) {
            self.0.fetch_sub(1, Ordering::SeqCst);
            return true;
        }
        false
    }
}

/// Why a carrier's threads that may move go elsewhere (the handoff of
/// ARCHITECTURE.md, "Affinity and handoff"): held by one thread past the
/// stall threshold (the monitor's mark), blocked in a wait it knows holds
/// its OS thread (its own mark: a pinned park, a futex wait or a contended
/// C lock in the kernel), a spare off duty (its own), or an OS thread the
/// monitor lowered in priority during a hold (the monitor's demoted mark,
/// ARCHITECTURE.md "Sharing the cores"). Zero while the carrier serves its
/// threads.
///
/// Only the carrier raises and lowers its own marks, so only the
/// monitor's two marks need the rule below; the demoted mark is never
/// lowered once the carrier has seen it (the OS thread leaves the slot,
/// and the slot's next thread starts from [`Handoff::reset`]).
///
/// # The rule for the held mark
///
/// The monitor raises it, then checks that the hold it saw still lasts
/// (the carrier's `mounted` pointer and switch count), and lowers it
/// itself if not ([`Handoff::mark_held`]); the carrier empties `mounted`
/// when a thread leaves it, then lowers the mark if raised
/// ([`Handoff::hold_ended`]). All four accesses are SeqCst, so in their
/// single total order either the carrier's load follows the monitor's
/// raise (and lowers it) or the monitor's read of `mounted` follows the
/// carrier's swap (and the monitor lowers it): a mark raised as the hold
/// ends is seen by one side. Lowering twice is harmless.
///
/// Belt and braces, and what makes the pair checkable: at every look the
/// monitor lowers a mark whose hold has ended ([`Handoff::heal`]). Loom
/// models SeqCst accesses as acquire/release, under which the pair alone
/// may leave the mark raised; `tests/loom_stall.rs` checks that no mark
/// outlives the monitor's next look. A mark left raised costs moves, not
/// correctness: a thread that may move runs on another carrier. We keep
/// fences off this path: the carrier's side runs at every unmount.
#[derive(Debug, Default)]
pub struct Handoff(AtomicU8);

const HELD: u8 = 1;
const OFF_DUTY: u8 = 2;
const BLOCKED: u8 = 4;
const DEMOTED: u8 = 8;

impl Handoff {
    /// Serving its threads.
    pub fn new() -> Handoff {
        Handoff(AtomicU8::new(0))
    }

    /// Whether the carrier's threads that may move go elsewhere now. A
    /// stale answer queues one thread behind the carrier, where the
    /// monitor's next look finds it.
    pub fn handing_off(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }

    /// Whether the monitor's held mark is raised.
    pub fn is_held(&self) -> bool {
        self.0.load(Ordering::SeqCst) & HELD != 0
    }

    /// The monitor saw one thread hold the carrier past the threshold:
    /// raises the mark, then asks `still_held` (which reads the carrier's
    /// `mounted` and switch count, SeqCst). False, with the mark lowered
    /// again, if the hold has ended.
    pub fn mark_held(&self, still_held: impl FnOnce() -> bool) -> bool {
        if self.0.load(Ordering::Relaxed) & HELD == 0 {
            self.0.fetch_or(HELD, Ordering::SeqCst);
        }
        if !still_held() {
            self.0.fetch_and(!HELD, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The monitor's look at a carrier it does not see held (any more):
    /// lowers a mark left raised.
    pub fn heal(&self) {
        if self.is_held() {
            self.0.fetch_and(!HELD, Ordering::SeqCst);
        }
    }

    /// The carrier, after it emptied its `mounted` pointer (SeqCst): the
    /// hold is over. One load when no mark was raised. True if the monitor
    /// lowered the carrier's OS thread's priority during the hold (the
    /// demoted mark, which stays raised): the carrier then leaves its slot.
    pub fn hold_ended(&self) -> bool {
        let marks = self.0.load(Ordering::SeqCst);
        if marks & HELD != 0 {
            self.0.fetch_and(!HELD, Ordering::SeqCst);
        }
        marks & DEMOTED != 0
    }

    /// The monitor is about to lower the priority of the carrier's OS
    /// thread during a hold it marked: raises the demoted mark, then asks
    /// `still_held`, as [`Handoff::mark_held`] does. False, with the mark
    /// lowered again, if the hold has ended: the monitor must not lower
    /// the priority then (the carrier may have passed its check). A
    /// carrier that saw the mark in between leaves its slot anyway, which
    /// costs one OS thread, not correctness.
    pub fn mark_demoted(&self, still_held: impl FnOnce() -> bool) -> bool {
        self.0.fetch_or(DEMOTED, Ordering::SeqCst);
        if !still_held() {
            self.0.fetch_and(!DEMOTED, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Whether the monitor lowered this carrier's priority.
    pub fn is_demoted(&self) -> bool {
        self.0.load(Ordering::SeqCst) & DEMOTED != 0
    }

    /// The carrier enters (`true`) or leaves (`false`) a wait that holds
    /// its OS thread.
    pub fn set_blocked(&self, blocked: bool) {
        if blocked {
            self.0.fetch_or(BLOCKED, Ordering::SeqCst);
        } else {
            self.0.fetch_and(!BLOCKED, Ordering::SeqCst);
        }
    }

    /// Whether the carrier's own blocked mark is raised.
    pub fn is_blocked(&self) -> bool {
        self.0.load(Ordering::SeqCst) & BLOCKED != 0
    }

    /// A spare goes off duty (`true`) or back on duty (`false`).
    pub fn set_off_duty(&self, off: bool) {
        if off {
            self.0.fetch_or(OFF_DUTY, Ordering::SeqCst);
        } else {
            self.0.fetch_and(!OFF_DUTY, Ordering::SeqCst);
        }
    }

    /// A carrier thread starts on this slot: serving.
    pub fn reset(&self) {
        self.0.store(0, Ordering::SeqCst);
    }
}
