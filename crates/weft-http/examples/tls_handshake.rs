//! Measures the CPU cost of one full TLS handshake with weft-http's rustls
//! provider (ring), in memory (no sockets), for the server and the client
//! side separately; compare with the stall threshold (20 ms by default).
//!
//! `cargo run --release -p weft-http --example tls_handshake`

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

fn pump(from: &mut rustls::Connection, to: &mut rustls::Connection) {
    let mut buf = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut buf).unwrap();
    }
    let mut rd = &buf[..];
    while !rd.is_empty() {
        to.read_tls(&mut rd).unwrap();
    }
}

fn measure(alg: &'static rcgen::SignatureAlgorithm, name: &str) {
    let key = rcgen::KeyPair::generate_for(alg).unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let der: CertificateDer<'static> = cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![der.clone()], key)
            .unwrap(),
    );
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der).unwrap();
    let client = Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let n = 300;
    let (mut srv_t, mut cli_t) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let mut c = rustls::Connection::Client(
            rustls::ClientConnection::new(
                client.clone(),
                ServerName::try_from("localhost").unwrap(),
            )
            .unwrap(),
        );
        let mut s =
            rustls::Connection::Server(rustls::ServerConnection::new(server.clone()).unwrap());
        let (mut st, mut ct) = (Duration::ZERO, Duration::ZERO);
        let t = Instant::now();
        pump(&mut c, &mut s); // ClientHello
        ct += t.elapsed();
        while s.is_handshaking() || c.is_handshaking() {
            let t = Instant::now();
            s.process_new_packets().unwrap();
            pump(&mut s, &mut c);
            st += t.elapsed();
            let t = Instant::now();
            c.process_new_packets().unwrap();
            pump(&mut c, &mut s);
            ct += t.elapsed();
        }
        srv_t.push(st);
        cli_t.push(ct);
    }
    srv_t.sort();
    cli_t.sort();
    let p = |v: &[Duration], q: f64| v[((v.len() - 1) as f64 * q) as usize];
    println!(
        "{name:>14}: server median {:?} p99 {:?} max {:?} | client median {:?} p99 {:?} ({n} handshakes)",
        p(&srv_t, 0.5),
        p(&srv_t, 0.99),
        srv_t[n - 1],
        p(&cli_t, 0.5),
        p(&cli_t, 0.99),
    );
}

fn main() {
    println!("full TLS 1.3 handshakes in memory, rustls + ring; stall threshold 20 ms");
    measure(&rcgen::PKCS_ECDSA_P256_SHA256, "ECDSA P-256");
    measure(&rcgen::PKCS_ED25519, "Ed25519");
}
