//! Protocol tests of the server over raw sockets, in both thread modes.

mod common;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{TEST_TIMEOUT, connect, get, modes, start};
use weft_http::{Response, Router, ServerConfig, ThreadMode, WhenFull};

fn app() -> Router {
    Router::new()
        .get("/hello", |_req| Response::text("hello"))
        .post("/echo", |req| match req.read_body() {
            Ok(b) => {
                let n = b.len();
                Response::bytes(b).with_header("x-body-len", n.to_string())
            }
            Err(e) => Response::text(e.to_string()).with_status(500),
        })
        .post("/ignore", |_req| Response::text("ignored"))
        .get("/stream", |_req| {
            Response::stream(|w| {
                for part in ["part1,", "part2,", "part3"] {
                    w.write_all(part.as_bytes())?;
                    w.flush()?;
                }
                Ok(())
            })
        })
        .get("/sized", |_req| {
            Response::stream_sized(5, |w| w.write_all(b"12345"))
        })
        .get("/panic", |_req| {
            panic!("handler panic (expected by the test)")
        })
        .get("/virtual", |_req| {
            Response::text(if weft::is_virtual() { "virtual" } else { "os" })
        })
        .get("/users/:id", |req| {
            Response::text(format!(
                "user={} q={:?}",
                req.param("id").unwrap(),
                req.query_param("q")
            ))
        })
        .delete("/users/:id", |_req| Response::new(204))
}

fn cfg(mode: ThreadMode) -> ServerConfig {
    ServerConfig::default().thread_mode(mode)
}

#[test]
fn keep_alive_serves_many_requests_on_one_connection() {
    for mode in modes() {
        let h = start(cfg(mode), app());
        let mut c = connect(h.local_addr());
        for _ in 0..5 {
            c.send(&get("/hello"));
            let r = c.response();
            assert_eq!((r.status, r.text()), (200, "hello"), "{mode}");
            assert!(!r.closes());
        }
        let s = h.stats();
        assert_eq!(s.accepted_connections, 1, "{mode}");
        assert_eq!(s.requests, 5, "{mode}");
        assert_eq!(s.responses_by_class[1], 5);
    }
}

