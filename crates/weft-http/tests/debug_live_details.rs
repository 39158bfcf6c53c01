//! What `live.json` tells beyond counts: an event's activity and cure (the
//! event's text had both, the page had neither), and weft-http's own
//! threads named as the library's, not "(no frame outside Weft and std)".

use std::sync::mpsc;
use std::time::{Duration, Instant};

use weft_http::Client;
use weft_http::debug::DebugConfig;

const LIMIT: Duration = Duration::from_secs(60);

fn live(c: &Client, base: &str) -> serde_json::Value {
    c.get(&format!("{base}/debug/weft/live.json"))
        .send()
        .unwrap()
        .json()
        .unwrap()
}

#[test]
fn events_carry_activity_and_cure_and_library_groups_are_named() {
    let server = weft_http::debug::serve("127.0.0.1:0", DebugConfig::default()).unwrap();
    let base = format!("http://{}", server.local_addr());
    // A stall of a runtime of its own: a std (OS-level) wait, ended by the
    // test once the page has shown it.
    let rt = weft::Runtime::builder()
        .name("live-details")
        .parallelism(1)
        .stall_threshold(Duration::from_millis(20))
        .build()
        .unwrap();
    let (release, wait) = mpsc::channel::<()>();
    let h = rt.spawn(move || {
        weft::set_activity("GET /exp/std-wait");
        wait.recv().unwrap();
    });
    let id = h.thread().id().as_u64().get();
    let c = Client::new();
    let t0 = Instant::now();
    let (ev, doc) = loop {
        let doc = live(&c, &base);
        if let Some(ev) = doc["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["thread"] == id && e["kind"] == "stall (blocked)")
        {
            break (ev.clone(), doc);
        }
        assert!(t0.elapsed() < LIMIT, "no stall event on the page: {doc}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(ev["activity"], "GET /exp/std-wait", "{ev}");
    assert!(
        ev["cure"]
            .as_str()
            .is_some_and(|c| c.contains("weft::sync")),
        "{ev}"
    );
    // The held carrier shows how long it has been held.
    let held = doc["carriers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["runtime_name"] == "live-details" && c["state"] == "stalled")
        .map(|c| c["held_ms"].clone());
    if let Some(held) = held {
        assert!(held.as_f64().is_some_and(|ms| ms >= 20.0), "{doc}");
    }
    // The server's acceptor: a group of the library's, named by its frame.
    let groups = doc["groups"]["list"].as_array().unwrap();
    assert!(
        groups.iter().any(|g| g["library"]
            .as_str()
            .is_some_and(|l| l.starts_with("weft_http::"))),
        "{doc}"
    );
    for g in groups {
        let ours = g["stack"].as_array().unwrap().iter().any(|f| {
            f.as_str()
                .is_some_and(|f| f.trim_start_matches('<').starts_with("weft_http::"))
        });
        if ours && g["user"].is_null() {
            assert!(!g["library"].is_null(), "{g}");
        }
    }
    release.send(()).unwrap();
    h.join().unwrap();
    server.shutdown(Duration::from_secs(5));
}
