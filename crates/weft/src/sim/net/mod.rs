//! The simulated network: inside a simulation, [`weft::net`](crate::net)'s
//! TCP and UDP sockets connect simulated hosts through in-memory links, in
//! virtual time, with faults drawn from the seed or scripted by the test.
//!
//! # Hosts
//!
//! [`host`] spawns a virtual thread on a named host, made on first use
//! with the next address: `10.0.0.1`, `10.0.0.2`, … in order of creation.
//! The threads a host's thread spawns are on its host too. Every other
//! thread of the simulation (the closure of [`sim::run`](crate::sim::run)
//! and what it spawns) is on the default host, [`DEFAULT_HOST`]
//! (`"client"`, [`DEFAULT_HOST_IP`] `10.0.0.254`). Inside a simulation,
//! `weft::net` resolves a host's name to its address (`"api:8080"`),
//! `localhost` to `127.0.0.1`, and a loopback or unspecified address
//! (`127.0.0.1`, `0.0.0.0`) to the calling thread's own host; other names
//! are `NotFound`. A listener bound to `127.0.0.1` is reachable from its
//! own host only; one bound to `0.0.0.0` or the host's address from every
//! host.
//!
//! ```
//! use std::io::{Read, Write};
//! use std::time::Duration;
//! use weft::net::{TcpListener, TcpStream};
//! use weft::sim::net;
//!
//! let report = weft::sim::run(1, || {
//!     net::set_default_link(net::Link::new(Duration::from_millis(5))).unwrap();
//!     // A server on host "echo": answers one connection, then ends.
//!     let server = net::host("echo", || -> std::io::Result<()> {
//!         let l = TcpListener::bind("0.0.0.0:7")?;
//!         let (mut s, _) = l.accept()?;
//!         let mut buf = [0u8; 5];
//!         s.read_exact(&mut buf)?;
//!         s.write_all(&buf)
//!     })
//!     .unwrap();
//!     let t0 = weft::sim::now();
//!     // Refused until the server listens: retry.
//!     let mut c = loop {
//!         match TcpStream::connect("echo:7") {
//!             Ok(c) => break c,
//!             Err(_) => weft::sleep(Duration::from_millis(1)).unwrap(),
//!         }
//!     };
//!     c.write_all(b"hello").unwrap();
//!     let mut got = [0u8; 5];
//!     c.read_exact(&mut got).unwrap();
//!     server.join().unwrap().unwrap();
//!     (got, weft::sim::now() - t0)
//! })
//! .unwrap();
//! assert_eq!(&report.value.0, b"hello");
//! // A handshake (one round trip) and the echo (another): 20 ms of
//! // virtual time.
//! assert_eq!(report.value.1, Duration::from_millis(20));
//! ```
//!
//! # The model
//!
//! - **Links.** Each segment (one `write`, a FIN, a RST) between two hosts
//!   is delayed by its [`Link`]: a latency, plus jitter drawn from the
//!   seed, plus, for each loss drawn from the seed, a retransmission
//!   timeout (doubling). Segments of one connection arrive in the order
//!   they were sent, as TCP delivers them; segments of different
//!   connections do not wait for each other. A host's connections to
//!   itself have no delay. [`set_link`] sets one pair's link (both ways),
//!   [`set_default_link`] every other pair's (1 ms by default).
//! - **Handshake.** `connect` sends a SYN: one delay later, at the server's
//!   host, a listener bound to the address takes the connection into its
//!   accept queue (`accept` returns it; the server may write at once), or
//!   none does and a RST goes back; one more delay and the client's
//!   `connect` returns the stream, or `ConnectionRefused`. A SYN to a host
//!   that is down or does not exist is not answered, and sent again 1, 3,
//!   7, 15, 31 and 63 s after the first, as Linux does: `connect` succeeds
//!   if the host came back and listens by then, else times out
//!   (`connect_timeout`'s timeout, or Linux's 127 s).
//! - **Flow control.** A direction holds up to 256 KiB sent and not yet
//!   read; a writer waits (under its write timeout) while it is full.
//! - **Closing.** `shutdown(Write)` sends a FIN: the peer reads the data
//!   before it, then end of file. Dropping the last handle (`try_clone`
//!   shares one socket) closes: a FIN, or a RST if received data was left
//!   unread (as Linux does). Writing to a peer that closed succeeds, and
//!   its host answers with a RST: later reads and writes fail with
//!   `ConnectionReset`. Writing after one's own `shutdown(Write)` is
//!   `BrokenPipe`.
//! - **Partitions.** [`partition`] cuts two hosts apart: what is in flight
//!   between them and everything sent later is held (a SYN too, so a
//!   `connect` across it times out); [`repair`] sends the held segments
//!   (and SYNs) on, in order, each with a fresh delay.
//! - **Crashes.** [`crash`] takes a host down, as if its process were
//!   killed: its connections are reset (each peer gets a RST, one delay
//!   later), its listeners close (their unaccepted connections are reset
//!   too), and its threads are interrupted (`Thread::interrupt`, in spawn
//!   order), so a thread blocked in a socket call, a sleep or an
//!   interruptible wait returns `Interrupted` — Weft cannot stop a thread,
//!   but this is what a program written for interrupts stops on. Every
//!   socket call of its threads and sockets fails with `NetworkDown` from
//!   then on; SYNs to it are not answered. [`restart`] brings it up again
//!   as a new incarnation: threads spawned on it with [`host`] from then
//!   on bind and connect again; the old incarnation's threads (and those
//!   they spawn) and sockets still fail.
//! - **Datagrams.** `weft::net::UdpSocket` is simulated too: a datagram
//!   is delivered to the socket bound to its destination after its own
//!   link delay (so jitter reorders datagrams), and dropped — silently, as
//!   UDP does — when the link loses it (no retransmission), across a
//!   partition, or when nothing is bound there or the host is down.
//!   `connect` filters sources as on Linux; a datagram longer than the
//!   buffer is truncated; a send never waits.
//! - **Timeouts and interrupts** behave as in `weft::net`: read and write
//!   timeouts give `TimedOut`, in virtual time; an interrupt of a waiting
//!   thread returns `Interrupted` and shuts the socket (or listener) down.
//! - **Determinism.** Every delay and loss is drawn from the simulation's
//!   network stream of random numbers (a stream of its own, so the
//!   program's draws do not shift it), and mixed into the trace hash. No
//!   real socket is opened: a real one (`TcpStream::from_std`, a Unix
//!   socket) is refused with an error naming the call.
//!
//! # What is not modelled
//!
//! Segment sizes, MSS and Nagle (one `write` is one segment, whatever its
//! size); congestion control and bandwidth (a link has latency, not a
//! rate); reordering (TCP hides it; loss shows as delay); the listen
//! backlog (a listener queues every connection); `TIME_WAIT` and port
//! reuse rules beyond "one listener per port"; keep-alives and the
//! retransmission give-up (a connection across a partition waits for the
//! repair for ever, unless the program's own timeout fires); IPv6 (hosts
//! have IPv4 addresses; `::1` is loopback); socket options other than the
//! timeouts (`set_nodelay` is accepted and does nothing; `set_ttl` and
//! the descriptor traits are not simulated); broadcast and multicast;
//! ICMP (a datagram to a closed port is not answered with an error); Unix
//! sockets.

