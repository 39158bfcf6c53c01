//! Simulated UDP: [`SimUdp`], what `weft::net::UdpSocket` is inside a
//! simulation.
//!
//! A datagram is delivered to the socket bound to its destination when it
//! is sent, after its own link delay: datagrams do not wait for each
//! other, so jitter reorders them. A lost one (the link's loss, drawn from
//! the seed), one across a partition, to a host that is down or to a port
//! nobody bound is dropped silently, as UDP does.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::tcp::{Timeout, earliest, interrupted, local_ip, passed, timed_out};
use super::world::{Datagram, Net, Place, State, Udp, error, my_place};
use crate::sync::Condvar;

/// The largest UDP payload over IPv4.
const MAX_DATAGRAM: usize = 65_507;

/// What the handles of one simulated UDP socket share; dropping the last
/// one closes it.
struct UdpSocketInner {
    net: Arc<Net>,
    id: u64,
    place: Place,
    wake: Arc<Condvar>,
    /// An interrupt shut it down: every later call fails (as `weft::net`'s
    /// datagram sockets do).
    shut: AtomicBool,
}

impl Drop for UdpSocketInner {
    fn drop(&mut self) {
        self.net.lock().udp.remove(&self.id);
    }
}

/// A simulated UDP socket (one handle; `try_clone` makes more).
pub(crate) struct SimUdp {
    inner: Arc<UdpSocketInner>,
    read_timeout: Timeout,
    write_timeout: Timeout,
}

impl SimUdp {
    /// Binds a socket of the calling thread's host to `addr` (its own
    /// address, a loopback or the unspecified one; port 0 picks one).
    pub(crate) fn bind(addr: SocketAddr) -> io::Result<SimUdp> {
        let net = Net::get("UdpSocket::bind")?;
        let mut s = net.lock();
        let me = my_place(&s);
        s.check_alive(me)?;
        let ip = local_ip(&s, me.host, addr.ip())?;
        let port = match addr.port() {
            0 => s.ephemeral_port(me.host)?,
            p => {
                let clash = s.udp.values().any(|u| {
                    u.place.host == me.host
                        && u.addr.port() == p
                        && (u.addr.ip() == ip
                            || u.addr.ip().is_unspecified()
                            || ip.is_unspecified())
                });
                if clash {
                    return Err(error(
                        io::ErrorKind::AddrInUse,
                        format_args!(
                            "UDP address {addr} already in use on host {:?}",
                            s.hosts[me.host].name
                        ),
                    ));
                }
                p
            }
        };
        let wake = Arc::new(Condvar::new());
        let id = s.id();
        s.udp.insert(
            id,
            Udp {
                place: me,
                addr: SocketAddr::new(ip, port),
                peer: None,
                queue: Vec::new(),
                wake: wake.clone(),
            },
        );
        drop(s);
        Ok(SimUdp {
            inner: Arc::new(UdpSocketInner {
                net,
                id,
                place: me,
                wake,
                shut: AtomicBool::new(false),
            }),
            read_timeout: Timeout::default(),
            write_timeout: Timeout::default(),
        })
    }

    /// Fails if an interrupt shut this socket down or its host crashed.
    fn check(&self, s: &State) -> io::Result<()> {
        if self.inner.shut.load(Ordering::Relaxed) {
            return Err(error(
                io::ErrorKind::NotConnected,
                "socket was shut down by a thread interrupt",
            ));
        }
        s.check_alive(self.inner.place)?;
        if s.udp.contains_key(&self.inner.id) {
            Ok(())
        } else {
            Err(error(io::ErrorKind::NotConnected, "the socket is closed"))
        }
    }

