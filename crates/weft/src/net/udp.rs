//! UDP: [`UdpSocket`].

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::addr::ToSocketAddrs;
use super::io::{
    Io, each_addr, expect_registered, fd_impls, refuse_in_simulation, socket_methods,
    std_conversions,
};

/// A UDP socket: weft's [`std::net::UdpSocket`].
///
/// `recv`/`recv_from`/`peek_from` park the calling virtual thread until a
/// datagram arrives; `send`/`send_to` park while the send buffer is full.
///
/// ```
/// use std::time::Duration;
/// use weft::net::UdpSocket;
///
/// let a = UdpSocket::bind("127.0.0.1:0")?;
/// let b = UdpSocket::bind("127.0.0.1:0")?;
/// b.set_read_timeout(Some(Duration::from_secs(5)))?;
/// a.send_to(b"ping", b.local_addr()?)?;
/// let mut buf = [0u8; 16];
/// let (n, from) = b.recv_from(&mut buf)?;
/// assert_eq!((&buf[..n], from), (&b"ping"[..], a.local_addr()?));
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct UdpSocket {
    io: Io<std::net::UdpSocket>,
}

impl UdpSocket {
    /// Creates a socket bound to `addr` (each address tried in turn).
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        refuse_in_simulation("UdpSocket::bind")?;
        each_addr(&addr, |a| {
            let s = Socket::new(
                Domain::for_address(*a),
                Type::DGRAM.nonblocking().cloexec(),
                Some(Protocol::UDP),
            )?;
            s.bind(&(*a).into())?;
            Ok(UdpSocket {
                io: Io::new(std::net::UdpSocket::from(s))?,
            })
        })
    }

    /// Sets the default destination of `send` and the only source `recv`
    /// accepts (each address tried in turn).
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        self.io.check_open()?;
        each_addr(&addr, |a| self.io.sock.connect(a))
    }

    /// Like `recv`, leaving the datagram in the queue.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.check_open()?;
        self.io.read(|s| s.peek(buf))
    }

    /// Sends a datagram to `addr` (its first address, like `std`).
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        self.io.check_open()?;
        let a = addr.weft_addrs()?.next().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to")
        })?;
        self.io.write(|s| s.send_to(buf, a))
    }

    /// Receives a datagram and its source address, parking until one
    /// arrives.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.check_open()?;
        self.io.read(|s| s.recv_from(buf))
    }

    /// Like `recv_from`, leaving the datagram in the queue.
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.check_open()?;
        self.io.read(|s| s.peek_from(buf))
    }

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.io.sock.set_broadcast(on)
    }

    /// Gets `SO_BROADCAST`.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.io.sock.broadcast()
    }

    /// Sets `IP_MULTICAST_LOOP`.
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.io.sock.set_multicast_loop_v4(on)
    }

    /// Gets `IP_MULTICAST_LOOP`.
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        self.io.sock.multicast_loop_v4()
    }

    /// Sets `IP_MULTICAST_TTL`.
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.io.sock.set_multicast_ttl_v4(ttl)
    }

    /// Gets `IP_MULTICAST_TTL`.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        self.io.sock.multicast_ttl_v4()
    }

    /// Sets `IPV6_MULTICAST_LOOP`.
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        self.io.sock.set_multicast_loop_v6(on)
    }

    /// Gets `IPV6_MULTICAST_LOOP`.
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        self.io.sock.multicast_loop_v6()
    }

    /// Joins an IPv4 multicast group (`IP_ADD_MEMBERSHIP`).
    pub fn join_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.io.sock.join_multicast_v4(group, interface)
    }

    /// Joins an IPv6 multicast group (`IPV6_ADD_MEMBERSHIP`).
    pub fn join_multicast_v6(&self, group: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.io.sock.join_multicast_v6(group, interface)
    }

    /// Leaves an IPv4 multicast group.
    pub fn leave_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.io.sock.leave_multicast_v4(group, interface)
    }

    /// Leaves an IPv6 multicast group.
    pub fn leave_multicast_v6(&self, group: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.io.sock.leave_multicast_v6(group, interface)
    }
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("UdpSocket");
        if let Ok(a) = self.local_addr() {
            d.field("addr", &a);
        }
        d.field("fd", &self.as_raw_fd()).finish()
    }
}

std_conversions!(UdpSocket <- std::net::UdpSocket, timed);
socket_methods!(UdpSocket: datagram, peer_addr, local_addr, timeouts, ttl, clone);
fd_impls!(UdpSocket);