mod pipe;
mod tcp;
mod udp;
mod world;

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::runtime::Runtime;
use crate::thread::{JoinHandle, Thread};

pub(crate) use tcp::{SimListener, SimStream};
pub(crate) use udp::SimUdp;
pub use world::{DEFAULT_HOST, DEFAULT_HOST_IP, Link};
use world::{Net, Place, my_place};

/// Spawns a virtual thread running `f` on the simulated host `name`
/// (made now if there is none: the next address, `10.0.0.N`). The threads
/// it spawns are on that host too.
///
/// # Errors
///
/// `Unsupported` outside a simulation; `InvalidInput` for a name that
/// cannot name a host (empty, an IP address, `localhost`); the spawn's
/// error.
pub fn host<F, T>(name: &str, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let net = Net::get("weft::sim::net::host")?;
    let place = {
        let mut s = net.lock();
        let h = s.host_or_new(name)?;
        Place {
            host: h,
            incarnation: s.hosts[h].incarnation,
        }
    };
    let handle = crate::builder::Builder::new()
        .name(name.to_string())
        .spawn(f)?;
    // The thread cannot run before this thread suspends (one carrier):
    // it starts on its host.
    if let Some(sim) = crate::sched::simulation() {
        sim.set_host(handle.thread().id().as_u64().get(), place.encode());
    }
    Ok(handle)
}

/// Makes host `name` if there is none (without a thread), and returns its
/// address.
///
/// # Errors
///
/// As [`host`].
pub fn add_host(name: &str) -> io::Result<IpAddr> {
    let net = Net::get("weft::sim::net::add_host")?;
    let mut s = net.lock();
    let h = s.host_or_new(name)?;
    Ok(IpAddr::V4(s.hosts[h].ip))
}

/// The name of the calling thread's host; `None` outside a simulation.
pub fn current_host() -> Option<String> {
    let net = Net::current()?;
    let s = net.lock();
    Some(s.hosts[my_place(&s).host].name.clone())
}

/// The address of host `name` (`localhost`: `127.0.0.1`).
///
/// # Errors
///
/// `NotFound` for no such host; `Unsupported` outside a simulation.
pub fn lookup(name: &str) -> io::Result<IpAddr> {
    if name.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let net = Net::get("weft::sim::net::lookup")?;
    let s = net.lock();
    let h = s.host_named(name)?;
    Ok(IpAddr::V4(s.hosts[h].ip))
}