#[test]
fn date_and_content_length_are_correct() {
    let h = start(ServerConfig::default(), app());
    let mut c = connect(h.local_addr());
    c.send(&get("/hello"));
    let r = c.response();
    assert_eq!(r.header("content-length"), Some("5"));
    let date = httpdate::parse_http_date(r.header("date").expect("Date header")).unwrap();
    let skew = std::time::SystemTime::now()
        .duration_since(date)
        .unwrap_or_default();
    assert!(skew < Duration::from_secs(60), "date skew {skew:?}");
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    for mode in modes() {
        let h = start(cfg(mode), app());
        let mut c = connect(h.local_addr());
        let mut batch = Vec::new();
        batch.extend(get("/users/1"));
        batch.extend(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nping");
        batch.extend(get("/users/2?q=a+b"));
        batch.extend(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n");
        batch.extend(get("/hello"));
        c.send(&batch);
        assert_eq!(c.response().text(), "user=1 q=None");
        assert_eq!(c.response().text(), "ping");
        assert_eq!(c.response().text(), "user=2 q=Some(\"a b\")");
        assert_eq!(c.response().text(), "hi");
        assert_eq!(c.response().text(), "hello");
        assert_eq!(h.stats().requests, 5, "{mode}");
    }
}

#[test]
fn chunked_request_body_is_decoded() {
    for mode in modes() {
        let h = start(cfg(mode), app());
        let mut c = connect(h.local_addr());
        c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
        c.send(b"5;ext=1\r\nhello\r\n");
        c.send(b"1\r\n \r\n");
        c.send(b"5\r\nworld\r\n0\r\nTrailer: x\r\n\r\n");
        let r = c.response();
        assert_eq!((r.status, r.text()), (200, "hello world"), "{mode}");
        assert_eq!(r.header("x-body-len"), Some("11"));
        // The connection is still usable.
        c.send(&get("/hello"));
        assert_eq!(c.response().text(), "hello");
    }
}

#[test]
fn streaming_response_is_chunked_and_sized_stream_uses_length() {
    for mode in modes() {
        let h = start(cfg(mode), app());
        let mut c = connect(h.local_addr());
        c.send(&get("/stream"));
        let r = c.response();
        assert!(r.chunked, "{mode}");
        assert_eq!(r.text(), "part1,part2,part3");
        c.send(&get("/sized"));
        let r = c.response();
        assert!(!r.chunked);
        assert_eq!(r.header("content-length"), Some("5"));
        assert_eq!(r.text(), "12345");
    }
}

#[test]
fn http10_gets_close_delimited_stream_and_close() {
    let h = start(ServerConfig::default(), app());
    let mut c = connect(h.local_addr());
    c.send(b"GET /stream HTTP/1.0\r\n\r\n");
    let r = c.response();
    assert!(!r.chunked);
    assert_eq!(r.text(), "part1,part2,part3");
    assert!(r.closes());

    // HTTP/1.0 with keep-alive asked for.
    let mut c = connect(h.local_addr());
    c.send(b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.response();
    assert_eq!(r.header("connection"), Some("keep-alive"));
    c.send(b"GET /hello HTTP/1.0\r\n\r\n");
    let r = c.response();
    assert!(r.closes());
    c.expect_closed();
}

#[test]
fn expect_100_continue() {
    for mode in modes() {
        let h = start(cfg(mode).max_body_bytes(100), app());
        // The server answers 100 when the handler reads the body.
        let mut c = connect(h.local_addr());
        c.send(
            b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
        );
        let interim = c.response();
        assert_eq!(interim.status, 100, "{mode}");
        c.send(b"hello");
        let r = c.response();
        assert_eq!((r.status, r.text()), (200, "hello"));
        assert!(!r.closes());

        // Over the limit: 413 at once, no 100, connection closed.
        let mut c = connect(h.local_addr());
        c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 413);
        assert!(r.closes());
        c.expect_closed();

        // A handler that does not read the body: no 100, answer, close.
        let mut c = connect(h.local_addr());
        c.send(b"POST /ignore HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
        let r = c.response();
        assert_eq!((r.status, r.text()), (200, "ignored"));
        assert!(r.closes());

        // Unknown expectation.
        let mut c = connect(h.local_addr());
        c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: teapot\r\n\r\n");
        assert_eq!(c.response().status, 417);
    }
}

#[test]
fn unread_body_is_drained_for_keep_alive() {
    let h = start(ServerConfig::default(), app());
    let mut c = connect(h.local_addr());
    c.send(b"POST /ignore HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nignore");
    let r = c.response();
    assert_eq!(r.text(), "ignored");
    assert!(!r.closes());
    c.send(&get("/hello"));
    assert_eq!(c.response().text(), "hello");
}

#[test]
fn head_has_length_but_no_body() {
    for mode in modes() {
        let h = start(cfg(mode), app());
        let mut c = connect(h.local_addr());
        c.send(b"HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response_to(true).unwrap();
        assert_eq!(r.status, 200, "{mode}");
        assert_eq!(r.header("content-length"), Some("5"));
        // If a body had been sent, it would be parsed as the next response.
        c.send(&get("/users/9"));
        let r = c.response();
        assert_eq!(r.text(), "user=9 q=None");
        assert_eq!(c.buffered(), 0);
    }
}

#[test]
fn connection_close_closes() {
    for mode in modes() {
        let h = start(cfg(mode), app());
        let mut c = connect(h.local_addr());
        c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let r = c.response();
        assert_eq!(r.text(), "hello");
        assert!(r.closes(), "{mode}");
        c.expect_closed();
    }
}

#[test]
fn router_404_405_params_and_204() {
    let h = start(ServerConfig::default(), app());
    let mut c = connect(h.local_addr());
    c.send(&get("/nope"));
    assert_eq!(c.response().status, 404);
    c.send(b"PUT /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    c.send(b"DELETE /users/3 HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 204);
    assert_eq!(r.header("content-length"), None);
    c.send(&get("/users/a%2Fb"));
    assert_eq!(c.response().text(), "user=a/b q=None");
    let s = h.stats();
    assert_eq!(s.responses_by_class[3], 2);
}

#[test]
fn handler_panic_gives_500_and_server_keeps_running() {
    for mode in modes() {
        let h = start(cfg(mode), app());
        let mut c = connect(h.local_addr());
        c.send(&get("/panic"));
        let r = c.response();
        assert_eq!(r.status, 500, "{mode}");
        assert!(r.closes());
        let mut c = connect(h.local_addr());
        c.send(&get("/hello"));
        assert_eq!(c.response().text(), "hello");
        assert_eq!(h.stats().errors.handler_panic, 1);
    }
}

#[test]
fn same_handler_runs_on_virtual_or_os_threads() {
    for (mode, want) in [
        (ThreadMode::Virtual, "virtual"),
        (ThreadMode::Platform { threads: 2 }, "os"),
    ] {
        let h = start(cfg(mode), app());
        assert_eq!(h.thread_mode(), mode);
        let mut c = connect(h.local_addr());
        c.send(&get("/virtual"));
        assert_eq!(c.response().text(), want);
    }
}

/// A handler that reports entry and waits for a release; it records the
/// highest number of requests running at once.
struct Gate {
    entered: weft::channel::Sender<()>,
    release: weft::channel::Receiver<()>,
    running: AtomicUsize,
    max: AtomicUsize,
}

fn gated() -> (
    Arc<Gate>,
    weft::channel::Receiver<()>,
    weft::channel::Sender<()>,
) {
    let (etx, erx) = weft::channel::unbounded();
    let (rtx, rrx) = weft::channel::unbounded();
    (
        Arc::new(Gate {
            entered: etx,
            release: rrx,
            running: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
        }),
        erx,
        rtx,
    )
}

fn gate_handler(g: Arc<Gate>) -> impl Fn(&mut weft_http::Request<'_>) -> Response + Send + Sync {
    move |_req| {
        let now = g.running.fetch_add(1, Ordering::SeqCst) + 1;
        g.max.fetch_max(now, Ordering::SeqCst);
        g.entered.send(()).unwrap();
        let r = g.release.recv();
        g.running.fetch_sub(1, Ordering::SeqCst);
        match r {
            Ok(()) => Response::text("released"),
            Err(_) => Response::error(500),
        }
    }
}

#[test]
fn platform_mode_runs_at_most_threads_requests_at_once() {
    let (g, entered, release) = gated();
    let h = start(
        cfg(ThreadMode::Platform { threads: 2 }),
        gate_handler(g.clone()),
    );
    let addr = h.local_addr();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = connect(addr);
                c.send(&get("/"));
                c.response().status
            })
        })
        .collect();
    // Two requests get a worker; the others queue until one is released.
    for _ in 0..2 {
        entered.recv_timeout(TEST_TIMEOUT).unwrap();
    }
    for _ in 0..2 {
        release.send(()).unwrap();
        entered.recv_timeout(TEST_TIMEOUT).unwrap();
    }
    for _ in 0..2 {
        release.send(()).unwrap();
    }
    for c in clients {
        assert_eq!(c.join().unwrap(), 200);
    }
    assert_eq!(g.max.load(Ordering::SeqCst), 2);
    assert_eq!(h.stats().requests, 4);
}

