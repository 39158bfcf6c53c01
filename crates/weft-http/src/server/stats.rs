//! Server statistics: the public snapshot types ([`ServerStats`],
//! [`ErrorStats`]) and the atomic counters behind them. The accept loop,
//! the connection loop and the request path count;
//! [`ServerHandle::stats`](super::ServerHandle::stats) reads a snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

use weft::metrics::{Sample, Series};
use weft::sync::Unpoison;

/// Errors by class, counted since the server started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorStats {
    /// Malformed requests answered `400`, and requests with a transfer
    /// coding the server does not implement answered `501` (connection
    /// closed).
    pub bad_request: u64,
    /// Request heads over the limits answered `431`, or `414` when the
    /// request line alone is.
    pub header_too_large: u64,
    /// Bodies over the limit answered `413`.
    pub body_too_large: u64,
    /// Header or body read timeouts answered `408` (includes slowloris).
    pub timeout: u64,
    /// Handler panics answered `500`.
    pub handler_panic: u64,
    /// Connections refused with `503` at `max_connections`
    /// ([`WhenFull::Reject`](super::WhenFull::Reject)).
    pub rejected: u64,
    /// Connections that failed mid-request (reset, closed early, write
    /// failure or timeout).
    pub io: u64,
    /// Failed `accept` calls (e.g. out of descriptors) and connection
    /// threads that could not be started.
    pub accept: u64,
    /// TLS handshakes that failed or timed out (plain HTTP sent to the TLS
    /// port, a client that rejected the certificate, a stalled client);
    /// each closed its connection.
    pub tls_handshake: u64,
    /// Connections without a request in progress closed to make room for
    /// a new one at `max_connections`
    /// ([`WhenFull::ShedIdle`](super::WhenFull::ShedIdle)).
    pub shed: u64,
}

/// A snapshot of the server's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections open now.
    pub open_connections: u64,
    /// Of those, connections waiting for a byte without a thread (the idle
    /// set: see [`ServerConfig::idle_thread_timeout`](super::ServerConfig::idle_thread_timeout)).
    pub idle_connections: u64,
    /// Connections accepted since start.
    pub accepted_connections: u64,
    /// Requests whose head was parsed and whose response is not yet
    /// written.
    pub in_flight: u64,
    /// Requests answered: parsed request heads whose response (any status)
    /// has been started. Counted just before the response is written, so a
    /// client that has its response sees it counted.
    pub requests: u64,
    /// Responses written by status class: index 0 is 1xx … index 4 is 5xx.
    /// Includes error responses to unparseable input.
    pub responses_by_class: [u64; 5],
    /// Errors by class.
    pub errors: ErrorStats,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) open: AtomicU64,
    pub(super) idle: AtomicU64,
    pub(super) accepted: AtomicU64,
    pub(super) started: AtomicU64,
    pub(super) finished: AtomicU64,
    pub(super) classes: [AtomicU64; 5],
    pub(super) bad_request: AtomicU64,
    pub(super) header_too_large: AtomicU64,
    pub(super) body_too_large: AtomicU64,
    pub(super) timeout: AtomicU64,
    pub(super) handler_panic: AtomicU64,
    pub(super) rejected: AtomicU64,
    pub(super) io: AtomicU64,
    pub(super) accept: AtomicU64,
    pub(super) tls_handshake: AtomicU64,
    pub(super) shed: AtomicU64,
}

pub(super) fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    pub(super) fn snapshot(&self) -> ServerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let finished = get(&self.finished);
        let started = get(&self.started);
        ServerStats {
            open_connections: get(&self.open),
            idle_connections: get(&self.idle),
            accepted_connections: get(&self.accepted),
            in_flight: started.saturating_sub(finished),
            requests: finished,
            responses_by_class: std::array::from_fn(|i| get(&self.classes[i])),
            errors: ErrorStats {
                bad_request: get(&self.bad_request),
                header_too_large: get(&self.header_too_large),
                body_too_large: get(&self.body_too_large),
                timeout: get(&self.timeout),
                handler_panic: get(&self.handler_panic),
                rejected: get(&self.rejected),
                io: get(&self.io),
                accept: get(&self.accept),
                tls_handshake: get(&self.tls_handshake),
                shed: get(&self.shed),
            },
        }
    }

    pub(super) fn response(&self, status: u16) {
        if (100..600).contains(&status) {
            inc(&self.classes[(status / 100 - 1) as usize]);
        }
    }

    pub(super) fn error_status(&self, status: u16) {
        match status {
            400 | 501 => inc(&self.bad_request),
            408 => inc(&self.timeout),
            413 => inc(&self.body_too_large),
            414 | 431 => inc(&self.header_too_large),
            _ => {}
        }
    }
}

