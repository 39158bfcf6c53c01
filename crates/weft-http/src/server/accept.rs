//! The accept loop: one virtual thread per server that takes connections
//! from the listener, applies
//! [`ServerConfig::max_connections`](super::ServerConfig::max_connections)
//! and [`WhenFull`] (shedding a connection to make room, by default), and
//! gives each connection to the idle set until its first byte (plain HTTP)
//! or to a connection thread of its own ([`spawn_connection`]); over the
//! limit with `WhenFull::Reject` it answers `503` itself. Spawned by [`Server::serve`](super::Server::serve);
//! stopped by shutdown's interrupt.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use weft::net::{TcpListener, TcpStream};
use weft::sync::OwnedSemaphorePermit;

use super::conn::{linger_close, spawn_connection};
use super::idle::Waiting;
use super::respond::{Reply, Wire, builtin_error, render_error, write_response};
use super::stats::inc;
use super::{Shared, Shed, WhenFull};
use crate::budget::Budget;
use crate::response::IntoResponse;
use crate::tls::Stream;

pub(super) fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let cfg = &shared.config;
    loop {
        if shared.is_shutting_down() {
            break;
        }
        let permit = match cfg.when_full {
            WhenFull::Wait => match shared.limit.clone().acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => break, // interrupted: shutting down
            },
            WhenFull::Reject | WhenFull::ShedIdle => None,
        };
        let (tcp, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => break,
            Err(e) => {
                inc(&shared.stats.accept);
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                ) {
                    // Out of resources: make room if allowed, else back off
                    // instead of spinning.
                    let freed = cfg.when_full == WhenFull::ShedIdle && shared.shed() == Shed::Freed;
                    if !freed && weft::sleep(Duration::from_millis(20)).is_err() {
                        break;
                    }
                }
                continue;
            }
        };
        let permit = match permit {
            Some(p) => p,
            None => match shared.limit.clone().try_acquire_owned() {
                Some(p) => p,
                None if cfg.when_full == WhenFull::ShedIdle => match make_room(&shared) {
                    Some(p) => p,
                    None => break, // interrupted: shutting down
                },
                None => {
                    inc(&shared.stats.rejected);
                    shared.stats.response(503);
                    let s = shared.clone();
                    let _ = weft::Builder::new().spawn_on(&shared.rt, move || reject(&s, tcp));
                    continue;
                }
            },
        };
        inc(&shared.stats.accepted);
        shared.stats.open.fetch_add(1, Ordering::SeqCst);
        match &shared.idle {
            // Plain HTTP: wait for the first byte without a thread.
            Some(idle) => {
                let _ = tcp.set_nodelay(cfg.nodelay);
                let _ = tcp.set_write_timeout(Some(cfg.write_timeout));
                let deadline = weft::clock::now() + cfg.header_read_timeout;
                idle.park(&shared, Waiting { tcp, peer, permit }, deadline);
            }
            None => spawn_connection(&shared, tcp, peer, permit, None),
        }
    }
}

/// A permit for a new connection on a full server ([`WhenFull::ShedIdle`]):
/// sheds one connection (see [`Shared::shed`]) and waits for its permit;
/// when nothing can be shed, waits for any permit, looking again every
/// 10 ms for a connection that has become idle. `None`: interrupted.
fn make_room(shared: &Shared) -> Option<OwnedSemaphorePermit> {
    // A shed thread ends soon; until it has, shed no other.
    let mut pending = false;
    loop {
        if let Some(p) = shared.limit.clone().try_acquire_owned() {
            return Some(p);
        }
        if shared.is_shutting_down() {
            return None;
        }
        if !pending {
            match shared.shed() {
                Shed::Freed => continue,
                Shed::Pending => pending = true,
                Shed::Nothing => {}
            }
        }
        let wait = Duration::from_millis(if pending { 100 } else { 10 });
        match shared.limit.acquire_timeout(wait) {
            // Given back at once for `try_acquire_owned` to take: only
            // this thread acquires permits.
            Ok(Some(p)) => drop(p),
            Ok(None) => pending = false,
            Err(_) => return None,
        }
    }
}

/// Answers 503 (rendered by the error hook; counted by the caller) to a
/// connection over the limit and closes it.
pub(super) fn reject(shared: &Shared, tcp: TcpStream) {
    let _ = tcp.set_write_timeout(Some(Duration::from_secs(1)));
    let stream = match &shared.config.tls {
        None => Stream::Plain(tcp),
        Some(tls) => match Stream::accept(tcp, tls, weft::clock::now() + Duration::from_secs(1)) {
            Ok(s) => s,
            Err(_) => {
                inc(&shared.stats.tls_handshake);
                return;
            }
        },
    };
    let resp = render_error(shared, builtin_error(503, &shared.config).into_response());
    let (mut out, mut scratch) = (Vec::new(), Vec::new());
    let mut wire = Wire::new(&stream, &mut out, &mut scratch, &shared.config);
    // A full server's answer is small: a second, not the write budget.
    wire.budget = Budget::new(Duration::from_secs(1), 0);
    let _ = write_response(wire, resp, Reply::CLOSE);
    linger_close(&stream);
}
