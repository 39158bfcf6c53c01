//! Fixed-size memory for thread records: huge-page-backed regions, reused
//! through per-OS-thread caches.
//!
//! # Why not `malloc`
//!
//! A program that keeps the handles of the threads it spawns keeps their
//! records: a million handles are a million records alive at once. From
//! `malloc` each came off the top of a growing heap, and every 4 KiB of
//! fresh heap was a page fault on the spawning thread: 2.6–3.6 µs on the
//! 2-core VMs we measure on. A profile of a spawn loop from `main`
//! (`perf record --call-graph dwarf` of `examples/spawn_join 300000
//! main`) put 391 of the spawner's 757 samples in the record's `malloc`:
//! 213 page faults, 61 futex wake-ups of carriers waiting for the heap's
//! lock (they free the queue blocks the spawner allocated), the rest
//! `malloc` itself. Go reuses dead goroutines' descriptors (`gfget`);
//! Weft cannot reuse a record while a handle holds it.
//!
//! Here records come from *regions* of address space mapped for them
//! alone, advised `MADV_HUGEPAGE`: where the kernel backs them with 2 MiB
//! pages, one fault makes room for 10,922 records. The first 2 MiB of the
//! first region keeps 4 KiB pages, so a program with a few threads pays a
//! few KiB, not 2 MiB. Under the system setting `never` every page is a
//! 4 KiB page, as with `malloc`.
//!
//! # Caches
//!
//! A freed record goes to the freeing OS thread's cache, and a new one
//! comes from the allocating thread's cache: a pointer pop or push, no
//! lock, no shared cache line, and the record reused is the one freed last
//! (warm). A cache moves [`BATCH`] records to or from the slab's global
//! list under its lock when it runs out or holds more than twice that. A
//! thread's cache goes back to the global list when the thread exits.
//!
//! Which cache is "the calling thread's" is decided by the record module
//! (`record_ref.rs`): code on a virtual thread uses its carrier's (the
//! carrier writes the pointer into the thread's own thread-local area),
//! so a million virtual threads do not hold a million caches.
//!
//! # What is kept
//!
//! Like Go's goroutine descriptors, freed records are kept for reuse: the
//! memory is not handed back slot by slot. [`Slab::trim`] gives back the
//! memory of every 2 MiB whose slots all lie in the global list (not in a
//! cache, not in use). Each runtime's monitor calls it on its ticks; it
//! does the work only once the global list holds more than
//! `WEFT_RECORD_KEEP` records (default 65,536: 12 MiB) and has doubled
//! since the last trim, so that a steady state is not trimmed again and
//! again.
//!
//! # Limits
//!
//! A `fork` child whose parent had another thread inside the global
//! list's lock at the fork blocks at its first refill (glibc resets its
//! own malloc locks in the child; this lock, like the stack pool's, is
//! not). A runtime's monitor that has gone into its idle sleep does not
//! trim records freed after it until it wakes.

use std::io;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::unpoison::Unpoison;

/// Records a cache takes from, or gives back to, the global list at once.
pub(crate) const BATCH: usize = 32;

/// Address space mapped at a time for records: 64 MiB, about 350,000 of
/// them (address space only: nothing is committed until touched).
const REGION: usize = 64 << 20;

/// The unit of huge pages, and of [`Slab::trim`].
const HUGE: usize = 2 << 20;

/// A slab of `T`s: the global list and the regions they are carved from.
pub(crate) struct Slab<T> {
    global: Mutex<Global>,
    _slots: PhantomData<T>,
}

/// The slab's shared state (addresses as `usize`: plain numbers, which
/// makes the slab `Sync` without a promise of ours).
struct Global {
    /// Freed slots, most recently freed last.
    free: Vec<usize>,
    /// The uncarved rest of the newest region.
    next: usize,
    end: usize,
    /// Every region mapped: its start, and the end of what was carved
    /// from it (for the newest, `next` is).
    regions: Vec<(usize, usize)>,
    /// `free.len()` after the last trim, or its low since: the next trim
    /// runs once the list has doubled from there.
    trimmed_at: usize,
}

/// One OS thread's spare slots (see "Caches").
pub(crate) struct Cache<T> {
    slots: Vec<usize>,
    _slots: PhantomData<T>,
}

