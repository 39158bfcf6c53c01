//! The park/unpark state machine of a virtual thread.
//!
//! This is the one place where a lost wake-up could hide, so it is small,
//! free of runtime dependencies, and model-checked with `loom`
//! (`tests/loom_park.rs` drives this exact code).
//!
//! # States
//!
//! ```text
//!              unpark                          park (permit present)
//!   RUNNING ───────────► NOTIFIED ──────────────────────────► RUNNING
//!      │                    ▲  ▲
//!      │ park (no permit)   │  │ unpark while still on the carrier's stack
//!      ▼                    │  │
//!   PARKING ────────────────┘  │
//!      │ carrier, after switching away (`publish_parked`)
//!      ▼                       │
//!   PARKED ── unpark ──► RUNNING + the unparker schedules the thread
//! ```
//!
//! The suspend protocol: the virtual thread moves itself RUNNING → PARKING
//! and switches to its carrier. Only after the switch does the carrier try
//! PARKING → PARKED. If an `unpark` slipped in between, the state is NOTIFIED,
//! the CAS fails and the carrier reschedules the thread itself. Exactly one
//! party ever schedules a parked thread: the one whose CAS moved it out of
//! PARKED.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU8, Ordering};

const RUNNING: u8 = 0;
const NOTIFIED: u8 = 1;
const PARKING: u8 = 2;
const PARKED: u8 = 3;

/// Park state of one virtual thread.
#[derive(Debug)]
pub struct ParkState(AtomicU8);

/// What `begin_park` decided.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum BeginPark {
    /// A permit was available and has been consumed: do not suspend.
    Consumed,
    /// The thread is now PARKING: switch to the carrier.
    Suspend,
}

/// What the carrier must do after the switch.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum AfterSwitch {
    /// The thread is PARKED; whoever unparks it will schedule it.
    Parked,
    /// An unpark arrived during the switch: reschedule the thread now.
    Reschedule,
}

/// What `unpark` decided.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Unpark {
    /// A permit was recorded (or already present); nothing to schedule.
    Noted,
    /// The thread was PARKED and is now RUNNING: the caller must schedule it.
    Schedule,
}

impl Default for ParkState {
    fn default() -> Self {
        Self::new()
    }
}

impl ParkState {
    /// A running thread with no permit.
    pub fn new() -> ParkState {
        ParkState(AtomicU8::new(RUNNING))
    }

    /// Called by the thread itself before suspending.
    pub fn begin_park(&self) -> BeginPark {
        // Fast path: consume a permit.
        if self
            .0
            .compare_exchange(NOTIFIED, RUNNING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return BeginPark::Consumed;
        }
        match self
            .0
            .compare_exchange(RUNNING, PARKING, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => BeginPark::Suspend,
            // Only the thread itself leaves RUNNING for PARKING, and unpark
            // only moves RUNNING → NOTIFIED, so a failure means NOTIFIED.
            Err(_) => {
                // Consume with an acquiring RMW, not a store: another
                // unparker may re-publish the permit between our failed CAS
                // and here, and we must see *its* writes too (a plain store
                // would swallow its permit without synchronising with it).
                self.0.swap(RUNNING, Ordering::Acquire);
                BeginPark::Consumed
            }
        }
    }

    /// Called by the carrier after it has switched away from the thread.
    pub fn publish_parked(&self) -> AfterSwitch {
        match self
            .0
            .compare_exchange(PARKING, PARKED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => AfterSwitch::Parked,
            Err(_) => {
                // NOTIFIED: consume the permit (an acquiring RMW, for the
                // same reason as in `begin_park`) and run the thread again.
                self.0.swap(RUNNING, Ordering::Acquire);
                AfterSwitch::Reschedule
            }
        }
    }

    /// Called by anyone to wake the thread.
    pub fn unpark(&self) -> Unpark {
        let mut s = self.0.load(Ordering::Relaxed);
        loop {
            // Even when a permit is already there, write it again with a
            // release RMW: the permit must publish *this* unparker's prior
            // writes (the condition the parker will re-check). Returning on
            // a plain load of NOTIFIED would let the parker consume an older
            // permit, read stale data and park for good (a lost wake-up
            // found by the stress suite; `std` does a release swap too).
            let (next, out) = match s {
                NOTIFIED => (NOTIFIED, Unpark::Noted),
                PARKED => (RUNNING, Unpark::Schedule),
                _ => (NOTIFIED, Unpark::Noted), // RUNNING or PARKING
            };
            match self
                .0
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return out,
                Err(actual) => s = actual,
            }
        }
    }

    /// Consumes a pending permit, if any (used by waits that do not leave
    /// the carrier: pinned sections).
    pub fn try_consume(&self) -> bool {
        self.0
            .compare_exchange(NOTIFIED, RUNNING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Moves a PARKED thread to RUNNING without leaving a permit (a thread
    /// dump borrowing it to record its stack; it parks again at once).
    /// True if the caller now owns the thread and must schedule it.
    pub fn borrow_parked(&self) -> bool {
        self.0
            .compare_exchange(PARKED, RUNNING, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether the thread is parked off its carrier right now.
    pub fn is_parked(&self) -> bool {
        self.0.load(Ordering::Relaxed) == PARKED
    }
}
