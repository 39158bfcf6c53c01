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
//!   time. With areas a thread moves only off a stalled carrier (handoff),
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
//!
//! # Files, bottom up
//!
//! `tests/layers.rs` (`tls_reads_bottom_up`) keeps every import going
//! down this list:
//!
//! - `header.rs` (the header and the thread-local that finds it), `tp.rs`
//!   (the thread pointer), `stub.rs` (other platforms);
//! - `modules.rs` (the loaded modules with thread-locals, where their
//!   blocks lie), `setxid.rs` (the SIGSETXID relay);
//! - `layout.rs` (the process's layout, found once);
//! - `dtv.rs` (an area's own `dtv`; releasing it);
//! - `area.rs` (making, adopting, seeding an area), `switch.rs` (running
//!   on an area: the mount's switch);
//! - `dtors.rs` (what a thread registers to run at its end: glibc's
//!   per-thread entry points), `getattr.rs` (`pthread_getattr_np`);
//! - `dlopen.rs` (the `dlopen` guard);
//! - this file: the docs and what the rest of the crate uses.
//!
//! glibc's own functions of the names defined here are `crate::libc_next`'s
//! (their rows in its table, under these files).

mod header;

pub(crate) use header::isolated;

// The files below `header.rs` are x86_64 glibc only (`#![cfg]` inside
// each); elsewhere `stub.rs` stands in for them.
mod area;
mod dlopen;
mod dtors;
mod dtv;
mod getattr;
mod layout;
mod modules;
mod setxid;
mod stub;
mod switch;
mod tp;

#[cfg(not(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu")))]
pub(crate) use stub::{
    Layout, SpareDtv, adopt, init_area, layout, release_area, run_dtors, run_on, seed, set_pin,
};
#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
pub(crate) use {
    area::{adopt, init_area, seed},
    dlopen::set_pin,
    dtors::run_dtors,
    dtv::{SpareDtv, release_area},
    layout::{Layout, layout},
    switch::run_on,
};
