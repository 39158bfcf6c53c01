//! `O_NONBLOCK` belongs to a file description, not to a descriptor: every
//! `dup` of a socket sees what any of them set, as the kernel's flag would
//! be seen, although Weft keeps the kernel's flag set on sockets it manages
//! and shows the program its own. Its own test binary, its tests one at a
//! time: they watch descriptor numbers, which any other test running beside
//! them could take.

use std::time::Duration;
use weft_transparent_tests::{one_at_a_time, parked_in, socketpair, strict_runtime, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

fn errno() -> Option<i32> {
    std::io::Error::last_os_error().raw_os_error()
}

/// Reads one byte from `fd` (a plain `read(2)`): the count and errno.
fn read1(fd: i32) -> (isize, Option<i32>, u8) {
    let mut b = [0u8; 1];
    // SAFETY: reading into a local buffer.
    let r = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) };
    (r, errno(), b[0])
}

fn write1(fd: i32, v: u8) {
    // SAFETY: writing one byte from a local buffer to our own socket.
    assert_eq!(unsafe { libc::write(fd, [v].as_ptr().cast(), 1) }, 1);
}

fn getfl(fd: i32) -> i32 {
    // SAFETY: F_GETFL on our own descriptor.
    unsafe { libc::fcntl(fd, libc::F_GETFL) }
}

fn close_all(fds: &[i32]) {
    for &fd in fds {
        // SAFETY: closing our own descriptors.
        unsafe { libc::close(fd) };
    }
}

/// A socket Weft manages (a virtual thread read it) is duplicated; the
/// program sets `O_NONBLOCK` through the copy. Through the original,
/// `F_GETFL` shows it and a read with nothing to read fails with `EAGAIN`
/// at once (it parked for ever, the flag seen per descriptor); cleared
/// through the original, the copy blocks again.
#[test]
fn o_nonblock_set_through_one_dup_is_seen_through_the_other() {
    let _one = one_at_a_time();
    let _dog = watchdog(
        "o_nonblock_set_through_one_dup_is_seen_through_the_other",
        LIMIT,
    );
    let rt = strict_runtime(1);
    let sv = socketpair();
    let fd = sv[0];
    write1(sv[1], 1);
    let (copy, first) = rt
        .spawn(move || {
            let first = read1(fd);
            // SAFETY: dup of our own descriptor.
            (unsafe { libc::dup(fd) }, first)
        })
        .join()
        .unwrap();
    assert_eq!(first.0, 1);
    assert!(copy > 2, "dup failed: {:?}", errno());
    assert_eq!(
        getfl(fd) & libc::O_NONBLOCK,
        0,
        "a blocking socket reads as one"
    );

    let fl = getfl(copy);
    // SAFETY: F_SETFL on our own descriptor.
    assert_eq!(
        unsafe { libc::fcntl(copy, libc::F_SETFL, fl | libc::O_NONBLOCK) },
        0
    );
    assert_ne!(
        getfl(fd) & libc::O_NONBLOCK,
        0,
        "O_NONBLOCK set through the copy"
    );
    let (r, e, _) = rt.spawn(move || read1(fd)).join().unwrap();
    assert_eq!(
        (r, e),
        (-1, Some(libc::EAGAIN)),
        "the original is non-blocking too"
    );

    // Cleared through the original (with FIONBIO this time): the copy waits.
    let off: libc::c_int = 0;
    // SAFETY: FIONBIO reads an int from a local.
    assert_eq!(unsafe { libc::ioctl(fd, libc::FIONBIO, &off) }, 0);
    assert_eq!(
        getfl(copy) & libc::O_NONBLOCK,
        0,
        "O_NONBLOCK cleared through the original"
    );
    let reader = rt.spawn(move || read1(copy));
    parked_in(&reader, "read");
    write1(sv[1], 2);
    let (r, e, b) = reader.join().unwrap();
    assert_eq!((r, b), (1, 2), "the copy's read failed: errno {e:?}");
    close_all(&[sv[0], sv[1], copy]);
}

/// A blocking socket duplicated on an OS thread before any virtual thread
/// used it (`try_clone` of a stream made on `main`): a virtual thread's
/// read through the original makes it Weft's (non-blocking in the kernel);
/// a read through the copy must still wait for data, not fail with
/// `EAGAIN` (it took the kernel's flag, which Weft set, for the program's).
#[test]
fn a_socket_duplicated_before_weft_managed_it_blocks_through_both() {
    let _one = one_at_a_time();
    let _dog = watchdog(
        "a_socket_duplicated_before_weft_managed_it_blocks_through_both",
        LIMIT,
    );
    let rt = strict_runtime(1);
    let sv = socketpair();
    let fd = sv[0];
    // SAFETY: F_DUPFD_CLOEXEC of our own descriptor, on an OS thread.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    assert!(copy > 2, "dup failed: {:?}", errno());
    write1(sv[1], 1);
    assert_eq!(rt.spawn(move || read1(fd)).join().unwrap().0, 1);
    let reader = rt.spawn(move || read1(copy));
    parked_in(&reader, "read");
    write1(sv[1], 2);
    let (r, e, b) = reader.join().unwrap();
    assert_eq!((r, b), (1, 2), "the copy's read failed: errno {e:?}");
    assert_eq!(
        getfl(copy) & libc::O_NONBLOCK,
        0,
        "the copy reads as blocking"
    );
    close_all(&[sv[0], sv[1], copy]);
}
