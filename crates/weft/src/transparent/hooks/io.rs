//! The read and write families: `read`, `write`, `readv`, `writev`,
//! `recv`, `recvfrom`, `recvmsg`, `send`, `sendto`, `sendmsg`.

use libc::{c_int, c_void, iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};

use crate::libc_next::libc_own;
use crate::transparent::call::{kernel_waits, sock_call};
use crate::transparent::iov::{self, Iov};
use crate::transparent::sys::raw;

/// # Safety
/// libc's `read(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    libc_own!(READ(fd, buf, n) if kernel_waits(fd, false));
    sock_call(
        fd,
        true,
        "read",
        false,
        Iov::One(buf as usize, n),
        None,
        |_, nb| match nb {
            0 => raw!(libc::SYS_read, fd, buf, n) as isize,
            nb => raw!(libc::SYS_recvfrom, fd, buf, n, nb, 0usize, 0usize) as isize,
        },
    )
}

/// # Safety
/// libc's `write(2)` contract. On a managed stream socket the write goes
/// on until all of it is written, as the kernel's blocking write does.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    libc_own!(WRITE(fd, buf, n) if kernel_waits(fd, false));
    sock_call(
        fd,
        false,
        "write",
        false,
        Iov::One(buf as usize, n),
        ALL,
        |d, nb| {
            let (p, left) = (buf as usize + d, n - d);
            match nb {
                0 => raw!(libc::SYS_write, fd, p, left) as isize,
                nb => raw!(libc::SYS_sendto, fd, p, left, nb, 0usize, 0usize) as isize,
            }
        },
    )
}

/// # Safety
/// libc's `readv(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    libc_own!(READV(fd, iov, cnt) if kernel_waits(fd, false));
    sock_call(
        fd,
        true,
        "readv",
        false,
        Iov::Vec(iov, cnt),
        None,
        |_, nb| match nb {
            0 => raw!(libc::SYS_readv, fd, iov, cnt) as isize,
            nb => vec_msg(fd, false, iov, cnt.max(0) as usize, nb),
        },
    )
}

/// # Safety
/// libc's `writev(2)` contract. As `write`, all of it on a managed
/// stream socket.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    libc_own!(WRITEV(fd, iov, cnt) if kernel_waits(fd, false));
    sock_call(
        fd,
        false,
        "writev",
        false,
        Iov::Vec(iov, cnt),
        ALL,
        |d, nb| {
            let cnt = cnt.max(0) as usize;
            let rest;
            let (v, c) = if d == 0 {
                (iov, cnt)
            } else {
                rest = iov::iov_past(iov, cnt, d);
                (rest.as_ptr(), rest.len())
            };
            match nb {
                0 => raw!(libc::SYS_writev, fd, v, c) as isize,
                nb => vec_msg(fd, true, v, c, nb),
            }
        },
    )
}

/// `readv`/`writev` of the `cnt` iovecs at `iov` on a socket, made as
/// `recvmsg`/`sendmsg` with `flags` (`MSG_DONTWAIT`: see `sock_call`).
fn vec_msg(fd: c_int, send: bool, iov: *const iovec, cnt: usize, flags: c_int) -> isize {
    // SAFETY: msghdr is plain data; all zero is "no address, no ancillary
    // data".
    let mut m: msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = iov as *mut iovec;
    m.msg_iovlen = cnt as _;
    let n = if send {
        libc::SYS_sendmsg
    } else {
        libc::SYS_recvmsg
    };
    raw!(n, fd, &mut m as *mut msghdr, flags) as isize
}

/// The whole length of the call's buffers: the calls that go on until
/// all of it has moved on a managed stream socket (see `sock_call`).
const ALL: Option<fn(Iov) -> usize> = Some(iov::iov_len);

fn dontwait(flags: c_int) -> bool {
    flags & libc::MSG_DONTWAIT != 0
}

/// `MSG_WAITALL`: the read goes on until all of it has arrived.
fn waitall(flags: c_int) -> Option<fn(Iov) -> usize> {
    if flags & libc::MSG_WAITALL != 0 {
        ALL
    } else {
        None
    }
}

