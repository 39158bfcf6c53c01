//! One connection's loop, on its own virtual thread: registers the
//! connection for shutdown, does the TLS handshake, then reads request
//! heads ([`read_head`]) and processes each request ([`process`]) — on
//! this thread in virtual mode, on a pool worker in platform mode — until
//! the connection closes. Started by the accept loop.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft::net::TcpStream;
use weft::sync::OwnedSemaphorePermit;

use super::head::{Conn, Head, INPUT_BUF, read_head};
use super::pool::Job;
use super::process::process;
use super::respond::{Wire, write_error};
use super::stats::inc;
use super::{ACTIVE, ConnSlot, Shared};
use crate::tls::Stream;
use crate::wire::InBuf;
use weft::sync::Unpoison;

pub(super) fn run_connection(
    shared: &Arc<Shared>,
    tcp: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
) {
    let cfg = &shared.config;
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let slot = Arc::new(ConnSlot {
        thread: weft::current(),
        state: AtomicU8::new(ACTIVE),
        worker: Mutex::new(None),
    });
    shared.conns.lock().unpoison().insert(id, slot.clone());
    // Declared before the stream: on every way out, the socket closes
    // first, then the connection leaves the server.
    let _registered = Registered {
        shared,
        id,
        permit: Some(permit),
    };

    let _ = tcp.set_nodelay(cfg.nodelay);
    let _ = tcp.set_write_timeout(Some(cfg.write_timeout));
    // The handshake and the first request head share the header timeout.
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
    let mut conn = Some(Conn {
        stream,
        peer,
        input: InBuf::with_capacity(INPUT_BUF),
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
    let mut first = Some(first_deadline);
    while let Some(mut c) = conn.take() {
        match read_head(&mut c, shared, &slot, first) {
            Head::Ready => {}
            Head::Close => {
                conn = Some(c);
                break;
            }
            Head::Reject(status) => {
                shared.stats.error_status(status);
                let wire = Wire {
                    stream: &c.stream,
                    out: &mut c.out,
                    scratch: &mut c.scratch,
                };
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
/// shutdown wakes the drain.
struct Registered<'a> {
    shared: &'a Shared,
    id: u64,
    permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.shared.conns.lock().unpoison().remove(&self.id);
        drop(self.permit.take());
        connection_closed(self.shared);
    }
}

/// Half-closes and discards what the client still sends for a short while,
/// so that unread input does not turn our close into a reset that destroys
/// the response we just wrote.
pub(super) fn linger_close(stream: &Stream) {
    let _ = stream.shutdown_write();
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 4096];
    let mut total = 0usize;
    while total < (1 << 20) {
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
