//! What to do about a blocked carrier: the cure an event names, read from
//! its stack or its system call.

#[cfg(doc)]
use super::event::Event;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

/// What to do about the blocking call that held a carrier, told from the
/// call itself ([`Event::cure`]): the innermost frame of the event's stack
/// that says what it waits for, or else the system call the carrier's OS
/// thread sleeps in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cure {
    /// A sleep (`std::thread::sleep`, `nanosleep`, `clock_nanosleep`): use
    /// `weft::sleep`.
    Sleep,
    /// Blocking I/O or another system call (`std::net`, `std::io`,
    /// `std::fs`, libc): the `transparent` feature, weft's own sockets and
    /// files, or `weft::blocking`.
    Transparent,
    /// An OS-level lock (a futex: `std::sync`, `parking_lot`, a condition
    /// variable, `pthread_mutex`): `weft::sync`.
    Lock,
}

impl Cure {
    /// The advice, in one sentence.
    pub fn advice(self) -> &'static str {
        match self {
            Cure::Sleep => {
                "use weft::sleep (std::thread::sleep blocks the carrier and every \
                 virtual thread bound to it; weft::sleep parks only this one)"
            }
            Cure::Transparent if transparent_off() => {
                "the `transparent` hooks are off (WEFT_TRANSPARENT=0): unset it, or use \
                 weft::net / weft::fs, or wrap the call in weft::blocking"
            }
            Cure::Transparent if cfg!(feature = "transparent") => {
                "use weft::net / weft::fs, or wrap the call in weft::blocking (the \
                 `transparent` hooks do not cover this call)"
            }
            Cure::Transparent => {
                "build weft with the `transparent` feature (blocking std::net, std::io \
                 and libc calls then park the virtual thread), or use weft::net / \
                 weft::fs, or wrap the call in weft::blocking"
            }
            Cure::Lock => {
                "use weft::sync locks and condition variables (a std::sync or parking_lot \
                 lock blocks the carrier, and one held across a weft blocking call can \
                 deadlock it)"
            }
        }
    }
}

/// Set by the `transparent` hooks when they find themselves turned off
/// (`WEFT_TRANSPARENT=0`): events is a sink that names nothing above it,
/// so the hooks tell it rather than it asking them.
pub(super) static TRANSPARENT_OFF: AtomicBool = AtomicBool::new(false);

/// Records that the `transparent` hooks are built in and turned off at
/// run time: a cure that names them says so.
#[cfg_attr(not(feature = "transparent"), allow(dead_code))]
pub(crate) fn note_transparent_off() {
    TRANSPARENT_OFF.store(true, Ordering::Relaxed);
}

/// Built with the `transparent` hooks, and turned off at run time.
pub(super) fn transparent_off() -> bool {
    TRANSPARENT_OFF.load(Ordering::Relaxed)
}

impl fmt::Display for Cure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.advice())
    }
}

/// What one frame of a blocked stack waits for, if it says.
pub(super) fn cure_of_frame(f: &crate::symbols::Frame) -> Option<Cure> {
    let name = f.function.as_str();
    let file = f.file.as_deref().unwrap_or("");
    let std_file = file.contains("/library/std/src/") || file.starts_with("/rustc/");
    // `__GI___libc_read`, `__libc_recv`, `__nanosleep` → `read`, `recv`, …
    let mut call = crate::symbols::last_segment(name);
    loop {
        let next = call
            .trim_start_matches('_')
            .trim_start_matches("GI_")
            .trim_start_matches('_')
            .trim_start_matches("libc_");
        if next == call {
            break;
        }
        call = next;
    }
    if name.contains("nanosleep")
        || (call.starts_with("sleep") && (std_file || name.starts_with("std::")))
    {
        return Some(Cure::Sleep);
    }
    const LOCKS: [&str; 9] = [
        "futex",
        "pthread_mutex",
        "pthread_cond",
        "pthread_rwlock",
        "parking_lot",
        "std::sync::",
        "sys::sync::",
        "lock_contended",
        "sem_wait",
    ];
    if LOCKS.iter().any(|l| name.contains(l))
        || file.contains("/std/src/sync/")
        || file.contains("/std/src/sys/sync/")
        || file.contains("/parking_lot")
    {
        return Some(Cure::Lock);
    }
    const CALLS: [&str; 24] = [
        "read",
        "readv",
        "pread64",
        "recv",
        "recvfrom",
        "recvmsg",
        "write",
        "writev",
        "pwrite64",
        "send",
        "sendto",
        "sendmsg",
        "accept",
        "accept4",
        "connect",
        "poll",
        "ppoll",
        "select",
        "pselect6",
        "epoll_wait",
        "epoll_pwait",
        "wait4",
        "waitpid",
        "getaddrinfo",
    ];
    const STD_IO: [&str; 5] = [
        "std::net::",
        "std::io::",
        "std::fs::",
        "std::process::",
        "sys::net",
    ];
    if CALLS.contains(&call)
        || STD_IO.iter().any(|m| name.contains(m))
        || [
            "/std/src/net/",
            "/std/src/io/",
            "/std/src/fs",
            "/std/src/process",
            "/sys/net/",
        ]
        .iter()
        .any(|d| file.contains(d))
    {
        return Some(Cure::Transparent);
    }
    None
}
