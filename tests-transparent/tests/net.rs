//! Steps 2-4: `std::net` on virtual threads parks on Weft's poller, with
//! the kernel's semantics (non-blocking, timeouts, errors, interrupts).

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weft_transparent_tests::{parked_in, strict_runtime};

fn listener() -> (TcpListener, std::net::SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// A `std::net` server and client on ONE carrier with no spares: without
/// the hooks the server's `accept` holds the carrier and the client never
/// runs (a hang); with them both park. The client sees the server parked
/// in `accept4` on the listener's descriptor, in the dump too.
#[test]
fn std_net_server_and_client_share_one_carrier() {
    let rt = strict_runtime(1);
    let (l, addr) = listener();
    let lfd = l.as_raw_fd();
    let server = rt.spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
        buf
    });
    let st = server.thread().clone();
    let client = rt.spawn(move || {
        let blocker = st.blocker();
        let dump = weft::dump().to_string();
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"hello").unwrap();
        let mut back = [0u8; 5];
        c.read_exact(&mut back).unwrap();
        (blocker, dump, back)
    });
    let (blocker, dump, back) = client.join().unwrap();
    assert_eq!(&server.join().unwrap(), b"hello");
    assert_eq!(&back, b"hello");
    assert_eq!(
        blocker,
        weft::Blocker::Call {
            call: "accept4",
            fd: lfd
        }
    );
    let want = format!("parked in accept4 on fd {lfd}");
    assert!(dump.contains(&want), "{want:?} not in dump:\n{dump}");
}

/// A read on a connected socket parks as "recv"; F_GETFL does not show the
/// O_NONBLOCK that Weft set; an OS thread reading the same socket later
/// blocks (no spurious EAGAIN).
#[test]
fn recv_parks_and_hides_weft_nonblocking() {
    let rt = strict_runtime(1);
    let (l, addr) = listener();
    let peer = std::thread::spawn(move || l.accept().unwrap().0);
    let c = TcpStream::connect(addr).unwrap();
    let mut p = peer.join().unwrap();
    let fd = c.as_raw_fd();
    let c = Arc::new(c);
    let c2 = c.clone();
    let reader = rt.spawn(move || {
        let mut b = [0u8; 3];
        (&*c2).read_exact(&mut b).unwrap();
        // SAFETY: fcntl on an open descriptor.
        let fl = unsafe { libc::fcntl(c2.as_raw_fd(), libc::F_GETFL) };
        (b, fl & libc::O_NONBLOCK)
    });
    // Wait for the park in `recv` (the read may first park briefly on a
    // lock of the hooks another test's carrier holds: a "futex" wait).
    parked_in(&reader, "recv");
    let blocker = reader.thread().blocker();
    p.write_all(b"abc").unwrap();
    let (b, nb) = reader.join().unwrap();
    assert_eq!(&b, b"abc");
    assert_eq!(nb, 0, "F_GETFL shows Weft's O_NONBLOCK");
    assert_eq!(blocker, weft::Blocker::Call { call: "recv", fd });
    // The kernel's flag is set; an OS thread's read must still block.
    let c3 = c.clone();
    let os = std::thread::spawn(move || {
        let mut b = [0u8; 2];
        (&*c3).read_exact(&mut b).map(|_| b)
    });
    std::thread::sleep(Duration::from_millis(30));
    p.write_all(b"xy").unwrap();
    assert_eq!(&os.join().unwrap().unwrap(), b"xy");
}

/// A socket the program made non-blocking still returns `WouldBlock`.
#[test]
fn user_nonblocking_gets_wouldblock() {
    let rt = strict_runtime(1);
    let (l, addr) = listener();
    let r = rt
        .spawn(move || {
            let c = TcpStream::connect(addr).unwrap();
            let _keep = l.accept().unwrap();
            c.set_nonblocking(true).unwrap();
            let e = (&c).read(&mut [0u8; 8]).unwrap_err().kind();
            // And back to blocking: now a read would park; a timeout ends it.
            c.set_nonblocking(false).unwrap();
            c.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            let e2 = (&c).read(&mut [0u8; 8]).unwrap_err().kind();
            // SAFETY: fcntl on an open descriptor.
            let fl = unsafe { libc::fcntl(c.as_raw_fd(), libc::F_GETFL) };
            (e, e2, fl & libc::O_NONBLOCK)
        })
        .join()
        .unwrap();
    assert_eq!(r, (ErrorKind::WouldBlock, ErrorKind::WouldBlock, 0));
}

