//! `pthread_cond_wait`, `pthread_cond_timedwait`, `pthread_cond_clockwait`,
//! `pthread_cond_signal` and `pthread_cond_broadcast`: a C condition
//! variable's wait parks the virtual thread, as Java unpins
//! `Object.wait()` (JEP 491).
//!
//! glibc waits for a condition variable in the kernel, through its own
//! futex calls (no hook sees them), so a virtual thread waiting there held
//! its carrier until it was signalled. With a C library's lock in the
//! middle that is a deadlock: embedded CPython's GIL is a mutex, a flag
//! and a condition variable; a thread holding the GIL parks (a socket read
//! in Rust code, say) while others wait for the GIL in
//! `pthread_cond_timedwait`, holding every carrier; the holder is runnable
//! and never gets one (issue 53: it hung on 2 carriers without spares).
//!
//! # How a wait parks
//!
//! On a virtual thread with thread-locals of its own, holding exactly one
//! C lock (the mutex it passes: `thread/native.rs` counts it) and no
//! `weft::pinned` section, a wait on a process-private condition variable:
//!
//! 1. queues the thread on the condition variable's key in the emulated
//!    queues (`queue.rs`: its address made odd), under the key's bucket
//!    lock;
//! 2. releases the mutex through `pthread_mutex_unlock` (so the count of
//!    held C locks drops to zero, and the thread may unmount);
//! 3. parks until a signal or broadcast takes it off the queue, its
//!    deadline, or spuriously (an interrupt; POSIX allows spurious
//!    wake-ups, and every caller re-checks its predicate);
//! 4. takes the mutex again through `pthread_mutex_lock` (counted again),
//!    and returns 0, `ETIMEDOUT`, or the lock's `EOWNERDEAD`.
//!
//! A signal wakes one queued virtual thread if there is one, else it is
//! glibc's (for OS threads waiting in glibc); a broadcast wakes every
//! queued virtual thread and then is glibc's. No wake-up is lost: the
//! waiter is queued before it releases the mutex, so a signaller that
//! changed the predicate under the mutex after the waiter checked it
//! finds the waiter queued (and a count of queued waiters, raised before
//! the enqueue, tells it to look: SeqCst on both sides, ordered by the
//! mutex besides). A signal made without the mutex after an unlocked
//! change of the predicate can be lost here as it can in glibc.
//!
//! # What still holds the carrier
//!
//! - Waits that cannot park go to glibc and hold the carrier as before:
//!   on an OS thread, inside a signal handler, in a `weft::pinned`
//!   section, while the thread holds another C lock besides the mutex
//!   (parking would let a second virtual thread of the carrier into that
//!   lock's critical section), on a runtime with carrier thread-locals,
//!   and on a process-shared condition variable (another process signals
//!   it through glibc, which cannot see this queue).
//! - Taking the mutex again after the wake, when another thread holds it,
//!   waits in the kernel: the holder is pinned to a carrier of its own
//!   while it holds it (`thread/native.rs`), so the wait is as long as its
//!   critical section. A contended `pthread_mutex_lock` in general, a
//!   `sem_wait`, and glibc's internal locks (stdio, malloc's arenas,
//!   the loader's) still wait in the kernel too; long waits there are
//!   reported by the monitor (stall, blocked-with-waiters, `Pinned`
//!   events) like any other call that holds a carrier.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use libc::{c_int, clockid_t, pthread_cond_t, pthread_mutex_t, timespec};

use crate::libc_next::libc_own;
use crate::transparent::queue::{BITSET_ALL, Queued, cond_key, may_park, park_queued, wake_key};
use crate::transparent::sys::{dur_of, instant_at};

/// Virtual threads queued on some condition variable now: a signal or
/// broadcast with none takes no bucket lock.
static QUEUED: AtomicUsize = AtomicUsize::new(0);

/// glibc's `__wrefs` word of a `pthread_cond_t` (glibc 2.25 and later,
/// x86_64 and AArch64): its low bits say whether the condition variable
/// is process-shared (1) and whether it times waits on the monotonic
/// clock (2).
const WREFS_OFFSET: usize = 36;
const WREFS_SHARED: u32 = 1;
const WREFS_MONOTONIC: u32 = 2;

/// glibc's flags of the condition variable at `c`.
///
/// # Safety
///
/// `c` points at an initialised `pthread_cond_t` (the caller's contract).
unsafe fn wrefs(c: *const pthread_cond_t) -> u32 {
    const _: () = assert!(size_of::<pthread_cond_t>() >= WREFS_OFFSET + 4);
    // SAFETY: the word lies inside the condition variable (above), which
    // glibc updates atomically: read it atomically.
    unsafe {
        (*c.cast::<u8>()
            .add(WREFS_OFFSET)
            .cast::<std::sync::atomic::AtomicU32>())
        .load(Ordering::Relaxed)
    }
}

