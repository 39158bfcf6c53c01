//! Unix-domain sockets: [`UnixListener`], [`UnixStream`], [`UnixDatagram`].

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use socket2::{Domain, SockAddr, SockRef, Socket, Type};

use super::io::{
    Io, expect_registered, fd_impls, refuse_in_simulation, socket_methods, std_conversions,
    stream_io_impls,
};
use super::tcp::BACKLOG;

const ACCEPT_FLAGS: libc::c_int = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;

/// Converts an address from `accept`/`recvfrom` to `std`'s type.
fn to_std_addr(a: &SockAddr) -> io::Result<SocketAddr> {
    if let Some(p) = a.as_pathname() {
        return SocketAddr::from_pathname(p);
    }
    if let Some(name) = a.as_abstract_namespace() {
        use std::os::linux::net::SocketAddrExt;
        return SocketAddr::from_abstract_name(name);
    }
    // Unnamed (the usual peer of `accept`): `std` has no constructor for
    // it, so keep one obtained from an unbound socket.
    static UNNAMED: OnceLock<SocketAddr> = OnceLock::new();
    if let Some(a) = UNNAMED.get() {
        return Ok(a.clone());
    }
    let a = std::os::unix::net::UnixDatagram::unbound()?.local_addr()?;
    Ok(UNNAMED.get_or_init(|| a).clone())
}

/// A Unix-domain stream server: weft's
/// [`std::os::unix::net::UnixListener`].
///
/// ```
/// use std::io::{Read, Write};
/// use weft::net::{UnixListener, UnixStream};
///
/// let path = std::env::temp_dir().join(format!("weft-doc-{}.sock", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// let listener = UnixListener::bind(&path)?;
/// let server = weft::spawn(move || -> std::io::Result<()> {
///     let (mut s, _) = listener.accept()?;
///     let mut buf = [0u8; 4];
///     s.read_exact(&mut buf)?;
///     s.write_all(&buf)
/// });
/// let mut c = UnixStream::connect(&path)?;
/// c.write_all(b"echo")?;
/// let mut buf = [0u8; 4];
/// c.read_exact(&mut buf)?;
/// assert_eq!(&buf, b"echo");
/// server.join().unwrap()?;
/// std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct UnixListener {
    io: Io<std::os::unix::net::UnixListener>,
}

impl UnixListener {
    /// Creates a listener bound to `path` (the backlog is the system
    /// maximum).
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        refuse_in_simulation("UnixListener::bind")?;
        let s = Socket::new(Domain::UNIX, Type::STREAM.nonblocking().cloexec(), None)?;
        s.bind(&SockAddr::unix(path)?)?;
        s.listen(BACKLOG)?;
        Ok(UnixListener {
            io: Io::new(std::os::unix::net::UnixListener::from(
                std::os::fd::OwnedFd::from(s),
            ))?,
        })
    }

    /// Accepts a connection, parking until one arrives. An interrupt while
    /// waiting returns `Interrupted` and shuts the listener down.
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (sock, addr) = self.io.read(|l| SockRef::from(l).accept4(ACCEPT_FLAGS))?;
        let stream = UnixStream::from_socket(sock)?;
        Ok((stream, to_std_addr(&addr)?))
    }

    /// An iterator over incoming connections (never `None`).
    pub fn incoming(&self) -> UnixIncoming<'_> {
        UnixIncoming { listener: self }
    }
}

/// The iterator of [`UnixListener::incoming`].
#[derive(Debug)]
pub struct UnixIncoming<'a> {
    listener: &'a UnixListener,
}

impl Iterator for UnixIncoming<'_> {
    type Item = io::Result<UnixStream>;
    fn next(&mut self) -> Option<io::Result<UnixStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

/// A Unix-domain stream: weft's [`std::os::unix::net::UnixStream`].
///
/// ```
/// use std::io::{Read, Write};
/// use weft::net::UnixStream;
///
/// let (mut a, mut b) = UnixStream::pair()?;
/// a.write_all(b"hi")?;
/// let mut buf = [0u8; 2];
/// b.read_exact(&mut buf)?;
/// assert_eq!(&buf, b"hi");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct UnixStream {
    io: Io<std::os::unix::net::UnixStream>,
}

