//! [`State`]: where a thread is in its life, as dumps and `Thread::state`
//! report it.
//!
//! Stored in the record's `state` byte (`record.rs`). Written by whoever
//! moves the thread (its carrier when it mounts, parks or finishes it; a
//! waker when it makes it runnable; the thread itself around a pinned wait)
//! with relaxed stores: the state is a report, never a synchronisation
//! point — the park word (`park.rs` at the crate root) is.

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
    /// The state's name in lower case: `"new"`, `"started"`, `"runnable"`,
    /// `"running"`, `"parking"`, `"parked"`, `"pinned"`, `"yielding"`,
    /// `"terminated"` (thread dumps print it in upper case, as the JDK's).
    pub fn as_str(self) -> &'static str {
        match self {
            State::New => "new",
            State::Started => "started",
            State::Runnable => "runnable",
            State::Running => "running",
            State::Parking => "parking",
            State::Parked => "parked",
            State::Pinned => "pinned",
            State::Yielding => "yielding",
            State::Terminated => "terminated",
        }
    }

    pub(super) fn from_u8(v: u8) -> State {
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