/// Whether a wait on `c` with its mutex held parks the calling thread.
///
/// # Safety
///
/// As [`wrefs`].
unsafe fn parks(c: *const pthread_cond_t) -> bool {
    // SAFETY: the caller's.
    may_park(1) && unsafe { wrefs(c) } & WREFS_SHARED == 0
}

/// # Safety
/// libc's `pthread_cond_wait(3)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn pthread_cond_wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
) -> c_int {
    // SAFETY: the caller's contract.
    libc_own!(PTHREAD_COND_WAIT(c, m) if !unsafe { parks(c) });
    // SAFETY: as above.
    unsafe { wait(c, m, None) }
}

/// # Safety
/// libc's `pthread_cond_timedwait(3)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn pthread_cond_timedwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    abstime: *const timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    libc_own!(PTHREAD_COND_TIMEDWAIT(c, m, abstime) if abstime.is_null() || !unsafe { parks(c) });
    // SAFETY: as above.
    let clock = if unsafe { wrefs(c) } & WREFS_MONOTONIC != 0 {
        libc::CLOCK_MONOTONIC
    } else {
        libc::CLOCK_REALTIME
    };
    // SAFETY: non-null, the caller's timespec.
    match deadline(clock, unsafe { &*abstime }) {
        // SAFETY: as above.
        Ok(d) => unsafe { wait(c, m, d) },
        Err(e) => e,
    }
}

/// # Safety
/// libc's `pthread_cond_clockwait(3)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn pthread_cond_clockwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    clock: clockid_t,
    abstime: *const timespec,
) -> c_int {
    let known = matches!(clock, libc::CLOCK_MONOTONIC | libc::CLOCK_REALTIME);
    // SAFETY: the caller's contract.
    let parks = known && !abstime.is_null() && unsafe { parks(c) };
    libc_own!(PTHREAD_COND_CLOCKWAIT(c, m, clock, abstime) if !parks);
    // SAFETY: non-null, the caller's timespec.
    match deadline(clock, unsafe { &*abstime }) {
        // SAFETY: the caller's contract.
        Ok(d) => unsafe { wait(c, m, d) },
        Err(e) => e,
    }
}

/// # Safety
/// libc's `pthread_cond_signal(3)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int {
    if QUEUED.load(Ordering::SeqCst) > 0 && wake_key(cond_key(c as usize), 1) > 0 {
        return 0;
    }
    // SAFETY: glibc's function of this signature, the caller's argument.
    unsafe { crate::libc_next::PTHREAD_COND_SIGNAL.get_or_abort()(c) }
}

/// # Safety
/// libc's `pthread_cond_broadcast(3)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int {
    if QUEUED.load(Ordering::SeqCst) > 0 {
        wake_key(cond_key(c as usize), usize::MAX);
    }
    // SAFETY: glibc's function of this signature, the caller's argument.
    unsafe { crate::libc_next::PTHREAD_COND_BROADCAST.get_or_abort()(c) }
}

/// The instant `abstime` on `clock` is, on the runtime's clock; `Err`:
/// the errno of a bad timespec. A deadline the clock cannot show is none.
fn deadline(clock: clockid_t, abstime: &timespec) -> Result<Option<Instant>, c_int> {
    let at = dur_of(abstime).ok_or(libc::EINVAL)?;
    Ok(instant_at(clock, at))
}

/// The parking wait (module docs, "How a wait parks").
///
/// # Safety
///
/// libc's `pthread_cond_wait` contract: `c` and `m` are initialised, `m`
/// is locked by the calling thread.
unsafe fn wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    deadline: Option<Instant>,
) -> c_int {
    let key = cond_key(c as usize);
    let mut unlocked = 0;
    QUEUED.fetch_add(1, Ordering::SeqCst);
    let r = park_queued(
        key,
        BITSET_ALL,
        deadline,
        || true,
        || {
            // SAFETY: the caller's locked mutex, released through Weft's
            // definition (so its count of held C locks drops).
            unlocked = unsafe { libc::pthread_mutex_unlock(m) };
            unlocked == 0
        },
        false,
        "pthread_cond_wait",
    );
    QUEUED.fetch_sub(1, Ordering::SeqCst);
    if unlocked != 0 {
        // Not the caller's mutex to release (an error-checking one): as
        // glibc, fail without waiting. A signal that took us meanwhile
        // goes to the next waiter.
        if r == Queued::Woken {
            wake_key(key, 1);
        }
        return unlocked;
    }
    // SAFETY: the mutex released above, taken again through Weft's
    // definition (counted again).
    let locked = unsafe { libc::pthread_mutex_lock(m) };
    match (locked, r) {
        (0, Queued::TimedOut) => libc::ETIMEDOUT,
        (l, _) => l,
    }
}