#[test]
fn virtual_mode_runs_all_requests_at_once_on_one_carrier() {
    let rt = weft::Runtime::builder().parallelism(1).build().unwrap();
    let (g, entered, release) = gated();
    let h = start(ServerConfig::default().runtime(rt), gate_handler(g.clone()));
    let addr = h.local_addr();
    let n = 20;
    let clients: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = connect(addr);
                c.send(&get("/"));
                c.response().status
            })
        })
        .collect();
    for _ in 0..n {
        entered.recv_timeout(TEST_TIMEOUT).unwrap();
    }
    let s = h.stats();
    assert_eq!(s.in_flight, n as u64);
    assert_eq!(s.open_connections, n as u64);
    for _ in 0..n {
        release.send(()).unwrap();
    }
    for c in clients {
        assert_eq!(c.join().unwrap(), 200);
    }
    assert_eq!(g.max.load(Ordering::SeqCst), n);
}

#[test]
fn header_too_large_gets_431() {
    for mode in modes() {
        let h = start(cfg(mode).max_header_bytes(1024).max_headers(8), app());
        let mut c = connect(h.local_addr());
        let big = format!(
            "GET /hello HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
            "a".repeat(2000)
        );
        c.send(big.as_bytes());
        let r = c.response();
        assert_eq!(r.status, 431, "{mode}");
        assert!(r.closes());
        c.expect_closed();

        let mut c = connect(h.local_addr());
        let mut many = String::from("GET /hello HTTP/1.1\r\n");
        for i in 0..20 {
            many.push_str(&format!("X-{i}: v\r\n"));
        }
        many.push_str("\r\n");
        c.send(many.as_bytes());
        assert_eq!(c.response().status, 431);
        assert_eq!(h.stats().errors.header_too_large, 2);
    }
}

#[test]
fn many_headers_up_to_the_limit_are_accepted() {
    // Above 64 the header slots come from the heap instead of the stack:
    // both sides of that limit, and one past max_headers.
    for mode in modes() {
        let h = start(cfg(mode).max_headers(200), app());
        for (n, want) in [(60, 200), (150, 200), (199, 200), (260, 431)] {
            let mut c = connect(h.local_addr());
            let mut req = String::from("GET /hello HTTP/1.1\r\nHost: t\r\n");
            for i in 0..n {
                req.push_str(&format!("X-{i}: v\r\n"));
            }
            req.push_str("\r\n");
            c.send(req.as_bytes());
            assert_eq!(c.response().status, want, "{mode}: {n} headers");
        }
    }
}

