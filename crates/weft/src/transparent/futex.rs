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
//! `tls/`). On a runtime that shares its carriers' thread-locals, two
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
//!   A wake of a word that a carrier's OS thread waits on in the kernel
//!   also passes its whole count to the kernel, so it can wake more than
//!   asked (`queue.rs`, "A carrier waiting in the kernel beside emulated
//!   waiters": otherwise an emulated waiter bound to that carrier could
//!   take the only wake and never run).
//! - **Spurious returns** (0 without a wake) happen, as the kernel allows:
//!   after a [`Thread::interrupt`](crate::Thread::interrupt), a thread
//!   dump's borrow, or such an extra wake. Every user of futexes re-checks
//!   its word.
//!
//! # Where a wait still blocks the carrier
//!
//! A futex call made inside a signal handler of the program's goes to the
//! kernel untouched, wait or wake: the interrupted code may hold a bucket
//! lock. A wake from a handler therefore reaches OS threads only (std's
//! `unpark` and lock release are not async-signal-safe anyway).
//!
//! Shared (non-`FUTEX_PRIVATE_FLAG`) futexes — another process may wake
//! them —, PI locks, waits inside [`weft::pinned`](crate::pinned) or while
//! the thread holds a C lock (`thread/native.rs`), waits made by Weft while
//! a thread is already parking or inside this module, and waits that
//! glibc issues inline (`pthread_mutex_lock`, `pthread_cond_wait`: C
//! code's pthread locks) go to the kernel. Those made through `syscall`
//! by a running virtual thread open its carrier's blocking section
//! (`thread::hold_carrier`): the carrier's other threads run elsewhere
//! while it waits.
//!
//! # Every wake that can reach an emulated waiter
//!
//! An emulated waiter is only seen by wakes that come through `syscall(2)`
//! — this function. So every private operation that can wake or move a
//! waiter is handled here too: `FUTEX_WAKE`, `FUTEX_WAKE_BITSET`,
//! `FUTEX_REQUEUE`, `FUTEX_CMP_REQUEUE` (the value check made under the
//! bucket locks of both words; emulated waiters woken or moved to the
//! second word's queue, the rest of both counts passed to the kernel for
//! OS threads) and `FUTEX_WAKE_OP` (the operation on the second word done
//! here, atomically, then the wakes of both words, emulated and kernel: a
//! waiter of the second word either compared its word before the
//! operation and is queued, or after it and sees the new value).
//!
//! What cannot be seen: a wake issued with a raw `syscall` *instruction*
//! (rustix's `linux_raw` backend, a Go or Zig runtime in the same
//! process), which goes straight to the kernel. std, `parking_lot`,
//! `crossbeam`, `atomic-wait` and glibc-based C code call `syscall(2)` for
//! both sides and are covered. For the others the loss is bounded: an
//! emulated waiter looks at its word again 10 ms into its wait, then at
//! twice the previous gap, up to `WEFT_FUTEX_RECHECK_MS` (1,000 ms by
//! default; 0 turns the looks off), each under the bucket lock as the
//! first check; a word that no longer holds the value ends the wait with
//! 0 (a spurious return, which every futex user handles), and the look is
//! counted (`weft::transparent::futex_rechecks_found`). A wake behind our
//! back therefore costs its waiter at most that long. The looks cost a
//! timer per wait: a parked waiter is woken 7 times in its first 1.27 s
//! and then once a second (`tests-transparent/examples/futex_recheck.rs`
//! measures it).
//!
//! Timeouts too large for the clock (a `tv_sec` of `i64::MAX`, which the
//! kernel accepts) wait without a deadline; nothing here can panic across
//! the `extern "C"` boundary.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use libc::c_long;

use super::queue::{
    BITSET_ALL, CarrierInKernel, Pair, Queued, carriers_in_kernel, may_park, park_queued, take,
    unpark_all, wake,
};
use super::sys;

