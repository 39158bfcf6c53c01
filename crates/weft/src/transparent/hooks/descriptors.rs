//! The descriptor table: `close`, `close_range`, `closefrom`, `fclose`,
//! `dup`, `dup2`, `dup3`, `fcntl`, `ioctl`, `socket` and `socketpair`.

use libc::{c_int, c_uint, c_ulong};

use crate::libc_next::{self, libc_own};
use crate::transparent::copies;
use crate::transparent::fds;
use crate::transparent::fork::forked;
use crate::transparent::state::{self, MANAGED, OTHER, UNKNOWN, USER_NB, state};
use crate::transparent::sys::{self, fail, raw};

/// # Safety
/// libc's `close(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn close(fd: c_int) -> c_int {
    fds::forget(fd);
    libc_own!(CLOSE(fd));
    raw!(libc::SYS_close, fd) as c_int
}

/// # Safety
/// glibc's `close_range(2)` contract (none: it takes numbers).
///
/// Closes descriptors behind the other hooks' back: they are forgotten
/// first (not with `CLOSE_RANGE_CLOEXEC`, which closes nothing yet, nor
/// with `CLOSE_RANGE_UNSHARE`, which closes them in a private copy of the
/// table only).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let keep = (libc::CLOSE_RANGE_CLOEXEC | libc::CLOSE_RANGE_UNSHARE) as c_int;
    if flags & keep == 0 {
        let top = c_int::try_from(last).unwrap_or(c_int::MAX);
        fds::forget_range(c_int::try_from(first).unwrap_or(c_int::MAX), top);
    }
    raw!(libc::SYS_close_range, first, last, flags) as c_int
}

/// # Safety
/// glibc's `closefrom(3)` contract (none).
///
/// Forgets every descriptor from `low` on, then calls glibc's (which
/// closes them with its internal `close_range`, not this one).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn closefrom(low: c_int) {
    fds::forget_range(low.max(0), c_int::MAX);
    if let Some(next) = libc_next::CLOSEFROM.resolve() {
        // SAFETY: forwarded.
        unsafe { next(low) };
    } else {
        raw!(libc::SYS_close_range, low.max(0), c_uint::MAX, 0);
    }
}

/// # Safety
/// libc's `fclose(3)` contract.
///
/// A stream's descriptor (an `fdopen`ed socket or pipe) is closed by
/// glibc's internal `close`, which no hook sees: it is forgotten first.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fclose(fp: *mut libc::FILE) -> c_int {
    if !fp.is_null() {
        // SAFETY: fclose's contract: `fp` is an open stream.
        let fd = unsafe { libc::fileno(fp) };
        if fd >= 0 {
            fds::forget(fd);
        }
    }
    let Some(next) = libc_next::FCLOSE.resolve() else {
        return fail(libc::ENOSYS) as c_int;
    };
    // SAFETY: forwarded with the caller's stream.
    unsafe { next(fp) }
}

/// `new` was made a copy of `old`: it shares `old`'s file description, so
/// Weft's view of it.
fn copy_state(old: c_int, new: c_int) {
    let st = state(old);
    if st == MANAGED || st == USER_NB {
        state::set_state(new, st);
    }
    copies::note_copy(old, new);
}

/// # Safety
/// libc's `dup(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup(old: c_int) -> c_int {
    let r = raw!(libc::SYS_dup, old) as c_int;
    if r >= 0 {
        fds::forget(r);
        copy_state(old, r);
    }
    r
}

/// # Safety
/// libc's `dup3(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    // `new` is forgotten (its poller registration removed) while it is
    // still open, so only if the call will replace it: a `dup3` that fails
    // leaves `new` as it was, and must leave Weft's view of it too (a
    // managed socket forgotten would read back as one the program made
    // non-blocking). What the kernel checks first, checked here: `old`
    // open, `new` in range, `old != new`, flags `O_CLOEXEC` at most.
    let valid = old != new
        && new >= 0
        && flags & !libc::O_CLOEXEC == 0
        && sys::fcntl(old, libc::F_GETFD, 0) >= 0;
    if valid {
        fds::forget(new);
    }
    let r = raw!(libc::SYS_dup3, old, new, flags) as c_int;
    if r >= 0 {
        // Before `exec` in a fork child (std's `Command` without
        // `posix_spawn`): the child program gets the blocking mode the
        // program set (`fds::hand_over`). Read without a lock: the child
        // takes none.
        if forked() && r <= 2 {
            fds::hand_over(r, state(old));
        }
        copy_state(old, r);
    }
    r
}

