//! `weft::net`: sockets that park virtual threads.
//!
//! Every network target is loopback. Waits are bounded: sockets get read or
//! write timeouts where a bug could otherwise hang the test, and waits for
//! another thread's state poll with a deadline.
//!
//! Run: `cargo test -p weft --release --test net`.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use weft::net::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream};

/// A safety net for reads/writes that should complete: a bug fails the
/// test with TimedOut instead of hanging it.
const SAFETY: Duration = Duration::from_secs(60);

fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// A connected (client, server) pair.
fn tcp_pair() -> (TcpStream, TcpStream) {
    let (l, a) = listener();
    let c = TcpStream::connect(a).unwrap();
    let (s, peer) = l.accept().unwrap();
    assert_eq!(peer, c.local_addr().unwrap());
    for x in [&c, &s] {
        x.set_read_timeout(Some(SAFETY)).unwrap();
        x.set_write_timeout(Some(SAFETY)).unwrap();
    }
    (c, s)
}

/// Polls `cond` until it holds, failing after 30 s.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until `t` is parked on a socket in direction `read`.
fn wait_blocked_on_io(t: &weft::Thread, read: bool) {
    wait_until(
        "the thread to block on a socket",
        || matches!(t.blocker(), weft::Blocker::Io { read: r, .. } if r == read),
    );
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed.wrapping_mul(7)) % 251) as u8)
        .collect()
}

