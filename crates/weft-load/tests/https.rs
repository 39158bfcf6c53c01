//! `https://` targets: `insecure` for a self-signed server, verification
//! failures counted as TLS errors, handshakes reported apart from latency.

use std::collections::HashSet;
use std::sync::Arc;

use weft::sync::{Condvar, Mutex};
use weft_http::{Response, Server, ServerConfig, TlsConfig};

/// A self-signed HTTPS server that answers no request until `users`
/// connections have each sent one: every user's handshake then falls in
/// the run, however fast the first user would otherwise use up its
/// requests (it did, now and then, before the others' handshakes ended).
fn tls_server(users: usize) -> weft_http::ServerHandle {
    let c = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let tls = TlsConfig::from_pem(
        c.cert.pem().as_bytes(),
        c.signing_key.serialize_pem().as_bytes(),
    )
    .unwrap();
    let seen = Arc::new((Mutex::new(HashSet::new()), Condvar::new()));
    Server::bind("127.0.0.1:0", ServerConfig::default().tls(tls))
        .unwrap()
        .serve(move |req: &mut weft_http::Request<'_>| {
            let (peers, arrived) = &*seen;
            let mut peers = peers.lock().unwrap();
            if peers.insert(req.remote_addr()) {
                arrived.notify_all();
            }
            while peers.len() < users {
                peers = arrived.wait(peers).unwrap();
            }
            Response::text("hello")
        })
        .unwrap()
}

#[test]
fn insecure_https_run_reports_handshakes_apart() {
    let server = tls_server(4);
    let report = weft_load::run(&weft_load::Config {
        url: format!("https://localhost:{}/", server.local_addr().port()),
        insecure: true,
        concurrency: 4,
        requests: Some(200),
        ..weft_load::Config::default()
    })
    .unwrap();
    assert_eq!(report.requests, 200);
    assert_eq!(report.failures, 0, "{}", report.table());
    assert_eq!(server.stats().requests, 200);
    // Keep-alive: one handshake per user (all in the measured phase).
    assert_eq!(report.handshakes, 4);
    assert_eq!(server.stats().accepted_connections, 4);
    let hs = report.handshake.as_ref().expect("handshake summary");
    assert!(hs.max_ms > 0.0);
    assert!(report.table().contains("TLS handshakes 4"));
    assert!(report.to_json().contains("\"handshakes\": 4"));
}

#[test]
fn https_without_insecure_fails_verification_for_a_self_signed_server() {
    let server = tls_server(1);
    let report = weft_load::run(&weft_load::Config {
        url: format!("https://localhost:{}/", server.local_addr().port()),
        concurrency: 1,
        requests: Some(5),
        ..weft_load::Config::default()
    })
    .unwrap();
    assert_eq!(report.successes, 0);
    assert_eq!(report.errors.tls, report.failures);
    assert!(report.errors.tls > 0);
    assert!(report.table().contains("tls 5"), "{}", report.table());
}
