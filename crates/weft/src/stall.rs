//! The count of blocked carriers, and the monitor's stall marks on it.
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
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
