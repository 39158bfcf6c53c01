//! The lab's experiments (E1–E8), one module each, and what they share:
//! [`Options`], the [`Experiment`] list and [`measure_http`], which serves
//! a router in one thread mode and measures it under a closed load.

pub mod e1;
pub mod e2;
pub mod e3;
pub mod e4;
pub mod e5;
pub mod e6;
pub mod e7;
pub mod e8;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::ValueEnum;
use serde::Serialize;
use weft_http::{Handler, Request, Response, Router, Server, ServerConfig, ThreadMode};

use crate::load::{self, LoadSpec};
use crate::progress::Progress;
use crate::report::Row;

/// An experiment the lab can run (E1–E8, as in the report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
pub enum Experiment {
    /// 100 tasks × `sleep(1 s)`: fixed pool of 10 vs a virtual thread per task.
    #[value(name = "E1")]
    E1,
    /// One worker thread vs one carrier, 100 users, 1 s handler.
    #[value(name = "E2")]
    E2,
    /// 296 users, 200 platform threads vs virtual, 1 s and instant handler.
    #[value(name = "E3")]
    E3,
    /// A 1 s blocking endpoint, 800 users, 100 platform threads vs virtual.
    #[value(name = "E4")]
    E4,
    /// A long database query through a pool of 100 connections.
    #[value(name = "E5")]
    E5,
    /// Two downstream calls of 100 ms and a database write per request.
    #[value(name = "E6")]
    E6,
    /// Pinning: a driver holding a `std::sync::Mutex` across a blocking call.
    #[value(name = "E7")]
    E7,
    /// E6's shape built from unchanged blocking crates (`ureq`, `redis`)
    /// with the `transparent` feature: one switch.
    #[value(name = "E8")]
    E8,
}

impl Experiment {
    /// Every experiment, in the order `weft-lab` runs them.
    pub const ALL: &'static [Experiment] = &[
        Experiment::E1,
        Experiment::E2,
        Experiment::E3,
        Experiment::E4,
        Experiment::E5,
        Experiment::E6,
        Experiment::E7,
        Experiment::E8,
    ];

    /// The short id used on the command line and in the report (`"E1"`).
    pub fn id(self) -> &'static str {
        match self {
            Experiment::E1 => "E1",
            Experiment::E2 => "E2",
            Experiment::E3 => "E3",
            Experiment::E4 => "E4",
            Experiment::E5 => "E5",
            Experiment::E6 => "E6",
            Experiment::E7 => "E7",
            Experiment::E8 => "E8",
        }
    }

    /// A one-line description.
    pub fn title(self) -> &'static str {
        match self {
            Experiment::E1 => {
                "100 tasks x sleep(1 s): fixed pool of 10 vs a virtual thread per task"
            }
            Experiment::E2 => "HTTP, 1 worker thread vs 1 carrier, 100 users, handler sleeps 1 s",
            Experiment::E3 => {
                "HTTP, 296 users, 200 platform threads vs virtual: sleep 1 s / instant"
            }
            Experiment::E4 => "HTTP, a 1 s blocking endpoint, 800 users, 100 platform threads",
            Experiment::E5 => "HTTP + PostgreSQL, SELECT pg_sleep(0.5) through a pool of 100",
            Experiment::E6 => "HTTP, 2 downstream calls of 100 ms + a database write per request",
            Experiment::E7 => {
                "pinning: a driver lock (std vs weft Mutex; std with transparent) held across a 20 ms block"
            }
            Experiment::E8 => {
                "one switch, unchanged crates: E6 with ureq + redis over std::net, transparent on"
            }
        }
    }

    /// Runs the experiment; `progress` gets one step per configuration.
    pub fn run(self, options: &Options, progress: &Progress) -> Result<Vec<Row>, String> {
        match self {
            Experiment::E1 => Ok(e1::run(options, progress)),
            Experiment::E2 => Ok(e2::run(options, progress)),
            Experiment::E3 => Ok(e3::run(options, progress)),
            Experiment::E4 => Ok(e4::run(options, progress)),
            Experiment::E5 => e5::run(options, progress),
            Experiment::E6 => Ok(e6::run(options, progress)),
            Experiment::E7 => Ok(e7::run(options, progress)),
            Experiment::E8 => e8::run(options, progress),
        }
    }

    /// How many configurations (progress steps) the experiment measures.
    pub fn steps(self, options: &Options) -> u64 {
        match self {
            Experiment::E1 => 3 + u64::from(options.big),
            Experiment::E2 | Experiment::E4 | Experiment::E5 | Experiment::E6 | Experiment::E8 => 2,
            Experiment::E3 => 4,
            Experiment::E7 => 4,
        }
    }
}

