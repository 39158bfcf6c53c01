//! https: real TLS handshakes on loopback with certificates made here
//! (rcgen), server and client, both thread modes, and the failure paths
//! (wrong host, expired or unknown certificate, plain HTTP to the TLS port,
//! TLS to a plain port, a client that never finishes its handshake).

mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{TEST_TIMEOUT, start};
use rustls::pki_types::CertificateDer;
use weft_http::{
    Client, ClientConfig, Connection, ErrorKind, Response, Router, ServerConfig, ServerHandle,
    ThreadMode, TlsConfig, client::encode_request,
};

struct Cert {
    der: CertificateDer<'static>,
    tls: TlsConfig,
}

fn cert_with(params: rcgen::CertificateParams) -> Cert {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let tls = TlsConfig::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes()).unwrap();
    Cert {
        der: cert.der().clone(),
        tls,
    }
}

fn cert(names: &[&str]) -> Cert {
    let names = names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    cert_with(rcgen::CertificateParams::new(names).unwrap())
}

fn app() -> Router {
    Router::new()
        .get("/hello", |_req| Response::text("hello"))
        .post("/echo", |req| match req.read_body() {
            Ok(b) => Response::bytes(b),
            Err(_) => Response::error(400),
        })
        .get("/chunks", |_req| {
            Response::stream(|w| {
                for i in 0..200 {
                    write!(w, "{i},")?;
                    w.flush()?;
                }
                Ok(())
            })
        })
        .get("/big", |_req| Response::bytes(vec![7u8; 300_000]))
}

fn client_trusting(der: &CertificateDer<'static>) -> Client {
    Client::with_config(ClientConfig {
        tls_roots: vec![der.clone()],
        read_timeout: Some(TEST_TIMEOUT),
        ..ClientConfig::default()
    })
}

/// Waits (bounded) until `f` holds for the server's statistics.
fn wait_stats(h: &ServerHandle, f: impl Fn(&weft_http::ServerStats) -> bool) -> bool {
    let end = Instant::now() + TEST_TIMEOUT;
    while Instant::now() < end {
        if f(&h.stats()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

#[test]
fn https_round_trips_in_both_thread_modes() {
    for mode in [ThreadMode::Virtual, ThreadMode::Platform { threads: 4 }] {
        let c = cert(&["localhost"]);
        let h = start(ServerConfig::default().thread_mode(mode).tls(c.tls), app());
        let client = client_trusting(&c.der);
        let base = format!("https://localhost:{}", h.local_addr().port());
        for _ in 0..5 {
            let r = client.get(&format!("{base}/hello")).send().unwrap();
            assert_eq!(r.status(), 200, "{mode}");
            assert_eq!(r.text().unwrap(), "hello");
        }
        let body = vec![b'x'; 100_000];
        let r = client
            .post(&format!("{base}/echo"))
            .body(body.clone())
            .send()
            .unwrap();
        assert_eq!(r.bytes().unwrap(), body, "{mode}");
        let r = client.get(&format!("{base}/chunks")).send().unwrap();
        let text = r.text().unwrap();
        assert!(
            text.starts_with("0,1,2,") && text.ends_with("199,"),
            "{mode}"
        );
        let r = client.get(&format!("{base}/big")).send().unwrap();
        assert_eq!(r.bytes().unwrap().len(), 300_000, "{mode}");
        // Keep-alive over TLS: one connection, pooled under https://host:port.
        assert_eq!(h.stats().accepted_connections, 1, "{mode}");
        assert_eq!(h.stats().errors.tls_handshake, 0, "{mode}");
        assert_eq!(client.idle_connections(), 1);
        // The same host and port over http:// is another pool entry (and
        // fails: the port speaks TLS).
        let e = client
            .get(&format!("http://localhost:{}/hello", h.local_addr().port()))
            .send()
            .unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Read | ErrorKind::Protocol),
            "{e}"
        );
        assert_eq!(client.idle_connections(), 1);
    }
}

#[test]
fn alpn_offers_http_1_1() {
    let c = cert(&["localhost"]);
    assert_eq!(c.tls.rustls().alpn_protocols, vec![b"http/1.1".to_vec()]);
}

#[test]
fn wrong_host_is_a_certificate_error_naming_verification() {
    let c = cert(&["example.test"]);
    let h = start(ServerConfig::default().tls(c.tls), app());
    let client = client_trusting(&c.der);
    let url = format!("https://localhost:{}/hello", h.local_addr().port());
    let e = client.get(&url).send().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Certificate, "{e}");
    let msg = e.to_string();
    assert!(msg.contains("verification failed"), "{msg}");
    assert!(msg.contains("localhost"), "{msg}");
    // The server counts the failed handshake and keeps serving.
    assert!(wait_stats(&h, |s| s.errors.tls_handshake == 1));
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidData);
}

#[test]
fn expired_certificate_is_a_certificate_error() {
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2000, 1, 1);
    params.not_after = rcgen::date_time_ymd(2001, 1, 1);
    let c = cert_with(params);
    let h = start(ServerConfig::default().tls(c.tls), app());
    let client = client_trusting(&c.der);
    let url = format!("https://localhost:{}/hello", h.local_addr().port());
    let e = client.get(&url).send().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Certificate, "{e}");
    assert!(e.to_string().to_lowercase().contains("expired"), "{e}");
}

