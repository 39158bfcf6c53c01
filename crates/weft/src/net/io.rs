//! What every socket type of `net` shares: [`Io`], a non-blocking socket
//! registered with the poller and the handle's timeouts, whose calls wait
//! for readiness by parking (a virtual thread) or blocking (an OS thread);
//! the helpers around it; and the macros that write what the socket types
//! have in common: the trait impls (`Read`/`Write` of a stream, the
//! descriptor traits), the conversions from and into `std`
//! (`std_conversions!`) and the inherent methods that only delegate to the
//! socket or the handle (`socket_methods!`: addresses, options, timeouts).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use super::addr::ToSocketAddrs;
use crate::poll::{Interest, Registration};

pub(super) use crate::clock::Timeout;

/// A non-blocking socket `S` registered with the poller, with its
/// timeouts. The shared engine of every type in this module.
///
/// Field order matters: `reg` is declared first so that it is dropped (and
/// the descriptor deregistered) *before* `sock` closes the descriptor.
pub(crate) struct Io<S: AsRawFd> {
    pub(super) reg: Registration,
    pub(super) sock: S,
    pub(super) read_timeout: Timeout,
    pub(super) write_timeout: Timeout,
    /// Set when an interrupt shut the socket down (datagram sockets check
    /// it: the kernel does not make their later calls fail).
    pub(super) shut: AtomicBool,
}

impl<S: AsRawFd> Io<S> {
    /// Registers `sock`, which must already be non-blocking. Refused
    /// inside a simulation, which has no poller (the simulated TCP types
    /// never get here; UDP and Unix sockets are not simulated).
    pub(super) fn new(sock: S) -> io::Result<Io<S>> {
        if simulated() {
            return Err(not_simulated("a real socket"));
        }
        let reg = Registration::new(sock.as_raw_fd())?;
        Ok(Io {
            reg,
            sock,
            read_timeout: Timeout::none(),
            write_timeout: Timeout::none(),
            shut: AtomicBool::new(false),
        })
    }

    /// A handle to a duplicate `sock` (from `try_clone`) with this
    /// handle's timeouts.
    pub(super) fn clone_with(&self, sock: S) -> io::Result<Io<S>> {
        let mut io = Io::new(sock)?;
        io.read_timeout = self.read_timeout.copy();
        io.write_timeout = self.write_timeout.copy();
        Ok(io)
    }

    /// Unregisters and returns the socket (still non-blocking).
    pub(super) fn into_inner(self) -> S {
        let Io { reg, sock, .. } = self;
        drop(reg);
        sock
    }

    /// Runs `op` (a non-blocking syscall) until it stops returning
    /// `WouldBlock`, waiting for readiness `i` until `deadline`.
    pub(super) fn op<R>(
        &self,
        i: Interest,
        deadline: Option<Instant>,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        let r = self
            .reg
            .do_io(i, deadline, || retry_eintr(|| op(&self.sock)));
        self.after_op(r)
    }

    /// Shuts the socket down if `r` is a weft interrupt (see
    /// `shutdown_after_interrupt`); returns `r`.
    fn after_op<R>(&self, r: io::Result<R>) -> io::Result<R> {
        if let Err(e) = &r
            && e.kind() == io::ErrorKind::Interrupted
        {
            self.shutdown_after_interrupt();
        }
        r
    }

    /// A stream read or write of `want` bytes (see
    /// `Registration::do_stream_io`).
    pub(super) fn stream_op(
        &self,
        i: Interest,
        want: usize,
        mut op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let deadline = match i {
            Interest::Read => self.read_timeout.deadline(),
            Interest::Write => self.write_timeout.deadline(),
        };
        let r = self
            .reg
            .do_stream_io(i, deadline, want, || retry_eintr(|| op(&self.sock)));
        self.after_op(r)
    }

    /// A stream read into `want` bytes under the read timeout.
    pub(super) fn read_stream(
        &self,
        want: usize,
        op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.stream_op(Interest::Read, want, op)
    }

    /// A stream write of `want` bytes under the write timeout.
    pub(super) fn write_stream(
        &self,
        want: usize,
        op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.stream_op(Interest::Write, want, op)
    }

    /// A read-direction operation under the read timeout.
    pub(super) fn read<R>(&self, op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        self.op(Interest::Read, self.read_timeout.deadline(), op)
    }

    /// A write-direction operation under the write timeout.
    pub(super) fn write<R>(&self, op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        self.op(Interest::Write, self.write_timeout.deadline(), op)
    }

    /// Java's "an interrupt closes the channel": shut the socket down so
    /// that retries see EOF/errors, and wake whoever else waits on it.
    pub(super) fn shutdown_after_interrupt(&self) {
        self.shut.store(true, Ordering::SeqCst);
        // SAFETY: shutdown(2) on the descriptor we own; errors (e.g.
        // ENOTCONN on an unconnected socket) are irrelevant here.
        unsafe {
            libc::shutdown(self.sock.as_raw_fd(), libc::SHUT_RDWR);
        }
        self.reg.state().wake_all();
    }

