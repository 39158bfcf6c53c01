//! A server with one handler that blocks its carrier — the bug the stall
//! events and the thread dump exist to find:
//!
//! ```text
//! WEFT_TRACE_PINNED=short cargo run --release -p weft-http --example stalled -- 127.0.0.1:8080
//! cargo run --release -p weft-load -- -c 200 -d 10s http://127.0.0.1:8080/slow
//! curl -s http://127.0.0.1:8080/debug/weft/threads   # while the load runs
//! ```
//!
//! Each stall event names `slow_handler` and the file and line of its
//! `std::thread::sleep`; the dump shows the connection threads as
//! `http <peer>` with `doing: GET /slow`.

use std::sync::Arc;
use std::time::Duration;

use weft_http::{Request, Router, Server, ServerConfig};

/// The bug: `std::thread::sleep` holds the carrier (`weft::sleep` would
/// park only this virtual thread).
fn slow_handler(_req: &mut Request<'_>) -> &'static str {
    std::thread::sleep(Duration::from_millis(100));
    "slow\n"
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let router = Router::new()
        .get("/slow", slow_handler)
        .get("/fast", |_req| "fast\n")
        .nest("/debug/weft", weft_http::debug::router());
    let router = Arc::new(router);
    let server = Server::bind(&addr, ServerConfig::default())?.serve(router)?;
    eprintln!("listening on http://{}", server.local_addr());
    server.wait();
    Ok(())
}
