//! The opt-in debug routes serve the thread dump and metrics.

use std::sync::Arc;
use std::time::Duration;

use weft_http::{Client, Router, Server, ServerConfig};

#[test]
fn debug_routes_serve_dump_and_metrics() {
    let router = Router::new()
        .get("/", |_req| "app")
        .nest("/debug/weft", weft_http::debug::router());
    debug_routes_serve(Arc::new(router));
}

/// The deprecated function mounts the same routes.
#[test]
#[allow(deprecated)]
fn deprecated_debug_routes_still_work() {
    debug_routes_serve(Arc::new(weft_http::debug::routes(
        Router::new().get("/", |_req| "app"),
        "/debug/weft/",
    )));
}

fn debug_routes_serve(router: Arc<Router>) {
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
    let app = c.get(&format!("{base}/")).send().unwrap().text().unwrap();
    assert_eq!(app, "app");
    let r = c.get(&format!("{base}/debug/weft/nope")).send().unwrap();
    assert_eq!(r.status(), 404);
    napper.thread().interrupt();
    let _ = napper.join();
    server.shutdown(Duration::from_secs(5));
}

/// A connection thread is named after its peer and shows the request in
/// progress in the dump, and no longer once the request is answered.
#[test]
fn connection_threads_show_peer_and_request_line_in_the_dump() {
    let (release_tx, release_rx) = weft::channel::bounded::<()>(1);
    let router = Arc::new(Router::new().get("/slow", move |_req| {
        let _ = release_rx.recv();
        "done"
    }));
    let server = Server::bind("127.0.0.1:0", ServerConfig::default())
        .unwrap()
        .serve(router)
        .unwrap();
    let url = format!("http://{}/slow?id=7", server.local_addr());
    let client =
        std::thread::spawn(move || Client::new().get(&url).send().unwrap().text().unwrap());

    let find = || {
        weft::dump()
            .threads
            .into_iter()
            .find(|t| t.activity.as_deref() == Some("GET /slow?id=7"))
    };
    let t0 = std::time::Instant::now();
    let busy = loop {
        if let Some(t) = find() {
            break t;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no thread doing GET /slow?id=7"
        );
        std::thread::sleep(Duration::from_millis(2));
    };
    let name = busy.name.clone().unwrap_or_default();
    assert!(name.starts_with("http 127.0.0.1:"), "{name:?}");
    let text = weft::dump().to_string();
    assert!(text.contains("   - doing: GET /slow?id=7"), "{text}");

    release_tx.send(()).unwrap();
    assert_eq!(client.join().unwrap(), "done");
    // Answered: the (keep-alive) connection thread no longer claims it.
    let t0 = std::time::Instant::now();
    while find().is_some() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "activity not cleared"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    server.shutdown(Duration::from_secs(5));
}