    /// Fails if an interrupt shut this (datagram) socket down.
    pub(super) fn check_open(&self) -> io::Result<()> {
        if self.shut.load(Ordering::SeqCst) {
            Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "weft: socket was shut down by a thread interrupt",
            ))
        } else {
            Ok(())
        }
    }

    /// The async form of `op` (no timeout): ready, or `Pending` with `cx`
    /// registered for readiness `i`.
    fn poll_op<R>(
        &self,
        cx: &mut Context<'_>,
        i: Interest,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let sock = &self.sock;
        self.reg.poll_io(cx, i, || retry_eintr(|| op(sock)))
    }

    /// The async form of a read-direction operation.
    #[cfg_attr(not(any(feature = "futures-io", feature = "tokio")), allow(dead_code))]
    pub(crate) fn poll_read<R>(
        &self,
        cx: &mut Context<'_>,
        op: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_op(cx, Interest::Read, op)
    }

    /// The async form of a write-direction operation.
    #[cfg_attr(not(any(feature = "futures-io", feature = "tokio")), allow(dead_code))]
    pub(crate) fn poll_write<R>(
        &self,
        cx: &mut Context<'_>,
        op: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_op(cx, Interest::Write, op)
    }
}

/// Whether the calling thread runs in a simulation (`crate::sim`): one
/// relaxed load outside one.
#[inline]
pub(super) fn simulated() -> bool {
    crate::sched::simulation().is_some()
}

/// The error of `call` inside a simulation, which does not model it: a
/// real socket there would wait for a poller the simulation does not have
/// (ARCHITECTURE.md, "Escapes").
pub(super) fn not_simulated(call: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "weft::net: {call} is not simulated: inside a simulation (weft::sim) only \
             the sockets TcpListener::bind, TcpStream::connect and UdpSocket::bind make \
             exist"
        ),
    )
}

/// Fails with [`not_simulated`] inside a simulation: the first line of
/// every call that makes a socket type the simulation does not model.
pub(super) fn refuse_in_simulation(call: &str) -> io::Result<()> {
    if simulated() {
        return Err(not_simulated(call));
    }
    Ok(())
}

/// The descriptor a simulated socket's `as_fd`/`as_raw_fd` give: `/dev/null`
/// opened with `O_PATH`, which is no socket and fails every read, write
/// and socket call (`EBADF`, `ENOTSOCK`), so code that reaches for the
/// descriptor gets an error rather than a real socket outside the
/// simulation.
///
/// # Panics
///
/// If `/dev/null` cannot be opened.
pub(super) fn sim_fd() -> BorrowedFd<'static> {
    static FD: OnceLock<OwnedFd> = OnceLock::new();
    FD.get_or_init(|| {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
            .open("/dev/null");
        match f {
            Ok(f) => OwnedFd::from(f),
            Err(e) => {
                panic!("weft::net: cannot open /dev/null for a simulated socket's descriptor: {e}")
            }
        }
    })
    .as_fd()
}

/// What a simulated socket's `into_raw_fd` hands over: a copy of
/// [`sim_fd`] (the caller closes it), or -1 if it cannot be copied.
pub(super) fn sim_into_raw_fd() -> RawFd {
    sim_fd()
        .try_clone_to_owned()
        .map_or(-1, IntoRawFd::into_raw_fd)
}

/// Runs `f`, retrying at once on `EINTR` from the system call itself, so
/// that an `Interrupted` out of the poller's wait always means a weft
/// interrupt.
pub(super) fn retry_eintr<R>(mut f: impl FnMut() -> io::Result<R>) -> io::Result<R> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Tries `f` on each address in turn, like `std`: the first success, or
/// the last error.
pub(super) fn each_addr<A: ToSocketAddrs + ?Sized, T>(
    addr: &A,
    mut f: impl FnMut(&std::net::SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in addr.weft_addrs()? {
        match f(&a) {
            Ok(t) => return Ok(t),
            // An interrupt ends the whole attempt, not just this address.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Err(e),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any addresses",
        )
    }))
}

/// `TimedOut`, as `std` would report it on Linux for a connect timeout.
pub(super) fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "weft: socket operation timed out")
}

/// `Result` of registering a socket converted with `From<std::…>`.
#[track_caller]
pub(super) fn expect_registered<T>(r: io::Result<T>) -> T {
    match r {
        Ok(t) => t,
        Err(e) => panic!("weft::net: cannot register the socket with the I/O poller: {e}"),
    }
}

