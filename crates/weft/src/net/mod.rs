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
//! # Inside a simulation
//!
//! On the threads of a simulation ([`crate::sim`]), [`TcpListener::bind`],
//! [`TcpStream::connect`], [`TcpStream::connect_timeout`] and
//! [`UdpSocket::bind`] make simulated sockets of the simulated network
//! ([`crate::sim::net`]):
//! hosts instead of the machine's interfaces, names resolved to those
//! hosts, in-memory links in virtual time. Their methods behave as above;
//! socket options other than the timeouts are not simulated (`set_nodelay`
//! does nothing, `set_ttl` fails), and the descriptor they expose fails
//! every call. A real socket — `from_std`, the Unix types — is refused
//! there with `Unsupported`, naming the call: it would wait for
//! a poller the simulation does not have.
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

mod addr;
mod io;
mod tcp;
mod udp;
mod unix;

pub use addr::{ToSocketAddrs, lookup_host};
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixIncoming, UnixListener, UnixStream};
