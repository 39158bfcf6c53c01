//! The interposed C functions. Each is `unsafe extern "C"` with libc's
//! signature; its safety contract is libc's for the function of that name
//! (pointers valid for the sizes given), which every caller in C or Rust
//! already keeps. None of them unwinds, except the cancellation points
//! (`extern "C-unwind"`): where Weft does not wait itself they are libc's
//! own call, which glibc unwinds out of when the OS thread is cancelled
//! (`next.rs`, "Cancellation points").

use std::time::Duration;

use libc::{
    addrinfo, c_char, c_int, c_uint, c_ulong, c_void, epoll_event, fd_set, iovec, msghdr, nfds_t,
    pollfd, sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec, timeval,
};

use super::fds::{
    self, Iov, MANAGED, OTHER, Stop, UNKNOWN, USER_NB, classify, fail, kernel_waits, on_virtual,
    park_io, sock_call, state,
};
use super::next;
use super::sys::{self, raw};
use crate::poll::Interest;
use crate::thread::Blocker;

// ---------------------------------------------------------------- read/write

/// # Safety
/// libc's `read(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    if kernel_waits(fd, false)
        && let Some(f) = next::READ.get()
    {
        // SAFETY: libc's own call, with the caller's arguments.
        return unsafe { f(fd, buf, n) };
    }
    sock_call(
        fd,
        true,
        "read",
        false,
        Iov::One(buf as usize, n),
        None,
        |_| raw!(libc::SYS_read, fd, buf, n) as isize,
    )
}

/// # Safety
/// libc's `write(2)` contract. On a managed stream socket the write goes
/// on until all of it is written, as the kernel's blocking write does.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    if kernel_waits(fd, false)
        && let Some(f) = next::WRITE.get()
    {
        // SAFETY: libc's own call, with the caller's arguments.
        return unsafe { f(fd, buf, n) };
    }
    sock_call(
        fd,
        false,
        "write",
        false,
        Iov::One(buf as usize, n),
        ALL,
        |d| raw!(libc::SYS_write, fd, buf as usize + d, n - d) as isize,
    )
}

/// # Safety
/// libc's `readv(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    if kernel_waits(fd, false)
        && let Some(f) = next::READV.get()
    {
        // SAFETY: libc's own call, with the caller's arguments.
        return unsafe { f(fd, iov, cnt) };
    }
    sock_call(fd, true, "readv", false, Iov::Vec(iov, cnt), None, |_| {
        raw!(libc::SYS_readv, fd, iov, cnt) as isize
    })
}

/// # Safety
/// libc's `writev(2)` contract. As `write`, all of it on a managed
/// stream socket.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    if kernel_waits(fd, false)
        && let Some(f) = next::WRITEV.get()
    {
        // SAFETY: libc's own call, with the caller's arguments.
        return unsafe { f(fd, iov, cnt) };
    }
    sock_call(fd, false, "writev", false, Iov::Vec(iov, cnt), ALL, |d| {
        if d == 0 {
            return raw!(libc::SYS_writev, fd, iov, cnt) as isize;
        }
        let rest = fds::iov_past(iov, cnt.max(0) as usize, d);
        raw!(libc::SYS_writev, fd, rest.as_ptr(), rest.len()) as isize
    })
}

