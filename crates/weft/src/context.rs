//! Context that follows a virtual thread across its carrier's other work:
//! hooks the runtime calls when a virtual thread unmounts and mounts again.
//!
//! Some context lives per *OS thread*: `tracing`'s current span (its
//! subscriber keeps a span stack per OS thread), logging crates' MDC-style
//! fields, profiler tags. A carrier is one OS thread running many virtual
//! threads in turn, so such context entered by one virtual thread would
//! still be current while the next one runs on that carrier — a log line of
//! request B tagged with request A's span. A [`SwitchHook`] takes a virtual
//! thread's context off the OS thread when the thread unmounts (parks,
//! sleeps, yields, waits for a lock or a socket) and puts it back when the
//! thread mounts again (on its home carrier, or on another one after a
//! handoff: see the crate docs, "Affinity and handoff").
//!
//! `tracing` spans are handled out of the box: a span entered on a virtual
//! thread (`span.enter()`, `#[tracing::instrument]`) is current only while
//! that thread runs, and again after every park. Nothing to call.
//!
//! Other per-thread context can register its own hook once, at start-up:
//!
//! ```
//! use std::any::Any;
//! use std::cell::RefCell;
//!
//! std::thread_local! {
//!     /// An MDC-style "request id" that a logger prints.
//!     static REQUEST_ID: RefCell<Option<String>> = const { RefCell::new(None) };
//! }
//!
//! struct RequestIdFollows;
//! impl weft::context::SwitchHook for RequestIdFollows {
//!     fn unmount(&self) -> Option<Box<dyn Any>> {
//!         let id = REQUEST_ID.with(|r| r.borrow_mut().take())?;
//!         Some(Box::new(id))
//!     }
//!     fn mount(&self, saved: Box<dyn Any>) {
//!         if let Ok(id) = saved.downcast::<String>() {
//!             REQUEST_ID.with(|r| *r.borrow_mut() = Some(*id));
//!         }
//!     }
//! }
//! static HOOK: RequestIdFollows = RequestIdFollows;
//! weft::context::add_switch_hook(&HOOK).unwrap();
//!
//! let h = weft::spawn(|| {
//!     REQUEST_ID.with(|r| *r.borrow_mut() = Some("req-1".into()));
//!     weft::sleep(std::time::Duration::from_millis(5)).unwrap(); // others run here
//!     REQUEST_ID.with(|r| r.borrow_mut().take())
//! });
//! assert_eq!(h.join().unwrap().as_deref(), Some("req-1"));
//! ```
//!
//! # Cost
//!
//! Hooks run on every switch of every virtual thread: keep them to a few
//! loads when there is nothing to carry, and allocate only when there is.
//! The built-in `tracing` hook costs one atomic load when no subscriber was
//! ever set, and one `Span::current` lookup otherwise.

use crate::unpoison::Unpoison;
use std::any::Any;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, Ordering};

/// Per-OS-thread context that must follow a virtual thread. See the module
/// docs.
pub trait SwitchHook: Sync + 'static {
    /// Called on the carrier just before the current virtual thread
    /// unmounts. Takes that thread's context off the OS thread and returns
    /// it (`None`: nothing to restore).
    fn unmount(&self) -> Option<Box<dyn Any>>;
    /// Called on the carrier just after that virtual thread mounts
    /// again, with what [`SwitchHook::unmount`] returned.
    fn mount(&self, saved: Box<dyn Any>);
}

/// How many hooks can be registered (the built-in `tracing` one included).
pub const MAX_HOOKS: usize = 8;

/// The registered hooks: a leaked, immutable list, replaced (and the old
/// one leaked) on registration, which is rare; a switch reads it with one
/// acquire load and no lock.
static HOOKS: AtomicPtr<&'static [&'static dyn SwitchHook]> = AtomicPtr::new(std::ptr::null_mut());
static REGISTER: Mutex<()> = Mutex::new(());

/// The hooks, the built-in ones first.
fn hooks() -> &'static [&'static dyn SwitchHook] {
    let p = HOOKS.load(Ordering::Acquire);
    if p.is_null() {
        return BUILT_IN;
    }
    // SAFETY: non-null values come from `Box::leak` in `add_switch_hook`
    // and are never freed.
    unsafe { *p }
}

