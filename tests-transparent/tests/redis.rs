//! The `redis` crate's blocking client, unmodified, on virtual threads.
//!
//! The server: `WEFT_REDIS_URL`, or a throwaway `redis-server` each test
//! starts and stops. Without either a test says so and passes — except
//! under `CI=true`, where it fails (`.ci/run` installs Redis).

use std::sync::Arc;
use std::time::Duration;

use weft_bench_support::redis_server::{HOW_TO, RedisServer};
use weft_transparent_tests::{raise_fd_limit, strict_runtime, watchdog};

const LIMIT: Duration = Duration::from_secs(120);

/// Held by each test for its whole run. Under CI the tests share one
/// server (`WEFT_REDIS_URL`), and `blocked_clients` counts every blocked
/// connection on it: run side by side, one test's blocked `BLPOP` made the
/// other's baseline one too high, so the 2,000-thread test waited for a
/// 2,001st blocked client that never came (CI's watchdog dump: all 2,000
/// parked in `BLPOP 0`, the `LPUSH` never sent), and the other test could
/// push before its own popper blocked.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn server(test: &str) -> Option<RedisServer> {
    match RedisServer::start() {
        Ok(server) => Some(server),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: no Redis under CI=true: {e}; {HOW_TO}")
        }
        Err(e) => {
            eprintln!("{test}: skipped, no Redis: {e}; {HOW_TO}");
            None
        }
    }
}

/// `blocked_clients` in `INFO clients`: connections parked in a blocking
/// command, as the server counts them.
fn blocked_clients(con: &mut redis::Connection) -> usize {
    let info: String = redis::cmd("INFO").arg("clients").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("blocked_clients in INFO clients")
}

/// Polls (from an OS thread or a virtual one) until at least `n`
/// connections are blocked; the caller's watchdog bounds the wait.
fn await_blocked(con: &mut redis::Connection, n: usize) {
    while blocked_clients(con) < n {
        weft::sleep(Duration::from_millis(5)).unwrap();
    }
}

/// 2,000 virtual threads on two carriers, each with its own connection,
/// are all inside `BLPOP` at once — the server counts 2,000 blocked
/// clients — then one `LPUSH` of 2,000 values releases every one, and a
/// second round of `BLPOP … 0.2` on an empty list times out for all.
#[test]
fn two_thousand_blpops_park_at_once_on_two_carriers() {
    let _serial = one_at_a_time();
    let _dog = watchdog("two_thousand_blpops_park_at_once_on_two_carriers", LIMIT);
    let Some(redis) = server("two_thousand_blpops") else {
        return;
    };
    const N: usize = 2000;
    let limit = raise_fd_limit(2 * N as u64 + 512);
    assert!(limit >= N as u64 + 256, "RLIMIT_NOFILE {limit} too low");
    let client = redis::Client::open(redis.url()).unwrap();
    let key = format!("weft-test:blpop:{}", std::process::id());
    let mut control = client.get_connection().unwrap();
    let _: () = redis::cmd("DEL").arg(&key).query(&mut control).unwrap();
    let before = blocked_clients(&mut control);

    let rt = strict_runtime(2);
    let threads: Vec<_> = (0..N)
        .map(|_| {
            let (client, key) = (client.clone(), key.clone());
            rt.spawn(move || {
                let mut con = client.get_connection().unwrap();
                let got: Option<(String, String)> = redis::cmd("BLPOP")
                    .arg(&key)
                    .arg(0)
                    .query(&mut con)
                    .unwrap();
                let timed: Option<(String, String)> = redis::cmd("BLPOP")
                    .arg(&key)
                    .arg(0.2)
                    .query(&mut con)
                    .unwrap();
                (got.map(|(_, v)| v), timed)
            })
        })
        .collect();
    // From this OS thread: all N are blocked in the server at once.
    await_blocked(&mut control, before + N);
    let values: Vec<String> = (0..N).map(|i| i.to_string()).collect();
    let released = std::time::Instant::now();
    let _: usize = redis::cmd("LPUSH")
        .arg(&key)
        .arg(&values)
        .query(&mut control)
        .unwrap();
    let mut seen: Vec<usize> = threads
        .into_iter()
        .map(|t| {
            let (got, timed) = t.join().unwrap();
            assert_eq!(timed, None, "the second BLPOP found a value");
            got.expect("BLPOP 0 returned nil").parse().unwrap()
        })
        .collect();
    // Printed, not asserted (ideal: the 0.2 s timeout, once).
    println!(
        "{N} BLPOPs released, then {N} BLPOP 0.2 timed out, in {:?}; {} OS threads in the process",
        released.elapsed(),
        weft_transparent_tests::os_threads()
    );
    seen.sort_unstable();
    assert_eq!(seen, (0..N).collect::<Vec<_>>(), "each value once");
    assert_eq!(rt.active_carriers(), 2);
}

/// One carrier: a thread blocked in `BLPOP` and the thread whose `LPUSH`
/// wakes it share it. Had `BLPOP`'s read held the carrier, the pusher
/// would never run.
#[test]
fn lpush_wakes_blpop_on_the_same_carrier() {
    let _serial = one_at_a_time();
    let _dog = watchdog("lpush_wakes_blpop_on_the_same_carrier", LIMIT);
    let Some(redis) = server("lpush_wakes_blpop") else {
        return;
    };
    let client = Arc::new(redis::Client::open(redis.url()).unwrap());
    let key = format!("weft-test:wake:{}", std::process::id());
    let rt = strict_runtime(1);
    let (c, k) = (client.clone(), key.clone());
    let popper = rt.spawn(move || {
        let mut con = c.get_connection().unwrap();
        let got: Option<(String, String)> =
            redis::cmd("BLPOP").arg(&k).arg(0).query(&mut con).unwrap();
        got
    });
    let pusher = rt.spawn(move || {
        let mut con = client.get_connection().unwrap();
        await_blocked(&mut con, 1);
        let _: usize = redis::cmd("LPUSH")
            .arg(&key)
            .arg("woken")
            .query(&mut con)
            .unwrap();
    });
    pusher.join().unwrap();
    assert_eq!(
        popper.join().unwrap(),
        Some((
            format!("weft-test:wake:{}", std::process::id()),
            "woken".into()
        ))
    );
}