/// `set_read_timeout` becomes the park's deadline: the read fails with
/// `WouldBlock` (EAGAIN, as the kernel's), and the carrier ran another
/// thread meanwhile.
#[test]
fn read_timeout_parks_then_eagain() {
    let rt = strict_runtime(1);
    let (l, addr) = listener();
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let a = rt.spawn(move || {
        let c = TcpStream::connect(addr).unwrap();
        let _keep = l.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let e = (&c).read(&mut [0u8; 8]).unwrap_err();
        (e.kind(), e.raw_os_error(), f.load(Ordering::SeqCst))
    });
    rt.spawn(move || flag.store(true, Ordering::SeqCst))
        .join()
        .unwrap();
    assert_eq!(
        a.join().unwrap(),
        (ErrorKind::WouldBlock, Some(libc::EAGAIN), true)
    );
}

/// `Thread::interrupt` ends a parked read with `EINTR`.
#[test]
fn interrupt_ends_read_with_eintr() {
    let rt = strict_runtime(1);
    let (l, addr) = listener();
    let a = rt.spawn(move || {
        let c = TcpStream::connect(addr).unwrap();
        let _keep = l.accept().unwrap();
        (&c).read(&mut [0u8; 8]).unwrap_err().kind()
    });
    let t = a.thread().clone();
    rt.spawn(move || {
        // `a` may first park elsewhere (its connect, or a futex wait on
        // one of std's locks): wait until it is in the read.
        let mut seen = Vec::new();
        while !matches!(t.blocker(), weft::Blocker::Call { call: "recv", .. }) {
            seen.push(format!("{:?}", t.blocker()));
            assert!(
                seen.len() < 100_000,
                "never parked in recv: {:?}",
                &seen[..10]
            );
            weft::yield_now();
        }
        t.interrupt()
    })
    .join()
    .unwrap();
    assert_eq!(a.join().unwrap(), ErrorKind::Interrupted);
}

/// `connect` errors come through (`ECONNREFUSED`), `connect_timeout` (which
/// polls) parks and connects, and `getaddrinfo` is answered.
#[test]
fn connect_errors_timeouts_and_dns() {
    let rt = strict_runtime(1);
    let (l, addr) = listener();
    let closed = {
        let (l2, a2) = listener();
        drop(l2);
        a2
    };
    let r = rt
        .spawn(move || {
            let refused = TcpStream::connect(closed).unwrap_err().kind();
            let ok = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_ok();
            let _keep = l.accept().unwrap();
            let resolved = ("localhost", 80).to_socket_addrs().map(|a| a.count() > 0);
            (refused, ok, resolved.unwrap_or(false))
        })
        .join()
        .unwrap();
    assert_eq!(r, (ErrorKind::ConnectionRefused, true, true));
}

/// `poll` on one socket and `epoll_wait` with a timeout park as well.
#[test]
fn poll_and_epoll_wait_park() {
    let rt = strict_runtime(1);
    let mut sv = [0i32; 2];
    // SAFETY: socketpair into a 2-int array.
    assert_eq!(
        unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) },
        0
    );
    let (a_fd, b_fd) = (sv[0], sv[1]);
    let waiter = rt.spawn(move || {
        let mut p = libc::pollfd {
            fd: a_fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, 10_000) };
        // SAFETY: epoll on a valid descriptor with a local event array.
        let n = unsafe {
            let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: 7,
            };
            libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, a_fd, &mut ev);
            let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
            let n = libc::epoll_wait(ep, out.as_mut_ptr(), 4, 10_000);
            libc::close(ep);
            n
        };
        (r, p.revents & libc::POLLIN != 0, n)
    });
    let t = waiter.thread().clone();
    rt.spawn(move || {
        assert_eq!(
            t.blocker(),
            weft::Blocker::Call {
                call: "poll",
                fd: a_fd
            }
        );
        // SAFETY: writing a local byte to an open socket.
        unsafe { libc::write(b_fd, b"x".as_ptr().cast(), 1) };
    })
    .join()
    .unwrap();
    assert_eq!(waiter.join().unwrap(), (1, true, 1));
    // SAFETY: both ends are ours.
    unsafe {
        libc::close(a_fd);
        libc::close(b_fd);
    }
}
