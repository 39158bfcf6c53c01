//! A thread-local area of its own for every virtual thread.
//!
//! # What a virtual thread gets
//!
//! Rust's `thread_local!` values, `std::thread::current()` (and so its
//! `ThreadId`, its name, its parker), the panic count, Tokio's "inside a
//! runtime" context, `parking_lot`'s per-thread data: all of it is reached
//! through the CPU's *thread pointer* (`%fs` on x86_64), which the kernel
//! keeps per OS thread. A carrier runs many virtual threads in turn, so
//! without more they would all share the carrier's values: a value set
//! before a park could be another thread's after it, and a library that
//! marks "I am inside X" on the thread (Tokio's `block_on`) would see the
//! mark of whichever thread parked inside X last.
//!
//! So each virtual thread gets a *thread-local area* (the "area") of its
//! own, and the carrier points the thread pointer at it while the thread
//! runs — one `wrfsbase` instruction on mount and one on unmount. Every
//! thread-local then lives at its own address for the thread's whole life,
//! as on an OS thread: references to it may be lent out (to a scoped OS
//! thread, say) across a park, and compiled code that caches a
//! thread-local's address across a call stays right.
//!
//! # Rejected: copying values in and out
//!
//! Swapping thread-local *contents* in and out of the carrier's block at
//! every switch looks cheaper, and is unsound: a `Sync` thread-local lent
//! by reference to another OS thread while its virtual thread is parked
//! would be overwritten under that thread's feet. Only a per-thread
//! *address* keeps lending sound.
//!
//! # The layout (x86_64, glibc: "TLS variant II")
//!
//! ```text
//!   low addresses                                        slot top
//!   ... stack ... | static TLS blocks | TCB (struct pthread) | header |
//!                 ^ tp - below        ^ tp (thread pointer)
//!                 | ... libc, other DSOs | executable |
//!   |<------------------ one page (the top one) ----------------------->|
//! ```
//!
//! glibc keeps its thread control block at the thread pointer and every
//! initially loaded module's TLS block at a fixed negative offset from it
//! (`static TLS`); compiled code, Rust's and libc's, reaches both with
//! `%fs`-relative loads. An area is therefore a copy of that whole shape,
//! carved from the top of the thread's own stack slot (no allocation, and
//! recycled with the stack):
//!
//! - the **executable's block** (where every Rust crate's thread-locals
//!   live: they are linked statically) starts from the module's `PT_TLS`
//!   template — the `.tdata` image, then zeroed `.tbss` — exactly as glibc
//!   starts a new thread. Never from the carrier's contents: a lazily
//!   initialised value's heap pointer would then be shared by two threads.
//! - the **blocks of the other modules loaded at start-up** (a C library
//!   built with `-fPIC`, libstdc++) start from their templates too: a C
//!   `__thread` variable or a C++ `thread_local` is the virtual thread's
//!   own, like a Rust one.
//! - the **TCB** is copied from the carrier when the area is made, with its
//!   two self pointers (`tcb`, `self`) pointed at the copy. Its fields are
//!   what glibc reads `%fs`-relative: the stack protector canary and pointer
//!   guard (the same values), the kernel thread id (the carrier's:
//!   refreshed by [`adopt`] when the thread runs on another carrier after
//!   a handoff), cancellation state.
//!   Three fields are set apart: the rseq area reads "not registered" (the
//!   kernel updates only the carrier's), the robust-mutex list is empty and
//!   the area's own, and the **`dtv`** — the table `__tls_get_addr` reads
//!   for modules built with `-fPIC` and `dlopen`ed ones — is the area's own
//!   (made by [`init_area`] from the carrier's, freed by [`release_area`]),
//!   so that path reaches the same blocks as `%fs`-relative code.
//! - **libc's block** (errno, malloc's thread cache and arena, locale
//!   pointers, `dlerror` state, …) is libc's per-OS-thread state, whose
//!   heap pointers libc frees and replaces (two copies would free one
//!   buffer twice). It is mirrored: copied from the carrier on mount and
//!   back on unmount, so there is one such state per carrier, as without
//!   areas (nothing lends its addresses). 144 bytes for glibc 2.36. Its
//!   one per-thread value, errno, is saved across every switch
//!   (`thread::suspend`).
//! - the **rest of static TLS** — glibc's *surplus*, below the blocks of
//!   the modules loaded at start-up, where glibc places the block of a
//!   module `dlopen`ed later whose thread-locals are initial-exec — is not
//!   in the area: the stack starts right below the lowest block the area
//!   holds (`tp - below`, 16-byte aligned), so that the area and the top
//!   of the stack share one page (see "What the area costs"). Such a
//!   module loaded *after* areas exist would have its block inside every
//!   virtual thread's stack; so Weft defines `dlopen` and `dlmopen`
//!   (glibc's, then a check) and refuses that load: it closes the handle,
//!   returns null, and says why on stderr and in `dlerror` (the library,
//!   and the cure: `WEFT_THREAD_LOCALS=carrier`). The check asks glibc
//!   where each loaded module's block lies for the calling thread
//!   (`__tls_get_addr`): a static block deeper than any before the call
//!   was placed by it. The load itself runs on the carrier's own TCB when
//!   called from a virtual thread (`on_carrier`, pinned), because the new
//!   modules' constructors run inside it, and one that wrote its
//!   initial-exec thread-local on the area would write into the caller's
//!   stack before the check could refuse. A module loaded before the
//!   layout is fixed is one of the area's blocks (the layout lists what is
//!   loaded then; the `AREAS_FIXED` handshake orders a concurrent load
//!   either before that listing or under the check). A library with
//!   dynamic TLS (`-fPIC`, general-dynamic: the usual case) loads as
//!   before: its blocks are made per thread in the heap.
//! - a small **header** above the TCB holds what the thread registered to
//!   run when it ends: Rust's thread-local destructors (`__cxa_thread_atexit_impl`,
//!   which std calls for each `thread_local!` with a `Drop`) and pthread
//!   key values (std's own clean-up of `thread::current()` runs from one).
//!   Weft defines both entry points; on an OS thread they forward to glibc.
//!   When the virtual thread's body has returned, still on the thread, its
//!   destructors run (newest first, until none is left), then its key
//!   destructors — glibc's order at `pthread_exit` — before `join` returns.
//!
//! What the area costs: header (64 bytes), TCB (2,304 bytes for glibc
//! 2.36), the executable's, libc's and the other start-up modules' blocks
//! (a few hundred bytes for a Rust program), and right below them the top
//! of the stack: a thread parked in `weft::park` touches that one page
//! only — the same one page a thread without an area touches (its stack's
//! top) — plus its `dtv` in the heap (80 bytes with malloc's header for
//! a program whose TLS modules are the executable and libc). Mount
//! and unmount each add the mirror copy and a `wrfsbase` (5 ns on the
//! 2-core VM these were measured on); a spawn adds the other modules'
//! template copies and the `dtv`'s `malloc`/`free`. Measured 2026-11-25
//! (before the shared page and the own `dtv`; see ARCHITECTURE.md's costs
//! for both), areas against `WEFT_THREAD_LOCALS=carrier`, the same
//! binaries back to back (medians; `weft-bench --only spawn,pingpong
//! --runtimes weft --runs 5`, quiet machine, load 0.8; the 100k-sleep row
//! from `--only sleep-100k --runs 3` on a busy one):
//!
//! | | areas | shared |
//! |---|---|---|
//! | parked thread, 1M (`cargo run --release -p weft --example parked_memory -- 1000000`) | 8.90 KiB (5.2 since the shared page, 4.57 with 128 KiB slots, the trimmed `dtv` and a smaller record: `stack.rs`) | 4.90 KiB (4.49) |
//! | ping-pong round trip | 187 ns (185–189) | 188 ns (186–199) |
//! | spawn + join | 730 ns (689–845) | 691 ns (579–788) |
//! | spawn + join from `main` | 578 ns (562–776) | 679 ns (564–741) |
//! | 100k × sleep(1 s): peak RSS | 887 MiB | 497 MiB |
//!
//! On the busy machine ping-pong was 208 against 180 ns.
//! Instructions (callgrind): 1,423 against 1,100 per ping-pong round trip,
//! 6,376 against 4,611 per spawn.
//!
//! # Weft's own per-carrier state
//!
//! The scheduler keeps a few thread-locals that describe the *carrier*
//! (which carrier this OS thread is, whether it is between two stacks).
//! Code running on a virtual thread reads them through `%fs` like any
//! other, so [`seed`] writes the carrier's values into a new area, and
//! the carrier seeds them again when a thread it takes over from another
//! carrier mounts for the first time ([`adopt`] says when).
//!
//! # Limits
//!
//! - x86_64 with glibc only (the layout above is glibc's; aarch64's is the
//!   other variant). Elsewhere [`layout`] is `None` and virtual threads share
//!   their carrier's thread-locals, as before.
//! - A runtime that allows migration shares too: a thread may move at any
//!   suspension there, and the mount would have to refresh the area every
//!   time. With areas a thread moves only off a held carrier (handoff),
//!   and [`adopt`] refreshes the kernel thread id and the carrier named in
//!   the header then; without glibc's description of the thread id's
//!   place (`_thread_db_pthread_tid`) threads stay where they started.
//! - glibc's setxid handshake (`setuid` in a threaded process) signals
//!   each OS thread and waits for a flag in its TCB: a relay runs glibc's
//!   SIGSETXID handler on the carrier's own TCB (`install_setxid_relay`).
//! - `pthread_getattr_np(pthread_self())` is answered with the virtual
//!   thread's own stack; for another virtual thread's handle it gives the
//!   carrier's attributes as glibc sees them.
//! - A library with initial-exec thread-locals `dlopen`ed after areas
//!   exist is refused (see "The layout"). glibc sees Weft's `dlopen` as
//!   the caller, so a relative name is searched with the executable's
//!   run path rather than the calling library's, and a `dlopen` from a
//!   library loaded into another namespace loads into the base one. Loads
//!   glibc makes itself (NSS modules, `iconv` converters) do not go
//!   through `dlopen` and are not checked: none of glibc 2.36's has
//!   thread-locals of its own (the initial-exec accesses of `libresolv`
//!   and `libnss_compat` are to libc's block, which every area holds). A
//!   refused module marked `RTLD_NODELETE` stays loaded (its handle is
//!   closed and never returned). Called on a virtual thread, `dlopen` runs
//!   on the carrier's TCB: the constructors of the modules it loads see
//!   the carrier's thread-locals (a `thread_local` a C++ constructor makes
//!   is the carrier's), while `weft::current()` is still the
//!   virtual thread.
//! - The `dtv` holds the slots the carrier's uses, up to its last
//!   non-zero one, without glibc's 14 spare slots: glibc reads a `dtv`'s
//!   slots unchecked whenever its generation is current, and every module
//!   of the carrier `dtv`'s generation has a non-zero slot in it (glibc
//!   fills them when it makes or updates a `dtv`, `_dl_allocate_tls_init`
//!   and `_dl_update_slotinfo`), so none lies past the copy's length; a
//!   module of a later generation sends `__tls_get_addr` through glibc's
//!   update, which grows the `dtv` (`realloc`: it is `malloc`ed) before
//!   it writes a slot past the end. 80 bytes with malloc's header for a
//!   program whose modules with thread-locals are the executable and
//!   libc, 304 with the spare slots.