/// The whole length of the call's buffers: the calls that go on until
/// all of it has moved on a managed stream socket (see `sock_call`).
const ALL: Option<fn(Iov) -> usize> = Some(fds::iov_len);

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
    *rest = fds::iov_past(m.msg_iov, m.msg_iovlen, d);
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
    if kernel_waits(fd, dontwait(flags))
        && let Some(f) = next::RECV.get()
    {
        // SAFETY: libc's own call, with the caller's arguments.
        return unsafe { f(fd, buf, n, flags) };
    }
    sock_call(
        fd,
        true,
        "recv",
        dontwait(flags),
        Iov::Sock(n),
        waitall(flags),
        |d| {
            raw!(
                libc::SYS_recvfrom,
                fd,
                buf as usize + d,
                n - d,
                flags,
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
    if kernel_waits(fd, dontwait(flags))
        && let Some(f) = next::RECVFROM.get()
    {
        // SAFETY: libc's own call, with the caller's arguments.
        return unsafe { f(fd, buf, n, flags, addr, len) };
    }
    let (dw, all) = (dontwait(flags), waitall(flags));
    sock_call(fd, true, "recvfrom", dw, Iov::Sock(n), all, |d| {
        raw!(
            libc::SYS_recvfrom,
            fd,
            buf as usize + d,
            n - d,
            flags,
            addr,
            len
        ) as isize
    })
}

/// # Safety
/// libc's `recvmsg(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    if kernel_waits(fd, dontwait(flags))
        && let Some(f) = next::RECVMSG.get()
    {
        // SAFETY: libc's own call, with the caller's arguments.
        return unsafe { f(fd, msg, flags) };
    }
    let (dw, all) = (dontwait(flags), waitall(flags));
    sock_call(fd, true, "recvmsg", dw, Iov::Msg(msg), all, |d| {
        if d == 0 {
            return raw!(libc::SYS_recvmsg, fd, msg, flags) as isize;
        }
        let mut rest = Vec::new();
        let mut m = msg_past(msg, d, &mut rest);
        raw!(libc::SYS_recvmsg, fd, &mut m as *mut msghdr, flags) as isize
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
    if kernel_waits(fd, dontwait(flags))
        && let Some(f) = next::SEND.get()
    {
        // SAFETY: libc's own call, with the caller's arguments.
        return unsafe { f(fd, buf, n, flags) };
    }
    sock_call(fd, false, "send", dontwait(flags), Iov::Sock(n), ALL, |d| {
        raw!(
            libc::SYS_sendto,
            fd,
            buf as usize + d,
            n - d,
            flags,
            0usize,
            0usize
        ) as isize
    })
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
    if kernel_waits(fd, dontwait(flags))
        && let Some(f) = next::SENDTO.get()
    {
        // SAFETY: libc's own call, with the caller's arguments.
        return unsafe { f(fd, buf, n, flags, addr, len) };
    }
    sock_call(
        fd,
        false,
        "sendto",
        dontwait(flags),
        Iov::Sock(n),
        ALL,
        |d| {
            raw!(
                libc::SYS_sendto,
                fd,
                buf as usize + d,
                n - d,
                flags,
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
    if kernel_waits(fd, dontwait(flags))
        && let Some(f) = next::SENDMSG.get()
    {
        // SAFETY: libc's own call, with the caller's arguments.
        return unsafe { f(fd, msg, flags) };
    }
    sock_call(
        fd,
        false,
        "sendmsg",
        dontwait(flags),
        Iov::Msg(msg),
        ALL,
        |d| {
            if d == 0 {
                return raw!(libc::SYS_sendmsg, fd, msg, flags) as isize;
            }
            let mut rest = Vec::new();
            let m = msg_past(msg, d, &mut rest);
            raw!(libc::SYS_sendmsg, fd, &m as *const msghdr, flags) as isize
        },
    )
}

// ------------------------------------------------------------ connect/accept

/// # Safety
/// libc's `connect(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if kernel_waits(fd, false)
        && let Some(f) = next::CONNECT.get()
    {
        // SAFETY: libc's own call, with the caller's arguments.
        return unsafe { f(fd, addr, len) };
    }
    let go = || raw!(libc::SYS_connect, fd, addr, len) as c_int;
    let st = state(fd);
    if st == OTHER || st == USER_NB {
        return go();
    }
    let virt = on_virtual();
    if st == UNKNOWN && !(virt && classify(fd) == MANAGED) {
        return go();
    }
    let r = go();
    if r == 0 {
        return r;
    }
    match sys::errno() {
        libc::EINPROGRESS => {}
        libc::EAGAIN if is_unix(fd) => return unix_connect_retry(fd, virt, go),
        _ => return r,
    }
    let timeout = sys::sock_timeout(fd, false);
    let deadline = fds::deadline_after(timeout);
    let mut done = false;
    if virt {
        let ready = || (sys::poll_one(fd, libc::POLLOUT, Some(Duration::ZERO)) != 0).then_some(());
        match park_io(fd, Interest::Write, deadline, "connect", ready) {
            Ok(()) => done = true,
            Err(Some(Stop::TimedOut | Stop::Gone)) => return fail(libc::EINPROGRESS) as c_int,
            Err(Some(Stop::Interrupted)) => return fail(libc::EINTR) as c_int,
            Err(None) => {}
        }
    }
    if !done {
        match fds::wait_one(fd, libc::POLLOUT, timeout) {
            0 => return fail(libc::EINPROGRESS) as c_int,
            p if p < 0 => return -1,
            _ => {}
        }
    }
    match sys::so_error(fd) {
        0 => 0,
        e => fail(e) as c_int,
    }
}

/// Whether `fd` is an `AF_UNIX` socket (`SO_DOMAIN`). Keeps errno.
fn is_unix(fd: c_int) -> bool {
    let mut d: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    let saved = sys::errno();
    let r = raw!(
        libc::SYS_getsockopt,
        fd,
        libc::SOL_SOCKET,
        libc::SO_DOMAIN,
        &mut d as *mut c_int,
        &mut len as *mut socklen_t
    );
    sys::set_errno(saved);
    r == 0 && d == libc::AF_UNIX
}

/// A blocking `connect` on a Unix stream socket whose listener's backlog
/// is full waits (in the kernel, until the listener accepts) where a
/// non-blocking one fails with `EAGAIN`. That wait has no readiness to
/// poll for, so the call is retried after sleeps that double from 1 ms to
/// 64 ms (parking a virtual thread; on an OS thread a plain sleep), until
/// it succeeds, fails otherwise, the `SO_SNDTIMEO` deadline passes
/// (`EAGAIN`, as the kernel's) or the thread is interrupted (`EINTR`).
fn unix_connect_retry(fd: c_int, virt: bool, mut go: impl FnMut() -> c_int) -> c_int {
    let deadline = fds::deadline_after(sys::sock_timeout(fd, false));
    let mut step = Duration::from_millis(1);
    let mut counted = false;
    loop {
        let now = crate::clock::now();
        if deadline.is_some_and(|d| now >= d) {
            return fail(libc::EAGAIN) as c_int;
        }
        let until = now + step;
        let until = deadline.map_or(until, |d| d.min(until));
        if virt && fd > 2 {
            if !counted {
                counted = true;
                super::count_park("connect");
            }
            if crate::thread::take_interrupt() {
                return fail(libc::EINTR) as c_int;
            }
            let saved = sys::errno();
            crate::thread::with_blocker(
                Blocker::Call {
                    call: "connect",
                    fd,
                },
                || crate::thread::park_deadline(Some(until)),
            );
            sys::set_errno(saved);
        } else {
            let ts = ts_of(until.saturating_duration_since(crate::clock::now()));
            if raw_nanosleep(&ts, std::ptr::null_mut()) < 0 {
                return -1; // EINTR: a signal, as the kernel's wait would
            }
        }
        step = (step * 2).min(Duration::from_millis(64));
        let r = go();
        if r == 0 || sys::errno() != libc::EAGAIN {
            return r;
        }
    }
}

fn accepted(r: isize, flags: c_int) -> c_int {
    if r >= 0 {
        let fd = r as c_int;
        fds::forget(fd);
        if flags & libc::SOCK_NONBLOCK != 0 {
            fds::set_state(fd, USER_NB);
        }
    }
    r as c_int
}

/// # Safety
/// libc's `accept(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn accept(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    let libc_accept = next::ACCEPT.get();
    let r = match libc_accept {
        // SAFETY: libc's own call, with the caller's arguments.
        Some(f) if kernel_waits(fd, false) => (unsafe { f(fd, addr, len) }) as isize,
        _ => sock_call(fd, true, "accept", false, Iov::None, None, |_| {
            raw!(libc::SYS_accept4, fd, addr, len, 0) as isize
        }),
    };
    accepted(r, 0)
}

/// # Safety
/// libc's `accept4(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    let libc_accept4 = next::ACCEPT4.get();
    let r = match libc_accept4 {
        // SAFETY: libc's own call, with the caller's arguments.
        Some(f) if kernel_waits(fd, false) => (unsafe { f(fd, addr, len, flags) }) as isize,
        _ => sock_call(fd, true, "accept4", false, Iov::None, None, |_| {
            raw!(libc::SYS_accept4, fd, addr, len, flags) as isize
        }),
    };
    accepted(r, flags)
}

// ------------------------------------------------------------- poll/select

fn ts_of(d: Duration) -> timespec {
    timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

fn dur_of(ts: &timespec) -> Option<Duration> {
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return None;
    }
    Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// `poll(2)` itself where the architecture has it (what libc's `poll`
/// issues), else `ppoll` with the same timeout.
fn raw_poll(fds: usize, n: nfds_t, timeout: c_int) -> c_int {
    #[cfg(target_arch = "x86_64")]
    {
        raw!(libc::SYS_poll, fds, n, timeout as isize) as c_int
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let t = (timeout >= 0).then(|| Duration::from_millis(timeout as u64));
        raw_ppoll(fds, n, t, 0)
    }
}

fn raw_ppoll(fds: usize, n: nfds_t, timeout: Option<Duration>, mask: usize) -> c_int {
    let ts = timeout.map(ts_of);
    let tsp = ts
        .as_ref()
        .map_or(0usize, |t| t as *const timespec as usize);
    let sz = if mask == 0 { 0 } else { 8 };
    raw!(libc::SYS_ppoll, fds, n, tsp, mask, sz) as c_int
}

/// The virtual-thread form of `poll`/`ppoll` (timeout not zero).
fn vpoll(fds: *mut pollfd, n: nfds_t, timeout: Option<Duration>, call: &'static str) -> c_int {
    if n == 1 {
        // SAFETY: the caller passed one valid pollfd.
        let pf = unsafe { &*fds };
        let rd = pf.events & (libc::POLLIN | libc::POLLPRI) != 0;
        let wr = pf.events & libc::POLLOUT != 0;
        if rd != wr && pf.fd > 2 && matches!(classify(pf.fd), MANAGED | USER_NB) {
            let i = if rd { Interest::Read } else { Interest::Write };
            let deadline = fds::deadline_after(timeout);
            let addr = fds as usize;
            let op = || {
                let r = raw_ppoll(addr, 1, Some(Duration::ZERO), 0);
                (r != 0).then_some(r)
            };
            match park_io(pf.fd, i, deadline, call, op) {
                Ok(r) => return r,
                Err(Some(Stop::TimedOut | Stop::Gone)) => return 0,
                Err(Some(Stop::Interrupted)) => return fail(libc::EINTR) as c_int,
                Err(None) => {}
            }
        }
    }
    let r = raw_ppoll(fds as usize, n, Some(Duration::ZERO), 0);
    if r != 0 {
        return r;
    }
    let set = if n == 0 {
        &[][..]
    } else {
        // SAFETY: poll's contract: `fds` points to `n` pollfds.
        unsafe { std::slice::from_raw_parts(fds, n as usize) }
    };
    if set.iter().all(|p| p.fd < 0) {
        // `poll(NULL, 0, t)` and all-negative polls: a sleep.
        return match vsleep(timeout.unwrap_or(Duration::MAX), call) {
            Ok(()) => 0,
            Err(_) => fail(libc::EINTR) as c_int,
        };
    }
    // Several descriptors, or one that is not a socket Weft waits on:
    // a temporary epoll set watches them, and the virtual thread parks on
    // it (module docs, "Open-ended waits").
    let watch = set.iter().map(|p| (p.fd, p.events as u16 as u32));
    if let Some(ep) = epoll_set(watch) {
        let addr = fds as usize;
        let op = || {
            let r = raw_ppoll(addr, n, Some(Duration::ZERO), 0);
            (r != 0).then_some(r)
        };
        let b = Blocker::Call { call, fd: -1 };
        match fds::park_on_own(ep, fds::deadline_after(timeout), b, call, op) {
            Some(Ok(r)) => return r,
            Some(Err(Stop::TimedOut | Stop::Gone)) => return 0,
            Some(Err(Stop::Interrupted)) => return fail(libc::EINTR) as c_int,
            None => {}
        }
    }
    // No epoll set to be had (out of descriptors): an offload thread polls.
    super::count_park(call);
    let addr = fds as usize;
    let (r, e) = crate::blocking::blocking_as(Blocker::Call { call, fd: -1 }, move || {
        (raw_ppoll(addr, n, timeout, 0), sys::errno())
    });
    sys::set_errno(e);
    r
}

/// A new epoll set (level-triggered) watching `(fd, events)` for each
/// entry with `fd >= 0` (the events of one descriptor listed twice are
/// joined). A descriptor epoll refuses (`EPERM`: a regular file, always
/// ready, which the caller's zero-timeout check has already seen) is left
/// out. `None` if the set cannot be made; errno is kept.
fn epoll_set(watch: impl Iterator<Item = (c_int, u32)> + Clone) -> Option<c_int> {
    let saved = sys::errno();
    let ep = raw!(libc::SYS_epoll_create1, libc::EPOLL_CLOEXEC) as c_int;
    if ep < 0 {
        sys::set_errno(saved);
        return None;
    }
    let mut ok = true;
    for (k, (fd, events)) in watch.clone().enumerate() {
        if fd < 0 {
            continue;
        }
        let mut ev = epoll_event {
            events,
            u64: fd as u64,
        };
        if raw!(
            libc::SYS_epoll_ctl,
            ep,
            libc::EPOLL_CTL_ADD,
            fd,
            &mut ev as *mut epoll_event
        ) == 0
        {
            continue;
        }
        match sys::errno() {
            libc::EPERM => {}
            libc::EEXIST => {
                ev.events = watch
                    .clone()
                    .take(k + 1)
                    .filter(|&(f, _)| f == fd)
                    .fold(0, |a, (_, e)| a | e);
                let p = &mut ev as *mut epoll_event;
                raw!(libc::SYS_epoll_ctl, ep, libc::EPOLL_CTL_MOD, fd, p);
            }
            _ => {
                ok = false;
                break;
            }
        }
    }
    if !ok {
        raw!(libc::SYS_close, ep);
    }
    sys::set_errno(saved);
    ok.then_some(ep)
}

/// # Safety
/// libc's `poll(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    if timeout == 0 || !on_virtual() {
        if let Some(f) = next::POLL.get() {
            // SAFETY: libc's own call, with the caller's arguments.
            return unsafe { f(fds, n, timeout) };
        }
        return raw_poll(fds as usize, n, timeout);
    }
    let t = (timeout >= 0).then(|| Duration::from_millis(timeout as u64));
    vpoll(fds, n, t, "poll")
}

/// # Safety
/// libc's `ppoll(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    ts: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    if !on_virtual() {
        let libc_ppoll = next::PPOLL.get();
        if let Some(f) = libc_ppoll {
            // SAFETY: libc's own call, with the caller's arguments.
            return unsafe { f(fds, n, ts, mask) };
        }
    }
    let t = if ts.is_null() {
        None
    } else {
        // SAFETY: a non-null timeout points to a timespec (ppoll's contract).
        match dur_of(unsafe { &*ts }) {
            Some(d) => Some(d),
            None => return fail(libc::EINVAL) as c_int,
        }
    };
    if !mask.is_null() || t == Some(Duration::ZERO) || !on_virtual() {
        return raw_ppoll(fds as usize, n, t, mask as usize);
    }
    vpoll(fds, n, t, "ppoll")
}

