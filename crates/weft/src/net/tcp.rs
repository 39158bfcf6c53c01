//! TCP: [`TcpListener`] and [`TcpStream`].
//!
//! Each is a real socket (non-blocking, registered with the poller: the
//! private `OsListener`/`OsStream`, whose methods `net/io.rs` writes) or,
//! inside a simulation, a simulated one (`crate::sim::net`). Every public
//! method is one `match` on the two; outside a simulation the simulated
//! arm is never taken, and creating a socket costs one relaxed load more
//! (the "is this a simulation" check).

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, RawFd};
use std::task::{Context, Poll};
use std::time::Duration;

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::addr::ToSocketAddrs;
use super::io::{
    Io, by_ref_io_impls, each_addr, expect_registered, fd_impls, kind_fd_impls, not_simulated,
    retry_eintr, simulated, socket_methods, std_conversions, stream_io_impls, timed_out,
};
use crate::poll::Interest;
use crate::sim::net::{SimListener, SimStream};

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
    kind: ListenerKind,
}

enum ListenerKind {
    Os(OsListener),
    Sim(SimListener),
}

/// A real listening socket.
struct OsListener {
    io: Io<std::net::TcpListener>,
}

std_conversions!(OsListener <- std::net::TcpListener);
socket_methods!(OsListener: local_addr, ttl, clone);
fd_impls!(OsListener);

impl TcpListener {
    fn os(l: OsListener) -> TcpListener {
        TcpListener {
            kind: ListenerKind::Os(l),
        }
    }

    /// Creates a listener bound to `addr` (each address is tried in turn,
    /// like `std`). `SO_REUSEADDR` is set, as `std` does; the backlog is
    /// the system maximum (`net.core.somaxconn`). Inside a simulation,
    /// a listener of the calling thread's simulated host
    /// ([`crate::sim::net`]).
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        if simulated() {
            return each_addr(&addr, |a| {
                SimListener::bind(*a).map(|l| TcpListener {
                    kind: ListenerKind::Sim(l),
                })
            });
        }
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
            Ok(TcpListener::os(OsListener {
                io: Io::new(std::net::TcpListener::from(s))?,
            }))
        })
    }

    /// Accepts a new connection, parking until one arrives.
    ///
    /// An interrupt while waiting returns `Interrupted` and shuts the
    /// listener down (module docs, "Interrupts").
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        match &self.kind {
            ListenerKind::Os(l) => {
                let (sock, addr) = l.io.read(|l| SockRef::from(l).accept4(ACCEPT_FLAGS))?;
                let stream = TcpStream::os(OsStream::from_socket(sock)?);
                let addr = addr
                    .as_socket()
                    .ok_or_else(|| io::Error::other("weft: accepted a non-IP address"))?;
                Ok((stream, addr))
            }
            ListenerKind::Sim(l) => l.accept().map(|(s, a)| (TcpStream::sim(s), a)),
        }
    }

    /// An iterator over incoming connections: `accept` in a loop (never
    /// `None`).
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The local address (the one it is bound to).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.kind {
            ListenerKind::Os(l) => l.local_addr(),
            ListenerKind::Sim(l) => l.local_addr(),
        }
    }

    /// Sets `IP_TTL` for the sockets it accepts (not simulated).
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        match &self.kind {
            ListenerKind::Os(l) => l.set_ttl(ttl),
            ListenerKind::Sim(_) => Err(not_simulated("TcpListener::set_ttl")),
        }
    }

    /// Gets `IP_TTL` (not simulated).
    pub fn ttl(&self) -> io::Result<u32> {
        match &self.kind {
            ListenerKind::Os(l) => l.ttl(),
            ListenerKind::Sim(_) => Err(not_simulated("TcpListener::ttl")),
        }
    }

    /// Gets and clears `SO_ERROR` (a simulated listener has none).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        match &self.kind {
            ListenerKind::Os(l) => l.take_error(),
            ListenerKind::Sim(_) => Ok(None),
        }
    }

    /// A new handle to the same listener: a duplicated descriptor with its
    /// own registration (a simulated listener: a second handle to it).
    pub fn try_clone(&self) -> io::Result<TcpListener> {
        Ok(match &self.kind {
            ListenerKind::Os(l) => TcpListener::os(l.try_clone()?),
            ListenerKind::Sim(l) => TcpListener {
                kind: ListenerKind::Sim(l.try_clone()),
            },
        })
    }

    /// Wraps a `std` listener, switching it to non-blocking mode.
    ///
    /// Inside a simulation a real listener is refused (`Unsupported`): it
    /// would wait for a poller the simulation does not have.
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        if simulated() {
            return Err(not_simulated("TcpListener::from_std"));
        }
        OsListener::from_std(listener).map(TcpListener::os)
    }

    /// Unwraps the `std` listener, back in blocking mode (`Unsupported`
    /// for a simulated one).
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        match self.kind {
            ListenerKind::Os(l) => l.into_std(),
            ListenerKind::Sim(_) => Err(not_simulated("TcpListener::into_std")),
        }
    }
}

