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

/// A panic on a virtual thread, run in a child process so the panic hook
/// the runtime installs does not touch the other tests.
#[test]
fn a_panic_names_the_virtual_thread_not_the_carrier() {
    const ME: &str = "a_panic_names_the_virtual_thread_not_the_carrier";
    if common::is_child(ME) {
        if std::env::var("USER_HOOK").is_ok() {
            std::panic::set_hook(Box::new(|_| eprintln!("the program's own hook ran")));
        }
        let rt = weft::Runtime::builder()
            .parallelism(1)
            .name("panicky")
            .build()
            .unwrap();
        let h = weft::Builder::new()
            .name("http 127.0.0.1:5123")
            .spawn_on(&rt, || panic!("handler failed: {}", 42))
            .unwrap();
        let id = h.thread().id().as_u64().get();
        assert!(h.join().is_err());
        eprintln!("spawned #{id}");
        // A panic on an OS thread still goes through the default hook.
        let _ = std::thread::Builder::new()
            .name("plain os".into())
            .spawn(|| panic!("os thread failed"))
            .unwrap()
            .join();
        return;
    }
    let out = common::run_child(ME, &[("RUST_BACKTRACE", "0")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{err}");
    let id = err
        .lines()
        .find_map(|l| l.strip_prefix("spawned #"))
        .expect("the child printed the thread id");
    let want = format!("virtual thread 'http 127.0.0.1:5123' (#{id}) panicked at ");
    let line = err
        .lines()
        .find(|l| l.starts_with(&want))
        .unwrap_or_else(|| panic!("no line starting {want:?} in:\n{err}"));
    assert!(line.contains("culprit.rs:"), "{line}");
    assert!(err.contains("handler failed: 42"), "{err}");
    assert!(!err.contains("weft-carrier"), "names the carrier:\n{err}");
    assert!(
        err.contains("thread 'plain os'") && err.contains("os thread failed"),
        "an OS thread's panic keeps the default message:\n{err}"
    );

    // A hook the program installed first is kept and called instead.
    let out = common::run_child(ME, &[("RUST_BACKTRACE", "0"), ("USER_HOOK", "1")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{err}");
    assert_eq!(
        err.matches("the program's own hook ran").count(),
        2,
        "the user's hook runs for both panics:\n{err}"
    );
    assert!(!err.contains("virtual thread '"), "{err}");
}

/// `set_activity` shows in the dump, is cleared by "", and a long text is
/// cut at a character boundary with a visible mark.
#[test]
fn the_dump_shows_what_a_thread_said_it_is_doing() {
    let h = weft::spawn(|| {
        let me = weft::current().id();
        weft::set_activity(format_args!("{} {}", "GET", "/slow"));
        let dump = weft::dump();
        assert_eq!(
            dump.thread(me).unwrap().activity.as_deref(),
            Some("GET /slow")
        );
        assert!(dump.to_string().contains("   - doing: GET /slow"), "{dump}");

        let long = "é".repeat(weft::MAX_ACTIVITY_LEN); // 2 bytes each
        weft::set_activity(&long);
        let shown = weft::dump().thread(me).unwrap().activity.clone().unwrap();
        assert!(shown.len() <= weft::MAX_ACTIVITY_LEN, "{}", shown.len());
        assert!(shown.ends_with('…'), "{shown}");
        assert!(shown.trim_end_matches('…').chars().all(|c| c == 'é'));

        // Cut across pieces: the second piece overflows by less than the mark.
        let a = "x".repeat(weft::MAX_ACTIVITY_LEN - 1);
        weft::set_activity(format_args!("{a}{}", "yz"));
        let shown = weft::dump().thread(me).unwrap().activity.clone().unwrap();
        assert!(shown.len() <= weft::MAX_ACTIVITY_LEN, "{}", shown.len());
        assert!(shown.ends_with("x…"), "{shown}");

        weft::set_activity("");
        assert_eq!(weft::dump().thread(me).unwrap().activity, None);
    });
    join_within("the thread", Duration::from_secs(20), h).unwrap();
}
