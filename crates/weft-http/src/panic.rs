//! The message and location of a handler's panic, for the error hook
//! ([`HandlerPanic`]).
//!
//! A panic's payload holds its message but not where it happened; only a
//! panic hook sees that. The server installs one (once per process, when
//! it starts, after weft's own) that keeps the last panic's message and
//! location in a thread-local and then calls the hook it replaced; a
//! router the panic unwinds through adds the route's pattern to that
//! record ([`note_route`]). The code that caught the panic takes the
//! record in the same thread — a virtual thread's thread-locals are its
//! own and move with it if it changes carriers, unless the runtime runs
//! without thread-local areas, where they are the carrier's — and keeps
//! it only if the message matches the payload's: a record left by another
//! panic (of another virtual thread that ran on the carrier while this
//! one unwound, or of a panic caught elsewhere) is not taken for this
//! one.

use std::any::Any;
use std::cell::RefCell;
use std::sync::Once;

use crate::error::HandlerPanic;

/// What the hook and the routers saw of a panic.
struct Record {
    message: String,
    location: String,
    /// The full pattern of the innermost route it unwound through.
    route: Option<String>,
}

thread_local! {
    /// The last panic on this OS thread.
    static LAST: RefCell<Option<Record>> = const { RefCell::new(None) };
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
                        *c = Some(Record {
                            message,
                            location,
                            route: None,
                        });
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

/// Adds the pattern of the route a panic unwinds through to the panic's
/// record, unless an inner route did.
pub(crate) fn note_route(route: impl FnOnce() -> String) {
    let _ = LAST.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut()
            && let Some(r) = c.as_mut()
            && r.route.is_none()
        {
            r.route = Some(route());
        }
    });
}

/// What the panic with `payload`, just caught on this thread, was, and the
/// route it came from.
pub(crate) fn caught(payload: &(dyn Any + Send)) -> (HandlerPanic, Option<String>) {
    let message = message(payload).to_owned();
    let record = LAST
        .try_with(|c| c.try_borrow_mut().ok().and_then(|mut c| c.take()))
        .ok()
        .flatten()
        .filter(|r| r.message == message);
    let (location, route) = match record {
        Some(r) => (Some(r.location), r.route),
        None => (None, None),
    };
    (HandlerPanic { message, location }, route)
}