impl From<std::net::TcpListener> for TcpListener {
    /// Like [`TcpListener::from_std`].
    ///
    /// # Panics
    ///
    /// If the socket cannot be made non-blocking or registered with the
    /// poller (or this is a simulation); use `from_std` to handle that
    /// error.
    #[track_caller]
    fn from(l: std::net::TcpListener) -> TcpListener {
        expect_registered(TcpListener::from_std(l))
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("TcpListener");
        if let Ok(a) = self.local_addr() {
            d.field("addr", &a);
        }
        match &self.kind {
            ListenerKind::Os(l) => d.field("fd", &l.as_raw_fd()),
            ListenerKind::Sim(_) => d.field("simulated", &true),
        };
        d.finish()
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
    kind: StreamKind,
}

enum StreamKind {
    Os(OsStream),
    Sim(SimStream),
}

/// A real connected socket.
struct OsStream {
    io: Io<std::net::TcpStream>,
}

std_conversions!(OsStream <- std::net::TcpStream, timed);
socket_methods!(OsStream: peer_addr, local_addr, shutdown, ttl, timeouts, clone);
fd_impls!(OsStream);
stream_io_impls!(OsStream);

impl OsStream {
    fn connect_addr(
        addr: &SocketAddr,
        deadline: Option<std::time::Instant>,
    ) -> io::Result<OsStream> {
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
        let stream = OsStream::from_socket(s)?;
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
    fn from_socket(s: Socket) -> io::Result<OsStream> {
        Ok(OsStream {
            io: Io::new(std::net::TcpStream::from(s))?,
        })
    }
}

impl TcpStream {
    fn os(s: OsStream) -> TcpStream {
        TcpStream {
            kind: StreamKind::Os(s),
        }
    }

    fn sim(s: SimStream) -> TcpStream {
        TcpStream {
            kind: StreamKind::Sim(s),
        }
    }

    /// Opens a connection to `addr`, trying each address in turn like
    /// `std`, and parking while the handshake is in progress. Inside a
    /// simulation, a simulated connection from the calling thread's host
    /// ([`crate::sim::net`]).
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        if simulated() {
            return each_addr(&addr, |a| SimStream::connect(*a, None).map(TcpStream::sim));
        }
        each_addr(&addr, |a| {
            OsStream::connect_addr(a, None).map(TcpStream::os)
        })
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
        let deadline = crate::clock::now().checked_add(timeout);
        if simulated() {
            return SimStream::connect(*addr, deadline).map(TcpStream::sim);
        }
        OsStream::connect_addr(addr, deadline).map(TcpStream::os)
    }

