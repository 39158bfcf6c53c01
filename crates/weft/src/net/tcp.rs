//! TCP: [`TcpListener`] and [`TcpStream`].

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, RawFd};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::addr::ToSocketAddrs;
use super::io::{
    Io, each_addr, expect_registered, fd_impls, socket_methods, std_conversions, stream_io_impls,
    timed_out,
};
use crate::poll::Interest;

/// The flags of every socket weft creates or accepts.
const ACCEPT_FLAGS: libc::c_int = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;

/// Listen backlog: -1 asks Linux for the system maximum
/// (`net.core.somaxconn`).
pub(super) const BACKLOG: libc::c_int = -1;

/// A TCP socket server, listening for connections: weft's
/// [`std::net::TcpListener`].
///
/// [`accept`](TcpListener::accept) parks the calling virtual thread (or
/// blocks the calling OS thread) until a connection arrives. Accepted
/// streams are non-blocking underneath and registered with weft's poller.
///
/// ```
/// use std::io::{Read, Write};
/// use weft::net::{TcpListener, TcpStream};
///
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let addr = listener.local_addr()?;
/// let server = weft::spawn(move || -> std::io::Result<()> {
///     let (mut s, _peer) = listener.accept()?;
///     s.write_all(b"hi")?;
///     Ok(())
/// });
/// let mut c = TcpStream::connect(addr)?;
/// let mut got = String::new();
/// c.read_to_string(&mut got)?;
/// assert_eq!(got, "hi");
/// server.join().unwrap()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct TcpListener {
    io: Io<std::net::TcpListener>,
}

impl TcpListener {
    /// Creates a listener bound to `addr` (each address is tried in turn,
    /// like `std`). `SO_REUSEADDR` is set, as `std` does; the backlog is
    /// the system maximum (`net.core.somaxconn`).
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        each_addr(&addr, |a| {
            let s = Socket::new(
                Domain::for_address(*a),
                Type::STREAM.nonblocking().cloexec(),
                Some(Protocol::TCP),
            )?;
            s.set_reuse_address(true)?;
            s.bind(&(*a).into())?;
            s.listen(BACKLOG)?;
            // Registered only now: a TCP socket that is not yet listening
            // reports a hang-up to epoll.
            Ok(TcpListener {
                io: Io::new(std::net::TcpListener::from(s))?,
            })
        })
    }

    /// Accepts a new connection, parking until one arrives.
    ///
    /// An interrupt while waiting returns `Interrupted` and shuts the
    /// listener down (module docs, "Interrupts").
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (sock, addr) = self.io.read(|l| SockRef::from(l).accept4(ACCEPT_FLAGS))?;
        let stream = TcpStream::from_socket(sock)?;
        let addr = addr
            .as_socket()
            .ok_or_else(|| io::Error::other("weft: accepted a non-IP address"))?;
        Ok((stream, addr))
    }

    /// An iterator over incoming connections: `accept` in a loop (never
    /// `None`).
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("TcpListener");
        if let Ok(a) = self.local_addr() {
            d.field("addr", &a);
        }
        d.field("fd", &self.as_raw_fd()).finish()
    }
}

/// The iterator of [`TcpListener::incoming`].
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

/// A TCP connection: weft's [`std::net::TcpStream`].
///
/// `read` parks the calling virtual thread until data arrives; `write`
/// parks while the send buffer is full. Both `TcpStream` and `&TcpStream`
/// implement [`Read`] and [`Write`], and reading and writing wait
/// independently, so one thread may read while another writes.
///
/// ```
/// use std::io::{Read, Write};
/// use std::net::Shutdown;
/// use std::time::Duration;
/// use weft::net::{TcpListener, TcpStream};
///
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let mut c = TcpStream::connect_timeout(&listener.local_addr()?, Duration::from_secs(5))?;
/// let (mut s, _) = listener.accept()?;
/// c.set_nodelay(true)?;
/// c.write_all(b"ping")?;
/// c.shutdown(Shutdown::Write)?; // the server reads EOF after "ping"
/// let mut got = Vec::new();
/// s.read_to_end(&mut got)?;
/// assert_eq!(got, b"ping");
///
/// s.set_read_timeout(Some(Duration::from_millis(10)))?;
/// let e = s.read(&mut [0u8; 4]); // EOF: the client shut its side down
/// assert_eq!(e?, 0);
/// c.set_read_timeout(Some(Duration::from_millis(10)))?;
/// let e = c.read(&mut [0u8; 4]).unwrap_err(); // nothing to read: times out
/// assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct TcpStream {
    io: Io<std::net::TcpStream>,
}

