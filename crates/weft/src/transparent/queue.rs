//! The emulated wait queues the hooks park virtual threads on: a table
//! of buckets, each a spin lock and a list of waiters (nodes on the
//! waiters' own stacks), keyed by an address. `futex.rs` queues
//! `FUTEX_WAIT`s on their word's address; `hooks/cond.rs` queues
//! `pthread_cond_wait`s on the condition variable's address made odd
//! ([`cond_key`]), which never names a futex word (those are 4-byte
//! aligned). Waiter and waker of a key meet under its bucket's lock: a
//! waiter checks its condition and enqueues itself under it, a waker
//! dequeues under it and unparks after the unlock — the same shape as
//! `sync/waitq.rs`, and why no wake-up between a check and a park is lost.
//!
//! # A carrier waiting in the kernel beside emulated waiters
//!
//! A carrier's OS thread can wait in the kernel on a word that virtual
//! threads wait on here: a waker the readiness handler runs in the
//! carrier's loop takes a `std::sync::Mutex` a virtual thread waits for,
//! or a pinned thread does. A wake that dequeued an emulated waiter bound
//! to that carrier and stopped there (its count used up) would leave both
//! stuck: the thread waits for the carrier, the carrier for a wake. So a
//! carrier counts itself in its word's bucket while it waits in the kernel
//! ([`CarrierInKernel`]), and a wake of a word whose bucket counts one
//! passes its whole count to the kernel as well ([`carriers_in_kernel`]):
//! the extra wake-ups are spurious returns, which every futex user
//! handles. The count is read without the bucket lock, so both sides
//! order their write before their read with a SeqCst fence (Dekker's
//! pattern): the carrier raises the count and then lets the kernel read
//! the word; a waker changed the word before its call and then reads the
//! count. Either the waker sees the count and wakes the kernel too, or the
//! kernel's read of the word sees the change and does not wait.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use std::time::Instant;

/// All bits of a futex bitset: a waiter or waker without one.
pub(super) const BITSET_ALL: u32 = u32::MAX;

/// The queue key of the condition variable at `cond`: its address made
/// odd, so that it is never a futex word's (see the module docs).
pub(super) fn cond_key(cond: usize) -> usize {
    cond | 1
}

/// Whether the calling thread is a virtual thread whose waits may park it
/// here: it has thread-locals of its own, is running (not parking
/// already, not inside a wait of this module), is in no `weft::pinned`
/// section and holds exactly `c_locks` C locks (`thread/native.rs`; 0 for
/// a futex wait, 1 for a condition variable's, whose mutex is released
/// before the park).
pub(super) fn may_park(c_locks: u32) -> bool {
    crate::tls::isolated()
        && super::fds::on_virtual()
        && running_virtual().is_some_and(|t| t.pin_depth.get() == c_locks * crate::thread::C_LOCK)
}

/// The calling virtual thread if it is running its own code: not parking
/// already, not inside a wait of this module.
pub(super) fn running_virtual() -> Option<&'static crate::thread::VThread> {
    if IN_WAIT.with(Cell::get) {
        return None;
    }
    crate::thread::current_virtual()
        .filter(|t| crate::thread::state_of(t) == crate::thread::State::Running)
}

std::thread_local! {
    /// Set while this thread is inside [`park_queued`]: a futex wait made
    /// there — by the park (the scheduler's own locks), or by anything the
    /// wait reads on its way (a once-cell another thread is filling) — goes
    /// to the kernel. Emulated, it would enter `park_queued` again from
    /// inside itself, without bound.
    static IN_WAIT: Cell<bool> = const { Cell::new(false) };
}

/// [`IN_WAIT`] raised for its lifetime.
struct InWait;

impl InWait {
    fn enter() -> InWait {
        IN_WAIT.with(|w| w.set(true));
        InWait
    }
}

impl Drop for InWait {
    fn drop(&mut self) {
        IN_WAIT.with(|w| w.set(false));
    }
}