const FUTEX_WAIT: i32 = 0;
const FUTEX_WAKE: i32 = 1;
const FUTEX_REQUEUE: i32 = 3;
const FUTEX_CMP_REQUEUE: i32 = 4;
const FUTEX_WAKE_OP: i32 = 5;
const FUTEX_WAIT_BITSET: i32 = 9;
const FUTEX_WAKE_BITSET: i32 = 10;
const FUTEX_PRIVATE_FLAG: i32 = 128;
const FUTEX_CLOCK_REALTIME: i32 = 256;

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
    let mut _section = None;
    let mut _loop_section = None;
    let mut _counted = None;
    // In a signal handler of the program's, straight to the kernel: the
    // interrupted code may hold a bucket lock here (or be inside malloc).
    if n == libc::SYS_futex && !super::signals::in_handler() {
        let word = a1 as *const AtomicU32;
        let op = a2 as i32;
        // SAFETY: the caller's contract for futex(2).
        let handled = unsafe { futex(word, op, a3 as u32, a4, a5, a6 as u32) };
        if let Some(r) = handled {
            return r;
        }
        if waits(op) {
            if super::queue::running_virtual().is_some() {
                // A wait of the program's that holds the carrier (pinned, a
                // shared or PI futex): its other threads run elsewhere
                // meanwhile (`thread::hold_carrier`).
                _section = crate::thread::hold_carrier();
            } else {
                // A carrier's own loop waiting (a waker the readiness
                // handler runs takes a lock): the same, for the threads
                // queued behind it.
                _loop_section = crate::sched::hold_carrier_loop();
            }
            if op & FUTEX_PRIVATE_FLAG != 0 {
                _counted = CarrierInKernel::enter(a1);
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe { sys::sc(n, [a1, a2, a3, a4, a5, a6]) }
}

/// Whether futex operation `op` may wait in the kernel.
fn waits(op: i32) -> bool {
    const FUTEX_LOCK_PI: i32 = 6;
    const FUTEX_WAIT_REQUEUE_PI: i32 = 11;
    const FUTEX_LOCK_PI2: i32 = 13;
    matches!(
        op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME),
        FUTEX_WAIT | FUTEX_WAIT_BITSET | FUTEX_LOCK_PI | FUTEX_WAIT_REQUEUE_PI | FUTEX_LOCK_PI2
    )
}

/// The futex operations handled here, or `None` for the kernel.
/// `timeout`, `word2` and `val3` are futex(2)'s fourth to sixth
/// arguments (the fourth is `val2`, a count, for the requeue and wake-op
/// operations; the sixth the bitset of the bitset ones).
///
/// # Safety
///
/// The arguments as futex(2) requires for `op`.
unsafe fn futex(
    word: *const AtomicU32,
    op: i32,
    val: u32,
    timeout: usize,
    word2: usize,
    val3: u32,
) -> Option<c_long> {
    let bitset = val3;
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
            // The rest of the count for OS threads sleeping in the kernel;
            // all of it if a carrier may be one of them (`queue`, "A
            // carrier waiting in the kernel beside emulated waiters").
            let left = match private && carriers_in_kernel(word as usize) {
                true => max,
                false => max - woken,
            };
            if left == 0 {
                return Some(woken as c_long);
            }
            // SAFETY: the caller's futex arguments, with a count no larger.
            let k = unsafe {
                sys::sc(
                    libc::SYS_futex,
                    [
                        word as usize,
                        op as usize,
                        left,
                        timeout,
                        0,
                        bitset as usize,
                    ],
                )
            };
            Some(merge(woken, k))
        }
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE if private => {
            let max_wake = val.min(i32::MAX as u32) as usize;
            let max_move = (timeout as u32).min(i32::MAX as u32) as usize;
            let check = (cmd == FUTEX_CMP_REQUEUE).then_some(val3);
            // SAFETY: the caller passes a live, aligned futex word.
            let Some((woken, moved)) = requeue(unsafe { &*word }, word2, max_wake, max_move, check)
            else {
                sys::set_errno(libc::EAGAIN);
                return Some(-1);
            };
            // The rest of both counts for OS threads in the kernel (the
            // whole wake count if a carrier may be one of them, as for
            // `FUTEX_WAKE`).
            let wake_left = match carriers_in_kernel(word as usize) {
                true => max_wake,
                false => max_wake - woken,
            };
            let args = [
                word as usize,
                op as usize,
                wake_left,
                max_move - moved,
                word2,
                val3 as usize,
            ];
            // SAFETY: the caller's futex arguments, with smaller counts.
            let k = unsafe { sys::sc(libc::SYS_futex, args) };
            Some(merge(woken + moved, k))
        }
        FUTEX_WAKE_OP if private => {
            let wop = WakeOp::decode(val3)?; // an unknown operation: the kernel's error
            let max1 = val.min(i32::MAX as u32) as usize;
            let max2 = (timeout as u32).min(i32::MAX as u32) as usize;
            // SAFETY: futex(2) requires both words to be live and aligned.
            let (w1, w2) = unsafe { (&*word, &*(word2 as *const AtomicU32)) };
            let (n1, n2, holds) = wake_op(w1, w2, wop, max1, max2);
            // The rest of each count for OS threads in the kernel (all of
            // it if a carrier may be one of them, as for `FUTEX_WAKE`):
            // plain wakes, the operation is done.
            let wake = (op & FUTEX_PRIVATE_FLAG) | FUTEX_WAKE;
            let mut total = (n1 + n2) as c_long;
            let rest = |w: usize, max: usize, n: usize| match carriers_in_kernel(w) {
                true => max,
                false => max - n,
            };
            for (w, left) in [
                (word as usize, rest(word as usize, max1, n1)),
                (word2, rest(word2, max2, n2)),
            ] {
                if left > 0 && (w == word as usize || holds) {
                    // SAFETY: a FUTEX_WAKE on a word the caller vouched for.
                    let k = unsafe { sys::sc(libc::SYS_futex, [w, wake as usize, left, 0, 0, 0]) };
                    total += k.max(0);
                }
            }
            Some(total)
        }
        FUTEX_WAIT | FUTEX_WAIT_BITSET if private => {
            let bits = if cmd == FUTEX_WAIT {
                BITSET_ALL
            } else {
                bitset
            };
            if bits == 0 || !may_park(0) {
                return None;
            }
            let deadline = match timeout {
                0 => None,
                // SAFETY: a non-null timeout points at a timespec (futex(2)).
                t => match deadline(unsafe { &*(t as *const libc::timespec) }, cmd, op) {
                    Ok(d) => d,
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

/// The result of an operation that `done` emulated waiters and then the
/// kernel (`k`: its count, or -1 with errno) took part in.
fn merge(done: usize, k: c_long) -> c_long {
    match k {
        ..0 if done > 0 => done as c_long,
        ..0 => k,
        _ => k + done as c_long,
    }
}

/// The instant a wait with this timeout ends: `None` when it lies beyond
/// what the clock can show (the kernel accepts any `tv_sec`; such a wait
/// never times out in practice); `Err`: the errno for a bad timespec.
fn deadline(ts: &libc::timespec, cmd: i32, op: i32) -> Result<Option<Instant>, i32> {
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(libc::EINVAL);
    }
    let d = Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
    if cmd == FUTEX_WAIT {
        return Ok(crate::clock::now().checked_add(d));
    }
    // Absolute, on the monotonic clock (Instant's) or the real-time one.
    let clock = if op & FUTEX_CLOCK_REALTIME != 0 {
        libc::CLOCK_REALTIME
    } else {
        libc::CLOCK_MONOTONIC
    };
    Ok(sys::instant_at(clock, d))
}

/// `FUTEX_REQUEUE`/`FUTEX_CMP_REQUEUE` for emulated waiters: wakes up to
/// `max_wake` waiters of `word` and moves up to `max_move` more to the
/// queue of `to`; `None` when `check` is given and `word` does not hold
/// it (checked under both buckets' locks, as the kernel checks under its
/// own). Returns (woken, moved).
fn requeue(
    word: &AtomicU32,
    to: usize,
    max_wake: usize,
    max_move: usize,
    check: Option<u32>,
) -> Option<(usize, usize)> {
    let from = word as *const AtomicU32 as usize;
    let mut woken = Vec::new();
    let mut moved = 0;
    {
        let mut pair = Pair::lock(from, to);
        if check.is_some_and(|v| word.load(Ordering::SeqCst) != v) {
            return None;
        }
        let (src, mut dst) = pair.lists();
        take(src, from, max_wake, BITSET_ALL, &mut woken);
        let mut i = 0;
        while i < src.len() && moved < max_move {
            // SAFETY: as in `take`: queued, and both locks are held.
            let w = unsafe { &*src[i] };
            if w.addr.load(Ordering::Relaxed) != from {
                i += 1;
                continue;
            }
            w.addr.store(to, Ordering::Relaxed);
            moved += 1;
            match dst.as_deref_mut() {
                Some(d) => d.push(src.remove(i)),
                None => i += 1,
            }
        }
    }
    Some((unpark_all(woken), moved))
}

/// `FUTEX_WAKE_OP`'s encoded operation (futex(2)).
#[derive(Clone, Copy)]
struct WakeOp {
    op: u32,
    oparg: u32,
    cmp: u32,
    cmparg: i32,
}

impl WakeOp {
    /// `None` for an operation or comparison the kernel does not know
    /// (it answers `ENOSYS`: the call goes to it).
    fn decode(v: u32) -> Option<WakeOp> {
        let sign12 = |x: u32| ((x << 20) as i32) >> 20;
        let op = (v >> 28) & 7;
        let cmp = (v >> 24) & 15;
        let mut oparg = sign12((v >> 12) & 0xfff) as u32;
        if v >> 31 != 0 {
            // FUTEX_OP_OPARG_SHIFT: the argument is a shift (the kernel
            // masks it to 0..=31).
            oparg = 1 << (oparg & 31);
        }
        (op <= 4 && cmp <= 5).then_some(WakeOp {
            op,
            oparg,
            cmp,
            cmparg: sign12(v & 0xfff),
        })
    }

    /// Applies the operation to `word`; returns whether the comparison
    /// holds for the old value.
    fn apply(self, word: &AtomicU32) -> bool {
        let arg = self.oparg;
        let old = word
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                Some(match self.op {
                    0 => arg,
                    1 => v.wrapping_add(arg),
                    2 => v | arg,
                    3 => v & !arg,
                    _ => v ^ arg,
                })
            })
            .unwrap_or_else(|v| v) as i32;
        let c = self.cmparg;
        match self.cmp {
            0 => old == c,
            1 => old != c,
            2 => old < c,
            3 => old <= c,
            4 => old > c,
            _ => old >= c,
        }
    }
}

/// `FUTEX_WAKE_OP` for emulated waiters: under both buckets' locks, the
/// operation on `w2`, then up to `max1` waiters of `w1` woken and, if the
/// comparison held, up to `max2` of `w2`. Returns (woken of `w1`, woken
/// of `w2`, whether the comparison held).
fn wake_op(
    w1: &AtomicU32,
    w2: &AtomicU32,
    op: WakeOp,
    max1: usize,
    max2: usize,
) -> (usize, usize, bool) {
    let (a1, a2) = (
        w1 as *const AtomicU32 as usize,
        w2 as *const AtomicU32 as usize,
    );
    let mut woken = Vec::new();
    let (n1, holds) = {
        let mut pair = Pair::lock(a1, a2);
        let holds = op.apply(w2);
        let (l1, l2) = pair.lists();
        let n1 = take(l1, a1, max1, BITSET_ALL, &mut woken);
        if holds {
            take(l2.unwrap_or(l1), a2, max2, BITSET_ALL, &mut woken);
        }
        (n1, holds)
    };
    let n = unpark_all(woken);
    (n1, n - n1, holds)
}

/// Parks the calling virtual thread while `word` holds `val`, until woken,
/// `deadline`, or spuriously. futex(2)'s return: 0, or -1 with errno.
fn wait(word: &AtomicU32, val: u32, bits: u32, deadline: Option<Instant>) -> c_long {
    let addr = word as *const AtomicU32 as usize;
    let r = park_queued(
        addr,
        bits,
        deadline,
        || word.load(Ordering::SeqCst) == val,
        || true,
        true,
        "futex",
    );
    match r {
        Queued::Changed => {
            sys::set_errno(libc::EAGAIN);
            -1
        }
        Queued::TimedOut => {
            sys::set_errno(libc::ETIMEDOUT);
            -1
        }
        Queued::Woken | Queued::Spurious => 0,
    }
}
