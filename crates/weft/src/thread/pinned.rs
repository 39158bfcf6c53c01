//! The pinned park: a park that holds the carrier.
//!
//! Inside `weft::pinned` a virtual thread does not unmount: it waits on its
//! carrier's OS thread until the permit arrives, the deadline passes or an
//! interrupt, with the carrier marked blocked (`Schedule::block_carrier`) so
//! a spare can come in. `Thread::unpark` wakes it through `pinned_waiter`
//! (the two SeqCst fences pair up: either the unparker sees
//! `pinned_waiting`, or the waiter sees the permit). Each explicit pinned
//! wait records a `Pinned` event (`events` is a sink: recording is a write
//! the runtime never reads back).

use crate::unpoison::Unpoison;
use std::sync::atomic::{Ordering, fence};
use std::time::Instant;

use crate::events::{Event, EventKind};

use super::*;

/// A blocking section of the current carrier (the scheduler's
/// `blocked.rs`), closed on drop, on the same carrier: the thread does not
/// unmount while it lives.
pub(crate) struct CarrierHeld(&'static VThread);

impl Drop for CarrierHeld {
    fn drop(&mut self) {
        if let Some(s) = self.0.scheduler() {
            s.unblock_carrier();
        }
    }
}

/// Opens a blocking section on the current virtual thread's carrier for a
/// wait that will hold it (a futex wait or a C lock in the kernel): its
/// other threads run elsewhere until the guard is dropped. `None` on an OS
/// thread, or when a section is already open. Allocates nothing (a C
/// allocator's lock may be what it waits for).
pub(crate) fn hold_carrier() -> Option<CarrierHeld> {
    open_section(false)
}

/// [`hold_carrier`]; `pinned_park` for [`pinned_park`]'s own wait.
fn open_section(pinned_park: bool) -> Option<CarrierHeld> {
    let t = super::current::current_virtual_no_switch()?;
    t.scheduler()?
        .block_carrier(pinned_park)
        .then_some(CarrierHeld(t))
}

/// A park that holds the carrier: waits on the carrier's OS thread until
/// the permit arrives, the deadline passes, or an interrupt.
///
/// Never inlined: its frame would otherwise join `park`'s, which every
/// parked thread keeps on its stack (`capture_here` says why that counts).
#[cold]
#[inline(never)]
pub(crate) fn pinned_park(thread: &VThread, deadline: Option<Instant>) {
    if thread.park.try_consume() {
        return;
    }
    let explicit_pin = thread.pin_depth.get() > 0;
    let c_locks = super::native::c_locks_held(thread);
    set_state_of(thread, State::Pinned);
    *thread
        .rare
        .get_or_init(Box::default)
        .pinned_waiter
        .lock()
        .unpoison() = Some(std::thread::current());
    thread.pinned_waiting.store(true, Ordering::SeqCst);
    // Pairs with the fence in `Thread::unpark`: either the unparker sees
    // `pinned_waiting`, or we see its permit below.
    fence(Ordering::SeqCst);
    let guard = open_section(true);
    // The carrier is held from here: the stack capture counts.
    let t0 = Instant::now();
    let stack = (explicit_pin && crate::events::capture_stacks()).then(|| {
        let mut ips = Vec::with_capacity(32);
        backtrace::trace(|f| {
            ips.push(f.ip() as usize);
            ips.len() < crate::sample::MAX_FRAMES
        });
        // Symbolized on this carrier when the wait ends: the process's
        // first lookup reads its debug info, which can load meanwhile.
        crate::symbols::warm_up();
        ips
    });
    loop {
        if thread.park.try_consume() || crate::thread::current_interrupted() {
            break;
        }
        match deadline {
            None => std::thread::park(),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    break;
                }
                std::thread::park_timeout(d - now);
            }
        }
    }
    let held = t0.elapsed();
    thread.pinned_waiting.store(false, Ordering::SeqCst);
    drop(guard);
    set_state_of(thread, State::Running);
    if explicit_pin {
        let (name, id) = crate::thread::Thread::peek_name_id(thread);
        let (stack, call_site) = crate::symbols::stack_and_call_site(
            stack.map(|ips| crate::symbols::Resolver::default().frames(&ips)),
        );
        crate::events::record(Event {
            kind: EventKind::Pinned,
            thread_id: id,
            thread_name: name.map(str::to_owned),
            duration: held,
            at: std::time::SystemTime::now(),
            call_site,
            stack,
            detail: (c_locks > 0).then(|| {
                format!(
                    "holds {c_locks} C lock(s) (pthread_mutex, pthread_rwlock, pthread_spin or \
                     FILE lock): a virtual thread keeps its carrier until it releases them"
                )
            }),
            activity: crate::thread::activity_of(thread),
            ongoing: false,
        });
    }
}
