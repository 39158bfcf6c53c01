//! E7 — pinning. Each request goes through a "driver" of 10 connections;
//! a connection is guarded by a lock held across a 20 ms blocking call
//! (`weft::sleep(20 ms)`, standing in for a socket read), like a JDBC
//! driver's `synchronized` block around its socket.
//!
//! Three configurations, 50 users:
//! - platform, 50 OS threads, driver on `std::sync::Mutex`;
//! - virtual, driver on `std::sync::Mutex`: a virtual thread that waits
//!   for the lock blocks its *carrier*, while the holder is parked in its
//!   sleep. When holder and waiter share a carrier, that is the pinning
//!   deadlock the articles and Netflix's "Dude, where's my lock?"
//!   describe. Since the handoff (issue #39) Weft breaks it: once the
//!   waiter has held the carrier past the stall threshold (20 ms), the
//!   holder, woken, resumes on another carrier and releases the lock — so
//!   the row measures what each collision costs instead of timing out.
//!   It still runs on a private runtime with short request timeouts, so
//!   it ends whatever happens, and reports the runtime's stall and
//!   blocked-with-waiters events (a holder that stays on its carrier
//!   would still deadlock, and be reported);
//! - virtual, driver on `weft::sync::Mutex`: waiting parks the virtual
//!   thread only;
//! - virtual, driver on `std::sync::Mutex` *and* `std::thread::sleep`, in
//!   a service built with weft's `transparent` feature
//!   (`tests-transparent/examples/pinning.rs`, a separate process like
//!   E8's): each virtual thread has its own std parker, so a wait for the
//!   lock parks the virtual thread, not its carrier — what JDK 24 (JEP
//!   491) did for `synchronized`: the unchanged driver runs level with the
//!   platform row instead of pinning.
//!
//! Little's law: 10 locks / 20 ms = 500 req/s. Article: 587 TPS, 56 ms
//! (platform) vs 502 TPS, 67 ms (virtual, pinned). Each row notes the
//! pinned/stall events `weft::events::counters()` recorded meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use weft::sync::Unpoison;

use weft_bench_support::child::Launcher;
use weft_http::{Response, Router, ThreadMode};

use super::common::{Options, Serve, build_service, measure_http, start_service, window_load};
use crate::progress::Progress;
use crate::report::{Mode, Row};

/// Concurrent users.
pub const USERS: usize = 50;
/// Platform pool size.
pub const THREADS: usize = 50;
/// Driver connections (locks).
pub const CONNECTIONS: usize = 10;
/// Blocking time under the lock.
pub const HOLD: Duration = Duration::from_millis(20);

/// Which lock the driver uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    /// `std::sync::Mutex`: blocks the OS thread (pins a virtual thread's carrier).
    Std,
    /// `weft::sync::Mutex`: parks a virtual thread.
    Weft,
}

/// The driver: `CONNECTIONS` locks, used round-robin.
pub fn router(lock: Lock) -> Router {
    let next = Arc::new(AtomicUsize::new(0));
    let std_locks: Arc<Vec<std::sync::Mutex<u64>>> =
        Arc::new((0..CONNECTIONS).map(|_| std::sync::Mutex::new(0)).collect());
    let weft_locks: Arc<Vec<weft::sync::Mutex<u64>>> = Arc::new(
        (0..CONNECTIONS)
            .map(|_| weft::sync::Mutex::new(0))
            .collect(),
    );
    Router::new().get("/driver", move |_req| {
        let i = next.fetch_add(1, Ordering::Relaxed) % CONNECTIONS;
        let ok = match lock {
            Lock::Std => {
                let mut conn = std_locks[i].lock().unpoison();
                *conn += 1;
                weft::sleep(HOLD).is_ok()
            }
            Lock::Weft => match weft_locks[i].lock() {
                Ok(mut conn) => {
                    *conn += 1;
                    weft::sleep(HOLD).is_ok()
                }
                Err(_) => false,
            },
        };
        if ok {
            Response::text("read")
        } else {
            Response::error(500)
        }
    })
}