/// # Safety
/// libc's `dup2(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if old == new {
        return if sys::fcntl(old, libc::F_GETFD, 0) < 0 {
            -1
        } else {
            new
        };
    }
    // SAFETY: forwarded.
    unsafe { dup3(old, new, 0) }
}

/// `fcntl(fd, cmd, ...)`: the variadic argument is read as one word, which
/// is how the x86_64 and aarch64 Linux ABIs pass it.
///
/// # Safety
/// libc's `fcntl(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let st = if matches!(cmd, libc::F_GETFL | libc::F_SETFL) {
        fds::view(fd)
    } else {
        state(fd)
    };
    match cmd {
        libc::F_GETFL => {
            let r = sys::fcntl(fd, cmd, arg);
            if r >= 0 && st == MANAGED {
                r & !libc::O_NONBLOCK
            } else {
                r
            }
        }
        libc::F_SETFL if st == MANAGED || st == USER_NB => {
            let nb = arg as c_int & libc::O_NONBLOCK != 0;
            // The kernel's flag stays as it is unless the program sets it:
            // Weft's own, or cleared for a child (`fds::hand_over`), which
            // must not come back.
            let keep = if nb {
                libc::O_NONBLOCK
            } else {
                sys::fcntl(fd, libc::F_GETFL, 0).max(0) & libc::O_NONBLOCK
            };
            let r = sys::fcntl(
                fd,
                cmd,
                (arg & !(libc::O_NONBLOCK as usize)) | keep as usize,
            );
            if r == 0 {
                fds::set_shared_state(fd, if nb { USER_NB } else { MANAGED });
            }
            r
        }
        libc::F_SETFL => {
            let r = sys::fcntl(fd, cmd, arg);
            if st != OTHER {
                state::set_state(fd, UNKNOWN);
            }
            r
        }
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            let r = sys::fcntl(fd, cmd, arg);
            if r >= 0 {
                fds::forget(r);
                copy_state(fd, r);
            }
            r
        }
        _ => sys::fcntl(fd, cmd, arg),
    }
}

/// `ioctl(fd, request, ...)`, the variadic argument read as one word.
///
/// # Safety
/// libc's `ioctl(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: usize) -> c_int {
    #[allow(clippy::unnecessary_cast)]
    if req == libc::FIONBIO as c_ulong && arg != 0 {
        let st = fds::view(fd);
        // SAFETY: FIONBIO's argument points to an int.
        let nb = unsafe { *(arg as *const c_int) } != 0;
        if st == MANAGED || st == USER_NB {
            // The kernel's flag stays set; only what the program sees moves.
            if !nb && st == USER_NB && sys::file_type(fd) == Some(libc::S_IFSOCK) {
                fds::set_shared_state(fd, MANAGED);
            } else if nb {
                fds::set_shared_state(fd, USER_NB);
            }
            return 0;
        }
        let r = raw!(libc::SYS_ioctl, fd, req, arg) as c_int;
        if r == 0 && st != OTHER {
            state::set_state(fd, UNKNOWN);
        }
        return r;
    }
    raw!(libc::SYS_ioctl, fd, req, arg) as c_int
}

/// # Safety
/// libc's `socket(2)` contract (none).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, proto: c_int) -> c_int {
    if crate::sched::refuses_real_socket(domain) {
        return fail(libc::EACCES) as c_int;
    }
    let r = raw!(libc::SYS_socket, domain, ty, proto) as c_int;
    if r >= 0 {
        fds::forget(r);
        if ty & libc::SOCK_NONBLOCK != 0 {
            state::set_state(r, USER_NB);
        }
    }
    r
}

/// # Safety
/// libc's `socketpair(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socketpair(
    domain: c_int,
    ty: c_int,
    proto: c_int,
    sv: *mut c_int,
) -> c_int {
    let r = raw!(libc::SYS_socketpair, domain, ty, proto, sv) as c_int;
    if r == 0 {
        for k in 0..2 {
            // SAFETY: the kernel filled both slots.
            let fd = unsafe { *sv.add(k) };
            fds::forget(fd);
            if ty & libc::SOCK_NONBLOCK != 0 {
                state::set_state(fd, USER_NB);
            }
        }
    }
    r
}
