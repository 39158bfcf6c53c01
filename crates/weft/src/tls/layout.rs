//! The layout every area of the process shares, found once: the TCB's
//! size, each start-up module's static block, libc's block, and glibc's
//! per-thread fields the area sets apart (rseq, the robust list, the
//! kernel thread id).
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use super::header::{AREA, HEADER, Header};
use super::modules::{modules, static_off, static_tls_align, static_tls_size};
use super::setxid::install_setxid_relay;
use super::tp::read_tp;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// One module's static TLS block: at `tp - off`, `memsz` bytes, the
/// first `filesz` of them from the module's `PT_TLS` image at `image`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Block {
    pub(super) off: usize,
    pub(super) image: usize,
    pub(super) filesz: usize,
    pub(super) memsz: usize,
}

impl Block {
    /// Starts the block of the area at `tp` as glibc starts a new
    /// thread's: the image, then zeroes.
    ///
    /// # Safety
    ///
    /// `tp` is an area being made by [`init_area`], whose static TLS
    /// region holds this block.
    pub(super) unsafe fn init(&self, tp: usize) {
        let b = (tp - self.off) as *mut u8;
        // SAFETY: the block lies in the area's static TLS (caller); the
        // image is the module's mapped PT_TLS segment, `filesz` long.
        unsafe {
            std::ptr::copy_nonoverlapping(self.image as *const u8, b, self.filesz);
            std::ptr::write_bytes(b.add(self.filesz), 0, self.memsz - self.filesz);
        }
    }
}

/// What every area of this process looks like (see the module docs).
/// Offsets are from the thread pointer; static TLS offsets are the same
/// for every thread of a process.
#[derive(Debug)]
pub(crate) struct Layout {
    /// Bytes of the TCB region copied from the carrier, at `tp`.
    pub(super) tcb: usize,
    /// The executable's block (every Rust crate's thread-locals).
    pub(super) exe: Block,
    /// The blocks of the other modules loaded at start-up except libc
    /// (C and C++ libraries, libstdc++): the thread's own, like the
    /// executable's.
    pub(super) others: Vec<Block>,
    /// libc's block lies in `[tp - libc_hi, tp - libc_lo)`: mirrored.
    pub(super) libc_lo: usize,
    pub(super) libc_hi: usize,
    /// glibc's static TLS size: the carrier's static blocks lie in
    /// `[carrier_tp - static_size, carrier_tp)`.
    pub(super) static_size: usize,
    /// Offset of glibc's `struct rseq` from `tp`, when glibc registered
    /// one with the kernel.
    pub(super) rseq: Option<usize>,
    /// Offset of glibc's robust-mutex list head (`robust_head`) from
    /// `tp`, when it was found where glibc 2.28+ keeps it.
    pub(super) robust: Option<usize>,
    /// Offset of the kernel thread id (`struct pthread`'s `tid`) from
    /// `tp`, from glibc's own description for debuggers
    /// (`_thread_db_pthread_tid`) and checked against `gettid`. Without
    /// it an area cannot follow its thread to another carrier
    /// ([`adopt`]), and threads stay on their first carrier.
    pub(super) tid: Option<usize>,
    /// Alignment of `tp`.
    pub(super) align: usize,
    /// Bytes at the top of a stack slot the area takes.
    pub(super) reserve: usize,
    /// `wrfsbase` may be used (else `arch_prctl`).
    pub(super) fsgsbase: bool,
}

impl Layout {
    /// Bytes an area takes at the top of a stack slot (a page multiple).
    pub(crate) fn reserve(&self) -> usize {
        self.reserve
    }

    /// Whether an area can follow its thread to another carrier
    /// ([`adopt`] knows where the kernel thread id is).
    pub(crate) fn movable(&self) -> bool {
        self.tid.is_some()
    }
}

pub(super) static LAYOUT: once_cell::sync::OnceCell<Option<Layout>> =
    once_cell::sync::OnceCell::new();

/// The area layout, worked out on first use (on a carrier: the TCB size
/// is read off a glibc-made thread); `None` where areas are not
/// supported or `WEFT_THREAD_LOCALS=carrier` turned them off.
pub(crate) fn layout() -> Option<&'static Layout> {
    LAYOUT
        .get_or_init(|| {
            if std::env::var_os("WEFT_THREAD_LOCALS").is_some_and(|v| v == "carrier") {
                return None;
            }
            // Before the modules are listed: a `dlopen` that finds
            // this flag down when it has loaded its modules finished
            // before the listing (see `dlopen`).
            AREAS_FIXED.store(true, Ordering::SeqCst);
            let Some(l) = discover() else {
                AREAS_FIXED.store(false, Ordering::SeqCst);
                return None;
            };
            install_setxid_relay(l.fsgsbase);
            Some(l)
        })
        .as_ref()
}

