//! `weft::sim::net`: `weft::net`'s TCP between simulated hosts, in virtual
//! time — delivery, ordering, latency, refusal, end of file and reset,
//! timeouts, partitions, crashes, and replay by seed.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use weft::net::{TcpListener, TcpStream};
use weft::sim::net::{self, Link};
use weft::sync::Mutex;

const MS: Duration = Duration::from_millis(1);

/// Virtual time since the simulation began.
fn elapsed() -> Duration {
    weft::sim::elapsed().expect("inside a simulation")
}

/// Connects to `addr`, retrying while it is refused (the server's thread
/// may not have bound yet).
fn connect(addr: &str) -> TcpStream {
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return s,
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => weft::sleep(MS).unwrap(),
            Err(e) => panic!("connect {addr}: {e}"),
        }
    }
}

/// An echo server on host `name`, port 7: one thread per connection,
/// until the listener fails (its host crashed).
fn echo_server(name: &str) -> weft::JoinHandle<()> {
    net::host(name, || {
        let l = TcpListener::bind("0.0.0.0:7").unwrap();
        while let Ok((mut s, _)) = l.accept() {
            weft::spawn(move || {
                let mut buf = [0u8; 256];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
    })
    .unwrap()
}

#[test]
fn echo_between_hosts_with_addresses_and_names() {
    let r = weft::sim::run(1, || {
        let server = net::host("echo", || {
            assert_eq!(net::current_host().as_deref(), Some("echo"));
            let l = TcpListener::bind("0.0.0.0:7").unwrap();
            assert_eq!(l.local_addr().unwrap(), "0.0.0.0:7".parse().unwrap());
            let (mut s, peer) = l.accept().unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
            (peer, s.local_addr().unwrap())
        })
        .unwrap();
        assert_eq!(net::current_host().as_deref(), Some(net::DEFAULT_HOST));
        assert_eq!(
            net::lookup("echo").unwrap(),
            "10.0.0.1".parse::<std::net::IpAddr>().unwrap()
        );
        let mut c = connect("echo:7");
        c.write_all(b"hello").unwrap();
        let mut got = [0u8; 5];
        c.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        let (peer, server_local) = server.join().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        assert_eq!(peer.ip(), std::net::IpAddr::V4(net::DEFAULT_HOST_IP));
        assert_eq!(server_local, c.peer_addr().unwrap());
        assert_eq!(server_local, "10.0.0.1:7".parse::<SocketAddr>().unwrap());
    });
    r.unwrap();
}

#[test]
fn bytes_arrive_in_order_under_jitter() {
    let r = weft::sim::run(2, || {
        net::set_default_link(Link::new(MS).jitter(20 * MS)).unwrap();
        let server = net::host("sink", || {
            let l = TcpListener::bind("0.0.0.0:9").unwrap();
            let (mut s, _) = l.accept().unwrap();
            let mut all = Vec::new();
            s.read_to_end(&mut all).unwrap();
            all
        })
        .unwrap();
        let mut c = connect("sink:9");
        let mut sent = Vec::new();
        for i in 0..200u32 {
            let msg = i.to_le_bytes();
            c.write_all(&msg).unwrap();
            sent.extend_from_slice(&msg);
            if i % 7 == 0 {
                weft::sleep(MS).unwrap();
            }
        }
        c.shutdown(Shutdown::Write).unwrap();
        assert_eq!(server.join().unwrap(), sent);
    });
    r.unwrap();
}

#[test]
fn latency_in_virtual_time_is_the_links() {
    let r = weft::sim::run(3, || {
        net::add_host("far").unwrap();
        net::add_host("near").unwrap();
        net::set_link("client", "far", Link::new(40 * MS)).unwrap();
        net::set_link("client", "near", Link::new(3 * MS)).unwrap();
        let mut times = Vec::new();
        for name in ["far", "near"] {
            let server = net::host(name, || {
                let l = TcpListener::bind("0.0.0.0:80").unwrap();
                let (mut s, _) = l.accept().unwrap();
                let accepted = elapsed();
                let mut b = [0u8; 1];
                s.read_exact(&mut b).unwrap();
                let read = elapsed();
                s.write_all(&b).unwrap();
                (accepted, read)
            })
            .unwrap();
            weft::sleep(MS).unwrap(); // the server binds first
            let t0 = elapsed();
            let mut c = TcpStream::connect((name, 80)).unwrap();
            let connected = elapsed() - t0;
            c.write_all(b"x").unwrap();
            let written = elapsed();
            let mut b = [0u8; 1];
            c.read_exact(&mut b).unwrap();
            let echoed = elapsed() - written;
            let (accepted, read) = server.join().unwrap();
            times.push((connected, accepted - t0, read - written, echoed));
        }
        times
    })
    .unwrap();
    // A handshake is a round trip (the server has the connection after
    // one way); a segment takes one way; an echo a round trip.
    assert_eq!(r.value[0], (80 * MS, 40 * MS, 40 * MS, 80 * MS));
    assert_eq!(r.value[1], (6 * MS, 3 * MS, 3 * MS, 6 * MS));
}

#[test]
fn loss_is_a_retransmission_delay() {
    let r = weft::sim::run(4, || {
        net::set_default_link(Link::new(MS).loss(1.0).retransmit_timeout(100 * MS)).unwrap();
        let server = net::host("lossy", || {
            let l = TcpListener::bind("0.0.0.0:80").unwrap();
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 2];
            s.read_exact(&mut b).unwrap();
            b
        })
        .unwrap();
        weft::sleep(MS).unwrap();
        let t0 = elapsed();
        let mut c = TcpStream::connect("lossy:80").unwrap();
        c.write_all(b"ok").unwrap();
        let b = server.join().unwrap();
        (b, elapsed() - t0)
    })
    .unwrap();
    assert_eq!(&r.value.0, b"ok");
    // Every segment is lost 8 times (the model's cap): 1 ms + 100 ms ·
    // (1 + 2 + … + 128) each, for the SYN, the SYN-ACK and the data.
    let one = MS + 100 * MS * 255;
    assert_eq!(r.value.1, 3 * one);
}

#[test]
fn refused_unreachable_and_unknown() {
    let r = weft::sim::run(5, || {
        net::set_default_link(Link::new(7 * MS)).unwrap();
        net::add_host("idle").unwrap();
        let t0 = elapsed();
        let e = TcpStream::connect("idle:80").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
        let refused = elapsed() - t0;

        let t0 = elapsed();
        let nobody: SocketAddr = "10.0.9.9:80".parse().unwrap();
        let e = TcpStream::connect_timeout(&nobody, Duration::from_secs(3)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        let unanswered = elapsed() - t0;

        let t0 = elapsed();
        let e = TcpStream::connect(nobody).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        let default_timeout = elapsed() - t0;

        let e = TcpStream::connect("nosuchhost:80").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("nosuchhost"), "{e}");
        (refused, unanswered, default_timeout)
    })
    .unwrap();
    assert_eq!(r.value.0, 14 * MS);
    assert_eq!(r.value.1, Duration::from_secs(3));
    assert_eq!(r.value.2, Duration::from_secs(127));
}

#[test]
fn localhost_and_loopback_stay_on_the_host() {
    let r = weft::sim::run(6, || {
        let h = net::host("box", || {
            let l = TcpListener::bind("127.0.0.1:5000").unwrap();
            let t0 = elapsed();
            let mut c = TcpStream::connect("localhost:5000").unwrap();
            let (mut s, peer) = l.accept().unwrap();
            assert!(peer.ip().is_loopback());
            c.write_all(b"loop").unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
            assert_eq!(&b, b"loop");
            assert_eq!(elapsed(), t0, "a host's own connections take no time");
            // Bound to loopback: not reachable from another host.
        })
        .unwrap();
        h.join().unwrap();
        let e = TcpStream::connect("box:5000").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        // The port is free again, and binding twice is AddrInUse.
        let l = TcpListener::bind("0.0.0.0:6000").unwrap();
        let e = TcpListener::bind("127.0.0.1:6000").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse);
        drop(l);
        TcpListener::bind("127.0.0.1:6000").unwrap();
        let e = TcpListener::bind("10.0.0.1:6000").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrNotAvailable);
    });
    r.unwrap();
}

