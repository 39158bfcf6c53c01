//! An unconnected Unix datagram `sendto` to a receiver whose queue is
//! full waits until the receiver reads, as the kernel's blocking one does.
//!
//! The finding was that the park never ends: an unconnected sender has no
//! peer whose queue its writability could follow. It does end (this test
//! passed before any change): a non-blocking send that fails with
//! `EAGAIN` for a full receiver puts the sender on the receiver's
//! peer-wake queue (`unix_dgram_peer_wake_me`), so the receiver's read
//! wakes the sender's epoll entry with `EPOLLOUT`, which ends the park.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weft_transparent_tests::{strict_runtime, watchdog};

fn dgram() -> i32 {
    // SAFETY: socket has no preconditions.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0) };
    assert!(fd >= 0);
    fd
}

/// An abstract address unique to this process.
fn address(tag: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let name = format!("weft-dgram-{}-{tag}", std::process::id());
    for (i, b) in name.bytes().enumerate() {
        a.sun_path[i + 1] = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    (a, len as libc::socklen_t)
}

fn send_to(fd: i32, to: &(libc::sockaddr_un, libc::socklen_t), flags: i32) -> isize {
    let msg = [7u8; 64];
    // SAFETY: a valid buffer and address.
    unsafe {
        libc::sendto(
            fd,
            msg.as_ptr().cast(),
            msg.len(),
            flags,
            (&to.0 as *const libc::sockaddr_un).cast(),
            to.1,
        )
    }
}

#[test]
fn an_unconnected_datagram_send_to_a_full_receiver_waits_for_room() {
    let _w = watchdog(
        "an_unconnected_datagram_send_to_a_full_receiver_waits_for_room",
        Duration::from_secs(60),
    );
    let rx = dgram();
    let to = address("rx");
    // SAFETY: bind to our own abstract address.
    let r = unsafe { libc::bind(rx, (&to.0 as *const libc::sockaddr_un).cast(), to.1) };
    assert_eq!(r, 0);
    let tx = dgram();
    // Fill the receiver's queue.
    let mut queued = 0;
    while send_to(tx, &to, libc::MSG_DONTWAIT) > 0 {
        queued += 1;
    }
    assert!(queued > 0);
    let rt = strict_runtime(1);
    let sent = Arc::new(AtomicBool::new(false));
    let sender = {
        let sent = sent.clone();
        rt.spawn(move || {
            let r = send_to(tx, &to, 0);
            sent.store(true, Ordering::SeqCst);
            r
        })
    };
    // The carrier is free while the sender waits: another thread runs.
    rt.spawn(|| std::thread::sleep(Duration::from_millis(20)))
        .join()
        .unwrap();
    assert!(!sent.load(Ordering::SeqCst), "the queue is still full");
    // Drain it: the sender's datagram then goes through.
    let mut buf = [0u8; 128];
    for _ in 0..queued {
        // SAFETY: a valid buffer.
        let n = unsafe { libc::recv(rx, buf.as_mut_ptr().cast(), buf.len(), 0) };
        assert_eq!(n, 64);
    }
    assert_eq!(sender.join().unwrap(), 64);
    // SAFETY: a valid buffer; the sender's datagram.
    let n = unsafe { libc::recv(rx, buf.as_mut_ptr().cast(), buf.len(), 0) };
    assert_eq!(n, 64);
    // SAFETY: our own descriptors.
    unsafe {
        libc::close(tx);
        libc::close(rx);
    }
}
