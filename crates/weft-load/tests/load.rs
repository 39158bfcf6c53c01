//! The load generator's counts checked against a server that counts what it
//! served, both models, error classes, and the CLI.

use std::time::Duration;

use weft_http::{Response, Router, Server, ServerConfig, ServerHandle};
use weft_load::{Config, run};

fn server(router: Router) -> ServerHandle {
    Server::bind("127.0.0.1:0", ServerConfig::default())
        .unwrap()
        .serve(router)
        .unwrap()
}

fn app() -> Router {
    Router::new()
        .get("/hello", |_req| Response::text("hello"))
        .post("/echo", |req| {
            Response::bytes(req.read_body().unwrap_or_default())
        })
        .get("/fail", |_req| Response::error(500))
        .get("/missing", |_req| Response::error(404))
        .get("/sleep", |_req| {
            weft::sleep(Duration::from_millis(50)).unwrap();
            Response::text("slept")
        })
}

fn cfg(url: String) -> Config {
    Config {
        url,
        ..Config::default()
    }
}

#[test]
fn closed_model_request_count_matches_the_server() {
    let h = server(app());
    let r = run(&Config {
        concurrency: 8,
        requests: Some(1000),
        ..cfg(format!("http://{}/hello", h.local_addr()))
    })
    .unwrap();
    assert_eq!(r.requests, 1000);
    assert_eq!(r.successes, 1000);
    assert_eq!(r.failures, 0);
    assert_eq!(r.status_counts.get(&200), Some(&1000));
    assert_eq!(r.body_bytes, 5000);
    assert_eq!(h.stats().requests, 1000);
    // Keep-alive: one connection per user.
    assert_eq!(h.stats().accepted_connections, 8);
    assert_eq!(r.histogram.len(), 1000);
    assert!(r.latency.min_ms <= r.latency.p50_ms && r.latency.p50_ms <= r.latency.max_ms);
    assert!(r.throughput > 0.0);
    assert_eq!(r.model, "closed");
    assert_eq!(r.name, "GET /hello");
}

#[test]
fn duration_run_counts_answers_inside_the_window() {
    let h = server(app());
    let r = run(&Config {
        concurrency: 4,
        duration: Some(Duration::from_millis(300)),
        ..cfg(format!("http://{}/hello", h.local_addr()))
    })
    .unwrap();
    assert!(r.requests > 0);
    // Every counted request was answered; at most one in-flight request
    // per user ended after the window and is not counted.
    let served = h.stats().requests;
    assert!(
        r.requests <= served && served - r.requests <= 4,
        "{} counted, {served} served",
        r.requests
    );
    assert!((0.2..5.0).contains(&r.duration_secs), "{}", r.duration_secs);
}

#[test]
fn no_keepalive_opens_a_connection_per_request() {
    let h = server(app());
    let r = run(&Config {
        concurrency: 2,
        requests: Some(50),
        keep_alive: false,
        method: "POST".into(),
        body: b"abc".to_vec(),
        ..cfg(format!("http://{}/echo", h.local_addr()))
    })
    .unwrap();
    assert_eq!(r.successes, 50);
    assert_eq!(r.body_bytes, 150);
    assert_eq!(h.stats().accepted_connections, 50);
}

#[test]
fn late_answers_do_not_inflate_the_rate() {
    // 10 users, each request takes at least 50 ms: no run can exceed
    // 10 / 0.05 = 200 req/s. Counting the answers that arrive after a
    // 120 ms window (the old accounting) reported ~250 req/s.
    let h = server(app());
    let r = run(&Config {
        concurrency: 10,
        duration: Some(Duration::from_millis(120)),
        ..cfg(format!("http://{}/sleep", h.local_addr()))
    })
    .unwrap();
    assert!(r.throughput <= 200.0 * 1.01, "{} req/s", r.throughput);
    assert!(r.latency.min_ms >= 50.0);
}

#[test]
fn warmup_requests_are_not_counted() {
    let h = server(app());
    let r = run(&Config {
        concurrency: 2,
        requests: Some(100),
        warmup: Duration::from_millis(100),
        ..cfg(format!("http://{}/hello", h.local_addr()))
    })
    .unwrap();
    assert_eq!(r.requests, 100);
    assert!(h.stats().requests > 100, "warmup sent nothing?");
}

#[test]
fn status_failures_are_counted_by_code() {
    let h = server(app());
    let r = run(&Config {
        concurrency: 3,
        requests: Some(30),
        ..cfg(format!("http://{}/fail", h.local_addr()))
    })
    .unwrap();
    assert_eq!(r.failures, 30);
    assert_eq!(r.errors.status.get(&500), Some(&30));
    assert_eq!(r.errors.total(), 30);
    assert!(r.table().contains("status 500: 30"), "{}", r.table());
}