fn raw_select(n: c_int, r: usize, w: usize, e: usize, tv: *mut timeval) -> c_int {
    if tv.is_null() {
        return raw!(libc::SYS_pselect6, n, r, w, e, 0usize, 0usize) as c_int;
    }
    // SAFETY: select's contract: a non-null timeout is a valid timeval.
    let t = unsafe { &mut *tv };
    if t.tv_sec < 0 || !(0..1_000_000).contains(&t.tv_usec) {
        return fail(libc::EINVAL) as c_int;
    }
    let mut ts = timespec {
        tv_sec: t.tv_sec,
        tv_nsec: t.tv_usec * 1000,
    };
    let res = raw!(
        libc::SYS_pselect6,
        n,
        r,
        w,
        e,
        &mut ts as *mut timespec,
        0usize
    ) as c_int;
    // Linux's select writes back the time left.
    t.tv_sec = ts.tv_sec;
    t.tv_usec = ts.tv_nsec / 1000;
    res
}

/// # Safety
/// libc's `select(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn select(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    tv: *mut timeval,
) -> c_int {
    // SAFETY: as in raw_select.
    let zero = !tv.is_null() && unsafe { (*tv).tv_sec == 0 && (*tv).tv_usec == 0 };
    if zero || !on_virtual() {
        let libc_select = next::SELECT.get();
        if let Some(f) = libc_select {
            // SAFETY: libc's own call, with the caller's arguments.
            return unsafe { f(n, r, w, e, tv) };
        }
        return raw_select(n, r as usize, w as usize, e as usize, tv);
    }
    vselect(n, [r, w, e], tv)
}

