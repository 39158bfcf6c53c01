//! The simulated network of one simulation ([`Net`]): its hosts, the
//! links between them, the faults in force, and the connections and
//! listeners that live on it. One lock guards it all; every wait on it is
//! a Weft condition-variable wait with a virtual-time deadline.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pipe::Pipe;
use crate::sched::Stream;
use crate::sync::{Condvar, Mutex, MutexGuard};
use crate::unpoison::Unpoison;

/// The default host's name: threads not put on a host live there.
pub const DEFAULT_HOST: &str = "client";

/// The default host's address.
pub const DEFAULT_HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254);

/// How long an unanswered `connect` without a timeout waits: Linux's
/// default, six SYN retransmissions (1 + 2 + … + 64 s).
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(127);

/// Bytes one direction of a connection holds, sent and not yet read (the
/// peer's receive buffer and what is in flight): a writer waits while it
/// is full.
pub(super) const WINDOW: usize = 256 * 1024;

/// At most this many retransmissions of one segment are modelled; a
/// segment lost more often arrives after the last one.
const MAX_RETRANSMITS: u32 = 8;

/// The longest retransmission timeout (Linux's `TCP_RTO_MAX`).
const RTO_MAX: Duration = Duration::from_secs(120);

/// The first ephemeral port (Linux's `ip_local_port_range` starts lower;
/// this is IANA's range).
const EPHEMERAL_FIRST: u16 = 49152;

/// What a link between two hosts does to a segment: a delay drawn
/// uniformly from `latency ..= latency + jitter`, and with probability
/// `loss` a loss, which TCP turns into a retransmission after `rto`
/// (doubling for each further loss of the same segment).
///
/// ```
/// use std::time::Duration;
/// use weft::sim::net::Link;
///
/// let wan = Link::new(Duration::from_millis(40))
///     .jitter(Duration::from_millis(20))
///     .loss(0.01);
/// assert_eq!(wan.latency_range(), (Duration::from_millis(40), Duration::from_millis(60)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    latency: Duration,
    jitter: Duration,
    loss: f64,
    rto: Duration,
}

impl Default for Link {
    /// 1 ms one way, no jitter, no loss, a 200 ms retransmission timeout.
    fn default() -> Link {
        Link::new(Duration::from_millis(1))
    }
}

impl Link {
    /// A link with a fixed one-way `latency`, no jitter and no loss.
    pub fn new(latency: Duration) -> Link {
        Link {
            latency,
            jitter: Duration::ZERO,
            loss: 0.0,
            rto: Duration::from_millis(200),
        }
    }

    /// What a host's connections to itself use: no delay at all.
    pub fn loopback() -> Link {
        Link::new(Duration::ZERO)
    }

    /// Up to `jitter` more delay, drawn per segment from the seed. Segments
    /// of one connection still arrive in order (a later one waits for the
    /// one before it, as TCP's receiver does).
    pub fn jitter(mut self, jitter: Duration) -> Link {
        self.jitter = jitter;
        self
    }

    /// The probability (0 to 1; clamped) that a segment is lost. TCP
    /// delivers it anyway, one retransmission timeout later per loss.
    pub fn loss(mut self, p: f64) -> Link {
        self.loss = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        self
    }

    /// The first retransmission timeout after a loss (200 ms by default,
    /// Linux's minimum).
    pub fn retransmit_timeout(mut self, rto: Duration) -> Link {
        self.rto = rto;
        self
    }

    /// The shortest and longest one-way delay without loss.
    pub fn latency_range(&self) -> (Duration, Duration) {
        (self.latency, self.latency.saturating_add(self.jitter))
    }

    /// The delay of one datagram (`None`: lost), drawing from `draw`.
    fn datagram_delay(&self, mut draw: impl FnMut() -> u64) -> Option<Duration> {
        let j = u64::try_from(self.jitter.as_nanos()).unwrap_or(u64::MAX);
        let mut d = self.latency;
        if j > 0 {
            d += Duration::from_nanos(draw() % j.saturating_add(1));
        }
        let lost = self.loss > 0.0 && (draw() as f64) < self.loss * 18_446_744_073_709_551_616.0;
        (!lost).then_some(d)
    }