impl TcpStream {
    /// Opens a connection to `addr`, trying each address in turn like
    /// `std`, and parking while the handshake is in progress.
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        each_addr(&addr, |a| TcpStream::connect_addr(a, None))
    }

    /// Opens a connection to `addr`, failing with `TimedOut` if it is not
    /// established within `timeout`. A zero timeout is `InvalidInput`, as
    /// in `std`.
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot set a 0 duration timeout",
            ));
        }
        TcpStream::connect_addr(addr, Instant::now().checked_add(timeout))
    }

    fn connect_addr(addr: &SocketAddr, deadline: Option<Instant>) -> io::Result<TcpStream> {
        let s = Socket::new(
            Domain::for_address(*addr),
            Type::STREAM.nonblocking().cloexec(),
            Some(Protocol::TCP),
        )?;
        let pending = match s.connect(&(*addr).into()) {
            Ok(()) => false,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => true,
            // EINTR: the connection goes on asynchronously.
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => true,
            Err(e) => return Err(e),
        };
        // Registered only after `connect` started: an unconnected TCP
        // socket reports a hang-up to epoll, which would look like
        // readiness to the wait below.
        let stream = TcpStream::from_socket(s)?;
        if pending {
            let r = stream.io.reg.do_io(Interest::Write, deadline, || {
                if let Some(e) = stream.io.sock.take_error()? {
                    return Err(e);
                }
                match stream.io.sock.peer_addr() {
                    Ok(_) => Ok(()),
                    // Still in progress: wait for the next write event.
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                        Err(io::ErrorKind::WouldBlock.into())
                    }
                    Err(e) => Err(e),
                }
            });
            match r {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(timed_out()),
                Err(e) => return Err(e),
            }
        }
        Ok(stream)
    }

    /// Wraps a non-blocking, connected socket.
    fn from_socket(s: Socket) -> io::Result<TcpStream> {
        Ok(TcpStream {
            io: Io::new(std::net::TcpStream::from(s))?,
        })
    }

    /// Sets `TCP_NODELAY` (disables Nagle's algorithm when `true`).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.io.sock.set_nodelay(nodelay)
    }

    /// Gets `TCP_NODELAY`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.io.sock.nodelay()
    }

    /// Receives data without removing it from the queue, parking until
    /// some is available.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.read(|s| s.peek(buf))
    }

    #[cfg_attr(not(any(feature = "futures-io", feature = "tokio")), allow(dead_code))]
    pub(crate) fn io(&self) -> &Io<std::net::TcpStream> {
        &self.io
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("TcpStream");
        if let Ok(a) = self.local_addr() {
            d.field("addr", &a);
        }
        if let Ok(a) = self.peer_addr() {
            d.field("peer", &a);
        }
        d.field("fd", &self.as_raw_fd()).finish()
    }
}

std_conversions!(
    TcpListener <- std::net::TcpListener;
    TcpStream <- std::net::TcpStream, timed;
);
socket_methods!(TcpListener: local_addr, ttl, clone);
socket_methods!(TcpStream: peer_addr, local_addr, shutdown, ttl, timeouts, clone);
fd_impls!(TcpListener, TcpStream);
stream_io_impls!(TcpStream);
