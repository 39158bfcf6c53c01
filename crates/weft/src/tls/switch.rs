//! The switch onto an area and back: the thread pointer, and libc's
//! mirrored block handed over both ways.
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use super::layout::Layout;
use super::tp::{read_tp, set_tp};

/// Runs `f` (the resume of a virtual thread) with the thread pointer
/// on the area `tp`, and puts the carrier's back after; libc's block is
/// handed to `tp` before and back after. Also the other way round: on
/// a mounted area, `tp` the carrier's own TCB (`on_carrier`).
///
/// `#[inline(never)]` and touching no thread-local itself: the compiler
/// cannot cache a thread-local address across the two switches here.
///
/// # Safety
///
/// `tp` is an area made on this carrier by [`init_area`] for the thread
/// `f` resumes, or the carrier's own TCB while the calling thread's
/// area is mounted on it (and stays so until `f` returns); `f` touches
/// no thread-local of the calling side.
#[inline(never)]
pub(crate) unsafe fn run_on<R>(l: &Layout, tp: usize, f: impl FnOnce() -> R) -> R {
    let carrier_tp = read_tp();
    let len = l.libc_hi - l.libc_lo;
    // SAFETY: both areas have the same static layout; libc's block
    // lies in both. The area is complete, so pointing %fs at it is
    // sound (caller).
    unsafe {
        std::ptr::copy_nonoverlapping(
            (carrier_tp - l.libc_hi) as *const u8,
            (tp - l.libc_hi) as *mut u8,
            len,
        );
        set_tp(tp, l.fsgsbase);
    }
    let r = f();
    // SAFETY: the same, the other way round; %fs back on the carrier's
    // own TCB.
    unsafe {
        set_tp(carrier_tp, l.fsgsbase);
        std::ptr::copy_nonoverlapping(
            (tp - l.libc_hi) as *const u8,
            (carrier_tp - l.libc_hi) as *mut u8,
            len,
        );
    }
    r
}
