//! Raw system calls: how the hooks reach the kernel without calling
//! themselves. `libc::syscall` is glibc's generic entry, which is not
//! hooked; it sets `errno` like the named wrappers do.

use libc::{c_int, c_long, socklen_t};
use std::time::Duration;

pub(super) fn errno() -> c_int {
    // SAFETY: `__errno_location` returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

pub(super) fn set_errno(e: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = e }
}

/// `syscall(n, a...)` with up to six word arguments.
///
/// # Safety
///
/// The arguments must be valid for system call `n` (pointers to memory
/// the kernel may read or write as that call specifies).
pub(super) unsafe fn sc(n: c_long, a: [usize; 6]) -> c_long {
    // SAFETY: the caller's contract.
    unsafe { libc::syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]) }
}

macro_rules! raw {
    ($n:expr $(, $a:expr)*) => {{
        let mut v = [0usize; 6];
        let args: &[usize] = &[$($a as usize),*];
        v[..args.len()].copy_from_slice(args);
        // SAFETY: forwarded from the hook's own (unsafe) caller contract.
        unsafe { $crate::transparent::sys::sc($n, v) }
    }};
}
pub(super) use raw;

pub(super) fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    raw!(libc::SYS_fcntl, fd, cmd, arg) as c_int
}

/// The file type bits (`st_mode & S_IFMT`) of `fd`; `None` for a bad
/// descriptor. Raw `fstat`.
pub(super) fn file_type(fd: c_int) -> Option<libc::mode_t> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    let r = raw!(libc::SYS_fstat, fd, st.as_mut_ptr());
    if r < 0 {
        return None;
    }
    // SAFETY: fstat succeeded and filled the struct.
    let st = unsafe { st.assume_init() };
    Some(st.st_mode & libc::S_IFMT)
}

/// `SO_RCVTIMEO` (read) or `SO_SNDTIMEO` (write) of a socket; `None` for
/// none (zero) or on error.
pub(super) fn sock_timeout(fd: c_int, read: bool) -> Option<Duration> {
    let mut tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    let mut len = std::mem::size_of::<libc::timeval>() as socklen_t;
    let opt = if read {
        libc::SO_RCVTIMEO
    } else {
        libc::SO_SNDTIMEO
    };
    let saved = errno();
    let r = raw!(
        libc::SYS_getsockopt,
        fd,
        libc::SOL_SOCKET,
        opt,
        &mut tv as *mut libc::timeval,
        &mut len as *mut socklen_t
    );
    set_errno(saved);
    if r < 0 || (tv.tv_sec == 0 && tv.tv_usec == 0) {
        return None;
    }
    Some(Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000))
}

/// `SO_ERROR` of a socket (0 if none or on error).
pub(super) fn so_error(fd: c_int) -> c_int {
    let mut e: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    let r = raw!(
        libc::SYS_getsockopt,
        fd,
        libc::SOL_SOCKET,
        libc::SO_ERROR,
        &mut e as *mut c_int,
        &mut len as *mut socklen_t
    );
    if r < 0 { errno() } else { e }
}

/// Blocks the OS thread until `fd` has `events` or `timeout` passes:
/// 1 ready, 0 timed out, -1 error (errno set).
pub(super) fn poll_one(fd: c_int, events: i16, timeout: Option<Duration>) -> c_int {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    raw!(
        libc::SYS_ppoll,
        &mut p as *mut libc::pollfd,
        1usize,
        tsp,
        0usize,
        0usize
    ) as c_int
}
