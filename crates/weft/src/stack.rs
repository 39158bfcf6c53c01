//! Stacks for virtual threads: one reserved arena, guard pages without extra
//! mappings, lazy commit, pooled reuse and trimming.
//!
//! # Why an arena
//!
//! One `mmap` per stack plus an `mprotect`ed guard page costs two kernel
//! mappings per thread, and Linux's default `vm.max_map_count` (65530) then
//! caps a process near 32k threads. Instead we reserve large *chunks* of
//! address space (`MAP_NORESERVE`, nothing committed) and carve fixed-size
//! *slots* out of them. Each slot is `[guard page | stack ...]`, growing down
//! from the slot's top.
//!
//! On Linux ≥ 6.13 the guard page is installed with
//! `madvise(MADV_GUARD_INSTALL)`, which marks page-table entries and does not
//! split the mapping: a million threads live in a few hundred mappings. On
//! older kernels we fall back to `mprotect(PROT_NONE)`, which splits the
//! mapping (two mappings per live slot); when the kernel refuses we return an
//! error that names `vm.max_map_count`.
//!
//! # Lifetime of a slot
//!
//! ```text
//!   carve (new, guard installed once) ──► in use ──► hot pool (memory kept)
//!                                           ▲             │ over bound / grew deep
//!                                           │             ▼
//!                                           └──── cold pool (MADV_DONTNEED'd)
//! ```
//!
//! Guard markers survive `MADV_DONTNEED`, so a slot's guard is installed
//! exactly once in the life of the process.
//!
//! # Slot size: what a parked thread costs
//!
//! A thread parked in `weft::park` has touched one page: the slot's top
//! one, which holds its thread-local area (`tls/`) and, right below the
//! area, the top of its stack. Where the 4,096 bytes go in
//! `parked_memory` (x86_64, glibc 2.36, a Rust program whose modules with
//! thread-locals are the executable and libc): the area's header and
//! alignment 128, glibc's TCB 2,304, the static blocks 416, and the 1,248
//! bytes left are the top of the stack, where the thread's frames and the
//! switch into the carrier fit: a thread that parks deeper holds a second
//! page (8.6 KiB in all), so what every parked thread has on its stack —
//! `park`, `suspend`, the start of its body — is kept small, and the rare
//! paths of `park` (a dump's stack capture, a pinned park) are never
//! inlined into it (in a release build they made its frame 360 bytes and
//! `weft-bench`'s park row 8.58 KiB). Outside the page a parked thread
//! keeps:
//!
//! | what | bytes | why that many |
//! |---|---|---|
//! | the slot's top page | 4,096 | area + stack top; a page is the kernel's unit |
//! | its page-table share | 264 | one 4 KiB page-table page per 2 MiB holding touched pages: 15.5 slots of 132 KiB (the 128 KiB stack and its guard page) |
//! | the record (`VThread` and its two counts) | 192 | 184 + two 32-bit counts, in the record slab (`thread/slab.rs`: no allocator header, no rounding) |
//! | the area's `dtv` | 80 | two header slots and one per module with thread-locals, 16 bytes each; malloc's header |
//! | the `JoinHandle` and the registry's share | ~16 | one pointer each, in the caller's vector and the registry's |
//! | **sum** | **4,648 = 4.54 KiB** | measured 4.55–4.56 KiB (`VmRSS` + `VmPTE` growth; malloc's heap grew 80 B per thread, the `dtv`; two runs, 2026-11-27 13:35 UTC; 4.57 with the record in an `Arc`) |
//!
//! With `WEFT_THREAD_LOCALS=carrier` there is no `dtv`: 4.48 KiB. That is
//! the floor for a stack that never moves: the page, the record, and the
//! page tables a fixed-address stack of this size needs. Below it lie
//! only smaller slots, a `dtv` glibc does not `realloc` (it must be
//! `malloc`ed: glibc grows it in place when a module is loaded) or a
//! record that gives up fields (see `thread/record.rs` for what each one
//! holds; in the slab every 8 bytes count). Smaller slots are a knob:
//! `WEFT_STACK_SIZE=96K` (pools come in two sizes per octave) parks a
//! thread in 4.48–4.49 KiB, 0.20 of it page tables (`parked_memory
//! 1000000`, two runs each, 2026-11-27 18:53 UTC; 4.54–4.55 at the default
//! in the same runs). The default stays 128 KiB: a quarter less stack is
//! not worth 64 bytes a thread. Go's 2.7 KiB is a 2 KiB
//! stack that grows by copying; Java's 0.8 KiB is frames copied to the
//! heap: both need a compiler that knows every pointer into the stack.
//!
//! What the slot size changes is the *page tables*: the kernel spends one
//! 4 KiB page-table page per 2 MiB of address space that has a touched page
//! (and the guard marker counts as touched), so a slot of S bytes costs
//! about `4 KiB × S / 2 MiB` of page tables per live thread, and every new
//! page-table page is zeroed when the slot is first used. Measured with
//! `cargo run --release -p weft --example parked_memory -- 1000000`
//! (`VmRSS` and `VmPTE` growth per parked thread, `WEFT_STACK_SIZE` set
//! per row; 2 cores; the first four rows 2026-11-23 before thread-local
//! areas, the last two 2026-11-27 05:42 UTC with them, two runs each, load
//! 0.2–0.9, before the record's last 16 bytes went: the default row is
//! 4.57 KiB since, 07:41 UTC; time includes a 200 ms settle):
//!
//! | slot (`WEFT_STACK_SIZE`) | RSS | page tables | sum | spawn + park 1M |
//! |---|---|---|---|---|
//! | 1 MiB | 4.46 KiB | 2.01 KiB | 6.47 KiB | 5.1–7.0 s |
//! | 512 KiB | 4.46 KiB | 1.01 KiB | 5.47 KiB | 3.2 s |
//! | 256 KiB | 4.46 KiB | 0.51 KiB | 4.96 KiB | 2.8–3.1 s |
//! | 128 KiB | 4.46 KiB | 0.26 KiB | 4.72 KiB | 2.9–3.1 s |
//! | 256 KiB, areas | 4.33 KiB | 0.51 KiB | 4.84 KiB | 3.3–3.4 s |
//! | **128 KiB, areas (default)** | 4.33 KiB | 0.26 KiB | **4.59 KiB** | 2.9–3.3 s |
//!
//! A profile of the 1 MiB row (`perf record -g`) spends 56 % of the time in
//! the kernel's `clear_page`: 32 % zeroing first-touched stack pages, 24 %
//! zeroing page-table pages allocated by the guard install. At 128 KiB
//! the spawn-and-park phase of a million threads is 80 % kernel: 59 %
//! page faults (a first touch costs 2.6–3.6 µs on this VM, of which the
//! zeroing is a fifth), 17 % installing guards, 20 % Weft and libc. A
//! batch of `MADV_POPULATE_WRITE` through `process_madvise` instead of the
//! faults saved nothing measurable (a C program, 100k pages, alternating).
//! 128 KiB is musl's default for its threads: room for ordinary recursion
//! (the HTTP, PostgreSQL and TLS suites run on it), with an exact overflow
//! report naming `WEFT_STACK_SIZE` and `Builder::stack_size` for the rest
//! (std's own threads default to 2 MiB, Java's to 1 MiB).
//!
//! # Promises
//!
//! A thread with the default stack takes its slot when it first runs, not
//! when it is spawned (see `thread::CoroSlot` for why). So that running out
//! of address space is still an error of `spawn`, spawning *promises* a
//! slot: [`StackPool::promise`] makes sure the pool could hand out one more
//! slot than it has promised — free slots plus the uncarved rest of the
//! chunks it has mapped — mapping another chunk ahead of need when not, and
//! failing there when the kernel refuses. The check is a counter decrement
//! on the fast path (`headroom`), recomputed under the lock once it runs
//! out. Slots sitting in carrier caches are not counted, so the estimate
//! errs towards mapping a chunk early (address space only, nothing
//! committed).
//!
//! The fast path is one read-modify-write on a cache line of its own that
//! only spawners write: a spawner that promises slot after slot keeps the
//! line in its cache. Nothing on that line counts the promises kept
//! (carriers write their count, `fulfilled`, on another line): the recount
//! works out how many were made from how much headroom it granted and how
//! much is left. It takes what is left with a swap to zero, so a promise
//! either came before the swap (it succeeded, and is counted) or after it
//! (it found zero and waits for the recount under the lock); and every kept
//! promise the recount sees was made before, so `promised - fulfilled`
//! never counts a kept promise that was not made.

