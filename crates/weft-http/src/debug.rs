//! Opt-in diagnostic routes: the runtime's thread dump and metrics over
//! HTTP.
//!
//! ```
//! use weft_http::Router;
//! let router = Router::new().nest("/debug/weft", weft_http::debug::router());
//! // GET /debug/weft/threads       -> jstack-like text dump
//! // GET /debug/weft/threads.json  -> JDK-shaped JSON dump
//! // GET /debug/weft/metrics       -> Prometheus text exposition
//! # drop(router);
//! ```
//!
//! These routes reveal stack traces and thread names: mount them only on
//! a listener you trust (e.g. a separate loopback-only server).

use crate::{Response, Router};

/// A router with `GET /threads`, `/threads.json` and `/metrics`, to mount
/// with [`Router::nest`].
pub fn router() -> Router {
    Router::new()
        .get("/threads", |_req| Response::text(weft::dump().to_string()))
        .get("/threads.json", |_req| {
            Response::json(weft::dump().to_json())
        })
        .get("/metrics", |_req| {
            Response::text(weft::metrics::prometheus())
                .with_header("content-type", "text/plain; version=0.0.4")
        })
}

/// Adds `GET {prefix}/threads`, `{prefix}/threads.json` and
/// `{prefix}/metrics` to `router`: `router.nest(prefix, router())`.
#[deprecated(note = "use `router.nest(prefix, weft_http::debug::router())`")]
pub fn routes(router: Router, prefix: &str) -> Router {
    let prefix = if prefix.is_empty() { "/" } else { prefix };
    router.nest(prefix, self::router())
}
