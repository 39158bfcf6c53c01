//! Descriptors closed behind the hooks' back. `fclose` of an `fdopen`ed
//! socket and `close_range` close with calls no other hook sees: they are
//! hooked too, so the number's state is forgotten and a file that reuses
//! the number is classified afresh. A raw `close` system call cannot be
//! seen at all: then the registration made for the old file is abandoned,
//! never freed, since epoll may still hold a pointer to its state (the old
//! file lives on in another descriptor), and an event there must not touch
//! freed memory.
//!
//! Its own test binary, its tests one at a time: they watch descriptor
//! numbers, which any other test running beside them could take.

use std::time::Duration;
use weft_transparent_tests::{
    one_at_a_time, parked_in, raise_fd_limit, socketpair, strict_runtime, watchdog,
};

const LIMIT: Duration = Duration::from_secs(60);

/// A virtual thread's read on `fd` that parks until `peer` writes: the
/// socket becomes Weft's (non-blocking, registered with the poller).
fn make_managed(rt: &weft::Runtime, fd: i32, peer: i32) {
    let r = rt.spawn(move || {
        let mut b = [0u8; 1];
        // SAFETY: reading into a local buffer.
        unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) }
    });
    parked_in(&r, "read");
    // SAFETY: writing one byte to our own socket.
    assert_eq!(unsafe { libc::write(peer, [1u8].as_ptr().cast(), 1) }, 1);
    assert_eq!(r.join().unwrap(), 1);
}

/// After `close` (by `how`) of a managed socket, a blocking pipe takes its
/// number; a virtual thread's read of the pipe parks (it used to take the
/// stale "managed socket" state for the pipe and block the only carrier in
/// the kernel, so the writer never ran).
///
/// A thread of the runtime that opens a descriptor (the monitor's
/// `/proc/self/task/<tid>/` files) between the close and the pipe can take
/// the number: then the case was not reached and is tried again.
fn reuse_by_a_pipe_after(how: fn(i32)) {
    const ATTEMPTS: usize = 20;
    for _ in 0..ATTEMPTS {
        if reuse_by_a_pipe_after_once(how) {
            return;
        }
    }
    panic!("in {ATTEMPTS} attempts another thread always took the closed number first");
}

/// One attempt of [`reuse_by_a_pipe_after`]: `false` if the pipe could not
/// be given the closed number.
fn reuse_by_a_pipe_after_once(how: fn(i32)) -> bool {
    let rt = strict_runtime(1);
    let sv = socketpair();
    let fd = sv[0];
    make_managed(&rt, fd, sv[1]);
    how(fd);
    // A number below `fd` may be free too (a runtime of an earlier test
    // still closing its descriptors): keep such a number taken by a read
    // end, give the write end back, and try again until the pipe's read
    // end gets `fd`.
    let mut held = Vec::new();
    let p = loop {
        let mut p = [0i32; 2];
        // SAFETY: pipe into a 2-int array (pipe is not hooked).
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        if p[0] == fd {
            break Some(p);
        }
        if p[0] > fd {
            // Another thread took `fd`.
            // SAFETY: our own pipe, not used.
            unsafe {
                libc::close(p[0]);
                libc::close(p[1]);
            }
            break None;
        }
        assert!(held.len() < 64, "more than 64 free numbers below {fd}");
        held.push(p[0]);
        // SAFETY: our own pipe's write end, not used.
        unsafe { libc::close(p[1]) };
    };
    for h in held {
        // SAFETY: read ends taken above only to skip their numbers.
        unsafe { libc::close(h) };
    }
    let Some(p) = p else {
        // SAFETY: the socket's peer, ours.
        unsafe { libc::close(sv[1]) };
        return false;
    };
    let reader = rt.spawn(move || {
        let mut b = [0u8; 1];
        // SAFETY: reading into a local buffer.
        let r = unsafe { libc::read(p[0], b.as_mut_ptr().cast(), 1) };
        (r, b[0])
    });
    parked_in(&reader, "read");
    let w = p[1];
    rt.spawn(move || {
        // SAFETY: writing one byte to our own pipe.
        assert_eq!(unsafe { libc::write(w, [5u8].as_ptr().cast(), 1) }, 1);
    })
    .join()
    .unwrap();
    assert_eq!(reader.join().unwrap(), (1, 5));
    // SAFETY: closing our own descriptors.
    unsafe {
        libc::close(p[0]);
        libc::close(p[1]);
        libc::close(sv[1]);
    }
    true
}

#[test]
fn fclose_of_an_fdopened_socket_forgets_it() {
    let _one = one_at_a_time();
    let _dog = watchdog("fclose_of_an_fdopened_socket_forgets_it", LIMIT);
    reuse_by_a_pipe_after(|fd| {
        // SAFETY: a stream over our own socket, closed at once (which
        // closes the socket).
        unsafe {
            let fp = libc::fdopen(fd, c"r+".as_ptr());
            assert!(!fp.is_null());
            assert_eq!(libc::fclose(fp), 0);
        }
    });
}

#[test]
fn close_range_forgets_what_it_closes() {
    let _one = one_at_a_time();
    let _dog = watchdog("close_range_forgets_what_it_closes", LIMIT);
    reuse_by_a_pipe_after(|fd| {
        // SAFETY: closing our own socket (only it) by range.
        assert_eq!(unsafe { libc::close_range(fd as u32, fd as u32, 0) }, 0);
    });
}

/// 300 times: a managed, registered socket is duplicated and closed with
/// raw system calls (the file lives on under the duplicate; its epoll
/// entry, which holds a pointer to the hooks' state, too), and a new
/// socket takes the number. Then every old file gets an event. The hooks'
/// states for the old files must still be alive: they are abandoned, not
/// freed (freed states were reused memory for the poller to write to).
#[test]
fn a_registration_outliving_a_raw_close_is_not_freed() {
    let _one = one_at_a_time();
    let _dog = watchdog("a_registration_outliving_a_raw_close_is_not_freed", LIMIT);
    raise_fd_limit(4096);
    let rt = strict_runtime(1);
    let before = weft::transparent::abandoned_registrations();
    let mut kept = Vec::new();
    for _ in 0..300 {
        let sv = socketpair();
        make_managed(&rt, sv[0], sv[1]);
        // SAFETY: raw dup and close of our own socket: no hook sees them.
        let (dup, new) = unsafe {
            let dup = libc::syscall(libc::SYS_dup, sv[0]) as i32;
            assert!(dup >= 0);
            assert_eq!(libc::syscall(libc::SYS_close, sv[0]), 0);
            (dup, libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0))
        };
        assert_eq!(new, sv[0], "the new socket did not take the number");
        kept.push((dup, sv[1], new));
    }
    // Let freed memory be reused, then make every old file readable.
    let junk: Vec<Vec<u8>> = (0..2000).map(|i| vec![0xA5; 64 + i % 128]).collect();
    for &(_, peer, _) in &kept {
        // SAFETY: writing to our own socket.
        assert_eq!(unsafe { libc::write(peer, [1u8].as_ptr().cast(), 1) }, 1);
    }
    // The poller handles those events (a sleep lets the carrier poll).
    rt.spawn(|| std::thread::sleep(Duration::from_millis(50)))
        .join()
        .unwrap();
    drop(junk);
    assert!(
        weft::transparent::abandoned_registrations() >= before + 300,
        "the old files' states were not kept"
    );
    for (dup, peer, new) in kept {
        // SAFETY: closing our own descriptors.
        unsafe {
            libc::close(dup);
            libc::close(peer);
            libc::close(new);
        }
    }
}