/// The virtual-thread form of `select` (timeout not zero): the sets are
/// watched by a temporary epoll set while the thread parks; a select with
/// no descriptors is a sleep.
fn vselect(n: c_int, sets: [*mut fd_set; 3], tv: *mut timeval) -> c_int {
    let timeout = if tv.is_null() {
        None
    } else {
        // SAFETY: select's contract: a non-null timeout is a valid timeval.
        let t = unsafe { &*tv };
        if t.tv_sec < 0 || !(0..1_000_000).contains(&t.tv_usec) {
            return fail(libc::EINVAL) as c_int;
        }
        Some(Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000))
    };
    if n < 0 {
        return fail(libc::EINVAL) as c_int;
    }
    let deadline = fds::deadline_after(timeout);
    // The sets as words (select's layout: bit `fd % 64` of word `fd / 64`),
    // copied: a zero-timeout select overwrites what it is given.
    let words = (n as usize).div_ceil(64);
    let load = |p: *mut fd_set| -> Vec<u64> {
        if p.is_null() {
            return Vec::new();
        }
        let mut v = vec![0u64; words];
        // SAFETY: select's contract: a non-null set holds at least `n`
        // bits, in whole longs as the kernel reads them (an fd_set, or a
        // larger array for large `n`); copied bytewise (no alignment
        // assumed) into our own buffer of that size.
        unsafe { std::ptr::copy_nonoverlapping(p as *const u8, v.as_mut_ptr().cast(), words * 8) };
        v
    };
    let input = sets.map(load);
    let store = |out: &[Vec<u64>; 3]| {
        for (p, v) in sets.iter().zip(out) {
            if !p.is_null() {
                // SAFETY: as in `load` (the set is writable: select's
                // contract), bytewise.
                unsafe {
                    std::ptr::copy_nonoverlapping(v.as_ptr().cast::<u8>(), *p as *mut u8, words * 8)
                };
            }
        }
    };
    let write_left = || {
        if !tv.is_null() {
            let left = deadline.map_or(Duration::ZERO, |d| {
                d.saturating_duration_since(crate::clock::now())
            });
            // SAFETY: as above (Linux's select writes back the time left).
            unsafe {
                (*tv).tv_sec = left.as_secs() as libc::time_t;
                (*tv).tv_usec = left.subsec_micros() as libc::suseconds_t;
            }
        }
    };
    // One zero-timeout select on copies: ready, or bad descriptors.
    let try_now = || -> Option<(c_int, [Vec<u64>; 3])> {
        let mut out = input.clone();
        let ptr = |v: &mut Vec<u64>| {
            if v.is_empty() {
                0usize
            } else {
                v.as_mut_ptr() as usize
            }
        };
        let (pr, pw, pe) = {
            let [a, b, c] = &mut out;
            (ptr(a), ptr(b), ptr(c))
        };
        let mut z = timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        let res = raw_select(n, pr, pw, pe, &mut z);
        (res != 0).then_some((res, out))
    };
    if let Some((res, out)) = try_now() {
        if res > 0 {
            store(&out);
        }
        return res;
    }
    let bit = |v: &Vec<u64>, fd: usize| !v.is_empty() && v[fd / 64] >> (fd % 64) & 1 != 0;
    let mask = |fd: usize| -> u32 {
        let mut m = 0;
        if bit(&input[0], fd) {
            m |= (libc::EPOLLIN | libc::EPOLLRDNORM | libc::EPOLLRDBAND) as u32;
        }
        if bit(&input[1], fd) {
            m |= (libc::EPOLLOUT | libc::EPOLLWRNORM | libc::EPOLLWRBAND) as u32;
        }
        if bit(&input[2], fd) {
            m |= libc::EPOLLPRI as u32;
        }
        m
    };
    let watch = (0..n as usize).filter_map(|fd| {
        let m = mask(fd);
        (m != 0).then_some((fd as c_int, m))
    });
    let cleared = |out: &mut [Vec<u64>; 3]| out.iter_mut().for_each(|v| v.fill(0));
    if watch.clone().next().is_none() {
        // `select(0, NULL, NULL, NULL, &tv)`: a sleep.
        let r = vsleep(timeout.unwrap_or(Duration::MAX), "select");
        let mut out = input.clone();
        cleared(&mut out);
        store(&out);
        write_left();
        return match r {
            Ok(()) => 0,
            Err(_) => fail(libc::EINTR) as c_int,
        };
    }
    if let Some(ep) = epoll_set(watch) {
        let b = Blocker::Call {
            call: "select",
            fd: -1,
        };
        let res = fds::park_on_own(ep, deadline, b, "select", try_now);
        if let Some(res) = res {
            write_left();
            return match res {
                Ok((res, out)) => {
                    if res > 0 {
                        store(&out);
                    }
                    res
                }
                Err(Stop::TimedOut | Stop::Gone) => {
                    let mut out = input.clone();
                    cleared(&mut out);
                    store(&out);
                    0
                }
                Err(Stop::Interrupted) => fail(libc::EINTR) as c_int,
            };
        }
    }
    // No epoll set to be had: an offload thread selects.
    super::count_park("select");
    let [r, w, e] = sets.map(|p| p as usize);
    let tv = tv as usize;
    let (res, err) = crate::blocking::blocking_as(
        Blocker::Call {
            call: "select",
            fd: -1,
        },
        move || {
            let res = raw_select(n, r, w, e, tv as *mut timeval);
            (res, sys::errno())
        },
    );
    sys::set_errno(err);
    res
}

