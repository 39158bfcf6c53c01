//! Simulated TCP: [`SimListener`] and [`SimStream`], what `weft::net`'s
//! `TcpListener` and `TcpStream` are inside a simulation.
//!
//! A connect is a handshake in virtual time: the SYN reaches the server's
//! host after one link delay, where a listener takes the connection into
//! its accept queue (or none does: a RST goes back), and the answer takes
//! another delay back. Data, FIN and RST travel the connection's two
//! [`Pipe`](super::pipe::Pipe)s. Every wait is a condition-variable wait on
//! the network's lock with the next arrival (or the caller's timeout) as
//! its deadline, and is interruptible like `weft::net`'s (an interrupt
//! shuts the socket down).

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pipe::{Pipe, Read};
use super::world::{
    CONNECT_TIMEOUT, Conn, End, Listener, Net, Phase, Place, State, WINDOW, error, my_place,
};
use crate::sync::{Condvar, MutexGuard};

pub(super) use crate::clock::Timeout;

pub(super) fn timed_out() -> io::Error {
    error(io::ErrorKind::TimedOut, "operation timed out")
}

pub(super) fn interrupted() -> io::Error {
    error(
        io::ErrorKind::Interrupted,
        "interrupted (the socket is shut down)",
    )
}

/// Whether `deadline` has passed at `now`.
pub(super) fn passed(deadline: Option<Instant>, now: Instant) -> bool {
    deadline.is_some_and(|d| d <= now)
}

/// The earlier of two optional deadlines (`None` is never).
pub(super) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// The address a socket of host `place` bound to `ip` is known by: the
/// host's own for an unspecified one. Fails for another host's address.
pub(super) fn local_ip(s: &State, host: usize, ip: IpAddr) -> io::Result<IpAddr> {
    let own = IpAddr::V4(s.hosts[host].ip);
    if ip.is_unspecified() || ip.is_loopback() || ip == own {
        Ok(ip)
    } else {
        Err(error(
            io::ErrorKind::AddrNotAvailable,
            format_args!(
                "{ip} is not an address of host {:?} ({own})",
                s.hosts[host].name
            ),
        ))
    }
}

/// A simulated listening socket (one handle; `try_clone` makes more).
pub(crate) struct SimListener {
    inner: Arc<ListenerSocket>,
}

/// What the handles of one simulated listener share; dropping the last
/// one closes it.
struct ListenerSocket {
    net: Arc<Net>,
    id: u64,
    addr: SocketAddr,
    wake: Arc<Condvar>,
}

impl SimListener {
    /// Binds a listener of the calling thread's host to `addr` (its own
    /// address, a loopback or the unspecified one; port 0 picks one).
    pub(crate) fn bind(addr: SocketAddr) -> io::Result<SimListener> {
        let net = Net::get("TcpListener::bind")?;
        let mut s = net.lock();
        let me = my_place(&s);
        s.check_alive(me)?;
        let ip = local_ip(&s, me.host, addr.ip())?;
        let port = match addr.port() {
            0 => s.ephemeral_port(me.host)?,
            p => {
                let clash = s.listeners.values().any(|l| {
                    l.place.host == me.host
                        && l.addr.port() == p
                        && (l.addr.ip() == ip
                            || l.addr.ip().is_unspecified()
                            || ip.is_unspecified())
                });
                if clash {
                    return Err(error(
                        io::ErrorKind::AddrInUse,
                        format_args!(
                            "address {addr} already in use on host {:?}",
                            s.hosts[me.host].name
                        ),
                    ));
                }
                p
            }
        };
        let addr = SocketAddr::new(ip, port);
        let wake = Arc::new(Condvar::new());
        let id = s.id();
        s.listeners.insert(
            id,
            Listener {
                place: me,
                addr,
                queue: Default::default(),
                closed: false,
                wake: wake.clone(),
            },
        );
        drop(s);
        Ok(SimListener {
            inner: Arc::new(ListenerSocket {
                net,
                id,
                addr,
                wake,
            }),
        })
    }