/// Looks up a data symbol of glibc's (`__rseq_offset`, …).
fn glibc_data<T: Copy>(name: &std::ffi::CStr) -> Option<T> {
    // SAFETY: dlsym with a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    // SAFETY: a non-null result is the address of glibc's object of
    // that name, whose type the caller names.
    (!p.is_null()).then(|| unsafe { p.cast::<T>().read() })
}

/// Works the layout out on the calling (glibc-made) thread, in named
/// steps: the TCB's size, the static blocks (the executable's first,
/// libc's the one holding `errno`), glibc's per-thread fields the area
/// sets apart (rseq, the robust list, the kernel thread id), and what
/// the area takes at the top of a stack slot.
fn discover() -> Option<Layout> {
    let static_size = static_tls_size();
    if static_size == 0 {
        return None;
    }
    let tp = read_tp();
    let tcb = tcb_size(tp)?;
    let mut blocks = static_blocks().into_iter();
    // The first module is the executable.
    let exe = blocks.next()?;
    // Weft's own thread-locals must live in that block (Weft linked
    // into the executable): in a shared library they are reached
    // through the carrier's `dtv`, and seeding an area at their offset
    // would write outside it.
    let area_off = tp - AREA.with(|a| a as *const Cell<*mut Header> as usize);
    if !(exe.off - exe.memsz..=exe.off).contains(&area_off) {
        return None;
    }
    // libc's block is the one holding this thread's `errno`.
    // SAFETY: __errno_location has no preconditions.
    let errno = tp - unsafe { libc::__errno_location() } as usize;
    let (libc_blocks, others): (Vec<Block>, Vec<Block>) =
        blocks.partition(|b| (b.off - b.memsz..b.off).contains(&errno));
    let [libc] = libc_blocks[..] else {
        return None;
    };
    let rseq = rseq_offset(tcb);
    let robust = robust_offset(tp, tcb);
    let tid = tid_offset(tp, tcb);
    // The TCB's alignment: glibc's static TLS alignment, at least a
    // cache line; a page at most (slot tops are page-aligned).
    let align = static_tls_align().clamp(64, 4096);
    // Static TLS below tp that the area holds: down to the lowest
    // block of the modules loaded so far, not glibc's surplus below
    // them (see "The layout" in the module docs: a module loaded later
    // into the surplus is refused, `dlopen`).
    let below = others
        .iter()
        .chain([&exe, &libc])
        .map(|b| b.off)
        .max()?
        .next_multiple_of(16);
    // Slot tops are page-aligned, so the thread pointer lies the same
    // distance below every slot top (`init_area`).
    let reserve = (HEADER + tcb).next_multiple_of(align) + below;
    // SAFETY: getauxval has no preconditions.
    let fsgsbase = unsafe { libc::getauxval(libc::AT_HWCAP2) } & 2 != 0;
    Some(Layout {
        tcb,
        exe,
        others,
        libc_lo: libc.off - libc.memsz,
        libc_hi: libc.off,
        static_size,
        rseq,
        robust,
        tid,
        align,
        reserve,
        fsgsbase,
    })
}

/// The TCB's size: glibc puts it at the very top of a thread's stack
/// mapping, so on a glibc-made thread (the caller, whose thread pointer
/// is `tp`) it runs from `tp` to that top.
fn tcb_size(tp: usize) -> Option<usize> {
    // SAFETY: attr is initialised by pthread_getattr_np before use and
    // destroyed after.
    let top = unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let (mut addr, mut size) = (std::ptr::null_mut(), 0usize);
        let r = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        if r != 0 {
            return None;
        }
        addr as usize + size
    };
    top.checked_sub(tp)
}

/// The static TLS blocks of the loaded modules, in load order (the
/// executable first); a module whose block is dynamic has none.
fn static_blocks() -> Vec<Block> {
    modules()
        .into_iter()
        .filter_map(|m| {
            Some(Block {
                off: static_off(m.modid)?,
                image: m.image,
                filesz: m.filesz,
                memsz: m.memsz,
            })
        })
        .collect()
}

