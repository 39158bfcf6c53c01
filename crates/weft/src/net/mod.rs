//! Networking that parks virtual threads: TCP, UDP and Unix-domain sockets
//! with the API of [`std::net`] and [`std::os::unix::net`].
//!
//! Every socket is non-blocking underneath and registered once with weft's
//! I/O poller. A call that would block parks the calling *virtual* thread
//! (its carrier goes on running other virtual threads) until the socket is
//! ready; called from a plain OS thread, it blocks that OS thread, exactly
//! like the `std` type. The same code therefore runs on virtual threads or
//! on an OS thread pool unchanged.
//!
//! ```
//! use std::io::{Read, Write};
//! use weft::net::{TcpListener, TcpStream};
//!
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! let addr = listener.local_addr()?;
//! // An echo server: one virtual thread per connection.
//! weft::spawn(move || {
//!     for stream in listener.incoming() {
//!         let mut stream = stream.unwrap();
//!         weft::spawn(move || {
//!             let mut buf = [0u8; 1024];
//!             loop {
//!                 match stream.read(&mut buf) {
//!                     Ok(0) | Err(_) => break,
//!                     Ok(n) => stream.write_all(&buf[..n]).unwrap(),
//!                 }
//!             }
//!         });
//!     }
//! });
//!
//! let client = weft::spawn(move || -> std::io::Result<Vec<u8>> {
//!     let mut s = TcpStream::connect(addr)?;
//!     s.write_all(b"hello")?;
//!     let mut reply = vec![0u8; 5];
//!     s.read_exact(&mut reply)?;
//!     Ok(reply)
//! });
//! assert_eq!(client.join().unwrap()?, b"hello");
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Types
//!
//! | weft | std counterpart |
//! |---|---|
//! | [`TcpListener`], [`TcpStream`] | [`std::net::TcpListener`], [`std::net::TcpStream`] |
//! | [`UdpSocket`] | [`std::net::UdpSocket`] |
//! | [`UnixListener`], [`UnixStream`], [`UnixDatagram`] | the types of [`std::os::unix::net`] |
//! | [`ToSocketAddrs`], [`lookup_host`] | [`std::net::ToSocketAddrs`] |
//!
//! Each type converts from and into its `std` counterpart (`From`,
//! `from_std`, `into_std`) and exposes its descriptor (`AsFd`, `AsRawFd`,
//! `IntoRawFd`), so socket options that weft does not wrap are one
//! [`socket2::SockRef`](https://docs.rs/socket2) away.
//!
//! # Timeouts
//!
//! `set_read_timeout` / `set_write_timeout` behave as in `std`: an
//! operation that cannot complete within the timeout fails with
//! [`ErrorKind::TimedOut`](std::io::ErrorKind::TimedOut) (std reports
//! `WouldBlock` on some platforms; weft always says `TimedOut`), and
//! `Some(Duration::ZERO)` is rejected with `InvalidInput`. The timeout
//! covers one call (one `read`, one `accept`), not a helper such as
//! `read_exact` that makes several.
//!
//! Unlike `std`, where a timeout is a socket option shared by every clone
//! of the socket, weft keeps timeouts in the handle: [`TcpStream::try_clone`]
//! copies the current values, and setting one afterwards affects only that
//! handle (so a reader thread and a writer thread can each have their own).
//!
//! # Interrupts (Java semantics)
//!
//! If [`Thread::interrupt`](crate::Thread::interrupt) hits a thread that is
//! blocked in a socket operation, the operation returns
//! [`ErrorKind::Interrupted`](std::io::ErrorKind::Interrupted), the thread's
//! interrupt flag is cleared, **and the socket is shut down in both
//! directions** — as an interrupt closes an `InterruptibleChannel` in Java.
//! This matters because `std` helpers such as `read_exact`, `write_all`
//! and `read_to_end` retry on `Interrupted`: after the shutdown their retry
//! sees end-of-file or an error instead of blocking again, so an interrupt
//! reliably stops a thread stuck in socket I/O. The peer sees the
//! connection closed; every clone of the socket (`try_clone`) is affected;
//! an interrupted listener stops listening (`accept` then fails). A
//! datagram socket that was interrupted fails every later operation with
//! `NotConnected`.
//!
//! An interrupt only acts on a thread that actually *waits*: an operation
//! that completes without blocking leaves the interrupt flag set, for the
//! next blocking call to see.
//!
//! # Full duplex
//!
//! Reading and writing wait independently: one thread may block in `read`
//! while another writes to the same socket, through `&TcpStream` (which
//! implements `Read` and `Write`) or a [`TcpStream::try_clone`].
//!
//! # Name resolution
//!
//! `connect`, `bind` and [`lookup_host`] accept anything that implements
//! weft's [`ToSocketAddrs`] — the same set of types as
//! [`std::net::ToSocketAddrs`]. Literal addresses (`SocketAddr`,
//! `"127.0.0.1:80"`, `(ip, port)`) are used directly; host names are
//! resolved with the system resolver (`getaddrinfo`) inside
//! [`crate::blocking`], which marks the carrier blocked so that a spare
//! carrier runs the other virtual threads meanwhile.
//!
//! # Async
//!
//! With the cargo features `futures-io` and `tokio`, [`TcpStream`] and
//! [`UnixStream`] also implement `futures_io::{AsyncRead, AsyncWrite}` and
//! `tokio::io::{AsyncRead, AsyncWrite}`. Those implementations are driven
//! by weft's poller (no Tokio reactor is involved), so async libraries can
//! use weft sockets from any executor — including `block_on` inside a
//! virtual thread. Read and write timeouts do not apply to the async
//! forms; use the executor's timers.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::poll::{Interest, Registration};

