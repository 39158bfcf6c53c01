//! `waitpid`, and the descriptors a `posix_spawn`ed child is given.

use libc::c_int;

use crate::libc_next::{self, libc_own};
use crate::thread::Blocker;
use crate::transparent::fds::{self, on_virtual};
use crate::transparent::fork::forked;
use crate::transparent::sys::{self, fail, raw};
use crate::transparent::wait;

/// # Safety
/// libc's `waitpid(2)` contract.
///
/// A virtual thread that waits for a child (`std::process::Child::wait`,
/// `Command::status`) parks while an offload thread waits; `WNOHANG`
/// passes through.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn waitpid(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
) -> libc::pid_t {
    let op = || raw!(libc::SYS_wait4, pid, status, options, 0usize) as isize;
    libc_own!(
        WAITPID(pid, status, options) if options & libc::WNOHANG != 0 || !on_virtual(),
        else op() as libc::pid_t
    );
    // One child that can only exit (no WUNTRACED/WCONTINUED): park on a
    // pidfd for it, which reads ready once it has exited.
    if pid > 0 && options & (libc::WUNTRACED | libc::WCONTINUED) == 0 {
        let saved = sys::errno();
        let pidfd = raw!(libc::SYS_pidfd_open, pid, 0usize) as c_int;
        sys::set_errno(saved);
        if pidfd >= 0 {
            let nohang = options | libc::WNOHANG;
            let op = || {
                let r = raw!(libc::SYS_wait4, pid, status, nohang, 0usize) as libc::pid_t;
                (r != 0).then_some(r)
            };
            let b = Blocker::Call {
                call: "waitpid",
                fd: -1,
            };
            match wait::park_on_own(pidfd, None, b, "waitpid", op) {
                Some(Ok(r)) => return r,
                Some(Err(_)) => return fail(libc::EINTR) as libc::pid_t,
                None => {}
            }
        }
    }
    crate::transparent::count_park("waitpid");
    let mut op = op;
    let job = wait::Offloaded(&mut op);
    let (r, e) = crate::blocking::blocking_as(
        Blocker::Call {
            call: "waitpid",
            fd: -1,
        },
        move || job.run(),
    );
    sys::set_errno(e);
    r as libc::pid_t
}

/// # Safety
/// glibc's `posix_spawn_file_actions_adddup2(3)` contract.
///
/// The descriptor a child is given this way (std's `Command` stdio) gets
/// the blocking mode the program set, not the `O_NONBLOCK` Weft set for
/// itself (`fds::hand_over`). Done when the action is added, not at the
/// spawn: the file actions are opaque, and the parent's calls do not need
/// the flag.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_spawn_file_actions_adddup2(
    actions: *mut libc::posix_spawn_file_actions_t,
    fd: c_int,
    new: c_int,
) -> c_int {
    if !forked() {
        fds::hand_over(fd, fds::view(fd));
    }
    match libc_next::POSIX_SPAWN_FILE_ACTIONS_ADDDUP2.resolve() {
        // SAFETY: libc's own call, with the caller's arguments.
        Some(f) => unsafe { f(actions, fd, new) },
        None => libc::ENOSYS,
    }
}
