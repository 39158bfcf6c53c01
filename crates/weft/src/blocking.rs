//! Work that cannot unmount: blocking offload (`weft::blocking`) and pinned
//! sections (`weft::pinned`).
//!
//! A virtual thread unmounts only at weft's own blocking calls. File I/O,
//! DNS, FFI and `std::sync` waits block the carrier's OS thread instead.
//! Wrapping such work in [`blocking`] marks the carrier as blocked: if
//! runnable work is waiting (now, or while the carrier stays blocked), a
//! spare carrier takes over, bounded by the runtime's `max_pool_size`.
//! Spare carriers retire after an idle keep-alive.
//!
//! Work that blocks *without* being wrapped is caught by the monitor (the
//! stall watchdog, like Go's sysmon): a carrier that runs one virtual thread
//! for longer than `WEFT_STALL_THRESHOLD` (default 20 ms) is compensated the
//! same way and a stall event is recorded (see [`crate::events`]).
//!
//! [`pinned`] is Java's critical section: inside it, a weft blocking call
//! does not unmount; it parks the carrier itself (state
//! [`State::Pinned`](crate::State::Pinned)) and records a pinned event with
//! the thread's stack. Use it around code that must not migrate (e.g. it
//! holds a `std::sync::MutexGuard` or a reference into a `thread_local!`).
//!
//! ```
//! let len = weft::spawn(|| {
//!     // Offloaded: the carrier is marked blocked while the file is read.
//!     weft::blocking(|| std::fs::read("Cargo.toml").map(|b| b.len()))
//! })
//! .join()
//! .unwrap()
//! .unwrap();
//! assert!(len > 0);
//! ```

use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use crate::events::{Event, EventKind};
use crate::sched;
use crate::thread::{Inner, State, current_virtual, set_inner_state};

/// Runs `f`, which may block its OS thread, without starving other virtual
/// threads: the carrier is marked blocked for the duration and a spare
/// carrier runs waiting work. On an OS thread it simply calls `f`.
///
/// A weft blocking call made inside `f` (e.g. `weft::sleep`) blocks the
/// carrier too, as in [`pinned`], so `f` never migrates between carriers.
pub fn blocking<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    let Some(inner) = current_virtual() else {
        return f();
    };
    inner.blocking_depth.set(inner.blocking_depth.get() + 1);
    struct Exit<'a>(&'a Inner, Option<sched::BlockingGuard>);
    impl Drop for Exit<'_> {
        fn drop(&mut self) {
            drop(self.1.take());
            self.0.blocking_depth.set(self.0.blocking_depth.get() - 1);
        }
    }
    let guard = sched::enter_blocking();
    let _exit = Exit(inner, guard);
    f()
}

/// Runs `f` pinned to the current carrier: weft blocking calls inside it
/// park the carrier's OS thread instead of unmounting (state `Pinned`), and
/// each such wait records a pinned event (`WEFT_TRACE_PINNED=short|full`
/// prints it). On an OS thread it simply calls `f`.
pub fn pinned<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    let Some(inner) = current_virtual() else {
        return f();
    };
    inner.pin_depth.set(inner.pin_depth.get() + 1);
    struct Exit<'a>(&'a Inner);
    impl Drop for Exit<'_> {
        fn drop(&mut self) {
            self.0.pin_depth.set(self.0.pin_depth.get() - 1);
        }
    }
    let _exit = Exit(inner);
    f()
}

/// Whether the current virtual thread is inside [`pinned`].
pub fn is_pinned() -> bool {
    current_virtual().is_some_and(|i| i.pin_depth.get() > 0)
}

/// A park that holds the carrier: waits on the carrier's OS thread until
/// the permit arrives, the deadline passes, or an interrupt.
pub(crate) fn pinned_park(inner: &Inner, deadline: Option<Instant>) {
    if inner.park.try_consume() {
        return;
    }
    let explicit_pin = inner.pin_depth.get() > 0;
    set_inner_state(inner, State::Pinned);
    *inner
        .pinned_waiter
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current());
    inner.pinned_waiting.store(true, Ordering::SeqCst);
    // Pairs with the fence in `Thread::unpark`: either the unparker sees
    // `pinned_waiting`, or we see its permit below.
    fence(Ordering::SeqCst);
    let guard = if inner.blocking_depth.get() == 0 {
        sched::enter_blocking()
    } else {
        None
    };
    let stack = (explicit_pin && crate::events::capture_stacks())
        .then(std::backtrace::Backtrace::force_capture);
    let t0 = Instant::now();
    loop {
        if inner.park.try_consume() || crate::thread::current_interrupted() {
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
    inner.pinned_waiting.store(false, Ordering::SeqCst);
    drop(guard);
    set_inner_state(inner, State::Running);
    if explicit_pin {
        let (name, id) = crate::thread::Thread::peek_name_id(inner);
        crate::events::record(Event {
            kind: EventKind::Pinned,
            thread_id: id,
            thread_name: name.map(str::to_owned),
            duration: held,
            at: std::time::SystemTime::now(),
            stack: stack.map(|b| b.to_string()),
            detail: None,
        });
    }
}

/// Default stall threshold (the JFR `VirtualThreadPinned` threshold).
pub const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_millis(20);
