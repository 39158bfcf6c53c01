//! `nanosleep`, `clock_nanosleep`, `usleep` and `sleep`.

use std::time::Duration;

use libc::{c_int, c_uint, timespec};

use crate::libc_next::libc_own;
use crate::transparent::fds::on_virtual;
use crate::transparent::sys::{self, dur_of, fail, raw, raw_nanosleep, ts_of};
use crate::transparent::wait::vsleep;

/// # Safety
/// libc's `nanosleep(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
    libc_own!(NANOSLEEP(req, rem) if !on_virtual() || req.is_null(), else raw_nanosleep(req, rem));
    // SAFETY: req is non-null and valid (nanosleep's contract).
    let Some(d) = dur_of(unsafe { &*req }) else {
        return fail(libc::EINVAL) as c_int;
    };
    match vsleep(d, "nanosleep") {
        Ok(()) => 0,
        Err(left) => {
            if !rem.is_null() {
                // SAFETY: a non-null rem is writable (nanosleep's contract).
                unsafe { *rem = ts_of(left) };
            }
            fail(libc::EINTR) as c_int
        }
    }
}

/// The longest a virtual thread sleeps toward an absolute
/// `CLOCK_REALTIME` deadline before it reads the clock again.
const REALTIME_SLICE: Duration = Duration::from_secs(1);

/// # Safety
/// libc's `clock_nanosleep(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn clock_nanosleep(
    clock: libc::clockid_t,
    flags: c_int,
    req: *const timespec,
    rem: *mut timespec,
) -> c_int {
    let saved = sys::errno();
    let known = matches!(
        clock,
        libc::CLOCK_MONOTONIC | libc::CLOCK_REALTIME | libc::CLOCK_BOOTTIME
    );
    libc_own!(
        CLOCK_NANOSLEEP(clock, flags, req, rem) if !known || req.is_null() || !on_virtual(),
        else {
            let r = raw!(libc::SYS_clock_nanosleep, clock, flags, req, rem) as c_int;
            let e = if r < 0 { sys::errno() } else { 0 };
            sys::set_errno(saved);
            e
        }
    );
    // SAFETY: req is non-null and valid.
    let Some(mut d) = dur_of(unsafe { &*req }) else {
        return libc::EINVAL;
    };
    let abs = flags & libc::TIMER_ABSTIME != 0;
    let now = || {
        let mut now = timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime (vDSO, not hooked) into a local.
        unsafe { libc::clock_gettime(clock, &mut now) };
        dur_of(&now).unwrap_or_default()
    };
    if abs && clock == libc::CLOCK_REALTIME {
        // An absolute real-time deadline follows the clock: the time left
        // is read again after each slice of at most `REALTIME_SLICE`, so a
        // clock set back sleeps on until the deadline, and one set forward
        // past it ends the sleep within a slice (the kernel's ends at
        // once).
        let deadline = d;
        loop {
            let left = deadline.saturating_sub(now());
            if left.is_zero() {
                return 0;
            }
            if vsleep(left.min(REALTIME_SLICE), "clock_nanosleep").is_err() {
                return libc::EINTR;
            }
        }
    }
    if abs {
        d = d.saturating_sub(now());
    }
    match vsleep(d, "clock_nanosleep") {
        Ok(()) => 0,
        Err(left) => {
            if !abs && !rem.is_null() {
                // SAFETY: a non-null rem is writable.
                unsafe { *rem = ts_of(left) };
            }
            libc::EINTR
        }
    }
}

/// # Safety
/// libc's `usleep(3)` contract (none).
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn usleep(us: libc::useconds_t) -> c_int {
    let d = Duration::from_micros(us as u64);
    libc_own!(USLEEP(us) if !on_virtual(), else raw_nanosleep(&ts_of(d), std::ptr::null_mut()));
    match vsleep(d, "usleep") {
        Ok(()) => 0,
        Err(_) => fail(libc::EINTR) as c_int,
    }
}

/// # Safety
/// libc's `sleep(3)` contract (none).
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn sleep(secs: c_uint) -> c_uint {
    let d = Duration::from_secs(secs as u64);
    libc_own!(
        SLEEP(secs) if !on_virtual(),
        else {
            let ts = ts_of(d);
            let mut rem = ts_of(Duration::ZERO);
            if raw_nanosleep(&ts, &mut rem) < 0 {
                (rem.tv_sec + (rem.tv_nsec > 0) as libc::time_t) as c_uint
            } else {
                0
            }
        }
    );
    match vsleep(d, "sleep") {
        Ok(()) => 0,
        Err(left) => (left.as_secs() + (left.subsec_nanos() > 0) as u64) as c_uint,
    }
}