#[test]
fn end_of_file_reset_and_broken_pipe() {
    let r = weft::sim::run(7, || {
        let l = TcpListener::bind("0.0.0.0:1").unwrap();
        // EOF after the data: shutdown(Write).
        let mut c = TcpStream::connect("127.0.0.1:1").unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(b"last words").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        assert_eq!(got, "last words");
        assert_eq!(s.read(&mut [0u8; 4]).unwrap(), 0);
        let e = c.write(b"more").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe);
        // The other direction still works.
        s.write_all(b"reply").unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"reply");

        // Closing with unread data resets the connection.
        let c = TcpStream::connect("127.0.0.1:1").unwrap();
        let (mut s, _) = l.accept().unwrap();
        s.write_all(b"unread").unwrap();
        drop(c);
        let e = s.read(&mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset);

        // Writing to a peer that closed: accepted, then reset.
        let c = TcpStream::connect("127.0.0.1:1").unwrap();
        let (mut s, _) = l.accept().unwrap();
        drop(c);
        assert_eq!(s.read(&mut [0u8; 4]).unwrap(), 0, "a plain close is EOF");
        s.write_all(b"anyone?").unwrap();
        let e = s.write_all(b"hello?").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset);
    });
    r.unwrap();
}

#[test]
fn reset_across_hosts_comes_after_the_latency() {
    let r = weft::sim::run(8, || {
        net::set_default_link(Link::new(5 * MS)).unwrap();
        let server = net::host("srv", || {
            let l = TcpListener::bind("0.0.0.0:80").unwrap();
            let (s, _) = l.accept().unwrap();
            let mut b = [0u8; 3];
            (&s).read_exact(&mut b).unwrap();
            // Close with a byte left unread: RST.
            weft::sleep(MS).unwrap();
            drop(s);
            elapsed()
        })
        .unwrap();
        weft::sleep(MS).unwrap();
        let mut c = TcpStream::connect("srv:80").unwrap();
        c.write_all(b"abcd").unwrap();
        let e = c.read(&mut [0u8; 1]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset);
        let closed = server.join().unwrap();
        assert_eq!(elapsed() - closed, 5 * MS);
    });
    r.unwrap();
}

