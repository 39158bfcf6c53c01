//! What a simulation's threads see of time and entropy through libc
//! (`crate::sim`): `clock_gettime` (and with it `Instant::now`,
//! `SystemTime::now`), `gettimeofday` and `time` read the simulation's virtual clock, and
//! `getrandom` (with it `HashMap`'s keys and most seeded generators) draws
//! from the simulation's seed. Everywhere else both are libc's own calls,
//! after one relaxed load (`clock::any_virtual`).
//!
//! An OS thread started from a simulation's thread (`std::thread::spawn`,
//! `pthread_create`) would run outside it, on real time and its own
//! schedule: Weft's `pthread_create` (`sched/starter.rs`) fails there with
//! `EPERM` (`sched/sim.rs`, `refuse_os_thread`), and says why on stderr
//! once (`weft::spawn` is the simulated way).
//!
//! Sleeps need no hook of their own here: `nanosleep` and friends park a
//! virtual thread until a deadline read from `clock::now()`, which is
//! virtual in a simulation.

use libc::{c_int, c_uint, c_void, clockid_t, size_t, ssize_t, timespec, timeval};

use crate::libc_next;

/// # Safety
/// libc's `clock_gettime(2)` contract: `tp` points to a writable timespec.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clock_gettime(clock: clockid_t, tp: *mut timespec) -> c_int {
    if crate::clock::any_virtual()
        && let Some(d) = crate::clock::virtual_reading(clock)
    {
        if tp.is_null() {
            // SAFETY: errno is this thread's.
            unsafe { *libc::__errno_location() = libc::EFAULT };
            return -1;
        }
        // SAFETY: the caller's timespec (contract).
        unsafe {
            *tp = timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            }
        };
        return 0;
    }
    match libc_next::CLOCK_GETTIME.get() {
        // SAFETY: libc's own call (the vDSO), with the caller's arguments.
        Some(f) => unsafe { f(clock, tp) },
        // SAFETY: as above, as a system call (before the constructor ran).
        None => unsafe { libc::syscall(libc::SYS_clock_gettime, clock, tp) as c_int },
    }
}

/// # Safety
/// libc's `gettimeofday(2)` contract: `tv` is null or points to a
/// writable timeval (`tz` is obsolete and passed on untouched).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gettimeofday(tv: *mut timeval, tz: *mut c_void) -> c_int {
    if crate::clock::any_virtual()
        && let Some(d) = crate::clock::virtual_reading(libc::CLOCK_REALTIME)
    {
        if !tv.is_null() {
            // SAFETY: the caller's timeval (contract).
            unsafe {
                *tv = timeval {
                    tv_sec: d.as_secs() as libc::time_t,
                    tv_usec: d.subsec_micros() as libc::suseconds_t,
                }
            };
        }
        return 0;
    }
    match libc_next::GETTIMEOFDAY.get() {
        // SAFETY: libc's own call, with the caller's arguments.
        Some(f) => unsafe { f(tv, tz) },
        // SAFETY: as above, as a system call.
        None => unsafe { libc::syscall(libc::SYS_gettimeofday, tv, tz) as c_int },
    }
}

/// # Safety
/// libc's `time(2)` contract: `tloc` is null or points to a writable
/// `time_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn time(tloc: *mut libc::time_t) -> libc::time_t {
    if crate::clock::any_virtual()
        && let Some(d) = crate::clock::virtual_reading(libc::CLOCK_REALTIME)
    {
        let t = d.as_secs() as libc::time_t;
        if !tloc.is_null() {
            // SAFETY: the caller's time_t (contract).
            unsafe { *tloc = t };
        }
        return t;
    }
    match libc_next::TIME.get() {
        // SAFETY: libc's own call, with the caller's argument.
        Some(f) => unsafe { f(tloc) },
        // SAFETY: as above, as a system call.
        None => unsafe { libc::syscall(libc::SYS_time, tloc) as libc::time_t },
    }
}

/// # Safety
/// libc's `getrandom(2)` contract: `buf` points to `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getrandom(buf: *mut c_void, len: size_t, flags: c_uint) -> ssize_t {
    if crate::clock::is_virtual()
        && let Some(sim) = crate::sched::simulation()
    {
        // Seeded: the same bytes for the same seed and schedule.
        let mut at = 0;
        while at < len {
            let word = sim.random(crate::sched::Stream::Program).to_le_bytes();
            let n = word.len().min(len - at);
            // SAFETY: `at + n <= len` bytes of the caller's buffer.
            unsafe { std::ptr::copy_nonoverlapping(word.as_ptr(), buf.cast::<u8>().add(at), n) };
            at += n;
        }
        return len as ssize_t;
    }
    match libc_next::GETRANDOM.get() {
        // SAFETY: libc's own call, with the caller's arguments.
        Some(f) => unsafe { f(buf, len, flags) },
        // SAFETY: as above, as a system call.
        None => unsafe { libc::syscall(libc::SYS_getrandom, buf, len, flags) as ssize_t },
    }
}
