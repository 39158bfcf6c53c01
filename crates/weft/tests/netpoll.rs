//! Who fetches readiness (`weft`'s `netpoll` module, "Who polls"): the
//! hand-overs between the `weft-poller` OS thread and the carriers, and the
//! monitor's poll when every carrier is busy.
//!
//! One test per binary on purpose: the hand-overs depend on how many
//! runtimes the process runs, so nothing else may start one here. The same
//! sequence runs again in a child process with `WEFT_NETPOLL=thread`.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weft::Runtime;
use weft_bench_support::watchdog::Watchdog;

const LIMIT: Duration = Duration::from_secs(60);

/// The kernel's scheduling state of OS thread `tid` of this process.
fn state(tid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    s.rsplit_once(')')?.1.trim_start().chars().next()
}

/// An OS thread reads from a `weft::net` socket whose data is written only
/// once the reader sleeps in the kernel (so the read really waits for a
/// readiness event). Returns what it read.
fn os_thread_waits_for_data() -> Vec<u8> {
    let l = weft::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let reader = common::gettid();
    let reading = Arc::new(AtomicBool::new(false));
    let writer = {
        let reading = reading.clone();
        std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            while !reading.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            // Asleep in the kernel: parked in the read below.
            while state(reader) != Some('S') {
                std::thread::yield_now();
            }
            c.write_all(b"ready").unwrap();
            c
        })
    };
    let (mut s, _) = l.accept().unwrap();
    reading.store(true, Ordering::SeqCst);
    let mut buf = [0u8; 5];
    s.read_exact(&mut buf).unwrap();
    drop(writer.join().unwrap());
    buf.to_vec()
}

/// Whether this process has an OS thread of that name.
fn os_thread_named(name: &str) -> bool {
    std::fs::read_dir("/proc/self/task").unwrap().any(|t| {
        let comm = t.unwrap().path().join("comm");
        std::fs::read_to_string(comm).is_ok_and(|c| c.trim_end() == name)
    })
}

fn sequence() {
    let _dog = Watchdog::new("netpoll hand-overs", LIMIT, || {
        "a readiness event reached no one: no poller, carrier or monitor fetched it".into()
    });

    // 1. No runtime yet: the poller thread is the waiter.
    assert_eq!(os_thread_waits_for_data(), b"ready");

    // 2. A runtime of one carrier and no spare, its carrier computing and
    //    never returning to its scheduler: an OS thread's read completes
    //    anyway (the monitor polls), while the carrier still computes.
    let rt = Runtime::builder()
        .name("np")
        .parallelism(1)
        .max_pool_size(1)
        .build()
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let computing = Arc::new(AtomicBool::new(false));
    let spinner = {
        let (done, computing) = (done.clone(), computing.clone());
        rt.spawn(move || {
            computing.store(true, Ordering::SeqCst);
            let t0 = std::time::Instant::now();
            while !done.load(Ordering::SeqCst) && t0.elapsed() < LIMIT / 2 {
                std::hint::spin_loop();
            }
            done.load(Ordering::SeqCst)
        })
    };
    while !computing.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    assert_eq!(os_thread_waits_for_data(), b"ready");
    done.store(true, Ordering::SeqCst);
    assert!(
        common::join_within("spinner", LIMIT, spinner).unwrap(),
        "the read completed only after the carrier stopped computing"
    );

    // 3. The runtime's virtual threads do I/O through the carrier.
    let inner = rt.clone();
    let echoed = rt
        .spawn(move || {
            let l = weft::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let server = inner.spawn(move || {
                let (mut s, _) = l.accept().unwrap();
                let mut buf = [0u8; 4];
                s.read_exact(&mut buf).unwrap();
                s.write_all(&buf).unwrap();
            });
            let mut c = weft::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"ping").unwrap();
            let mut buf = [0u8; 4];
            c.read_exact(&mut buf).unwrap();
            server.join().unwrap();
            buf
        })
        .join()
        .unwrap();
    assert_eq!(&echoed, b"ping");

    // 4. The last runtime ends (its carrier and monitor have exited): the
    //    poller thread is the waiter again.
    drop(rt);
    while os_thread_named("np-0") || os_thread_named("np-monitor") {
        std::thread::yield_now();
    }
    assert_eq!(os_thread_waits_for_data(), b"ready");
}

#[test]
fn readiness_reaches_every_waiter_across_hand_overs() {
    sequence();
    if common::is_child("readiness_reaches_every_waiter_across_hand_overs") {
        return;
    }
    let out = common::run_child(
        "readiness_reaches_every_waiter_across_hand_overs",
        &[("WEFT_NETPOLL", "thread")],
    );
    assert!(
        out.status.success(),
        "with WEFT_NETPOLL=thread: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
