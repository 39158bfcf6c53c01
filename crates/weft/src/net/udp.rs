//! UDP: [`UdpSocket`], a real socket or, inside a simulation, a simulated
//! one (`crate::sim::net`); as in `tcp.rs`, every method is one `match`.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::addr::ToSocketAddrs;
use super::io::{
    Io, each_addr, expect_registered, fd_impls, kind_fd_impls, not_simulated, simulated,
    socket_methods, std_conversions,
};
use crate::sim::net::SimUdp;

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
    kind: UdpKind,
}

enum UdpKind {
    Os(OsUdp),
    Sim(SimUdp),
}

/// A real UDP socket.
struct OsUdp {
    io: Io<std::net::UdpSocket>,
}

std_conversions!(OsUdp <- std::net::UdpSocket, timed);
socket_methods!(OsUdp: datagram, peer_addr, local_addr, timeouts, clone);
fd_impls!(OsUdp);

impl UdpSocket {
    fn os(s: OsUdp) -> UdpSocket {
        UdpSocket {
            kind: UdpKind::Os(s),
        }
    }

    /// The real socket's engine, or `Unsupported` naming `call` for a
    /// simulated one (socket options are not simulated).
    fn os_io(&self, call: &str) -> io::Result<&Io<std::net::UdpSocket>> {
        match &self.kind {
            UdpKind::Os(s) => Ok(&s.io),
            UdpKind::Sim(_) => Err(not_simulated(call)),
        }
    }

