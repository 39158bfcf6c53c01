//! Futex waits that park the virtual thread: `std::sync` and `parking_lot`
//! on virtual threads.
//!
//! std's `Mutex`, `RwLock`, `Condvar`, `Once`/`OnceLock` and
//! `thread::park` (and so std `mpsc` and `crossbeam-channel`, which park
//! with it), and `parking_lot`'s per-thread parker all sleep with
//! `syscall(SYS_futex, …)`: libc's generic entry, which this module
//! defines. A private `FUTEX_WAIT`/`FUTEX_WAIT_BITSET` made on a virtual
//! thread parks the virtual thread on an emulated futex queue instead of
//! blocking its carrier; every `FUTEX_WAKE`/`FUTEX_WAKE_BITSET`, from any
//! thread, wakes the emulated waiters of that word first and passes the
//! rest of its count to the kernel, so OS threads waiting on the same word
//! are woken as before. Every other system call, and every futex call on
//! an OS thread, goes to the kernel unchanged.
//!
//! That each virtual thread has a parker of its own — the precondition for
//! emulating `thread::park`'s futex at all — comes from its own
//! thread-locals (`std::thread::current()` is per virtual thread: see
//! `tls.rs`). On a runtime that shares its carriers' thread-locals, two
//! virtual threads of a carrier would share one parker; there waits pass
//! through to the kernel, as before.
//!
//! # The kernel's contract, kept
//!
//! - **The value check is atomic with the enqueue.** Waiters and wakers of
//!   one word meet in one bucket under its lock: a waiter compares the word
//!   and enqueues itself under the lock; a waker, which changed the word
//!   before calling wake (the futex protocol), dequeues under the same
//!   lock. Either the waiter's compare comes after the waker's unlock, and
//!   then sees the new value (`EAGAIN`), or its enqueue comes before the
//!   waker's lock, and then it is found. The lock is a spin lock with
//!   `sched_yield` back-off: a futex-based lock here would call itself.
//! - **Timeouts**: `FUTEX_WAIT` takes a relative `CLOCK_MONOTONIC` timeout,
//!   `FUTEX_WAIT_BITSET` an absolute one (`CLOCK_REALTIME` with
//!   `FUTEX_CLOCK_REALTIME`); a wait that times out returns `ETIMEDOUT`.
//! - **Bitsets**: a waker's bitset must intersect the waiter's (`FUTEX_WAKE`
//!   is the all-ones bitset); a zero bitset is `EINVAL`.
//! - **Wake counts**: the number woken, emulated and kernel waiters added.
//! - **Spurious returns** (0 without a wake) happen, as the kernel allows:
//!   after a [`Thread::interrupt`](crate::Thread::interrupt) or a thread
//!   dump's borrow. Every user of futexes re-checks its word.
//!
//! # Where a wait still blocks the carrier
//!
//! A futex call made inside a signal handler of the program's goes to the
//! kernel untouched, wait or wake: the interrupted code may hold a bucket
//! lock. A wake from a handler therefore reaches OS threads only (std's
//! `unpark` and lock release are not async-signal-safe anyway).
//!
//! Shared (non-`FUTEX_PRIVATE_FLAG`) futexes — another process may wake
//! them —, the other futex operations (`REQUEUE`, `WAKE_OP`, PI locks),
//! waits inside [`weft::pinned`](crate::pinned), waits made by Weft while a
//! thread is already parking or inside this module, and waits that glibc
//! issues inline (`pthread_mutex_lock`, `pthread_cond_wait`: C code's
//! pthread locks) go to the kernel.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use libc::c_long;

use super::sys;

const FUTEX_WAIT: i32 = 0;
const FUTEX_WAKE: i32 = 1;
const FUTEX_WAIT_BITSET: i32 = 9;
const FUTEX_WAKE_BITSET: i32 = 10;
const FUTEX_PRIVATE_FLAG: i32 = 128;
const FUTEX_CLOCK_REALTIME: i32 = 256;
const BITSET_ALL: u32 = u32::MAX;