use crate::unpoison::Unpoison;
use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use corosensei::stack::{Stack as CoroStack, StackPointer};
use crossbeam_utils::CachePadded;

/// `MADV_GUARD_INSTALL` (Linux 6.13+); not yet in every libc release.
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Address space reserved per chunk mapping: 1 GiB, about 8,000 default
/// (128 KiB) stacks; a million threads need ~125 mappings, far below 65530.
/// Chunks are sized in bytes, not slots: a pool of 1 GiB stacks reserves
/// one slot per chunk, not a thousand (a terabyte).
const CHUNK_BYTES: usize = 1 << 30;

/// Stacks kept committed ("hot") per pool before extra ones are trimmed.
const HOT_POOL_BOUND: usize = 1024;

/// How long the hot pool may stay above its bound before it is trimmed.
pub(crate) const SCAVENGE_DELAY: Duration = Duration::from_secs(1);

/// A stack that went deeper than this below its top is trimmed on release,
/// so one deep recursion does not keep megabytes resident in the pool.
pub(crate) const TRIM_DEPTH: usize = 64 * 1024;

pub(crate) fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let p = PAGE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if p > 0 { p as usize } else { 4096 };
    PAGE.store(p, Ordering::Relaxed);
    p
}

/// One stack pool per distinct stack size, shared by all runtimes, living
/// for the whole process (slots are never unmapped).
static POOLS: Mutex<Vec<&'static StackPool>> = Mutex::new(Vec::new());

