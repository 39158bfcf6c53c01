//! C locks pin: a virtual thread that holds one keeps its carrier.
//!
//! # Why
//!
//! A C lock belongs to the OS thread that took it. glibc records a
//! `pthread_mutex_t`'s owner as the kernel thread id (which every virtual
//! thread of a carrier shares), a `FILE` lock's as the thread pointer, and
//! a waiter for any of them blocks in the kernel. So if a virtual thread
//! took one and then parked — a hooked `read` inside a C library's
//! critical section, a `weft::sleep` between a C library's `begin` and
//! `end` — a second virtual thread of the same carrier would either get
//! into the critical section too (a recursive or error-checking mutex sees
//! "its own" owner: two owners) or block the carrier in the kernel while
//! the owner, parked behind it, can never run again (a deadlock).
//!
//! Java has the same problem with native frames and solves it by pinning:
//! a virtual thread with a native frame on its stack does not unmount. We
//! apply that rule to C locks. Weft defines `pthread_mutex_lock` and its
//! kin (listed below); each calls glibc's and, when the lock was
//! taken on a virtual thread, counts it in the thread's `pin_depth`. While
//! the count is non-zero every wait of the thread holds its carrier — the
//! pinned park (`pinned.rs`: the carrier waits on its OS thread, is marked
//! blocked so a spare can come in, and the wait is recorded as a `Pinned`
//! event naming the C lock), a futex wait in the kernel, `weft::blocking`
//! in place — so no other virtual thread runs on that OS thread until the
//! lock is released. One owner, no deadlock with a parked owner.
//!
//! # What is counted, and what is not
//!
//! - Counted: the calls a program or a library makes through the dynamic
//!   linker (`pthread_mutex_{lock,trylock,timedlock,clocklock,unlock}`,
//!   `pthread_rwlock_{rdlock,tryrdlock,timedrdlock,clockrdlock}`,
//!   `pthread_rwlock_{wrlock,trywrlock,timedwrlock,clockwrlock,unlock}`,
//!   `pthread_spin_{lock,trylock,unlock}`, `flockfile`, `ftrylockfile`,
//!   `funlockfile`): a lock is counted when the call took it (`0`, or
//!   `EOWNERDEAD` for a robust mutex), uncounted when an unlock succeeded.
//! - Not counted, and not needed: glibc's own internal locks (`printf`'s
//!   stream lock, malloc's arenas) are taken through internal aliases and
//!   released before the call returns; no hooked call parks inside them.
//! - glibc's `pthread_cond_wait` waits in the kernel (the carrier is held
//!   while it waits) and gives the mutex back before it returns: the count
//!   is unchanged, which is right. With the `transparent` feature a
//!   virtual thread's wait parks instead (`transparent/hooks/cond.rs`):
//!   it releases and retakes the mutex through the functions here, so the
//!   count drops to zero while it is parked.
//! - Releasing a lock the thread does not hold is undefined for C; the
//!   count never goes below zero.
//!
//! - Waited for: a blocking lock call on a virtual thread tries the
//!   non-blocking variant first (`pthread_mutex_trylock`,
//!   `pthread_rwlock_tryrdlock`/`trywrlock`, `ftrylockfile`); if the lock
//!   is taken it waits with its carrier's blocking section open
//!   (`thread::hold_carrier`), so the carrier's other threads run
//!   elsewhere from the start of the wait. Spin locks spin in user space
//!   and are called as they are.
//!
//! The cost is one load of the mounted record and, on a virtual thread,
//! an add on `pin_depth`: a few nanoseconds on a lock/unlock pair
//! (`tests-transparent/examples/hook_cost.rs`).

use super::record::VThread;

/// What one held C lock adds to `VThread::pin_depth`: the upper half
/// counts C locks, the lower half `weft::pinned` sections, so that either
/// pins and neither can undo the other.
pub(crate) const C_LOCK: u32 = 1 << 16;