    /// The bound address.
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.inner.addr)
    }

    /// Another handle to the same listener.
    pub(crate) fn try_clone(&self) -> SimListener {
        SimListener {
            inner: self.inner.clone(),
        }
    }

    /// Waits for a connection the network has accepted.
    pub(crate) fn accept(&self) -> io::Result<(SimStream, SocketAddr)> {
        let me = &*self.inner;
        let mut s = me.net.lock();
        loop {
            let Some(l) = s.listeners.get_mut(&me.id) else {
                return Err(error(
                    io::ErrorKind::InvalidInput,
                    "the listener was closed (its host crashed, or an interrupt shut it)",
                ));
            };
            let place = l.place;
            if let Some(id) = l.queue.pop_front() {
                s.check_alive(place)?;
                let Some(c) = s.conns.get(&id) else { continue };
                let peer = c.ends[0].addr;
                let wake = c.ends[1].wake.clone();
                drop(s);
                let stream = SimStream::new(me.net.clone(), id, 1, place, wake);
                return Ok((stream, peer));
            }
            s.check_alive(place)?;
            s = match Net::wait(&me.wake, s, None) {
                Ok(s) => s,
                Err(mut s) => {
                    let now = crate::clock::now();
                    s.close_listener(me.id, now, true);
                    return Err(interrupted());
                }
            };
        }
    }
}

impl Drop for ListenerSocket {
    fn drop(&mut self) {
        let now = crate::clock::now();
        self.net.lock().close_listener(self.id, now, true);
    }
}

impl fmt::Debug for SimListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimListener")
            .field("addr", &self.inner.addr)
            .finish_non_exhaustive()
    }
}

/// What every handle of one simulated stream shares; dropping the last
/// one closes the socket.
struct Socket {
    net: Arc<Net>,
    conn: u64,
    end: usize,
    place: Place,
    wake: Arc<Condvar>,
}

impl Drop for Socket {
    fn drop(&mut self) {
        let now = crate::clock::now();
        close(&mut self.net.lock(), self.conn, self.end, now);
    }
}

/// Closes end `e` of connection `id` (its last handle went away): a FIN
/// to the peer, or a RST if data was left unread (as Linux does).
fn close(s: &mut State, id: u64, e: usize, now: Instant) {
    let Some(c) = s.conns.get(&id) else { return };
    if c.ends[e].closed {
        return;
    }
    if c.pipes[1 - e].has_data() {
        s.abort_end(id, e, now);
        return;
    }
    let (from, to) = (c.ends[e].place.host, c.ends[1 - e].place.host);
    let fin = !c.ends[e].write_shut && !c.ends[1 - e].closed;
    let at = if fin { s.arrival(from, to, now) } else { None };
    if fin {
        let c = s.conns.get_mut(&id).expect("looked up above");
        c.pipes[e].push_fin(at);
    }
    s.end_closed(id, e);
}

/// `shutdown(how)` of end `e` of connection `id`.
fn shutdown(s: &mut State, id: u64, e: usize, how: Shutdown, now: Instant) {
    let Some(c) = s.conns.get(&id) else { return };
    let write = matches!(how, Shutdown::Write | Shutdown::Both) && !c.ends[e].write_shut;
    let (from, to) = (c.ends[e].place.host, c.ends[1 - e].place.host);
    let fin = write && !c.ends[1 - e].closed;
    let at = if fin { s.arrival(from, to, now) } else { None };
    let c = s.conns.get_mut(&id).expect("looked up above");
    if write {
        c.ends[e].write_shut = true;
    }
    if fin {
        c.pipes[e].push_fin(at);
    }
    if matches!(how, Shutdown::Read | Shutdown::Both) {
        c.ends[e].read_shut = true;
    }
    for end in &c.ends {
        end.wake.notify_all();
    }
}

/// The listener of host `server` that a SYN for `to` reaches.
fn listener_for(s: &State, server: usize, to: SocketAddr) -> Option<u64> {
    let own = IpAddr::V4(s.hosts[server].ip);
    s.listeners
        .iter()
        .find(|(_, l)| {
            let ip = l.addr.ip();
            l.place.host == server
                && !l.closed
                && l.addr.port() == to.port()
                && (ip.is_unspecified()
                    || (ip.is_loopback() && to.ip().is_loopback())
                    || (ip == own && to.ip() == own))
        })
        .map(|(id, _)| *id)
}

/// A simulated TCP connection: one handle (`try_clone` makes more).
pub(crate) struct SimStream {
    sock: Arc<Socket>,
    read_timeout: Timeout,
    write_timeout: Timeout,
}

