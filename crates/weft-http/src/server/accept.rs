//! The accept loop: one virtual thread per server that takes connections
//! from the listener, applies
//! [`ServerConfig::max_connections`](super::ServerConfig::max_connections)
//! and [`WhenFull`], and starts a connection thread
//! ([`run_connection`]) for each; over the limit with `WhenFull::Reject`
//! it answers `503` itself. Spawned by [`Server::serve`](super::Server::serve);
//! stopped by shutdown's interrupt.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use weft::net::{TcpListener, TcpStream};

use super::conn::{connection_closed, linger_close, run_connection};
use super::respond::{Reply, Wire, builtin_error, render_error, write_response};
use super::stats::inc;
use super::{Shared, WhenFull};
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
            WhenFull::Reject => None,
        };
        let (stream, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => break,
            Err(e) => {
                inc(&shared.stats.accept);
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                ) {
                    // Out of resources: back off instead of spinning.
                    if weft::sleep(Duration::from_millis(20)).is_err() {
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
                None => {
                    inc(&shared.stats.rejected);
                    shared.stats.response(503);
                    let s = shared.clone();
                    let _ = weft::Builder::new().spawn_on(&shared.rt, move || reject(&s, stream));
                    continue;
                }
            },
        };
        inc(&shared.stats.accepted);
        shared.stats.open.fetch_add(1, Ordering::SeqCst);
        let s = shared.clone();
        // Named for dumps, stall events and panic messages.
        let spawned =
            weft::Builder::new()
                .name(format!("http {peer}"))
                .spawn_on(&shared.rt, move || {
                    run_connection(&s, stream, peer, permit);
                });
        if spawned.is_err() {
            inc(&shared.stats.accept);
            connection_closed(&shared);
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
    let wire = Wire {
        stream: &stream,
        out: &mut out,
        scratch: &mut scratch,
    };
    let _ = write_response(wire, resp, Reply::CLOSE);
    linger_close(&stream);
}