/// Runs E7.
pub fn run(options: &Options, progress: &Progress) -> Vec<Row> {
    let configs = [
        (
            Mode::Platform,
            Lock::Std,
            format!("platform {THREADS}, std::sync::Mutex driver"),
            "platform std",
            "587 TPS, 56 ms",
        ),
        (
            Mode::Virtual,
            Lock::Std,
            "virtual, std::sync::Mutex driver (pinned)".to_string(),
            "virtual std (pinned)",
            "502 TPS, 67 ms",
        ),
        (
            Mode::Virtual,
            Lock::Weft,
            "virtual, weft::sync::Mutex driver".to_string(),
            "virtual weft",
            "-",
        ),
    ];
    let window = options.window().min(if options.quick {
        Duration::from_secs(3)
    } else {
        Duration::from_secs(8)
    });
    let mut rows = Vec::new();
    for (mode, lock, label, short, article) in configs {
        progress.start(&label);
        let row = Row::new("E7", mode, label)
            .short(short)
            .ideal(
                CONNECTIONS as f64 / HOLD.as_secs_f64(),
                HOLD.as_secs_f64() * 1e3,
            )
            .article(article);
        let deadlock_prone = mode == Mode::Virtual && lock == Lock::Std;
        // The std-lock row can deadlock carriers for good: keep that away
        // from the default runtime the other rows and the load use, and
        // bound the spares the monitor may add for it.
        let runtime = if deadlock_prone {
            match weft::Runtime::builder()
                .max_pool_size(16)
                .name("e7-std")
                .build()
            {
                Ok(rt) => Some(rt),
                Err(e) => {
                    rows.push(row.failed(format!("cannot start a runtime: {e}")));
                    progress.step();
                    continue;
                }
            }
        } else {
            None
        };
        let serve = Serve {
            mode: match mode {
                Mode::Platform => ThreadMode::Platform { threads: THREADS },
                Mode::Virtual => ThreadMode::Virtual,
            },
            runtime,
            router: router(lock),
        };
        let mut load = window_load(options, "/driver", USERS);
        load.window = Some(window);
        if deadlock_prone {
            load.timeout = Duration::from_secs(2);
        }
        let before = weft::events::counters();
        let row = measure_http(serve, load, Duration::from_secs(2), row);
        let after = weft::events::counters();
        let mut row = row.note(format!(
            "runtime events: {} pinned ({:.0} ms), {} stalls ({:.0} ms), {} blocked-with-waiters",
            after.pinned - before.pinned,
            (after.pinned_us - before.pinned_us) as f64 / 1e3,
            after.stalls - before.stalls,
            (after.stall_us - before.stall_us) as f64 / 1e3,
            after.blocked_with_waiters - before.blocked_with_waiters,
        ));
        if deadlock_prone && after.blocked_with_waiters > before.blocked_with_waiters {
            row = row.note(
                "pinning deadlock: a thread blocked its carrier on a std::sync::Mutex held by a \
                 parked thread that stays on that carrier; requests timed out (2 s) instead of \
                 hanging"
                    .to_string(),
            );
        } else if deadlock_prone && after.stalls > before.stalls {
            row = row.note(
                "each time a waiter blocked its carrier on a std::sync::Mutex held by a parked \
                 thread of that carrier, the holder was handed off to another carrier after the \
                 stall threshold and released the lock"
                    .to_string(),
            );
        }
        rows.push(row);
        progress.step();
    }
    rows.push(transparent_row(options, window, progress));
    rows
}

/// The std-lock driver, unchanged, in a service built with `transparent`
/// (its own process: the feature hooks every binary of a build).
fn transparent_row(options: &Options, window: Duration, progress: &Progress) -> Row {
    let label = "virtual, std::sync::Mutex driver, feature transparent (std waits park)";
    let row = Row::new("E7", Mode::Virtual, label.to_string())
        .short("virtual std (transparent)")
        .ideal(
            CONNECTIONS as f64 / HOLD.as_secs_f64(),
            HOLD.as_secs_f64() * 1e3,
        )
        .article("JDK 24 (JEP 491): synchronized no longer pins");
    let row = match build_service("pinning", progress) {
        Ok(program) => {
            progress.start(label);
            measure_service(program, options, window, row)
        }
        Err(e) => row.failed(format!("cannot build the service: {e}")),
    };
    progress.step();
    row
}

fn measure_service(
    program: std::path::PathBuf,
    options: &Options,
    window: Duration,
    row: Row,
) -> Row {
    let launcher = Launcher {
        program,
        prefix: Vec::new(),
    };
    let args = [
        "--connections".to_string(),
        CONNECTIONS.to_string(),
        "--hold-ms".to_string(),
        HOLD.as_millis().to_string(),
    ];
    let (service, port) = match start_service(&launcher, args) {
        Ok(s) => s,
        Err(e) => return row.failed(e),
    };
    let mut load = window_load(options, "/driver", USERS);
    load.url = format!("http://127.0.0.1:{port}/driver");
    load.window = Some(window);
    let result = crate::load::closed(&load, Duration::from_secs(2), || {});
    service.terminate();
    let exit = service.finish();
    match (result, exit) {
        (Ok(r), Ok(_)) => row
            .users(USERS as u64)
            .measured(r.latencies_us, r.errors, r.measured),
        (Err(e), _) => row.failed(e),
        (Ok(_), Err(e)) => row.failed(format!("the service ended badly: {e}")),
    }
}