fn raw_epoll(epfd: c_int, ev: usize, max: c_int, timeout: c_int, mask: usize) -> c_int {
    raw!(libc::SYS_epoll_pwait, epfd, ev, max, timeout, mask, 8usize) as c_int
}

fn vepoll(epfd: c_int, ev: usize, max: c_int, timeout: c_int, call: &'static str) -> c_int {
    let deadline =
        fds::deadline_after((timeout >= 0).then(|| Duration::from_millis(timeout as u64)));
    let op = || {
        let r = raw_epoll(epfd, ev, max, 0, 0);
        (r != 0).then_some(r)
    };
    match park_io(epfd, Interest::Read, deadline, call, op) {
        Ok(r) => r,
        Err(Some(Stop::TimedOut | Stop::Gone)) => 0,
        Err(Some(Stop::Interrupted)) => fail(libc::EINTR) as c_int,
        Err(None) => raw_epoll(epfd, ev, max, timeout, 0),
    }
}

/// # Safety
/// libc's `epoll_wait(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn epoll_wait(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    if timeout == 0 || !on_virtual() {
        let libc_epoll_wait = next::EPOLL_WAIT.get();
        if let Some(f) = libc_epoll_wait {
            // SAFETY: libc's own call, with the caller's arguments.
            return unsafe { f(epfd, ev, max, timeout) };
        }
        return raw_epoll(epfd, ev as usize, max, timeout, 0);
    }
    vepoll(epfd, ev as usize, max, timeout, "epoll_wait")
}

