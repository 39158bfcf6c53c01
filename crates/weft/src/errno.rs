//! `errno` of the calling OS thread, found afresh at every call.
//!
//! glibc keeps `errno` in each OS thread's thread-local block and hands
//! out its address through `__errno_location()`. Within one OS thread that
//! address never changes, and the optimiser may compute it once per
//! function and keep it in a register. A virtual thread breaks that
//! assumption: a function that switches away (`thread::park::suspend`, a
//! hook that parks) may continue on another carrier — on a runtime that
//! allows migration, or after a handoff — and an address kept from before
//! the switch is the first carrier's `errno`, which another thread is now
//! using there.
//!
//! This happened. Built with some features, `suspend` computed the address
//! once, kept it in a callee-saved register across the switch, and wrote
//! the saved value through it on the new carrier. The old carrier's
//! current thread had just had `recv` fail with `EAGAIN`, and between
//! glibc setting `errno` and std reading it, the write landed: `read`
//! returned `Os { code: 0 }` (`tests/affinity.rs`, a runtime that allows
//! migration, about 1 run in 5).
//!
//! So every read and write here calls `__errno_location` through a pointer
//! the optimiser cannot see through ([`std::hint::black_box`]): it cannot
//! tell which function it calls, so it can neither merge two calls nor
//! move one across a switch. The cost is an indirect call, a nanosecond,
//! twice per park. Code that keeps `errno` across a switch uses these two
//! functions; code that never switches may use `libc::__errno_location`.

use libc::c_int;

/// The calling OS thread's `errno` slot, found by a call the optimiser
/// cannot merge with another (see the module docs).
#[inline]
fn slot() -> *mut c_int {
    let location: unsafe extern "C" fn() -> *mut c_int =
        std::hint::black_box(libc::__errno_location as unsafe extern "C" fn() -> *mut c_int);
    // SAFETY: `__errno_location` has no preconditions; it returns the
    // calling OS thread's errno slot, valid while the thread lives.
    unsafe { location() }
}

/// The calling OS thread's `errno`.
#[inline]
pub(crate) fn get() -> c_int {
    // SAFETY: the slot of the OS thread running this code, valid while it
    // lives; nothing else writes it meanwhile (signal handlers restore it).
    unsafe { *slot() }
}

/// Sets the calling OS thread's `errno` to `e`.
#[inline]
pub(crate) fn set(e: c_int) {
    // SAFETY: as in `get`.
    unsafe { *slot() = e }
}