static TRACING: TracingSpans = TracingSpans;
static BUILT_IN: &[&dyn SwitchHook] = &[&TRACING];

/// Registers `hook` for every virtual thread of every runtime, from now
/// on. Fails when [`MAX_HOOKS`] are registered already.
pub fn add_switch_hook(hook: &'static dyn SwitchHook) -> std::io::Result<()> {
    let _one = REGISTER.lock().unpoison();
    let mut all: Vec<&'static dyn SwitchHook> = hooks().to_vec();
    if all.len() >= MAX_HOOKS {
        return Err(std::io::Error::other(format!(
            "weft: at most {MAX_HOOKS} switch hooks can be registered"
        )));
    }
    all.push(hook);
    let list: &'static [&'static dyn SwitchHook] = Box::leak(all.into_boxed_slice());
    let leaked: *mut &'static [&'static dyn SwitchHook] = Box::leak(Box::new(list));
    HOOKS.store(leaked, Ordering::Release);
    Ok(())
}

/// What the hooks took off the OS thread at one unmount: nothing (one
/// word) unless a hook saved something. A parked thread keeps this on its
/// stack, in the page it shares with its thread-local area (`stack.rs`,
/// "Slot size"), so the usual case — no hook has anything to carry — costs
/// neither the 128 bytes of a slot per hook nor their drop.
pub(crate) struct Saved(Option<Box<PerHook>>);

/// One slot per hook: what its `unmount` returned.
type PerHook = [Option<Box<dyn Any>>; MAX_HOOKS];

/// Runs every hook's `unmount`, last registered first.
///
/// A switch cannot be unwound halfway (the thread is already marked as
/// parking): a hook that panics aborts the process with a message.
#[inline]
pub(crate) fn unmount() -> Saved {
    let mut saved: Option<Box<PerHook>> = None;
    for (i, h) in hooks().iter().enumerate().rev() {
        if let Some(s) = no_unwind(|| h.unmount()) {
            saved.get_or_insert_with(Default::default)[i] = Some(s);
        }
    }
    Saved(saved)
}

/// Runs every hook's `mount` that has something to restore, in order.
#[inline]
pub(crate) fn mount(saved: Saved) {
    let Some(all) = saved.0 else { return };
    let hooks = hooks();
    for (i, s) in all.into_iter().enumerate() {
        if let (Some(s), Some(h)) = (s, hooks.get(i)) {
            no_unwind(|| h.mount(s));
        }
    }
}

fn no_unwind<R>(f: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            eprintln!("weft: a context switch hook panicked; aborting");
            std::process::abort()
        }
    }
}

/// Spans nested deeper than this are not carried (a guard against a
/// subscriber whose current span does not change on exit).
const MAX_SPAN_DEPTH: usize = 64;

/// The built-in hook: `tracing`'s entered spans follow the virtual thread.
struct TracingSpans;

impl SwitchHook for TracingSpans {
    fn unmount(&self) -> Option<Box<dyn Any>> {
        // A thread with thread-locals of its own keeps its spans there.
        if !tracing::dispatcher::has_been_set() || crate::tls::isolated() {
            return None;
        }
        // Exit every span entered on this OS thread, innermost first; they
        // are the running virtual thread's (the others took theirs off).
        let mut spans: Vec<tracing::Span> = Vec::new();
        while spans.len() < MAX_SPAN_DEPTH {
            let cur = tracing::Span::current();
            let Some(id) = cur.id() else { break };
            if spans.last().and_then(tracing::Span::id) == Some(id) {
                break; // the subscriber does not pop on exit
            }
            cur.with_subscriber(|(id, dispatch)| dispatch.exit(id));
            spans.push(cur);
        }
        (!spans.is_empty()).then(|| Box::new(spans) as Box<dyn Any>)
    }

    fn mount(&self, saved: Box<dyn Any>) {
        if let Ok(spans) = saved.downcast::<Vec<tracing::Span>>() {
            for s in spans.iter().rev() {
                s.with_subscriber(|(id, dispatch)| dispatch.enter(id));
            }
        }
    }
}