/// # Safety
/// libc's `epoll_pwait(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn epoll_pwait(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    if timeout == 0 || !mask.is_null() || !on_virtual() {
        let libc_epoll_pwait = next::EPOLL_PWAIT.get();
        if let Some(f) = libc_epoll_pwait {
            // SAFETY: libc's own call, with the caller's arguments.
            return unsafe { f(epfd, ev, max, timeout, mask) };
        }
        return raw_epoll(epfd, ev as usize, max, timeout, mask as usize);
    }
    vepoll(epfd, ev as usize, max, timeout, "epoll_pwait")
}

// ------------------------------------------------------------------ sleeps

/// Parks the virtual thread for `d`; `Err(left)` if interrupted. Keeps
/// `errno` (the park's own system calls may set it).
fn vsleep(d: Duration, call: &'static str) -> Result<(), Duration> {
    let saved = sys::errno();
    let r = vsleep_inner(d, call);
    sys::set_errno(saved);
    r
}

fn vsleep_inner(d: Duration, call: &'static str) -> Result<(), Duration> {
    let Some(deadline) = crate::clock::now().checked_add(d) else {
        // Forever: park until interrupted.
        super::count_park(call);
        loop {
            if crate::thread::take_interrupt() {
                return Err(d);
            }
            crate::thread::with_blocker(Blocker::Call { call, fd: -1 }, || {
                crate::thread::park_deadline(None)
            });
        }
    };
    let mut counted = false;
    loop {
        if crate::thread::take_interrupt() {
            return Err(deadline.saturating_duration_since(crate::clock::now()));
        }
        if crate::clock::now() >= deadline {
            return Ok(());
        }
        if !counted {
            counted = true;
            super::count_park(call);
        }
        crate::thread::with_blocker(Blocker::Call { call, fd: -1 }, || {
            crate::thread::park_deadline(Some(deadline))
        });
    }
}

