//! [`RecordArc`] and [`RecordWeak`]: the shared ownership of a thread
//! record, as `Arc<VThread>` and `Weak<VThread>` would give it, over
//! memory from the record slab (`slab.rs`) instead of `malloc`.
//!
//! The counts and their orderings are `Arc`'s (`crate::refcount`, model
//! checked in `tests/loom_refcount.rs`), in 32 bits each: a record is its
//! counts and the `VThread`, 192 bytes with no allocator header, where an
//! `Arc` took a 208-byte `malloc` chunk.
//!
//! # Which cache
//!
//! New records come from, and freed ones go to, the calling OS thread's
//! slab cache, found through one thread-local pointer, [`CACHE`]:
//! - on an OS thread (a carrier's own code, `main`, a `std` thread) it
//!   points at that thread's [`OWN`] cache, made at first use and given
//!   back to the global list when the thread exits (its destructor then
//!   sets the pointer to [`GONE`], and later calls there go to the global
//!   list under its lock);
//! - on a virtual thread with its own thread-local area it is the carrier's
//!   pointer, written into the area by the carrier before the thread first
//!   runs there ([`seed_cache`]). The thread runs on that carrier's OS
//!   thread, and the cache still has one user at a time: a virtual thread
//!   and its carrier never run at once, and nobody holds the cache while
//!   it could suspend. A cache operation is a push or a pop; the global
//!   list's lock, which may park a virtual thread (std's futex wait goes
//!   through the `transparent` hooks), is taken with the cache let go, in
//!   [`Batch`]es, and the cache is looked up again afterwards (the thread
//!   may have moved to another carrier). No signal handler makes or frees
//!   a record.

use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::mem::offset_of;
use std::ptr::NonNull;

use super::record::VThread;
use super::slab::{Batch, Cache, Slab};
use crate::refcount::Counts;

/// What one slab slot holds.
#[repr(C)]
struct Inner {
    counts: Counts,
    data: VThread,
}

/// Every record's memory.
static RECORDS: Slab<Inner> = Slab::new();

/// [`CACHE`] of a thread whose [`OWN`] cache has been destroyed.
const GONE: *mut Cache<Inner> = std::ptr::without_provenance_mut(1);

std::thread_local! {
    /// The cache this thread allocates records from (see "Which cache").
    /// `const`, no destructor: written into areas by [`seed_cache`].
    static CACHE: Cell<*mut Cache<Inner>> = const { Cell::new(std::ptr::null_mut()) };
    /// An OS thread's own cache.
    static OWN: Own = const { Own(UnsafeCell::new(Cache::new())) };
}

/// An OS thread's cache; given back when the thread exits.
struct Own(UnsafeCell<Cache<Inner>>);

impl Drop for Own {
    fn drop(&mut self) {
        CACHE.with(|c| c.set(GONE));
        self.0.get_mut().flush(&RECORDS);
    }
}

/// The calling thread's cache, or [`GONE`] if it has none any more (an
/// exiting thread's destructors).
///
/// `#[inline(never)]`: code on a virtual thread that migrates between
/// carriers (a runtime without thread-local areas) must compute the
/// thread-local's address anew on every call, never reuse one computed
/// before a park (as `carrier()`).
#[inline(never)]
fn cache_ptr() -> *mut Cache<Inner> {
    let c = CACHE.with(Cell::get);
    if !c.is_null() {
        return c;
    }
    let c = OWN.try_with(|o| o.0.get()).unwrap_or(GONE);
    CACHE.with(|cell| cell.set(c));
    c
}

/// Runs `f` on the calling thread's cache, unless it has none. `f` must
/// not suspend the thread (nor block on a lock: see "Which cache").
#[inline]
fn on_cache<R>(f: impl FnOnce(&mut Cache<Inner>) -> R) -> Option<R> {
    let c = cache_ptr();
    if c == GONE {
        return None;
    }
    // SAFETY: `c` is this OS thread's cache (its own `OWN`, or its
    // carrier's, seeded), alive until it is set to GONE, and used by one
    // caller at a time: whoever runs on this OS thread, and `f` neither
    // suspends nor reenters (the callers below).
    Some(f(unsafe { &mut *c }))
}

