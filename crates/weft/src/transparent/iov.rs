//! A hooked call's buffers (`Iov`), and the arithmetic of a call that
//! goes on after part of them moved.

use libc::c_int;

/// The total length of `iov`'s buffers.
pub(super) fn iov_len(iov: Iov) -> usize {
    match iov {
        Iov::None => 0,
        Iov::One(_, n) | Iov::Sock(n) => n,
        Iov::Msg(m) => {
            // SAFETY: the caller's (sendmsg/recvmsg's) contract: `m` is a
            // valid msghdr.
            let m = unsafe { &*m };
            iov_len(Iov::Vec(m.msg_iov, m.msg_iovlen as c_int))
        }
        Iov::Vec(v, c) => {
            let c = usize::try_from(c).unwrap_or(0);
            if c == 0 {
                return 0;
            }
            // SAFETY: the caller's (writev's) contract: `v` points to `c`
            // iovecs.
            unsafe { std::slice::from_raw_parts(v, c) }
                .iter()
                .map(|x| x.iov_len)
                .sum()
        }
    }
}

/// A copy of the `c` iovecs at `v` without their first `skip` bytes.
pub(super) fn iov_past(v: *const libc::iovec, c: usize, skip: usize) -> Vec<libc::iovec> {
    let mut out = if c == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller's (writev/sendmsg's) contract: `v` points to
        // `c` iovecs.
        unsafe { std::slice::from_raw_parts(v, c) }.to_vec()
    };
    advance(&mut out, skip);
    out
}

/// The buffers of a call: for `read`/`write` (`One`) and `readv`/`writev`
/// (`Vec`) what a pipe's `RWF_NOWAIT` form of the call needs; for the
/// socket-only calls (which a pipe refuses with `ENOTSOCK`) their length
/// (`Sock`) or message (`Msg`), or nothing.
#[derive(Clone, Copy)]
pub(super) enum Iov {
    None,
    One(usize, usize),
    Vec(*const libc::iovec, c_int),
    Sock(usize),
    Msg(*const libc::msghdr),
}

/// Drops the first `n` bytes of `v`.
pub(super) fn advance(v: &mut Vec<libc::iovec>, mut n: usize) {
    let mut k = 0;
    while k < v.len() && n >= v[k].iov_len {
        n -= v[k].iov_len;
        k += 1;
    }
    v.drain(..k);
    if let Some(f) = v.first_mut() {
        f.iov_base = (f.iov_base as usize + n) as *mut libc::c_void;
        f.iov_len -= n;
    }
}
