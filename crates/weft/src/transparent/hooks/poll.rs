//! `poll`, `ppoll`, `select`, `epoll_wait` and `epoll_pwait`.

use std::time::Duration;

use libc::{c_int, epoll_event, fd_set, nfds_t, pollfd, sigset_t, timespec, timeval};

use crate::libc_next::libc_own;
use crate::poll::Interest;
use crate::thread::Blocker;
use crate::transparent::fds::{classify, on_virtual};
use crate::transparent::state::{MANAGED, USER_NB};
use crate::transparent::sys::{self, dur_of, fail, raw, ts_of};
use crate::transparent::wait::{self, Stop, park_io, vsleep};

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
            let deadline = wait::deadline_after(timeout);
            let addr = fds as usize;
            let op = || {
                let r = raw_ppoll(addr, 1, Some(Duration::ZERO), 0);
                (r != 0).then_some(r)
            };
            match park_io(pf.fd, i, deadline, call, op) {
                Ok(r) => return r,
                Err(Some(Stop::TimedOut)) => return 0,
                // Closed under the call: reported as the kernel reports a
                // closed descriptor, without polling the number again.
                Err(Some(Stop::Gone)) => {
                    // SAFETY: the caller's pollfd (poll's contract).
                    unsafe { (*fds).revents = libc::POLLNVAL };
                    return 1;
                }
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
        match wait::park_on_own(ep, wait::deadline_after(timeout), b, call, op) {
            Some(Ok(r)) => return r,
            Some(Err(Stop::TimedOut | Stop::Gone)) => return 0,
            Some(Err(Stop::Interrupted)) => return fail(libc::EINTR) as c_int,
            None => {}
        }
    }
    // No epoll set to be had (out of descriptors): an offload thread polls.
    crate::transparent::count_park(call);
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
    libc_own!(
        POLL(fds, n, timeout) if timeout == 0 || !on_virtual(),
        else raw_poll(fds as usize, n, timeout)
    );
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
    libc_own!(PPOLL(fds, n, ts, mask) if !on_virtual());
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
    libc_own!(
        SELECT(n, r, w, e, tv) if zero || !on_virtual(),
        else raw_select(n, r as usize, w as usize, e as usize, tv)
    );
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
    let deadline = wait::deadline_after(timeout);
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
        let res = wait::park_on_own(ep, deadline, b, "select", try_now);
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
    crate::transparent::count_park("select");
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
        wait::deadline_after((timeout >= 0).then(|| Duration::from_millis(timeout as u64)));
    let op = || {
        let r = raw_epoll(epfd, ev, max, 0, 0);
        (r != 0).then_some(r)
    };
    match park_io(epfd, Interest::Read, deadline, call, op) {
        Ok(r) => r,
        Err(Some(Stop::TimedOut)) => 0,
        Err(Some(Stop::Gone)) => fail(libc::EBADF) as c_int,
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
    libc_own!(
        EPOLL_WAIT(epfd, ev, max, timeout) if timeout == 0 || !on_virtual(),
        else raw_epoll(epfd, ev as usize, max, timeout, 0)
    );
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
    let pass = timeout == 0 || !mask.is_null() || !on_virtual();
    libc_own!(
        EPOLL_PWAIT(epfd, ev, max, timeout, mask) if pass,
        else raw_epoll(epfd, ev as usize, max, timeout, mask as usize)
    );
    vepoll(epfd, ev as usize, max, timeout, "epoll_pwait")
}
