//! The hazard of unmounting under an OS lock: virtual threads of one
//! carrier share an `Arc<std::sync::Mutex<TcpStream>>`. A takes the lock
//! and its hooked `read` parks it; B blocks the carrier in `lock()`; A can
//! resume only on that carrier. Without the hooks A would have kept the
//! carrier. It cannot be undone from outside, so the promise is that it
//! never hangs silently: within the stall threshold the monitor reports
//! the carrier blocked while A waits, naming both and saying what to do.
//!
//! Its own test binary: the deadlocked carrier never comes back.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft::events::EventKind;
use weft_transparent_tests::watchdog;

#[test]
fn a_std_mutex_held_across_a_hooked_read_is_reported() {
    let _dog = watchdog(
        "a_std_mutex_held_across_a_hooked_read_is_reported",
        Duration::from_secs(60),
    );
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .stall_threshold(Duration::from_millis(50))
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let conn = Arc::new(Mutex::new(
        TcpStream::connect(listener.local_addr().unwrap()).unwrap(),
    ));
    let (mut peer, _) = listener.accept().unwrap();

    let c = conn.clone();
    let a = weft::Builder::new()
        .name("holder")
        .spawn_on(&rt, move || {
            let mut s = c.lock().unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap(); // parks, lock held
        })
        .unwrap();
    // B starts only once A is parked in the read, holding the lock.
    let at = a.thread().clone();
    while !matches!(at.blocker(), weft::Blocker::Call { call: "recv", .. }) {
        std::thread::yield_now();
    }
    let c = conn.clone();
    let b = weft::Builder::new()
        .name("locker")
        .spawn_on(&rt, move || drop(c.lock().unwrap()))
        .unwrap();
    // B now blocks the only carrier in `lock()`. The data A waits for
    // arrives: A is runnable, bound to the blocked carrier.
    let bt = b.thread().clone();
    while bt.state() != weft::State::Running {
        std::thread::yield_now();
    }
    peer.write_all(b"pong").unwrap();

    let event = loop {
        if let Some(e) = weft::events::recent()
            .into_iter()
            .find(|e| e.kind == EventKind::BlockedWithWaiters)
        {
            break e;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = event.to_string();
    assert!(text.contains("'holder'"), "{text}");
    assert!(text.contains("use weft::sync locks"), "{text}");
    assert_eq!(event.thread_name.as_deref(), Some("locker"), "{text}");
    // The carrier stays deadlocked: leave it (and the runtime) behind.
    std::mem::forget((a, b, rt));
}
