//! The SIGSETXID relay: glibc's setxid handshake (`setuid` in a threaded
//! process) answered on the carrier's own TCB.
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use super::header::AREA;
use super::tp::{read_tp, set_tp};
use libc::{c_int, c_void};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

// -----------------------------------------------------------------
// glibc's setxid handshake (`setuid`, `setgid`, … in a threaded
// process): the caller marks every other thread's `struct pthread`
// (a SETXID bit in `cancelhandling`), sends it SIGSETXID, and waits
// until the bit is cleared, signalling again meanwhile. glibc's
// handler clears the bit through the thread pointer, so on a carrier
// running an area it would clear the area's copy and the caller would
// signal on until the thread unmounts (seconds for a CPU-bound one).
// The relay runs glibc's handler with the thread pointer on the
// carrier's own TCB, as if no area were mounted.

/// glibc's SIGSETXID (SIGRTMIN - 1 of the kernel's numbering, reserved
/// by glibc; user code cannot install a handler for it).
const SIGSETXID: c_int = 33;

/// The kernel's `struct sigaction` for `rt_sigaction` on x86_64.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct KernelSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

static SETXID_NEXT: AtomicUsize = AtomicUsize::new(0);
static SETXID_FSGSBASE: AtomicBool = AtomicBool::new(false);

pub(super) fn install_setxid_relay(fsgsbase: bool) {
    let mut old = KernelSigaction::default();
    // SAFETY: rt_sigaction reads nothing (null new action) and writes
    // one kernel sigaction of 8-byte mask size.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            SIGSETXID,
            std::ptr::null::<KernelSigaction>(),
            &mut old,
            8,
        )
    };
    // glibc installs its handler (SA_SIGINFO) when the process makes
    // its first thread; carriers are threads, so it is there.
    if r != 0 || old.handler <= 1 || old.flags & libc::SA_SIGINFO as u64 == 0 {
        return;
    }
    SETXID_FSGSBASE.store(fsgsbase, Ordering::Relaxed);
    SETXID_NEXT.store(old.handler, Ordering::Release);
    // Every signal blocked while the relay runs: a handler that nested
    // while the thread pointer is the carrier's would misread which
    // thread it interrupted.
    let new = KernelSigaction {
        handler: setxid_relay as *const () as usize,
        mask: !0,
        ..old
    };
    // SAFETY: as above, installing a handler of the SA_SIGINFO shape
    // with glibc's own flags and restorer.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            SIGSETXID,
            &new,
            std::ptr::null_mut::<KernelSigaction>(),
            8,
        )
    };
}

/// SIGSETXID's handler: glibc's, run on the carrier's TCB.
extern "C" fn setxid_relay(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    type Handler = extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void);
    // SAFETY: stored by `install_setxid_relay` from glibc's handler of
    // this shape before the relay was installed.
    let next: Handler =
        unsafe { std::mem::transmute::<usize, Handler>(SETXID_NEXT.load(Ordering::Acquire)) };
    let h = AREA.with(Cell::get);
    if h.is_null() {
        return next(sig, info, ctx);
    }
    let fsgsbase = SETXID_FSGSBASE.load(Ordering::Relaxed);
    let tp = read_tp();
    // SAFETY: the area's header names the carrier this OS thread is
    // (written when the area was made on it); the carrier's TCB is
    // complete and alive. Every signal is blocked meanwhile, and the
    // area is put back before the handler returns (sigreturn does not
    // restore the thread pointer).
    unsafe {
        set_tp((*h).carrier_tp, fsgsbase);
        next(sig, info, ctx);
        set_tp(tp, fsgsbase);
    }
}