impl<T> Slab<T> {
    /// An empty slab: nothing is mapped until the first slot is taken.
    pub(crate) const fn new() -> Slab<T> {
        const { assert!(size_of::<T>() >= size_of::<usize>() && align_of::<T>() <= 64) };
        Slab {
            global: Mutex::new(Global {
                free: Vec::new(),
                next: 0,
                end: 0,
                regions: Vec::new(),
                trimmed_at: 0,
            }),
            _slots: PhantomData,
        }
    }

    /// Up to [`BATCH`] slots (at least one): freed ones first, else newly
    /// carved ones (mapping a region when the last is used up). Aborts, as
    /// `Box::new` does, when the kernel refuses the memory. Takes the
    /// global lock, which may block (or, on a virtual thread with the
    /// `transparent` hooks, park): the caller holds no cache meanwhile.
    pub(crate) fn take_batch(&self) -> Batch {
        let mut out = Batch::default();
        let mut g = self.global.lock().unpoison();
        if !g.free.is_empty() {
            let at = g.free.len().saturating_sub(BATCH);
            for (i, s) in g.free.drain(at..).enumerate() {
                out.slots[i] = s;
                out.len += 1;
            }
            g.trimmed_at = g.trimmed_at.min(g.free.len());
            return out;
        }
        let size = size_of::<T>().next_multiple_of(align_of::<T>());
        if g.end - g.next < BATCH * size {
            match map_region(g.regions.is_empty()) {
                Ok(start) => {
                    let carved = g.next;
                    if let Some(last) = g.regions.last_mut() {
                        last.1 = carved;
                    }
                    g.regions.push((start, start));
                    g.next = start;
                    g.end = start + REGION;
                }
                Err(e) => {
                    eprintln!("weft: cannot map memory for thread records: {e}");
                    std::alloc::handle_alloc_error(std::alloc::Layout::new::<T>())
                }
            }
        }
        // Highest first, so that a cache hands them out in address order.
        for i in 0..BATCH {
            out.slots[i] = g.next + (BATCH - 1 - i) * size;
        }
        out.len = BATCH;
        g.next += BATCH * size;
        out
    }

    /// Takes the slots of `batch` into the global list (as
    /// [`Slab::take_batch`], the lock may block or park).
    ///
    /// # Safety
    /// Every slot in `batch` was taken from this slab, holds no live value,
    /// and is not used again by the caller.
    pub(crate) unsafe fn put_batch(&self, batch: Batch) {
        self.put_back(batch.slots[..batch.len].iter().copied());
    }

    /// Takes `slots` into the global list.
    fn put_back(&self, slots: impl Iterator<Item = usize>) {
        self.global.lock().unpoison().free.extend(slots);
    }