/// Stacks in use across every pool.
pub(crate) fn live_stacks() -> usize {
    POOLS.lock().unpoison().iter().map(|p| p.live()).sum()
}

/// The size of the pool that serves a request for `stack_size` bytes:
/// the next size of the form 2^k or 1.5 × 2^k (16, 24, 32, 48, 64, 96,
/// 128 KiB, …), at least 16 KiB. Two sizes per octave keep the pools few
/// — at most 33 (16 KiB to 1 GiB) can ever exist, however many distinct
/// sizes are asked for — and never give a thread more than half as much
/// again as it asked for, rounded to whole pages (a power of two gave up
/// to twice): a program that lowers `WEFT_STACK_SIZE` to 96 KiB to save
/// page tables gets 96 KiB, not 128.
pub(crate) fn pool_stack_size(stack_size: usize) -> usize {
    let page = crate::stack::page_size();
    let want = stack_size.max(16 * 1024);
    let pow = want.next_power_of_two();
    let size = if want <= pow / 4 * 3 {
        pow / 4 * 3
    } else {
        pow
    };
    size.div_ceil(page) * page
}

/// The pool for stacks of at least `stack_size` bytes
/// ([`pool_stack_size`]).
pub(crate) fn pool_for(stack_size: usize) -> &'static StackPool {
    let rounded = pool_stack_size(stack_size);
    let mut pools = POOLS.lock().unpoison();
    if let Some(p) = pools.iter().find(|p| p.stack_size() == rounded) {
        return p;
    }
    let p: &'static StackPool = Box::leak(Box::new(StackPool::new(rounded)));
    pools.push(p);
    p
}

/// Whether `MADV_GUARD_INSTALL` works here; decided on first use.
static GUARD_MADVISE_BROKEN: AtomicBool = AtomicBool::new(false);

/// A pool of stacks of one size. Cheap to share; internally locked only on
/// the slow paths (carving a new slot, pool overflow).
pub(crate) struct StackPool {
    /// Usable bytes per stack (excludes the guard page).
    stack_size: usize,
    /// Guard + stack.
    slot_size: usize,
    /// Slots per chunk mapping (`CHUNK_BYTES / slot_size`, at least one).
    slots_per_chunk: usize,
    /// Bytes kept at the top of a slot for a thread-local area by the
    /// stacks that keep them ([`Stack::reserve_top`]): 0 until the first
    /// does, then the same for all (the process's area layout).
    top_reserve: AtomicUsize,
    inner: Mutex<PoolInner>,
    /// Live slots handed out and not returned (for metrics and dumps).
    /// Written by carriers as they take and return slots.
    live: AtomicUsize,
    /// Promised slots taken (or never to be): written by carriers, beside
    /// `live` (see "Promises").
    fulfilled: AtomicUsize,
    /// Promises that may be made without taking the lock (see "Promises"),
    /// alone on its cache line: spawners write it, carriers never do.
    headroom: CachePadded<AtomicUsize>,
}

struct PoolInner {
    /// Committed stacks ready for reuse (memory still resident).
    hot: Vec<usize>,
    /// Trimmed stacks ready for reuse (no resident memory).
    cold: Vec<usize>,
    /// Bump allocator into the newest chunk: next slot base, end.
    next: usize,
    end: usize,
    /// Slots below this address in the newest chunk have their guards.
    guarded: usize,
    /// When `hot` first went over its bound (None: it is within it).
    over_since: Option<Instant>,
    /// Chunks mapped ahead of need by `promise`, not yet carved from.
    spare_chunks: Vec<usize>,
    /// Promises made up to the last recount (see "Promises").
    promised: usize,
    /// The headroom that recount granted.
    granted: usize,
}

/// Promises granted per recount under the lock (at least).
const PROMISE_BATCH: usize = 256;