#[test]
fn connect_errors_are_counted() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = run(&Config {
        concurrency: 1,
        requests: Some(5),
        ..cfg(format!("http://127.0.0.1:{port}/"))
    })
    .unwrap();
    assert_eq!(r.errors.connect, 5);
    assert_eq!(r.failures, 5);
    assert_eq!(r.successes, 0);
}

#[test]
fn timeouts_are_counted() {
    let (tx, rx) = weft::channel::unbounded::<()>();
    let h = server(Router::new().get("/stuck", move |_req| {
        let _ = rx.recv_timeout(Duration::from_secs(20));
        Response::text("late")
    }));
    let r = run(&Config {
        concurrency: 1,
        requests: Some(3),
        timeout: Duration::from_millis(100),
        ..cfg(format!("http://{}/stuck", h.local_addr()))
    })
    .unwrap();
    assert_eq!(r.errors.timeout, 3);
    for _ in 0..3 {
        tx.send(()).unwrap();
    }
}

#[test]
fn open_model_counts_and_rate() {
    let h = server(app());
    let r = run(&Config {
        concurrency: 4,
        rate: Some(500.0),
        duration: Some(Duration::from_millis(400)),
        ..cfg(format!("http://{}/hello", h.local_addr()))
    })
    .unwrap();
    assert_eq!(r.model, "open");
    assert_eq!(r.requests, h.stats().requests);
    // 500/s for 0.4 s schedules 200 requests; all are sent.
    assert_eq!(r.requests, 200);
    assert!(r.table().contains("target 500.0 req/s"));
}

#[test]
fn open_model_charges_queueing_to_latency() {
    // One user, a 50 ms handler, 50 requests/s scheduled: the 20th request
    // is due at 380 ms but cannot finish before 20 × 50 ms = 1 s, so its
    // latency from the intended start is at least 600 ms. A closed-model
    // run of the same requests never sees more than one handler's time.
    let h = server(app());
    let url = format!("http://{}/sleep", h.local_addr());
    let open = run(&Config {
        concurrency: 1,
        rate: Some(50.0),
        requests: Some(20),
        ..cfg(url.clone())
    })
    .unwrap();
    assert_eq!(open.successes, 20);
    assert!(open.latency.max_ms >= 600.0, "{:?}", open.latency);
    let closed = run(&Config {
        concurrency: 1,
        requests: Some(5),
        ..cfg(url)
    })
    .unwrap();
    assert!(closed.latency.min_ms >= 50.0);
    assert!(closed.latency.max_ms < open.latency.max_ms);
}

#[test]
fn runs_on_a_given_runtime() {
    let h = server(app());
    let rt = weft::Runtime::builder().parallelism(1).build().unwrap();
    let r = run(&Config {
        concurrency: 100,
        requests: Some(500),
        runtime: Some(rt),
        ..cfg(format!("http://{}/hello", h.local_addr()))
    })
    .unwrap();
    assert_eq!(r.successes, 500);
    // Keep-alive: at most one connection per user. A user connects at its
    // first request, so on a loaded machine the users the one carrier
    // starts after the 500 requests are claimed never connect (CI saw 63):
    // not every user need have connected.
    let accepted = h.stats().accepted_connections;
    assert!((1..=100).contains(&accepted), "{accepted} connections");
}

#[test]
fn json_report_round_trips() {
    let h = server(app());
    let r = run(&Config {
        concurrency: 2,
        requests: Some(10),
        ..cfg(format!("http://{}/missing", h.local_addr()))
    })
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["requests"], 10);
    assert_eq!(v["errors"]["status"]["404"], 10);
    assert!(v["latency"]["p99_ms"].as_f64().is_some());
}

#[test]
fn cli_prints_table_and_json() {
    let h = server(app());
    let url = format!("http://{}/hello", h.local_addr());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weft-load"))
        .args(["-c", "2", "-n", "40", "-H", "X-Test: 1", &url])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for col in [
        "Name",
        "# reqs",
        "# fails",
        "Avg",
        "Min",
        "Max",
        "Median",
        "p90",
        "p99",
        "p99.9",
        "req/s",
        "failures/s",
    ] {
        assert!(text.contains(col), "missing column {col}: {text}");
    }
    assert!(text.contains("GET /hello"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weft-load"))
        .args(["-c", "2", "-n", "40", "--json", &url])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["requests"], 40);
    assert_eq!(h.stats().requests, 80);
    // Bad arguments fail with a message.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weft-load"))
        .args(["-d", "soon", &url])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
