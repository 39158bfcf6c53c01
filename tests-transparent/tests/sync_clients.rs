//! Sync clients with a Tokio runtime inside, unmodified, on virtual
//! threads of a two-carrier runtime with no spares: the sync `postgres`
//! client (a current-thread runtime per client: "Cannot start a runtime
//! from within a runtime" when virtual threads shared their carrier's
//! thread-locals), `r2d2_postgres` (its pool's condition variable, its
//! `is_valid` inside `block_on`), and `reqwest::blocking` (each call waits
//! for its runtime thread in `thread::park_timeout`, which held the
//! carrier). Each test proves the calls were in flight at once with a
//! barrier that fills only then; the watchdog turns a hang into a failure.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Barrier as OsBarrier};
use std::time::Duration;

use weft_transparent_tests::{strict_runtime, watchdog};

const LIMIT: Duration = Duration::from_secs(120);

fn isolated() -> bool {
    std::env::var_os("WEFT_THREAD_LOCALS").is_none()
}

/// CI exports `WEFT_PG_URL` (`.ci/run` starts PostgreSQL); without it the
/// PostgreSQL tests skip with a line, except under `CI=true`.
fn pg_url() -> Option<String> {
    match std::env::var("WEFT_PG_URL") {
        Ok(u) => Some(u),
        Err(_) => {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "CI=true but WEFT_PG_URL is not set"
            );
            eprintln!("sync_clients: WEFT_PG_URL not set; skipping the PostgreSQL tests");
            None
        }
    }
}

#[test]
fn sync_postgres_clients_on_many_virtual_threads_of_two_carriers() {
    let Some(url) = pg_url() else { return };
    if !isolated() {
        return;
    }
    let _dog = watchdog("sync postgres", LIMIT);
    let rt = strict_runtime(2);
    const N: usize = 40;
    let connected = Arc::new(weft::sync::Barrier::new(N));
    let hs: Vec<_> = (0..N)
        .map(|i| {
            let (url, connected) = (url.clone(), connected.clone());
            rt.spawn(move || {
                let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                // Every client is connected (its runtime entered and left)
                // before any queries: 20 per carrier at once.
                connected.wait();
                let row = c
                    .query_one("SELECT pg_sleep(0.2)::text, $1::int", &[&(i as i32)])
                    .unwrap();
                row.get::<_, i32>(1)
            })
        })
        .collect();
    for (i, h) in hs.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), i as i32);
    }
}

#[test]
fn r2d2_postgres_pool_on_virtual_threads() {
    let Some(url) = pg_url() else { return };
    if !isolated() {
        return;
    }
    let _dog = watchdog("r2d2 postgres", LIMIT);
    let rt = strict_runtime(2);
    let manager =
        r2d2_postgres::PostgresConnectionManager::new(url.parse().unwrap(), postgres::NoTls);
    let pool = r2d2::Pool::builder()
        .max_size(10)
        .test_on_check_out(true)
        .build(manager)
        .unwrap();
    const N: usize = 40;
    let all_in = Arc::new(weft::sync::Barrier::new(N));
    let hs: Vec<_> = (0..N)
        .map(|i| {
            let (pool, all_in) = (pool.clone(), all_in.clone());
            rt.spawn(move || {
                all_in.wait();
                // 40 threads, 10 connections: 30 wait in the pool's
                // condition variable, parked.
                let mut c = pool.get().unwrap();
                let row = c
                    .query_one("SELECT pg_sleep(0.05)::text, $1::int", &[&(i as i32)])
                    .unwrap();
                row.get::<_, i32>(1)
            })
        })
        .collect();
    for (i, h) in hs.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), i as i32);
    }
}

/// A server that answers no request until `n` are in flight at once.
fn rendezvous_server(n: usize) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let all = Arc::new(OsBarrier::new(n));
    std::thread::spawn(move || {
        for s in l.incoming() {
            let mut s = s.unwrap();
            let all = all.clone();
            std::thread::spawn(move || {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.ends_with(b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(k) => req.extend_from_slice(&buf[..k]),
                    }
                }
                all.wait();
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            });
        }
    });
    addr
}

#[test]
fn reqwest_blocking_calls_in_flight_at_once() {
    if !isolated() {
        return;
    }
    let _dog = watchdog("reqwest blocking", LIMIT);
    const N: usize = 100;
    let addr = rendezvous_server(N);
    let rt = strict_runtime(2);
    // One client, shared: one runtime thread behind it.
    let client = reqwest::blocking::Client::new();
    let hs: Vec<_> = (0..N)
        .map(|_| {
            let client = client.clone();
            rt.spawn(move || {
                client
                    .get(format!("http://{addr}/"))
                    .send()
                    .unwrap()
                    .text()
                    .unwrap()
            })
        })
        .collect();
    for h in hs {
        assert_eq!(h.join().unwrap(), "ok");
    }
}