impl StackPool {
    pub(crate) fn new(stack_size: usize) -> StackPool {
        let page = page_size();
        let stack_size = stack_size.max(16 * 1024).div_ceil(page) * page;
        let slot_size = stack_size + page;
        StackPool {
            stack_size,
            slot_size,
            slots_per_chunk: (CHUNK_BYTES / slot_size).max(1),
            top_reserve: AtomicUsize::new(0),
            inner: Mutex::new(PoolInner {
                hot: Vec::new(),
                cold: Vec::new(),
                next: 0,
                end: 0,
                guarded: 0,
                over_since: None,
                spare_chunks: Vec::new(),
                promised: 0,
                granted: 0,
            }),
            live: AtomicUsize::new(0),
            fulfilled: AtomicUsize::new(0),
            headroom: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// Usable size of each stack in this pool.
    pub(crate) fn stack_size(&self) -> usize {
        self.stack_size
    }

    /// Number of stacks currently handed out.
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Promises a slot to a thread that will take it when it first runs
    /// (see "Promises"); fails when no address space can be had for it.
    pub(crate) fn promise(&self) -> io::Result<()> {
        if self
            .headroom
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| h.checked_sub(1))
            .is_ok()
        {
            return Ok(());
        }
        let mut inner = self.inner.lock().unpoison();
        // Recount (see "Promises"): what is left of the last grant was not
        // promised; taking it leaves zero, which no promise goes below.
        let left = self.headroom.swap(0, Ordering::Relaxed);
        inner.promised += inner.granted - left + 1; // + 1: this promise
        inner.granted = 0;
        // Relaxed: a stale count only overstates what is outstanding, and
        // so maps a chunk early.
        let outstanding = inner
            .promised
            .saturating_sub(self.fulfilled.load(Ordering::Relaxed));
        let want = outstanding + PROMISE_BATCH;
        let mut supply = self.supply(&inner);
        while supply < want {
            match self.map_chunk() {
                Ok(c) => {
                    inner.spare_chunks.push(c);
                    supply += self.slots_per_chunk;
                }
                // Enough for this promise, if not for the batch: go on.
                Err(_) if supply >= outstanding => break,
                Err(e) => {
                    inner.promised -= 1;
                    return Err(e);
                }
            }
        }
        inner.granted = supply - outstanding;
        self.headroom.store(inner.granted, Ordering::Relaxed);
        Ok(())
    }

    /// Slots the pool could hand out without mapping more: free ones, the
    /// uncarved rest of the newest chunk and the chunks mapped ahead.
    fn supply(&self, inner: &PoolInner) -> usize {
        inner.hot.len()
            + inner.cold.len()
            + (inner.end - inner.next) / self.slot_size
            + inner.spare_chunks.len() * self.slots_per_chunk
    }

    /// A promised slot was taken (or will never be).
    pub(crate) fn fulfil(&self) {
        self.fulfilled.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes a stack: hot pool first, then cold, then a freshly carved slot.
    pub(crate) fn alloc(&'static self) -> io::Result<Stack> {
        let slot = {
            let mut inner = self.inner.lock().unpoison();
            if let Some(s) = inner.hot.pop() {
                s
            } else if let Some(s) = inner.cold.pop() {
                s
            } else {
                self.carve(&mut inner)?
            }
        };
        self.live.fetch_add(1, Ordering::Relaxed);
        Ok(Stack {
            top: slot + self.slot_size,
            pool: self,
        })
    }

    /// Returns several stacks at once into `out` (used by carrier-local
    /// caches to amortise the pool lock).
    pub(crate) fn alloc_batch(&'static self, out: &mut Vec<usize>, n: usize) -> io::Result<()> {
        let mut inner = self.inner.lock().unpoison();
        while out.len() < n {
            let s = if let Some(s) = inner.hot.pop() {
                s
            } else if let Some(s) = inner.cold.pop() {
                s
            } else {
                match self.carve(&mut inner) {
                    Ok(s) => s,
                    Err(e) if out.is_empty() => return Err(e),
                    Err(_) => break,
                }
            };
            out.push(s);
        }
        Ok(())
    }

    /// Wraps a slot previously obtained from `alloc_batch`.
    pub(crate) fn adopt(&'static self, slot: usize) -> Stack {
        self.live.fetch_add(1, Ordering::Relaxed);
        Stack {
            top: slot + self.slot_size,
            pool: self,
        }
    }

    /// Puts back slots from a carrier-local cache.
    pub(crate) fn release_batch(&self, slots: &mut Vec<usize>) {
        let mut inner = self.inner.lock().unpoison();
        for s in slots.drain(..) {
            self.put_locked(&mut inner, s, false);
        }
    }

    fn put_locked(&self, inner: &mut PoolInner, slot: usize, deep: bool) {
        if deep {
            self.trim_run(slot, 1);
            inner.cold.push(slot);
            return;
        }
        inner.hot.push(slot);
        if inner.hot.len() > HOT_POOL_BOUND && inner.over_since.is_none() {
            inner.over_since = Some(Instant::now());
        }
    }

    /// Trims the hot pool down to its bound once it has stayed above it for
    /// [`SCAVENGE_DELAY`] (like Go's background scavenger: a burst of
    /// threads followed by another burst reuses committed stacks; a burst
    /// followed by quiet gives the memory back). Called by idle carriers.
    /// Returns when to call again, if the pool is over its bound.
    pub(crate) fn scavenge(&self, now: Instant) -> Option<Instant> {
        let mut inner = self.inner.lock().unpoison();
        let since = inner.over_since?;
        if inner.hot.len() <= HOT_POOL_BOUND {
            inner.over_since = None;
            return None;
        }
        let due = since + SCAVENGE_DELAY;
        if now < due {
            return Some(due);
        }
        self.trim_excess(&mut inner);
        inner.over_since = None;
        None
    }

    /// Moves all but `HOT_POOL_BOUND` hot slots to the cold pool, trimming
    /// them in runs of adjacent slots: one `madvise` (and one TLB shootdown)
    /// per run instead of per slot. Guard markers survive `MADV_DONTNEED`.
    fn trim_excess(&self, inner: &mut PoolInner) {
        let keep = HOT_POOL_BOUND;
        let mut excess: Vec<usize> = inner.hot.drain(..inner.hot.len() - keep).collect();
        excess.sort_unstable();
        let mut i = 0;
        while i < excess.len() {
            let mut j = i + 1;
            while j < excess.len() && excess[j] == excess[j - 1] + self.slot_size {
                j += 1;
            }
            self.trim_run(excess[i], j - i);
            i = j;
        }
        inner.cold.extend(excess);
    }

    /// Releases the committed memory of `n` adjacent slots starting at
    /// `slot`; the address space stays reserved and the guards stay.
    fn trim_run(&self, slot: usize, n: usize) {
        let page = page_size();
        // SAFETY: the range covers whole slots of a private anonymous mapping
        // we own, none of which is in a live Stack (nobody runs on them).
        unsafe {
            libc::madvise(
                (slot + page) as *mut libc::c_void,
                self.slot_size * n - page,
                libc::MADV_DONTNEED,
            );
        }
    }

    fn carve(&self, inner: &mut PoolInner) -> io::Result<usize> {
        if inner.next == inner.end {
            let p = match inner.spare_chunks.pop() {
                Some(p) => p,
                None => self.map_chunk()?,
            };
            inner.next = p;
            inner.end = p + self.slot_size * self.slots_per_chunk;
            inner.guarded = p;
        }
        let slot = inner.next;
        if slot >= inner.guarded {
            // Guard the next batch of slots with one syscall when the kernel
            // allows it (process_madvise on ourselves, Linux >= 6.13).
            let n = GUARD_BATCH.min((inner.end - slot) / self.slot_size);
            if n > 1 && install_guards_batch(slot, self.slot_size, n) {
                inner.guarded = slot + n * self.slot_size;
            } else {
                install_guard(slot)?;
                inner.guarded = slot + self.slot_size;
            }
        }
        inner.next += self.slot_size;
        Ok(slot)
    }

    /// Reserves a new chunk of address space (nothing committed).
    fn map_chunk(&self) -> io::Result<usize> {
        let len = self.slot_size * self.slots_per_chunk;
        let p = reserve(len).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "weft: cannot reserve {} MiB of address space for virtual-thread stacks: {e} \
                     (check `ulimit -v` and vm.overcommit_memory; or lower the stack size with \
                     WEFT_STACK_SIZE / Builder::stack_size)",
                    len >> 20
                ),
            )
        })?;
        register_chunk(p, len, self.stack_size);
        Ok(p)
    }
}

