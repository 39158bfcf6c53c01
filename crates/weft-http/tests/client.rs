//! Client tests: pooling, timeouts, chunked decoding, errors.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{TEST_TIMEOUT, start};
use weft_http::{Client, ClientConfig, ErrorKind, Response, Router, ServerConfig};

fn app() -> Router {
    Router::new()
        .get("/hello", |_req| Response::text("hello"))
        .post("/echo", |req| match req.read_body() {
            Ok(b) => Response::bytes(b).with_header(
                "x-chunked",
                req.header("transfer-encoding").unwrap_or("no").to_owned(),
            ),
            Err(_) => Response::error(400),
        })
        .get("/chunks", |_req| {
            Response::stream(|w| {
                for i in 0..100 {
                    write!(w, "{i},")?;
                    w.flush()?;
                }
                Ok(())
            })
        })
        .get("/big", |_req| Response::bytes(vec![7u8; 300_000]))
        .get("/close", |_req| {
            Response::text("bye").with_header("Connection", "close")
        })
}

#[test]
fn sequential_requests_reuse_one_connection() {
    let h = start(ServerConfig::default(), app());
    let client = Client::new();
    let url = format!("http://{}/hello", h.local_addr());
    for _ in 0..10 {
        let r = client.get(&url).send().unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.header("content-length"), Some("5"));
        assert_eq!(r.text().unwrap(), "hello");
    }
    assert_eq!(h.stats().accepted_connections, 1);
    assert_eq!(client.idle_connections(), 1);
}

