//! Weft's view of a program's descriptor: whether the caller may park,
//! what a descriptor is (`classify`: a socket Weft manages, one the
//! program made non-blocking, a pipe, anything else), and forgetting a
//! number that is closed or given to a new file.

use libc::c_int;

use super::copies;
use super::fork::forked;
use super::regs;
use super::state::{self, MANAGED, OTHER, PIPE, UNKNOWN, USER_NB, set_state, state};
use super::sys;

/// Whether the caller is a virtual thread whose hooked calls may park.
pub(crate) fn on_virtual() -> bool {
    if forked() {
        return false;
    }
    // Inside a signal handler every call goes to the kernel (no park, no
    // lock, no allocation: `signals.rs`); checked on virtual threads only.
    crate::thread::current_virtual().is_some() && !super::signals::in_handler() && super::enabled()
}

/// Classifies `fd` for a virtual thread's call, making a blocking socket
/// non-blocking in the kernel (state `MANAGED`). Raw syscalls only.
pub(super) fn classify(fd: c_int) -> u8 {
    let st = state(fd);
    if st != UNKNOWN || state::slot(fd).is_none() {
        return st;
    }
    if fd <= 2 {
        // Standard input, output and error, whatever they are (a journald
        // stream socket under systemd, a pipe): their file description is
        // shared with other processes, which must not see an `O_NONBLOCK`
        // Weft set, and std's stdio locks are re-entrant per *OS* thread,
        // so a `println!` that parked holding one would let another
        // virtual thread of the same carrier into it.
        set_state(fd, OTHER);
        return OTHER;
    }
    let saved = sys::errno();
    let new = match sys::file_type(fd) {
        Some(libc::S_IFIFO) => PIPE,
        Some(libc::S_IFSOCK) => {
            let fl = sys::fcntl(fd, libc::F_GETFL, 0);
            if fl < 0 {
                OTHER
            } else if fl & libc::O_NONBLOCK != 0 {
                // Weft's own flag if a copy of this socket is Weft's.
                match adopt(fd) {
                    UNKNOWN => USER_NB,
                    st => st,
                }
            } else if sys::fcntl(fd, libc::F_SETFL, (fl | libc::O_NONBLOCK) as usize) < 0 {
                OTHER
            } else {
                MANAGED
            }
        }
        Some(_) => OTHER,
        None => UNKNOWN, // bad descriptor: let the call itself fail
    };
    sys::set_errno(saved);
    if new != UNKNOWN {
        set_state(fd, new);
    }
    new
}

/// Forgets `fd` before it is closed (or replaced by `dup2`), or after the
/// kernel gave its number to a new file (`socket`, `accept`): wakes the
/// threads waiting on it (their retried call then fails with `EBADF`).
pub(super) fn forget(fd: c_int) {
    set_state(fd, UNKNOWN);
    copies::forget_copy(fd);
    regs::forget(fd);
}

/// Forgets every descriptor in `first..=last` (`close_range`,
/// `closefrom`): their states, and their registrations.
pub(super) fn forget_range(first: c_int, last: c_int) {
    if forked() || first < 0 || last < first {
        return;
    }
    let top = last.min(state::MAX_FDS as c_int - 1);
    for fd in first..=top {
        if state(fd) != UNKNOWN {
            set_state(fd, UNKNOWN);
        }
    }
    copies::forget_range(first, last);
    regs::forget_range(first, last);
}

/// For a descriptor Weft has no view of yet: the view of a copy of the
/// same socket that Weft manages or the program made non-blocking (the
/// kernel's `O_NONBLOCK` on it may be Weft's), recorded for `fd` too;
/// `UNKNOWN` if there is none.
pub(super) fn adopt(fd: c_int) -> u8 {
    let st = copies::copies_of(fd)
        .into_iter()
        .map(state)
        .find(|&st| st == MANAGED || st == USER_NB)
        .unwrap_or(UNKNOWN);
    if st != UNKNOWN {
        set_state(fd, st);
    }
    st
}

/// Weft's view of `fd`'s file description: a descriptor Weft has not
/// looked at takes the view of a copy of its socket Weft knows (`fcntl`,
/// `ioctl`, a hand-over).
pub(super) fn view(fd: c_int) -> u8 {
    match state(fd) {
        UNKNOWN => adopt(fd),
        st => st,
    }
}

/// `fd`, whose description the program sees as `view`, is handed to a
/// child process: a `dup2` onto 0, 1 or 2 in a fork child before `exec`,
/// or a `posix_spawn` file action (std's `Command` stdio). If the view is
/// blocking while the kernel's `O_NONBLOCK` is Weft's (`MANAGED`), the
/// kernel's flag is cleared, so that the child — a program that knows
/// nothing of Weft's view — gets the blocking descriptor the program set
/// (issue #38: a socket handed to `sh` as its stdin failed with `EAGAIN`).
///
/// The flag is one per open file description, which this process shares
/// with the child, so this process's description is blocking from then
/// on. Weft's own calls on it stay non-blocking without the flag: every
/// attempt of a read- or write-family call on a managed socket carries
/// `MSG_DONTWAIT` (`call.rs`, `sock_call`), and `fcntl(F_SETFL)` leaves
/// the kernel's flag as it is unless the program sets it. Keeps errno.
pub(super) fn hand_over(fd: c_int, view: u8) {
    if view != MANAGED {
        return;
    }
    let saved = sys::errno();
    let fl = sys::fcntl(fd, libc::F_GETFL, 0);
    if fl >= 0 && fl & libc::O_NONBLOCK != 0 {
        sys::fcntl(fd, libc::F_SETFL, (fl & !libc::O_NONBLOCK) as usize);
    }
    sys::set_errno(saved);
}

/// Records `st` (`MANAGED` or `USER_NB`) for `fd` and for every copy of its
/// socket: the program's `O_NONBLOCK` is one per file description.
pub(super) fn set_shared_state(fd: c_int, st: u8) {
    set_state(fd, st);
    for m in copies::copies_of(fd) {
        set_state(m, st);
    }
}