impl SimStream {
    /// Connects from the calling thread's host to `addr`, waiting at most
    /// until `deadline` (without one, [`CONNECT_TIMEOUT`]).
    pub(crate) fn connect(addr: SocketAddr, deadline: Option<Instant>) -> io::Result<SimStream> {
        let net = Net::get("TcpStream::connect")?;
        let now = crate::clock::now();
        let deadline = deadline.unwrap_or(now + CONNECT_TIMEOUT);
        // 0.0.0.0 is this host, as on Linux.
        let to = if addr.ip().is_unspecified() {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
        } else {
            addr
        };
        let mut s = net.lock();
        let me = my_place(&s);
        s.check_alive(me)?;
        let target = s.host_at(to.ip(), me.host);
        let local_ip = if to.ip().is_loopback() {
            to.ip()
        } else {
            IpAddr::V4(s.hosts[me.host].ip)
        };
        let port = s.ephemeral_port(me.host)?;
        let server = target.unwrap_or(me.host);
        let wake = Arc::new(Condvar::new());
        let phase = match target {
            Some(t) => Phase::Syn(s.arrival(me.host, t, now)),
            None => Phase::Unanswered,
        };
        let server_place = Place {
            host: server,
            incarnation: s.hosts[server].incarnation,
        };
        let id = s.id();
        s.conns.insert(
            id,
            Conn {
                ends: [
                    End::new(me, SocketAddr::new(local_ip, port), wake.clone()),
                    End::new(server_place, to, Arc::new(Condvar::new())),
                ],
                pipes: [Pipe::default(), Pipe::default()],
                phase,
            },
        );
        let (started, mut tries) = (now, 0);
        loop {
            let now = crate::clock::now();
            if let Err(e) = s.check_alive(me) {
                s.conns.remove(&id);
                return Err(e);
            }
            let Some(phase) = s.conns.get(&id).map(|c| c.phase) else {
                return Err(error(io::ErrorKind::ConnectionReset, "connection reset"));
            };
            let next = match phase {
                Phase::Syn(Some(t)) if t <= now => {
                    let p = syn_arrives(&mut s, id, me.host, server, to, now);
                    set_phase(&mut s, id, p);
                    continue;
                }
                Phase::Syn(Some(t)) => Some(t),
                Phase::Syn(None) => {
                    if !s.is_cut(me.host, server) {
                        let t = s.arrival(me.host, server, now);
                        set_phase(&mut s, id, Phase::Syn(t));
                        continue;
                    }
                    None
                }
                Phase::Unanswered => match syn_retry(started, tries) {
                    // Linux's SYN retransmissions: 1, 3, 7, … 63 s after
                    // the first (a host that came up meanwhile answers).
                    Some(t) if t <= now => {
                        tries += 1;
                        if let Some(t) = target {
                            let at = s.arrival(me.host, t, now);
                            set_phase(&mut s, id, Phase::Syn(at));
                        }
                        continue;
                    }
                    next => next,
                },
                Phase::SynAck(Some(t)) if t <= now => {
                    set_phase(&mut s, id, Phase::Established);
                    drop(s);
                    return Ok(SimStream::new(net, id, 0, me, wake));
                }
                Phase::SynAck(Some(t)) => Some(t),
                Phase::SynAck(None) => {
                    if !s.is_cut(me.host, server) {
                        let t = s.arrival(server, me.host, now);
                        set_phase(&mut s, id, Phase::SynAck(t));
                        continue;
                    }
                    None
                }
                Phase::Refused(t) if t <= now => {
                    s.conns.remove(&id);
                    return Err(error(
                        io::ErrorKind::ConnectionRefused,
                        format_args!("connection to {addr} refused (no listener)"),
                    ));
                }
                Phase::Refused(t) => Some(t),
                Phase::Established => {
                    drop(s);
                    return Ok(SimStream::new(net, id, 0, me, wake));
                }
            };
            let err = if deadline <= now {
                timed_out()
            } else {
                match Net::wait(&wake, s, earliest(next, Some(deadline))) {
                    Ok(g) => {
                        s = g;
                        continue;
                    }
                    Err(g) => {
                        s = g;
                        interrupted()
                    }
                }
            };
            // Given up: a server that has the connection gets a RST.
            if s.conns
                .get(&id)
                .is_some_and(|c| matches!(c.phase, Phase::SynAck(_)))
            {
                s.abort_end(id, 0, now);
            } else {
                s.conns.remove(&id);
            }
            return Err(err);
        }
    }
}

