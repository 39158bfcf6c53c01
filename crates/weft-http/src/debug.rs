//! Opt-in diagnostic routes: a live page, the runtime's thread dump
//! (whole or grouped by stack) and metrics over HTTP.
//!
//! ```
//! use weft_http::Router;
//! let router = Router::new().nest("/debug/weft", weft_http::debug::router());
//! // GET /debug/weft/              -> live page (feature `json`, on by default)
//! // GET /debug/weft/live.json     -> the page's data
//! // GET /debug/weft/threads       -> jstack-like text dump
//! // GET /debug/weft/threads.json  -> JDK-shaped JSON dump
//! // GET /debug/weft/groups        -> threads grouped by stack (goroutine?debug=1)
//! // GET /debug/weft/groups.json   -> the same as JSON
//! // GET /debug/weft/metrics       -> Prometheus text exposition
//! # drop(router);
//! ```
//!
//! These routes reveal stack traces and thread names: mount them only on
//! a listener you trust (e.g. a separate loopback-only server).
//!
//! # A page that stays up while carriers are stalled
//!
//! Mounted in the application's router, the routes are served by the
//! application's carriers: a connection thread bound to a stalled carrier
//! waits with every other thread bound there. [`serve`] runs them on a
//! server of their own, on a one-carrier runtime of its own, so a stalled
//! application carrier cannot hold the page; and every route that takes a
//! dump does it on an offload thread ([`weft::blocking`]), so a dump never
//! holds the carrier that serves the page either.

use std::io;
use std::net::ToSocketAddrs;
use std::sync::Arc;
use std::time::Duration;

use crate::{Response, Router, Server, ServerConfig, ServerHandle};

#[cfg(feature = "json")]
mod page;

/// Settings of the live page and of [`serve`]'s server.
/// `DebugConfig::default()` gives the values listed on each field.
#[derive(Clone, Debug)]
pub struct DebugConfig {
    /// How often the page refreshes (default 1 s; at least 10 ms).
    pub refresh: Duration,
    /// How often the thread counts by state are sampled for the page's
    /// chart (default 1 s; at least 10 ms).
    pub sample_every: Duration,
    /// How much history the chart keeps (default 10 minutes; at most
    /// 100,000 samples).
    pub history: Duration,
    /// How long the page reuses a thread dump for its stack groups
    /// (default 2 s): a dump briefly resumes every parked thread.
    pub dump_every: Duration,
    /// Stack groups shown, largest first (default 20).
    pub top_groups: usize,
    /// Recent stall, pinned and blocked-with-waiters events shown
    /// (default 20).
    pub recent_events: usize,
    /// [`serve`]: where the routes are mounted (default `/debug/weft`).
    pub prefix: String,
    /// [`serve`]: connections open at once (default 64).
    pub max_connections: usize,
}

impl Default for DebugConfig {
    fn default() -> DebugConfig {
        DebugConfig {
            refresh: Duration::from_secs(1),
            sample_every: Duration::from_secs(1),
            history: Duration::from_secs(600),
            dump_every: Duration::from_secs(2),
            top_groups: 20,
            recent_events: 20,
            prefix: "/debug/weft".into(),
            max_connections: 64,
        }
    }
}

/// The debug routes with the default [`DebugConfig`], to mount with
/// [`Router::nest`]: `GET /` (the live page) and `/live.json` (feature
/// `json`), `/threads`, `/threads.json`, `/groups`, `/groups.json` and
/// `/metrics`.
pub fn router() -> Router {
    router_with(DebugConfig::default())
}

/// [`router`] with settings. With feature `json` it starts the page's
/// history sampler (one OS thread, which ends when the router is
/// dropped).
pub fn router_with(config: DebugConfig) -> Router {
    let r = Router::new()
        .get("/threads", |_req| {
            Response::text(weft::blocking(|| weft::dump().to_string()))
        })
        .get("/threads.json", |_req| {
            Response::json(weft::blocking(|| weft::dump().to_json()))
        })
        .get("/groups", |_req| {
            Response::text(weft::blocking(|| weft::dump().groups().to_string()))
        })
        .get("/groups.json", |_req| {
            Response::json(weft::blocking(|| weft::dump().groups().to_json()))
        })
        .get("/metrics", |_req| {
            Response::text(weft::metrics::prometheus())
                .with_header("content-type", "text/plain; version=0.0.4")
        });
    #[cfg(feature = "json")]
    let r = {
        let p = page::Page::start(config);
        let q = p.clone();
        r.get("/", move |req| p.html(req))
            .get("/live.json", move |_req| q.live_json())
    };
    #[cfg(not(feature = "json"))]
    let _ = config;
    r
}

/// Serves the debug routes at [`DebugConfig::prefix`] on `addr`, on a
/// one-carrier runtime of their own (see the module docs); `GET /`
/// redirects to the page.
///
/// ```
/// let server = weft_http::debug::serve("127.0.0.1:0", Default::default())?;
/// let url = format!("http://{}/debug/weft/groups", server.local_addr());
/// let text = weft_http::Client::new().get(&url).send()?.text()?;
/// assert!(text.starts_with("Weft thread groups"));
/// server.shutdown(std::time::Duration::from_secs(5));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// When the runtime cannot start, `addr` cannot be bound,
/// `max_connections` is 0 or the prefix has a `*` segment.
pub fn serve(addr: impl ToSocketAddrs, config: DebugConfig) -> io::Result<ServerHandle> {
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .name("weft-debug")
        .build()?;
    let prefix = format!("/{}", config.prefix.trim_matches('/'));
    if prefix.contains('*') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("weft-http: debug prefix {prefix:?} cannot have a '*' segment"),
        ));
    }
    let server_config = ServerConfig::default()
        .runtime(rt)
        .max_connections(config.max_connections);
    let mut app = Router::new();
    if prefix != "/" {
        let location = format!("{prefix}/");
        app = app.get("/", move |_req| {
            Response::text("")
                .with_status(302)
                .with_header("location", location.clone())
        });
    }
    let app = app.nest(&prefix, router_with(config));
    Server::bind(addr, server_config)?.serve(Arc::new(app))
}

/// Adds `GET {prefix}/threads`, `{prefix}/threads.json` and
/// `{prefix}/metrics` to `router`: `router.nest(prefix, router())`.
#[deprecated(note = "use `router.nest(prefix, weft_http::debug::router())`")]
pub fn routes(router: Router, prefix: &str) -> Router {
    let prefix = if prefix.is_empty() { "/" } else { prefix };
    router.nest(prefix, self::router())
}
