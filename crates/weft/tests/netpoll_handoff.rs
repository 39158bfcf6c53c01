//! The waiter role (`weft`'s `netpoll` module) outlives the carrier that
//! held it.
//!
//! Two runtimes share the process's one readiness source. While the first
//! runtime's carrier holds the waiter role (asleep in the source), the
//! second runtime's carrier, finding the role taken, sleeps on its futex,
//! and its monitor, seeing every carrier asleep, stops ticking. The first
//! runtime then ends. An event for a thread of the second runtime must
//! still be fetched: the leaving carrier hands the role on.
//!
//! Every step waits for an observable state (the OS threads' system calls
//! in `/proc`), so the test takes the same path each run. One test per
//! binary: it counts on being the only user of runtimes in the process.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weft::Runtime;
use weft_bench_support::watchdog::Watchdog;

const LIMIT: Duration = Duration::from_secs(60);
/// Bound of each step's wait (well inside the watchdog's `LIMIT`).
const STEP: Duration = Duration::from_secs(20);

/// The system call OS thread `name` is blocked in (`None`: running, gone).
fn blocked_in(name: &str) -> Option<i64> {
    common::tid_named(name).and_then(common::syscall_of)
}

fn in_epoll(name: &str) -> bool {
    matches!(
        blocked_in(name),
        Some(libc::SYS_epoll_pwait | libc::SYS_epoll_pwait2 | libc::SYS_epoll_wait)
    )
}

fn in_futex(name: &str) -> bool {
    blocked_in(name) == Some(libc::SYS_futex)
}

fn one_carrier(name: &str) -> Runtime {
    Runtime::builder()
        .name(name)
        .parallelism(1)
        .max_pool_size(1)
        .build()
        .unwrap()
}

#[test]
fn the_waiter_role_is_handed_on_when_its_carrier_leaves() {
    let _dog = Watchdog::new("netpoll role hand-off", LIMIT, || {
        "a readiness event reached no one: the waiter role left with its carrier".into()
    });
    // The readiness source, and a connected pair registered in it.
    let l = weft::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut server, _) = l.accept().unwrap();

    // 1. The first runtime's carrier, idle, takes the role: it sleeps in
    //    the source.
    let first = one_carrier("hold");
    common::wait_until("hold-0 asleep in epoll", STEP, || in_epoll("hold-0"));

    // 2. The second runtime's only thread waits for data; its carrier finds
    //    the role taken and sleeps on its futex; its monitor stops ticking.
    let second = one_carrier("keep");
    let reading = Arc::new(AtomicBool::new(false));
    let reader = {
        let reading = reading.clone();
        second.spawn(move || {
            reading.store(true, Ordering::SeqCst);
            let mut buf = [0u8; 5];
            server.read_exact(&mut buf).unwrap();
            buf
        })
    };
    common::wait_until("the reader to start", STEP, || {
        reading.load(Ordering::SeqCst)
    });
    common::wait_until(
        "keep-0 on its futex, keep-monitor in deep sleep, hold-0 in epoll",
        STEP,
        || in_futex("keep-0") && in_futex("keep-monitor") && in_epoll("hold-0"),
    );

    // 3. The first runtime ends.
    drop(first);
    common::wait_until("hold-0 to exit", STEP, || {
        common::tid_named("hold-0").is_none()
    });

    // 4. The event: someone must fetch it.
    client.write_all(b"ready").unwrap();
    assert_eq!(
        &common::join_within("reader", STEP, reader).unwrap(),
        b"ready"
    );
}