/// A virtual thread waiting on a word; lives on its stack for the wait.
pub(super) struct Waiter {
    /// The word waited on: changed by a requeue, with the locks of both
    /// words' buckets held.
    pub(super) addr: AtomicUsize,
    pub(super) bits: u32,
    pub(super) thread: crate::thread::Thread,
    /// Set by the waker that dequeued it (under the bucket lock).
    pub(super) woken: AtomicBool,
}

pub(super) struct Bucket {
    lock: AtomicBool,
    /// Carriers' OS threads waiting in the kernel on a word of this bucket
    /// (module docs, [`CarrierInKernel`]).
    carriers: AtomicUsize,
    /// SAFETY (field invariant): touched only with `lock` held.
    waiters: UnsafeCell<Vec<*const Waiter>>,
}

// SAFETY: `waiters` is only touched under `lock`; the pointed-to waiters
// live until they leave the queue, which also happens under `lock`.
unsafe impl Sync for Bucket {}

pub(super) const BUCKETS: usize = 256;
static TABLE: [Bucket; BUCKETS] = [const {
    Bucket {
        lock: AtomicBool::new(false),
        carriers: AtomicUsize::new(0),
        waiters: UnsafeCell::new(Vec::new()),
    }
}; BUCKETS];

pub(super) fn bucket_index(addr: usize) -> usize {
    // Fibonacci hashing of the word's address: its top 8 bits.
    let h = (addr >> 2).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - 8);
    h % BUCKETS
}

pub(super) fn bucket(addr: usize) -> &'static Bucket {
    &TABLE[bucket_index(addr)]
}

/// The buckets of two words, locked in table order (one lock when they
/// share a bucket), so that two operations on the same two words cannot
/// deadlock.
pub(super) struct Pair {
    first: BucketGuard<'static>,
    second: Option<BucketGuard<'static>>,
    /// `second` is the first word's bucket.
    swapped: bool,
}

impl Pair {
    pub(super) fn lock(a: usize, b: usize) -> Pair {
        let (i, j) = (bucket_index(a), bucket_index(b));
        if i == j {
            return Pair {
                first: TABLE[i].lock(),
                second: None,
                swapped: false,
            };
        }
        let first = TABLE[i.min(j)].lock();
        let second = TABLE[i.max(j)].lock();
        Pair {
            first,
            second: Some(second),
            swapped: i > j,
        }
    }

    /// The waiter lists of the first word's and the second word's buckets
    /// (`None`: the same list).
    pub(super) fn lists(&mut self) -> (&mut Vec<*const Waiter>, Option<&mut Vec<*const Waiter>>) {
        let swapped = self.swapped;
        let Pair { first, second, .. } = self;
        match second {
            None => (first.waiters(), None),
            Some(s) => {
                let (a, b) = (first.waiters(), s.waiters());
                if swapped { (b, Some(a)) } else { (a, Some(b)) }
            }
        }
    }
}

/// Dequeues up to `max` waiters of `addr` whose bitset meets `bits` from
/// `list` (a locked bucket's), in queue order, marking them woken; their
/// handles go to `out`, to be unparked after the unlock.
pub(super) fn take(
    list: &mut Vec<*const Waiter>,
    addr: usize,
    max: usize,
    bits: u32,
    out: &mut Vec<crate::thread::Thread>,
) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < list.len() && n < max {
        // SAFETY: a queued waiter is alive until it leaves the queue,
        // which needs the bucket lock the caller holds.
        let w = unsafe { &*list[i] };
        if w.addr.load(Ordering::Relaxed) == addr && w.bits & bits != 0 {
            out.push(w.thread.clone());
            w.woken.store(true, Ordering::Relaxed);
            list.remove(i); // in order: first come, first woken
            n += 1;
        } else {
            i += 1;
        }
    }
    n
}

impl Bucket {
    pub(super) fn lock(&self) -> BucketGuard<'_> {
        let mut spins = 0u32;
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
        BucketGuard(self)
    }
}