use std::cell::Cell;

std::thread_local! {
    /// The header of the area the thread pointer points into; null on an OS
    /// thread (and on a virtual thread without an area). `const`, no
    /// destructor: one `%fs`-relative load, safe in a signal handler.
    static AREA: Cell<*mut Header> = const { Cell::new(std::ptr::null_mut()) };
}

/// Whether the calling code runs on a thread-local area of its own (a
/// virtual thread with isolated thread-locals).
#[inline]
pub(crate) fn isolated() -> bool {
    !AREA.with(Cell::get).is_null()
}

pub(crate) use imp::{
    Layout, SpareDtv, adopt, layout, release_area, run_dtors, run_on, seed, set_pin,
};

/// Per-area bookkeeping, above the TCB copy.
#[repr(C)]
pub(crate) struct Header {
    /// `__cxa_thread_atexit_impl` registrations, newest first.
    dtors: *mut Dtor,
    /// pthread key values set on this thread (`pthread_setspecific`).
    keys: *mut Vec<(libc::pthread_key_t, *mut libc::c_void)>,
    /// The thread pointer of the carrier the area was made on (the OS
    /// thread that runs it: SIGSETXID's relay, `pthread_getattr_np`).
    carrier_tp: usize,
    /// The thread's stack, `[stack_lo, stack_hi)` (`pthread_getattr_np`).
    stack_lo: usize,
    stack_hi: usize,
}