/// The servers that `weft::metrics::prometheus` lists, by address: each
/// until its shared state is gone.
static SERVERS: std::sync::Mutex<Vec<(String, std::sync::Weak<super::Shared>)>> =
    std::sync::Mutex::new(Vec::new());

/// Lists a server's counters in the Prometheus exposition
/// (`weft::metrics::prometheus`, weft-http's `/metrics` route), labelled
/// `server="<address>"`, for as long as its shared state lives.
pub(super) fn publish(addr: std::net::SocketAddr, shared: &std::sync::Arc<super::Shared>) {
    static SOURCE: std::sync::Once = std::sync::Once::new();
    SOURCE.call_once(|| weft::metrics::register_source(write_prometheus));
    let mut servers = SERVERS.lock().unpoison();
    servers.retain(|(_, s)| s.strong_count() > 0);
    servers.push((addr.to_string(), std::sync::Arc::downgrade(shared)));
}

/// The series of every listed server, in the table form `weft::metrics`
/// writes its own.
fn write_prometheus(o: &mut String) {
    let servers: Vec<(String, ServerStats)> = SERVERS
        .lock()
        .unpoison()
        .iter()
        .filter_map(|(label, s)| Some((label.clone(), s.upgrade()?.stats.snapshot())))
        .collect();
    if servers.is_empty() {
        return;
    }
    weft::metrics::write_series(o, &series(&servers));
}

/// The table of weft-http's series for `servers` (label, counters).
pub(crate) fn series(servers: &[(String, ServerStats)]) -> Vec<Series> {
    use weft::metrics::SeriesKind::{Counter, Gauge};
    let per = |f: &dyn Fn(&ServerStats) -> u64| -> Vec<Sample> {
        servers
            .iter()
            .map(|(l, s)| sample(vec![("server", l.clone())], f(s)))
            .collect()
    };
    let classes = servers
        .iter()
        .flat_map(|(l, s)| {
            s.responses_by_class.iter().enumerate().map(|(i, n)| {
                sample(
                    vec![("server", l.clone()), ("class", format!("{}xx", i + 1))],
                    *n,
                )
            })
        })
        .collect();
    let errors = servers
        .iter()
        .flat_map(|(l, s)| {
            let e = s.errors;
            [
                ("bad_request", e.bad_request),
                ("header_too_large", e.header_too_large),
                ("body_too_large", e.body_too_large),
                ("timeout", e.timeout),
                ("handler_panic", e.handler_panic),
                ("rejected", e.rejected),
                ("io", e.io),
                ("accept", e.accept),
                ("tls_handshake", e.tls_handshake),
                ("shed", e.shed),
            ]
            .map(|(k, n)| sample(vec![("server", l.clone()), ("kind", k.to_owned())], n))
        })
        .collect();
    let row = Series::new;
    vec![
        row(
            "weft_http_requests_total",
            Counter,
            "Requests answered (response started).",
            per(&|s| s.requests),
        ),
        row(
            "weft_http_responses_total",
            Counter,
            "Responses written, by status class.",
            classes,
        ),
        row(
            "weft_http_requests_in_flight",
            Gauge,
            "Requests parsed and not yet answered.",
            per(&|s| s.in_flight),
        ),
        row(
            "weft_http_connections_open",
            Gauge,
            "Connections open.",
            per(&|s| s.open_connections),
        ),
        row(
            "weft_http_connections_idle",
            Gauge,
            "Connections waiting for a byte without a thread.",
            per(&|s| s.idle_connections),
        ),
        row(
            "weft_http_connections_accepted_total",
            Counter,
            "Connections accepted.",
            per(&|s| s.accepted_connections),
        ),
        row(
            "weft_http_errors_total",
            Counter,
            "Errors by class.",
            errors,
        ),
    ]
}

fn sample(labels: Vec<(&'static str, String)>, v: u64) -> Sample {
    Sample::new(labels, v as f64)
}