impl UnixStream {
    /// Connects to the socket at `path`.
    ///
    /// If the listener's backlog is full, Linux refuses a non-blocking
    /// connect (`EAGAIN`) and offers no readiness event for "the backlog
    /// has room again"; weft then retries with a growing pause (1 ms to
    /// 50 ms, parking the virtual thread), as a blocking `connect` would
    /// wait. An interrupt ends the wait with `Interrupted`.
    pub fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        refuse_in_simulation("UnixStream::connect")?;
        let addr = SockAddr::unix(path)?;
        let s = Socket::new(Domain::UNIX, Type::STREAM.nonblocking().cloexec(), None)?;
        let mut pause = Duration::from_millis(1);
        loop {
            match s.connect(&addr) {
                Ok(()) => break,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    crate::thread::sleep(pause)?;
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        // Registered once connected: an unconnected stream socket reports
        // a hang-up to epoll.
        UnixStream::from_socket(s)
    }

    /// A connected pair of streams (`socketpair`).
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        refuse_in_simulation("UnixStream::pair")?;
        let (a, b) = Socket::pair(Domain::UNIX, Type::STREAM.nonblocking().cloexec(), None)?;
        Ok((UnixStream::from_socket(a)?, UnixStream::from_socket(b)?))
    }

    fn from_socket(s: Socket) -> io::Result<UnixStream> {
        Ok(UnixStream {
            io: Io::new(std::os::unix::net::UnixStream::from(
                std::os::fd::OwnedFd::from(s),
            ))?,
        })
    }

    #[cfg_attr(not(any(feature = "futures-io", feature = "tokio")), allow(dead_code))]
    pub(crate) fn io(&self) -> &Io<std::os::unix::net::UnixStream> {
        &self.io
    }
}

stream_io_impls!(UnixStream);

/// A Unix-domain datagram socket: weft's
/// [`std::os::unix::net::UnixDatagram`].
///
/// ```
/// use weft::net::UnixDatagram;
///
/// let (a, b) = UnixDatagram::pair()?;
/// a.send(b"one")?;
/// let mut buf = [0u8; 8];
/// let n = b.recv(&mut buf)?;
/// assert_eq!(&buf[..n], b"one");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct UnixDatagram {
    io: Io<std::os::unix::net::UnixDatagram>,
}

impl UnixDatagram {
    /// Creates a socket bound to `path`.
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixDatagram> {
        refuse_in_simulation("UnixDatagram::bind")?;
        let s = Socket::new(Domain::UNIX, Type::DGRAM.nonblocking().cloexec(), None)?;
        s.bind(&SockAddr::unix(path)?)?;
        UnixDatagram::from_socket(s)
    }

    /// Creates a socket bound to no address.
    pub fn unbound() -> io::Result<UnixDatagram> {
        refuse_in_simulation("UnixDatagram::unbound")?;
        let s = Socket::new(Domain::UNIX, Type::DGRAM.nonblocking().cloexec(), None)?;
        UnixDatagram::from_socket(s)
    }

    /// A connected pair of datagram sockets (`socketpair`).
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        refuse_in_simulation("UnixDatagram::pair")?;
        let (a, b) = Socket::pair(Domain::UNIX, Type::DGRAM.nonblocking().cloexec(), None)?;
        Ok((UnixDatagram::from_socket(a)?, UnixDatagram::from_socket(b)?))
    }

    fn from_socket(s: Socket) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            io: Io::new(std::os::unix::net::UnixDatagram::from(
                std::os::fd::OwnedFd::from(s),
            ))?,
        })
    }

    /// Sets the default destination of `send` and the only source `recv`
    /// accepts.
    pub fn connect<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        self.io.check_open()?;
        self.io.sock.connect(path)
    }

    /// Sends a datagram to the socket at `path`.
    pub fn send_to<P: AsRef<Path>>(&self, buf: &[u8], path: P) -> io::Result<usize> {
        self.io.check_open()?;
        let path = path.as_ref();
        self.io.write(|s| s.send_to(buf, path))
    }

    /// Receives a datagram and its source address.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.check_open()?;
        self.io.read(|s| s.recv_from(buf))
    }
}

/// `Debug`: the local address and the descriptor.
macro_rules! debug_impls {
    ($($t:ident),*) => {$(
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut d = f.debug_struct(stringify!($t));
                if let Ok(a) = self.io.sock.local_addr() {
                    d.field("local", &a);
                }
                d.field("fd", &self.as_raw_fd()).finish()
            }
        }
    )*};
}

std_conversions!(
    UnixListener <- std::os::unix::net::UnixListener;
    UnixStream <- std::os::unix::net::UnixStream, timed;
    UnixDatagram <- std::os::unix::net::UnixDatagram, timed;
);
socket_methods!(UnixListener: local_addr, clone);
socket_methods!(UnixStream: local_addr, peer_addr, shutdown, timeouts, clone);
socket_methods!(UnixDatagram: datagram, local_addr, peer_addr, shutdown, timeouts, clone);
debug_impls!(UnixListener, UnixStream, UnixDatagram);
fd_impls!(UnixListener, UnixStream, UnixDatagram);
