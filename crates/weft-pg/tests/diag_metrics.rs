//! A pool's metrics are in the runtime's Prometheus exposition, with the
//! values of the moment (issue #30, part 3).

mod common;

/// The value of `series{pool="<pool>"}` in a Prometheus text.
fn value(text: &str, series: &str, pool: &str) -> Option<f64> {
    let prefix = format!("{series}{{pool=\"{pool}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.parse().unwrap())
}

#[test]
fn a_held_connection_shows_in_the_exposition() {
    let pg = require_pg!();
    let pool = weft_pg::Pool::new(pg.config("diag-metrics").max_size(3)).unwrap();
    let conn = weft::spawn({
        let pool = pool.clone();
        move || pool.get().unwrap()
    })
    .join()
    .unwrap();
    let text = weft::metrics::prometheus();
    assert_eq!(
        value(&text, "hikaricp_connections_active", "diag-metrics"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(&text, "hikaricp_connections_max", "diag-metrics"),
        Some(3.0),
        "{text}"
    );
    assert!(
        value(
            &text,
            "hikaricp_connections_acquire_seconds_count",
            "diag-metrics"
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(
        value(&text, "weft_pg_connections_created_total", "diag-metrics").is_some_and(|n| n >= 1.0),
        "{text}"
    );
    // The runtime's own series are beside the pool's.
    assert!(text.contains("weft_virtual_threads_live"), "{text}");
    drop(conn);
    let text = weft::metrics::prometheus();
    assert_eq!(
        value(&text, "hikaricp_connections_active", "diag-metrics"),
        Some(0.0),
        "{text}"
    );
    assert!(
        value(
            &text,
            "hikaricp_connections_usage_seconds_count",
            "diag-metrics"
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
}
