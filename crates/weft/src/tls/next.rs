//! glibc's own definition of a symbol this module interposes.
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use libc::c_void;
use std::sync::atomic::{AtomicPtr, Ordering};

/// glibc's definition of `name` (the next one after ours).
pub(super) fn real(cache: &AtomicPtr<c_void>, name: &std::ffi::CStr) -> *mut c_void {
    let p = cache.load(Ordering::Acquire);
    if !p.is_null() {
        return p;
    }
    // SAFETY: dlsym with a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if p.is_null() {
        eprintln!("weft: libc has no {name:?}; aborting");
        std::process::abort();
    }
    cache.store(p, Ordering::Release);
    p
}