/// Settings shared by every experiment.
#[derive(Clone, Debug, Serialize)]
pub struct Options {
    /// Smaller, shorter variants (all default experiments in under 2 min).
    pub quick: bool,
    /// Also run the largest variants (E1: 1,000,000 virtual threads).
    pub big: bool,
    /// Measured window of each HTTP configuration (default: 10 s, quick 4 s).
    pub duration: Option<Duration>,
    /// Where `report.html` and `results.json` go.
    pub out: std::path::PathBuf,
}

impl Options {
    /// The measured window of an HTTP configuration.
    pub fn window(&self) -> Duration {
        self.duration.unwrap_or(if self.quick {
            Duration::from_secs(4)
        } else {
            Duration::from_secs(10)
        })
    }

    /// Warm-up before each measured window (connections open, pools fill,
    /// queues form). Half a second off whole seconds, so that the waves of
    /// 1 s requests a closed model produces do not end on the window's
    /// edges.
    pub fn warmup(&self) -> Duration {
        if self.quick {
            Duration::from_millis(1500)
        } else {
            Duration::from_millis(2500)
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            quick: false,
            big: false,
            duration: None,
            out: std::path::PathBuf::from("target/weft-lab"),
        }
    }
}

/// The server side of one measured configuration.
pub struct Serve {
    /// Platform pool or virtual.
    pub mode: ThreadMode,
    /// Runtime for virtual connection threads (`None`: the default one).
    pub runtime: Option<weft::Runtime>,
    /// The handlers.
    pub router: Router,
}

/// Serves `serve` on a loopback port, runs `load` (its `url` is a path such
/// as `/sleep`) against it, shuts the server down and returns `row` filled
/// in. Requests still queued `grace` after the window are cut off by the
/// shutdown and noted in the row.
pub fn measure_http(serve: Serve, mut load: LoadSpec, grace: Duration, row: Row) -> Row {
    let mut config = ServerConfig::default()
        .thread_mode(serve.mode)
        .accept_queue(load.users.max(100) + 16)
        .backlog(4096)
        .idle_timeout(Duration::from_secs(120))
        .header_read_timeout(Duration::from_secs(120));
    if let Some(rt) = serve.runtime {
        config = config.runtime(rt);
    }
    // After the window, queued requests are answered at once (503, not
    // counted) instead of each blocking a worker: shutting a platform
    // server down does not empty its queue, so draining 100 queued 1 s
    // requests on one thread would take 100 s.
    let closing = Arc::new(AtomicBool::new(false));
    let flag = closing.clone();
    let router = serve.router;
    let handler = move |req: &mut Request<'_>| {
        if flag.load(Ordering::Relaxed) {
            Response::error(503)
        } else {
            router.handle(req)
        }
    };
    let server = match Server::bind("127.0.0.1:0", config).and_then(|s| s.serve(handler)) {
        Ok(s) => Arc::new(s),
        Err(e) => return row.failed(format!("cannot start server: {e}")),
    };
    load.url = format!("http://{}{}", server.local_addr(), load.url);
    let s = server.clone();
    let result = load::closed(&load, grace, move || {
        closing.store(true, Ordering::SeqCst);
        s.shutdown(Duration::from_millis(50));
    });
    server.shutdown(Duration::from_secs(2));
    match result {
        Ok(r) => {
            let mut row = row.users(load.users as u64);
            if r.cut_off > 0 {
                row = row.note(format!(
                    "{} requests still queued when the window closed were cut off (not counted)",
                    r.cut_off
                ));
            }
            row.measured(r.latencies_us, r.errors, r.measured)
        }
        Err(e) => row.failed(e),
    }
}

/// A closed load of `users` users on `path` for the options' window.
pub fn window_load(options: &Options, path: &str, users: usize) -> LoadSpec {
    LoadSpec {
        url: path.to_string(),
        users,
        warmup: options.warmup(),
        window: Some(options.window()),
        per_user: 0,
        timeout: Duration::from_secs(300),
    }
}

/// The `ms` query parameter of a request, or `default`.
pub fn ms_param(req: &weft_http::Request<'_>, default: u64) -> Duration {
    Duration::from_millis(
        req.query_param("ms")
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}
