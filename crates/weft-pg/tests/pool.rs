//! The pool against a real server: HikariCP's semantics, fairness,
//! timeouts, interrupts, broken and expired connections, OS threads, and
//! no carrier-blocking events under load.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use weft::sync::{CountDownLatch, Mutex};
use weft_pg::{Error, Pool, SqlState};

use common::wait_until;

const LIMIT: Duration = Duration::from_secs(10);

fn backend_pid(c: &mut weft_pg::Connection) -> i32 {
    c.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0)
}

fn terminate(pg: &common::Server, pid: i32) {
    let mut admin = pg.connect();
    let ok: bool = admin
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap()
        .get(0);
    assert!(ok, "pg_terminate_backend({pid})");
    wait_until(LIMIT, "the backend to exit", || {
        let n: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .unwrap()
            .get(0);
        n == 0
    });
}

#[test]
fn exhaustion_times_out_with_the_counts() {
    let pg = require_pg!();
    let pool = Pool::new(
        pg.config("weft-pg-exhaust")
            .max_size(2)
            .connection_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let release = Arc::new(CountDownLatch::new(1));
    let held = Arc::new(CountDownLatch::new(2));
    let holders: Vec<_> = (0..2)
        .map(|_| {
            let (pool, release, held) = (pool.clone(), release.clone(), held.clone());
            weft::spawn(move || {
                let _c = pool.get().unwrap();
                held.count_down();
                release.wait().unwrap();
            })
        })
        .collect();
    held.wait().unwrap();
    let p = pool.clone();
    let start = Instant::now();
    let err = weft::spawn(move || p.get().unwrap_err()).join().unwrap();
    let waited = start.elapsed();
    let Error::Timeout(t) = &err else {
        panic!("expected a timeout, got {err:?}")
    };
    assert_eq!(
        (t.total, t.active, t.idle, t.waiting),
        (2, 2, 0, 1),
        "{err}"
    );
    assert!(
        waited >= Duration::from_millis(300),
        "gave up early: {waited:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("request timed out after")
            && msg.contains("total=2, active=2, idle=0, waiting=1"),
        "{msg}"
    );
    assert_eq!(pool.metrics().timeouts, 1);
    assert_eq!(pool.metrics().pending, 0);
    release.count_down();
    for h in holders {
        h.join().unwrap();
    }
    let m = pool.metrics();
    assert_eq!((m.total, m.active, m.idle), (2, 0, 2));
}

#[test]
fn waiters_are_served_in_fifo_order() {
    let pg = require_pg!();
    let pool = Pool::new(pg.config("weft-pg-fifo").max_size(1)).unwrap();
    let holder = pool.get().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..6 {
        let (p, order) = (pool.clone(), order.clone());
        waiters.push(weft::spawn(move || {
            let mut c = p.get().unwrap();
            order.lock().unwrap().push(i);
            c.query_one("SELECT 1", &[]).unwrap();
        }));
        // Queue them one at a time so the arrival order is known.
        wait_until(LIMIT, "the waiter to queue", || {
            pool.metrics().pending == i + 1
        });
    }
    drop(holder);
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    let m = pool.metrics();
    assert_eq!((m.total, m.active, m.pending), (1, 0, 0));
    assert_eq!(m.acquire.count, 7);
}

#[test]
fn interrupt_ends_a_waiting_virtual_thread() {
    let pg = require_pg!();
    let pool = Pool::new(pg.config("weft-pg-intr").max_size(1)).unwrap();
    let holder = pool.get().unwrap();
    let p = pool.clone();
    let waiter = weft::Builder::new()
        .name("waiter")
        .spawn(move || {
            let start = Instant::now();
            let r = p.get();
            (
                r.map(drop),
                start.elapsed(),
                weft::current().is_interrupted(),
            )
        })
        .unwrap();
    wait_until(LIMIT, "the waiter to queue", || pool.metrics().pending == 1);
    waiter.thread().interrupt();
    let (r, took, flag) = waiter.join().unwrap();
    assert!(matches!(r, Err(Error::Interrupted)), "{r:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(!flag, "the interrupt flag is cleared");
    assert_eq!(pool.metrics().pending, 0);
    // Nothing was lost: the connection goes idle and is reusable.
    drop(holder);
    assert_eq!(pool.metrics().idle, 1);
    let mut c = pool.get_timeout(Duration::from_secs(1)).unwrap();
    c.query_one("SELECT 1", &[]).unwrap();
}

#[test]
fn a_broken_connection_is_discarded_not_returned() {
    let pg = require_pg!();
    let app = "weft-pg-broken";
    let pool = Pool::new(pg.config(app).max_size(2)).unwrap();
    let p = pool.clone();
    let err = weft::spawn(move || {
        let mut c = p.get().unwrap();
        let pid = backend_pid(&mut c);
        terminate(common::server().unwrap(), pid);
        let err = c.query_one("SELECT 1", &[]).unwrap_err();
        assert!(c.is_broken());
        err
    })
    .join()
    .unwrap();
    assert!(err.is_connection_error(), "{err:?}");
    assert_eq!(err.code(), Some(&SqlState::ADMIN_SHUTDOWN), "{err}");
    let m = pool.metrics();
    assert_eq!((m.total, m.active, m.idle), (0, 0, 0), "{m:?}");
    assert_eq!(m.closed, 1);
    // The next checkout opens a fresh connection.
    let mut c = pool.get().unwrap();
    c.query_one("SELECT 1", &[]).unwrap();
    drop(c);
    wait_until(LIMIT, "server sessions == pool total", || {
        pg.sessions(app) == pool.metrics().total as i64
    });
}

#[test]
fn an_idle_connection_is_validated_and_replaced() {
    let pg = require_pg!();
    let pool = Pool::new(
        pg.config("weft-pg-validate")
            .max_size(1)
            .alive_bypass_window(Duration::ZERO),
    )
    .unwrap();
    let p = pool.clone();
    weft::spawn(move || {
        let pid = backend_pid(&mut p.get().unwrap());
        assert_eq!(p.metrics().idle, 1);
        terminate(common::server().unwrap(), pid);
        // Validation finds the dead connection and opens another: the
        // caller never sees an error.
        let mut c = p.get().unwrap();
        assert_ne!(backend_pid(&mut c), pid);
    })
    .join()
    .unwrap();
    let m = pool.metrics();
    assert_eq!(m.validation_failures, 1);
    assert_eq!(
        (m.total, m.idle, m.created, m.closed),
        (1, 1, 2, 1),
        "{m:?}"
    );
}

#[test]
fn housekeeping_fills_min_idle_and_retires_idle_connections() {
    let pg = require_pg!();
    let app = "weft-pg-idle";
    let pool = Pool::new(
        pg.config(app)
            .max_size(4)
            .min_idle(2)
            .idle_timeout(Some(Duration::from_millis(200)))
            .housekeeping_period(Duration::from_millis(50)),
    )
    .unwrap();
    wait_until(LIMIT, "min_idle to be filled", || pool.metrics().idle == 2);
    // Use all four at once, then return them.
    let conns: Vec<_> = (0..4).map(|_| pool.get().unwrap()).collect();
    assert_eq!(pool.metrics().active, 4);
    drop(conns);
    assert_eq!(pool.metrics().idle, 4);
    // The two above min_idle go after idle_timeout; min_idle stay.
    wait_until(LIMIT, "idle connections to be retired and closed", || {
        let m = pool.metrics();
        m.total == 2 && m.idle == 2 && m.closed == 2
    });
    wait_until(LIMIT, "server sessions == 2", || pg.sessions(app) == 2);
}

#[test]
fn max_lifetime_retires_idle_and_returned_connections() {
    let pg = require_pg!();
    let lifetime = Duration::from_millis(400);
    let pool = Pool::new(
        pg.config("weft-pg-lifetime")
            .max_size(2)
            .max_lifetime(Some(lifetime))
            .housekeeping_period(Duration::from_millis(50)),
    )
    .unwrap();
    // The idle one from fail-fast start-up expires in the background.
    wait_until(LIMIT, "the idle connection to expire", || {
        pool.metrics().total == 0
    });
    assert_eq!(pool.metrics().closed, 1);
    // One held past its lifetime is closed when returned, not pooled.
    let mut c = pool.get().unwrap();
    c.query_one("SELECT 1", &[]).unwrap();
    weft::sleep(lifetime + Duration::from_millis(50)).unwrap();
    drop(c);
    let m = pool.metrics();
    assert_eq!((m.total, m.idle, m.closed), (0, 0, 2), "{m:?}");
}

#[test]
fn os_threads_and_virtual_threads_share_a_pool() {
    let pg = require_pg!();
    let pool = Pool::new(pg.config("weft-pg-mixed").max_size(3)).unwrap();
    let mut os = Vec::new();
    for t in 0..4i32 {
        let p = pool.clone();
        os.push(std::thread::spawn(move || {
            for i in 0..20i32 {
                let mut c = p.get().unwrap();
                let v: i32 = c
                    .query_one("SELECT $1::int4 + $2::int4", &[&t, &i])
                    .unwrap()
                    .get(0);
                assert_eq!(v, t + i);
            }
        }));
    }
    let virt: Vec<_> = (0..16i32)
        .map(|t| {
            let p = pool.clone();
            weft::spawn(move || {
                for i in 0..20i32 {
                    let mut c = p.get().unwrap();
                    let v: i32 = c
                        .query_one("SELECT $1::int4 * $2::int4", &[&t, &i])
                        .unwrap()
                        .get(0);
                    assert_eq!(v, t * i);
                }
            })
        })
        .collect();
    for h in os {
        h.join().unwrap();
    }
    for h in virt {
        h.join().unwrap();
    }
    let m = pool.metrics();
    assert!(m.total <= 3);
    assert_eq!((m.active, m.pending), (0, 0));
    assert_eq!(m.acquire.count, 20 * 20);
    assert_eq!(m.usage.count, 20 * 20);
}

#[test]
fn no_stall_or_pinned_events_under_load() {
    let pg = require_pg!();
    let app = "weft-pg-load";
    let pool = Pool::new(pg.config(app).max_size(10).min_idle(10)).unwrap();
    wait_until(LIMIT, "the pool to fill", || pool.metrics().idle == 10);
    let before = weft::events::counters();
    let since = std::time::SystemTime::now();
    let handles: Vec<_> = (0..200)
        .map(|_| {
            let p = pool.clone();
            weft::spawn(move || {
                for _ in 0..4 {
                    let mut c = p.get().unwrap();
                    c.query("SELECT pg_sleep(0.01)", &[]).unwrap();
                }
            })
        })
        .collect();
    let ids: std::collections::HashSet<u64> = handles
        .iter()
        .map(|h| h.thread().id().as_u64().get())
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let after = weft::events::counters();
    // Pinned events: none anywhere in the process (weft-pg never pins).
    assert_eq!(
        after.pinned,
        before.pinned,
        "pinned events: {:?}",
        weft::events::recent()
    );
    // Carrier-blocking events of this load's threads or its pool: none.
    // (The counters are process-wide and the other tests of this binary
    // run concurrently, so look at the events themselves. The bench checks
    // the global counters on a quiet process.) A thread blocked in the
    // kernel while holding its carrier is `StallBlocked`: never allowed. A
    // `StallCpu` means the carrier was running or *runnable* for 20 ms: on
    // an overloaded machine the OS can preempt a carrier that long, so
    // those are printed, not failed on.
    let housekeeper = format!("{app}-housekeeper");
    let ours: Vec<_> = weft::events::recent()
        .into_iter()
        .filter(|e| e.at >= since)
        .filter(|e| {
            ids.contains(&e.thread_id) || e.thread_name.as_deref() == Some(housekeeper.as_str())
        })
        .collect();
    let blocked: Vec<_> = ours
        .iter()
        .filter(|e| e.kind != weft::events::EventKind::StallCpu)
        .collect();
    assert!(
        blocked.is_empty(),
        "carrier-blocking events under load: {blocked:#?}"
    );
    for e in &ours {
        eprintln!("note (machine load?): {e}");
    }
    let m = pool.metrics();
    assert_eq!((m.total, m.active, m.pending, m.timeouts), (10, 0, 0, 0));
    assert_eq!(m.usage.count, 800);
}

#[test]
fn close_fails_waiters_and_later_gets() {
    let pg = require_pg!();
    let app = "weft-pg-close";
    let pool = Pool::new(pg.config(app).max_size(1)).unwrap();
    let holder = pool.get().unwrap();
    let p = pool.clone();
    let waiter = weft::spawn(move || p.get().map(drop));
    wait_until(LIMIT, "the waiter to queue", || pool.metrics().pending == 1);
    pool.close();
    assert!(matches!(waiter.join().unwrap(), Err(Error::PoolClosed)));
    assert!(matches!(pool.get(), Err(Error::PoolClosed)));
    // The connection in use is closed when it comes back.
    drop(holder);
    assert_eq!(pool.metrics().total, 0);
    wait_until(LIMIT, "no server sessions left", || pg.sessions(app) == 0);
}

#[test]
fn dropping_the_last_handle_closes_everything() {
    let pg = require_pg!();
    let app = "weft-pg-drop";
    let pool = Pool::new(pg.config(app).max_size(3).min_idle(3)).unwrap();
    wait_until(LIMIT, "the pool to fill", || pool.metrics().idle == 3);
    assert_eq!(pg.sessions(app), 3);
    drop(pool);
    wait_until(LIMIT, "no server sessions left", || pg.sessions(app) == 0);
}

#[test]
fn wrong_password_fails_fast() {
    let pg = require_pg!();
    let mut cfg = pg.config("weft-pg-badpw");
    cfg.pg_mut().password("wrong");
    let start = Instant::now();
    let err = Pool::new(cfg).unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::INVALID_PASSWORD), "{err}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn unreachable_server_times_out_with_the_last_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pool = Pool::new(
        weft_pg::Config::from_url(&format!("postgres://u:p@127.0.0.1:{port}/d"))
            .unwrap()
            .fail_fast(false)
            .min_idle(0)
            .connection_timeout(Duration::from_millis(300))
            .fail_fast_when_down(false), // else ServerDown at once (tests/outage.rs)
    )
    .unwrap();
    let start = Instant::now();
    let err = pool.get().unwrap_err();
    let Error::Timeout(t) = &err else {
        panic!("{err:?}")
    };
    assert!(
        t.last_connect_error
            .as_deref()
            .is_some_and(|e| e.contains("refused")),
        "{err}"
    );
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert!(start.elapsed() < Duration::from_secs(5));
    let m = pool.metrics();
    assert_eq!((m.total, m.creating), (0, 0));
    assert!(m.connect_errors >= 1);
}

#[test]
fn discard_closes_instead_of_returning() {
    let pg = require_pg!();
    let pool = Pool::new(pg.config("weft-pg-discard").max_size(2)).unwrap();
    let c = pool.get().unwrap();
    c.discard();
    let m = pool.metrics();
    assert_eq!((m.total, m.idle, m.closed), (0, 0, 1));
}
