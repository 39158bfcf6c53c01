//! [`Thread`], the handle to a thread (virtual or OS).
//!
//! A handle is an `Arc` of the record (`record.rs`); anyone may hold one
//! and call `unpark` or `interrupt` through it. `unpark` is the one place
//! that turns a PARKED virtual thread back into a runnable one from
//! outside the scheduler (it takes over the strong count the carrier leaked
//! at park, `Carrier::after_park`).

use super::record_ref::RecordArc;
use std::cell::UnsafeCell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::blocker::Blocker;
use super::id::ThreadId;
use super::record::{CoroSlot, Kind, VThread};
use super::schedule::Schedule;
use super::state::State;
use crate::unpoison::Unpoison;

/// A handle to a thread, virtual or OS. Cheap to clone.
#[derive(Clone)]
pub struct Thread {
    pub(crate) inner: RecordArc,
}

impl Thread {
    /// A new virtual thread's handle: `sched` is its runtime (a handle that
    /// keeps it running while the thread lives).
    pub(crate) fn new_virtual(
        name: Option<String>,
        sched: Arc<dyn Schedule>,
        container: u64,
    ) -> Thread {
        Thread::from_kind(
            name,
            Kind::Virtual {
                sched,
                coro: UnsafeCell::new(CoroSlot::EMPTY),
            },
            container,
        )
    }

    pub(super) fn from_kind(name: Option<String>, kind: Kind, container: u64) -> Thread {
        Thread {
            inner: RecordArc::new(VThread::new(name, kind, container)),
        }
    }

    /// The thread's unique id.
    pub fn id(&self) -> ThreadId {
        self.inner.id
    }

    /// The thread's name, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.inner.name()
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
            Kind::Virtual { sched, .. } => {
                if self.inner.park.unpark() == crate::park::Unpark::Schedule {
                    self.set_state(State::Runnable);
                    // SAFETY: a PARKED thread carries one strong count leaked
                    // by its carrier (`Carrier::after_park`); moving it out of
                    // PARKED made that count ours.
                    let thread = unsafe { RecordArc::from_raw(RecordArc::as_ptr(&self.inner)) };
                    sched.schedule(thread);
                } else {
                    // Pairs with the fence in `pinned_park` (`thread/pinned.rs`):
                    // either we see `pinned_waiting` below, or the waiter sees
                    // the permit our `park.unpark()` published.
                    std::sync::atomic::fence(Ordering::SeqCst);
                    if self.inner.pinned_waiting.load(Ordering::SeqCst) {
                        // Installed before `pinned_waiting` was raised.
                        if let Some(r) = self.inner.rare.get()
                            && let Some(t) = &*r.pinned_waiter.lock().unpoison()
                        {
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
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use std::time::Duration;
    ///
    /// let sleeper = weft::spawn(|| weft::sleep(Duration::from_secs(3600)));
    /// sleeper.thread().interrupt();
    /// let err = sleeper.join().unwrap().unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::Interrupted);
    /// ```
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
        RecordArc::ptr_eq(&self.inner, &other.inner)
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

impl Thread {
    /// Name and id of a thread, without allocating (for signal handlers).
    pub(crate) fn peek_name_id(thread: &VThread) -> (Option<&str>, u64) {
        (thread.name(), thread.id.0.get())
    }
}