struct Dtor {
    func: unsafe extern "C" fn(*mut libc::c_void),
    obj: *mut libc::c_void,
    next: *mut Dtor,
}

#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
mod imp {
    use super::{AREA, Dtor, Header};
    use libc::{c_int, c_void, pthread_key_t};
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

    /// One module's static TLS block: at `tp - off`, `memsz` bytes, the
    /// first `filesz` of them from the module's `PT_TLS` image at `image`.
    #[derive(Debug, Clone, Copy)]
    struct Block {
        off: usize,
        image: usize,
        filesz: usize,
        memsz: usize,
    }

    impl Block {
        /// Starts the block of the area at `tp` as glibc starts a new
        /// thread's: the image, then zeroes.
        ///
        /// # Safety
        ///
        /// `tp` is an area being made by [`init_area`], whose static TLS
        /// region holds this block.
        unsafe fn init(&self, tp: usize) {
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
        tcb: usize,
        /// The executable's block (every Rust crate's thread-locals).
        exe: Block,
        /// The blocks of the other modules loaded at start-up except libc
        /// (C and C++ libraries, libstdc++): the thread's own, like the
        /// executable's.
        others: Vec<Block>,
        /// libc's block lies in `[tp - libc_hi, tp - libc_lo)`: mirrored.
        libc_lo: usize,
        libc_hi: usize,
        /// glibc's static TLS size: the carrier's static blocks lie in
        /// `[carrier_tp - static_size, carrier_tp)`.
        static_size: usize,
        /// Offset of glibc's `struct rseq` from `tp`, when glibc registered
        /// one with the kernel.
        rseq: Option<usize>,
        /// Offset of glibc's robust-mutex list head (`robust_head`) from
        /// `tp`, when it was found where glibc 2.28+ keeps it.
        robust: Option<usize>,
        /// Offset of the kernel thread id (`struct pthread`'s `tid`) from
        /// `tp`, from glibc's own description for debuggers
        /// (`_thread_db_pthread_tid`) and checked against `gettid`. Without
        /// it an area cannot follow its thread to another carrier
        /// ([`adopt`]), and threads stay on their first carrier.
        tid: Option<usize>,
        /// Alignment of `tp`.
        align: usize,
        /// Bytes at the top of a stack slot the area takes.
        reserve: usize,
        /// `wrfsbase` may be used (else `arch_prctl`).
        fsgsbase: bool,
    }

