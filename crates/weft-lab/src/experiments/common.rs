//! What the experiments share: [`Options`], [`measure_http`] (serve a
//! router in one thread mode and measure it under a closed load), the
//! handlers more than one experiment serves, and the start of a service
//! built from `tests-transparent/examples/`. Experiments import from here,
//! never from each other.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use weft_bench_support::child::{Launcher, Worker};
use weft_http::{Handler, Request, Response, Router, Server, ServerConfig, ThreadMode};

use crate::load::{self, LoadSpec};
use crate::progress::Progress;
use crate::report::Row;

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

/// E2's handler, which E3 and E4 serve too: `/sleep` sleeps `?ms=`
/// (default 1000) milliseconds with `weft::sleep`.
pub fn sleep_router() -> Router {
    Router::new().get("/sleep", |req| {
        let d = ms_param(req, 1000);
        match weft::sleep(d) {
            Ok(()) => Response::text("slept"),
            Err(_) => Response::error(500),
        }
    })
}

/// E6's shape, which E8 repeats with unchanged crates.
pub mod order {
    use std::time::Duration;

    /// Clients (users).
    pub const USERS: usize = 500;
    /// Platform pool size.
    pub const THREADS: usize = 200;
    /// One downstream call.
    pub const CALL: Duration = Duration::from_millis(100);
}

/// The downstream service: `/delay?ms=N` sleeps N ms.
pub fn downstream() -> Router {
    Router::new().get("/delay", |req| {
        let d = ms_param(req, 100);
        match weft::sleep(d) {
            Ok(()) => Response::text("late"),
            Err(_) => Response::error(500),
        }
    })
}

/// The workspace's root directory (where `tests-transparent/` is).
pub fn workspace_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds `tests-transparent/examples/<name>.rs` (its own crate and target
/// directory, `weft`'s feature `transparent`) and returns the program. Says
/// so on screen first, and lets cargo show its progress there: the first
/// build compiles a second copy of the dependencies and takes minutes.
pub fn build_service(name: &str, progress: &Progress) -> Result<std::path::PathBuf, String> {
    let what = format!(
        "building tests-transparent/examples/{name}.rs (feature transparent, into \
         target/transparent; the first build takes minutes)"
    );
    progress.start(&what);
    // Asked before `suspend`: the bar's state lock is held inside it (and
    // is not re-entrant: asking there deadlocked the lab's quick test).
    let draws = progress.draws();
    progress.suspend(|| {
        if draws {
            eprintln!("weft-lab: {what}");
        }
        weft_bench_support::transparent::build_example(&workspace_dir(), name)
    })
}

/// Starts a service built from `tests-transparent/examples/` with `args`
/// and waits for its `ready <port>` line.
pub fn start_service<S: Into<std::ffi::OsString>>(
    launcher: &Launcher,
    args: impl IntoIterator<Item = S>,
) -> Result<(Worker, u16), String> {
    let mut service = Worker::start(launcher, args, Duration::from_secs(600))?;
    let line = service.line();
    match line
        .strip_prefix("ready ")
        .and_then(|p| p.parse::<u16>().ok())
    {
        Some(port) => Ok((service, port)),
        None => {
            service.terminate();
            let why = service.finish().err().unwrap_or_default();
            Err(format!("the service did not start (said {line:?}): {why}"))
        }
    }
}
