//! `/metrics` and the live page read one table: every metric the page
//! shows is in the exposition (the page once showed
//! `weft_blocked_with_waiters_total`, which `/metrics` lacked); the
//! server's own counters reach `/metrics`; carriers of two runtimes are
//! told apart by a `runtime` label, not summed.

use std::time::Duration;

use weft_http::debug::DebugConfig;
use weft_http::{Client, Router, Server, ServerConfig};

/// The value of the exposition line that starts with `key ` (the series'
/// name with its labels).
fn value(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn every_page_metric_is_in_the_exposition() {
    let server = weft_http::debug::serve("127.0.0.1:0", DebugConfig::default()).unwrap();
    let base = format!("http://{}", server.local_addr());
    let c = Client::new();
    let live: serde_json::Value = c
        .get(&format!("{base}/debug/weft/live.json"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let text = c
        .get(&format!("{base}/debug/weft/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    let rows = live["metrics"].as_array().unwrap();
    assert!(rows.len() > 20, "{live}");
    for row in rows {
        let key = row[0].as_str().unwrap();
        assert!(
            value(&text, key).is_some(),
            "the page shows {key}, /metrics lacks it:\n{text}"
        );
    }
    // The series the page once had alone.
    assert!(value(&text, "weft_blocked_with_waiters_total").is_some());
    // No help text speaks of tasks: runtimes run virtual threads.
    for help in text.lines().filter(|l| l.starts_with("# HELP weft_")) {
        assert!(!help.contains("Task"), "{help}");
    }
    server.shutdown(Duration::from_secs(5));
}

#[test]
fn server_stats_reach_the_exposition() {
    let router = Router::new()
        .get("/", |_req| "app")
        .nest("/debug/weft", weft_http::debug::router());
    let server = Server::bind("127.0.0.1:0", ServerConfig::default())
        .unwrap()
        .serve(router)
        .unwrap();
    let addr = server.local_addr();
    let base = format!("http://{addr}");
    let c = Client::new();
    for _ in 0..3 {
        assert_eq!(c.get(&format!("{base}/")).send().unwrap().status(), 200);
    }
    assert_eq!(c.get(&format!("{base}/nope")).send().unwrap().status(), 404);
    let text = c
        .get(&format!("{base}/debug/weft/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    let label = format!("server=\"{addr}\"");
    let get = |name: &str, more: &str| {
        value(&text, &format!("{name}{{{label}{more}}}"))
            .unwrap_or_else(|| panic!("no {name} for {label}:\n{text}"))
    };
    // The metrics request itself is in flight, not yet answered.
    assert!(get("weft_http_requests_total", "") >= 4.0, "{text}");
    assert!(get("weft_http_responses_total", ",class=\"2xx\"") >= 3.0);
    assert!(get("weft_http_responses_total", ",class=\"4xx\"") >= 1.0);
    assert!(get("weft_http_requests_in_flight", "") >= 1.0);
    assert!(get("weft_http_connections_open", "") >= 1.0);
    assert!(get("weft_http_connections_accepted_total", "") >= 1.0);
    assert_eq!(
        get("weft_http_errors_total", ",kind=\"handler_panic\""),
        0.0
    );
    assert!(text.contains("# TYPE weft_http_requests_total counter"));
    server.shutdown(Duration::from_secs(5));
}

#[test]
fn carriers_of_two_runtimes_are_labelled() {
    let a = weft::Runtime::builder()
        .name("metrics-table-a")
        .parallelism(3)
        .build()
        .unwrap();
    let b = weft::Runtime::builder()
        .name("metrics-table-b")
        .parallelism(1)
        .build()
        .unwrap();
    let text = weft::metrics::prometheus();
    assert_eq!(
        value(&text, "weft_carriers{runtime=\"metrics-table-a\"}"),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        value(&text, "weft_carriers{runtime=\"metrics-table-b\"}"),
        Some(1.0),
        "{text}"
    );
    assert!(
        value(
            &text,
            "weft_run_queue_local{runtime=\"metrics-table-a\",carrier=\"2\"}"
        )
        .is_some(),
        "{text}"
    );
    drop((a, b));
}