    /// The bound address.
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        let s = self.inner.net.lock();
        self.check(&s)?;
        Ok(s.udp[&self.inner.id].addr)
    }

    /// The connected peer.
    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        let s = self.inner.net.lock();
        self.check(&s)?;
        s.udp[&self.inner.id]
            .peer
            .ok_or_else(|| error(io::ErrorKind::NotConnected, "not connected"))
    }

    /// Sets the default destination and the only accepted source.
    pub(crate) fn connect(&self, peer: SocketAddr) -> io::Result<()> {
        let mut s = self.inner.net.lock();
        self.check(&s)?;
        let u = s.udp.get_mut(&self.inner.id).expect("checked above");
        u.peer = Some(peer);
        // Datagrams from others already queued are dropped, as Linux does.
        u.queue.retain(|d| d.from == peer);
        Ok(())
    }

    /// Sends `buf` to `to` (the connected peer when `None`).
    pub(crate) fn send_to(&self, buf: &[u8], to: Option<SocketAddr>) -> io::Result<usize> {
        let now = crate::clock::now();
        let mut s = self.inner.net.lock();
        self.check(&s)?;
        let me = &s.udp[&self.inner.id];
        let Some(to) = to.or(me.peer) else {
            return Err(error(
                io::ErrorKind::NotConnected,
                "no destination (not connected)",
            ));
        };
        if buf.len() > MAX_DATAGRAM {
            return Err(error(
                io::ErrorKind::InvalidInput,
                "message too long for a UDP datagram",
            ));
        }
        let from_host = me.place.host;
        let to = if to.ip().is_unspecified() {
            SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), to.port())
        } else {
            to
        };
        let from = if to.ip().is_loopback() {
            SocketAddr::new(to.ip(), me.addr.port())
        } else {
            SocketAddr::new(IpAddr::V4(s.hosts[from_host].ip), me.addr.port())
        };
        let Some(host) = s.host_at(to.ip(), from_host) else {
            return Ok(buf.len());
        };
        if !s.hosts[host].up {
            return Ok(buf.len());
        }
        let Some(at) = s.datagram_arrival(from_host, host, now) else {
            return Ok(buf.len()); // lost, or partitioned
        };
        let own = IpAddr::V4(s.hosts[host].ip);
        let dest = s.udp.values_mut().find(|u| {
            let ip = u.addr.ip();
            u.place.host == host
                && u.addr.port() == to.port()
                && (ip.is_unspecified()
                    || (ip.is_loopback() && to.ip().is_loopback())
                    || (ip == own && to.ip() == own))
                && u.peer.is_none_or(|p| p == from)
        });
        if let Some(u) = dest {
            // Kept in arrival order; a tie goes after those already there.
            let i = u.queue.partition_point(|d| d.at <= at);
            u.queue.insert(
                i,
                Datagram {
                    at,
                    from,
                    data: buf.to_vec(),
                },
            );
            u.wake.notify_all();
        }
        Ok(buf.len())
    }

    /// Receives (or, with `consume` false, peeks at) the first datagram
    /// that has arrived, waiting under the read timeout.
    pub(crate) fn recv_from(
        &self,
        buf: &mut [u8],
        consume: bool,
    ) -> io::Result<(usize, SocketAddr)> {
        let deadline = self.read_timeout.deadline();
        let mut s = self.inner.net.lock();
        loop {
            let now = crate::clock::now();
            self.check(&s)?;
            let u = s.udp.get_mut(&self.inner.id).expect("checked above");
            let next = match u.queue.first() {
                Some(d) if d.at <= now => {
                    let n = d.data.len().min(buf.len());
                    buf[..n].copy_from_slice(&d.data[..n]);
                    let from = d.from;
                    if consume {
                        u.queue.remove(0);
                    }
                    return Ok((n, from));
                }
                Some(d) => Some(d.at),
                None => None,
            };
            if passed(deadline, now) {
                return Err(timed_out());
            }
            s = match Net::wait(&self.inner.wake, s, earliest(next, deadline)) {
                Ok(s) => s,
                Err(_) => {
                    self.inner.shut.store(true, Ordering::Relaxed);
                    return Err(interrupted());
                }
            };
        }
    }

    /// Another handle to the same socket, with this one's timeouts.
    pub(crate) fn try_clone(&self) -> SimUdp {
        SimUdp {
            inner: self.inner.clone(),
            read_timeout: self.read_timeout.copy(),
            write_timeout: self.write_timeout.copy(),
        }
    }

    pub(crate) fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.read_timeout.set(d)
    }

    pub(crate) fn read_timeout(&self) -> Option<Duration> {
        self.read_timeout.get()
    }

    /// Sets the write timeout (kept; a simulated send never waits).
    pub(crate) fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.write_timeout.set(d)
    }

    pub(crate) fn write_timeout(&self) -> Option<Duration> {
        self.write_timeout.get()
    }
}

impl fmt::Debug for SimUdp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("SimUdp");
        if let Ok(a) = self.local_addr() {
            d.field("addr", &a);
        }
        d.finish_non_exhaustive()
    }
}