    /// The delay of one segment, drawing from `draw`.
    fn delay(&self, mut draw: impl FnMut() -> u64) -> Duration {
        let mut d = self.latency;
        let j = u64::try_from(self.jitter.as_nanos()).unwrap_or(u64::MAX);
        if j > 0 {
            d += Duration::from_nanos(draw() % j.saturating_add(1));
        }
        if self.loss > 0.0 {
            // A loss when a uniform u64 falls below loss · 2^64.
            let bar = self.loss * 18_446_744_073_709_551_616.0;
            let mut rto = self.rto;
            for _ in 0..MAX_RETRANSMITS {
                if (draw() as f64) >= bar {
                    break;
                }
                d = d.saturating_add(rto);
                rto = rto.saturating_mul(2).min(RTO_MAX);
            }
        }
        d
    }
}

/// A host: a name, an address, and whether it is up. Crashing it moves
/// it to a new incarnation; sockets and threads of an older one fail.
pub(super) struct Host {
    pub(super) name: String,
    pub(super) ip: Ipv4Addr,
    pub(super) incarnation: u16,
    pub(super) up: bool,
    next_port: u16,
}

/// Which host (index in `State::hosts`) a thread or socket belongs to, and
/// in which incarnation of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Place {
    pub(super) host: usize,
    pub(super) incarnation: u16,
}

impl Place {
    /// The word a thread's host is kept as (`Simulation::set_host`).
    pub(super) fn encode(self) -> u32 {
        (self.host as u32 & 0xffff) | (u32::from(self.incarnation) << 16)
    }

    pub(super) fn decode(word: u32) -> Place {
        Place {
            host: (word & 0xffff) as usize,
            incarnation: (word >> 16) as u16,
        }
    }
}

/// One direction of a connection's state, per end.
pub(super) struct End {
    pub(super) place: Place,
    pub(super) addr: SocketAddr,
    /// Every handle dropped, or its host crashed.
    pub(super) closed: bool,
    /// `shutdown(Read)`: reads return end-of-file.
    pub(super) read_shut: bool,
    /// `shutdown(Write)` or close: a FIN (or RST) has been sent.
    pub(super) write_shut: bool,
    /// Waiters on this end: readers, writers, a connecting thread.
    pub(super) wake: Arc<Condvar>,
}

impl End {
    pub(super) fn new(place: Place, addr: SocketAddr, wake: Arc<Condvar>) -> End {
        End {
            place,
            addr,
            closed: false,
            read_shut: false,
            write_shut: false,
            wake,
        }
    }
}

/// Where a connection's handshake is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// The SYN arrives at the instant (`None`: held by a partition).
    Syn(Option<Instant>),
    /// The SYN was not answered (no such host, or it is down): it is
    /// sent again on Linux's schedule.
    Unanswered,
    /// Accepted (queued at a listener); the SYN-ACK arrives at the
    /// instant (`None`: held by a partition).
    SynAck(Option<Instant>),
    /// Refused; the RST arrives at the instant.
    Refused(Instant),
    /// Connected.
    Established,
}

/// A connection: end 0 connected, end 1 was accepted; `pipes[i]` carries
/// what end `i` sends to end `1 - i`.
pub(super) struct Conn {
    pub(super) ends: [End; 2],
    pub(super) pipes: [Pipe; 2],
    pub(super) phase: Phase,
}

/// A listening socket.
pub(super) struct Listener {
    pub(super) place: Place,
    pub(super) addr: SocketAddr,
    /// Connections accepted by the network, not yet by `accept`.
    pub(super) queue: VecDeque<u64>,
    pub(super) closed: bool,
    pub(super) wake: Arc<Condvar>,
}

/// A datagram on its way, or arrived and not yet read.
pub(super) struct Datagram {
    pub(super) at: Instant,
    pub(super) from: SocketAddr,
    pub(super) data: Vec<u8>,
}

/// A UDP socket.
pub(super) struct Udp {
    pub(super) place: Place,
    pub(super) addr: SocketAddr,
    /// `connect`ed: the default destination and the only source.
    pub(super) peer: Option<SocketAddr>,
    /// Datagrams in order of arrival.
    pub(super) queue: Vec<Datagram>,
    pub(super) wake: Arc<Condvar>,
}

/// Everything the lock guards.
pub(super) struct State {
    pub(super) hosts: Vec<Host>,
    default_link: Link,
    /// Links set for a pair of hosts (both directions; the lower index
    /// first).
    links: BTreeMap<(usize, usize), Link>,
    /// Partitioned pairs (the lower index first).
    cut: BTreeSet<(usize, usize)>,
    pub(super) conns: BTreeMap<u64, Conn>,
    pub(super) listeners: BTreeMap<u64, Listener>,
    pub(super) udp: BTreeMap<u64, Udp>,
    next_id: u64,
}

