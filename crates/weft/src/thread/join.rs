//! Joining: the result slot a thread shares with its [`JoinHandle`].
//!
//! A [`Packet`] is written once by the finishing thread (or, with an error,
//! by whoever drops its body unrun: `record::Body`) and read once by the
//! joiner; its state byte hands `result` and `joiner` from one side to the
//! other (see the SAFETY comments).

use std::cell::UnsafeCell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use super::*;

std::thread_local! {
    /// Why the body being dropped on this OS thread never ran (set by the
    /// carrier just before it drops a thread it could not start).
    static NEVER_RAN: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Records why the next body dropped on this OS thread never ran.
pub(crate) fn set_never_ran_reason(why: String) {
    NEVER_RAN.with(|w| *w.borrow_mut() = Some(why));
}

/// Why the body being dropped unrun on this OS thread never ran (see
/// [`set_never_ran_reason`]; a generic reason if none was recorded).
pub(crate) fn take_never_ran_reason() -> String {
    NEVER_RAN
        .with(|w| w.borrow_mut().take())
        .unwrap_or_else(|| "weft: the virtual thread was dropped before it ran".into())
}

/// What a [`JoinHandle`] holds: a thread's [`Packet`], on its own (an
/// executor's OS-thread task) or inside the one allocation that also
/// carries a virtual thread's body until it starts (the spawn layer's
/// `Spawned`).
pub(crate) trait Joinable<T>: Send + Sync {
    fn packet(&self) -> &Packet<T>;
}

impl<T: Send> Joinable<T> for Packet<T> {
    fn packet(&self) -> &Packet<T> {
        self
    }
}

/// Result slot shared by a thread and its `JoinHandle`.
pub(crate) struct Packet<T> {
    /// 0 = running, 1 = a joiner is registered, 2 = done.
    pub(super) state: AtomicU8,
    pub(super) result: UnsafeCell<Option<std::thread::Result<T>>>,
    pub(super) joiner: UnsafeCell<Option<Thread>>,
}

pub(super) const P_RUNNING: u8 = 0;
pub(super) const P_WAITING: u8 = 1;
pub(super) const P_DONE: u8 = 2;

// SAFETY: `result` is written once by the finishing thread before it
// publishes P_DONE (release) and read only by the joiner after observing
// P_DONE (acquire). `joiner` is written by the joiner before publishing
// P_WAITING and read by the finisher only after observing P_WAITING.
unsafe impl<T: Send> Sync for Packet<T> {}
// SAFETY: as above; T: Send is required to move the result across threads.
unsafe impl<T: Send> Send for Packet<T> {}

impl<T> Packet<T> {
    pub(crate) fn new() -> Packet<T> {
        Packet {
            state: AtomicU8::new(P_RUNNING),
            result: UnsafeCell::new(None),
            joiner: UnsafeCell::new(None),
        }
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

    /// The panic payload of a finished thread that nobody joined, if any
    /// (for whoever drops the last reference to the packet).
    pub(crate) fn unjoined_panic(&mut self) -> Option<&(dyn std::any::Any + Send)> {
        match self.result.get_mut() {
            Some(Err(p)) => Some(&**p),
            _ => None,
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
    /// Dropped by hand in `Drop` (see there); never moved out. Its true
    /// lifetime may be shorter than `'static` (scoped threads: erased in
    /// `Builder::spawn_unchecked`, whose caller joins in time).
    pub(crate) packet: std::mem::ManuallyDrop<Arc<dyn Joinable<T>>>,
    pub(crate) thread: Thread,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(packet: Arc<dyn Joinable<T>>, thread: Thread) -> JoinHandle<T> {
        JoinHandle {
            packet: std::mem::ManuallyDrop::new(packet),
            thread,
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    /// Whichever side lets go of the packet last drops an unjoined result:
    /// the finishing thread does so inside its own guard, and here the
    /// handle does. A result whose `Drop` panics must not unwind out of a
    /// detach (the dropper would see a panic that is not its own, and
    /// which side drops last is a race): abort with the thread's name, as
    /// the finishing side does and as std does ("thread result panicked
    /// on drop").
    fn drop(&mut self) {
        // SAFETY: `packet` is taken exactly once, here, and never used
        // after (the struct is being dropped).
        let packet = unsafe { std::mem::ManuallyDrop::take(&mut self.packet) };
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(packet)));
        if dropped.is_err() {
            super::abort_after_drop_panic(&self.thread.inner);
        }
    }
}

impl<T> JoinHandle<T> {
    /// Waits for the thread to finish. `Err` carries the panic payload if it
    /// panicked. Not interruptible, like `std::thread::JoinHandle::join`.
    pub fn join(self) -> std::thread::Result<T> {
        let id = self.thread.id().as_u64().get();
        with_blocker(Blocker::Join(id), || self.packet.packet().wait())
    }

    /// The thread's handle.
    pub fn thread(&self) -> &Thread {
        &self.thread
    }

    /// Whether the thread has finished running its closure.
    pub fn is_finished(&self) -> bool {
        self.packet.packet().is_done()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("thread", &self.thread)
            .finish_non_exhaustive()
    }
}

/// A panic's message, as Rust's default hook shows it: the payload's
/// `&str` or `String`, else `Box<dyn Any>`.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "Box<dyn Any>"
    }
}