/// `syscall(2)`: futex waits on virtual threads park them (module docs);
/// everything else goes to the kernel unchanged.
///
/// Defined with six word arguments: on x86_64 and AArch64 Linux a variadic
/// caller passes them exactly as a fixed-argument one does, and the
/// kernel ignores the ones a call does not use (glibc's own `syscall`
/// passes all six the same way).
///
/// # Safety
///
/// As `syscall(2)`: the arguments must be valid for system call `n`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn syscall(
    n: c_long,
    a1: usize,
    a2: usize,
    a3: usize,
    a4: usize,
    a5: usize,
    a6: usize,
) -> c_long {
    // In a signal handler of the program's, straight to the kernel: the
    // interrupted code may hold a bucket lock here (or be inside malloc).
    if n == libc::SYS_futex && !super::signals::in_handler() {
        let word = a1 as *const AtomicU32;
        // SAFETY: the caller's contract for futex(2).
        let handled = unsafe { futex(word, a2 as i32, a3 as u32, a4, a6 as u32) };
        if let Some(r) = handled {
            return r;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { sys::sc(n, [a1, a2, a3, a4, a5, a6]) }
}

/// The futex operations handled here, or `None` for the kernel.
///
/// # Safety
///
/// `word` and `timeout` as futex(2) requires for `op`.
unsafe fn futex(
    word: *const AtomicU32,
    op: i32,
    val: u32,
    timeout: usize,
    bitset: u32,
) -> Option<c_long> {
    let private = op & FUTEX_PRIVATE_FLAG != 0;
    let cmd = op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
    match cmd {
        FUTEX_WAKE | FUTEX_WAKE_BITSET => {
            let bits = if cmd == FUTEX_WAKE {
                BITSET_ALL
            } else {
                bitset
            };
            if bits == 0 {
                return None; // the kernel's EINVAL
            }
            let max = val.min(i32::MAX as u32) as usize;
            let woken = if private {
                wake(word as usize, max, bits)
            } else {
                0
            };
            if woken >= max {
                return Some(woken as c_long);
            }
            // The rest of the count for OS threads sleeping in the kernel.
            // SAFETY: the caller's futex arguments, with a smaller count.
            let k = unsafe {
                sys::sc(
                    libc::SYS_futex,
                    [
                        word as usize,
                        op as usize,
                        max - woken,
                        timeout,
                        0,
                        bitset as usize,
                    ],
                )
            };
            Some(if k < 0 {
                if woken > 0 { woken as c_long } else { k }
            } else {
                k + woken as c_long
            })
        }
        FUTEX_WAIT | FUTEX_WAIT_BITSET if private => {
            let bits = if cmd == FUTEX_WAIT {
                BITSET_ALL
            } else {
                bitset
            };
            if bits == 0 || !may_park() {
                return None;
            }
            let deadline = match timeout {
                0 => None,
                // SAFETY: a non-null timeout points at a timespec (futex(2)).
                t => match deadline(unsafe { &*(t as *const libc::timespec) }, cmd, op) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        sys::set_errno(e);
                        return Some(-1);
                    }
                },
            };
            // SAFETY: the caller passes a live, aligned futex word.
            Some(wait(unsafe { &*word }, val, bits, deadline))
        }
        _ => None,
    }
}

/// Whether the calling thread is a virtual thread whose futex waits may
/// park it here.
fn may_park() -> bool {
    if IN_WAIT.with(Cell::get) || !crate::tls::isolated() || !super::fds::on_virtual() {
        return false;
    }
    match crate::thread::current_virtual() {
        Some(t) => {
            t.pin_depth.get() == 0 && crate::thread::inner_state(t) == crate::thread::State::Running
        }
        None => false,
    }
}

/// The instant a wait with this timeout ends (`Err`: the errno for a bad
/// timespec).
fn deadline(ts: &libc::timespec, cmd: i32, op: i32) -> Result<Instant, i32> {
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(libc::EINVAL);
    }
    let d = Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
    let now = crate::clock::now();
    if cmd == FUTEX_WAIT {
        return Ok(now + d);
    }
    // Absolute, on the monotonic clock (Instant's) or the real-time one.
    let clock = if op & FUTEX_CLOCK_REALTIME != 0 {
        libc::CLOCK_REALTIME
    } else {
        libc::CLOCK_MONOTONIC
    };
    let mut cur = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(clock, &mut cur) };
    let cur = Duration::new(
        cur.tv_sec.max(0) as u64,
        cur.tv_nsec.clamp(0, 999_999_999) as u32,
    );
    Ok(now + d.saturating_sub(cur))
}

