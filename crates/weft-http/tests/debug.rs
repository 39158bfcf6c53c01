//! The opt-in debug routes serve the thread dump and metrics.

use std::sync::Arc;
use std::time::Duration;

use weft_http::{Client, Router, Server, ServerConfig};

#[test]
fn debug_routes_serve_dump_and_metrics() {
    let router = Arc::new(weft_http::debug::routes(Router::new(), "/debug/weft"));
    let server = Server::bind("127.0.0.1:0", ServerConfig::default())
        .unwrap()
        .serve(router)
        .unwrap();
    let base = format!("http://{}", server.local_addr());
    let napper = weft::Builder::new()
        .name("debug-route-napper")
        .spawn(|| weft::sleep(Duration::from_secs(30)))
        .unwrap();
    while napper.thread().state() != weft::State::Parked {
        std::thread::yield_now();
    }
    let c = Client::new();
    let text = c
        .get(&format!("{base}/debug/weft/threads"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(text.contains("debug-route-napper"), "{text}");
    let json = c
        .get(&format!("{base}/debug/weft/threads.json"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(json.starts_with("{\"threadDump\""), "{json}");
    let metrics = c
        .get(&format!("{base}/debug/weft/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(metrics.contains("weft_virtual_threads_live"), "{metrics}");
    napper.thread().interrupt();
    let _ = napper.join();
    server.shutdown(Duration::from_secs(5));
}