#[test]
fn body_too_large_gets_413() {
    for mode in modes() {
        let h = start(cfg(mode).max_body_bytes(16), app());
        let mut c = connect(h.local_addr());
        c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 17\r\n\r\n01234567890123456");
        let r = c.response();
        assert_eq!(r.status, 413, "{mode}");
        assert!(r.closes());

        // Chunked: cut off when it crosses the limit.
        let mut c = connect(h.local_addr());
        c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n1\r\nX\r\n0\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 413);
        assert!(r.closes());
        assert_eq!(h.stats().errors.body_too_large, 2);

        // Exactly at the limit is fine.
        let mut c = connect(h.local_addr());
        c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 16\r\n\r\n0123456789abcdef");
        assert_eq!(c.response().status, 200);
    }
}

#[test]
fn malformed_requests_get_400_and_close() {
    let cases: &[&[u8]] = &[
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n",
        b"GET / HTTP/9.9\r\nHost: t\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"\x00\x01\x02\x03\r\n\r\n",
        b"GET /hello HTTP/1.1\r\nHost: t\r\nX: a\x00b\r\n\r\n",
    ];
    for mode in modes() {
        let h = start(cfg(mode), app());
        for (i, case) in cases.iter().enumerate() {
            let mut c = connect(h.local_addr());
            c.send(case);
            let r = c.response();
            assert_eq!(
                r.status,
                400,
                "{mode} case {i}: {:?}",
                String::from_utf8_lossy(case)
            );
            assert!(r.closes());
            c.expect_closed();
        }
        assert_eq!(h.stats().errors.bad_request, cases.len() as u64);
        // Still serving.
        let mut c = connect(h.local_addr());
        c.send(&get("/hello"));
        assert_eq!(c.response().status, 200);
    }
}

#[test]
fn garbage_is_rejected_before_the_head_ends() {
    // No blank line ever comes: the server must not wait for the timeout.
    let h = start(
        ServerConfig::default().header_read_timeout(Duration::from_secs(60)),
        app(),
    );
    let mut c = connect(h.local_addr());
    c.send(b"G E T\r\n");
    assert_eq!(c.response().status, 400);
}

#[test]
fn slow_header_gets_408() {
    for mode in modes() {
        let h = start(
            cfg(mode).header_read_timeout(Duration::from_millis(300)),
            app(),
        );
        let mut c = connect(h.local_addr());
        c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n"); // never finished
        let r = c.response();
        assert_eq!(r.status, 408, "{mode}");
        assert!(r.closes());
        c.expect_closed();
        assert_eq!(h.stats().errors.timeout, 1);
    }
}

#[test]
fn slowloris_is_cut_off_despite_trickling() {
    let h = start(
        ServerConfig::default().header_read_timeout(Duration::from_millis(300)),
        app(),
    );
    let mut c = connect(h.local_addr());
    c.s.set_nonblocking(false).unwrap();
    let start = Instant::now();
    c.send(b"GET /hello HTTP/1.1\r\n");
    // One header byte every 20 ms: each read is quick, but the head as a
    // whole never completes. Bounded: at most 500 bytes.
    let mut cut = false;
    for _ in 0..500 {
        if (&c.s).write_all(b"X").is_err() {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        let mut peek = [0u8; 1];
        c.s.set_nonblocking(true).unwrap();
        let got = c.s.peek(&mut peek);
        c.s.set_nonblocking(false).unwrap();
        if got.is_ok() {
            cut = true;
            break;
        }
    }
    assert!(cut, "server never cut the slowloris client off");
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_secs(8), "took {elapsed:?}");
    let r = c.response_to(false);
    if let Ok(r) = r {
        assert_eq!(r.status, 408);
    }
    assert_eq!(h.stats().errors.timeout, 1);
}

#[test]
fn idle_keep_alive_connection_is_closed() {
    for mode in modes() {
        let h = start(cfg(mode).idle_timeout(Duration::from_millis(200)), app());
        let mut c = connect(h.local_addr());
        c.send(&get("/hello"));
        assert_eq!(c.response().status, 200);
        // The server closes silently after the idle timeout.
        c.expect_closed();
        assert_eq!(h.stats().errors.timeout, 0, "{mode}");
    }
}

#[test]
fn stalled_body_gets_408() {
    for mode in modes() {
        let h = start(
            cfg(mode).body_read_timeout(Duration::from_millis(200)),
            app(),
        );
        let mut c = connect(h.local_addr());
        c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n12");
        let r = c.response();
        assert_eq!(r.status, 408, "{mode}");
        assert!(r.closes());
    }
}

