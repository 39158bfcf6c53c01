//! `getaddrinfo`, on the offload pool while a virtual caller parks.

use libc::{addrinfo, c_char, c_int};

use crate::libc_next;
use crate::thread::Blocker;
use crate::transparent::fds::on_virtual;
use crate::transparent::sys;

/// Runs on an offload thread while a virtual caller parks; its `errno`
/// is the caller's afterwards (`EAI_SYSTEM`'s reason).
///
/// # Safety
/// libc's `getaddrinfo(3)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const addrinfo,
    res: *mut *mut addrinfo,
) -> c_int {
    let Some(next) = libc_next::GETADDRINFO.resolve() else {
        return libc::EAI_SYSTEM;
    };
    if !on_virtual() {
        // SAFETY: forwarded with the caller's arguments.
        return unsafe { next(node, service, hints, res) };
    }
    crate::transparent::count_park("getaddrinfo");
    let a = (
        node as usize,
        service as usize,
        hints as usize,
        res as usize,
    );
    // The offload thread's errno comes back with the result: the reason
    // of an `EAI_SYSTEM` is there.
    let (r, e) = crate::blocking::blocking_as(
        Blocker::Call {
            call: "getaddrinfo",
            fd: -1,
        },
        move || {
            // SAFETY: the caller's pointers stay valid: it does not return
            // before this closure has finished (weft::blocking's contract).
            let r = unsafe {
                next(
                    a.0 as *const c_char,
                    a.1 as *const c_char,
                    a.2 as *const addrinfo,
                    a.3 as *mut *mut addrinfo,
                )
            };
            (r, sys::errno())
        },
    );
    sys::set_errno(e);
    r
}