    /// Returns to the kernel the memory of every 2 MiB of the regions
    /// whose slots all lie in the global list, when that list holds more
    /// than `keep` slots and has doubled since the last trim (so that a
    /// steady state does not trim again and again). Returns the bytes
    /// given back.
    ///
    /// The list is taken out whole under the lock and put back after: the
    /// slots in it are the trim's alone meanwhile (a refill that finds the
    /// list empty carves new ones), so no slot can be handed out while its
    /// memory goes, and the lock is held for two moves of a vector, not
    /// for the O(slots) count. A slot taken again later reads zeros from
    /// fresh memory, which its taker overwrites.
    pub(crate) fn trim(&self, keep: usize) -> usize {
        let (listed, regions) = {
            let mut g = self.global.lock().unpoison();
            if g.free.len() <= keep || g.free.len() < 2 * g.trimmed_at {
                return 0;
            }
            g.trimmed_at = g.free.len();
            let mut regions = g.regions.clone();
            if let Some(last) = regions.last_mut() {
                last.1 = g.next;
            }
            (std::mem::take(&mut g.free), regions)
        };
        let size = size_of::<T>().next_multiple_of(align_of::<T>());
        // Listed slots per 2 MiB unit, in one counter per unit of every
        // region (regions sorted by address, found by binary search): no
        // hashing, O(slots × log regions).
        let mut regions = regions;
        regions.sort_unstable();
        const UNITS: usize = REGION / HUGE;
        let mut listed_in = vec![0u32; regions.len() * UNITS];
        for &s in &listed {
            let r = regions.partition_point(|&(start, _)| start <= s) - 1;
            listed_in[r * UNITS + (s - regions[r].0) / HUGE] += 1;
        }
        let mut freed = 0;
        for (i, &n) in listed_in.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let (start, carved) = regions[i / UNITS];
            let lo = start + (i % UNITS) * HUGE;
            let hi = lo + HUGE;
            let n = n as usize;
            // The slots that start in [lo, hi): the first at or above lo,
            // the last possibly reaching into the next unit.
            let first = start + (lo - start).div_ceil(size) * size;
            if first >= hi {
                continue;
            }
            let count = (hi - first).div_ceil(size);
            debug_assert!(n <= count, "a slot listed free twice");
            if first + count * size > carved || n != count {
                continue;
            }
            // From the first page boundary at or above the first slot to
            // `hi`: bytes of listed slots only (a slot of the unit below
            // may reach into [lo, first); the last slot's tail above `hi`
            // is left alone).
            let from = first.next_multiple_of(page_size());
            if from >= hi {
                continue;
            }
            // SAFETY: [from, hi) lies in our mapping and holds only slots
            // of `listed`, which no one else can take now (above): no value
            // lives there, and their addresses are kept outside them.
            // MADV_DONTNEED keeps the range mapped, reading zeros after.
            let r =
                unsafe { libc::madvise(from as *mut libc::c_void, hi - from, libc::MADV_DONTNEED) };
            if r == 0 {
                freed += hi - from;
            }
        }
        self.put_back(listed.into_iter());
        freed
    }
}

/// Slots on their way between a cache and the global list: at most
/// [`BATCH`], on the stack (moving them allocates nothing).
#[derive(Default)]
pub(crate) struct Batch {
    slots: [usize; BATCH],
    len: usize,
}

impl Batch {
    /// One slot.
    pub(crate) fn one<T>(p: NonNull<T>) -> Batch {
        let mut b = Batch::default();
        b.slots[0] = p.as_ptr() as usize;
        b.len = 1;
        b
    }

    /// Takes one slot out (a batch from [`Slab::take_batch`] has one).
    pub(crate) fn pop<T>(&mut self) -> Option<NonNull<T>> {
        self.len = self.len.checked_sub(1)?;
        Some(slot(self.slots[self.len]))
    }
}

/// Neither method blocks, parks or takes a lock: a cache shared by a
/// carrier and the virtual threads it runs is used by one of them at a
/// time only if no one suspends while using it (`record_ref.rs`). Moving
/// slots to and from the global list is the caller's, in [`Batch`]es,
/// with the cache let go.
impl<T> Cache<T> {
    /// An empty cache.
    pub(crate) const fn new() -> Cache<T> {
        Cache {
            slots: Vec::new(),
            _slots: PhantomData,
        }
    }

    /// The slot freed last, if the cache has one.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<NonNull<T>> {
        self.slots.pop().map(slot)
    }

    /// Keeps a freed slot. When the cache then holds more than twice
    /// [`BATCH`], returns the oldest `BATCH` for the global list
    /// ([`Slab::put_batch`]).
    ///
    /// # Safety
    /// `p` was taken from the slab this cache serves, holds no live value,
    /// and is not used again by the caller.
    #[inline]
    pub(crate) unsafe fn push(&mut self, p: NonNull<T>) -> Option<Batch> {
        self.slots.push(p.as_ptr() as usize);
        if self.slots.len() <= 2 * BATCH {
            return None;
        }
        let mut out = Batch::default();
        for (i, s) in self.slots.drain(..BATCH).enumerate() {
            out.slots[i] = s;
        }
        out.len = BATCH;
        Some(out)
    }

    /// Keeps the slots of a batch from [`Slab::take_batch`].
    pub(crate) fn refill(&mut self, batch: Batch) {
        self.slots.extend_from_slice(&batch.slots[..batch.len]);
    }

    /// Empties the cache into `slab`'s global list (its thread is exiting).
    pub(crate) fn flush(&mut self, slab: &Slab<T>) {
        slab.put_back(self.slots.drain(..));
    }

    /// A slot, refilling from `slab` when empty (tests: a thread that
    /// cannot park).
    #[cfg(test)]
    fn take(&mut self, slab: &Slab<T>) -> NonNull<T> {
        if let Some(p) = self.pop() {
            return p;
        }
        let mut b = slab.take_batch();
        let p = b.pop().expect("a batch has a slot");
        self.refill(b);
        p
    }

    /// Keeps a slot, giving a batch back when over (tests, as `take`).
    ///
    /// # Safety
    /// As [`Cache::push`].
    #[cfg(test)]
    unsafe fn give(&mut self, slab: &Slab<T>, p: NonNull<T>) {
        // SAFETY: as the caller promises.
        if let Some(b) = unsafe { self.push(p) } {
            // SAFETY: slots of this slab, freed (the caller's promise).
            unsafe { slab.put_batch(b) };
        }
    }
}

