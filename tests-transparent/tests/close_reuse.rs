//! A socket closed under a virtual thread parked in `read`, its number
//! given to another socket before the reader runs again (a thread shutting
//! a connection down while another reads it): the woken reader ends with
//! `EBADF` and never touches the number again. The kernel keeps the old
//! file for a call in progress and never reads the file that took the
//! number; before, the reader ran its `read` on the new socket and blocked
//! its carrier there. Its own binary: it reuses descriptor numbers.

use weft_transparent_tests::{one_at_a_time, parked_in, socketpair, strict_runtime};

#[test]
fn a_reader_woken_by_close_never_reads_the_socket_that_took_its_number() {
    let _one = one_at_a_time();
    let old = socketpair();
    let fd = old[0];
    let new = socketpair();
    let rt = strict_runtime(1);
    let reader = rt.spawn(move || {
        let mut b = [0u8; 4];
        // SAFETY: reading into a local buffer.
        let r = unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) };
        (r, std::io::Error::last_os_error().raw_os_error())
    });
    parked_in(&reader, "read");
    // On the reader's only carrier, so the reader cannot run between the
    // close and the reuse.
    rt.spawn(move || {
        // SAFETY: closing the reader's socket (the test's own), then
        // putting a blocking socket of the test's on its number.
        unsafe {
            assert_eq!(libc::close(fd), 0);
            assert_eq!(libc::dup2(new[0], fd), fd);
        }
    })
    .join()
    .unwrap();
    // Data for the socket now behind the number. A reader that reads it
    // (or blocks its carrier on it until this arrives) took another
    // connection's bytes.
    // SAFETY: writing one byte from a local.
    assert_eq!(unsafe { libc::write(new[1], b"x".as_ptr().cast(), 1) }, 1);
    assert_eq!(reader.join().unwrap(), (-1, Some(libc::EBADF)));
    // The byte is still there for its own reader.
    let mut b = [0u8; 1];
    // SAFETY: a non-blocking read into a local.
    let r = unsafe { libc::recv(fd, b.as_mut_ptr().cast(), 1, libc::MSG_DONTWAIT) };
    assert_eq!((r, b[0]), (1, b'x'));
    // SAFETY: closing the test's own descriptors.
    unsafe {
        libc::close(fd);
        libc::close(new[0]);
        libc::close(new[1]);
        libc::close(old[1]);
    }
}
