//! Making an area in a stack slot's top, adopting it on another carrier
//! after a handoff, and seeding the carrier's own thread-locals into it.
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use super::dtv::{SpareDtv, new_dtv};
use super::header::{AREA, HEADER, Header};
use super::layout::Layout;
use super::tp::read_tp;
use std::cell::Cell;

/// Makes a new area in the `reserve()` bytes below `slot_top` and
/// returns its thread pointer. `stack_lo` is the lowest usable byte of
/// the thread's stack (which ends where the area begins).
///
/// # Safety
///
/// Called on the carrier that will run the thread (the TCB is copied
/// from the calling OS thread, which must be glibc-made); the
/// `reserve()` bytes below `slot_top` are writable memory owned by the
/// thread, unused by its stack, for as long as the thread lives. The
/// area is released with [`release_area`] when the thread has ended.
/// `spare` is a `dtv` from a released area, reused when it fits.
pub(crate) unsafe fn init_area(
    l: &Layout,
    slot_top: usize,
    stack_lo: usize,
    spare: Option<SpareDtv>,
) -> usize {
    debug_assert_eq!(slot_top % crate::stack::page_size(), 0);
    let header = slot_top - HEADER;
    // `slot_top - tp` is the same for every page-aligned slot top, so
    // `reserve` holds header, TCB and static blocks whatever the slot.
    let tp = (header - l.tcb) & !(l.align - 1);
    let carrier_tp = read_tp();
    // SAFETY: all writes stay inside [slot_top - reserve, slot_top)
    // (`reserve` covers header, TCB, alignment and static TLS), which
    // the caller gives us; the TCB is read from the calling thread's
    // own TCB, `tcb` bytes long by `discover`; the templates are the
    // modules' mapped PT_TLS segments; the rseq and robust-list
    // offsets were checked to lie inside the TCB.
    unsafe {
        (header as *mut Header).write(Header {
            dtors: std::ptr::null_mut(),
            keys: std::ptr::null_mut(),
            carrier_tp,
            stack_lo,
            stack_hi: slot_top - l.reserve,
        });
        std::ptr::copy_nonoverlapping(carrier_tp as *const u8, tp as *mut u8, l.tcb);
        // tcbhead_t: tcb (offset 0) and self (offset 16) point at the
        // TCB itself; dtv (offset 8) is the area's own.
        (tp as *mut usize).write(tp);
        ((tp + 16) as *mut usize).write(tp);
        ((tp + 8) as *mut usize).write(new_dtv(l, carrier_tp, tp, spare));
        l.exe.init(tp);
        for b in &l.others {
            b.init(tp);
        }
        if let Some(off) = l.rseq {
            // struct rseq: cpu_id_start, cpu_id, rseq_cs. The kernel
            // updates only the carrier's: the area's reads "not
            // registered" (glibc's RSEQ_CPU_ID_REGISTRATION_FAILED),
            // so sched_getcpu asks the kernel and rseq users fall back.
            ((tp + off) as *mut u32).write(0);
            ((tp + off + 4) as *mut i32).write(-2);
            ((tp + off + 8) as *mut u64).write(0);
        }
        if let Some(off) = l.robust {
            // An empty robust list of the area's own: robust_prev and
            // robust_head.list point at the head, nothing pending.
            let head = tp + off;
            ((head - 8) as *mut usize).write(head);
            (head as *mut usize).write(head);
            ((head + 16) as *mut usize).write(0);
        }
    }
    // SAFETY: as above; AREA is a `const` Cell in the executable's block.
    unsafe {
        seed(
            tp,
            AREA.with(|a| a as *const Cell<*mut Header>),
            Cell::new(header as *mut Header),
        )
    };
    tp
}

/// Makes the area at `tp` the calling carrier's, if it was another's:
/// the thread it belongs to is about to run here after a handoff.
/// Refreshes what names the OS thread — the kernel thread id in the TCB
/// copy (mutex owners, `raise`, `pthread_kill(pthread_self())`) and the
/// carrier in the header (SIGSETXID's relay, `pthread_getattr_np`) —
/// and returns true; the caller re-seeds its own per-carrier
/// thread-locals ([`seed`]). Returns false, writing nothing, when the
/// area is already this carrier's (a thread released by a handoff that
/// lands back where it was). Called only for a thread that was
/// released, so the common mount pays nothing.
///
/// # Safety
///
/// `tp` is an area made by [`init_area`] with this layout, whose thread
/// is not running (the caller is about to mount it); `l.movable()`.
pub(crate) unsafe fn adopt(l: &Layout, tp: usize) -> bool {
    let carrier_tp = read_tp();
    let area_off = carrier_tp - AREA.with(|a| a as *const Cell<*mut Header> as usize);
    // SAFETY: `AREA`'s slot in the area's executable block holds the
    // header written by `init_area` (static TLS offsets are the same in
    // every area); the thread is not running, so nothing else writes it.
    let h = unsafe { ((tp - area_off) as *const *mut Header).read() };
    // SAFETY: the header lies in the area, which outlives its thread.
    if unsafe { (*h).carrier_tp } == carrier_tp {
        return false;
    }
    let Some(off) = l.tid else {
        return false;
    };
    // SAFETY: as above; the tid offset was checked to lie inside the
    // TCB, which the area copies whole. A signal handler that reads the
    // TCB or the header runs only while the area is mounted, which it
    // is not yet.
    unsafe {
        (*h).carrier_tp = carrier_tp;
        ((tp + off) as *mut i32).write(libc::gettid());
    }
    true
}

/// Writes `value` into the area at `tp` where the calling OS thread
/// has the thread-local `var` (one of its own thread-locals).
///
/// # Safety
///
/// `var` is the address of a `const`-initialised thread-local of the
/// executable on the calling OS thread, of type `T`; `tp` an area made
/// by [`init_area`] whose thread is not running.
pub(crate) unsafe fn seed<T>(tp: usize, var: *const T, value: T) {
    let off = read_tp() - var as usize;
    debug_assert!(off >= size_of::<T>() && off < 1 << 20, "not in static TLS");
    // SAFETY: static TLS offsets are the same in every area and in
    // every thread, so the slot lies in the area's executable block.
    unsafe { ((tp - off) as *mut T).write(value) };
}
