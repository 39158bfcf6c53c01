//! E3 — 296 users against a handler that sleeps 1 s and one that answers
//! at once; a platform pool of 200 OS threads (Tomcat's default) vs
//! virtual threads.
//!
//! Article: sleep — platform 199.7 TPS, 1,478 ms; virtual 290.5 TPS,
//! 1,025 ms. Instant — platform 14,307 TPS; virtual 13,584 TPS. Little's
//! law for the sleep: platform 200 req/s, virtual 296 req/s. The instant
//! handler is CPU-bound (client and server share this machine), so its
//! "ideal" is left out.

use std::time::Duration;

use weft_http::{Response, Router, ThreadMode};

use super::common::{Options, Serve, measure_http, sleep_router, window_load};
use crate::progress::Progress;
use crate::report::{Mode, Row};

/// Concurrent users.
pub const USERS: usize = 296;
/// Platform pool size.
pub const THREADS: usize = 200;

/// `/sleep` sleeps 1 s, `/now` answers at once.
pub fn router() -> Router {
    sleep_router().get("/now", |_req| Response::text("now"))
}

/// Runs E3.
pub fn run(options: &Options, progress: &Progress) -> Vec<Row> {
    let mut rows = Vec::new();
    let instant_window = if options.quick {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(5)
    };
    for (path, what) in [("/sleep", "sleep 1 s"), ("/now", "instant")] {
        for mode in [Mode::Platform, Mode::Virtual] {
            let (label, thread_mode) = match mode {
                Mode::Platform => (
                    format!("platform {THREADS}, {what}"),
                    ThreadMode::Platform { threads: THREADS },
                ),
                Mode::Virtual => (format!("virtual, {what}"), ThreadMode::Virtual),
            };
            progress.start(&label);
            let mut row = Row::new("E3", mode, label.clone()).short(match mode {
                Mode::Platform => format!("plat {THREADS} {what}"),
                Mode::Virtual => format!("virt {what}"),
            });
            let mut load = window_load(options, path, USERS);
            if path == "/sleep" {
                let ideal = match mode {
                    Mode::Platform => THREADS as f64,
                    Mode::Virtual => USERS as f64,
                };
                row = row.ideal(ideal, 1000.0).article(match mode {
                    Mode::Platform => "199.7 TPS, 1,478 ms",
                    Mode::Virtual => "290.5 TPS, 1,025 ms",
                });
            } else {
                load.window = Some(instant_window);
                load.warmup = Duration::from_millis(500);
                row = row
                    .article(match mode {
                        Mode::Platform => "14,307 TPS",
                        Mode::Virtual => "13,584 TPS",
                    })
                    .note("CPU-bound on loopback: no Little's-law ideal");
            }
            let serve = Serve {
                mode: thread_mode,
                runtime: None,
                router: router(),
            };
            rows.push(measure_http(serve, load, Duration::from_millis(1500), row));
            progress.step();
        }
    }
    rows
}