#[test]
fn timeouts_are_virtual() {
    let r = weft::sim::run(9, || {
        let l = TcpListener::bind("0.0.0.0:1").unwrap();
        let c = TcpStream::connect("localhost:1").unwrap();
        let (s, _) = l.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        assert_eq!(c.read_timeout().unwrap(), Some(Duration::from_secs(30)));
        let t0 = elapsed();
        let e = (&c).read(&mut [0u8; 1]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        assert_eq!(elapsed() - t0, Duration::from_secs(30));
        let e = c.set_read_timeout(Some(Duration::ZERO)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);

        // Nobody reads: the window fills, then the write times out.
        c.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        let chunk = vec![7u8; 64 * 1024];
        let mut sent = 0;
        let t0 = elapsed();
        let e = loop {
            match (&c).write(&chunk) {
                Ok(n) => sent += n,
                Err(e) => break e,
            }
        };
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        assert_eq!(sent, 256 * 1024);
        assert_eq!(elapsed() - t0, Duration::from_secs(2));
        // Reading makes room: the writer goes on.
        let reader = weft::spawn(move || {
            let mut total = 0;
            let mut buf = vec![0u8; 100_000];
            while total < 256 * 1024 + 1000 {
                total += (&s).read(&mut buf).unwrap();
            }
            total
        });
        (&c).write_all(&chunk[..1000]).unwrap();
        assert_eq!(reader.join().unwrap(), 256 * 1024 + 1000);
    });
    r.unwrap();
}

#[test]
fn partition_holds_segments_until_repair() {
    let r = weft::sim::run(10, || {
        net::set_default_link(Link::new(10 * MS)).unwrap();
        let server = net::host("db", || {
            let l = TcpListener::bind("0.0.0.0:5432").unwrap();
            let (mut s, _) = l.accept().unwrap();
            let mut got = Vec::new();
            let mut b = [0u8; 1];
            while s.read(&mut b).unwrap() == 1 {
                got.push((b[0], elapsed()));
            }
            got
        })
        .unwrap();
        weft::sleep(MS).unwrap();
        let mut c = TcpStream::connect("db:5432").unwrap();
        c.write_all(b"a").unwrap(); // arrives in 10 ms
        weft::sleep(5 * MS).unwrap();
        let cut = elapsed();
        net::partition("client", "db").unwrap();
        c.write_all(b"b").unwrap();
        // A new connection cannot get through.
        let e =
            TcpStream::connect_timeout(&"10.0.0.1:5432".parse().unwrap(), Duration::from_secs(1))
                .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        weft::sleep(Duration::from_secs(10)).unwrap();
        let repaired = elapsed();
        net::repair("client", "db").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let got = server.join().unwrap();
        (cut, repaired, got)
    })
    .unwrap();
    let (cut, repaired, got) = r.value;
    // "a" was in flight when the partition began: held too.
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].0, b'a');
    assert_eq!(got[1].0, b'b');
    assert!(got[0].1 >= repaired && cut < repaired);
    assert_eq!(got[0].1, repaired + 10 * MS);
    assert_eq!(got[1].1, repaired + 10 * MS);
}