/// A slot for a new record: from the cache, else a batch from the global
/// list, taken with no cache held (its lock may park a virtual thread,
/// and another thread on the same carrier may use the cache meanwhile).
fn take_slot() -> NonNull<Inner> {
    if let Some(Some(p)) = on_cache(Cache::pop) {
        return p;
    }
    let mut batch = RECORDS.take_batch();
    let p = batch.pop().expect("a batch has a slot");
    // The thread may be on another carrier now: `on_cache` looks again.
    if on_cache(|c| c.refill(std::mem::take(&mut batch))).is_none() {
        // SAFETY: slots of this slab, fresh or freed, never handed out.
        unsafe { RECORDS.put_batch(batch) };
    }
    p
}

/// Gives back the slot of a record whose last reference is gone.
///
/// # Safety
/// `p` holds no live value and nobody uses it again.
unsafe fn give_slot(p: NonNull<Inner>) {
    // SAFETY: as the caller promises.
    let over = on_cache(|c| unsafe { c.push(p) }).unwrap_or_else(|| Some(Batch::one(p)));
    if let Some(b) = over {
        // SAFETY: freed slots of this slab (the cache's, or `p`), with no
        // cache held while the lock is taken.
        unsafe { RECORDS.put_batch(b) };
    }
}

/// Writes the calling OS thread's cache (made now if it has none) into
/// the thread-local area at `tp` as that area's [`CACHE`]: a carrier does
/// this for every virtual thread before it first runs there.
///
/// # Safety
/// As `tls::seed`: `tp` is an area made by `tls::init_area` whose thread
/// is not running and is about to run on the calling carrier.
pub(crate) unsafe fn seed_cache(tp: usize) {
    let mine = cache_ptr();
    // SAFETY: `CACHE` is a `const` Cell of this crate (the caller gives
    // the rest).
    unsafe { crate::tls::seed(tp, CACHE.with(|c| c as *const _), Cell::new(mine)) };
}

/// Freed records kept for reuse before [`trim_records`] gives the memory
/// of the rest back: `WEFT_RECORD_KEEP`, by default 65,536 (12 MiB).
const DEFAULT_KEEP: usize = 65_536;

/// `WEFT_RECORD_KEEP`, read once. A value that is not a number is reported
/// on stderr, once, and the default kept (the caller, the monitor, has
/// nobody to return an error to).
fn keep() -> usize {
    static KEEP: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *KEEP.get_or_init(|| crate::knob::count("WEFT_RECORD_KEEP", DEFAULT_KEEP, 0, "records"))
}

/// Gives back to the kernel the memory of records freed in bulk, once more
/// than `WEFT_RECORD_KEEP` lie unused (see `slab.rs`, "What is kept").
/// Called by each runtime's monitor on its ticks. Returns the bytes given
/// back.
pub(crate) fn trim_records() -> usize {
    RECORDS.trim(keep())
}

/// A strong reference to a thread record (as `Arc<VThread>`).
pub(crate) struct RecordArc {
    ptr: NonNull<Inner>,
}

/// A weak reference to a thread record (as `Weak<VThread>`).
pub(crate) struct RecordWeak {
    ptr: NonNull<Inner>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<VThread>();
};

// SAFETY: as `RecordArc` and `Weak<VThread>`: `VThread` is `Send` and
// `Sync` (checked above), and the counts are atomic.
unsafe impl Send for RecordArc {}
// SAFETY: as above.
unsafe impl Sync for RecordArc {}
// SAFETY: as above.
unsafe impl Send for RecordWeak {}
// SAFETY: as above.
unsafe impl Sync for RecordWeak {}

impl RecordArc {
    /// A new record holding `data`.
    pub(crate) fn new(data: VThread) -> RecordArc {
        let p = take_slot();
        // SAFETY: a fresh slot, sized and aligned for an `Inner`, that
        // nobody else uses.
        unsafe {
            p.as_ptr().write(Inner {
                counts: Counts::new(),
                data,
            })
        };
        RecordArc { ptr: p }
    }

    fn inner(&self) -> &Inner {
        // SAFETY: a strong reference keeps the slot and its value alive.
        unsafe { self.ptr.as_ref() }
    }

    /// The record's address (as `Arc::as_ptr`).
    pub(crate) fn as_ptr(this: &Self) -> *const VThread {
        // SAFETY: in bounds of the live slot; no reference is made.
        unsafe { &raw const (*this.ptr.as_ptr()).data }
    }