/// The kernel's page size.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096).max(4096)
}

/// A slot's address as a pointer.
fn slot<T>(p: usize) -> NonNull<T> {
    NonNull::new(std::ptr::with_exposed_provenance_mut(p)).expect("slots are never null")
}

/// Maps one region, 2 MiB-aligned, and advises huge pages for all of it
/// but, in the first region, its first 2 MiB.
fn map_region(first: bool) -> io::Result<usize> {
    let len = REGION + HUGE;
    let raw = crate::stack::reserve(len)?;
    let p = raw as *mut libc::c_void;
    let start = raw.next_multiple_of(HUGE);
    // SAFETY: both ranges lie in the mapping just made and hold nothing;
    // what stays mapped is [start, start + REGION).
    unsafe {
        if start > raw {
            libc::munmap(p, start - raw);
        }
        let tail = start + REGION;
        if raw + len > tail {
            libc::munmap(tail as *mut libc::c_void, raw + len - tail);
        }
        let advised = if first { start + HUGE } else { start };
        // Advice only: where the kernel refuses, 4 KiB pages serve.
        libc::madvise(
            advised as *mut libc::c_void,
            start + REGION - advised,
            libc::MADV_HUGEPAGE,
        );
    }
    Ok(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record-sized slot (192 bytes, as a record's).
    type Slot = [u64; 24];

    /// Trimming gives back the memory of whole 2 MiB units whose slots are
    /// all listed free, never a byte of a live slot, and only once the list
    /// is past `keep`; slots taken again afterwards work (zeroed memory).
    #[test]
    fn trim_gives_back_only_units_without_live_slots() {
        static SLAB: Slab<Slot> = Slab::new();
        let mut cache = Cache::new();
        let per_unit = HUGE / size_of::<Slot>();
        let n = 4 * per_unit;
        let slots: Vec<NonNull<Slot>> = (0..n).map(|_| cache.take(&SLAB)).collect();
        for (i, s) in slots.iter().enumerate() {
            // SAFETY: taken above, ours.
            unsafe { s.as_ptr().write([i as u64; 24]) };
        }
        // Keep one slot in the middle alive; free the rest.
        let keep_at = 2 * per_unit + per_unit / 2;
        for (i, s) in slots.iter().enumerate() {
            if i != keep_at {
                // SAFETY: holds no live value (plain data), not used again.
                unsafe { cache.give(&SLAB, *s) };
            }
        }
        cache.flush(&SLAB);
        assert_eq!(SLAB.trim(usize::MAX), 0, "below `keep`: no trim");
        let freed = SLAB.trim(0);
        assert!(
            freed >= HUGE,
            "at least one whole unit given back, got {freed}"
        );
        assert!(
            freed <= n * size_of::<Slot>(),
            "gave back more than was carved: {freed}"
        );
        // SAFETY: still ours and live.
        let live = unsafe { slots[keep_at].as_ptr().read() };
        assert_eq!(live, [keep_at as u64; 24], "a live slot lost its contents");
        assert_eq!(
            SLAB.trim(0),
            0,
            "the list has not doubled since: no second trim"
        );
        // Slots come back (from trimmed memory too) and can be written.
        let again: Vec<NonNull<Slot>> = (0..n - 1).map(|_| cache.take(&SLAB)).collect();
        for s in &again {
            // SAFETY: taken above, ours.
            unsafe { s.as_ptr().write([7; 24]) };
        }
        for s in again {
            // SAFETY: as above.
            unsafe { cache.give(&SLAB, s) };
        }
        // SAFETY: as above.
        unsafe { cache.give(&SLAB, slots[keep_at]) };
        cache.flush(&SLAB);
    }

    /// Trims racing takers and givers never give back a slot in use: three
    /// threads take slots, fill them with a pattern of their own, check it
    /// and give them back (through their caches and the global list),
    /// while a fourth trims with `keep` 0 as often as the list allows. A
    /// trim that zeroed a taken slot breaks a pattern.
    #[test]
    fn trims_racing_takers_never_touch_a_taken_slot() {
        static SLAB: Slab<Slot> = Slab::new();
        const WORKERS: u64 = 2;
        const ROUNDS: u64 = 300;
        const PER_ROUND: usize = 12_000;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let trimmer = {
            let done = done.clone();
            std::thread::spawn(move || {
                let (mut trims, mut bytes) = (0u64, 0usize);
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let b = SLAB.trim(0);
                    trims += u64::from(b > 0);
                    bytes += b;
                    std::thread::yield_now();
                }
                (trims, bytes)
            })
        };
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                std::thread::spawn(move || {
                    let mut cache = Cache::new();
                    for round in 0..ROUNDS {
                        let mark = |i: usize| (w << 48) | (round << 32) | i as u64;
                        let slots: Vec<NonNull<Slot>> =
                            (0..PER_ROUND).map(|_| cache.take(&SLAB)).collect();
                        for (i, s) in slots.iter().enumerate() {
                            // SAFETY: taken above, ours until given back.
                            unsafe { s.as_ptr().write([mark(i); 24]) };
                        }
                        std::thread::yield_now();
                        for (i, s) in slots.iter().enumerate() {
                            // SAFETY: as above.
                            let got = unsafe { s.as_ptr().read() };
                            assert_eq!(got, [mark(i); 24], "a taken slot changed under its owner");
                        }
                        for s in slots {
                            // SAFETY: plain data, not used again.
                            unsafe { cache.give(&SLAB, s) };
                        }
                        cache.flush(&SLAB);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        // How many trims found whole units free depends on the timing; the
        // patterns above are the assertion. (Runs here: most trims give
        // back memory; `cargo test -- --nocapture` prints how much.)
        let (trims, bytes) = trimmer.join().unwrap();
        println!("{trims} trims gave back {} MiB", bytes >> 20);
    }

    /// No cache operation takes the global lock: a virtual thread using its
    /// carrier's cache must not suspend meanwhile, and that lock may park
    /// it (`record_ref.rs`). With the lock held on this thread, another
    /// fills a cache, empties it and pushes past its bound; the channel's
    /// timeout only turns a wait for the lock into a failure, not a hang.
    #[test]
    fn cache_operations_never_take_the_global_lock() {
        static SLAB: Slab<Slot> = Slab::new();
        let batches: Vec<Batch> = (0..3).map(|_| SLAB.take_batch()).collect();
        let guard = SLAB.global.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            let mut cache: Cache<Slot> = Cache::new();
            let mut slots = Vec::new();
            for b in batches {
                cache.refill(b);
                while let Some(p) = cache.pop() {
                    slots.push(p);
                }
            }
            let mut over = Vec::new();
            for p in slots {
                // SAFETY: slots of SLAB, never written.
                if let Some(b) = unsafe { cache.push(p) } {
                    over.push(b);
                }
            }
            tx.send(()).unwrap();
            (cache, over)
        });
        let done = rx.recv_timeout(std::time::Duration::from_secs(60));
        drop(guard);
        let (mut cache, over) = worker.join().unwrap();
        assert!(done.is_ok(), "a cache operation waited for the global lock");
        assert_eq!(over.len(), 1, "3 batches pushed: one over the bound of 2");
        for b in over {
            // SAFETY: as above.
            unsafe { SLAB.put_batch(b) };
        }
        cache.flush(&SLAB);
    }
}