/// One simulation's network.
pub(crate) struct Net {
    state: Mutex<State>,
}

fn pair(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

/// An error of the simulated network, `kind` with a message that says so.
pub(super) fn error(kind: io::ErrorKind, msg: impl std::fmt::Display) -> io::Error {
    io::Error::new(kind, format!("weft::sim::net: {msg}"))
}

impl Net {
    fn new() -> Net {
        Net {
            state: Mutex::new(State {
                hosts: vec![Host {
                    name: DEFAULT_HOST.to_string(),
                    ip: DEFAULT_HOST_IP,
                    incarnation: 0,
                    up: true,
                    next_port: EPHEMERAL_FIRST,
                }],
                default_link: Link::default(),
                links: BTreeMap::new(),
                cut: BTreeSet::new(),
                conns: BTreeMap::new(),
                listeners: BTreeMap::new(),
                udp: BTreeMap::new(),
                next_id: 1,
            }),
        }
    }

    /// The network of the calling thread's simulation (made on first use);
    /// `None` outside a simulation.
    pub(crate) fn current() -> Option<Arc<Net>> {
        crate::sched::simulation()?.network(Net::new)
    }

    /// [`Net::current`], or an error naming `call` outside a simulation.
    pub(super) fn get(call: &str) -> io::Result<Arc<Net>> {
        Net::current().ok_or_else(|| {
            error(
                io::ErrorKind::Unsupported,
                format_args!("{call} works only inside a simulation (weft::sim::run)"),
            )
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unpoison()
    }

    /// Waits on `cv` until notified, `deadline` or an interrupt; `Err` on
    /// an interrupt (the flag cleared), with the guard back.
    pub(super) fn wait<'a>(
        cv: &Condvar,
        g: MutexGuard<'a, State>,
        deadline: Option<Instant>,
    ) -> Result<MutexGuard<'a, State>, MutexGuard<'a, State>> {
        let r = match deadline {
            None => cv.wait_interruptibly(g),
            Some(d) => {
                let left = d.saturating_duration_since(crate::clock::now());
                if left.is_zero() {
                    return Ok(g);
                }
                cv.wait_timeout_interruptibly(g, left).map(|(g, _)| g)
            }
        };
        match r {
            Ok(g) => Ok(g),
            Err(e) if e.is_interrupted() => Err(e.into_inner()),
            Err(e) => Ok(e.into_inner()),
        }
    }
}

/// The host and incarnation of the calling thread (the default host's
/// current one for a thread never put on a host).
pub(super) fn my_place(s: &State) -> Place {
    let word = crate::sched::simulation()
        .and_then(|sim| sim.host_of(crate::thread::current().id().as_u64().get()));
    match word {
        Some(w) => Place::decode(w),
        None => Place {
            host: 0,
            incarnation: s.hosts[0].incarnation,
        },
    }
}

/// A draw from the simulation's network stream (0 outside one: a socket
/// dropped after its simulation ended).
fn draw() -> u64 {
    crate::sched::simulation().map_or(0, |s| s.random(Stream::Network))
}

impl State {
    /// The index of the host named `name`.
    pub(super) fn host_named(&self, name: &str) -> io::Result<usize> {
        self.hosts
            .iter()
            .position(|h| h.name == name)
            .ok_or_else(|| {
                error(
                    io::ErrorKind::NotFound,
                    format_args!("no host named {name:?}"),
                )
            })
    }

    /// The host named `name`, made if there is none (with the next address).
    pub(super) fn host_or_new(&mut self, name: &str) -> io::Result<usize> {
        if let Ok(h) = self.host_named(name) {
            return Ok(h);
        }
        if name.is_empty() || name.parse::<IpAddr>().is_ok() || name == "localhost" {
            return Err(error(
                io::ErrorKind::InvalidInput,
                format_args!("{name:?} cannot name a host (empty, an address or localhost)"),
            ));
        }
        // 10.0.0.1, 10.0.0.2, …, skipping the default host's address.
        let mut n = self.hosts.len() as u32;
        if n >= u32::from(DEFAULT_HOST_IP.octets()[3]) {
            n += 1;
        }
        if n >= 0xffff {
            return Err(error(io::ErrorKind::OutOfMemory, "too many hosts"));
        }
        let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + n);
        self.hosts.push(Host {
            name: name.to_string(),
            ip,
            incarnation: 0,
            up: true,
            next_port: EPHEMERAL_FIRST,
        });
        Ok(self.hosts.len() - 1)
    }

    /// The host with address `ip`, seen from host `from`: a loopback or
    /// unspecified address is `from` itself.
    pub(super) fn host_at(&self, ip: IpAddr, from: usize) -> Option<usize> {
        if ip.is_loopback() || ip.is_unspecified() {
            return Some(from);
        }
        self.hosts.iter().position(|h| IpAddr::V4(h.ip) == ip)
    }

    /// Fails unless `p` is the current incarnation of an up host.
    pub(super) fn check_alive(&self, p: Place) -> io::Result<()> {
        let h = &self.hosts[p.host];
        if !h.up {
            return Err(error(
                io::ErrorKind::NetworkDown,
                format_args!("host {:?} is down (crashed)", h.name),
            ));
        }
        if h.incarnation != p.incarnation {
            return Err(error(
                io::ErrorKind::ConnectionAborted,
                format_args!(
                    "host {:?} crashed since this socket or thread began",
                    h.name
                ),
            ));
        }
        Ok(())
    }

    pub(super) fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// A free port on `host` from the ephemeral range.
    pub(super) fn ephemeral_port(&mut self, host: usize) -> io::Result<u16> {
        for _ in 0..=(u16::MAX - EPHEMERAL_FIRST) {
            let h = &mut self.hosts[host];
            let p = h.next_port;
            h.next_port = if p == u16::MAX {
                EPHEMERAL_FIRST
            } else {
                p + 1
            };
            if !self.port_used(host, p) {
                return Ok(p);
            }
        }
        Err(error(io::ErrorKind::AddrInUse, "no ephemeral port left"))
    }

    /// Whether a listener, a connection or a UDP socket of `host` uses
    /// `port` (one range of ephemeral ports for both protocols).
    pub(super) fn port_used(&self, host: usize, port: u16) -> bool {
        self.listeners
            .values()
            .any(|l| l.place.host == host && l.addr.port() == port)
            || self
                .udp
                .values()
                .any(|u| u.place.host == host && u.addr.port() == port)
            || self.conns.values().any(|c| {
                // A connecting end's port (an accepted end shares its
                // listener's).
                let e = &c.ends[0];
                !e.closed && e.place.host == host && e.addr.port() == port
            })
    }

    fn link(&self, a: usize, b: usize) -> Link {
        match self.links.get(&pair(a, b)) {
            Some(l) => *l,
            None if a == b => Link::loopback(),
            None => self.default_link,
        }
    }

    pub(super) fn set_link(&mut self, a: usize, b: usize, link: Link) {
        self.links.insert(pair(a, b), link);
    }

    pub(super) fn set_default_link(&mut self, link: Link) {
        self.default_link = link;
    }

    pub(super) fn is_cut(&self, a: usize, b: usize) -> bool {
        a != b && self.cut.contains(&pair(a, b))
    }

    /// When a segment sent now from host `from` arrives at host `to`:
    /// `None` while the two are partitioned. Mixed into the trace.
    pub(super) fn arrival(&self, from: usize, to: usize, now: Instant) -> Option<Instant> {
        if self.is_cut(from, to) {
            return None;
        }
        let d = self.link(from, to).delay(draw);
        if let Some(sim) = crate::sched::simulation() {
            sim.record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        }
        Some(now + d)
    }

    /// When a datagram sent now from host `from` arrives at host `to`:
    /// `None` if it is lost (the link's loss, no retransmission) or the two
    /// are partitioned. Mixed into the trace.
    pub(super) fn datagram_arrival(&self, from: usize, to: usize, now: Instant) -> Option<Instant> {
        if self.is_cut(from, to) {
            return None;
        }
        let link = self.link(from, to);
        let d = link.datagram_delay(draw);
        if let Some(sim) = crate::sched::simulation() {
            sim.record(d.map_or(u64::MAX, |d| {
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
            }));
        }
        d.map(|d| now + d)
    }

    /// Partitions `a` from `b`: what is in flight between them is held.
    pub(super) fn partition(&mut self, a: usize, b: usize, now: Instant) {
        if !self.cut.insert(pair(a, b)) {
            return;
        }
        for c in self.conns.values_mut() {
            if pair(c.ends[0].place.host, c.ends[1].place.host) == pair(a, b) {
                for p in &mut c.pipes {
                    p.hold_after(now);
                }
            }
        }
    }

    /// Repairs the partition of `a` and `b`: held segments leave now (in
    /// order, each with a fresh delay), held handshakes go on.
    pub(super) fn repair(&mut self, a: usize, b: usize, now: Instant) {
        if !self.cut.remove(&pair(a, b)) {
            return;
        }
        let ids: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| pair(c.ends[0].place.host, c.ends[1].place.host) == pair(a, b))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let (h0, h1) = {
                let c = &self.conns[&id];
                (c.ends[0].place.host, c.ends[1].place.host)
            };
            for (i, (from, to)) in [(h0, h1), (h1, h0)].into_iter().enumerate() {
                let held = self.conns[&id].pipes[i].held();
                let times: Vec<Option<Instant>> =
                    (0..held).map(|_| self.arrival(from, to, now)).collect();
                let c = self.conns.get_mut(&id).expect("listed above");
                c.pipes[i].release(times.into_iter().flatten());
            }
            let c = &self.conns[&id];
            for e in &c.ends {
                e.wake.notify_all();
            }
        }
    }

    /// Crashes host `h`: its connections are reset (their peers get a
    /// RST), its listeners close, its sockets and threads fail from now on.
    /// Its own waiters are not woken here: the caller interrupts its
    /// threads, so that a blocked call returns `Interrupted`.
    pub(super) fn crash(&mut self, h: usize, now: Instant) {
        {
            let host = &mut self.hosts[h];
            host.up = false;
            host.incarnation = host.incarnation.wrapping_add(1);
        }
        let ids: Vec<u64> = self.listeners.keys().copied().collect();
        for id in ids {
            if self.listeners[&id].place.host == h {
                self.close_listener(id, now, false);
            }
        }
        self.udp.retain(|_, u| u.place.host != h);
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            for e in 0..2 {
                let Some(c) = self.conns.get(&id) else { break };
                // Before the SYN reached a listener, the server's end is
                // only where the SYN goes.
                let placeholder =
                    e == 1 && !matches!(c.phase, Phase::SynAck(_) | Phase::Established);
                if c.ends[e].place.host == h && !c.ends[e].closed && !placeholder {
                    self.abort_end(id, e, now);
                }
            }
        }
    }

    /// Closes listener `id`: queued connections are reset; with `wake`,
    /// threads in its `accept` (through another handle) see it closed.
    pub(super) fn close_listener(&mut self, id: u64, now: Instant, wake: bool) {
        let Some(l) = self.listeners.get_mut(&id) else {
            return;
        };
        l.closed = true;
        if wake {
            l.wake.notify_all();
        }
        let queued: Vec<u64> = l.queue.drain(..).collect();
        self.listeners.remove(&id);
        for c in queued {
            self.abort_end(c, 1, now);
        }
    }

    /// End `e` of connection `id` goes away at once (crash, unaccepted,
    /// reset): the peer gets a RST. Only the peer's waiters are woken (end
    /// `e` has no handle left, or its host crashed).
    pub(super) fn abort_end(&mut self, id: u64, e: usize, now: Instant) {
        let Some(c) = self.conns.get(&id) else { return };
        let (from, to) = (c.ends[e].place.host, c.ends[1 - e].place.host);
        let peer_gone = c.ends[1 - e].closed;
        let at = if peer_gone {
            None
        } else {
            Some(self.arrival(from, to, now))
        };
        if let Some(at) = at {
            let c = self.conns.get_mut(&id).expect("looked up above");
            c.pipes[e].push_rst(at);
        }
        self.end_closed(id, e);
    }

    /// End `e` of connection `id` is closed (after its FIN or RST was
    /// queued): shut both ways, what it had not read dropped, the peer's
    /// waiters woken, the connection forgotten once both ends are closed.
    pub(super) fn end_closed(&mut self, id: u64, e: usize) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let end = &mut c.ends[e];
        end.closed = true;
        end.write_shut = true;
        end.read_shut = true;
        c.pipes[1 - e].clear();
        c.ends[1 - e].wake.notify_all();
        self.forget_if_closed(id);
    }

    /// Removes connection `id` once neither end is open.
    pub(super) fn forget_if_closed(&mut self, id: u64) {
        if self
            .conns
            .get(&id)
            .is_some_and(|c| c.ends.iter().all(|e| e.closed))
        {
            self.conns.remove(&id);
        }
    }
}