/// Reserves `len` bytes of address space, readable and writable, private
/// and anonymous, committed page by page as touched (`MAP_NORESERVE`):
/// the stack pool's chunks and the record slab's regions
/// (`thread/slab.rs`). Returns its address.
pub(crate) fn reserve(len: usize) -> io::Result<usize> {
    // SAFETY: a fresh anonymous private mapping; no existing memory is
    // affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as usize)
}

/// Slots whose guards are installed per `process_madvise` call.
const GUARD_BATCH: usize = 64;

/// A pidfd for this process, or -1 if the kernel has none.
fn self_pidfd() -> i32 {
    static FD: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *FD.get_or_init(|| {
        // SAFETY: plain syscall creating a new descriptor for ourselves.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
        if fd < 0 { -1 } else { fd as i32 }
    })
}

static BATCH_BROKEN: AtomicBool = AtomicBool::new(false);

/// Installs guard pages at the bottom of `n` consecutive slots with one
/// `process_madvise`. False (nothing guaranteed done) if unsupported; the
/// caller then guards slot by slot.
fn install_guards_batch(first: usize, slot_size: usize, n: usize) -> bool {
    if BATCH_BROKEN.load(Ordering::Relaxed) || GUARD_MADVISE_BROKEN.load(Ordering::Relaxed) {
        return false;
    }
    let pidfd = self_pidfd();
    if pidfd < 0 {
        BATCH_BROKEN.store(true, Ordering::Relaxed);
        return false;
    }
    let page = page_size();
    let iov: Vec<libc::iovec> = (0..n)
        .map(|i| libc::iovec {
            iov_base: (first + i * slot_size) as *mut libc::c_void,
            iov_len: page,
        })
        .collect();
    // SAFETY: the iovecs name page-aligned pages of our own private
    // anonymous mapping that no Stack uses yet.
    let r = unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            pidfd,
            iov.as_ptr(),
            iov.len(),
            MADV_GUARD_INSTALL,
            0,
        )
    };
    if r == (n * page) as libc::c_long {
        return true;
    }
    // Unsupported advice or partial work: guard the rest one by one (a
    // repeated install on an already-guarded page is harmless).
    BATCH_BROKEN.store(true, Ordering::Relaxed);
    false
}

