//! One connection's loop, on its own virtual thread: registers the
//! connection for shutdown and shedding, does the TLS handshake, then
//! reads request heads ([`read_head`]) and processes each request
//! ([`process`]) — on this thread in virtual mode, on a pool worker in
//! platform mode — until the connection closes, or waits long enough
//! between requests to be handed to the idle set. Started by the accept
//! loop or by the idle set ([`spawn_connection`]).

use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft::net::TcpStream;
use weft::sync::OwnedSemaphorePermit;

use super::head::{Conn, Head, INPUT_BUF, read_head};
use super::idle::Waiting;
use super::pool::Job;
use super::process::process;
use super::respond::{Wire, write_error};
use super::stats::inc;
use super::{ConnSlot, HEAD, Shared};
use crate::tls::Stream;
use crate::wire::InBuf;
use weft::sync::Unpoison;

/// Starts a connection's thread: `input` holds its first bytes when the
/// idle set saw them arrive (`None`: a new connection, which may first
/// need its TLS handshake). A thread that cannot be started closes the
/// connection (counted).
pub(super) fn spawn_connection(
    shared: &Arc<Shared>,
    tcp: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    input: Option<InBuf>,
) {
    let s = shared.clone();
    // Named for dumps, stall events and panic messages.
    let spawned =
        weft::Builder::new()
            .name(format!("http {peer}"))
            .spawn_on(&shared.rt, move || {
                run_connection(&s, tcp, peer, permit, input);
            });
    if spawned.is_err() {
        inc(&shared.stats.accept);
        connection_closed(shared);
    }
}

fn run_connection(
    shared: &Arc<Shared>,
    tcp: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    input: Option<InBuf>,
) {
    let cfg = &shared.config;
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let slot = Arc::new(ConnSlot {
        thread: weft::current(),
        state: AtomicU8::new(HEAD),
        worker: Mutex::new(None),
    });
    shared.conns.lock().unpoison().insert(id, slot.clone());
    // Declared before the stream: on every way out, the socket closes
    // first, then the connection leaves the server.
    let mut registered = Registered {
        shared,
        id,
        permit: Some(permit),
        handed_off: false,
    };

    // A new connection: the handshake and the first request head share
    // the header timeout. One the idle set resumes has its first bytes.
    let (stream, input, mut first) = match input {
        Some(input) => (Stream::Plain(tcp), input, None),
        None => {
            let _ = tcp.set_nodelay(cfg.nodelay);
            let _ = tcp.set_write_timeout(Some(cfg.write_timeout));
            let first_deadline = weft::clock::now() + cfg.header_read_timeout;
            let stream = match &cfg.tls {
                None => Stream::Plain(tcp),
                Some(tls) => match Stream::accept(tcp, tls, first_deadline) {
                    Ok(s) => s,
                    Err((tcp, _)) => {
                        inc(&shared.stats.tls_handshake);
                        drop(tcp);
                        return;
                    }
                },
            };
            (
                stream,
                InBuf::with_capacity(INPUT_BUF),
                Some(first_deadline),
            )
        }
    };
    let mut conn = Some(Conn {
        stream,
        peer,
        input,
        head: Vec::new(),
        out: Vec::with_capacity(256),
        scratch: Vec::new(),
        linger: false,
    });
    // Platform mode: a one-slot channel to get the connection back from
    // the worker that ran its request.
    let back = shared
        .pool
        .as_ref()
        .map(|_| weft::channel::bounded::<(Conn, bool)>(1));
    while let Some(mut c) = conn.take() {
        match read_head(&mut c, shared, &slot, first) {
            Head::Ready => {}
            Head::Close => {
                conn = Some(c);
                break;
            }
            Head::Idle => {
                // No request within `idle_thread_timeout`: the idle set
                // keeps the connection for the rest of `idle_timeout`,
                // and this thread ends.
                if let (Some(idle), Stream::Plain(tcp), Some(permit)) =
                    (&shared.idle, c.stream, registered.permit.take())
                {
                    let wait = cfg.idle_timeout.saturating_sub(cfg.idle_thread_timeout);
                    registered.handed_off = true;
                    drop(registered);
                    let w = Waiting { tcp, peer, permit };
                    idle.park(shared, w, weft::clock::now() + wait);
                }
                return;
            }
            Head::Reject(status) => {
                shared.stats.error_status(status);
                let wire = Wire::new(&c.stream, &mut c.out, &mut c.scratch, cfg);
                let _ = write_error(wire, shared, status);
                c.linger = true;
                conn = Some(c);
                break;
            }
        }
        first = None;
        let keep = match (&shared.pool, &back) {
            (Some(pool), Some((tx, rx))) => {
                let Some(jobs) = pool.sender() else {
                    conn = Some(c);
                    break;
                };
                let (tx, s, sl) = (tx.clone(), shared.clone(), slot.clone());
                let job: Job = Box::new(move || {
                    *sl.worker.lock().unpoison() = Some(weft::current());
                    let keep = process(&mut c, &s);
                    *sl.worker.lock().unpoison() = None;
                    let _ = tx.send((c, keep));
                });
                if jobs.send(job).is_err() {
                    break;
                }
                match rx.recv() {
                    Ok((c, keep)) => {
                        conn = Some(c);
                        keep
                    }
                    Err(_) => break,
                }
            }
            _ => {
                let keep = process(&mut c, shared);
                conn = Some(c);
                keep
            }
        };
        if !keep || shared.is_shutting_down() {
            break;
        }
    }
    if let Some(c) = conn
        && c.linger
    {
        linger_close(&c.stream);
    }
}

/// A connection's place in the server, given up once, when
/// [`run_connection`] returns by any path: its slot (which shutdown
/// interrupts), its permit of `max_connections`, and its count among the
/// open connections — in that order, as the last one closing during a
/// shutdown wakes the drain. A connection handed to the idle set keeps its
/// permit and its count there.
struct Registered<'a> {
    shared: &'a Shared,
    id: u64,
    permit: Option<OwnedSemaphorePermit>,
    handed_off: bool,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.shared.conns.lock().unpoison().remove(&self.id);
        if !self.handed_off {
            drop(self.permit.take());
            connection_closed(self.shared);
        }
    }
}

/// Half-closes and discards what the client still sends for a short while
/// (500 ms in all, at most 1 MiB), so that unread input does not turn our
/// close into a reset that destroys the response we just wrote.
pub(super) fn linger_close(stream: &Stream) {
    let _ = stream.shutdown_write();
    let deadline = weft::clock::now() + Duration::from_millis(500);
    let mut buf = [0u8; 4096];
    let mut total = 0usize;
    while total < (1 << 20) {
        let left = deadline.saturating_duration_since(weft::clock::now());
        if left.is_zero() {
            break;
        }
        let _ = stream.set_read_timeout(Some(left));
        match (&*stream).read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
}

pub(super) fn connection_closed(shared: &Shared) {
    if shared.stats.open.fetch_sub(1, Ordering::SeqCst) == 1 && shared.is_shutting_down() {
        let _g = shared.drain.lock();
        shared.drained.notify_all();
    }
}
