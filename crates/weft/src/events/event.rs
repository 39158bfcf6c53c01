//! What an event is: its kind, what it saw, and how it prints.

use super::cure::{Cure, cure_of_frame};
#[cfg(doc)]
use super::ring::recent;
use std::fmt;
use std::time::{Duration, SystemTime};

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// A virtual thread blocked inside [`crate::pinned`] and held its
    /// carrier (Java's `VirtualThreadPinned`).
    Pinned,
    /// A virtual thread held its carrier past the stall threshold without
    /// yielding, blocked in the kernel (a syscall, a `std::sync` lock, FFI).
    StallBlocked,
    /// Same, but burning CPU.
    StallCpu,
    /// A carrier held past the stall threshold in the kernel (or in a
    /// pinned wait) while virtual threads bound to it were runnable: they
    /// can run nowhere else, so if the blocked thread waits for something
    /// one of them must do — an OS-level lock one of them holds across a
    /// weft blocking call — this is the pinning deadlock. The detail names
    /// the carrier, the call it is blocked in and the waiting threads.
    BlockedWithWaiters,
    /// `Builder::spawn` failed (out of memory or address space).
    SpawnFailed,
}

impl EventKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            EventKind::Pinned => "pinned",
            EventKind::StallBlocked => "stall (blocked)",
            EventKind::StallCpu => "stall (cpu)",
            EventKind::BlockedWithWaiters => "blocked with waiters (possible pinning deadlock)",
            EventKind::SpawnFailed => "spawn failed",
        }
    }
}

/// One recorded event.
#[derive(Clone, Debug)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// Id of the virtual thread involved (0 if none).
    pub thread_id: u64,
    /// Its name, if it has one.
    pub thread_name: Option<String>,
    /// How long the carrier was held. A stall or blocked-with-waiters
    /// event is recorded while the hold goes on, with the hold so far
    /// ([`Event::ongoing`]); when the thread gives its carrier back the
    /// monitor sets this to the whole hold (see [`Event::ongoing`]).
    pub duration: Duration,
    /// The hold this event reports had not ended when it was recorded and
    /// has not been seen to end since: [`Event::duration`] is the hold so
    /// far. The monitor sees a hold end at its next look at the carrier
    /// (every 10 ms at most) and then writes the whole hold into the event
    /// in [`recent`], from the last look that saw the carrier do something
    /// else to the first that saw it move on: never less than the hold,
    /// at most two looks more. Always false for pinned events (recorded
    /// when the pinned wait ends) and failed spawns.
    pub ongoing: bool,
    /// Wall-clock time of the event.
    pub at: SystemTime,
    /// The thread's stack where one could be had, innermost frame first,
    /// the first frame outside Weft and std marked: pinned events capture
    /// it at the blocking point, stalls sample the carrier (see
    /// `WEFT_SAMPLE_STACKS` in the crate docs).
    pub stack: Option<String>,
    /// The first frame of [`Event::stack`] outside Weft and std, as
    /// `function at file:line`: the user code that blocked.
    pub call_site: Option<String>,
    /// Extra detail (e.g. the error of a failed spawn).
    pub detail: Option<String>,
    /// What the thread said it was doing ([`crate::set_activity`]; weft-http
    /// sets the request's method and path, e.g. `GET /orders/42`), read
    /// when the event was recorded.
    pub activity: Option<String>,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "weft: {} — virtual thread #{} '{}' {} its carrier for {:.1} ms",
            self.kind.name(),
            self.thread_id,
            self.thread_name.as_deref().unwrap_or(""),
            if self.ongoing { "has held" } else { "held" },
            self.duration.as_secs_f64() * 1e3
        )?;
        if let Some(d) = &self.detail {
            write!(f, " ({d})")?;
        }
        if let Some(site) = &self.call_site {
            write!(f, "; called from {site}")?;
        }
        if let Some(activity) = &self.activity {
            write!(f, "; activity: {activity}")?;
        }
        if let Some(cure) = self.cure() {
            write!(f, "; cure: {cure}")?;
        }
        Ok(())
    }
}

impl Event {
    /// What to do about the blocking call, for a thread that held its
    /// carrier blocked in the kernel ([`EventKind::StallBlocked`],
    /// [`EventKind::BlockedWithWaiters`]); `None` for other kinds, a
    /// pinned wait, or a call Weft cannot tell.
    ///
    /// Read from the stack (the frames between the blocking call and the
    /// first frame outside Weft and std), or else from the system call
    /// named in [`Event::detail`].
    pub fn cure(&self) -> Option<Cure> {
        if !matches!(
            self.kind,
            EventKind::StallBlocked | EventKind::BlockedWithWaiters
        ) {
            return None;
        }
        if let Some(stack) = &self.stack {
            let frames = crate::symbols::parse_stack(stack);
            // Up to the first frame outside Weft and std, that one
            // included (a third-party crate's lock is its own code).
            let end = crate::symbols::first_user_frame(&frames).map_or(frames.len(), |i| i + 1);
            if let Some(c) = frames[..end].iter().find_map(cure_of_frame) {
                return Some(c);
            }
        }
        let detail = self.detail.as_deref()?;
        if detail.contains("a pinned wait") {
            None
        } else if detail.contains("nanosleep") {
            Some(Cure::Sleep)
        } else if detail.contains("futex") {
            Some(Cure::Lock)
        } else if detail.contains(", in ") || detail.contains("is blocked in ") {
            // Some other system call.
            (!detail.contains("blocked in the kernel")).then_some(Cure::Transparent)
        } else {
            None
        }
    }
}