    /// Gives up the reference without releasing it (as `Arc::into_raw`).
    pub(crate) fn into_raw(this: Self) -> *const VThread {
        let p = Self::as_ptr(&this);
        std::mem::forget(this);
        p
    }

    /// Takes back a reference given up by [`RecordArc::into_raw`].
    ///
    /// # Safety
    /// As `Arc::from_raw`: `p` came from `into_raw` (or `as_ptr` of a
    /// record whose count the caller owns), and the caller owns one strong
    /// count of it.
    pub(crate) unsafe fn from_raw(p: *const VThread) -> Self {
        // SAFETY: `p` points at the `data` of a live slot (caller).
        let inner = unsafe { p.byte_sub(offset_of!(Inner, data)) }.cast::<Inner>();
        RecordArc {
            // SAFETY: derived from a non-null record address.
            ptr: unsafe { NonNull::new_unchecked(inner.cast_mut()) },
        }
    }

    /// Adds one strong count to the record at `p` (as
    /// `Arc::increment_strong_count`).
    ///
    /// # Safety
    /// `p` came from [`RecordArc::into_raw`] or [`RecordArc::as_ptr`], and
    /// a strong reference keeps it alive during the call.
    pub(crate) unsafe fn increment_strong_count(p: *const VThread) {
        // SAFETY: live (caller); `counts` lies before `data` in the slot.
        let inner = unsafe { &*p.byte_sub(offset_of!(Inner, data)).cast::<Inner>() };
        inner.counts.inc_strong();
    }

    /// Releases one strong count of the record at `p` (as
    /// `Arc::decrement_strong_count`).
    ///
    /// # Safety
    /// As [`RecordArc::from_raw`]: the caller owns the count it releases.
    pub(crate) unsafe fn decrement_strong_count(p: *const VThread) {
        // SAFETY: the caller owns one strong count, which this drop releases.
        drop(unsafe { RecordArc::from_raw(p) });
    }

    /// Whether two references are to the same record.
    pub(crate) fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.ptr == b.ptr
    }

    /// A weak reference to the record.
    pub(crate) fn downgrade(this: &Self) -> RecordWeak {
        this.inner().counts.inc_weak();
        RecordWeak { ptr: this.ptr }
    }

    /// The strong count (a snapshot, for tests).
    #[cfg(test)]
    pub(crate) fn strong_count(this: &Self) -> u32 {
        this.inner().counts.strong()
    }
}

impl Clone for RecordArc {
    #[inline]
    fn clone(&self) -> Self {
        self.inner().counts.inc_strong();
        RecordArc { ptr: self.ptr }
    }
}

impl std::ops::Deref for RecordArc {
    type Target = VThread;

    #[inline]
    fn deref(&self) -> &VThread {
        &self.inner().data
    }
}

impl Drop for RecordArc {
    #[inline]
    fn drop(&mut self) {
        if !self.inner().counts.dec_strong() {
            return;
        }
        /// Releases the weak count the strong ones shared, after the value
        /// is dropped — or while its drop unwinds (as `Arc`'s).
        struct SharedWeak(NonNull<Inner>);
        impl Drop for SharedWeak {
            fn drop(&mut self) {
                release_weak(self.0);
            }
        }
        let _weak = SharedWeak(self.ptr);
        // SAFETY: the last strong reference: nobody else reads the value
        // (the Acquire in `dec_strong` orders their uses before this), and
        // weak ones cannot upgrade from 0. Dropped in place, once.
        unsafe { std::ptr::drop_in_place(&raw mut (*self.ptr.as_ptr()).data) };
    }
}

impl RecordWeak {
    /// A weak reference whose record is gone (for tests that need one).
    #[cfg(test)]
    pub(crate) fn gone() -> RecordWeak {
        let kind = super::record::Kind::Os(std::sync::OnceLock::new());
        let r = RecordArc::new(VThread::new(None, kind, 0));
        RecordArc::downgrade(&r)
    }

    /// A strong reference, unless the record's value is gone.
    pub(crate) fn upgrade(&self) -> Option<RecordArc> {
        // SAFETY: a weak reference keeps the slot (and its counts) alive.
        let counts = unsafe { &self.ptr.as_ref().counts };
        // Not `then_some`: its argument is made (and dropped, releasing a
        // count never taken) even when the upgrade fails.
        counts.upgrade().then(|| RecordArc { ptr: self.ptr })
    }
}