#[test]
fn large_bodies_round_trip() {
    let h = start(ServerConfig::default(), app());
    let body: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut c = connect(h.local_addr());
    let mut req = format!(
        "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let addr = c.s.try_clone().unwrap();
    // Write from another thread: the echo may fill both socket buffers.
    let writer = std::thread::spawn(move || {
        let mut s = addr;
        s.write_all(&req).unwrap();
    });
    let r = c.response();
    writer.join().unwrap();
    assert_eq!(r.body.len(), body.len());
    assert!(r.body == body);
}

#[test]
fn reject_policy_answers_503_over_max_connections() {
    let h = start(
        ServerConfig::default()
            .max_connections(1)
            .when_full(WhenFull::Reject),
        app(),
    );
    let mut first = connect(h.local_addr());
    first.send(&get("/hello"));
    assert_eq!(first.response().status, 200);
    let mut second = connect(h.local_addr());
    second.send(&get("/hello"));
    let r = second.response();
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(r.closes());
    assert_eq!(h.stats().errors.rejected, 1);
    // The first connection still works.
    first.send(&get("/hello"));
    assert_eq!(first.response().status, 200);
}

#[test]
fn wait_policy_holds_new_connections_in_the_backlog() {
    let h = start(
        ServerConfig::default()
            .max_connections(1)
            .when_full(WhenFull::Wait),
        app(),
    );
    let mut first = connect(h.local_addr());
    first.send(&get("/hello"));
    assert_eq!(first.response().status, 200);
    let mut second = connect(h.local_addr());
    second.send(&get("/hello"));
    // The acceptor waits for a free slot; the second connection is not
    // accepted while the first is open.
    assert_eq!(h.stats().accepted_connections, 1);
    drop(first);
    let r = second.response();
    assert_eq!(r.status, 200);
    assert_eq!(h.stats().accepted_connections, 2);
}

#[test]
fn graceful_shutdown_drains_in_flight_and_closes_idle() {
    for mode in modes() {
        let (g, entered, release) = gated();
        let router = Router::new()
            .get("/gate", gate_handler(g))
            .get("/hello", |_req| Response::text("hello"));
        let h = Arc::new(start(cfg(mode), router));
        let addr = h.local_addr();
        // An idle keep-alive connection.
        let mut idle = connect(addr);
        idle.send(&get("/hello"));
        assert_eq!(idle.response().status, 200);
        // An in-flight request.
        let mut busy = connect(addr);
        busy.send(&get("/gate"));
        entered.recv_timeout(TEST_TIMEOUT).unwrap();
        assert_eq!(h.stats().in_flight, 1);

        let h2 = h.clone();
        let shutdown = std::thread::spawn(move || h2.shutdown(TEST_TIMEOUT));
        // The idle connection is closed promptly, before the busy one ends.
        idle.expect_closed();
        release.send(()).unwrap();
        let r = busy.response();
        assert_eq!((r.status, r.text()), (200, "released"), "{mode}");
        assert!(r.closes());
        let report = shutdown.join().unwrap();
        assert!(report.drained, "{mode}: {report:?}");
        assert_eq!(report.forced, 0);
        assert_eq!(h.stats().open_connections, 0);
        // The listener is closed.
        assert!(std::net::TcpStream::connect(addr).is_err());
    }
}

#[test]
fn shutdown_deadline_interrupts_stuck_handlers() {
    for mode in modes() {
        let (etx, erx) = weft::channel::unbounded::<()>();
        let router = Router::new().get("/stuck", move |_req| {
            etx.send(()).unwrap();
            // Sleeps far longer than the test; the shutdown interrupts it.
            match weft::sleep(Duration::from_secs(600)) {
                Ok(()) => Response::text("slept"),
                Err(e) => Response::text(format!("{:?}", e.kind())).with_status(503),
            }
        });
        let h = start(cfg(mode), router);
        let mut c = connect(h.local_addr());
        c.send(&get("/stuck"));
        erx.recv_timeout(TEST_TIMEOUT).unwrap();
        let report = h.shutdown(Duration::from_millis(100));
        assert!(!report.drained, "{mode}");
        assert_eq!(report.forced, 1);
        assert_eq!(report.remaining, 0);
        // The client sees the interrupted handler's answer or a closed
        // connection, never a hang.
        match c.response_to(false) {
            Ok(r) => assert_eq!(r.status, 503, "{mode}"),
            Err(e) => assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}"),
        }
    }
}