    /// Sets `TCP_NODELAY` (disables Nagle's algorithm when `true`). A
    /// simulated stream has no Nagle: nothing to set.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        match &self.kind {
            StreamKind::Os(s) => s.io.sock.set_nodelay(nodelay),
            StreamKind::Sim(_) => Ok(()),
        }
    }

    /// Gets `TCP_NODELAY` (always `true` for a simulated stream).
    pub fn nodelay(&self) -> io::Result<bool> {
        match &self.kind {
            StreamKind::Os(s) => s.io.sock.nodelay(),
            StreamKind::Sim(_) => Ok(true),
        }
    }

    /// Receives data without removing it from the queue, parking until
    /// some is available.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.kind {
            StreamKind::Os(s) => s.io.read(|s| s.peek(buf)),
            StreamKind::Sim(s) => s.read(buf, false, true),
        }
    }

    /// Receives data without removing it from the queue and without
    /// waiting: `WouldBlock` if none has arrived; `Ok(0)` at end of file.
    /// (A connection pool's "is it still open and quiet" check.)
    ///
    /// ```
    /// use std::io::{ErrorKind, Write};
    /// use weft::net::{TcpListener, TcpStream};
    ///
    /// let listener = TcpListener::bind("127.0.0.1:0")?;
    /// let c = TcpStream::connect(listener.local_addr()?)?;
    /// let (mut s, _) = listener.accept()?;
    /// let mut b = [0u8; 1];
    /// assert_eq!(c.try_peek(&mut b).unwrap_err().kind(), ErrorKind::WouldBlock);
    /// drop(s);
    /// c.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    /// assert_eq!(c.peek(&mut b)?, 0); // closed: end of file
    /// assert_eq!(c.try_peek(&mut b)?, 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.kind {
            StreamKind::Os(s) => retry_eintr(|| s.io.sock.peek(buf)),
            StreamKind::Sim(s) => s.read(buf, false, false),
        }
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.kind {
            StreamKind::Os(s) => s.peer_addr(),
            StreamKind::Sim(s) => s.peer_addr(),
        }
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.kind {
            StreamKind::Os(s) => s.local_addr(),
            StreamKind::Sim(s) => s.local_addr(),
        }
    }

    /// Shuts down the read half, the write half, or both. Threads
    /// blocked on this socket wake up and see end-of-file or an error.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match &self.kind {
            StreamKind::Os(s) => s.shutdown(how),
            StreamKind::Sim(s) => s.shutdown(how),
        }
    }

    /// Sets `IP_TTL` (not simulated).
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        match &self.kind {
            StreamKind::Os(s) => s.set_ttl(ttl),
            StreamKind::Sim(_) => Err(not_simulated("TcpStream::set_ttl")),
        }
    }

    /// Gets `IP_TTL` (not simulated).
    pub fn ttl(&self) -> io::Result<u32> {
        match &self.kind {
            StreamKind::Os(s) => s.ttl(),
            StreamKind::Sim(_) => Err(not_simulated("TcpStream::ttl")),
        }
    }

    /// Sets the read timeout: a `read` or `peek` that waits longer fails
    /// with `TimedOut` (in a simulation: virtual time). `None` waits
    /// forever; `Some(Duration::ZERO)` is `InvalidInput`. Per handle
    /// (module docs, "Timeouts").
    pub fn set_read_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        match &self.kind {
            StreamKind::Os(s) => s.set_read_timeout(dur),
            StreamKind::Sim(s) => s.set_read_timeout(dur),
        }
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        match &self.kind {
            StreamKind::Os(s) => s.read_timeout(),
            StreamKind::Sim(s) => Ok(s.read_timeout()),
        }
    }

    /// Sets the write timeout: a `write` that waits longer fails with
    /// `TimedOut`. As `set_read_timeout`.
    pub fn set_write_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        match &self.kind {
            StreamKind::Os(s) => s.set_write_timeout(dur),
            StreamKind::Sim(s) => s.set_write_timeout(dur),
        }
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        match &self.kind {
            StreamKind::Os(s) => s.write_timeout(),
            StreamKind::Sim(s) => Ok(s.write_timeout()),
        }
    }

    /// Gets and clears `SO_ERROR` (a simulated stream has none: its
    /// errors come from the calls).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        match &self.kind {
            StreamKind::Os(s) => s.take_error(),
            StreamKind::Sim(_) => Ok(None),
        }
    }

    /// A new handle to the same socket: a duplicated descriptor with its
    /// own registration and a copy of this handle's timeouts (a simulated
    /// stream: a second handle, closed with the last one).
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        Ok(match &self.kind {
            StreamKind::Os(s) => TcpStream::os(s.try_clone()?),
            StreamKind::Sim(s) => TcpStream::sim(s.try_clone()?),
        })
    }

    /// Wraps a `std` stream, switching it to non-blocking mode. Timeouts
    /// set on the `std` socket (`SO_RCVTIMEO`/`SO_SNDTIMEO`) are carried
    /// over.
    ///
    /// Inside a simulation a real stream is refused (`Unsupported`): it
    /// would wait for a poller the simulation does not have.
    pub fn from_std(s: std::net::TcpStream) -> io::Result<TcpStream> {
        if simulated() {
            return Err(not_simulated("TcpStream::from_std"));
        }
        OsStream::from_std(s).map(TcpStream::os)
    }

    /// Unwraps the `std` stream, back in blocking mode. This handle's
    /// timeouts are set as socket options, so it behaves as it did here.
    /// `Unsupported` for a simulated stream.
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        match self.kind {
            StreamKind::Os(s) => s.into_std(),
            StreamKind::Sim(_) => Err(not_simulated("TcpStream::into_std")),
        }
    }

    #[cfg_attr(not(any(feature = "futures-io", feature = "tokio")), allow(dead_code))]
    pub(crate) fn io(&self) -> AsyncIo<'_> {
        match &self.kind {
            StreamKind::Os(s) => AsyncIo::Os(&s.io),
            StreamKind::Sim(_) => AsyncIo::Sim,
        }
    }
}