/// Name resolution for `weft::net` inside a simulation: `None` outside
/// one; a literal address as it is; a host's name to its address.
pub(crate) fn resolve(name: &str, port: u16) -> Option<io::Result<Vec<SocketAddr>>> {
    Net::current()?;
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let ip = match name.parse::<IpAddr>() {
        Ok(ip) => Ok(ip),
        Err(_) => lookup(name),
    };
    Some(ip.map(|ip| vec![SocketAddr::new(ip, port)]))
}

/// Sets the link between hosts `a` and `b`, both ways (`a == b`: the
/// host's connections to itself). Applies to segments sent from now on.
///
/// # Errors
///
/// `NotFound` for an unknown host; `Unsupported` outside a simulation.
pub fn set_link(a: &str, b: &str, link: Link) -> io::Result<()> {
    let net = Net::get("weft::sim::net::set_link")?;
    let mut s = net.lock();
    let (a, b) = (s.host_named(a)?, s.host_named(b)?);
    s.set_link(a, b, link);
    Ok(())
}

/// Sets the link between every pair of distinct hosts without one of its
/// own ([`set_link`]); [`Link::default`] until then.
///
/// # Errors
///
/// `Unsupported` outside a simulation.
pub fn set_default_link(link: Link) -> io::Result<()> {
    let net = Net::get("weft::sim::net::set_default_link")?;
    net.lock().set_default_link(link);
    Ok(())
}

/// Partitions hosts `a` and `b`: nothing passes between them until
/// [`repair`]; what was in flight is held, not lost.
///
/// # Errors
///
/// `NotFound` for an unknown host, `InvalidInput` for `a == b`,
/// `Unsupported` outside a simulation.
pub fn partition(a: &str, b: &str) -> io::Result<()> {
    let net = Net::get("weft::sim::net::partition")?;
    let mut s = net.lock();
    let (a, b) = (s.host_named(a)?, s.host_named(b)?);
    if a == b {
        return Err(world::error(
            io::ErrorKind::InvalidInput,
            "a host cannot be partitioned from itself",
        ));
    }
    s.partition(a, b, crate::clock::now());
    Ok(())
}

/// Repairs the partition of hosts `a` and `b` (nothing if there is none):
/// held segments and handshakes go on, each after a fresh link delay.
///
/// # Errors
///
/// As [`partition`].
pub fn repair(a: &str, b: &str) -> io::Result<()> {
    let net = Net::get("weft::sim::net::repair")?;
    let mut s = net.lock();
    let (a, b) = (s.host_named(a)?, s.host_named(b)?);
    s.repair(a, b, crate::clock::now());
    Ok(())
}

/// Crashes host `name` (module docs, "Crashes"). Crashing a host that is
/// down does nothing.
///
/// # Errors
///
/// `NotFound` for an unknown host; `InvalidInput` for the default host
/// (where the simulation's own closure runs); `Unsupported` outside a
/// simulation.
pub fn crash(name: &str) -> io::Result<()> {
    let net = Net::get("weft::sim::net::crash")?;
    let mut s = net.lock();
    let h = s.host_named(name)?;
    if h == 0 {
        return Err(world::error(
            io::ErrorKind::InvalidInput,
            format_args!("the default host {DEFAULT_HOST:?} cannot crash"),
        ));
    }
    if !s.hosts[h].up {
        return Ok(());
    }
    let old = s.hosts[h].incarnation;
    s.crash(h, crate::clock::now());
    drop(s);
    interrupt_host(h, old);
    Ok(())
}

/// Interrupts every live thread of incarnation `incarnation` of host `h`,
/// in the order they were spawned (thread ids grow), so that the wake-ups
/// are the same in every run: what a killed process's threads see of the
/// kill, as far as Weft can show it.
fn interrupt_host(h: usize, incarnation: u16) {
    let Some(sim) = crate::sched::simulation() else {
        return;
    };
    let mut victims: Vec<(u64, Thread)> = crate::thread::registry::all_threads()
        .into_iter()
        .filter_map(|t| {
            let id = Thread::peek_name_id(&t).1;
            let p = Place::decode(sim.host_of(id)?);
            (p.host == h && p.incarnation == incarnation).then_some((id, Thread { inner: t }))
        })
        .collect();
    victims.sort_by_key(|(id, _)| *id);
    for (_, t) in victims {
        t.interrupt();
    }
}

/// Brings crashed host `name` up again, as a new incarnation (nothing if
/// it is up): threads spawned on it with [`host`] from now on use the
/// network; the old incarnation's threads and sockets still fail.
///
/// # Errors
///
/// `NotFound` for an unknown host; `Unsupported` outside a simulation.
pub fn restart(name: &str) -> io::Result<()> {
    let net = Net::get("weft::sim::net::restart")?;
    let mut s = net.lock();
    let h = s.host_named(name)?;
    s.hosts[h].up = true;
    Ok(())
}

/// The runtime of the simulation the calling thread runs in (`None`
/// outside one): for a library that spawns on an explicit [`Runtime`]
/// (weft-http's server), which must not fall back to the default runtime
/// inside a simulation.
pub fn runtime() -> Option<Runtime> {
    crate::sched::simulation()?;
    crate::runtime::current()
}