#[test]
fn concurrent_users_get_their_own_pooled_connections() {
    let h = start(ServerConfig::default(), app());
    let client = Client::new();
    let url = format!("http://{}/hello", h.local_addr());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (c, u) = (client.clone(), url.clone());
            weft::spawn(move || {
                for _ in 0..25 {
                    assert_eq!(c.get(&u).send().unwrap().text().unwrap(), "hello");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(h.stats().requests, 100);
    let accepted = h.stats().accepted_connections;
    assert!((1..=4).contains(&accepted), "{accepted} connections");
    assert_eq!(client.idle_connections() as u64, accepted);
}

#[test]
fn pool_respects_max_idle_and_keep_alive_off() {
    let h = start(ServerConfig::default(), app());
    let url = format!("http://{}/hello", h.local_addr());
    let client = Client::with_config(ClientConfig {
        keep_alive: false,
        ..ClientConfig::default()
    });
    for _ in 0..3 {
        assert_eq!(client.get(&url).send().unwrap().text().unwrap(), "hello");
    }
    assert_eq!(h.stats().accepted_connections, 3);
    assert_eq!(client.idle_connections(), 0);
}

#[test]
fn connection_closed_by_server_is_not_reused() {
    let h = start(ServerConfig::default(), app());
    let base = format!("http://{}", h.local_addr());
    let client = Client::new();
    assert_eq!(
        client
            .get(&format!("{base}/close"))
            .send()
            .unwrap()
            .text()
            .unwrap(),
        "bye"
    );
    assert_eq!(client.idle_connections(), 0);
    assert_eq!(
        client
            .get(&format!("{base}/hello"))
            .send()
            .unwrap()
            .text()
            .unwrap(),
        "hello"
    );
    assert_eq!(h.stats().accepted_connections, 2);
}

#[test]
fn stale_pooled_connection_is_replaced() {
    // The server closes idle connections after 50 ms; the client keeps them
    // for longer, so its next request finds a dead pooled connection.
    let h = start(
        ServerConfig::default().idle_timeout(Duration::from_millis(50)),
        app(),
    );
    let url = format!("http://{}/hello", h.local_addr());
    let client = Client::new();
    assert_eq!(client.get(&url).send().unwrap().text().unwrap(), "hello");
    // Wait (bounded) until the server has closed its side.
    let mut closed = false;
    for _ in 0..2000 {
        if h.stats().open_connections == 0 {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(closed, "server never closed the idle connection");
    assert_eq!(client.get(&url).send().unwrap().text().unwrap(), "hello");
    assert_eq!(h.stats().accepted_connections, 2);
}

#[test]
fn chunked_and_large_responses_are_decoded() {
    let h = start(ServerConfig::default(), app());
    let base = format!("http://{}", h.local_addr());
    let client = Client::new();
    let r = client.get(&format!("{base}/chunks")).send().unwrap();
    assert!(r.is_chunked());
    let want: String = (0..100).map(|i| format!("{i},")).collect();
    assert_eq!(r.text().unwrap(), want);
    let r = client.get(&format!("{base}/big")).send().unwrap();
    let body = r.bytes().unwrap();
    assert_eq!(body.len(), 300_000);
    assert!(body.iter().all(|&b| b == 7));
    // Both connections went back to the pool (one reused).
    assert_eq!(h.stats().accepted_connections, 1);
}

#[test]
fn request_bodies_sized_and_chunked() {
    let h = start(ServerConfig::default(), app());
    let url = format!("http://{}/echo", h.local_addr());
    let client = Client::new();
    let r = client.post(&url).body("abc").send().unwrap();
    assert_eq!(r.header("x-chunked"), Some("no"));
    assert_eq!(r.text().unwrap(), "abc");
    let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    let r = client
        .post(&url)
        .body_reader(std::io::Cursor::new(data.clone()), None)
        .send()
        .unwrap();
    assert_eq!(r.header("x-chunked"), Some("chunked"));
    assert!(r.bytes().unwrap() == data);
    let r = client
        .post(&url)
        .body_reader(std::io::Cursor::new(b"sized".to_vec()), Some(5))
        .send()
        .unwrap();
    assert_eq!(r.text().unwrap(), "sized");
}

#[test]
fn head_request_has_no_body() {
    let h = start(ServerConfig::default(), app());
    let url = format!("http://{}/big", h.local_addr());
    let client = Client::new();
    let r = client.head(&url).send().unwrap();
    assert_eq!(r.header("content-length"), Some("300000"));
    assert_eq!(r.bytes().unwrap().len(), 0);
    // The connection is reusable after HEAD.
    assert_eq!(
        client.get(&url).send().unwrap().bytes().unwrap().len(),
        300_000
    );
    assert_eq!(h.stats().accepted_connections, 1);
}

/// A handler that blocks until the test lets it go.
fn gated() -> (
    Router,
    weft::channel::Sender<()>,
    weft::channel::Receiver<()>,
) {
    let (rtx, rrx) = weft::channel::unbounded::<()>();
    let (etx, erx) = weft::channel::unbounded::<()>();
    let r = Router::new().get("/wait", move |_req| {
        etx.send(()).unwrap();
        let _ = rrx.recv_timeout(TEST_TIMEOUT);
        Response::text("late")
    });
    (r, rtx, erx)
}

#[test]
fn read_timeout_expires() {
    let (router, release, entered) = gated();
    let h = start(ServerConfig::default(), router);
    let client = Client::with_config(ClientConfig {
        read_timeout: Some(Duration::from_millis(100)),
        ..ClientConfig::default()
    });
    let e = client
        .get(&format!("http://{}/wait", h.local_addr()))
        .send()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(e.is_timeout());
    entered.recv_timeout(TEST_TIMEOUT).unwrap();
    release.send(()).unwrap();
}

#[test]
fn total_timeout_expires() {
    let (router, release, _entered) = gated();
    let h = start(ServerConfig::default(), router);
    let client = Client::new();
    let start = std::time::Instant::now();
    let e = client
        .get(&format!("http://{}/wait", h.local_addr()))
        .timeout(Duration::from_millis(150))
        .send()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(start.elapsed() < Duration::from_secs(10));
    release.send(()).unwrap();
}

#[test]
fn connect_errors_are_classified() {
    // A port nobody listens on: bind, note, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = Client::new()
        .get(&format!("http://127.0.0.1:{port}/"))
        .send()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connect, "{e}");
    let e = Client::new().get("ftp://127.0.0.1/").send().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidUrl);
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn malformed_and_truncated_responses_are_errors() {
    // A raw server that answers garbage, then one that cuts the body short.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        for reply in [
            &b"NOT HTTP AT ALL\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ] {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            s.write_all(reply).unwrap();
        }
    });
    let client = Client::new();
    let url = format!("http://{addr}/");
    let e = client.get(&url).send().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Protocol, "{e}");
    let e = client.get(&url).send().unwrap().text().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Read, "{e}");
    let e = client.get(&url).send().unwrap().bytes().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Protocol, "{e}");
    server.join().unwrap();
}

#[test]
fn client_works_from_os_threads_and_virtual_threads() {
    let h = start(ServerConfig::default(), app());
    let url = format!("http://{}/hello", h.local_addr());
    let client = Client::new();
    let (c2, u2) = (client.clone(), url.clone());
    let v = weft::spawn(move || c2.get(&u2).send().unwrap().text().unwrap());
    assert_eq!(v.join().unwrap(), "hello");
    let o = std::thread::spawn(move || client.get(&url).send().unwrap().text().unwrap());
    assert_eq!(o.join().unwrap(), "hello");
}