impl Drop for RecordWeak {
    fn drop(&mut self) {
        release_weak(self.ptr);
    }
}

/// Releases one weak count of `ptr`, freeing the slot with the last.
fn release_weak(ptr: NonNull<Inner>) {
    // SAFETY: the caller's weak count keeps the slot alive until here.
    if !unsafe { ptr.as_ref() }.counts.dec_weak() {
        return;
    }
    // SAFETY: no reference of either kind is left, and the value was
    // dropped by the last strong one: the slot holds nothing (`Counts`
    // has no drop) and nobody uses it again.
    unsafe { give_slot(ptr) };
}

impl fmt::Debug for RecordArc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecordArc({:p})", Self::as_ptr(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::record::Kind;
    use std::collections::HashSet;
    use std::sync::OnceLock;

    fn record() -> RecordArc {
        RecordArc::new(VThread::new(None, Kind::Os(OnceLock::new()), 0))
    }

    /// A record freed on a thread is the next one that thread makes (its
    /// cache is LIFO), and the new one starts clean: its own id, one strong
    /// count, nothing of the record that lay there before.
    #[test]
    fn a_freed_record_is_reused_fresh() {
        let a = record();
        let (addr, id) = (RecordArc::as_ptr(&a), a.id);
        a.interrupted
            .store(true, std::sync::atomic::Ordering::Relaxed);
        drop(a);
        let b = record();
        assert_eq!(
            RecordArc::as_ptr(&b),
            addr,
            "the cache hands back the slot freed last"
        );
        assert_ne!(b.id, id);
        assert_eq!(RecordArc::strong_count(&b), 1);
        assert!(!b.interrupted.load(std::sync::atomic::Ordering::Relaxed));
    }

    /// A weak reference keeps the slot but not the value: it upgrades while
    /// a strong one lives, not after, and the slot is reused only once the
    /// weak one is gone too.
    #[test]
    fn a_weak_reference_holds_the_slot_not_the_value() {
        let a = record();
        let addr = RecordArc::as_ptr(&a);
        let w = RecordArc::downgrade(&a);
        let again = w.upgrade().expect("alive");
        assert!(RecordArc::ptr_eq(&a, &again));
        drop((a, again));
        assert!(w.upgrade().is_none());
        assert!(w.upgrade().is_none());
        // SAFETY: the weak reference keeps the slot, and its counts, alive.
        let strong = unsafe { w.ptr.as_ref() }.counts.strong();
        assert_eq!(strong, 0, "a failed upgrade changed the strong count");
        let b = record();
        assert_ne!(
            RecordArc::as_ptr(&b),
            addr,
            "slot reused under a weak reference"
        );
        drop(w);
        let c = record();
        assert_eq!(
            RecordArc::as_ptr(&c),
            addr,
            "the slot is free once the weak one is gone"
        );
        drop((b, c));
    }

    /// Records made on some threads and freed on others (through the
    /// caches and the global list, in batches) are never handed out twice
    /// while alive: every live record has its own address and id.
    #[test]
    fn records_crossing_threads_never_alias() {
        const THREADS: usize = 4;
        const ROUNDS: usize = 50;
        const PER: usize = 300;
        let (tx, rx) = std::sync::mpsc::channel::<Vec<RecordArc>>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        let live = std::sync::Arc::new(std::sync::Mutex::new(HashSet::new()));
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let (tx, rx, live) = (tx.clone(), rx.clone(), live.clone());
                std::thread::spawn(move || {
                    for _ in 0..ROUNDS {
                        let batch: Vec<RecordArc> = (0..PER).map(|_| record()).collect();
                        {
                            let mut l = live.lock().unwrap();
                            for r in &batch {
                                assert!(
                                    l.insert(RecordArc::as_ptr(r) as usize),
                                    "a live record's slot was handed out again"
                                );
                            }
                        }
                        tx.send(batch).unwrap();
                        // Free someone else's batch (or our own) here.
                        let theirs = rx.lock().unwrap().recv().unwrap();
                        let mut l = live.lock().unwrap();
                        for r in &theirs {
                            assert!(l.remove(&(RecordArc::as_ptr(r) as usize)));
                        }
                        drop(l);
                        drop(theirs);
                    }
                })
            })
            .collect();
        drop(tx);
        for w in workers {
            w.join().unwrap();
        }
        assert!(live.lock().unwrap().is_empty());
    }
}
