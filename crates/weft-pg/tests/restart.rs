//! The server restarts in the middle of load: in-flight calls get errors,
//! the pool recovers, no connection leaks (client or server side), no
//! panic. (Own test binary: the restart would disturb other tests.)

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use weft_pg::Pool;

#[test]
fn restart_under_load_errors_in_flight_calls_and_the_pool_recovers() {
    let pg = require_pg!();
    if pg.dir.is_none() {
        let msg = "restart test: WEFT_PG_DIR unknown, cannot restart this server";
        assert!(
            std::env::var("CI").is_ok_and(|v| v != "true") || std::env::var("CI").is_err(),
            "CI: {msg}"
        );
        eprintln!("===== {msg}; SKIPPED =====");
        return;
    }
    let app = "weft-pg-restart";
    let sockets_before = weft::metrics::snapshot().sockets_registered;
    let pool = Pool::new(
        pg.config(app)
            .max_size(8)
            .min_idle(8)
            .connection_timeout(Duration::from_secs(30))
            .housekeeping_period(Duration::from_millis(200)),
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..32)
        .map(|_| {
            let (pool, stop, ok, failed) = (pool.clone(), stop.clone(), ok.clone(), failed.clone());
            weft::spawn(move || {
                let mut errors = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let r = pool
                        .get()
                        .and_then(|mut c| c.query("SELECT pg_sleep(0.02)", &[]));
                    match r {
                        Ok(_) => {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            errors.push(e);
                        }
                    }
                }
                errors
            })
        })
        .collect();
    common::wait_until(Duration::from_secs(10), "load to run", || {
        ok.load(Ordering::Relaxed) > 100
    });
    assert!(pg.restart());
    let at_restart = ok.load(Ordering::Relaxed);
    common::wait_until(Duration::from_secs(30), "the pool to recover", || {
        ok.load(Ordering::Relaxed) > at_restart + 200
    });
    stop.store(true, Ordering::Relaxed);
    let mut errors = Vec::new();
    for w in workers {
        errors.extend(w.join().expect("a worker panicked"));
    }
    assert!(
        !errors.is_empty(),
        "the restart should have failed some in-flight calls"
    );
    for e in &errors {
        assert!(e.is_connection_error(), "unexpected error kind: {e:?}");
    }
    eprintln!(
        "restart: {} ok, {} failed; first error: {}",
        ok.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        errors[0]
    );
    let m = pool.metrics();
    assert_eq!((m.active, m.pending, m.creating), (0, 0, 0), "{m:?}");
    assert!(m.total <= 8);
    common::wait_until(
        Duration::from_secs(10),
        "server sessions == pool total",
        || pg.sessions(app) == pool.metrics().total as i64,
    );
    drop(pool);
    common::wait_until(Duration::from_secs(10), "all sessions closed", || {
        pg.sessions(app) == 0
    });
    common::wait_until(Duration::from_secs(10), "client sockets released", || {
        weft::metrics::snapshot().sockets_registered <= sockets_before
    });
}
