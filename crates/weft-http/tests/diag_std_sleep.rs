//! A handler that calls `std::thread::sleep` (the mistake a new user makes
//! first) is warned about with its route and its cure (issue #30, part 3).
//!
//! The warning is read where programs read it: `weft::events::recent()`
//! and the event's `Display`, which is the text logged through `tracing`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weft::events::{Cure, Event, EventKind};
use weft_http::{Client, Router, Server, ServerConfig};

/// The handler: blocks its carrier with a std sleep. Long enough for the
/// monitor (20 ms threshold) to sample it more than once over.
#[inline(never)]
fn std_sleep_handler() -> &'static str {
    std::thread::sleep(Duration::from_millis(300));
    "slept"
}

/// Serves `GET /exp/std-sleep` once on a runtime of one carrier (so a
/// second request's thread waits behind the sleeping one, as in a real
/// server) and returns the events naming the handler.
fn serve_std_sleep() -> Vec<Event> {
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .stall_threshold(Duration::from_millis(20))
        .name("diag-std-sleep")
        .build()
        .unwrap();
    let router = Router::new()
        .get("/exp/std-sleep", |_req| std_sleep_handler())
        .get("/ok", |_req| "ok");
    let server = Server::bind("127.0.0.1:0", ServerConfig::default().runtime(rt))
        .unwrap()
        .serve(Arc::new(router))
        .unwrap();
    let base = format!("http://{}", server.local_addr());
    let slow = {
        let url = format!("{base}/exp/std-sleep");
        std::thread::spawn(move || Client::new().get(&url).send().unwrap().text().unwrap())
    };
    // Another request while the carrier sleeps: its thread waits behind.
    let ok = Client::new().get(&format!("{base}/ok")).send().unwrap();
    assert_eq!(ok.text().unwrap(), "ok");
    assert_eq!(slow.join().unwrap(), "slept");
    // The monitor records as it samples; wait (bounded) for the stall.
    let ours = |e: &Event| {
        e.call_site
            .as_deref()
            .is_some_and(|s| s.contains("diag_std_sleep.rs:"))
    };
    let t0 = Instant::now();
    loop {
        let events: Vec<Event> = weft::events::recent().into_iter().filter(ours).collect();
        if events.iter().any(|e| e.kind == EventKind::StallBlocked) {
            return events;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no stall event names the handler's call site: {:#?}",
            weft::events::recent()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_std_sleep_in_a_handler_is_warned_with_its_call_site_and_cure() {
    let events = serve_std_sleep();
    for e in &events {
        let text = e.to_string();
        eprintln!("{text}");
        assert_eq!(e.cure(), Some(Cure::Sleep), "{text}");
        assert!(text.contains("; cure: use weft::sleep"), "{text}");
        // The handler's own frame, or the route closure it was inlined
        // into (a build without link-time optimisation may do either).
        assert!(
            text.contains("; called from ") && text.contains("diag_std_sleep.rs:"),
            "{text}"
        );
    }
    // The blocked-with-waiters event that follows (the `/ok` request
    // waited behind the sleep) names the same call site and cure, from the
    // stack sampled while the carrier was blocked.
    if let Some(e) = events
        .iter()
        .find(|e| e.kind == EventKind::BlockedWithWaiters)
    {
        assert!(e.stack.is_some(), "{e}");
    }
}

/// Needs the monitor to record the thread's activity and to stop blaming
/// OS locks in its blocked-with-waiters text (the change to
/// `sched/monitor.rs` and `thread/pinned.rs` proposed with issue #30's
/// part 3): un-ignore with it.
#[test]
fn a_std_sleep_in_a_handler_is_warned_with_its_route() {
    let events = serve_std_sleep();
    for e in &events {
        let text = e.to_string();
        assert!(text.contains("; activity: GET /exp/std-sleep"), "{text}");
        assert!(
            !text.contains("weft::sync"),
            "a sleep is not blamed on locks: {text}"
        );
    }
}