/// What the async traits (`io_compat`) drive: a real socket's engine, or
/// a simulated stream, which they do not support.
#[cfg_attr(not(any(feature = "futures-io", feature = "tokio")), allow(dead_code))]
pub(crate) enum AsyncIo<'a> {
    Os(&'a Io<std::net::TcpStream>),
    Sim,
}

#[cfg_attr(not(any(feature = "futures-io", feature = "tokio")), allow(dead_code))]
impl AsyncIo<'_> {
    pub(crate) fn poll_read<R>(
        &self,
        cx: &mut Context<'_>,
        op: impl FnMut(&std::net::TcpStream) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        match self {
            AsyncIo::Os(io) => io.poll_read(cx, op),
            AsyncIo::Sim => Poll::Ready(Err(not_simulated("TcpStream's AsyncRead"))),
        }
    }

    pub(crate) fn poll_write<R>(
        &self,
        cx: &mut Context<'_>,
        op: impl FnMut(&std::net::TcpStream) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        match self {
            AsyncIo::Os(io) => io.poll_write(cx, op),
            AsyncIo::Sim => Poll::Ready(Err(not_simulated("TcpStream's AsyncWrite"))),
        }
    }
}

impl From<std::net::TcpStream> for TcpStream {
    /// Like [`TcpStream::from_std`].
    ///
    /// # Panics
    ///
    /// If the socket cannot be made non-blocking or registered with the
    /// poller (or this is a simulation); use `from_std` to handle that
    /// error.
    #[track_caller]
    fn from(s: std::net::TcpStream) -> TcpStream {
        expect_registered(TcpStream::from_std(s))
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.kind {
            StreamKind::Os(s) => {
                let mut s = s;
                s.read(buf)
            }
            StreamKind::Sim(s) => s.read(buf, true, true),
        }
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        match &self.kind {
            StreamKind::Os(s) => {
                let mut s = s;
                s.read_vectored(bufs)
            }
            StreamKind::Sim(s) => {
                let buf = bufs.iter_mut().find(|b| !b.is_empty());
                s.read(buf.map_or(&mut [][..], |b| &mut **b), true, true)
            }
        }
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &self.kind {
            StreamKind::Os(s) => {
                let mut s = s;
                s.write(buf)
            }
            StreamKind::Sim(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match &self.kind {
            StreamKind::Os(s) => {
                let mut s = s;
                s.write_vectored(bufs)
            }
            StreamKind::Sim(s) => {
                let buf = bufs.iter().find(|b| !b.is_empty());
                s.write(buf.map_or(&[][..], |b| &**b))
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

by_ref_io_impls!(TcpStream);

kind_fd_impls!(TcpListener: ListenerKind, TcpStream: StreamKind);

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("TcpStream");
        if let Ok(a) = self.local_addr() {
            d.field("addr", &a);
        }
        if let Ok(a) = self.peer_addr() {
            d.field("peer", &a);
        }
        match &self.kind {
            StreamKind::Os(s) => d.field("fd", &s.as_raw_fd()),
            StreamKind::Sim(_) => d.field("simulated", &true),
        };
        d.finish()
    }
}