fn raw_nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
    raw!(libc::SYS_nanosleep, req, rem) as c_int
}

/// # Safety
/// libc's `nanosleep(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
    if !on_virtual() || req.is_null() {
        let libc_nanosleep = next::NANOSLEEP.get();
        if let Some(f) = libc_nanosleep {
            // SAFETY: libc's own call, with the caller's arguments.
            return unsafe { f(req, rem) };
        }
        return raw_nanosleep(req, rem);
    }
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
    if !known || req.is_null() || !on_virtual() {
        let libc_clock_nanosleep = next::CLOCK_NANOSLEEP.get();
        if let Some(f) = libc_clock_nanosleep {
            // SAFETY: libc's own call, with the caller's arguments.
            return unsafe { f(clock, flags, req, rem) };
        }
        let r = raw!(libc::SYS_clock_nanosleep, clock, flags, req, rem) as c_int;
        let e = if r < 0 { sys::errno() } else { 0 };
        sys::set_errno(saved);
        return e;
    }
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
    if !on_virtual() {
        if let Some(f) = next::USLEEP.get() {
            // SAFETY: libc's own call, with the caller's argument.
            return unsafe { f(us) };
        }
        let ts = ts_of(d);
        return raw_nanosleep(&ts, std::ptr::null_mut());
    }
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
    if !on_virtual() {
        if let Some(f) = next::SLEEP.get() {
            // SAFETY: libc's own call, with the caller's argument.
            return unsafe { f(secs) };
        }
        let ts = ts_of(d);
        let mut rem = ts_of(Duration::ZERO);
        if raw_nanosleep(&ts, &mut rem) < 0 {
            return (rem.tv_sec + (rem.tv_nsec > 0) as libc::time_t) as c_uint;
        }
        return 0;
    }
    match vsleep(d, "sleep") {
        Ok(()) => 0,
        Err(left) => (left.as_secs() + (left.subsec_nanos() > 0) as u64) as c_uint,
    }
}

// ------------------------------------------------------- descriptor table