/// `Read` and `Write` for a stream socket type `$t` (with an `io: Io<_>`
/// field) and for `&$t`: every call waits for readiness through
/// `Io::read_stream`/`Io::write_stream`; `flush` has nothing to do (writes
/// are not buffered).
macro_rules! stream_io_impls {
    ($($t:ty),*) => {$(
        impl Read for &$t {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let want = buf.len();
                self.io.read_stream(want, |mut s| s.read(buf))
            }
            fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
                let want = bufs.iter().map(|b| b.len()).sum();
                self.io.read_stream(want, |mut s| s.read_vectored(bufs))
            }
        }

        impl Write for &$t {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.io.write_stream(buf.len(), |mut s| s.write(buf))
            }
            fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
                let want = bufs.iter().map(|b| b.len()).sum();
                self.io.write_stream(want, |mut s| s.write_vectored(bufs))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }

        crate::net::io::by_ref_io_impls!($t);
    )*};
}

/// `Read`/`Write` for an owned stream type by its `&T` impls (the
/// socket's calls take `&self`).
macro_rules! by_ref_io_impls {
    ($($t:ty),*) => {$(
        impl Read for $t {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                (&*self).read(buf)
            }
            fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
                (&*self).read_vectored(bufs)
            }
        }

        impl Write for $t {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                (&*self).write(buf)
            }
            fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
                (&*self).write_vectored(bufs)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
    )*};
}
pub(super) use {by_ref_io_impls, stream_io_impls};

macro_rules! fd_impls {
    ($($t:ty),*) => {$(
        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                self.io.sock.as_raw_fd()
            }
        }
        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.io.sock.as_fd()
            }
        }
        impl IntoRawFd for $t {
            /// Unregisters the socket and hands over its descriptor (still
            /// in non-blocking mode).
            fn into_raw_fd(self) -> RawFd {
                self.io.into_inner().into_raw_fd()
            }
        }
    )*};
}
pub(super) use fd_impls;

/// The descriptor traits of a socket type `$t` with a `kind` field of
/// enum `$kind`: `Os` (a real socket, with its own descriptor traits) or
/// `Sim` (a simulated one, which has no descriptor and hands out one that
/// fails every call: `sim_fd`).
macro_rules! kind_fd_impls {
    ($($t:ident: $kind:ident),*) => {$(
        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                match &self.kind {
                    $kind::Os(s) => s.as_raw_fd(),
                    $kind::Sim(_) => super::io::sim_fd().as_raw_fd(),
                }
            }
        }
        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                match &self.kind {
                    $kind::Os(s) => s.as_fd(),
                    $kind::Sim(_) => super::io::sim_fd(),
                }
            }
        }
        impl IntoRawFd for $t {
            /// Unregisters the socket and hands over its descriptor (still
            /// in non-blocking mode). A simulated socket is closed, and
            /// the descriptor handed over fails every call.
            fn into_raw_fd(self) -> RawFd {
                match self.kind {
                    $kind::Os(s) => s.into_raw_fd(),
                    $kind::Sim(_) => super::io::sim_into_raw_fd(),
                }
            }
        }
    )*};
}
pub(super) use kind_fd_impls;