pub(super) struct BucketGuard<'a>(&'a Bucket);

impl BucketGuard<'_> {
    pub(super) fn waiters(&mut self) -> &mut Vec<*const Waiter> {
        // SAFETY: the lock is held (field invariant) and this guard is the
        // only one.
        unsafe { &mut *self.0.waiters.get() }
    }
}

impl Drop for BucketGuard<'_> {
    fn drop(&mut self) {
        self.0.lock.store(false, Ordering::Release);
    }
}

/// Wakes up to `max` emulated waiters of `addr` whose bitset meets `bits`;
/// returns how many.
pub(super) fn wake(addr: usize, max: usize, bits: u32) -> usize {
    let mut woken = Vec::new();
    take(bucket(addr).lock().waiters(), addr, max, bits, &mut woken);
    unpark_all(woken)
}

/// A carrier's OS thread waiting in the kernel on a futex word, counted in
/// the word's bucket while it lives (module docs).
pub(super) struct CarrierInKernel(&'static Bucket);

impl CarrierInKernel {
    /// Counts the calling OS thread's kernel wait on `addr` if it is a
    /// carrier (running a virtual thread or its own loop); `None` on
    /// any other OS thread.
    pub(super) fn enter(addr: usize) -> Option<CarrierInKernel> {
        crate::sched::carrier()?;
        let b = bucket(addr);
        b.carriers.fetch_add(1, Ordering::SeqCst);
        // Before the kernel reads the word (module docs).
        fence(Ordering::SeqCst);
        Some(CarrierInKernel(b))
    }
}

impl Drop for CarrierInKernel {
    fn drop(&mut self) {
        self.0.carriers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether a carrier may be waiting in the kernel on `addr` (module
/// docs): a wake of it then passes its whole count to the kernel. Called
/// after the caller changed the word.
pub(super) fn carriers_in_kernel(addr: usize) -> bool {
    fence(Ordering::SeqCst);
    bucket(addr).carriers.load(Ordering::SeqCst) != 0
}

/// Unparks threads dequeued under a bucket lock, after the unlock (the
/// waiters may return and free their nodes from then on); returns how
/// many.
pub(super) fn unpark_all(woken: Vec<crate::thread::Thread>) -> usize {
    let n = woken.len();
    for t in woken {
        t.unpark();
    }
    n
}

/// How [`park_queued`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Queued {
    /// `still` did not hold: never queued.
    Changed,
    /// Dequeued by a waker of the key.
    Woken,
    /// The deadline passed (and no waker took it).
    TimedOut,
    /// Back without a wake (an interrupt, a dump's borrow): the caller
    /// checks its condition again.
    Spurious,
}

/// The waiting half of the emulated queues, for futex words and for any
/// other key a hook waits on (`hooks/cond.rs`: a condition variable's
/// address, made odd so that it never names a futex word): if `still()`
/// holds under the key's bucket lock, queues the calling virtual thread
/// there, runs `queued` (after the enqueue, outside the lock: a
/// condition variable's wait releases its mutex there) and parks until a
/// waker of `key` ([`wake_key`]) takes it, `deadline`, or spuriously.
/// When `queued` returns false the thread leaves the queue without
/// parking: [`Queued::Changed`], or [`Queued::Woken`] if a waker took it
/// meanwhile.
/// Shown in dumps as a wait in `call`.
pub(super) fn park_queued(
    key: usize,
    bits: u32,
    deadline: Option<Instant>,
    still: impl Fn() -> bool,
    queued: impl FnOnce() -> bool,
    recheck: bool,
    call: &'static str,
) -> Queued {
    let _in_wait = InWait::enter();
    let me = Waiter {
        addr: AtomicUsize::new(key),
        bits,
        thread: crate::thread::current(),
        woken: AtomicBool::new(false),
    };
    let b = bucket(key);
    {
        let mut g = b.lock();
        if !still() {
            return Queued::Changed;
        }
        g.waiters().push(&me);
    }
    let park = queued();
    // An interrupt pending from before would end every park at once (and
    // the caller's retry loop would spin): keep it aside for the wait.
    let pending = crate::thread::take_interrupt();
    let max_gap = if recheck { recheck_max() } else { None };
    let mut gap = max_gap.map(|m| RECHECK_FIRST.min(m));
    let mut counted = false;
    let r = loop {
        let check_at = gap.and_then(|g| crate::clock::now().checked_add(g));
        if park {
            if !counted {
                super::count_park(call);
                counted = true;
            }
            let until = match (deadline, check_at) {
                (Some(d), Some(c)) => Some(d.min(c)),
                (d, c) => d.or(c),
            };
            crate::thread::with_blocker(crate::thread::Blocker::Call { call, fd: -1 }, || {
                crate::thread::park_deadline(until)
            });
        }
        // A requeue may have moved us to another word's bucket: lock the
        // one we are in (a move needs that bucket's lock, so it holds
        // still).
        let mut g = loop {
            let at = me.addr.load(Ordering::Relaxed);
            let g = bucket(at).lock();
            if me.addr.load(Ordering::Relaxed) == at {
                break g;
            }
        };
        if me.woken.load(Ordering::Relaxed) {
            break Queued::Woken;
        }
        let now = crate::clock::now();
        let past = |t: Option<Instant>| t.is_some_and(|t| now >= t);
        // A re-check of a wait that is not over: a word that still holds
        // the value keeps the thread queued (under the lock, as the first
        // check), for twice as long as before; a word that changed with
        // nobody waking us is a wake that went behind our back.
        if park && !past(deadline) && past(check_at) && me.addr.load(Ordering::Relaxed) == key {
            if still() {
                drop(g);
                gap = gap.map(|g| (g * 2).min(max_gap.unwrap_or(g)));
                continue;
            }
            super::count_recheck_found();
        }
        let list = g.waiters();
        if let Some(i) = list.iter().position(|&p| std::ptr::eq(p, &me)) {
            list.remove(i);
        }
        drop(g);
        break if !park {
            Queued::Changed
        } else if past(deadline) {
            Queued::TimedOut
        } else {
            Queued::Spurious
        };
    };
    if pending {
        me.thread.interrupt();
    }
    r
}

/// The first re-check of a futex wait's word ([`park_queued`] with
/// `recheck`); each later one comes twice as long after, up to
/// [`recheck_max`].
const RECHECK_FIRST: std::time::Duration = std::time::Duration::from_millis(10);

/// The longest a futex wait goes without a look at its word, so that a
/// wake made behind the emulation's back (a raw `syscall` instruction:
/// rustix's `linux_raw` backend, another language's runtime) ends the
/// wait within it: `WEFT_FUTEX_RECHECK_MS`, 1,000 by default; 0 turns
/// the re-checks off (such a wake is then lost for ever).
///
/// Read by the first waits of the process, each for itself if they come
/// at once: a once-cell would make the later ones wait for the first on a
/// futex, from inside a futex wait (see [`IN_WAIT`]).
fn recheck_max() -> Option<std::time::Duration> {
    const UNREAD: usize = usize::MAX;
    static MS: AtomicUsize = AtomicUsize::new(UNREAD);
    let mut ms = MS.load(Ordering::Relaxed);
    if ms == UNREAD {
        ms = crate::knob::count("WEFT_FUTEX_RECHECK_MS", 1000, 0, "milliseconds").min(UNREAD - 1);
        MS.store(ms, Ordering::Relaxed);
    }
    (ms > 0).then(|| std::time::Duration::from_millis(ms as u64))
}

/// The waking half of [`park_queued`]: wakes up to `max` threads queued
/// on `key`; returns how many.
pub(super) fn wake_key(key: usize, max: usize) -> usize {
    wake(key, max, BITSET_ALL)
}