/// Spawns an echo server (one virtual thread per connection). Returns its
/// address and the acceptor thread (interrupt it to stop the server).
fn echo_server() -> (SocketAddr, weft::JoinHandle<usize>) {
    let (l, a) = listener();
    let h = weft::spawn(move || {
        let mut served = 0;
        loop {
            let mut s = match l.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == ErrorKind::Interrupted => return served,
                Err(e) => panic!("accept: {e}"),
            };
            served += 1;
            weft::spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    (a, h)
}

fn stop(acceptor: weft::JoinHandle<usize>) -> usize {
    wait_blocked_on_io(acceptor.thread(), true);
    acceptor.thread().interrupt();
    acceptor.join().unwrap()
}

#[test]
fn echo_2000_concurrent_connections() {
    const N: usize = 2000;
    let (addr, acceptor) = echo_server();
    // Every client connects, then waits for all the others before it
    // talks: 2,000 connections are open at once.
    let all_connected = Arc::new(weft::sync::CountDownLatch::new(N));
    let clients: Vec<_> = (0..N)
        .map(|i| {
            let all_connected = all_connected.clone();
            weft::spawn(move || -> io::Result<()> {
                let mut s = TcpStream::connect(addr)?;
                s.set_read_timeout(Some(SAFETY))?;
                s.set_write_timeout(Some(SAFETY))?;
                all_connected.count_down();
                assert!(
                    all_connected.wait_timeout(SAFETY)?,
                    "not all clients connected"
                );
                let len = 100 + (i * 37) % 4000;
                let mut payload = pattern(i as u64, len);
                payload[..8].copy_from_slice(&(i as u64).to_le_bytes());
                s.write_all(&payload)?;
                let mut back = vec![0u8; len];
                s.read_exact(&mut back)?;
                assert_eq!(back, payload, "client {i} got another payload back");
                s.shutdown(Shutdown::Write)?;
                let mut rest = Vec::new();
                s.read_to_end(&mut rest)?;
                assert!(rest.is_empty());
                Ok(())
            })
        })
        .collect();
    for (i, c) in clients.into_iter().enumerate() {
        c.join()
            .unwrap()
            .unwrap_or_else(|e| panic!("client {i}: {e}"));
    }
    assert_eq!(stop(acceptor), N);
}

#[test]
fn read_timeout_times_out_after_at_least_the_timeout() {
    for on_virtual in [true, false] {
        let run = move || {
            let (c, _s) = tcp_pair();
            assert_eq!(
                c.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(),
                ErrorKind::InvalidInput
            );
            let t = Duration::from_millis(150);
            c.set_read_timeout(Some(t)).unwrap();
            assert_eq!(c.read_timeout().unwrap(), Some(t));
            let start = Instant::now();
            let e = (&c).read(&mut [0u8; 16]).unwrap_err();
            let took = start.elapsed();
            assert_eq!(e.kind(), ErrorKind::TimedOut);
            assert!(took >= t, "timed out after {took:?} < {t:?}");
            // peek obeys the read timeout too.
            assert_eq!(
                c.peek(&mut [0u8; 4]).unwrap_err().kind(),
                ErrorKind::TimedOut
            );
            c.set_read_timeout(None).unwrap();
            assert_eq!(c.read_timeout().unwrap(), None);
        };
        if on_virtual {
            weft::spawn(run).join().unwrap();
        } else {
            std::thread::spawn(run).join().unwrap();
        }
    }
}

#[test]
fn write_timeout_with_a_peer_that_does_not_read() {
    weft::spawn(|| {
        let (c, _s) = tcp_pair(); // `_s` never reads
        let t = Duration::from_millis(200);
        c.set_write_timeout(Some(t)).unwrap();
        assert_eq!(c.write_timeout().unwrap(), Some(t));
        let chunk = vec![7u8; 64 * 1024];
        let mut total = 0usize;
        loop {
            let start = Instant::now();
            match (&c).write(&chunk) {
                Ok(n) => total += n,
                Err(e) => {
                    let took = start.elapsed();
                    assert_eq!(e.kind(), ErrorKind::TimedOut, "after {total} bytes");
                    assert!(took >= t, "timed out after {took:?} < {t:?}");
                    break;
                }
            }
            assert!(total < 1 << 30, "1 GiB written to a peer that never reads");
        }
        assert!(total > 0);
    })
    .join()
    .unwrap();
}

#[test]
fn connect_refused_and_connect_timeout() {
    weft::spawn(|| {
        // A loopback port with nobody listening.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let e = TcpStream::connect(closed).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
        let e = TcpStream::connect_timeout(&closed, Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");

        let (l, a) = listener();
        let c = TcpStream::connect_timeout(&a, Duration::from_secs(5)).unwrap();
        let (s, _) = l.accept().unwrap();
        assert_eq!(c.peer_addr().unwrap(), a);
        assert_eq!(s.peer_addr().unwrap(), c.local_addr().unwrap());
        let e = TcpStream::connect_timeout(&a, Duration::ZERO).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);

        // Several addresses: the first that works is used, like std.
        let addrs = [closed, a];
        let c2 = TcpStream::connect(&addrs[..]).unwrap();
        assert_eq!(c2.peer_addr().unwrap(), a);
        // Host names resolve.
        let c3 = TcpStream::connect(("localhost", a.port()));
        // "localhost" may resolve to ::1 first; the IPv4 listener takes the
        // 127.0.0.1 attempt.
        assert_eq!(c3.unwrap().peer_addr().unwrap().port(), a.port());
    })
    .join()
    .unwrap();
}

#[test]
fn accept_parks_while_the_single_carrier_runs_other_work() {
    let rt = weft::Runtime::builder().parallelism(1).build().unwrap();
    let (l, a) = listener();
    let acceptor = rt.spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 5];
        s.read_exact(&mut b).unwrap();
        b
    });
    wait_blocked_on_io(acceptor.thread(), true);
    // The only carrier is free: other virtual threads run and finish while
    // the acceptor waits.
    let ran = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..100)
        .map(|_| {
            let ran = ran.clone();
            rt.spawn(move || {
                for _ in 0..10 {
                    weft::yield_now();
                }
                ran.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(ran.load(Ordering::SeqCst), 100);
    assert!(
        !acceptor.is_finished(),
        "accept returned without a connection"
    );
    let mut c = std::net::TcpStream::connect(a).unwrap();
    c.write_all(b"hello").unwrap();
    assert_eq!(&acceptor.join().unwrap(), b"hello");
}

#[test]
fn half_close() {
    weft::spawn(|| {
        let (mut c, mut s) = tcp_pair();
        c.write_all(b"request").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap(); // EOF after "request"
        assert_eq!(got, b"request");
        // The other direction still works.
        s.write_all(b"response").unwrap();
        drop(s);
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"response");
        // Writing on the shut-down half fails.
        assert!(c.write_all(b"x").is_err());
    })
    .join()
    .unwrap();
}

#[test]
fn interrupt_of_a_blocked_read_returns_interrupted_and_shuts_the_socket_down() {
    let (c, mut s) = tcp_pair();
    let reader = weft::spawn(move || {
        let mut c = c;
        let e = c.read(&mut [0u8; 16]).unwrap_err();
        assert!(!weft::current().is_interrupted(), "flag not cleared");
        // The socket is shut down: std's retrying helpers end instead of
        // blocking again.
        let e2 = c.read_exact(&mut [0u8; 16]).unwrap_err();
        assert_eq!(c.read(&mut [0u8; 16]).unwrap(), 0);
        assert!(c.write_all(b"x").is_err());
        (e.kind(), e2.kind())
    });
    wait_blocked_on_io(reader.thread(), true);
    reader.thread().interrupt();
    let (e, e2) = reader.join().unwrap();
    assert_eq!(e, ErrorKind::Interrupted);
    assert_eq!(e2, ErrorKind::UnexpectedEof);
    // The peer sees the connection closed.
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());

    // read_exact (which retries on Interrupted) ends with EOF too.
    let (c, _s) = tcp_pair();
    let reader = weft::spawn(move || (&c).read_exact(&mut [0u8; 16]).unwrap_err().kind());
    wait_blocked_on_io(reader.thread(), true);
    reader.thread().interrupt();
    assert_eq!(reader.join().unwrap(), ErrorKind::UnexpectedEof);

    // An OS thread blocked in a weft read is interrupted the same way.
    let (c, _s) = tcp_pair();
    let (tx, rx) = std::sync::mpsc::channel();
    let os = std::thread::spawn(move || {
        tx.send(weft::current()).unwrap();
        (&c).read(&mut [0u8; 16]).unwrap_err().kind()
    });
    let t = rx.recv().unwrap();
    wait_blocked_on_io(&t, true);
    t.interrupt();
    assert_eq!(os.join().unwrap(), ErrorKind::Interrupted);

    // A blocked accept too (the listener is then shut down).
    let (l, _a) = listener();
    let acceptor = weft::spawn(move || {
        let e = l.accept().unwrap_err().kind();
        (e, l.accept().is_err())
    });
    wait_blocked_on_io(acceptor.thread(), true);
    acceptor.thread().interrupt();
    assert_eq!(acceptor.join().unwrap(), (ErrorKind::Interrupted, true));
}

#[test]
fn full_duplex_10mb_each_way() {
    const LEN: usize = 10 << 20;
    let (c, s) = tcp_pair();
    let (c, s) = (Arc::new(c), Arc::new(s));
    let s2 = s.try_clone().unwrap(); // one side through a clone, one through &TcpStream
    let a_to_b = pattern(1, LEN);
    let b_to_a = pattern(2, LEN);
    fn writer(mut w: impl Write, data: Vec<u8>) -> usize {
        for chunk in data.chunks(100_000) {
            w.write_all(chunk).unwrap();
        }
        data.len()
    }
    fn reader(mut r: impl Read, expect: Vec<u8>) -> usize {
        let mut got = vec![0u8; expect.len()];
        r.read_exact(&mut got).unwrap();
        assert!(got == expect, "corrupted stream");
        got.len()
    }
    let hs = vec![
        {
            let (c, d) = (c.clone(), a_to_b.clone());
            weft::spawn(move || writer(&*c, d))
        },
        {
            let (c, d) = (c.clone(), b_to_a.clone());
            weft::spawn(move || reader(&*c, d))
        },
        weft::spawn(move || writer(&*s, b_to_a)),
        weft::spawn(move || reader(s2, a_to_b)),
    ];
    for h in hs {
        assert_eq!(h.join().unwrap(), LEN);
    }
}

#[test]
fn udp_echo() {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let saddr = server.local_addr().unwrap();
    server.set_read_timeout(Some(SAFETY)).unwrap();
    const N: usize = 200;
    let srv = weft::spawn(move || {
        let mut buf = [0u8; 2048];
        for _ in 0..N {
            let (n, from) = server.recv_from(&mut buf).unwrap();
            server.send_to(&buf[..n], from).unwrap();
        }
    });
    let client = weft::spawn(move || {
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(SAFETY)).unwrap();
        c.connect(saddr).unwrap();
        assert_eq!(c.peer_addr().unwrap(), saddr);
        let mut buf = [0u8; 2048];
        for i in 0..N {
            let msg = pattern(i as u64, 1 + i * 7);
            assert_eq!(c.send(&msg).unwrap(), msg.len());
            // Peek first, then receive: both see the same datagram.
            let (n, from) = c.peek_from(&mut buf).unwrap();
            assert_eq!((&buf[..n], from), (&msg[..], saddr));
            let n = c.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &msg[..]);
        }
    });
    client.join().unwrap();
    srv.join().unwrap();

    // Timeouts, options.
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let start = Instant::now();
    assert_eq!(
        u.recv_from(&mut [0u8; 8]).unwrap_err().kind(),
        ErrorKind::TimedOut
    );
    assert!(start.elapsed() >= Duration::from_millis(50));
    u.set_broadcast(true).unwrap();
    assert!(u.broadcast().unwrap());
    u.set_ttl(42).unwrap();
    assert_eq!(u.ttl().unwrap(), 42);
    assert!(u.take_error().unwrap().is_none());

    // An interrupted recv fails later calls instead of blocking forever.
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    let h = weft::spawn(move || {
        let e = u.recv(&mut [0u8; 8]).unwrap_err().kind();
        (e, u.recv(&mut [0u8; 8]).unwrap_err().kind())
    });
    wait_blocked_on_io(h.thread(), true);
    h.thread().interrupt();
    assert_eq!(
        h.join().unwrap(),
        (ErrorKind::Interrupted, ErrorKind::NotConnected)
    );
}

