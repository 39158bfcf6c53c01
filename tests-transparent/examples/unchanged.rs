//! The service of the lab's experiment E8 ("one switch, unchanged
//! third-party code"): the E6 shape — each `GET /order` makes two HTTP
//! calls to a downstream service and writes one row to a database — built
//! only from blocking crates that know nothing of Weft: **`ureq`** for the
//! HTTP calls and **`redis`** (its synchronous API) for the write, both
//! over `std::net`. The binary enables `weft`'s `transparent` feature; the
//! one switch between the two runs is weft-http's thread mode.
//!
//! ```text
//! unchanged --mode platform:200|virtual --downstream http://127.0.0.1:P/delay?ms=100 [--redis redis://127.0.0.1:R/]
//! ```
//!
//! Prints `ready <port>` once it serves, then serves until killed (the
//! lab drives it with its own load generator). Without `--redis` the
//! handler makes the two calls only. Answers 502 when a call fails and 500
//! when the write fails, with the error on stderr (first 10 only).

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use weft::sync::Unpoison;
use weft_http::{Response, Server, ServerConfig, ThreadMode};

/// Redis connections, reused: a request takes one (or opens one when none
/// is idle) and puts it back after its write. The lock is held only to pop
/// and push, never across I/O.
struct RedisPool {
    client: redis::Client,
    idle: std::sync::Mutex<Vec<redis::Connection>>,
}

impl RedisPool {
    fn write(&self, n: u64) -> redis::RedisResult<()> {
        let conn = self.idle.lock().unpoison().pop();
        let mut conn = match conn {
            Some(c) => c,
            None => self.client.get_connection()?,
        };
        redis::cmd("RPUSH")
            .arg("weft_lab_e8")
            .arg(n)
            .query::<i64>(&mut conn)?;
        self.idle.lock().unpoison().push(conn);
        Ok(())
    }
}

struct Args {
    mode: ThreadMode,
    downstream: String,
    redis: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut mode = None;
    let mut downstream = None;
    let mut redis = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--mode" => {
                let v = value()?;
                mode = Some(match v.split_once(':') {
                    Some(("platform", n)) => ThreadMode::Platform {
                        threads: n
                            .parse()
                            .map_err(|_| format!("bad thread count in {v:?}"))?,
                    },
                    None if v == "virtual" => ThreadMode::Virtual,
                    _ => return Err(format!("--mode {v:?}: expected platform:N or virtual")),
                });
            }
            "--downstream" => downstream = Some(value()?),
            "--redis" => redis = Some(value()?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Args {
        mode: mode.ok_or("--mode is required")?,
        downstream: downstream.ok_or("--downstream is required")?,
        redis,
    })
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("unchanged: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = serve(args) {
        eprintln!("unchanged: {e}");
        std::process::exit(1);
    }
}

fn serve(args: Args) -> Result<(), String> {
    weft_transparent_tests::raise_fd_limit(20_000);
    if !weft::transparent::is_enabled() {
        return Err("the hooks are off (WEFT_TRANSPARENT=0?)".into());
    }
    // The pool keeps one connection per concurrent call (up to 500 users),
    // or calls reconnect (ports in TIME_WAIT); ureq scans it linearly, a
    // cost both modes pay alike.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .max_idle_connections(1024)
        .max_idle_connections_per_host(1024)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let redis = match &args.redis {
        Some(url) => {
            let client = redis::Client::open(url.as_str()).map_err(|e| format!("redis: {e}"))?;
            // Fail now, not on the first request, if the server is not there.
            let conn = client
                .get_connection()
                .map_err(|e| format!("redis {url}: {e}"))?;
            Some(Arc::new(RedisPool {
                client,
                idle: std::sync::Mutex::new(vec![conn]),
            }))
        }
        None => None,
    };
    let counter = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let report = move |what: &str, e: &dyn std::fmt::Display| {
        if errors.fetch_add(1, Ordering::Relaxed) < 10 {
            eprintln!("unchanged: {what}: {e}");
        }
    };
    let url = args.downstream;
    let handler = move |_req: &mut weft_http::Request<'_>| {
        for _ in 0..2 {
            let r = agent
                .get(&url)
                .call()
                .and_then(|mut r| r.body_mut().read_to_string());
            if let Err(e) = r {
                report("downstream call", &e);
                return Response::error(502);
            }
        }
        let n = counter.fetch_add(1, Ordering::Relaxed);
        if let Some(pool) = &redis
            && let Err(e) = pool.write(n)
        {
            report("redis write", &e);
            return Response::error(500);
        }
        Response::text("saved")
    };
    let config = ServerConfig::default()
        .thread_mode(args.mode)
        .accept_queue(4096)
        .backlog(4096)
        .idle_timeout(Duration::from_secs(120))
        .header_read_timeout(Duration::from_secs(120));
    let server = Server::bind("127.0.0.1:0", config)
        .and_then(|s| s.serve(handler))
        .map_err(|e| format!("cannot start the server: {e}"))?;
    println!("ready {}", server.local_addr().port());
    let _ = std::io::stdout().flush();
    // Serve until killed.
    loop {
        std::thread::park();
    }
}