/// Installs the guard page at the bottom of a slot.
fn install_guard(slot: usize) -> io::Result<()> {
    let page = page_size();
    if !GUARD_MADVISE_BROKEN.load(Ordering::Relaxed) {
        // SAFETY: `slot` is page-aligned and inside our private anonymous
        // mapping; the page holds no data anyone can observe.
        let r = unsafe { libc::madvise(slot as *mut libc::c_void, page, MADV_GUARD_INSTALL) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(e);
        }
        // Kernel older than 6.13: fall back to mprotect from now on.
        GUARD_MADVISE_BROKEN.store(true, Ordering::Relaxed);
    }
    // SAFETY: as above; PROT_NONE on one page of our own mapping.
    let r = unsafe { libc::mprotect(slot as *mut libc::c_void, page, libc::PROT_NONE) };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENOMEM) {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            "weft: the kernel refused another memory mapping for a stack guard page \
             (vm.max_map_count reached; this kernel lacks MADV_GUARD_INSTALL, so every \
             virtual thread costs two mappings). Raise vm.max_map_count or use Linux >= 6.13",
        ));
    }
    Err(e)
}

/// Whether guard pages are installed without extra mappings on this kernel.
pub fn guard_pages_in_place() -> bool {
    !GUARD_MADVISE_BROKEN.load(Ordering::Relaxed)
}

/// The least stack a thread keeps below its thread-local area: a slot
/// that would keep less is exchanged for a larger one ([`with_room_for`]).
pub(crate) const MIN_STACK_LEFT: usize = 16 * 1024;

/// `stack` exchanged for a slot with room for a thread-local area of
/// `area` bytes at its top and the whole of `stack`'s size below it: a
/// slot of the pool for `stack_size + area` (its size rounded up as every
/// pool's, [`pool_stack_size`]). For a process whose static TLS does not
/// fit the top of its threads' stacks (a large `thread_local!`): the area
/// takes that much more of every slot, each thread keeps the stack it
/// asked for, and these slots are pooled as any others (not in the
/// carriers' caches: a pool lock per start and per end).
pub(crate) fn with_room_for(stack: Stack, area: usize) -> io::Result<Stack> {
    let mut bigger = room_pool(stack.pool, area).alloc()?;
    drop(stack);
    if !bigger.reserve_top(area) {
        return Err(io::Error::other(format!(
            "weft: no room for a thread-local area of {area} bytes in a stack of {} bytes",
            bigger.pool.stack_size
        )));
    }
    Ok(bigger)
}

/// The pool [`with_room_for`] takes a slot from in place of one of `pool`.
pub(crate) fn room_pool(pool: &StackPool, area: usize) -> &'static StackPool {
    pool_for(pool.stack_size.max(MIN_STACK_LEFT) + area)
}

/// Whether a stack of `pool` keeps a thread-local area of `area` bytes at
/// its top (else [`with_room_for`] exchanges it).
pub(crate) fn has_room_for(pool: &StackPool, area: usize) -> bool {
    pool.stack_size >= area + MIN_STACK_LEFT
}

/// A stack slot in use by one coroutine.
///
/// Two words, as every started thread's record holds one (inside its
/// coroutine): the stack's base — the slot's top, or below it when the top
/// of the slot is kept out of the stack for a thread-local area — and the
/// pool. The base is read on every resume, so it is stored as it is read;
/// its low bit (free: the base is 16-byte aligned) says whether a reserve
/// was kept, and how many bytes such a reserve keeps is the pool's
/// ([`StackPool::top_reserve`]: every area of a process has one layout).
pub(crate) struct Stack {
    top: usize,
    pool: &'static StackPool,
}

/// [`Stack::top`]'s low bit: the pool's `top_reserve` bytes at the top of
/// the slot are not the stack's.
const RESERVED: usize = 1;

impl Stack {
    /// The stack's base: one past its highest usable byte.
    fn stack_base(&self) -> usize {
        self.top & !RESERVED
    }

    /// One past the highest byte of the slot (the slot's top).
    pub(crate) fn base_addr(&self) -> usize {
        if self.top & RESERVED != 0 {
            self.stack_base() + self.pool.top_reserve.load(Ordering::Relaxed)
        } else {
            self.top
        }
    }

    /// The slot's lowest address (its guard page).
    fn slot_addr(&self) -> usize {
        self.base_addr() - self.pool.slot_size
    }

    /// Address of the lowest usable byte (just above the guard page).
    pub(crate) fn limit_addr(&self) -> usize {
        self.slot_addr() + page_size()
    }

    /// Keeps the top `bytes` of the slot out of the stack (for the
    /// thread's thread-local area); false, and nothing kept, when the stack
    /// would be left with less than [`MIN_STACK_LEFT`], or when the pool
    /// already keeps another size at the top of its stacks (never: a
    /// process has one area layout).
    pub(crate) fn reserve_top(&mut self, bytes: usize) -> bool {
        // The stack's top must stay 16-byte aligned (the SysV ABI).
        debug_assert_eq!(bytes % 16, 0);
        debug_assert_eq!(self.top & RESERVED, 0, "one reserve per stack");
        if self.base_addr() - self.limit_addr() < bytes + MIN_STACK_LEFT {
            return false;
        }
        // A load first: the pool's line is shared by every carrier, and
        // only the first reserve of the process needs to write it.
        let kept = &self.pool.top_reserve;
        let k = match kept.load(Ordering::Relaxed) {
            0 => kept
                .compare_exchange(0, bytes, Ordering::Relaxed, Ordering::Relaxed)
                .unwrap_or_else(|k| k),
            k => k,
        };
        if k != 0 && k != bytes {
            return false;
        }
        self.top = (self.top - bytes) | RESERVED;
        true
    }