std::thread_local! {
    /// Set while this thread is inside [`wait`]: a futex wait made by the
    /// park below (the scheduler's own locks) goes to the kernel.
    static IN_WAIT: Cell<bool> = const { Cell::new(false) };
}

/// A virtual thread waiting on a word; lives on its stack for the wait.
struct Waiter {
    addr: usize,
    bits: u32,
    thread: crate::thread::Thread,
    /// Set by the waker that dequeued it (under the bucket lock).
    woken: AtomicBool,
}

struct Bucket {
    lock: AtomicBool,
    /// SAFETY (field invariant): touched only with `lock` held.
    waiters: UnsafeCell<Vec<*const Waiter>>,
}

// SAFETY: `waiters` is only touched under `lock`; the pointed-to waiters
// live until they leave the queue, which also happens under `lock`.
unsafe impl Sync for Bucket {}

const BUCKETS: usize = 256;
static TABLE: [Bucket; BUCKETS] = [const {
    Bucket {
        lock: AtomicBool::new(false),
        waiters: UnsafeCell::new(Vec::new()),
    }
}; BUCKETS];

fn bucket(addr: usize) -> &'static Bucket {
    // Fibonacci hashing of the word's address: its top 8 bits.
    let h = (addr >> 2).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - 8);
    &TABLE[h % BUCKETS]
}

impl Bucket {
    fn lock(&self) -> BucketGuard<'_> {
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

struct BucketGuard<'a>(&'a Bucket);

impl BucketGuard<'_> {
    fn waiters(&mut self) -> &mut Vec<*const Waiter> {
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
fn wake(addr: usize, max: usize, bits: u32) -> usize {
    let b = bucket(addr);
    let mut woken: Vec<crate::thread::Thread> = Vec::new();
    {
        let mut g = b.lock();
        let list = g.waiters();
        let mut i = 0;
        while i < list.len() && woken.len() < max {
            // SAFETY: a queued waiter is alive until it leaves the queue,
            // which needs this lock.
            let w = unsafe { &*list[i] };
            if w.addr == addr && w.bits & bits != 0 {
                woken.push(w.thread.clone());
                w.woken.store(true, Ordering::Relaxed);
                list.remove(i); // in order: first come, first woken
            } else {
                i += 1;
            }
        }
    }
    // After the unlock: the waiters may return (and free their nodes) now.
    let n = woken.len();
    for t in woken {
        t.unpark();
    }
    n
}

/// Parks the calling virtual thread while `word` holds `val`, until woken,
/// `deadline`, or spuriously. futex(2)'s return: 0, or -1 with errno.
fn wait(word: &AtomicU32, val: u32, bits: u32, deadline: Option<Instant>) -> c_long {
    let addr = word as *const AtomicU32 as usize;
    let me = Waiter {
        addr,
        bits,
        thread: crate::thread::current(),
        woken: AtomicBool::new(false),
    };
    let b = bucket(addr);
    {
        let mut g = b.lock();
        if word.load(Ordering::SeqCst) != val {
            drop(g);
            sys::set_errno(libc::EAGAIN);
            return -1;
        }
        g.waiters().push(&me);
    }
    // An interrupt pending from before would end every park at once (and
    // the caller's retry loop would spin): keep it aside for the wait.
    let pending = crate::thread::take_interrupt();
    IN_WAIT.with(|w| w.set(true));
    crate::thread::with_blocker(
        crate::thread::Blocker::Call {
            call: "futex",
            fd: -1,
        },
        || crate::thread::park_deadline(deadline),
    );
    IN_WAIT.with(|w| w.set(false));
    if pending {
        me.thread.interrupt();
    }
    let mut g = b.lock();
    if me.woken.load(Ordering::Relaxed) {
        return 0;
    }
    let list = g.waiters();
    if let Some(i) = list.iter().position(|&p| std::ptr::eq(p, &me)) {
        list.remove(i);
    }
    drop(g);
    if deadline.is_some_and(|d| crate::clock::now() >= d) {
        sys::set_errno(libc::ETIMEDOUT);
        return -1;
    }
    0
}
