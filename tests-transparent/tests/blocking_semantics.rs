//! What a blocking call on a socket promises, kept on a socket Weft made
//! non-blocking: `recv(MSG_WAITALL)` waits for all of its length, a
//! blocking stream `send`/`write` returns when all of it is written, and a
//! signal whose handler asked for `SA_RESTART` does not end a blocking
//! `recv` made on an OS thread with `EINTR`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;
use weft_transparent_tests::{parked_in, socketpair, strict_runtime, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (c, l.accept().unwrap().0)
}

/// The peer sends 100 bytes in two parts of 50, the second once the
/// receiver is parked; `recv(MSG_WAITALL)` returns all 100.
#[test]
fn recv_waitall_waits_for_all_of_it() {
    let _dog = watchdog("recv_waitall_waits_for_all_of_it", LIMIT);
    let rt = strict_runtime(1);
    let (c, mut peer) = tcp_pair();
    peer.write_all(&[1; 50]).unwrap();
    let r = rt.spawn(move || {
        let mut b = [0u8; 100];
        // SAFETY: a 100-byte buffer.
        let n = unsafe { libc::recv(c.as_raw_fd(), b.as_mut_ptr().cast(), 100, libc::MSG_WAITALL) };
        (n, b)
    });
    parked_in(&r, "recv");
    peer.write_all(&[2; 50]).unwrap();
    let (n, b) = r.join().unwrap();
    assert_eq!(n, 100, "recv(MSG_WAITALL) returned a short count");
    assert!(b[..50].iter().all(|&x| x == 1) && b[50..].iter().all(|&x| x == 2));
}

/// End of file after part of a `MSG_WAITALL` read returns that part.
#[test]
fn recv_waitall_returns_the_part_before_end_of_file() {
    let _dog = watchdog("recv_waitall_returns_the_part_before_end_of_file", LIMIT);
    let rt = strict_runtime(1);
    let (c, mut peer) = tcp_pair();
    peer.write_all(&[1; 30]).unwrap();
    let r = rt.spawn(move || {
        let mut b = [0u8; 100];
        // SAFETY: a 100-byte buffer.
        unsafe { libc::recv(c.as_raw_fd(), b.as_mut_ptr().cast(), 100, libc::MSG_WAITALL) }
    });
    parked_in(&r, "recv");
    drop(peer);
    assert_eq!(r.join().unwrap(), 30);
}

/// One `send` of 4 MiB, and one `write` of 4 MiB (far more than the socket
/// buffers), each read by a thread of the same carrier once the writer is
/// parked: each returns the whole length.
#[test]
fn a_blocking_send_and_write_move_all_of_it() {
    let _dog = watchdog("a_blocking_send_and_write_move_all_of_it", LIMIT);
    const LEN: usize = 4 << 20;
    let rt = strict_runtime(1);
    for call in ["send", "write"] {
        let sv = socketpair();
        let w = rt.spawn(move || {
            let data = vec![9u8; LEN];
            // SAFETY: writing from our own buffer.
            unsafe {
                if call == "send" {
                    libc::send(sv[0], data.as_ptr().cast(), LEN, 0)
                } else {
                    libc::write(sv[0], data.as_ptr().cast(), LEN)
                }
            }
        });
        parked_in(&w, call);
        let r = rt.spawn(move || {
            let mut total = 0;
            let mut b = vec![0u8; 1 << 16];
            while total < LEN {
                // SAFETY: reading into our own buffer.
                let n = unsafe { libc::read(sv[1], b.as_mut_ptr().cast(), b.len()) };
                assert!(n > 0);
                total += n as usize;
            }
            total
        });
        assert_eq!(
            w.join().unwrap(),
            LEN as isize,
            "{call} returned a short count"
        );
        assert_eq!(r.join().unwrap(), LEN);
        // SAFETY: our own descriptors.
        unsafe {
            libc::close(sv[0]);
            libc::close(sv[1]);
        }
    }
}

static HANDLED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_usr1(_: i32) {
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

/// An OS thread blocked in `recv` on a socket Weft made non-blocking (it
/// waits in `poll`) is hit by signals whose handler has `SA_RESTART`: the
/// kernel would restart a blocking `recv`, so the call goes on and returns
/// the data sent afterwards.
#[test]
fn sa_restart_restarts_a_recv_on_an_os_thread() {
    let _dog = watchdog("sa_restart_restarts_a_recv_on_an_os_thread", LIMIT);
    // SAFETY: installing a handler that only counts, with SA_RESTART.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    let rt = strict_runtime(1);
    let (mut c, mut peer) = tcp_pair();
    // A virtual thread's read makes the socket Weft's (non-blocking).
    peer.write_all(b"x").unwrap();
    let fd = c.as_raw_fd();
    c = rt
        .spawn(move || {
            let mut b = [0u8; 1];
            c.read_exact(&mut b).unwrap();
            c
        })
        .join()
        .unwrap();
    // SAFETY: fcntl on an open descriptor, raw (the hooked one hides it).
    let fl = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL) } as i32;
    assert_ne!(fl & libc::O_NONBLOCK, 0, "the socket is not Weft's");
    let ready = Arc::new(Barrier::new(2));
    let done = Arc::new(AtomicBool::new(false));
    let (r2, d2) = (ready.clone(), done.clone());
    let reader = std::thread::spawn(move || {
        r2.wait();
        let mut b = [0u8; 4];
        // SAFETY: a 4-byte buffer.
        let n = unsafe { libc::recv(c.as_raw_fd(), b.as_mut_ptr().cast(), 4, 0) };
        let e = std::io::Error::last_os_error().raw_os_error();
        d2.store(true, Ordering::SeqCst);
        (n, e, b)
    });
    // The reader thread's pthread id, valid until it is joined.
    let tid = reader.as_pthread_t();
    ready.wait();
    // Signals while the reader waits (at least 20 handled, 2 ms apart).
    let before = HANDLED.load(Ordering::Relaxed);
    while HANDLED.load(Ordering::Relaxed) < before + 20 && !done.load(Ordering::SeqCst) {
        // SAFETY: signalling a live thread of ours.
        unsafe { libc::pthread_kill(tid, libc::SIGUSR1) };
        std::thread::sleep(Duration::from_millis(2));
    }
    peer.write_all(b"data").unwrap();
    let (n, e, b) = reader.join().unwrap();
    assert_eq!((n, &b), (4, b"data"), "recv ended early: errno {e:?}");
}

/// A blocking `connect` to a Unix listener whose backlog is full waits
/// until the listener accepts (the kernel's blocking connect), where a
/// non-blocking one fails with `EAGAIN`.
#[test]
fn a_unix_connect_to_a_full_backlog_waits() {
    use std::os::unix::net::{UnixListener, UnixStream};
    let _dog = watchdog("a_unix_connect_to_a_full_backlog_waits", LIMIT);
    let path = std::env::temp_dir().join(format!("weft-backlog-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let l = UnixListener::bind(&path).unwrap();
    // SAFETY: listen on our own socket: a backlog of one waiting connection.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
    let first = UnixStream::connect(&path).unwrap();
    let rt = strict_runtime(1);
    let p = path.clone();
    let c = rt.spawn(move || UnixStream::connect(&p).map(|_| ()).map_err(|e| e.kind()));
    parked_in(&c, "connect");
    let accepted = l.accept().unwrap();
    assert_eq!(c.join().unwrap(), Ok(()), "connect did not wait");
    drop((first, accepted, l));
    let _ = std::fs::remove_file(&path);
}
