//! The weft-pg pool's metrics are served by the Prometheus route beside
//! the runtime's (issue #30, part 3).

use std::sync::Arc;
use std::time::Duration;

use weft_http::{Client, Router, Server, ServerConfig};

/// A pool (with no server behind it: `fail_fast` off, so it starts and
/// keeps trying) shows up in `/debug/weft/metrics` under its name, with
/// values, next to `weft_*` series; once closed, it is gone.
#[test]
fn the_pools_metrics_are_in_the_prometheus_route() {
    let pool = weft_pg::Pool::new(
        weft_pg::Config::from_url("postgres://app@127.0.0.1:1/app")
            .unwrap()
            .pool_name("diag-orders")
            .max_size(7)
            .min_idle(2)
            .connection_timeout(Duration::from_millis(250))
            .fail_fast(false)
            // A checkout waits out its timeout (counted below) instead of
            // failing at once because the server is down.
            .fail_fast_when_down(false),
    )
    .unwrap();
    let router = Router::new().nest("/debug/weft", weft_http::debug::router());
    let server = Server::bind("127.0.0.1:0", ServerConfig::default())
        .unwrap()
        .serve(Arc::new(router))
        .unwrap();
    let url = format!("http://{}/debug/weft/metrics", server.local_addr());
    let scrape = || Client::new().get(&url).send().unwrap().text().unwrap();
    let text = scrape();
    assert!(text.contains("weft_virtual_threads_live"), "{text}");
    let value = |text: &str, series: &str| -> Option<f64> {
        let prefix = format!("{series}{{pool=\"diag-orders\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map(|v| v.parse().unwrap())
    };
    assert_eq!(
        value(&text, "hikaricp_connections_max"),
        Some(7.0),
        "{text}"
    );
    assert_eq!(
        value(&text, "hikaricp_connections_min"),
        Some(2.0),
        "{text}"
    );
    for series in [
        "hikaricp_connections",
        "hikaricp_connections_active",
        "hikaricp_connections_idle",
        "hikaricp_connections_pending",
        "hikaricp_connections_timeout_total",
        "hikaricp_connections_acquire_seconds_count",
        "hikaricp_connections_usage_seconds_sum",
        "weft_pg_connect_errors_total",
    ] {
        assert!(value(&text, series).is_some(), "{series} missing:\n{text}");
    }
    assert!(
        text.contains("# TYPE hikaricp_connections_acquire_seconds summary"),
        "{text}"
    );
    // A checkout that times out is counted where a scrape sees it.
    assert!(pool.get().is_err());
    let text = scrape();
    assert_eq!(
        value(&text, "hikaricp_connections_timeout_total"),
        Some(1.0),
        "{text}"
    );
    pool.close();
    let text = scrape();
    assert!(!text.contains("pool=\"diag-orders\""), "{text}");
}