mod addr;
mod tcp;
mod udp;
mod unix;

pub use addr::{ToSocketAddrs, lookup_host};
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixIncoming, UnixListener, UnixStream};

/// How many descriptors are registered with weft's I/O poller right now
/// (every live weft socket holds one registration). For leak tests and
/// metrics.
#[doc(hidden)]
pub fn registered_sockets() -> usize {
    crate::netpoll::get().map_or(0, |s| s.registered.load(Ordering::Relaxed))
}

/// A timeout kept in the handle: nanoseconds, 0 meaning none.
struct Timeout(AtomicU64);

impl Timeout {
    const fn none() -> Timeout {
        Timeout(AtomicU64::new(0))
    }

    fn set(&self, dur: Option<Duration>) -> io::Result<()> {
        let nanos = match dur {
            None => 0,
            Some(d) if d.is_zero() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "cannot set a 0 duration timeout",
                ));
            }
            Some(d) => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        };
        self.0.store(nanos, Ordering::Relaxed);
        Ok(())
    }

    fn get(&self) -> Option<Duration> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    fn copy(&self) -> Timeout {
        Timeout(AtomicU64::new(self.0.load(Ordering::Relaxed)))
    }

    /// The deadline for an operation starting now (`None`: wait forever).
    fn deadline(&self) -> Option<Instant> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            n => Instant::now().checked_add(Duration::from_nanos(n)),
        }
    }
}

/// A non-blocking socket `S` registered with the poller, with its
/// timeouts. The shared engine of every type in this module.
///
/// Field order matters: `reg` is declared first so that it is dropped (and
/// the descriptor deregistered) *before* `sock` closes the descriptor.
pub(crate) struct Io<S: AsRawFd> {
    reg: Registration,
    sock: S,
    read_timeout: Timeout,
    write_timeout: Timeout,
    /// Set when an interrupt shut the socket down (datagram sockets check
    /// it: the kernel does not make their later calls fail).
    shut: AtomicBool,
}

