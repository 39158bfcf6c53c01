//! `close` of a descriptor a virtual thread waits on. Its own test binary,
//! its tests one at a time: they watch descriptor numbers, which any other
//! test running beside them could take.

use weft_transparent_tests::{one_at_a_time, socketpair, strict_runtime};

/// A virtual thread parked in `read` on `fd`, and the closer's work, on one
/// carrier: returns the reader's `(result, errno)`.
fn read_while(fd: i32, closer: impl FnOnce() + Send + 'static) -> (isize, Option<i32>) {
    let rt = strict_runtime(1);
    let a = rt.spawn(move || {
        let mut b = [0u8; 4];
        // SAFETY: reading into a local buffer.
        let r = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 4) };
        (r, std::io::Error::last_os_error().raw_os_error())
    });
    let t = a.thread().clone();
    rt.spawn(move || {
        assert_eq!(t.blocker(), weft::Blocker::Call { call: "read", fd });
        closer();
    })
    .join()
    .unwrap();
    a.join().unwrap()
}

/// The waiting thread wakes, and its retried read fails with `EBADF`.
#[test]
fn close_while_waiting_gives_ebadf() {
    let _one = one_at_a_time();
    let sv = socketpair();
    let fd = sv[0];
    // SAFETY: closing the descriptor made above (the reader does not).
    let r = read_while(fd, move || unsafe {
        libc::close(fd);
    });
    assert_eq!(r, (-1, Some(libc::EBADF)));
    // SAFETY: the other end, still open.
    unsafe { libc::close(sv[1]) };
}

/// The number is reused before the waiter runs again (here by an eventfd,
/// on which a 4-byte read would fail with `EINVAL`). The waiter's call
/// ends with `EBADF` without reading the eventfd (`close_reuse.rs`), and
/// its `errno` is that `EBADF`: letting go of the closed descriptor's
/// poller registration on the way out (an `EPOLL_CTL_DEL` by number, now
/// done at the close) set `errno` to `ENOENT` before.
///
/// The runtime's own threads open descriptors too (the monitor's
/// `/proc/self/task/<tid>/` files), and one opened between the close and
/// the `eventfd` takes the number: then the case was not reached and is
/// tried again with a new pair (the call must end with `EBADF` either way).
#[test]
fn errno_is_the_calls_own_when_the_number_is_reused() {
    let _one = one_at_a_time();
    const ATTEMPTS: usize = 20;
    for _ in 0..ATTEMPTS {
        let sv = socketpair();
        let fd = sv[0];
        let (tx, rx) = std::sync::mpsc::channel();
        let r = read_while(fd, move || {
            // SAFETY: closing the descriptor made above, then taking the
            // lowest free number, which is `fd` again unless another
            // thread of the process took it in between.
            let new = unsafe {
                libc::close(fd);
                libc::eventfd(0, 0)
            };
            tx.send(new).unwrap();
        });
        let new = rx.recv().unwrap();
        assert!(new >= 0, "eventfd failed");
        assert_eq!(r, (-1, Some(libc::EBADF)));
        // SAFETY: closing our own descriptors.
        unsafe {
            libc::close(new);
            libc::close(sv[1]);
        }
        if new == fd {
            return;
        }
    }
    panic!("in {ATTEMPTS} attempts another thread always took the closed number first");
}