    /// The pool this stack came from.
    pub(crate) fn pool(&self) -> &'static StackPool {
        self.pool
    }

    /// Unwraps the raw slot (for a carrier-local cache of the same pool).
    pub(crate) fn into_slot(self) -> usize {
        let s = self.slot_addr();
        self.pool.live.fetch_sub(1, Ordering::Relaxed);
        std::mem::forget(self);
        s
    }

    /// Gives the slot back to its pool; `deep` trims it first.
    pub(crate) fn release(self, deep: bool) {
        let pool = self.pool;
        let s = self.into_slot();
        let mut inner = pool.inner.lock().unpoison();
        pool.put_locked(&mut inner, s, deep);
    }

    /// Trims the slot in place (used before putting a deep stack in a cache).
    pub(crate) fn trim(&self) {
        self.pool.trim_run(self.slot_addr(), 1);
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let pool = self.pool;
        pool.live.fetch_sub(1, Ordering::Relaxed);
        let mut inner = pool.inner.lock().unpoison();
        pool.put_locked(&mut inner, self.slot_addr(), false);
    }
}

// SAFETY: base/limit describe memory that stays mapped and exclusively owned
// by this Stack for its whole life (slots are never unmapped, and a slot is in
// at most one Stack at a time).
unsafe impl CoroStack for Stack {
    fn base(&self) -> StackPointer {
        StackPointer::new(self.stack_base()).expect("non-null stack base")
    }
    fn limit(&self) -> StackPointer {
        StackPointer::new(self.limit_addr()).expect("non-null stack limit")
    }
}

// ---------------------------------------------------------------------------
// Chunk registry, read by the SIGSEGV handler to recognise a guard-page hit.
// Append-only, lock-free for readers (a signal handler may not take locks).

const MAX_CHUNKS: usize = 1 << 16;

