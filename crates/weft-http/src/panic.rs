//! The message and location of a handler's panic, for the error hook
//! ([`HandlerPanic`]).
//!
//! A panic's payload holds its message but not where it happened; only a
//! panic hook sees that. The server installs one (once per process, when
//! it starts, after weft's own) that keeps the last panic's message and
//! location in a thread-local and then calls the hook it replaced. The
//! code that caught the panic takes the record on the same OS thread — a
//! started virtual thread never changes carriers — and keeps its location
//! only if the message matches the payload's: a record left by another
//! panic (of another virtual thread that ran while this one unwound, or
//! of a panic caught elsewhere) is not taken for this one.

use std::any::Any;
use std::cell::RefCell;
use std::sync::Once;

use crate::error::HandlerPanic;

thread_local! {
    /// The last panic on this OS thread: message and location.
    static LAST: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Wraps the process's panic hook to record locations (once per process;
/// not with `WEFT_PANIC_HOOK=0`, which leaves the hook alone).
pub(crate) fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var("WEFT_PANIC_HOOK").is_ok_and(|v| v == "0" || v == "off") {
            return;
        }
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(l) = info.location() {
                let message = message(info.payload()).to_owned();
                let location = format!("{}:{}:{}", l.file(), l.line(), l.column());
                // `try_`: never panic in the hook (a thread-local being
                // destroyed, a record being read).
                let _ = LAST.try_with(|c| {
                    if let Ok(mut c) = c.try_borrow_mut() {
                        *c = Some((message, location));
                    }
                });
            }
            prev(info);
        }));
    });
}

/// The panic's message, as Rust's default hook shows it.
fn message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "Box<dyn Any>"
    }
}

/// What the panic with `payload`, just caught on this thread, was.
pub(crate) fn caught(payload: &(dyn Any + Send)) -> HandlerPanic {
    let message = message(payload).to_owned();
    let record = LAST
        .try_with(|c| c.try_borrow_mut().ok().and_then(|mut c| c.take()))
        .ok()
        .flatten();
    let location = record.and_then(|(m, l)| (m == message).then_some(l));
    HandlerPanic { message, location }
}