    const HEADER: usize = 64;
    const _: () = assert!(size_of::<Header>() <= HEADER);

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

    static LAYOUT: once_cell::sync::OnceCell<Option<Layout>> = once_cell::sync::OnceCell::new();

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

    #[inline(always)]
    fn read_tp() -> usize {
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
    unsafe fn set_tp(tp: usize, fsgsbase: bool) {
        if fsgsbase {
            // SAFETY: FSGSBASE is enabled (AT_HWCAP2); the caller vouches
            // for the area. No `nomem`: memory accesses must not move
            // across the switch.
            unsafe {
                std::arch::asm!("wrfsbase {}", in(reg) tp, options(nostack, preserves_flags))
            };
        } else {
            const ARCH_SET_FS: libc::c_long = 0x1002;
            // SAFETY: as above; arch_prctl only sets the register.
            unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_SET_FS, tp) };
        }
    }

    /// A loaded module with thread-locals, as `dl_iterate_phdr` lists it.
    struct Module {
        /// glibc's TLS module id (the module's `dtv` slot).
        modid: usize,
        /// Its file name (empty for the executable).
        name: std::ffi::CString,
        /// Its `PT_TLS` image, `filesz` bytes of `memsz`.
        image: usize,
        filesz: usize,
        memsz: usize,
    }