/// A copy of `msg` for the rest of a call after `d` bytes: its iovecs
/// past them (in `rest`), without the ancillary data and the address (the
/// first part carried them).
fn msg_past(msg: *const msghdr, d: usize, rest: &mut Vec<iovec>) -> msghdr {
    // SAFETY: sendmsg/recvmsg's contract: `msg` is a valid msghdr.
    let mut m = unsafe { *msg };
    *rest = iov::iov_past(m.msg_iov, m.msg_iovlen, d);
    m.msg_iov = rest.as_mut_ptr();
    m.msg_iovlen = rest.len() as _;
    m.msg_control = std::ptr::null_mut();
    m.msg_controllen = 0;
    m
}

/// # Safety
/// libc's `recv(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn recv(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
) -> ssize_t {
    libc_own!(RECV(fd, buf, n, flags) if kernel_waits(fd, dontwait(flags)));
    sock_call(
        fd,
        true,
        "recv",
        dontwait(flags),
        Iov::Sock(n),
        waitall(flags),
        |d, nb| {
            raw!(
                libc::SYS_recvfrom,
                fd,
                buf as usize + d,
                n - d,
                flags | nb,
                0usize,
                0usize
            ) as isize
        },
    )
}

/// # Safety
/// libc's `recvfrom(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    libc_own!(RECVFROM(fd, buf, n, flags, addr, len) if kernel_waits(fd, dontwait(flags)));
    let (dw, all) = (dontwait(flags), waitall(flags));
    sock_call(fd, true, "recvfrom", dw, Iov::Sock(n), all, |d, nb| {
        raw!(
            libc::SYS_recvfrom,
            fd,
            buf as usize + d,
            n - d,
            flags | nb,
            addr,
            len
        ) as isize
    })
}

/// # Safety
/// libc's `recvmsg(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    libc_own!(RECVMSG(fd, msg, flags) if kernel_waits(fd, dontwait(flags)));
    let (dw, all) = (dontwait(flags), waitall(flags));
    sock_call(fd, true, "recvmsg", dw, Iov::Msg(msg), all, |d, nb| {
        if d == 0 {
            return raw!(libc::SYS_recvmsg, fd, msg, flags | nb) as isize;
        }
        let mut rest = Vec::new();
        let mut m = msg_past(msg, d, &mut rest);
        raw!(libc::SYS_recvmsg, fd, &mut m as *mut msghdr, flags | nb) as isize
    })
}

/// # Safety
/// libc's `send(2)` contract. As `write`, all of it on a managed stream
/// socket.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn send(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
) -> ssize_t {
    libc_own!(SEND(fd, buf, n, flags) if kernel_waits(fd, dontwait(flags)));
    sock_call(
        fd,
        false,
        "send",
        dontwait(flags),
        Iov::Sock(n),
        ALL,
        |d, nb| {
            raw!(
                libc::SYS_sendto,
                fd,
                buf as usize + d,
                n - d,
                flags | nb,
                0usize,
                0usize
            ) as isize
        },
    )
}

/// # Safety
/// libc's `sendto(2)` contract. As `send`.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    libc_own!(SENDTO(fd, buf, n, flags, addr, len) if kernel_waits(fd, dontwait(flags)));
    sock_call(
        fd,
        false,
        "sendto",
        dontwait(flags),
        Iov::Sock(n),
        ALL,
        |d, nb| {
            raw!(
                libc::SYS_sendto,
                fd,
                buf as usize + d,
                n - d,
                flags | nb,
                addr,
                len
            ) as isize
        },
    )
}

/// # Safety
/// libc's `sendmsg(2)` contract. As `send`.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    libc_own!(SENDMSG(fd, msg, flags) if kernel_waits(fd, dontwait(flags)));
    sock_call(
        fd,
        false,
        "sendmsg",
        dontwait(flags),
        Iov::Msg(msg),
        ALL,
        |d, nb| {
            if d == 0 {
                return raw!(libc::SYS_sendmsg, fd, msg, flags | nb) as isize;
            }
            let mut rest = Vec::new();
            let m = msg_past(msg, d, &mut rest);
            raw!(libc::SYS_sendmsg, fd, &m as *const msghdr, flags | nb) as isize
        },
    )
}