/// How many C locks the thread holds.
pub(crate) fn c_locks_held(thread: &VThread) -> u32 {
    thread.pin_depth.get() / C_LOCK
}

/// The definitions: glibc only (the interposed names and results are
/// glibc's).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    use libc::c_int;

    use super::super::current::current_virtual_no_switch as current_virtual;
    use super::C_LOCK;

    #[inline]
    fn acquired() {
        if let Some(t) = current_virtual() {
            t.pin_depth.set(t.pin_depth.get() + C_LOCK);
        }
    }

    #[inline]
    fn released() {
        if let Some(t) = current_virtual() {
            let d = t.pin_depth.get();
            if d >= C_LOCK {
                t.pin_depth.set(d - C_LOCK);
            }
        }
    }

    /// Takes a lock that may wait in the kernel: on a virtual thread,
    /// `try_lock` first (`None`: the lock is taken by someone else), and if
    /// that fails, `lock` with the carrier's blocking section open
    /// (`thread::hold_carrier`): the carrier's other threads run elsewhere
    /// while it waits, from the start of the wait rather than when the
    /// monitor finds it held past the stall threshold. An uncontended lock
    /// costs the same one atomic instruction either way.
    #[inline]
    fn lock_or_wait<R>(try_lock: impl FnOnce() -> Option<R>, lock: impl FnOnce() -> R) -> R {
        if current_virtual().is_none() {
            return lock();
        }
        if let Some(r) = try_lock() {
            return r;
        }
        let _section = crate::thread::hold_carrier();
        lock()
    }

    /// Defines each C lock function: glibc's (`libc_next::$next`), then
    /// count what it took or released. `$kind`: which results mean "the
    /// lock is held now" or "released". `waits after $try`: a call that
    /// may wait, tried first with the non-blocking `$try` on its first
    /// argument ([`lock_or_wait`]; `EBUSY` means taken).
    macro_rules! lock_hooks {
        ($(
            $kind:ident fn $name:ident($first:ident: $fty:ty $(, $arg:ident: $ty:ty)*) -> $ret:ty
                = $next:ident $(waits after $try:ident)?;
        )*) => {
            $(
                #[doc = concat!("`", stringify!($name), "`: glibc's, counted (see the module docs).")]
                ///
                /// # Safety
                ///
                /// As glibc's.
                #[unsafe(no_mangle)]
                pub unsafe extern "C" fn $name($first: $fty $(, $arg: $ty)*) -> $ret {
                    let real = crate::libc_next::$next.get_or_abort();
                    // SAFETY: forwarded unchanged.
                    let call = || unsafe { real($first $(, $arg)*) };
                    $(
                        let try_real = crate::libc_next::$try.get_or_abort();
                        let call = || lock_or_wait(
                            || {
                                // SAFETY: the lock the caller passed, as
                                // glibc's blocking call would take it.
                                let t = unsafe { try_real($first) };
                                (t != libc::EBUSY).then_some(t)
                            },
                            call,
                        );
                    )?
                    let r = call();
                    lock_hooks!(@count $kind r);
                    r
                }
            )*
        };
        (@count lock $r:ident) => {
            if $r == 0 || $r == libc::EOWNERDEAD {
                acquired();
            }
        };
        (@count unlock $r:ident) => {
            if $r == 0 {
                released();
            }
        };
        (@count file_trylock $r:ident) => {
            if $r == 0 {
                acquired();
            }
        };
        (@count file_unlock $r:ident) => {
            let () = $r;
            released();
        };
    }

    /// `flockfile`: glibc's, counted (see the module docs); a `FILE` lock
    /// another thread holds is waited for as [`lock_or_wait`] says.
    ///
    /// # Safety
    ///
    /// As glibc's.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn flockfile(f: *mut libc::FILE) {
        let real = crate::libc_next::FLOCKFILE.get_or_abort();
        let try_real = crate::libc_next::FTRYLOCKFILE.get_or_abort();
        lock_or_wait(
            // SAFETY: the stream the caller passed, as `flockfile` takes it.
            || (unsafe { try_real(f) } == 0).then_some(()),
            // SAFETY: forwarded unchanged.
            || unsafe { real(f) },
        );
        acquired();
    }

    type Mutex = *mut libc::pthread_mutex_t;
    type RwLock = *mut libc::pthread_rwlock_t;
    type Spin = *mut libc::pthread_spinlock_t;
    type Ts = *const libc::timespec;
    type File = *mut libc::FILE;

    lock_hooks! {
        lock fn pthread_mutex_lock(m: Mutex) -> c_int = PTHREAD_MUTEX_LOCK waits after PTHREAD_MUTEX_TRYLOCK;
        lock fn pthread_mutex_trylock(m: Mutex) -> c_int = PTHREAD_MUTEX_TRYLOCK;
        lock fn pthread_mutex_timedlock(m: Mutex, t: Ts) -> c_int = PTHREAD_MUTEX_TIMEDLOCK waits after PTHREAD_MUTEX_TRYLOCK;
        lock fn pthread_mutex_clocklock(m: Mutex, c: libc::clockid_t, t: Ts) -> c_int = PTHREAD_MUTEX_CLOCKLOCK waits after PTHREAD_MUTEX_TRYLOCK;
        unlock fn pthread_mutex_unlock(m: Mutex) -> c_int = PTHREAD_MUTEX_UNLOCK;
        lock fn pthread_rwlock_rdlock(l: RwLock) -> c_int = PTHREAD_RWLOCK_RDLOCK waits after PTHREAD_RWLOCK_TRYRDLOCK;
        lock fn pthread_rwlock_tryrdlock(l: RwLock) -> c_int = PTHREAD_RWLOCK_TRYRDLOCK;
        lock fn pthread_rwlock_timedrdlock(l: RwLock, t: Ts) -> c_int = PTHREAD_RWLOCK_TIMEDRDLOCK waits after PTHREAD_RWLOCK_TRYRDLOCK;
        lock fn pthread_rwlock_clockrdlock(l: RwLock, c: libc::clockid_t, t: Ts) -> c_int = PTHREAD_RWLOCK_CLOCKRDLOCK waits after PTHREAD_RWLOCK_TRYRDLOCK;
        lock fn pthread_rwlock_wrlock(l: RwLock) -> c_int = PTHREAD_RWLOCK_WRLOCK waits after PTHREAD_RWLOCK_TRYWRLOCK;
        lock fn pthread_rwlock_trywrlock(l: RwLock) -> c_int = PTHREAD_RWLOCK_TRYWRLOCK;
        lock fn pthread_rwlock_timedwrlock(l: RwLock, t: Ts) -> c_int = PTHREAD_RWLOCK_TIMEDWRLOCK waits after PTHREAD_RWLOCK_TRYWRLOCK;
        lock fn pthread_rwlock_clockwrlock(l: RwLock, c: libc::clockid_t, t: Ts) -> c_int = PTHREAD_RWLOCK_CLOCKWRLOCK waits after PTHREAD_RWLOCK_TRYWRLOCK;
        unlock fn pthread_rwlock_unlock(l: RwLock) -> c_int = PTHREAD_RWLOCK_UNLOCK;
        lock fn pthread_spin_lock(l: Spin) -> c_int = PTHREAD_SPIN_LOCK;
        lock fn pthread_spin_trylock(l: Spin) -> c_int = PTHREAD_SPIN_TRYLOCK;
        unlock fn pthread_spin_unlock(l: Spin) -> c_int = PTHREAD_SPIN_UNLOCK;
        file_trylock fn ftrylockfile(f: File) -> c_int = FTRYLOCKFILE;
        file_unlock fn funlockfile(f: File) -> () = FUNLOCKFILE;
    }
}
