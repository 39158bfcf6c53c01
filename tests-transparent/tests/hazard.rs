//! The hazard of unmounting under an OS lock: virtual threads of one
//! carrier share an `Arc<std::sync::Mutex<TcpStream>>`. A takes the lock
//! and its hooked `read` parks it; B waits in `lock()`.
//!
//! With each virtual thread's own thread-locals (the default), B's futex
//! wait parks B too, and A resumes when its data comes: no deadlock (as
//! JDK 24 did for `synchronized`). On a runtime whose threads share their
//! carrier's thread-locals, B's wait blocks the carrier and A can resume
//! only there; that cannot be undone from outside, so the promise is that
//! it never hangs silently: within the stall threshold the monitor reports
//! the carrier blocked while A waits, naming both and saying what to do.
//!
//! Its own test binary: the deadlocked carrier of the second test never
//! comes back.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft::events::EventKind;
use weft_transparent_tests::watchdog;

/// A parks in the read holding the lock, B parks in `lock()`; the data
/// comes, A finishes, B gets the lock. Before the futex hooks B blocked
/// the carrier and this deadlocked (the second test's shape).
#[test]
fn a_std_mutex_held_across_a_hooked_read_parks_the_second_locker() {
    if std::env::var_os("WEFT_THREAD_LOCALS").is_some() {
        return;
    }
    let _dog = watchdog(
        "a_std_mutex_held_across_a_hooked_read_parks_the_second_locker",
        Duration::from_secs(60),
    );
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let conn = Arc::new(Mutex::new(
        TcpStream::connect(listener.local_addr().unwrap()).unwrap(),
    ));
    let (mut peer, _) = listener.accept().unwrap();
    let c = conn.clone();
    let a = rt.spawn(move || {
        let mut s = c.lock().unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).unwrap(); // parks, lock held
        b
    });
    let at = a.thread().clone();
    while !matches!(at.blocker(), weft::Blocker::Call { call: "recv", .. }) {
        std::thread::yield_now();
    }
    let c = conn.clone();
    let b = rt.spawn(move || drop(c.lock().unwrap()));
    // B parks in the lock's futex wait: the carrier is free.
    let bt = b.thread().clone();
    while !matches!(bt.blocker(), weft::Blocker::Call { call: "futex", .. }) {
        std::thread::yield_now();
    }
    peer.write_all(b"pong").unwrap();
    assert_eq!(&a.join().unwrap(), b"pong");
    b.join().unwrap();
}

#[test]
fn on_carrier_thread_locals_a_std_mutex_held_across_a_hooked_read_is_reported() {
    let _dog = watchdog(
        "on_carrier_thread_locals_a_std_mutex_held_across_a_hooked_read_is_reported",
        Duration::from_secs(60),
    );
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .carrier_thread_locals()
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