/// When an unanswered SYN sent first at `started` is sent again after
/// `tries` retransmissions (`None`: no more, as Linux's `tcp_syn_retries`
/// of 6).
fn syn_retry(started: Instant, tries: u32) -> Option<Instant> {
    (tries < 6).then(|| started + Duration::from_secs((1 << (tries + 1)) - 1))
}

fn set_phase(s: &mut State, id: u64, phase: Phase) {
    if let Some(c) = s.conns.get_mut(&id) {
        c.phase = phase;
    }
}

/// The SYN of connection `id` from host `client` arrives at host `server`
/// now: the phase it leads to. A listener takes the connection into its
/// queue at once (the server's side is established from here on).
fn syn_arrives(
    s: &mut State,
    id: u64,
    client: usize,
    server: usize,
    to: SocketAddr,
    now: Instant,
) -> Phase {
    if s.is_cut(client, server) {
        return Phase::Syn(None);
    }
    if !s.hosts[server].up {
        return Phase::Unanswered;
    }
    let back = s.arrival(server, client, now);
    let Some(l) = listener_for(s, server, to) else {
        return Phase::Refused(back.unwrap_or(now));
    };
    let place = Place {
        host: server,
        incarnation: s.hosts[server].incarnation,
    };
    let local = if to.ip().is_loopback() {
        to
    } else {
        SocketAddr::new(IpAddr::V4(s.hosts[server].ip), to.port())
    };
    let listener = s.listeners.get_mut(&l).expect("found above");
    listener.queue.push_back(id);
    listener.wake.notify_all();
    if let Some(c) = s.conns.get_mut(&id) {
        c.ends[1] = End::new(place, local, c.ends[1].wake.clone());
        c.pipes[1] = Pipe::default();
    }
    Phase::SynAck(back)
}

impl SimStream {
    fn new(net: Arc<Net>, conn: u64, end: usize, place: Place, wake: Arc<Condvar>) -> SimStream {
        SimStream {
            sock: Arc::new(Socket {
                net,
                conn,
                end,
                place,
                wake,
            }),
            read_timeout: Timeout::default(),
            write_timeout: Timeout::default(),
        }
    }

    /// Fails if this socket's host crashed; else the connection's state
    /// is gone only after a reset.
    fn gone(&self, s: &State) -> io::Error {
        match s.check_alive(self.sock.place) {
            Err(e) => e,
            Ok(()) => error(io::ErrorKind::ConnectionReset, "connection reset"),
        }
    }