/// Where glibc's `struct rseq` lies in a TCB of `tcb` bytes. The kernel
/// updates the one glibc registered for each OS thread (glibc 2.35+:
/// `__rseq_size` non-zero — 20, the original feature size, in 2.35 and
/// 2.36 — the area at `tp + __rseq_offset`, inside the TCB).
fn rseq_offset(tcb: usize) -> Option<usize> {
    glibc_data::<u32>(c"__rseq_size")
        .filter(|&size| size >= 20)
        .and(glibc_data::<isize>(c"__rseq_offset"))
        .and_then(|off| usize::try_from(off).ok())
        .filter(|&off| off + 16 <= tcb)
}

/// Where glibc's robust-mutex list head lies in the calling thread's TCB
/// (at `tp`, `tcb` bytes). glibc registers `&pd->robust_head` with the
/// kernel for every thread it makes, with `robust_prev` in the word
/// before it; on a thread that holds no robust mutex both point at the
/// head.
fn robust_offset(tp: usize, tcb: usize) -> Option<usize> {
    let (mut head, mut len) = (0usize, 0usize);
    // SAFETY: get_robust_list for the calling thread writes two words.
    let r = unsafe { libc::syscall(libc::SYS_get_robust_list, 0, &mut head, &mut len) };
    (r == 0 && head > tp + 8 && head + 24 <= tp + tcb)
        // SAFETY: both words lie in this thread's own TCB.
        .then(|| unsafe {
            (
                (head as *const usize).read(),
                ((head - 8) as *const usize).read(),
            )
        })
        .filter(|&(list, prev)| list == head && prev == head)
        .map(|_| head - tp)
}

/// Where the kernel thread id lies in the calling thread's TCB (at `tp`,
/// `tcb` bytes). glibc describes `struct pthread` for libthread_db: each
/// field as `{ size in bits, count, offset }`. Trusted only if the field
/// is 32 bits wide, inside the TCB, and holds this thread's id.
fn tid_offset(tp: usize, tcb: usize) -> Option<usize> {
    glibc_data::<[u32; 3]>(c"_thread_db_pthread_tid")
        .filter(|&[bits, n, off]| bits == 32 && n == 1 && off as usize + 4 <= tcb)
        .map(|[_, _, off]| off as usize)
        // SAFETY: the offset lies inside this thread's own TCB (above);
        // gettid has no preconditions.
        .filter(|&off| unsafe { ((tp + off) as *const i32).read() == libc::gettid() })
}

/// Set (SeqCst) before the area layout lists the modules, and left set
/// when areas are on. A load that finds it down after glibc's `dlopen`
/// returned finished before that listing (glibc's list lock orders
/// the two), so the layout holds its blocks; one that finds it up
/// checks what it placed.
pub(super) static AREAS_FIXED: AtomicBool = AtomicBool::new(false);

#[cfg(test)]
mod tests {
    /// On a glibc-made thread the layout is found and self-consistent:
    /// the executable's block, libc's and the others' lie in static
    /// TLS, libc's below the executable's, and the reserve holds them;
    /// glibc 2.35+ registered rseq, and the robust-list head was found.
    #[test]
    fn the_layout_is_found_and_consistent() {
        if std::env::var_os("WEFT_THREAD_LOCALS").is_some() {
            return;
        }
        // Worked out on a glibc-made thread, as a carrier would.
        let found = std::thread::spawn(|| super::layout().is_some())
            .join()
            .unwrap();
        assert!(found, "no layout on x86_64 glibc");
        let l = super::layout().unwrap();
        for b in l.others.iter().chain([&l.exe]) {
            assert!(b.memsz >= b.filesz && b.off >= b.memsz, "{l:?}");
            assert!(l.reserve() >= l.tcb + b.off + 64, "{l:?}");
        }
        assert!(l.libc_lo < l.libc_hi && l.libc_lo >= l.exe.off, "{l:?}");
        assert!(l.reserve() >= l.tcb + l.libc_hi + 64, "{l:?}");
        assert!(l.robust.is_some(), "{l:?}");
        assert!(l.movable(), "{l:?}");
        assert_eq!(l.reserve() % 16, 0, "the stack starts 16-byte aligned");
        let lowest = l
            .others
            .iter()
            .chain([&l.exe])
            .map(|b| b.off)
            .max()
            .unwrap();
        assert!(
            l.reserve() < l.tcb + lowest.max(l.libc_hi) + 64 + l.align + 16,
            "{l:?}"
        );
    }
}
