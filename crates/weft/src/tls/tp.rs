//! The thread pointer (`%fs` on x86_64): reading it, and pointing it at
//! an area or back at the carrier's own TCB.
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

#[inline(always)]
pub(super) fn read_tp() -> usize {
    let tp: usize;
    // SAFETY: glibc keeps the thread pointer's own value at %fs:0
    // (`tcbhead_t::tcb`); reading it has no side effects.
    unsafe {
        std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, preserves_flags, readonly));
    }
    tp
}

/// Points `%fs` at `tp`.
///
/// # Safety
///
/// `tp` must be a complete thread-local area for the calling OS thread
/// (its own TCB or an area made by [`init_area`] on this OS thread) that
/// stays alive while `%fs` points at it.
#[inline(always)]
pub(super) unsafe fn set_tp(tp: usize, fsgsbase: bool) {
    if fsgsbase {
        // SAFETY: FSGSBASE is enabled (AT_HWCAP2); the caller vouches
        // for the area. No `nomem`: memory accesses must not move
        // across the switch.
        unsafe { std::arch::asm!("wrfsbase {}", in(reg) tp, options(nostack, preserves_flags)) };
    } else {
        const ARCH_SET_FS: libc::c_long = 0x1002;
        // SAFETY: as above; arch_prctl only sets the register.
        unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_SET_FS, tp) };
    }
}
