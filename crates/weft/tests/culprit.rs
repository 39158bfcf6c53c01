//! Finding the culprit: a virtual thread that holds its carrier shows the
//! blocking frame — in the stall event and in a thread dump — and a panic
//! on a virtual thread names it.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{join_within, wait_until};
use weft::events::EventKind;

/// The "handler" that blocks its carrier with plain `std` sleeps until
/// released (so the test decides when the stall ends, not a timer).
#[inline(never)]
fn slow_handler(release: &AtomicBool) {
    while !release.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_stall_shows_the_blocking_function_in_the_event_and_the_dump() {
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .stall_threshold(Duration::from_millis(20))
        .name("culprit")
        .build()
        .unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let h = weft::Builder::new()
        .name("slow request")
        .spawn_on(&rt, move || slow_handler(&r))
        .unwrap();
    let id = h.thread().id().as_u64().get();
    let mut event = None;
    wait_until(
        "a stall event for the slow thread",
        Duration::from_secs(20),
        || {
            event = weft::events::recent().into_iter().find(|e| {
                e.thread_id == id && matches!(e.kind, EventKind::StallBlocked | EventKind::StallCpu)
            });
            event.is_some()
        },
    );
    let event = event.unwrap();
    let site = event.call_site.clone().unwrap_or_default();
    assert!(
        site.contains("slow_handler") && site.contains("culprit.rs:"),
        "call site should be slow_handler in culprit.rs, got {site:?}\n{event}\n{:?}",
        event.stack
    );
    assert!(event.to_string().contains("slow_handler"), "{event}");
    let stack = event.stack.clone().unwrap_or_default();
    let marked = stack
        .lines()
        .find(|l| l.contains("<== first frame"))
        .unwrap_or("");
    assert!(marked.contains("slow_handler"), "{stack}");

    // The dump samples the carrier too.
    let dump = weft::dump();
    let info = dump.thread(h.thread().id()).expect("listed");
    assert!(
        info.stack
            .iter()
            .any(|f| f.function.contains("slow_handler")),
        "dump stack of the running thread lacks slow_handler: {:?}",
        info.stack
    );
    let text = dump.to_string();
    assert!(
        text.lines()
            .any(|l| l.contains("slow_handler") && l.contains("<== first frame")),
        "{text}"
    );
    release.store(true, Ordering::SeqCst);
    join_within("the slow thread", Duration::from_secs(20), h).unwrap();
}