#[test]
fn a_crash_resets_connections_and_a_restart_binds_again() {
    let r = weft::sim::run(11, || {
        net::set_default_link(Link::new(2 * MS)).unwrap();
        let server = net::host("api", || {
            let l = TcpListener::bind("0.0.0.0:80").unwrap();
            let (mut s, _) = l.accept().unwrap();
            let e = s.read(&mut [0u8; 1]).unwrap_err(); // interrupted by the crash
            let e2 = l.accept().unwrap_err();
            let e3 = TcpListener::bind("0.0.0.0:81").unwrap_err();
            (e.kind(), e2.kind(), e3.kind())
        })
        .unwrap();
        weft::sleep(MS).unwrap();
        let mut c = TcpStream::connect("api:80").unwrap();
        weft::sleep(MS).unwrap();
        let crashed = elapsed();
        net::crash("api").unwrap();
        let e = c.read(&mut [0u8; 1]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset);
        assert_eq!(elapsed() - crashed, 2 * MS, "the RST takes one way");
        let kinds = server.join().unwrap();
        assert_eq!(
            kinds,
            (
                ErrorKind::Interrupted,
                ErrorKind::InvalidInput,
                ErrorKind::NetworkDown
            )
        );
        // Down: a SYN is not answered.
        let e = TcpStream::connect_timeout(&"10.0.0.1:80".parse().unwrap(), Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        // Up again, a new incarnation: refused until something listens.
        net::restart("api").unwrap();
        let e = TcpStream::connect("api:80").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        let _server = echo_server("api");
        let mut c = connect("api:7");
        c.write_all(b"back").unwrap();
        let mut b = [0u8; 4];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"back");
        net::crash("api").unwrap();
        assert!(net::crash("client").is_err());
    });
    r.unwrap();
}

#[test]
fn a_connect_sends_its_syn_again_until_the_host_is_back() {
    let r = weft::sim::run(15, || {
        net::set_default_link(Link::new(10 * MS)).unwrap();
        net::add_host("phoenix").unwrap();
        net::crash("phoenix").unwrap();
        let reborn = weft::spawn(|| {
            weft::sleep(Duration::from_secs(2)).unwrap();
            net::restart("phoenix").unwrap();
            net::host("phoenix", || {
                let l = TcpListener::bind("0.0.0.0:80").unwrap();
                l.accept().unwrap().1
            })
            .unwrap()
        });
        let t0 = elapsed();
        // SYNs at 0 s (down), 1 s (down), 3 s (listening): answered.
        let c =
            TcpStream::connect_timeout(&"10.0.0.1:80".parse().unwrap(), Duration::from_secs(10))
                .unwrap();
        let took = elapsed() - t0;
        let peer = reborn.join().unwrap().join().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        took
    })
    .unwrap();
    assert_eq!(r.value, Duration::from_secs(3) + 20 * MS);
}

