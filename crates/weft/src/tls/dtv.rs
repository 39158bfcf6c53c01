//! The area's own `dtv` (the table `__tls_get_addr` reads): made from the
//! carrier's, freed or kept for the next area when the thread has ended.
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use super::layout::Layout;
use libc::c_void;

/// glibc's `dtv_t`: slot 0 of the array the TCB points at is the
/// generation, slot -1 the number of module slots, slot `i` module
/// `i`'s block (`val`) and what to free with it (`to_free`).
#[repr(C)]
#[derive(Clone, Copy)]
struct DtvSlot {
    val: usize,
    to_free: usize,
}

/// glibc's `TLS_DTV_UNALLOCATED`: the block is found or made at the
/// first `__tls_get_addr` for the module.
const DTV_UNALLOCATED: usize = usize::MAX;

/// How many module slots of the `dtv` at `dtv` are in use: the last
/// one glibc ever set. glibc fills the slot of every module of the
/// `dtv`'s generation when it makes or updates the `dtv` (a block's
/// address, or `TLS_DTV_UNALLOCATED` until first use), and leaves the
/// spare slots past them zero (`calloc`, and `_dl_resize_dtv` clears
/// what it adds); a slot whose module was unloaded keeps its last
/// value. So every module of that generation has its slot at or below
/// the last non-zero one.
///
/// # Safety
///
/// `dtv` is slot 0 of a glibc thread's `dtv`, not changed meanwhile
/// (the calling thread's own).
unsafe fn used_len(dtv: *const DtvSlot) -> usize {
    // SAFETY: slots -1..=len of a glibc dtv are readable (caller).
    unsafe {
        let len = dtv.sub(1).read().val;
        (1..=len)
            .rev()
            .find(|&i| dtv.add(i).read().val != 0)
            .unwrap_or(0)
    }
}

/// A `dtv` for the area at `tp`, made from the carrier's: the same
/// generation, and the slots the carrier's uses (not glibc's 14 spare
/// ones: see [`used_len`] for why no module of that generation lies
/// past them, and a later generation sends glibc through its update,
/// which grows the `dtv` first); a module whose carrier block is in static
/// TLS gets the area's block at the same offset, any other (a
/// `dlopen`ed module's, made on first use) is left for glibc to make
/// afresh for this thread. Allocated with `malloc`: glibc `realloc`s a
/// thread's `dtv` when more modules are loaded than it has slots for.
///
/// # Safety
///
/// Called on a glibc-made thread (the carrier), `tp` an area being
/// made by [`init_area`].
pub(super) unsafe fn new_dtv(
    l: &Layout,
    carrier_tp: usize,
    tp: usize,
    spare: Option<SpareDtv>,
) -> usize {
    // SAFETY: tcbhead_t::dtv (offset 8) of a glibc thread points at
    // slot 0 of its dtv, slot -1 holding the slot count.
    unsafe {
        let cdtv = ((carrier_tp + 8) as *const *const DtvSlot).read();
        let len = used_len(cdtv);
        // A spare with room for `len` slots is this allocation made
        // already: every slot up to its count is written below, those
        // past `len` zero (spare, as glibc leaves them). Too small a
        // spare is freed.
        let (raw, slots) = match spare {
            Some(d) if d.slots() >= len => {
                let slots = d.slots();
                (d.into_raw(), slots)
            }
            _ => {
                let raw = libc::calloc(len + 2, size_of::<DtvSlot>()).cast::<DtvSlot>();
                if raw.is_null() {
                    std::alloc::handle_alloc_error(std::alloc::Layout::new::<DtvSlot>());
                }
                (raw, len)
            }
        };
        raw.write(DtvSlot {
            val: slots,
            to_free: 0,
        });
        for i in len + 1..=slots {
            raw.add(1 + i).write(DtvSlot { val: 0, to_free: 0 });
        }
        let dtv = raw.add(1);
        dtv.write(cdtv.read());
        let statics = carrier_tp - l.static_size..carrier_tp;
        for i in 1..=len {
            let v = cdtv.add(i).read().val;
            let val = if statics.contains(&v) {
                tp - (carrier_tp - v)
            } else {
                DTV_UNALLOCATED
            };
            dtv.add(i).write(DtvSlot { val, to_free: 0 });
        }
        dtv as usize
    }
}

/// The `dtv` of an area whose thread has ended, kept by its carrier for
/// the next area it makes ([`init_area`]): a `calloc` and a `free`
/// saved per thread. It owns the `malloc`ed block (slot -1 onwards, as
/// many slots as slot -1 counts: `new_dtv` allocates that many, and
/// glibc's `_dl_resize_dtv` reallocates to the count it writes) and
/// frees it when dropped. Nothing else points at it: the area that held
/// it is gone ([`release_area`]), and glibc reaches a `dtv` only
/// through a live thread's TCB.
pub(crate) struct SpareDtv(std::ptr::NonNull<DtvSlot>);

impl SpareDtv {
    /// Its module slots (glibc's count in slot -1; `new_dtv`'s or
    /// glibc's, which grows the block to match).
    fn slots(&self) -> usize {
        // SAFETY: the block holds slot -1 (`SpareDtv`).
        unsafe { self.0.as_ptr().read().val }
    }

    fn into_raw(self) -> *mut DtvSlot {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }
}

impl Drop for SpareDtv {
    fn drop(&mut self) {
        // SAFETY: the block was `malloc`ed (by `new_dtv` or glibc's
        // `realloc`) and is owned by `self` alone.
        unsafe { libc::free(self.0.as_ptr().cast()) }
    }
}

/// Frees what the area at `tp` holds outside itself — the blocks glibc
/// made in its `dtv` for `dlopen`ed modules (glibc's
/// `_dl_deallocate_tls`, less the static part, which is the area's) —
/// and hands back the `dtv` itself, for the carrier to keep for its
/// next area or drop.
///
/// # Safety
///
/// `tp` is an area made by [`init_area`] whose thread has ended (no
/// code runs on it any more), released once.
pub(crate) unsafe fn release_area(tp: usize) -> SpareDtv {
    // SAFETY: the area's dtv was made by `new_dtv` (or reallocated by
    // glibc, with malloc): slot -1 is a non-null `malloc`ed block,
    // now the caller's alone (the thread has ended); `to_free` is null
    // or glibc's malloc'd block.
    unsafe {
        let dtv = ((tp + 8) as *const *mut DtvSlot).read();
        let len = dtv.sub(1).read().val;
        for i in 1..=len {
            let block = dtv.add(i).read().to_free;
            if block != 0 {
                libc::free(block as *mut c_void);
            }
        }
        SpareDtv(std::ptr::NonNull::new_unchecked(dtv.sub(1)))
    }
}
