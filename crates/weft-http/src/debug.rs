//! Opt-in diagnostic routes: the runtime's thread dump and metrics over
//! HTTP.
//!
//! ```
//! use weft_http::Router;
//! let router = weft_http::debug::routes(Router::new(), "/debug/weft");
//! // GET /debug/weft/threads       -> jstack-like text dump
//! // GET /debug/weft/threads.json  -> JDK-shaped JSON dump
//! // GET /debug/weft/metrics       -> Prometheus text exposition
//! # drop(router);
//! ```
//!
//! These routes reveal stack traces and thread names: mount them only on
//! a listener you trust (e.g. a separate loopback-only server).

use crate::{Response, Router};

/// Adds `GET {prefix}/threads`, `{prefix}/threads.json` and
/// `{prefix}/metrics` to `router`.
pub fn routes(router: Router, prefix: &str) -> Router {
    let prefix = prefix.trim_end_matches('/');
    router
        .get(&format!("{prefix}/threads"), |_req| {
            Response::text(weft::dump().to_string())
        })
        .get(&format!("{prefix}/threads.json"), |_req| {
            Response::json(weft::dump().to_json())
        })
        .get(&format!("{prefix}/metrics"), |_req| {
            Response::text(weft::metrics::prometheus())
                .with_header("content-type", "text/plain; version=0.0.4")
        })
}