    /// Creates a socket bound to `addr` (each address tried in turn).
    /// Inside a simulation, a socket of the calling thread's simulated host
    /// ([`crate::sim::net`]).
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        if simulated() {
            return each_addr(&addr, |a| {
                SimUdp::bind(*a).map(|u| UdpSocket {
                    kind: UdpKind::Sim(u),
                })
            });
        }
        each_addr(&addr, |a| {
            let s = Socket::new(
                Domain::for_address(*a),
                Type::DGRAM.nonblocking().cloexec(),
                Some(Protocol::UDP),
            )?;
            s.bind(&(*a).into())?;
            Ok(UdpSocket::os(OsUdp {
                io: Io::new(std::net::UdpSocket::from(s))?,
            }))
        })
    }

    /// Sets the default destination of `send` and the only source `recv`
    /// accepts (each address tried in turn).
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        match &self.kind {
            UdpKind::Os(s) => {
                s.io.check_open()?;
                each_addr(&addr, |a| s.io.sock.connect(a))
            }
            UdpKind::Sim(u) => each_addr(&addr, |a| u.connect(*a)),
        }
    }

    /// Sends a datagram to the connected peer, parking while the send
    /// buffer is full.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        match &self.kind {
            UdpKind::Os(s) => s.send(buf),
            UdpKind::Sim(u) => u.send_to(buf, None),
        }
    }

    /// Receives a datagram from the connected peer, parking until one
    /// arrives.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.kind {
            UdpKind::Os(s) => s.recv(buf),
            UdpKind::Sim(u) => u.recv_from(buf, true).map(|(n, _)| n),
        }
    }

    /// Like `recv`, leaving the datagram in the queue.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.kind {
            UdpKind::Os(s) => {
                s.io.check_open()?;
                s.io.read(|s| s.peek(buf))
            }
            UdpKind::Sim(u) => u.recv_from(buf, false).map(|(n, _)| n),
        }
    }

    /// Sends a datagram to `addr` (its first address, like `std`).
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let a = addr.weft_addrs()?.next().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to")
        })?;
        match &self.kind {
            UdpKind::Os(s) => {
                s.io.check_open()?;
                s.io.write(|s| s.send_to(buf, a))
            }
            UdpKind::Sim(u) => u.send_to(buf, Some(a)),
        }
    }

    /// Receives a datagram and its source address, parking until one
    /// arrives.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        match &self.kind {
            UdpKind::Os(s) => {
                s.io.check_open()?;
                s.io.read(|s| s.recv_from(buf))
            }
            UdpKind::Sim(u) => u.recv_from(buf, true),
        }
    }

    /// Like `recv_from`, leaving the datagram in the queue.
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        match &self.kind {
            UdpKind::Os(s) => {
                s.io.check_open()?;
                s.io.read(|s| s.peek_from(buf))
            }
            UdpKind::Sim(u) => u.recv_from(buf, false),
        }
    }

    /// The remote address of a connected socket.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.kind {
            UdpKind::Os(s) => s.peer_addr(),
            UdpKind::Sim(u) => u.peer_addr(),
        }
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.kind {
            UdpKind::Os(s) => s.local_addr(),
            UdpKind::Sim(u) => u.local_addr(),
        }
    }

    /// Sets the read timeout: a `recv`, `recv_from` or `peek` that waits
    /// longer fails with `TimedOut` (in a simulation: virtual time).
    /// `None` waits forever; `Some(Duration::ZERO)` is `InvalidInput`.
    /// Per handle (module docs, "Timeouts").
    pub fn set_read_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        match &self.kind {
            UdpKind::Os(s) => s.set_read_timeout(dur),
            UdpKind::Sim(u) => u.set_read_timeout(dur),
        }
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        match &self.kind {
            UdpKind::Os(s) => s.read_timeout(),
            UdpKind::Sim(u) => Ok(u.read_timeout()),
        }
    }

    /// Sets the write timeout: a `send` or `send_to` that waits longer
    /// fails with `TimedOut` (a simulated send never waits). As
    /// `set_read_timeout`.
    pub fn set_write_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        match &self.kind {
            UdpKind::Os(s) => s.set_write_timeout(dur),
            UdpKind::Sim(u) => u.set_write_timeout(dur),
        }
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        match &self.kind {
            UdpKind::Os(s) => s.write_timeout(),
            UdpKind::Sim(u) => Ok(u.write_timeout()),
        }
    }

    /// Sets `IP_TTL` (not simulated).
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.os_io("UdpSocket::set_ttl")?.sock.set_ttl(ttl)
    }

    /// Gets `IP_TTL` (not simulated).
    pub fn ttl(&self) -> io::Result<u32> {
        self.os_io("UdpSocket::ttl")?.sock.ttl()
    }

    /// Gets and clears `SO_ERROR` (a simulated socket has none).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        match &self.kind {
            UdpKind::Os(s) => s.take_error(),
            UdpKind::Sim(_) => Ok(None),
        }
    }

    /// A new handle to the same socket: a duplicated descriptor with its
    /// own registration and a copy of this handle's timeouts (a simulated
    /// socket: a second handle, closed with the last one).
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        Ok(match &self.kind {
            UdpKind::Os(s) => UdpSocket::os(s.try_clone()?),
            UdpKind::Sim(u) => UdpSocket {
                kind: UdpKind::Sim(u.try_clone()),
            },
        })
    }

    /// Wraps a `std` socket, switching it to non-blocking mode. Timeouts
    /// set on the `std` socket (`SO_RCVTIMEO`/`SO_SNDTIMEO`) are carried
    /// over. Refused inside a simulation (`Unsupported`).
    pub fn from_std(s: std::net::UdpSocket) -> io::Result<UdpSocket> {
        if simulated() {
            return Err(not_simulated("UdpSocket::from_std"));
        }
        OsUdp::from_std(s).map(UdpSocket::os)
    }

    /// Unwraps the `std` socket, back in blocking mode, with this handle's
    /// timeouts as socket options (`Unsupported` for a simulated one).
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        match self.kind {
            UdpKind::Os(s) => s.into_std(),
            UdpKind::Sim(_) => Err(not_simulated("UdpSocket::into_std")),
        }
    }

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.os_io("UdpSocket::set_broadcast")?
            .sock
            .set_broadcast(on)
    }

    /// Gets `SO_BROADCAST`.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.os_io("UdpSocket::broadcast")?.sock.broadcast()
    }

    /// Sets `IP_MULTICAST_LOOP`.
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.os_io("UdpSocket::set_multicast_loop_v4")?
            .sock
            .set_multicast_loop_v4(on)
    }

    /// Gets `IP_MULTICAST_LOOP`.
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        self.os_io("UdpSocket::multicast_loop_v4")?
            .sock
            .multicast_loop_v4()
    }

    /// Sets `IP_MULTICAST_TTL`.
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.os_io("UdpSocket::set_multicast_ttl_v4")?
            .sock
            .set_multicast_ttl_v4(ttl)
    }

    /// Gets `IP_MULTICAST_TTL`.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        self.os_io("UdpSocket::multicast_ttl_v4")?
            .sock
            .multicast_ttl_v4()
    }

    /// Sets `IPV6_MULTICAST_LOOP`.
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        self.os_io("UdpSocket::set_multicast_loop_v6")?
            .sock
            .set_multicast_loop_v6(on)
    }

    /// Gets `IPV6_MULTICAST_LOOP`.
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        self.os_io("UdpSocket::multicast_loop_v6")?
            .sock
            .multicast_loop_v6()
    }

    /// Joins an IPv4 multicast group (`IP_ADD_MEMBERSHIP`).
    pub fn join_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.os_io("UdpSocket::join_multicast_v4")?
            .sock
            .join_multicast_v4(group, interface)
    }

    /// Joins an IPv6 multicast group (`IPV6_ADD_MEMBERSHIP`).
    pub fn join_multicast_v6(&self, group: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.os_io("UdpSocket::join_multicast_v6")?
            .sock
            .join_multicast_v6(group, interface)
    }

    /// Leaves an IPv4 multicast group.
    pub fn leave_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.os_io("UdpSocket::leave_multicast_v4")?
            .sock
            .leave_multicast_v4(group, interface)
    }

    /// Leaves an IPv6 multicast group.
    pub fn leave_multicast_v6(&self, group: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.os_io("UdpSocket::leave_multicast_v6")?
            .sock
            .leave_multicast_v6(group, interface)
    }
}

impl From<std::net::UdpSocket> for UdpSocket {
    /// Like [`UdpSocket::from_std`].
    ///
    /// # Panics
    ///
    /// If the socket cannot be made non-blocking or registered with the
    /// poller (or this is a simulation); use `from_std` to handle that
    /// error.
    #[track_caller]
    fn from(s: std::net::UdpSocket) -> UdpSocket {
        expect_registered(UdpSocket::from_std(s))
    }
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("UdpSocket");
        if let Ok(a) = self.local_addr() {
            d.field("addr", &a);
        }
        match &self.kind {
            UdpKind::Os(s) => d.field("fd", &s.as_raw_fd()),
            UdpKind::Sim(_) => d.field("simulated", &true),
        };
        d.finish()
    }
}

kind_fd_impls!(UdpSocket: UdpKind);