#[test]
fn an_interrupt_shuts_the_socket_down() {
    let r = weft::sim::run(12, || {
        let l = TcpListener::bind("0.0.0.0:1").unwrap();
        let c = TcpStream::connect("localhost:1").unwrap();
        let (s, _) = l.accept().unwrap();
        let reader = weft::spawn(move || {
            let e = (&s).read(&mut [0u8; 1]).unwrap_err();
            e.kind()
        });
        weft::sleep(Duration::from_secs(1)).unwrap();
        reader.thread().interrupt();
        assert_eq!(reader.join().unwrap(), ErrorKind::Interrupted);
        // The peer sees the connection closed.
        assert_eq!((&c).read(&mut [0u8; 1]).unwrap(), 0);
        let acceptor = weft::spawn(move || l.accept().unwrap_err().kind());
        weft::sleep(MS).unwrap();
        acceptor.thread().interrupt();
        assert_eq!(acceptor.join().unwrap(), ErrorKind::Interrupted);
    });
    r.unwrap();
}

#[test]
fn real_sockets_are_refused_by_name() {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let r = weft::sim::run(13, move || {
        let e = TcpListener::from_std(std_listener).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(e.to_string().contains("TcpListener::from_std"), "{e}");
        let std_udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = weft::net::UdpSocket::from_std(std_udp).unwrap_err();
        assert!(e.to_string().contains("UdpSocket::from_std"), "{e}");
        let e = weft::net::UnixStream::pair().unwrap_err();
        assert!(e.to_string().contains("UnixStream::pair"), "{e}");
        // A simulated stream's options and descriptor are not real.
        let l = TcpListener::bind("0.0.0.0:1").unwrap();
        let c = TcpStream::connect("localhost:1").unwrap();
        c.set_nodelay(true).unwrap();
        assert!(
            c.set_ttl(5)
                .unwrap_err()
                .to_string()
                .contains("TcpStream::set_ttl")
        );
        let fd = std::os::fd::AsFd::as_fd(&c);
        assert!(socket2::SockRef::from(&fd).peer_addr().is_err());
        drop(l);
    });
    r.unwrap();
    let e = net::host("x", || ()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(net::partition("a", "b").is_err());
}

#[test]
fn try_clone_shares_the_socket() {
    let r = weft::sim::run(14, || {
        let l = TcpListener::bind("0.0.0.0:1").unwrap();
        let c = TcpStream::connect("localhost:1").unwrap();
        let (s, _) = l.accept().unwrap();
        let c2 = c.try_clone().unwrap();
        drop(c);
        (&c2).write_all(b"still open").unwrap();
        let mut b = [0u8; 10];
        (&s).read_exact(&mut b).unwrap();
        assert_eq!(&b, b"still open");
        let mut p = [0u8; 1];
        assert_eq!(
            s.try_peek(&mut p).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        drop(c2);
        assert_eq!(s.try_peek(&mut p).unwrap(), 0);
    });
    r.unwrap();
}

/// Three clients on three hosts each send their name to a server at the
/// same instant, over jittery links; the server records the order and
/// virtual time of arrival.
fn race() -> Vec<(String, Duration)> {
    net::set_default_link(Link::new(MS).jitter(30 * MS)).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    let server = net::host("hub", move || {
        let l = TcpListener::bind("0.0.0.0:80").unwrap();
        let mut hs = Vec::new();
        for _ in 0..3 {
            let (mut s, _) = l.accept().unwrap();
            let log = log2.clone();
            hs.push(weft::spawn(move || {
                let mut name = String::new();
                s.read_to_string(&mut name).unwrap();
                log.lock().unwrap().push((name, elapsed()));
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
    })
    .unwrap();
    let clients: Vec<_> = ["a", "b", "c"]
        .into_iter()
        .map(|name| {
            net::host(name, move || {
                weft::sleep(Duration::from_millis(100)).unwrap();
                let mut s = TcpStream::connect("hub:80").unwrap();
                s.write_all(name.as_bytes()).unwrap();
            })
            .unwrap()
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    server.join().unwrap();
    let log = log.lock().unwrap().clone();
    for (name, t) in &log {
        weft::sim::trace(name.as_bytes()[0] as u64);
        weft::sim::trace(t.as_nanos() as u64);
    }
    log
}

#[test]
fn same_seed_same_run_other_seeds_other_arrivals() {
    let a = weft::sim::run(42, race).unwrap();
    let b = weft::sim::run(42, race).unwrap();
    assert_eq!(a.value, b.value);
    assert_eq!(a.trace, b.trace);
    let orders: std::collections::HashSet<Vec<String>> = (0..12)
        .map(|seed| {
            let r = weft::sim::run(seed, race).unwrap();
            r.value.into_iter().map(|(n, _)| n).collect()
        })
        .collect();
    assert!(orders.len() > 1, "one arrival order only: {orders:?}");
    let c = weft::sim::run(43, race).unwrap();
    assert_ne!(a.trace, c.trace);
}

#[test]
fn datagrams_between_hosts_reorder_drop_and_time_out() {
    use weft::net::UdpSocket;
    let r = weft::sim::run(16, || {
        net::set_default_link(Link::new(MS).jitter(50 * MS)).unwrap();
        let server = net::host("dns", || {
            let u = UdpSocket::bind("0.0.0.0:53").unwrap();
            u.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4];
            loop {
                match u.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        assert_eq!(n, 1, "truncated to the datagram");
                        got.push(buf[0]);
                        u.send_to(&buf[..1], from).unwrap();
                    }
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::TimedOut);
                        return got;
                    }
                }
            }
        })
        .unwrap();
        weft::sleep(MS).unwrap();
        let c = UdpSocket::bind("0.0.0.0:0").unwrap();
        c.connect("dns:53").unwrap();
        assert_eq!(c.peer_addr().unwrap(), "10.0.0.1:53".parse().unwrap());
        for i in 0..20u8 {
            c.send(&[i]).unwrap();
        }
        // To a port nobody bound: dropped without an error.
        c.send_to(b"x", "dns:54").unwrap();
        c.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut echoed = 0;
        let mut b = [0u8; 1];
        while c.recv(&mut b).is_ok() {
            echoed += 1;
        }
        let sent_order = server.join().unwrap();
        (sent_order, echoed)
    })
    .unwrap();
    let (order, echoed) = r.value;
    assert_eq!(order.len(), 20);
    assert_eq!(echoed, 20);
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..20).collect::<Vec<u8>>());
    assert_ne!(order, sorted, "jitter reorders datagrams");

    // Loss drops datagrams (no retransmission); a partition drops them all.
    let r = weft::sim::run(17, || {
        net::set_default_link(Link::new(MS).loss(0.5)).unwrap();
        net::add_host("far").unwrap();
        let server = net::host("far", || {
            let u = UdpSocket::bind("0.0.0.0:9").unwrap();
            u.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
            let mut n = 0;
            while u.recv(&mut [0u8; 8]).is_ok() {
                n += 1;
            }
            n
        })
        .unwrap();
        weft::sleep(MS).unwrap();
        let c = UdpSocket::bind("0.0.0.0:0").unwrap();
        for _ in 0..100 {
            c.send_to(b"hi", "far:9").unwrap();
        }
        net::partition("client", "far").unwrap();
        for _ in 0..100 {
            c.send_to(b"hi", "far:9").unwrap();
        }
        server.join().unwrap()
    })
    .unwrap();
    assert!((20..80).contains(&r.value), "{} of 100 arrived", r.value);
}