/// The inherent methods the socket types share, written once, one `impl`
/// block per group. `$t` has an `io: Io<S>` field, `S` its `std`
/// counterpart; the bodies call `S`'s own methods, and name `SocketAddr`,
/// `Duration` and `Shutdown` as the calling module imports them (a Unix
/// socket's address is not an IP one).
///
/// - `local_addr`, `peer_addr`: the addresses;
/// - `clone`: `take_error` and `try_clone`;
/// - `ttl`: `set_ttl` and `ttl` (`IP_TTL`);
/// - `timeouts`: the read and write timeouts, kept in the handle;
/// - `shutdown`: shuts a half or both down and wakes the waiters;
/// - `datagram`: `send` and `recv` on a connected datagram socket.
macro_rules! socket_methods {
    ($t:ident: $($group:ident),+ $(,)?) => {$(
        socket_methods!(@$group $t);
    )+};
    (@local_addr $t:ident) => {
        impl $t {
            /// The local address (a listener's: the one it is bound to).
            pub fn local_addr(&self) -> io::Result<SocketAddr> {
                self.io.sock.local_addr()
            }
        }
    };
    (@peer_addr $t:ident) => {
        impl $t {
            /// The remote address of a connected socket.
            pub fn peer_addr(&self) -> io::Result<SocketAddr> {
                self.io.sock.peer_addr()
            }
        }
    };
    (@clone $t:ident) => {
        impl $t {
            /// Gets and clears `SO_ERROR`.
            pub fn take_error(&self) -> io::Result<Option<io::Error>> {
                self.io.sock.take_error()
            }

            /// A new handle to the same socket: a duplicated descriptor
            /// with its own registration and a copy of this handle's
            /// timeouts.
            pub fn try_clone(&self) -> io::Result<$t> {
                let s = self.io.sock.try_clone()?;
                Ok($t {
                    io: self.io.clone_with(s)?,
                })
            }
        }
    };
    (@ttl $t:ident) => {
        impl $t {
            /// Sets `IP_TTL` (a listener's: for the sockets it accepts).
            pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
                self.io.sock.set_ttl(ttl)
            }

            /// Gets `IP_TTL`.
            pub fn ttl(&self) -> io::Result<u32> {
                self.io.sock.ttl()
            }
        }
    };
    (@timeouts $t:ident) => {
        impl $t {
            /// Sets the read timeout: a read-direction call (`read`,
            /// `recv`, `peek`, …) that waits longer fails with `TimedOut`.
            /// `None` waits forever; `Some(Duration::ZERO)` is
            /// `InvalidInput`. Per handle (module docs, "Timeouts").
            pub fn set_read_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
                self.io.read_timeout.set(dur)
            }

            /// The read timeout.
            pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
                Ok(self.io.read_timeout.get())
            }

            /// Sets the write timeout: a `write`, `send` or `send_to` that
            /// waits longer fails with `TimedOut`. As `set_read_timeout`.
            pub fn set_write_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
                self.io.write_timeout.set(dur)
            }

            /// The write timeout.
            pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
                Ok(self.io.write_timeout.get())
            }
        }
    };
    (@datagram $t:ident) => {
        impl $t {
            /// Sends a datagram to the connected peer, parking while the
            /// send buffer (a Unix peer's: its queue) is full.
            pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
                self.io.check_open()?;
                self.io.write(|s| s.send(buf))
            }

            /// Receives a datagram from the connected peer, parking until
            /// one arrives.
            pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
                self.io.check_open()?;
                self.io.read(|s| s.recv(buf))
            }
        }
    };
    (@shutdown $t:ident) => {
        impl $t {
            /// Shuts down the read half, the write half, or both. Threads
            /// blocked on this socket wake up and see end-of-file or an
            /// error.
            pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
                let r = self.io.sock.shutdown(how);
                self.io.reg.state().wake_all();
                r
            }
        }
    };
}
pub(super) use socket_methods;

/// `from_std`, `into_std` and `From<$s>` for a socket type `$t` wrapping
/// its `std` counterpart `$s`. A listener has no timeouts; a socket marked
/// `timed` carries its `SO_RCVTIMEO`/`SO_SNDTIMEO` over into the handle in
/// `from_std`, and the handle's timeouts back out as socket options in
/// `into_std`, so it behaves there as it did here.
macro_rules! std_conversions {
    ($($t:ident <- $s:ty $(, $timed:ident)?);+ $(;)?) => {$(
        impl $t {
            /// Wraps a `std` socket, switching it to non-blocking mode.
            $(#[doc = std_conversions!(@doc_from $timed)])?
            pub fn from_std(s: $s) -> io::Result<$t> {
                if super::io::simulated() {
                    return Err(super::io::not_simulated(concat!(stringify!($t), "::from_std")));
                }
                $(std_conversions!(@$timed);
                let rt = s.read_timeout()?;
                let wt = s.write_timeout()?;)?
                s.set_nonblocking(true)?;
                let t = $t { io: Io::new(s)? };
                $(std_conversions!(@$timed);
                t.io.read_timeout.set(rt)?;
                t.io.write_timeout.set(wt)?;)?
                Ok(t)
            }

            /// Unwraps the `std` socket, back in blocking mode.
            $(#[doc = std_conversions!(@doc_into $timed)])?
            pub fn into_std(self) -> io::Result<$s> {
                $(std_conversions!(@$timed);
                let rt = self.io.read_timeout.get();
                let wt = self.io.write_timeout.get();)?
                let s = self.io.into_inner();
                s.set_nonblocking(false)?;
                $(std_conversions!(@$timed);
                s.set_read_timeout(rt)?;
                s.set_write_timeout(wt)?;)?
                Ok(s)
            }
        }

        impl From<$s> for $t {
            #[doc = concat!("Like [`", stringify!($t), "::from_std`].")]
            ///
            /// # Panics
            ///
            /// If the socket cannot be made non-blocking or registered with
            /// the poller; use `from_std` to handle that error.
            #[track_caller]
            fn from(s: $s) -> $t {
                expect_registered($t::from_std(s))
            }
        }
    )+};
    // The one marker a socket with timeouts takes.
    (@timed) => {};
    (@doc_from timed) => {
        "Timeouts set on the `std` socket (`SO_RCVTIMEO`/`SO_SNDTIMEO`) are carried over."
    };
    (@doc_into timed) => {
        "This handle's timeouts are set as socket options, so it behaves as it did here."
    };
}
pub(super) use std_conversions;
