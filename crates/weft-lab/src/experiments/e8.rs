//! E8 — one switch, unchanged third-party code: E6's shape (each request
//! makes two downstream HTTP calls of 100 ms, then writes a row to a
//! database; 500 clients, 200 platform threads vs virtual), but the service
//! is built only from blocking crates that know nothing of Weft — `ureq`
//! for the HTTP calls and the `redis` crate's synchronous API for the write
//! (an `RPUSH`), both over `std::net` — and runs with `weft`'s
//! `transparent` feature, so their blocking calls park the virtual thread.
//! The articles' claim: switching an existing service to virtual threads is
//! one setting; here that setting is weft-http's thread mode, and nothing
//! else changes.
//!
//! The service is `tests-transparent/examples/unchanged.rs`, a separate
//! process: the feature interposes libc calls in every binary of a build,
//! so the lab builds it (`cargo build --release`, own target directory)
//! before the first run. The downstream service and the load run in the
//! lab, as in E6. Redis comes from `WEFT_REDIS_URL` or a throwaway
//! `redis-server` the lab starts (see [`redis_server`](weft_bench_support::redis_server));
//! without one the handlers make the two calls only, said in the output.
//!
//! Ideal (Little's law, 200 ms per request): platform 200 / 0.2 s =
//! 1,000 req/s, virtual 500 / 0.2 s = 2,500 req/s.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weft_bench_support::child::Launcher;
use weft_http::{Server, ServerConfig};

use super::common::order::{CALL, THREADS, USERS};
use super::common::{Options, build_service, downstream, start_service, window_load};
use crate::load;
use crate::progress::Progress;
use crate::report::{Mode, Row};

/// The crates the service runs unchanged (the versions its lock file
/// resolves are in `tests-transparent/Cargo.lock`).
pub const UNCHANGED: &str = "ureq 3 (2 HTTP calls) and redis 1 (RPUSH), over std::net";

/// The peak of `Threads:` in `/proc/<pid>/status` while `running` holds.
fn sample_threads(pid: u32, running: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let pid = pid.to_string();
        let mut peak = 0;
        while running.load(Ordering::Relaxed) {
            peak = peak.max(weft_bench_support::child::os_threads(&pid).unwrap_or(0));
            std::thread::sleep(Duration::from_millis(20));
        }
        peak
    })
}

/// Runs E8; `Err` (the experiment is skipped) when the service cannot be
/// built.
pub fn run(options: &Options, progress: &Progress) -> Result<Vec<Row>, String> {
    let program = build_service("unchanged", progress)?;
    let launcher = Launcher {
        program,
        prefix: Vec::new(),
    };
    let per_user: u64 = if options.big {
        1000
    } else if options.quick {
        4
    } else {
        20
    };
    let down = Server::bind("127.0.0.1:0", ServerConfig::default())
        .and_then(|s| s.serve(downstream()))
        .map_err(|e| format!("downstream: {e}"))?;
    let downstream_url = format!("http://{}/delay?ms={}", down.local_addr(), CALL.as_millis());
    let (redis, store_note) = match weft_bench_support::redis_server::url() {
        Ok(url) => (
            Some(url),
            format!("unchanged: {UNCHANGED}; weft feature `transparent` on"),
        ),
        Err(e) => (
            None,
            format!(
                "unchanged: ureq 3 (2 HTTP calls) over std::net; no Redis ({e}), so no write. {}",
                weft_bench_support::redis_server::HOW_TO
            ),
        ),
    };
    let mut rows = Vec::new();
    for mode in [Mode::Platform, Mode::Virtual] {
        let (label, arg, ideal) = match mode {
            Mode::Platform => (
                format!("platform, {THREADS} OS threads"),
                format!("platform:{THREADS}"),
                THREADS as f64 / 0.2,
            ),
            Mode::Virtual => (
                "virtual".to_string(),
                "virtual".to_string(),
                USERS as f64 / 0.2,
            ),
        };
        progress.start(&label);
        let row = Row::new("E8", mode, label.clone())
            .short(label)
            .ideal(ideal, 2.0 * CALL.as_secs_f64() * 1e3)
            .note(store_note.clone());
        rows.push(measure(
            &launcher,
            &arg,
            &downstream_url,
            redis.as_deref(),
            per_user,
            options,
            row,
        ));
        progress.step();
    }
    down.shutdown(Duration::from_secs(2));
    Ok(rows)
}

/// Starts the service in `mode`, loads it with E6's 500 users × `per_user`
/// requests and fills `row` in, with the service's peak OS thread count.
fn measure(
    launcher: &Launcher,
    mode: &str,
    downstream_url: &str,
    redis: Option<&str>,
    per_user: u64,
    options: &Options,
    row: Row,
) -> Row {
    let mut args = vec!["--mode", mode, "--downstream", downstream_url];
    if let Some(url) = redis {
        args.extend(["--redis", url]);
    }
    let (service, port) = match start_service(launcher, args) {
        Ok(s) => s,
        Err(e) => return row.failed(e),
    };
    let running = Arc::new(AtomicBool::new(true));
    let sampler = sample_threads(service.id(), running.clone());
    let mut spec = window_load(options, "/order", USERS);
    spec.url = format!("http://127.0.0.1:{port}/order");
    spec.warmup = Duration::ZERO;
    spec.window = None;
    spec.per_user = per_user;
    spec.timeout = Duration::from_secs(60);
    // No window: every user sends its requests, nothing is cut off.
    let result = load::closed(&spec, Duration::ZERO, || {});
    running.store(false, Ordering::Relaxed);
    let peak = sampler.join().unwrap_or(0);
    service.terminate();
    let exit = service.finish();
    let row = row
        .users(USERS as u64)
        .note(format!("the service process peaked at {peak} OS threads"));
    match (result, exit) {
        (Ok(r), Ok(_)) => row.measured(r.latencies_us, r.errors, r.measured),
        (Err(e), _) => row.failed(e),
        (Ok(_), Err(e)) => row.failed(format!("the service ended badly: {e}")),
    }
}