fn temp_sock(name: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("weft-net-{}-{name}.sock", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

#[test]
fn unix_stream_echo() {
    let path = temp_sock("echo");
    let l = UnixListener::bind(&path).unwrap();
    assert_eq!(l.local_addr().unwrap().as_pathname(), Some(path.as_path()));
    const N: usize = 200;
    let acceptor = weft::spawn(move || {
        for s in l.incoming().take(N) {
            let mut s = s.unwrap();
            weft::spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => s.write_all(&buf[..n]).unwrap(),
                    }
                }
            });
        }
    });
    let clients: Vec<_> = (0..N)
        .map(|i| {
            let path = path.clone();
            weft::spawn(move || {
                let mut s = UnixStream::connect(&path).unwrap();
                s.set_read_timeout(Some(SAFETY)).unwrap();
                let msg = pattern(i as u64, 10_000 + i);
                s.write_all(&msg).unwrap();
                s.shutdown(Shutdown::Write).unwrap();
                let mut back = Vec::new();
                s.read_to_end(&mut back).unwrap();
                assert_eq!(back, msg);
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    acceptor.join().unwrap();
    std::fs::remove_file(&path).unwrap();

    // pair(), full duplex across two threads, timeouts.
    let (a, b) = UnixStream::pair().unwrap();
    let b = Arc::new(b);
    let b2 = b.clone();
    let h = weft::spawn(move || {
        let mut got = vec![0u8; 1 << 20];
        (&*b2).read_exact(&mut got).unwrap();
        got
    });
    let w = weft::spawn(move || {
        (&a).write_all(&pattern(9, 1 << 20)).unwrap();
        a
    });
    assert_eq!(h.join().unwrap(), pattern(9, 1 << 20));
    let a = w.join().unwrap();
    b.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
    assert_eq!(
        (&*b).read(&mut [0u8; 1]).unwrap_err().kind(),
        ErrorKind::TimedOut
    );
    drop(a);
    assert_eq!((&*b).read(&mut [0u8; 1]).unwrap(), 0);

    // Datagrams.
    let (x, y) = UnixDatagram::pair().unwrap();
    weft::spawn(move || {
        x.send(b"dgram").unwrap();
        let mut buf = [0u8; 16];
        let n = y.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"dgram");
    })
    .join()
    .unwrap();
    let p1 = temp_sock("d1");
    let d1 = UnixDatagram::bind(&p1).unwrap();
    let d2 = UnixDatagram::unbound().unwrap();
    d2.send_to(b"to-path", &p1).unwrap();
    let mut buf = [0u8; 16];
    let (n, from) = d1.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"to-path");
    assert!(from.is_unnamed());
    std::fs::remove_file(&p1).unwrap();
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn rss_bytes() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// 50 virtual threads open and close `total` connections to a server that
/// answers one byte per connection.
///
/// No read timeouts here: a timed park leaves an entry in the carrier's
/// timer heap until its deadline (by design, see `sched/timers.rs`), which would
/// hold memory for the length of the timeout and blur the measurement. The
/// child process has a watchdog instead.
fn churn(addr: SocketAddr, total: usize) {
    const CLIENTS: usize = 50;
    let hs: Vec<_> = (0..CLIENTS)
        .map(|_| {
            weft::spawn(move || {
                for _ in 0..total / CLIENTS {
                    let mut s = TcpStream::connect(addr).unwrap();
                    s.write_all(b"?").unwrap();
                    let mut b = [0u8; 1];
                    s.read_exact(&mut b).unwrap();
                    assert_eq!(&b, b"!");
                    // Close with a reset: no TIME_WAIT, so 100k connections
                    // do not exhaust loopback's ephemeral ports.
                    socket2::SockRef::from(&s)
                        .set_linger(Some(Duration::ZERO))
                        .unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

const LEAK_CHILD: &str = "WEFT_NET_LEAK_CHILD";

/// Server handlers alive at once in the leak check, at most.
const LIVE_HANDLERS: usize = 64;

/// Descriptors, poller registrations and RSS after one round of
/// connections.
#[derive(Debug)]
struct Usage {
    fds: usize,
    registered: usize,
    rss: usize,
}

fn usage() -> Usage {
    Usage {
        fds: open_fds(),
        registered: weft::metrics::snapshot().sockets_registered,
        rss: rss_bytes(),
    }
}

/// Descriptor and memory counts are per process, so this test re-runs
/// itself alone in a child process (other tests would disturb them).
///
/// The check holds on a loaded machine: it does not depend on how long the
/// churn takes nor on how many connections overlap. Memory a process keeps
/// after a peak of concurrency (stacks, allocator arenas) is not a leak,
/// so the acceptor holds at most [`LIVE_HANDLERS`] handlers at once (on a
/// busy machine handlers otherwise pile up behind the acceptor), the
/// child's stall threshold is long enough that OS preemption does not make
/// the monitor start spare carriers, and the leak is read as a slope: the
/// growth over a second round of 50,000 connections after a first, both
/// after the warm-up has reached the peak. A leak grows every round alike.
#[test]
fn no_fd_or_memory_leak_after_100k_connections() {
    if std::env::var_os(LEAK_CHILD).is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "no_fd_or_memory_leak_after_100k_connections",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(LEAK_CHILD, "1")
            .env("WEFT_STALL_THRESHOLD", "10s")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "child failed ({}):\n{text}",
            out.status
        );
        assert!(
            text.contains("leak-check: ok"),
            "child ran no check:\n{text}"
        );
        return;
    }
    // Abort the child if no connection is accepted for two minutes.
    let dog =
        weft_bench_support::watchdog::Watchdog::new("leak-check", Duration::from_secs(120), || {
            "leak-check: no connection accepted".into()
        });
    let progress = dog.progress();
    let (l, addr) = listener();
    let live = Arc::new(AtomicUsize::new(0));
    let live2 = live.clone();
    let acceptor = weft::spawn(move || {
        let mut served = 0usize;
        loop {
            while live2.load(Ordering::SeqCst) >= LIVE_HANDLERS {
                weft::yield_now();
            }
            let (mut s, _) = match l.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::Interrupted => return served,
                Err(e) => panic!("accept: {e}"),
            };
            served += 1;
            progress.tick();
            live2.fetch_add(1, Ordering::SeqCst);
            let live = live2.clone();
            weft::spawn(move || {
                let mut b = [0u8; 1];
                s.read_exact(&mut b).unwrap();
                s.write_all(b"!").unwrap();
                // Wait for the client's reset (or EOF).
                let _ = s.read(&mut b);
                drop(s);
                live.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    let round = |connections: usize| {
        churn(addr, connections);
        wait_until("server handlers to finish", || {
            live.load(Ordering::SeqCst) == 0
        });
        usage()
    };
    // Warm up: pools, stacks, allocator arenas.
    round(10_000);
    // And the symbol tables a stall event or a dump loads once (a debug
    // binary's DWARF takes tens of MiB): a dump resolves the acceptor's
    // stack.
    assert!(!weft::dump().threads.is_empty());
    let start = Instant::now();
    let before = round(10_000);
    let first = round(50_000);
    let second = round(50_000);
    eprintln!(
        "2 x 50k connections in {:?}: {before:?} -> {first:?} -> {second:?}",
        start.elapsed()
    );

    for after in [&first, &second] {
        assert_eq!(after.fds, before.fds, "descriptors leaked");
        assert_eq!(
            after.registered, before.registered,
            "poller registrations leaked"
        );
    }
    // 50,000 connections: a leak of 170 bytes each would show.
    let grown = second.rss.saturating_sub(first.rss);
    assert!(
        grown < 8 << 20,
        "RSS grew by {} KiB over the second 50,000 connections",
        grown >> 10
    );
    assert_eq!(stop(acceptor), 120_000);
    eprintln!("leak-check: ok");
}

#[test]
fn os_threads_block_like_std() {
    let (l, a) = listener();
    let got_conn = Arc::new(AtomicBool::new(false));
    let g = got_conn.clone();
    // A plain OS thread blocks in accept and read.
    let server = std::thread::spawn(move || {
        assert!(!weft::is_virtual());
        let (mut s, _) = l.accept().unwrap();
        g.store(true, Ordering::SeqCst);
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
        buf
    });
    let mut c = std::net::TcpStream::connect(a).unwrap();
    wait_until("accept", || got_conn.load(Ordering::SeqCst));
    c.write_all(b"hello").unwrap();
    let mut back = [0u8; 5];
    c.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"hello");
    assert_eq!(&server.join().unwrap(), b"hello");

    // Weft and std sockets convert both ways and keep working.
    let (c, s) = tcp_pair();
    let mut c_std = c.into_std().unwrap();
    assert_eq!(c_std.read_timeout().unwrap(), Some(SAFETY));
    c_std.write_all(b"std").unwrap();
    let mut buf = [0u8; 3];
    (&s).read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"std");
    let mut c = TcpStream::from(c_std);
    assert_eq!(c.read_timeout().unwrap(), Some(SAFETY));
    (&s).write_all(b"back").unwrap();
    let mut buf = [0u8; 4];
    c.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"back");
}

#[test]
fn stream_options_clone_and_peek() {
    weft::spawn(|| {
        let (c, s) = tcp_pair();
        c.set_nodelay(true).unwrap();
        assert!(c.nodelay().unwrap());
        c.set_ttl(33).unwrap();
        assert_eq!(c.ttl().unwrap(), 33);
        assert!(c.take_error().unwrap().is_none());
        (&c).write_all(b"peekaboo").unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(s.peek(&mut buf).unwrap(), 4);
        assert_eq!(&buf, b"peek");
        let s2 = s.try_clone().unwrap();
        assert_ne!(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            std::os::fd::AsRawFd::as_raw_fd(&s2)
        );
        assert_eq!(s2.read_timeout().unwrap(), Some(SAFETY)); // copied
        let mut all = [0u8; 8];
        (&s2).read_exact(&mut all).unwrap();
        assert_eq!(&all, b"peekaboo");
        s2.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
        assert_eq!(s.read_timeout().unwrap(), Some(SAFETY)); // per handle

        let (l, _) = listener();
        l.set_ttl(50).unwrap();
        assert_eq!(l.ttl().unwrap(), 50);
        let l2 = l.try_clone().unwrap();
        assert_eq!(l2.local_addr().unwrap(), l.local_addr().unwrap());
        let fd = std::os::fd::IntoRawFd::into_raw_fd(l2);
        // SAFETY: `fd` was just released by `into_raw_fd` and is owned here.
        drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
    })
    .join()
    .unwrap();
    let addrs: Vec<_> = weft::net::lookup_host("localhost:8080").unwrap().collect();
    assert!(
        addrs
            .iter()
            .all(|a| a.port() == 8080 && a.ip().is_loopback())
    );
    assert!(!addrs.is_empty());
}