struct ChunkTable {
    len: AtomicUsize,
    starts: [AtomicUsize; MAX_CHUNKS],
    lens: [AtomicUsize; MAX_CHUNKS],
    stack_sizes: [AtomicUsize; MAX_CHUNKS],
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicUsize = AtomicUsize::new(0);
static CHUNKS: ChunkTable = ChunkTable {
    len: AtomicUsize::new(0),
    starts: [ZERO; MAX_CHUNKS],
    lens: [ZERO; MAX_CHUNKS],
    stack_sizes: [ZERO; MAX_CHUNKS],
};
static CHUNK_LOCK: Mutex<()> = Mutex::new(());

fn register_chunk(start: usize, len: usize, stack_size: usize) {
    let _g = CHUNK_LOCK.lock().unpoison();
    let i = CHUNKS.len.load(Ordering::Relaxed);
    if i >= MAX_CHUNKS {
        return; // overflow is then reported as a plain SIGSEGV
    }
    CHUNKS.starts[i].store(start, Ordering::Relaxed);
    CHUNKS.lens[i].store(len, Ordering::Relaxed);
    CHUNKS.stack_sizes[i].store(stack_size, Ordering::Relaxed);
    CHUNKS.len.store(i + 1, Ordering::Release);
}

/// If `addr` lies in the guard page of some stack slot, returns that stack's
/// usable size. Async-signal-safe: only atomic loads.
pub(crate) fn guard_hit(addr: usize) -> Option<usize> {
    let page = page_size();
    let n = CHUNKS.len.load(Ordering::Acquire);
    for i in 0..n {
        let start = CHUNKS.starts[i].load(Ordering::Relaxed);
        let len = CHUNKS.lens[i].load(Ordering::Relaxed);
        if addr >= start && addr < start + len {
            let ss = CHUNKS.stack_sizes[i].load(Ordering::Relaxed);
            let off = (addr - start) % (ss + page);
            return (off < page).then_some(ss);
        }
    }
    None
}

// ---------------------------------------------------------------------------
// The carrier's alternate signal stack (for the overflow handler, `overflow.rs`).

/// Gives the calling carrier an alternate signal stack if it has none, so
/// the handler can run when the faulting stack is exhausted.
pub(crate) fn ensure_altstack() {
    // SAFETY: querying and setting the alternate stack of this thread; the
    // new stack is leaked on purpose (carriers live as long as the runtime,
    // and a signal may arrive at any moment of their life).
    unsafe {
        let mut cur: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut cur) != 0 {
            return;
        }
        if cur.ss_flags & libc::SS_DISABLE == 0 && !cur.ss_sp.is_null() {
            return;
        }
        let size = (libc::SIGSTKSZ).max(64 * 1024);
        let mem = libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if mem == libc::MAP_FAILED {
            return;
        }
        let st = libc::stack_t {
            ss_sp: mem,
            ss_flags: 0,
            ss_size: size,
        };
        libc::sigaltstack(&st, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pool sizes per octave, never less than asked, never more than
    /// half as much again; whole pages.
    #[test]
    fn stack_sizes_round_up_to_half_octaves() {
        const K: usize = 1024;
        // The table is for 4 KiB pages; larger pages round further up.
        let table = if crate::stack::page_size() == 4096 {
            &[
                (1, 16 * K),
                (16 * K, 16 * K),
                (16 * K + 1, 24 * K),
                (24 * K, 24 * K),
                (96 * K, 96 * K),
                (96 * K + 1, 128 * K),
                (100 * K, 128 * K),
                (128 * K, 128 * K),
                (129 * K, 192 * K),
                (768 << 20, 768 << 20),
                (1 << 30, 1 << 30),
            ][..]
        } else {
            &[]
        };
        for &(asked, got) in table {
            assert_eq!(pool_stack_size(asked), got, "asked {asked}");
        }
        let page = crate::stack::page_size();
        for asked in (16 * K..(4 << 20)).step_by(4093) {
            let got = pool_stack_size(asked);
            assert!(got >= asked, "{asked} -> {got}");
            assert!(
                got <= (asked * 3 / 2 + 1).div_ceil(page) * page,
                "{asked} -> {got}"
            );
            assert_eq!(got % page, 0);
        }
    }

    /// Every promise is covered: after promises from several threads at
    /// once, some of them kept, the slots the pool has mapped cover every
    /// promise not yet kept plus the headroom it still grants without a
    /// recount. A recount that lost a promise made beside it would grant
    /// headroom no slot backs.
    #[test]
    fn every_promise_is_covered_by_mapped_slots() {
        // 16 MiB stacks: 63 slots per chunk, so promises map chunks and
        // recount several times.
        let pool: &'static StackPool = Box::leak(Box::new(StackPool::new(16 << 20)));
        let (threads, per): (usize, usize) = (4, 600);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for i in 0..per {
                        pool.promise().unwrap();
                        if i % 3 == 0 {
                            pool.fulfil();
                        }
                    }
                });
            }
        });
        let inner = pool.inner.lock().unwrap();
        let supply = pool.supply(&inner);
        let outstanding = threads * per - threads * per.div_ceil(3);
        let headroom = pool.headroom.load(Ordering::Relaxed);
        assert!(
            supply >= outstanding + headroom,
            "{supply} slots for {outstanding} promises and {headroom} headroom"
        );
        // Promises counted by the recounts, plus those made since the last.
        assert_eq!(inner.promised + inner.granted - headroom, threads * per);
    }

    /// The top reserve lives in the slot's low bit and its size in the
    /// pool: the stack's top moves down by exactly the reserve, and the
    /// slot goes back to the pool page-aligned, bit cleared (a set bit
    /// there would misplace every later stack of that slot).
    #[test]
    fn a_reserved_top_moves_the_base_and_nothing_else() {
        let pool: &'static StackPool = Box::leak(Box::new(StackPool::new(64 * 1024)));
        let page = page_size();
        let mut s = pool.alloc().unwrap();
        let (slot, base, limit) = (s.slot_addr(), s.base_addr(), s.limit_addr());
        assert_eq!(slot % page, 0);
        assert_eq!(s.base().get(), base, "no reserve yet");
        assert!(s.reserve_top(2_880));
        assert_eq!(s.base().get(), base - 2_880);
        assert_eq!((s.base_addr(), s.limit_addr()), (base, limit));
        assert_eq!(s.limit().get(), limit);
        // The pool keeps one size: another is refused, the same is not.
        let mut t = pool.alloc().unwrap();
        assert!(!t.reserve_top(4_096));
        assert_eq!(
            t.base().get(),
            t.base_addr(),
            "a refused reserve keeps nothing"
        );
        assert!(t.reserve_top(2_880));
        assert_eq!(s.into_slot(), slot);
        let t_slot = t.slot_addr();
        drop(t);
        // Both slots came back clean: the next two stacks are whole again.
        let again = [pool.alloc().unwrap(), pool.alloc().unwrap()];
        for a in &again {
            assert_eq!(a.slot_addr() % page, 0);
            assert_eq!(a.base().get(), a.base_addr());
        }
        assert!(again.iter().any(|a| a.slot_addr() == t_slot));
    }

    /// A stack that would keep less than [`MIN_STACK_LEFT`] below its
    /// reserve runs without one.
    #[test]
    fn a_small_stack_keeps_no_reserve() {
        let pool: &'static StackPool = Box::leak(Box::new(StackPool::new(16 * 1024)));
        let mut s = pool.alloc().unwrap();
        assert!(!s.reserve_top(2_880));
        assert_eq!(s.base().get(), s.base_addr());
    }
}