#[test]
fn unknown_issuer_is_a_certificate_error_and_server_keeps_serving() {
    let c = cert(&["localhost"]);
    let der = c.der.clone();
    let h = start(ServerConfig::default().tls(c.tls), app());
    let url = format!("https://localhost:{}/hello", h.local_addr().port());
    // Only the built-in roots: the self-signed certificate is unknown.
    let e = Client::new().get(&url).send().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Certificate, "{e}");
    assert!(wait_stats(&h, |s| s.errors.tls_handshake == 1));
    let r = client_trusting(&der).get(&url).send().unwrap();
    assert_eq!(r.text().unwrap(), "hello");
}

#[test]
fn plain_http_to_the_tls_port_is_closed_and_counted() {
    for mode in [ThreadMode::Virtual, ThreadMode::Platform { threads: 2 }] {
        let c = cert(&["localhost"]);
        let der = c.der.clone();
        let h = start(ServerConfig::default().thread_mode(mode).tls(c.tls), app());
        let mut s = std::net::TcpStream::connect(h.local_addr()).unwrap();
        s.set_read_timeout(Some(TEST_TIMEOUT)).unwrap();
        s.write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        // The server answers with a TLS alert (or nothing) and closes: the
        // read ends, it does not hang, and no HTTP response comes back.
        let mut got = Vec::new();
        let r = s.read_to_end(&mut got);
        assert!(
            r.is_ok()
                || r.as_ref()
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "{r:?}"
        );
        assert!(!got.starts_with(b"HTTP/"), "{mode}");
        assert!(wait_stats(&h, |s| s.errors.tls_handshake == 1
            && s.open_connections == 0));
        // Still serving.
        let r = client_trusting(&der)
            .get(&format!(
                "https://localhost:{}/hello",
                h.local_addr().port()
            ))
            .send()
            .unwrap();
        assert_eq!(r.text().unwrap(), "hello", "{mode}");
    }
}

#[test]
fn tls_to_a_plain_port_is_a_clean_tls_error() {
    let h = start(ServerConfig::default(), app());
    let client = Client::with_config(ClientConfig {
        connect_timeout: TEST_TIMEOUT,
        ..ClientConfig::default()
    });
    let url = format!("https://localhost:{}/hello", h.local_addr().port());
    let e = client.get(&url).send().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Tls, "{e}");
    // The plain server answered the ClientHello with 400 and closed.
    assert!(wait_stats(&h, |s| s.errors.bad_request == 1));
}

#[test]
fn a_stalled_handshake_is_cut_off_by_the_header_timeout() {
    let c = cert(&["localhost"]);
    let h = start(
        ServerConfig::default()
            .tls(c.tls)
            .header_read_timeout(Duration::from_millis(200)),
        app(),
    );
    // Connects and sends nothing: the server gives up on the handshake.
    let mut s = std::net::TcpStream::connect(h.local_addr()).unwrap();
    s.set_read_timeout(Some(TEST_TIMEOUT)).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(got.is_empty());
    assert!(wait_stats(&h, |s| s.errors.tls_handshake == 1
        && s.open_connections == 0));
}

#[test]
fn bad_pem_is_a_clear_error() {
    let e = TlsConfig::from_pem(b"not pem", b"not pem").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("CERTIFICATE"), "{e}");
    let c = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let e = TlsConfig::from_pem(c.cert.pem().as_bytes(), b"").unwrap_err();
    assert!(e.to_string().contains("private key"), "{e}");
    let e = TlsConfig::from_pem_files("/nonexistent/cert.pem", "/nonexistent/key.pem").unwrap_err();
    assert!(e.to_string().contains("/nonexistent/cert.pem"), "{e}");
}

/// 1,000 https keep-alive connections open at once against one server,
/// each carrying several requests.
#[test]
fn thousand_concurrent_keep_alive_https_clients() {
    const N: usize = 1000;
    let c = cert(&["localhost"]);
    let h = start(ServerConfig::default().tls(c.tls), app());
    let addr = h.local_addr();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(c.der.clone()).unwrap();
    let cfg = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let url = weft_http::Url::parse(&format!("https://localhost:{}/hello", addr.port())).unwrap();
    let req = Arc::new(encode_request("GET", &url, &[], b"", true));
    let connected = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = weft::channel::bounded::<()>(1);
    let threads: Vec<_> = (0..N)
        .map(|_| {
            let (cfg, req, connected, rx) =
                (cfg.clone(), req.clone(), connected.clone(), rx.clone());
            weft::spawn(move || {
                let mut conn =
                    Connection::connect_tls(addr, "localhost", cfg, TEST_TIMEOUT).unwrap();
                assert!(conn.handshake_time().is_some());
                let x = conn.exchange(&req, false, Some(TEST_TIMEOUT)).unwrap();
                assert_eq!((x.status, x.body_bytes, x.keep_alive), (200, 5, true));
                connected.fetch_add(1, Ordering::SeqCst);
                // Hold the connection open until all are connected.
                assert!(rx.recv().is_err());
                for _ in 0..2 {
                    let x = conn.exchange(&req, false, Some(TEST_TIMEOUT)).unwrap();
                    assert_eq!(x.status, 200);
                }
                conn.requests()
            })
        })
        .collect();
    assert!(wait_stats(&h, |s| s.open_connections == N as u64
        && connected.load(Ordering::SeqCst) == N));
    drop(tx); // releases every client
    drop(rx);
    let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(total, 3 * N as u64);
    let s = h.stats();
    assert_eq!(s.accepted_connections, N as u64);
    assert_eq!(s.requests, 3 * N as u64);
    assert_eq!(s.errors.tls_handshake, 0);
}
