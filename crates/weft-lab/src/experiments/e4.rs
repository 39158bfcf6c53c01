//! E4 — a 1 s blocking endpoint under a closed load of 800 users: a
//! platform pool of 100 OS threads saturates at 100 req/s, virtual threads
//! reach 800 req/s (Little's law). Article (JMeter): ~100 vs ~800 req/s.
//!
//! The endpoint blocks in `weft::sleep`, which on a pool thread blocks the
//! OS thread and on a virtual thread parks it — Java's `Thread.sleep`.

use std::time::Duration;

use weft_http::ThreadMode;

use super::common::{Options, Serve, measure_http, sleep_router, window_load};
use crate::progress::Progress;
use crate::report::{Mode, Row};

/// Concurrent users.
pub const USERS: usize = 800;
/// Platform pool size.
pub const THREADS: usize = 100;

/// Runs E4.
pub fn run(options: &Options, progress: &Progress) -> Vec<Row> {
    let mut rows = Vec::new();
    for mode in [Mode::Platform, Mode::Virtual] {
        let (label, short, thread_mode, ideal, article) = match mode {
            Mode::Platform => (
                format!("platform, {THREADS} OS threads"),
                format!("platform {THREADS}"),
                ThreadMode::Platform { threads: THREADS },
                THREADS as f64,
                "~100 req/s",
            ),
            Mode::Virtual => (
                "virtual".to_string(),
                "virtual".to_string(),
                ThreadMode::Virtual,
                USERS as f64,
                "~800 req/s",
            ),
        };
        progress.start(&label);
        let row = Row::new("E4", mode, label)
            .short(short)
            .ideal(ideal, 1000.0)
            .article(article);
        let serve = Serve {
            mode: thread_mode,
            runtime: None,
            router: sleep_router(),
        };
        rows.push(measure_http(
            serve,
            window_load(options, "/sleep", USERS),
            Duration::from_millis(1500),
            row,
        ));
        progress.step();
    }
    rows
}