impl<S: AsRawFd> Io<S> {
    /// Registers `sock`, which must already be non-blocking.
    fn new(sock: S) -> io::Result<Io<S>> {
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
    fn clone_with(&self, sock: S) -> io::Result<Io<S>> {
        let mut io = Io::new(sock)?;
        io.read_timeout = self.read_timeout.copy();
        io.write_timeout = self.write_timeout.copy();
        Ok(io)
    }

    /// Unregisters and returns the socket (still non-blocking).
    fn into_inner(self) -> S {
        let Io { reg, sock, .. } = self;
        drop(reg);
        sock
    }

    /// Runs `op` (a non-blocking syscall) until it stops returning
    /// `WouldBlock`, waiting for readiness `i` until `deadline`.
    fn op<R>(
        &self,
        i: Interest,
        deadline: Option<Instant>,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        let sock = &self.sock;
        let r = self.reg.do_io(i, deadline, || {
            loop {
                match op(sock) {
                    // EINTR from the syscall itself: retry at once, so an
                    // `Interrupted` out of `do_io` always means a weft
                    // interrupt.
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => return r,
                }
            }
        });
        if let Err(e) = &r
            && e.kind() == io::ErrorKind::Interrupted
        {
            self.shutdown_after_interrupt();
        }
        r
    }

    /// A stream read or write of `want` bytes (see
    /// `Registration::do_stream_io`).
    fn stream_op(
        &self,
        i: Interest,
        want: usize,
        mut op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let sock = &self.sock;
        let deadline = match i {
            Interest::Read => self.read_timeout.deadline(),
            Interest::Write => self.write_timeout.deadline(),
        };
        let r = self.reg.do_stream_io(i, deadline, want, || {
            loop {
                match op(sock) {
                    // EINTR: retry at once (as in `op`).
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => return r,
                }
            }
        });
        if let Err(e) = &r
            && e.kind() == io::ErrorKind::Interrupted
        {
            self.shutdown_after_interrupt();
        }
        r
    }

    /// A stream read into `want` bytes under the read timeout.
    fn read_stream(
        &self,
        want: usize,
        op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.stream_op(Interest::Read, want, op)
    }

    /// A stream write of `want` bytes under the write timeout.
    fn write_stream(
        &self,
        want: usize,
        op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.stream_op(Interest::Write, want, op)
    }

    /// A read-direction operation under the read timeout.
    fn read<R>(&self, op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        self.op(Interest::Read, self.read_timeout.deadline(), op)
    }

    /// A write-direction operation under the write timeout.
    fn write<R>(&self, op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        self.op(Interest::Write, self.write_timeout.deadline(), op)
    }

    /// Java's "an interrupt closes the channel": shut the socket down so
    /// that retries see EOF/errors, and wake whoever else waits on it.
    fn shutdown_after_interrupt(&self) {
        self.shut.store(true, Ordering::SeqCst);
        // SAFETY: shutdown(2) on the descriptor we own; errors (e.g.
        // ENOTCONN on an unconnected socket) are irrelevant here.
        unsafe {
            libc::shutdown(self.sock.as_raw_fd(), libc::SHUT_RDWR);
        }
        self.reg.state().wake_all();
    }

    /// Fails if an interrupt shut this (datagram) socket down.
    fn check_open(&self) -> io::Result<()> {
        if self.shut.load(Ordering::SeqCst) {
            Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "weft: socket was shut down by a thread interrupt",
            ))
        } else {
            Ok(())
        }
    }

    /// The async form of a read-direction operation (no timeout).
    #[cfg_attr(not(any(feature = "futures-io", feature = "tokio")), allow(dead_code))]
    pub(crate) fn poll_read<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let sock = &self.sock;
        self.reg
            .poll_io(cx, Interest::Read, || retry_eintr(|| op(sock)))
    }

    /// The async form of a write-direction operation (no timeout).
    #[cfg_attr(not(any(feature = "futures-io", feature = "tokio")), allow(dead_code))]
    pub(crate) fn poll_write<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let sock = &self.sock;
        self.reg
            .poll_io(cx, Interest::Write, || retry_eintr(|| op(sock)))
    }
}

#[cfg_attr(not(any(feature = "futures-io", feature = "tokio")), allow(dead_code))]
fn retry_eintr<R>(mut f: impl FnMut() -> io::Result<R>) -> io::Result<R> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Tries `f` on each address in turn, like `std`: the first success, or
/// the last error.
fn each_addr<A: ToSocketAddrs + ?Sized, T>(
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
fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "weft: socket operation timed out")
}

/// `Result` of registering a socket converted with `From<std::…>`.
#[track_caller]
fn expect_registered<T>(r: io::Result<T>) -> T {
    match r {
        Ok(t) => t,
        Err(e) => panic!("weft::net: cannot register the socket with the I/O poller: {e}"),
    }
}
