//! Who owns `SIGURG`: what the stack sampler (`sample.rs`) and the
//! `transparent` feature's hooked `sigaction` (`transparent/signals.rs`)
//! tell each other. A leaf: the sampler is a diagnostic, the hooks a
//! service, and neither may name the other (ARCHITECTURE.md, "Layers").
//!
//! - The sampler says when its handler is installed ([`set_sampler`]); the
//!   hooked `sigaction` then leaves it in place and records the program's
//!   handler instead ([`sampler_installed`]).
//! - The hooks, when linked, register three functions at start-up
//!   ([`register`], from an `.init_array` constructor): the real
//!   `sigaction`, a test for their own handler wrapper, and the call of
//!   the program's recorded handler. Without the feature none is
//!   registered and the sampler uses libc's `sigaction`.
//!
//! Everything here is an atomic load: safe in a signal handler.

use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// What the `transparent` hooks lend the sampler.
pub(crate) struct Hooks {
    /// `sigaction(2)` itself, not the hook.
    pub(crate) real_sigaction:
        unsafe fn(libc::c_int, *const libc::sigaction, *mut libc::sigaction) -> libc::c_int,
    /// Whether a handler is the hooks' wrapper of a program's handler.
    pub(crate) is_wrapper: fn(libc::sighandler_t) -> bool,
    /// Calls the program's recorded handler for a signal that is not the
    /// sampler's.
    pub(crate) chain: unsafe fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void),
}

static HOOKS: AtomicPtr<Hooks> = AtomicPtr::new(std::ptr::null_mut());
static SAMPLER: AtomicBool = AtomicBool::new(false);

/// Registers the hooks (once, before `main`).
#[cfg_attr(not(feature = "transparent"), allow(dead_code))]
pub(crate) fn register(h: &'static Hooks) {
    HOOKS.store(h as *const Hooks as *mut Hooks, Ordering::Release);
}

/// The registered hooks, if the `transparent` feature is linked in.
pub(crate) fn hooks() -> Option<&'static Hooks> {
    // SAFETY: only `register` stores, and only a `&'static Hooks`.
    unsafe { HOOKS.load(Ordering::Acquire).as_ref() }
}

/// Records whether the sampler's handler is installed.
pub(crate) fn set_sampler(on: bool) {
    SAMPLER.store(on, Ordering::Release);
}

/// Whether the sampler's handler is installed for `SIGURG`.
#[cfg_attr(not(feature = "transparent"), allow(dead_code))]
pub(crate) fn sampler_installed() -> bool {
    SAMPLER.load(Ordering::Acquire)
}
