//! `pthread_getattr_np` of a virtual thread: its own stack.
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use super::header::AREA;
use super::tp::read_tp;
use crate::libc_next::PTHREAD_GETATTR_NP;
use libc::{c_int, c_void};
use std::cell::Cell;

/// `pthread_getattr_np`: for the calling virtual thread's own handle
/// (`pthread_self()` on an area), the attributes of the OS thread
/// that runs it (scheduling, affinity) with the virtual thread's own
/// stack and guard page, so code that finds its stack this way
/// (`stacker`, conservative collectors) sees the stack it runs on.
/// Any other thread: glibc's.
///
/// # Safety
///
/// As glibc's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_getattr_np(
    thread: libc::pthread_t,
    attr: *mut libc::pthread_attr_t,
) -> c_int {
    let real = PTHREAD_GETATTR_NP.get_or_abort();
    let h = AREA.with(Cell::get);
    if h.is_null() || thread as usize != read_tp() {
        // SAFETY: forwarded unchanged.
        return unsafe { real(thread, attr) };
    }
    // SAFETY: the running thread's own header, written when its area
    // was made; the carrier's handle is its TCB, alive while it runs
    // us; `attr` was initialised by glibc when it returned 0.
    unsafe {
        let r = real((*h).carrier_tp as libc::pthread_t, attr);
        if r != 0 {
            return r;
        }
        let (lo, hi) = ((*h).stack_lo, (*h).stack_hi);
        let r = libc::pthread_attr_setstack(attr, lo as *mut c_void, hi - lo);
        if r != 0 {
            libc::pthread_attr_destroy(attr);
            return r;
        }
        libc::pthread_attr_setguardsize(attr, crate::stack::page_size())
    }
}
