//! UDP: [`UdpSocket`].

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::addr::ToSocketAddrs;
use super::io::{Io, each_addr, expect_registered, fd_impls};

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

    /// Wraps a `std` socket, switching it to non-blocking mode. Its
    /// `SO_RCVTIMEO`/`SO_SNDTIMEO` timeouts are carried over.
    pub fn from_std(sock: std::net::UdpSocket) -> io::Result<UdpSocket> {
        let rt = sock.read_timeout()?;
        let wt = sock.write_timeout()?;
        sock.set_nonblocking(true)?;
        let s = UdpSocket { io: Io::new(sock)? };
        s.io.read_timeout.set(rt)?;
        s.io.write_timeout.set(wt)?;
        Ok(s)
    }

    /// Unwraps the `std` socket, back in blocking mode, with this handle's
    /// timeouts set as socket options.
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        let rt = self.io.read_timeout.get();
        let wt = self.io.write_timeout.get();
        let s = self.io.into_inner();
        s.set_nonblocking(false)?;
        s.set_read_timeout(rt)?;
        s.set_write_timeout(wt)?;
        Ok(s)
    }

    /// Sets the default destination of `send` and the only source `recv`
    /// accepts (each address tried in turn).
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        self.io.check_open()?;
        each_addr(&addr, |a| self.io.sock.connect(a))
    }

    /// Sends a datagram to the connected address.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.check_open()?;
        self.io.write(|s| s.send(buf))
    }

    /// Receives a datagram from the connected address, parking until one
    /// arrives.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.check_open()?;
        self.io.read(|s| s.recv(buf))
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

    /// The remote address of a connected socket.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.sock.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.sock.local_addr()
    }

    /// Sets the read timeout (`recv`, `recv_from`, `peek*`): as
    /// [`TcpStream::set_read_timeout`](super::TcpStream::set_read_timeout).
    pub fn set_read_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        self.io.read_timeout.set(dur)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.io.read_timeout.get())
    }

    /// Sets the write timeout (`send`, `send_to`).
    pub fn set_write_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        self.io.write_timeout.set(dur)
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.io.write_timeout.get())
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

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.sock.set_ttl(ttl)
    }

    /// Gets `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.sock.ttl()
    }

    /// Gets and clears `SO_ERROR`.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.sock.take_error()
    }

    /// A new handle to the same socket (a duplicated descriptor with its
    /// own registration and a copy of this handle's timeouts).
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        let s = self.io.sock.try_clone()?;
        Ok(UdpSocket {
            io: self.io.clone_with(s)?,
        })
    }
}

impl From<std::net::UdpSocket> for UdpSocket {
    /// Like [`UdpSocket::from_std`].
    ///
    /// # Panics
    ///
    /// If the socket cannot be made non-blocking or registered with the
    /// poller; use `from_std` to handle that error.
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
        d.field("fd", &self.as_raw_fd()).finish()
    }
}

fd_impls!(UdpSocket);