    /// Reads (or, with `consume` false, peeks) what has arrived, waiting
    /// until something has (or, with `wait` false, not at all:
    /// `WouldBlock`), under the read timeout.
    pub(crate) fn read(&self, buf: &mut [u8], consume: bool, wait: bool) -> io::Result<usize> {
        let deadline = self.read_timeout.deadline();
        let (id, e) = (self.sock.conn, self.sock.end);
        let mut s = self.sock.net.lock();
        loop {
            let now = crate::clock::now();
            s.check_alive(self.sock.place)?;
            let Some(c) = s.conns.get_mut(&id) else {
                return Err(self.gone(&s));
            };
            if c.ends[e].read_shut {
                return Ok(0);
            }
            let next = match c.pipes[1 - e].read(buf, now, consume) {
                Read::Data(n) => {
                    if consume && n > 0 {
                        // Room in the window: a waiting writer goes on.
                        c.ends[1 - e].wake.notify_all();
                    }
                    return Ok(n);
                }
                Read::Eof => return Ok(0),
                Read::Reset => {
                    return Err(error(
                        io::ErrorKind::ConnectionReset,
                        "connection reset by peer",
                    ));
                }
                Read::Wait(next) => next,
            };
            if buf.is_empty() {
                return Ok(0);
            }
            if !wait {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            if passed(deadline, now) {
                return Err(timed_out());
            }
            s = match Net::wait(&self.sock.wake, s, earliest(next, deadline)) {
                Ok(s) => s,
                Err(s) => return Err(self.interrupted(s)),
            };
        }
    }

    /// Writes what fits in the window, waiting while it is full, under the
    /// write timeout.
    pub(crate) fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let deadline = self.write_timeout.deadline();
        let (id, e) = (self.sock.conn, self.sock.end);
        let mut s = self.sock.net.lock();
        loop {
            let now = crate::clock::now();
            s.check_alive(self.sock.place)?;
            let Some(c) = s.conns.get(&id) else {
                return Err(self.gone(&s));
            };
            if c.pipes[1 - e].reset_arrived(now) {
                return Err(error(
                    io::ErrorKind::ConnectionReset,
                    "connection reset by peer",
                ));
            }
            if c.ends[e].write_shut {
                return Err(error(
                    io::ErrorKind::BrokenPipe,
                    "broken pipe (this side is shut down for writing)",
                ));
            }
            if buf.is_empty() {
                return Ok(0);
            }
            let (from, to) = (c.ends[e].place.host, c.ends[1 - e].place.host);
            if c.ends[1 - e].closed {
                // The peer is gone: the data is dropped where it arrives,
                // and the peer's host answers with a RST (once).
                let there = s.arrival(from, to, now);
                let back = there.and_then(|t| s.arrival(to, from, t));
                let c = s.conns.get_mut(&id).expect("looked up above");
                c.pipes[1 - e].push_rst(back);
                return Ok(buf.len());
            }
            if c.ends[1 - e].read_shut {
                // Read side shut: accepted and dropped.
                return Ok(buf.len());
            }
            let room = WINDOW.saturating_sub(c.pipes[e].queued());
            if room > 0 {
                let n = room.min(buf.len());
                let at = s.arrival(from, to, now);
                let c = s.conns.get_mut(&id).expect("looked up above");
                c.pipes[e].push_data(&buf[..n], at);
                c.ends[1 - e].wake.notify_all();
                return Ok(n);
            }
            if passed(deadline, now) {
                return Err(timed_out());
            }
            s = match Net::wait(&self.sock.wake, s, deadline) {
                Ok(s) => s,
                Err(s) => return Err(self.interrupted(s)),
            };
        }
    }

    /// An interrupt ended a wait: shut the socket down both ways (as
    /// `weft::net` does) and report it.
    fn interrupted(&self, mut s: MutexGuard<'_, State>) -> io::Error {
        let now = crate::clock::now();
        shutdown(&mut s, self.sock.conn, self.sock.end, Shutdown::Both, now);
        interrupted()
    }

    /// Shuts down reading, writing or both; waiters wake up.
    pub(crate) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let now = crate::clock::now();
        let mut s = self.sock.net.lock();
        s.check_alive(self.sock.place)?;
        if !s.conns.contains_key(&self.sock.conn) {
            return Err(error(io::ErrorKind::NotConnected, "not connected"));
        }
        shutdown(&mut s, self.sock.conn, self.sock.end, how, now);
        Ok(())
    }

    fn end_addr(&self, end: usize) -> io::Result<SocketAddr> {
        let s = self.sock.net.lock();
        match s.conns.get(&self.sock.conn) {
            Some(c) => Ok(c.ends[end].addr),
            None => Err(error(io::ErrorKind::NotConnected, "not connected")),
        }
    }

    /// The local address.
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.end_addr(self.sock.end)
    }

    /// The peer's address.
    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.end_addr(1 - self.sock.end)
    }

    /// Another handle to the same socket, with this one's timeouts.
    pub(crate) fn try_clone(&self) -> io::Result<SimStream> {
        Ok(SimStream {
            sock: self.sock.clone(),
            read_timeout: self.read_timeout.copy(),
            write_timeout: self.write_timeout.copy(),
        })
    }

    /// Sets the read timeout (`Some(ZERO)` is `InvalidInput`).
    pub(crate) fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.read_timeout.set(d)
    }

    pub(crate) fn read_timeout(&self) -> Option<Duration> {
        self.read_timeout.get()
    }

    /// Sets the write timeout (`Some(ZERO)` is `InvalidInput`).
    pub(crate) fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.write_timeout.set(d)
    }

    pub(crate) fn write_timeout(&self) -> Option<Duration> {
        self.write_timeout.get()
    }
}

impl fmt::Debug for SimStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("SimStream");
        if let Ok(a) = self.local_addr() {
            d.field("addr", &a);
        }
        if let Ok(a) = self.peer_addr() {
            d.field("peer", &a);
        }
        d.finish_non_exhaustive()
    }
}