/// # Safety
/// libc's `close(2)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn close(fd: c_int) -> c_int {
    fds::forget(fd);
    if let Some(f) = next::CLOSE.get() {
        // SAFETY: libc's own call, with the caller's argument.
        return unsafe { f(fd) };
    }
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
    // SAFETY: glibc's closefrom(3) has this signature.
    static NEXT: next::Next<unsafe extern "C" fn(c_int)> = unsafe { next::Next::new(c"closefrom") };
    fds::forget_range(low.max(0), c_int::MAX);
    if let Some(next) = NEXT.resolve() {
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
    // SAFETY: libc's fclose(3) has this signature.
    static NEXT: next::Next<unsafe extern "C" fn(*mut libc::FILE) -> c_int> =
        unsafe { next::Next::new(c"fclose") };
    if !fp.is_null() {
        // SAFETY: fclose's contract: `fp` is an open stream.
        let fd = unsafe { libc::fileno(fp) };
        if fd >= 0 {
            fds::forget(fd);
        }
    }
    let Some(next) = NEXT.resolve() else {
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
        fds::set_state(new, st);
    }
    fds::note_copy(old, new);
}

/// Weft's view of `fd` for `fcntl` and `ioctl`: a descriptor Weft has not
/// looked at takes the view of a copy of its socket Weft knows.
fn state_of_description(fd: c_int) -> u8 {
    match state(fd) {
        UNKNOWN => fds::adopt(fd),
        st => st,
    }
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
        state_of_description(fd)
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
            let r = sys::fcntl(fd, cmd, arg | libc::O_NONBLOCK as usize);
            if r == 0 {
                fds::set_shared_state(fd, if nb { USER_NB } else { MANAGED });
            }
            r
        }
        libc::F_SETFL => {
            let r = sys::fcntl(fd, cmd, arg);
            if st != OTHER {
                fds::set_state(fd, UNKNOWN);
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
        let st = state_of_description(fd);
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
            fds::set_state(fd, UNKNOWN);
        }
        return r;
    }
    raw!(libc::SYS_ioctl, fd, req, arg) as c_int
}

/// # Safety
/// libc's `socket(2)` contract (none).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, proto: c_int) -> c_int {
    let r = raw!(libc::SYS_socket, domain, ty, proto) as c_int;
    if r >= 0 {
        fds::forget(r);
        if ty & libc::SOCK_NONBLOCK != 0 {
            fds::set_state(r, USER_NB);
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
                fds::set_state(fd, USER_NB);
            }
        }
    }
    r
}

// ---------------------------------------------------------------- processes

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
    if options & libc::WNOHANG != 0 || !on_virtual() {
        let libc_waitpid = next::WAITPID.get();
        if let Some(f) = libc_waitpid {
            // SAFETY: libc's own call, with the caller's arguments.
            return unsafe { f(pid, status, options) };
        }
        return op() as libc::pid_t;
    }
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
            match fds::park_on_own(pidfd, None, b, "waitpid", op) {
                Some(Ok(r)) => return r,
                Some(Err(_)) => return fail(libc::EINTR) as libc::pid_t,
                None => {}
            }
        }
    }
    super::count_park("waitpid");
    let mut op = op;
    let job = fds::Offloaded(&mut op);
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

// ------------------------------------------------------------- getaddrinfo

type Gai = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    *const addrinfo,
    *mut *mut addrinfo,
) -> c_int;

fn next_getaddrinfo() -> Option<Gai> {
    // SAFETY: libc's getaddrinfo(3) has type `Gai`.
    static NEXT: next::Next<Gai> = unsafe { next::Next::new(c"getaddrinfo") };
    NEXT.resolve()
}

/// Runs on an offload thread while a virtual caller parks; its `errno`
/// is the caller's afterwards (`EAI_SYSTEM`'s reason).
///
/// # Safety
/// libc's `getaddrinfo(3)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const addrinfo,
    res: *mut *mut addrinfo,
) -> c_int {
    let Some(next) = next_getaddrinfo() else {
        return libc::EAI_SYSTEM;
    };
    if !on_virtual() {
        // SAFETY: forwarded with the caller's arguments.
        return unsafe { next(node, service, hints, res) };
    }
    super::count_park("getaddrinfo");
    let a = (
        node as usize,
        service as usize,
        hints as usize,
        res as usize,
    );
    // The offload thread's errno comes back with the result: the reason
    // of an `EAI_SYSTEM` is there.
    let (r, e) = crate::blocking::blocking_as(
        Blocker::Call {
            call: "getaddrinfo",
            fd: -1,
        },
        move || {
            // SAFETY: the caller's pointers stay valid: it does not return
            // before this closure has finished (weft::blocking's contract).
            let r = unsafe {
                next(
                    a.0 as *const c_char,
                    a.1 as *const c_char,
                    a.2 as *const addrinfo,
                    a.3 as *mut *mut addrinfo,
                )
            };
            (r, sys::errno())
        },
    );
    sys::set_errno(e);
    r
}
