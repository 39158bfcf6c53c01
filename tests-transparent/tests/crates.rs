//! Unmodified third-party blocking crates on virtual threads: each test
//! runs more clients than the runtime has carriers, and the servers'
//! handlers wait at a barrier until every client is in flight at once. Had
//! a client's blocking call held its carrier, the two carriers of the
//! strict runtime would be held by two clients, the barrier would never
//! fill, and the watchdog would abort the run with Weft's thread dump
//! (`WEFT_TRANSPARENT=0 cargo test --test crates` shows it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use weft::sync::Barrier;
use weft_transparent_tests::{strict_runtime, watchdog};

const LIMIT: Duration = Duration::from_secs(120);

/// A std `TcpListener` on loopback whose server, a virtual thread of `rt`,
/// accepts `n` connections and runs `conn` on each in a virtual thread of
/// its own, with a barrier of `n` that no handler can pass until all `n`
/// are in flight. Returns the address and the server (joined: all done).
fn serve_n(
    rt: &weft::Runtime,
    n: usize,
    conn: impl Fn(TcpStream, &Barrier) + Clone + Send + 'static,
) -> (std::net::SocketAddr, weft::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let barrier = Arc::new(Barrier::new(n));
    let server = rt.spawn(move || {
        let conns: Vec<_> = (0..n)
            .map(|_| {
                let (tcp, _) = listener.accept().unwrap();
                let (barrier, conn) = (barrier.clone(), conn.clone());
                weft::spawn(move || conn(tcp, &barrier))
            })
            .collect();
        for c in conns {
            c.join().unwrap();
        }
    });
    (addr, server)
}

/// ureq (std `TcpStream` inside) → a weft-http server in the same process,
/// on the same two carriers.
#[test]
fn ureq_clients_reach_a_weft_http_server_on_two_carriers() {
    let _dog = watchdog(
        "ureq_clients_reach_a_weft_http_server_on_two_carriers",
        LIMIT,
    );
    const N: usize = 100;
    let rt = strict_runtime(2);
    let barrier = Arc::new(Barrier::new(N));
    let router = weft_http::Router::new().get("/n/:i", move |req| {
        let i = req.param("i").unwrap_or_default().to_string();
        barrier.wait();
        format!("echo {i}")
    });
    let config = weft_http::ServerConfig::default().runtime(rt.clone());
    let server = weft_http::Server::bind("127.0.0.1:0", config)
        .unwrap()
        .serve(Arc::new(router))
        .unwrap();
    let base = format!("http://{}", server.local_addr());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .max_idle_connections_per_host(N)
        .build()
        .into();
    let clients: Vec<_> = (0..N)
        .map(|i| {
            let (agent, url) = (agent.clone(), format!("{base}/n/{i}"));
            rt.spawn(move || -> Result<String, ureq::Error> {
                agent.get(&url).call()?.body_mut().read_to_string()
            })
        })
        .collect();
    for (i, c) in clients.into_iter().enumerate() {
        assert_eq!(c.join().unwrap().unwrap(), format!("echo {i}"));
    }
    assert!(server.shutdown(Duration::from_secs(5)).drained);
    assert_eq!(rt.active_carriers(), 2);
}

/// tungstenite server and client, both over std `TcpStream`, on virtual
/// threads: the servers echo each client's message once all have one.
#[test]
fn tungstenite_server_and_clients_on_two_carriers() {
    use tungstenite::Message;
    let _dog = watchdog("tungstenite_server_and_clients_on_two_carriers", LIMIT);
    const N: usize = 100;
    let rt = strict_runtime(2);
    let (addr, server) = serve_n(&rt, N, |tcp, barrier| {
        let mut ws = tungstenite::accept(tcp).unwrap();
        let msg = ws.read().unwrap();
        barrier.wait();
        ws.send(msg).unwrap();
        // Until the client closes (its close frame, then EOF).
        while ws.read().is_ok() {}
    });
    let clients: Vec<_> = (0..N)
        .map(|i| {
            rt.spawn(move || {
                let tcp = TcpStream::connect(addr).unwrap();
                let (mut ws, _) = tungstenite::client("ws://127.0.0.1/", tcp).unwrap();
                ws.send(Message::text(format!("hello {i}"))).unwrap();
                let back = ws.read().unwrap();
                let _ = ws.close(None);
                while ws.read().is_ok() {}
                back
            })
        })
        .collect();
    for (i, c) in clients.into_iter().enumerate() {
        assert_eq!(c.join().unwrap(), Message::text(format!("hello {i}")));
    }
    server.join().unwrap();
}

/// rustls `StreamOwned` over std `TcpStream`, both ends on virtual threads:
/// every handshake completes while the others are in flight.
#[test]
fn rustls_handshakes_on_two_carriers() {
    use rustls::{ClientConnection, ServerConnection, StreamOwned};
    use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
    let _dog = watchdog("rustls_handshakes_on_two_carriers", LIMIT);
    const N: usize = 64;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_der = cert.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
    let server_config = Arc::new(
        rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![cert_der.clone()], key)
            .unwrap(),
    );
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der).unwrap();
    let client_config = Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );

    let rt = strict_runtime(2);
    let (addr, server) = serve_n(&rt, N, move |tcp, barrier| {
        let mut tls = StreamOwned::new(ServerConnection::new(server_config.clone()).unwrap(), tcp);
        let mut msg = [0u8; 4];
        tls.read_exact(&mut msg).unwrap();
        barrier.wait();
        tls.write_all(&msg).unwrap();
        tls.conn.send_close_notify();
        tls.flush().unwrap();
    });
    let clients: Vec<_> = (0..N as u32)
        .map(|i| {
            let config = client_config.clone();
            rt.spawn(move || {
                let name = ServerName::try_from("localhost").unwrap();
                let conn = ClientConnection::new(config, name).unwrap();
                let mut tls = StreamOwned::new(conn, TcpStream::connect(addr).unwrap());
                tls.write_all(&i.to_le_bytes()).unwrap();
                let mut back = Vec::new();
                tls.read_to_end(&mut back).unwrap();
                (back, tls.conn.protocol_version())
            })
        })
        .collect();
    for (i, c) in clients.into_iter().enumerate() {
        let (back, version) = c.join().unwrap();
        assert_eq!(back, (i as u32).to_le_bytes());
        assert_eq!(version, Some(rustls::ProtocolVersion::TLSv1_3));
    }
    server.join().unwrap();
}
