//! Raw system calls: how the hooks reach the kernel without calling
//! themselves. `libc::syscall` is glibc's generic entry, which is not
//! hooked; it sets `errno` like the named wrappers do.

use libc::{c_int, c_long, socklen_t, timespec};
use std::time::Duration;

/// The calling OS thread's `errno` ([`crate::errno`]: safe to keep across
/// a park, which a hook may make between reading and restoring it).
pub(super) fn errno() -> c_int {
    crate::errno::get()
}

/// Sets the calling OS thread's `errno` (as [`errno`]).
pub(super) fn set_errno(e: c_int) {
    crate::errno::set(e)
}

/// `syscall(n, a...)` with up to six word arguments: -1 and `errno` on
/// failure, like glibc's `syscall(2)`.
///
/// On x86-64 and AArch64 the instruction is issued inline: glibc's generic
/// `syscall` is a variadic call that shuffles all seven registers, and the
/// hooks' promise is that a call on an OS thread costs next to nothing over
/// libc's own wrapper (`examples/hook_cost.rs` in `tests-transparent/`
/// measures it). Elsewhere, glibc's `syscall`.
///
/// # Safety
///
/// The arguments must be valid for system call `n` (pointers to memory
/// the kernel may read or write as that call specifies).
#[inline]
pub(super) unsafe fn sc(n: c_long, a: [usize; 6]) -> c_long {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        // SAFETY: the caller's contract; the instruction clobbers only what
        // `inline_syscall` declares.
        let r = unsafe { inline_syscall(n, a) };
        // The kernel returns -errno in [-4095, -1] on failure.
        if (-4095..0).contains(&r) {
            set_errno(-r as c_int);
            -1
        } else {
            r
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    // SAFETY: the caller's contract.
    unsafe {
        libc::syscall(n, a[0], a[1], a[2], a[3], a[4], a[5])
    }
}

/// The raw instruction: the kernel's return value, -errno on failure.
///
/// # Safety
///
/// As [`sc`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn inline_syscall(n: c_long, a: [usize; 6]) -> c_long {
    let r: c_long;
    // SAFETY: the x86-64 Linux system call convention: number in rax,
    // arguments in rdi, rsi, rdx, r10, r8, r9; the kernel returns in rax and
    // clobbers rcx and r11. Memory is not declared untouched (the kernel
    // writes the caller's buffers), which is asm!'s default.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") n => r,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    r
}

/// The raw instruction: the kernel's return value, -errno on failure.
///
/// # Safety
///
/// As [`sc`].
#[cfg(target_arch = "aarch64")]
#[inline(always)]
unsafe fn inline_syscall(n: c_long, a: [usize; 6]) -> c_long {
    let r: c_long;
    // SAFETY: the AArch64 Linux system call convention: number in x8,
    // arguments in x0..x5, result in x0; `svc 0` clobbers nothing else.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") n,
            inlateout("x0") a[0] as c_long => r,
            in("x1") a[1],
            in("x2") a[2],
            in("x3") a[3],
            in("x4") a[4],
            in("x5") a[5],
        );
    }
    r
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

/// What identifies the file open on a descriptor: its type bits, device
/// and inode (`None` for a bad descriptor). Raw `fstat`; keeps errno.
pub(super) fn file_id(fd: c_int) -> Option<(libc::mode_t, u64, u64)> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    let saved = errno();
    let r = raw!(libc::SYS_fstat, fd, st.as_mut_ptr());
    set_errno(saved);
    if r < 0 {
        return None;
    }
    // SAFETY: fstat succeeded and filled the struct.
    let st = unsafe { st.assume_init() };
    Some((st.st_mode & libc::S_IFMT, st.st_dev, st.st_ino))
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

/// An `int` option of a socket at `SOL_SOCKET` (`SO_TYPE`, `SO_DOMAIN`);
/// `None` on error (not a socket, a bad descriptor). Keeps errno.
pub(super) fn socket_int(fd: c_int, opt: c_int) -> Option<c_int> {
    let mut v: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    let saved = errno();
    let r = raw!(
        libc::SYS_getsockopt,
        fd,
        libc::SOL_SOCKET,
        opt,
        &mut v as *mut c_int,
        &mut len as *mut socklen_t
    );
    set_errno(saved);
    (r == 0).then_some(v)
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
    poll_one_via(fd, events, timeout, |p, tsp| {
        raw!(libc::SYS_ppoll, p, 1usize, tsp, 0usize, 0usize) as c_int
    })
}

/// [`poll_one`] through `ppoll`, a function given the one `pollfd` and the
/// timeout (null for none) that this builds on its stack.
pub(super) fn poll_one_via(
    fd: c_int,
    events: i16,
    timeout: Option<Duration>,
    ppoll: impl FnOnce(*mut libc::pollfd, *const libc::timespec) -> c_int,
) -> c_int {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let tsp = crate::clock::timespec_ptr(timeout, &mut ts);
    ppoll(&mut p, tsp)
}

/// A raw call's result: `Some` unless it failed with `EAGAIN`.
pub(super) fn unless_eagain(r: isize) -> Option<isize> {
    if r < 0 {
        let e = errno();
        if e == libc::EAGAIN || e == libc::EWOULDBLOCK {
            return None;
        }
    }
    Some(r)
}

pub(super) fn fail(e: c_int) -> isize {
    set_errno(e);
    -1
}

pub(super) fn ts_of(d: Duration) -> timespec {
    timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

pub(super) fn dur_of(ts: &timespec) -> Option<Duration> {
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return None;
    }
    Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// The instant of the runtime's clock (`clock::now`'s) at which `clock`
/// will read `at`: an absolute timeout on `clock` made a deadline. `None`
/// when it lies beyond what the clock can show (no deadline in practice).
pub(super) fn instant_at(clock: libc::clockid_t, at: Duration) -> Option<std::time::Instant> {
    let now = crate::clock::now();
    let mut cur = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(clock, &mut cur) };
    let cur = Duration::new(
        cur.tv_sec.max(0) as u64,
        cur.tv_nsec.clamp(0, 999_999_999) as u32,
    );
    now.checked_add(at.saturating_sub(cur))
}

pub(super) fn raw_nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
    raw!(libc::SYS_nanosleep, req, rem) as c_int
}