    unsafe extern "C" fn each_module(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: glibc passes a valid info for the duration of the call, and
        // `data` is the `Vec` that `modules` passed in.
        let (info, found) = unsafe { (&*info, &mut *data.cast::<Vec<Module>>()) };
        if info.dlpi_tls_modid == 0 {
            return 0;
        }
        // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let Some(tls) = phdrs.iter().find(|p| p.p_type == libc::PT_TLS) else {
            return 0;
        };
        let name = if info.dlpi_name.is_null() {
            std::ffi::CString::default()
        } else {
            // SAFETY: glibc's NUL-terminated name of the module.
            unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }.to_owned()
        };
        found.push(Module {
            modid: info.dlpi_tls_modid,
            name,
            image: info.dlpi_addr as usize + tls.p_vaddr as usize,
            filesz: tls.p_filesz as usize,
            memsz: tls.p_memsz as usize,
        });
        0
    }

    /// Every loaded module with thread-locals, in load order (the
    /// executable first).
    fn modules() -> Vec<Module> {
        let mut found = Vec::new();
        // SAFETY: the callback matches dl_iterate_phdr's contract and only
        // reads what glibc passes it.
        unsafe { libc::dl_iterate_phdr(Some(each_module), (&raw mut found).cast()) };
        found
    }

    /// glibc's `tls_index`, the argument of `__tls_get_addr`.
    #[repr(C)]
    struct TlsIndex {
        module: usize,
        offset: usize,
    }

    unsafe extern "C" {
        /// glibc's (the dynamic linker's) general-dynamic TLS access.
        fn __tls_get_addr(ti: *const TlsIndex) -> *mut c_void;
    }

    /// glibc's static TLS size and alignment (`_dl_get_tls_static_info`):
    /// every static block of a thread lies in `[tp - size, tp)`. Zeroes if
    /// glibc does not say.
    fn static_tls_info() -> (usize, usize) {
        static INFO: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();
        *INFO.get_or_init(|| {
            // SAFETY: dlsym with a NUL-terminated name; the function has
            // this signature in every glibc that exports it.
            let info: Option<unsafe extern "C" fn(*mut usize, *mut usize)> = unsafe {
                let p = libc::dlsym(libc::RTLD_DEFAULT, c"_dl_get_tls_static_info".as_ptr());
                (!p.is_null()).then(|| std::mem::transmute::<*mut c_void, _>(p))
            };
            let (mut size, mut align) = (0usize, 0usize);
            if let Some(info) = info {
                // SAFETY: writes two usizes.
                unsafe { info(&mut size, &mut align) };
            }
            (size, align)
        })
    }

    fn static_tls_size() -> usize {
        static_tls_info().0
    }

    fn static_tls_align() -> usize {
        static_tls_info().1
    }

    /// Where module `modid`'s block lies in the calling thread's static
    /// TLS, as an offset below its thread pointer; `None` for a block of
    /// dynamic TLS. Asks glibc for the calling thread's block
    /// (`__tls_get_addr`, which brings the thread's `dtv` up to date and
    /// makes a dynamic block if the thread had none yet: a module loaded
    /// since the thread's `dtv` was last updated is seen too). Never
    /// called inside `dl_iterate_phdr` (glibc's locks).
    fn static_off(modid: usize) -> Option<usize> {
        let ti = TlsIndex {
            module: modid,
            offset: 0,
        };
        // SAFETY: `modid` is a loaded module's TLS id (just listed by
        // `modules`; a module unloaded meanwhile by another thread is
        // glibc's undefined case for any access to its thread-locals,
        // which the callers do not make: they compare the address only).
        let a = unsafe { __tls_get_addr(&ti) } as usize;
        let tp = read_tp();
        (a != 0 && a < tp && tp - a <= static_tls_size()).then(|| tp - a)
    }

    /// Looks up a data symbol of glibc's (`__rseq_offset`, …).
    fn glibc_data<T: Copy>(name: &std::ffi::CStr) -> Option<T> {
        // SAFETY: dlsym with a NUL-terminated name.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        // SAFETY: a non-null result is the address of glibc's object of
        // that name, whose type the caller names.
        (!p.is_null()).then(|| unsafe { p.cast::<T>().read() })
    }

    fn discover() -> Option<Layout> {
        let static_size = static_tls_size();
        if static_size == 0 {
            return None;
        }
        let tp = read_tp();
        // The TCB's size: glibc puts it at the very top of a thread's stack
        // mapping, so on a glibc-made thread it runs from tp to that top.
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
        let tcb = top.checked_sub(tp)?;
        let blocks: Vec<Block> = modules()
            .into_iter()
            .filter_map(|m| {
                Some(Block {
                    off: static_off(m.modid)?,
                    image: m.image,
                    filesz: m.filesz,
                    memsz: m.memsz,
                })
            })
            .collect();
        let mut blocks = blocks.into_iter();
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
        // The kernel updates the `struct rseq` glibc registered for each
        // OS thread (glibc 2.35+: `__rseq_size` non-zero — 20, the
        // original feature size, in 2.35 and 2.36 — the area at
        // `tp + __rseq_offset`, inside the TCB).
        let rseq = glibc_data::<u32>(c"__rseq_size")
            .filter(|&size| size >= 20)
            .and(glibc_data::<isize>(c"__rseq_offset"))
            .and_then(|off| usize::try_from(off).ok())
            .filter(|&off| off + 16 <= tcb);
        // glibc registers `&pd->robust_head` with the kernel for every
        // thread it makes, with `robust_prev` in the word before it; on a
        // thread that holds no robust mutex both point at the head.
        let robust = {
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
        };
        // glibc describes `struct pthread` for libthread_db: each field as
        // `{ size in bits, count, offset }`. Trusted only if the field is
        // 32 bits wide, inside the TCB, and holds this thread's id.
        let tid = glibc_data::<[u32; 3]>(c"_thread_db_pthread_tid")
            .filter(|&[bits, n, off]| bits == 32 && n == 1 && off as usize + 4 <= tcb)
            .map(|[_, _, off]| off as usize)
            // SAFETY: the offset lies inside this thread's own TCB (above);
            // gettid has no preconditions.
            .filter(|&off| unsafe { ((tp + off) as *const i32).read() == libc::gettid() });
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
    unsafe fn new_dtv(l: &Layout, carrier_tp: usize, tp: usize, spare: Option<SpareDtv>) -> usize {
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

    fn install_setxid_relay(fsgsbase: bool) {
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

    /// Runs the destructors the calling virtual thread registered
    /// (thread-local values, then pthread key values), until none is left.
    /// Called by the thread itself when its body has returned. Nothing on
    /// an OS thread.
    pub(crate) fn run_dtors() {
        let h = AREA.with(Cell::get);
        if h.is_null() {
            return;
        }
        // glibc's PTHREAD_DESTRUCTOR_ITERATIONS for keys; thread-local
        // destructors run until their list is empty, as glibc's do.
        for _ in 0..4 {
            // SAFETY: the header belongs to the running thread (AREA is
            // per area) and only this thread touches it.
            unsafe {
                loop {
                    let d = (*h).dtors;
                    if d.is_null() {
                        break;
                    }
                    let Dtor { func, obj, next } = *Box::from_raw(d);
                    (*h).dtors = next;
                    func(obj);
                }
                let keys = (*h).keys;
                if keys.is_null() {
                    return;
                }
                let mut ran = false;
                let mut i = 0;
                loop {
                    // A short borrow: a destructor may set keys again.
                    let (key, value) = {
                        let v = &mut *keys;
                        let Some(e) = v.get_mut(i) else { break };
                        (e.0, std::mem::replace(&mut e.1, std::ptr::null_mut()))
                    };
                    i += 1;
                    if value.is_null() {
                        continue;
                    }
                    if let Some(dtor) = key_dtor(key) {
                        ran = true;
                        dtor(value);
                    }
                }
                if !ran && (*h).dtors.is_null() {
                    drop(Box::from_raw(keys));
                    (*h).keys = std::ptr::null_mut();
                    return;
                }
            }
        }
    }

    // -----------------------------------------------------------------
    // The entry points std (and C code) registers per-thread clean-up
    // with: on an area, they keep it in the area; elsewhere, glibc's.

    type AtExit =
        unsafe extern "C" fn(unsafe extern "C" fn(*mut c_void), *mut c_void, *mut c_void) -> c_int;
    type GetSpecific = unsafe extern "C" fn(pthread_key_t) -> *mut c_void;
    type SetSpecific = unsafe extern "C" fn(pthread_key_t, *const c_void) -> c_int;
    type KeyDelete = unsafe extern "C" fn(pthread_key_t) -> c_int;
    type KeyCreate = unsafe extern "C" fn(
        *mut pthread_key_t,
        Option<unsafe extern "C" fn(*mut c_void)>,
    ) -> c_int;

    /// glibc's definition of `name` (the next one after ours).
    fn real(cache: &AtomicPtr<c_void>, name: &std::ffi::CStr) -> *mut c_void {
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

    static REAL_ATEXIT: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    static REAL_GET: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    static REAL_SET: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    static REAL_CREATE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    static REAL_DELETE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

    /// Destructors of pthread keys created through [`pthread_key_create`],
    /// by key (glibc's keys are below PTHREAD_KEYS_MAX, 1024).
    static KEY_DTORS: [AtomicUsize; 1024] = [const { AtomicUsize::new(0) }; 1024];

    fn key_dtor(key: pthread_key_t) -> Option<unsafe extern "C" fn(*mut c_void)> {
        let p = KEY_DTORS.get(key as usize)?.load(Ordering::Acquire);
        // SAFETY: non-zero values were stored from such a function pointer.
        (p != 0)
            .then(|| unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(*mut c_void)>(p) })
    }

    /// Registers `func(obj)` to run when the calling thread ends: what std
    /// calls for every `thread_local!` with a destructor. (Interposes
    /// glibc's; on an OS thread it forwards there.)
    ///
    /// # Safety
    ///
    /// As glibc's: `func` may be called with `obj` once, on this thread.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __cxa_thread_atexit_impl(
        func: unsafe extern "C" fn(*mut c_void),
        obj: *mut c_void,
        dso: *mut c_void,
    ) -> c_int {
        let h = AREA.with(Cell::get);
        if h.is_null() {
            // SAFETY: glibc's function of this signature.
            let real: AtExit =
                unsafe { std::mem::transmute(real(&REAL_ATEXIT, c"__cxa_thread_atexit_impl")) };
            // SAFETY: forwarded unchanged.
            return unsafe { real(func, obj, dso) };
        }
        let d = Box::into_raw(Box::new(Dtor {
            func,
            obj,
            // SAFETY: the running thread's own header.
            next: unsafe { (*h).dtors },
        }));
        // SAFETY: as above.
        unsafe { (*h).dtors = d };
        0
    }

    /// `pthread_getspecific`: per virtual thread on an area.
    ///
    /// # Safety
    ///
    /// As glibc's.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn pthread_getspecific(key: pthread_key_t) -> *mut c_void {
        let h = AREA.with(Cell::get);
        if h.is_null() {
            // SAFETY: glibc's function of this signature.
            let real: GetSpecific =
                unsafe { std::mem::transmute(real(&REAL_GET, c"pthread_getspecific")) };
            // SAFETY: forwarded unchanged.
            return unsafe { real(key) };
        }
        // SAFETY: the running thread's own header.
        let keys = unsafe { (*h).keys };
        if keys.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: as above.
        unsafe {
            (*keys)
                .iter()
                .find(|e| e.0 == key)
                .map_or(std::ptr::null_mut(), |e| e.1)
        }
    }

    /// `pthread_setspecific`: per virtual thread on an area.
    ///
    /// # Safety
    ///
    /// As glibc's.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn pthread_setspecific(
        key: pthread_key_t,
        value: *const c_void,
    ) -> c_int {
        let h = AREA.with(Cell::get);
        if h.is_null() {
            // SAFETY: glibc's function of this signature.
            let real: SetSpecific =
                unsafe { std::mem::transmute(real(&REAL_SET, c"pthread_setspecific")) };
            // SAFETY: forwarded unchanged.
            return unsafe { real(key, value) };
        }
        if key as usize >= KEY_DTORS.len() {
            return libc::EINVAL;
        }
        // SAFETY: the running thread's own header.
        unsafe {
            if (*h).keys.is_null() {
                (*h).keys = Box::into_raw(Box::default());
            }
            let keys = &mut *(*h).keys;
            match keys.iter_mut().find(|e| e.0 == key) {
                Some(e) => e.1 = value.cast_mut(),
                None => keys.push((key, value.cast_mut())),
            }
        }
        0
    }

    /// `pthread_key_delete`: glibc's, forgetting the key's destructor (a
    /// virtual thread that still holds a value of it does not run it at
    /// its end, as glibc would not).
    ///
    /// # Safety
    ///
    /// As glibc's.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn pthread_key_delete(key: pthread_key_t) -> c_int {
        if let Some(slot) = KEY_DTORS.get(key as usize) {
            slot.store(0, Ordering::Release);
        }
        // SAFETY: glibc's function of this signature.
        let real: KeyDelete =
            unsafe { std::mem::transmute(real(&REAL_DELETE, c"pthread_key_delete")) };
        // SAFETY: forwarded unchanged.
        unsafe { real(key) }
    }

    /// `pthread_key_create`: glibc's, remembering the destructor so that a
    /// virtual thread's values can be destroyed when it ends.
    ///
    /// # Safety
    ///
    /// As glibc's.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn pthread_key_create(
        key: *mut pthread_key_t,
        dtor: Option<unsafe extern "C" fn(*mut c_void)>,
    ) -> c_int {
        // SAFETY: glibc's function of this signature.
        let real: KeyCreate =
            unsafe { std::mem::transmute(real(&REAL_CREATE, c"pthread_key_create")) };
        // SAFETY: forwarded unchanged.
        let r = unsafe { real(key, dtor) };
        if r == 0 {
            // SAFETY: glibc wrote the key.
            let k = unsafe { *key } as usize;
            if let Some(slot) = KEY_DTORS.get(k) {
                slot.store(dtor.map_or(0, |d| d as usize), Ordering::Release);
            }
        }
        r
    }

    static REAL_GETATTR: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

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
        type GetAttr = unsafe extern "C" fn(libc::pthread_t, *mut libc::pthread_attr_t) -> c_int;
        // SAFETY: glibc's function of this signature.
        let real: GetAttr =
            unsafe { std::mem::transmute(real(&REAL_GETATTR, c"pthread_getattr_np")) };
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

    // -----------------------------------------------------------------
    // `dlopen` and `dlmopen`: no module placed in static TLS after the
    // area layout was fixed. glibc keeps a surplus of static TLS for
    // modules loaded later whose thread-locals are initial-exec (reached
    // `%fs`-relative, at `tp - offset`), and places such a module's block
    // there — below the blocks of the modules loaded at start-up, which
    // is where an area's stack starts. So a load that places a block
    // there after areas exist is undone: the handle is closed and the load
    // fails, naming the library and the cure.

    /// Set (SeqCst) before the area layout lists the modules, and left set
    /// when areas are on. A load that finds it down after glibc's `dlopen`
    /// returned finished before that listing (glibc's list lock orders
    /// the two), so the layout holds its blocks; one that finds it up
    /// checks what it placed.
    static AREAS_FIXED: AtomicBool = AtomicBool::new(false);

    static REAL_DLOPEN: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    static REAL_DLMOPEN: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    static REAL_DLCLOSE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

    type DlOpen = unsafe extern "C" fn(*const libc::c_char, c_int) -> *mut c_void;
    type DlMOpen = unsafe extern "C" fn(libc::Lmid_t, *const libc::c_char, c_int) -> *mut c_void;
    type DlClose = unsafe extern "C" fn(*mut c_void) -> c_int;

    /// The deepest static block of the loaded modules (its offset below
    /// the thread pointer; 0 for none).
    fn deepest_static() -> usize {
        modules()
            .iter()
            .filter_map(|m| static_off(m.modid))
            .max()
            .unwrap_or(0)
    }

    /// Runs `f` with the thread pointer on the carrier's own TCB when the
    /// caller is a virtual thread with an area (else just runs it), pinned
    /// meanwhile. For glibc's `dlopen`: the constructors of the modules it
    /// loads run inside it, and glibc initialises a block it places in
    /// static TLS only in its own threads — a constructor that wrote its
    /// initial-exec thread-local on an area would write into the thread's
    /// stack. On the carrier's TCB that block is initialised and the
    /// carrier's own. libc's block is handed over both ways (as `run_on`
    /// mirrors it), so `dlerror` and errno are the thread's. Pinned (a
    /// `weft::pinned` section): every wait inside holds the carrier, so
    /// the thread is never unmounted with the thread pointer switched —
    /// nor while glibc holds its loader lock.
    fn on_carrier<R>(f: impl FnOnce() -> R) -> R {
        let h = AREA.with(Cell::get);
        let (false, Some(Some(l))) = (h.is_null(), LAYOUT.get()) else {
            return f();
        };
        let pin = PIN.load(Ordering::Acquire);
        if pin == 0 {
            return f(); // unreachable: set before the first area was made
        }
        // SAFETY: stored by `set_pin` from a function of this type.
        let pin = unsafe { std::mem::transmute::<usize, fn(bool)>(pin) };
        pin(true);
        // SAFETY: the header is the running thread's, naming the carrier
        // that runs it (refreshed by `adopt` after a handoff), whose TCB
        // is complete and alive while it runs us; pinned, the thread stays
        // mounted on it until the area is put back. `f` is
        // `load_and_check`, not inlined.
        let r = unsafe { run_on(l, (*h).carrier_tp, f) };
        pin(false);
        r
    }

    /// How [`on_carrier`] pins the calling virtual thread and unpins it
    /// (`fn(true)`, `fn(false)`): given by the scheduler before it makes
    /// an area (`set_pin`), as the thread's record is in a layer above
    /// this one.
    static PIN: AtomicUsize = AtomicUsize::new(0);

    /// Sets how [`on_carrier`] pins and unpins the calling virtual thread;
    /// called before an area is made (so before any thread runs on one).
    pub(crate) fn set_pin(pin: fn(bool)) {
        PIN.store(pin as usize, Ordering::Release);
    }

    /// Runs glibc's `load`, then undoes it if it placed a block in static
    /// TLS below what areas hold (see above).
    fn checked_load(load: impl FnOnce() -> *mut c_void) -> *mut c_void {
        if matches!(LAYOUT.get(), Some(None)) {
            return load(); // no areas in this process, ever
        }
        on_carrier(|| load_and_check(load))
    }

    /// [`checked_load`]'s work, on the carrier's TCB. Not inlined into
    /// [`run_on`]: the thread-locals it touches (`eprintln!`'s) are
    /// reached after the switch.
    #[inline(never)]
    fn load_and_check(load: impl FnOnce() -> *mut c_void) -> *mut c_void {
        let before = deepest_static();
        let handle = load();
        if handle.is_null() || !AREAS_FIXED.load(Ordering::SeqCst) {
            return handle;
        }
        let late: Vec<Module> = modules()
            .into_iter()
            .filter(|m| static_off(m.modid).is_some_and(|off| off > before))
            .collect();
        if late.is_empty() {
            return handle;
        }
        refuse(handle, &late)
    }

    /// Closes `handle` and fails the load: on stderr and in `dlerror`.
    #[cold]
    fn refuse(handle: *mut c_void, late: &[Module]) -> *mut c_void {
        let names: Vec<_> = late.iter().map(|m| m.name.to_string_lossy()).collect();
        // SAFETY: glibc's function of this signature, closing the handle
        // glibc's `dlopen` just returned.
        unsafe {
            let close: DlClose = std::mem::transmute(real(&REAL_DLCLOSE, c"dlclose"));
            close(handle);
        }
        let msg = format!(
            "weft: refused to load {}: its thread-locals are initial-exec, and glibc placed \
             them in static TLS below a virtual thread's thread-local area, where its stack \
             lies; run with WEFT_THREAD_LOCALS=carrier to load it",
            names.join(", ")
        );
        eprintln!("{msg}");
        // glibc has no call that sets `dlerror`'s message; a failed load of
        // a file named by the message does (`RTLD_NOLOAD`: nothing is ever
        // loaded), with glibc's "cannot open shared object file" after it.
        let msg = std::ffi::CString::new(msg.replace('\0', "")).unwrap_or_default();
        // SAFETY: glibc's function of this signature, NUL-terminated name.
        unsafe {
            let open: DlOpen = std::mem::transmute(real(&REAL_DLOPEN, c"dlopen"));
            open(msg.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        }
        std::ptr::null_mut()
    }

    /// `dlopen`: glibc's, refused when it would place a module's
    /// thread-locals where an area's stack lies (see above). glibc sees
    /// this function as the caller: a relative name is searched with the
    /// executable's run path, not the calling library's.
    ///
    /// # Safety
    ///
    /// As glibc's.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn dlopen(file: *const libc::c_char, mode: c_int) -> *mut c_void {
        // SAFETY: glibc's function of this signature.
        let open: DlOpen = unsafe { std::mem::transmute(real(&REAL_DLOPEN, c"dlopen")) };
        // SAFETY: forwarded unchanged.
        checked_load(|| unsafe { open(file, mode) })
    }

    /// `dlmopen`: as [`dlopen`], into namespace `lmid`.
    ///
    /// # Safety
    ///
    /// As glibc's.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn dlmopen(
        lmid: libc::Lmid_t,
        file: *const libc::c_char,
        mode: c_int,
    ) -> *mut c_void {
        // SAFETY: glibc's function of this signature.
        let open: DlMOpen = unsafe { std::mem::transmute(real(&REAL_DLMOPEN, c"dlmopen")) };
        // SAFETY: forwarded unchanged.
        checked_load(|| unsafe { open(lmid, file, mode) })
    }

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
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu")))]
mod imp {
    /// No areas on this platform: see the module docs.
    pub(crate) enum Layout {}
    impl Layout {
        pub(crate) fn reserve(&self) -> usize {
            match *self {}
        }
        pub(crate) fn movable(&self) -> bool {
            match *self {}
        }
    }
    pub(crate) fn layout() -> Option<&'static Layout> {
        None
    }
    /// # Safety
    ///
    /// As the x86_64 glibc version's (never called: no `Layout` exists here).
    pub(crate) unsafe fn init_area(
        l: &Layout,
        _slot_top: usize,
        _stack_lo: usize,
        _spare: Option<SpareDtv>,
    ) -> usize {
        match *l {}
    }
    /// No `dtv`s on this platform.
    pub(crate) enum SpareDtv {}
    /// # Safety
    ///
    /// As the x86_64 glibc version's (never called: no `Layout` exists here).
    pub(crate) unsafe fn release_area(_tp: usize) -> SpareDtv {
        unreachable!("no areas on this platform")
    }
    /// # Safety
    ///
    /// As the x86_64 glibc version's (never called: no `Layout` exists here).
    pub(crate) unsafe fn adopt(l: &Layout, _tp: usize) -> bool {
        match *l {}
    }
    /// # Safety
    ///
    /// As the x86_64 glibc version's (never called: no `Layout` exists here).
    pub(crate) unsafe fn seed<T>(_tp: usize, _var: *const T, _value: T) {}
    /// # Safety
    ///
    /// As the x86_64 glibc version's (never called: no `Layout` exists here).
    pub(crate) unsafe fn run_on<R>(l: &Layout, _tp: usize, _f: impl FnOnce() -> R) -> R {
        match *l {}
    }
    pub(crate) fn run_dtors() {}
    pub(crate) fn set_pin(_pin: fn(bool)) {}
}

pub(crate) use imp::init_area;
