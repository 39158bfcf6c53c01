//! E2 — one worker: a weft-http server with `ThreadMode::Platform
//! { threads: 1 }` vs `ThreadMode::Virtual` on a weft runtime with
//! parallelism 1; 100 concurrent users (closed model); the handler sleeps
//! 1 s with `weft::sleep`.
//!
//! Article: platform 0.99 req/s, avg 11,986 ms; virtual 89.19 req/s, avg
//! 1,005 ms. Little's law: platform 1 req/s, virtual 100 req/s.
//!
//! In a closed model the platform server's queue never empties: latency
//! grows through the window (every user waits behind 99 others), so its
//! average depends on the window's length, as the article's did.

use std::time::Duration;

use weft_http::ThreadMode;

use super::common::{Options, Serve, measure_http, sleep_router, window_load};
use crate::progress::Progress;
use crate::report::{Mode, Row};

/// Concurrent users.
pub const USERS: usize = 100;
/// Handler sleep.
pub const SLEEP: Duration = Duration::from_secs(1);

/// Runs E2.
pub fn run(options: &Options, progress: &Progress) -> Vec<Row> {
    let mut rows = Vec::new();
    progress.start("platform, 1 worker thread");
    let row = Row::new("E2", Mode::Platform, "platform, 1 OS worker thread")
        .short("platform 1")
        .ideal(1.0, 1000.0)
        .article("0.99 req/s, avg 11,986 ms");
    let serve = Serve {
        mode: ThreadMode::Platform { threads: 1 },
        runtime: None,
        router: sleep_router(),
    };
    rows.push(measure_http(serve, load(options), grace(), row));
    progress.step();

    progress.start("virtual, 1 carrier");
    let row = Row::new("E2", Mode::Virtual, "virtual, runtime parallelism 1")
        .short("virtual 1 carrier")
        .ideal(USERS as f64, 1000.0)
        .article("89.19 req/s, avg 1,005 ms");
    match weft::Runtime::builder()
        .parallelism(1)
        .name("e2-one-carrier")
        .build()
    {
        Ok(rt) => {
            let serve = Serve {
                mode: ThreadMode::Virtual,
                runtime: Some(rt),
                router: sleep_router(),
            };
            rows.push(measure_http(serve, load(options), grace(), row));
        }
        Err(e) => rows.push(row.failed(format!("cannot build a one-carrier runtime: {e}"))),
    }
    progress.step();
    rows
}

fn load(options: &Options) -> crate::load::LoadSpec {
    window_load(options, "/sleep", USERS)
}

fn grace() -> Duration {
    SLEEP + Duration::from_millis(500)
}
