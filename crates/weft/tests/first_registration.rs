//! The first descriptor a process registers reaches a carrier asleep on
//! its futex.
//!
//! Until a descriptor is registered, carriers sleep on their futex, not in
//! the readiness source (`weft`'s `netpoll` module, rule 2: a futex wake
//! is the cheaper kick), and with every carrier asleep the monitor stops
//! ticking. So when an OS thread then registers a socket and waits on it,
//! nothing fetches the socket's event unless the registration hands the
//! waiter role on: it kicks the sleepers, and one takes the role. Without
//! that this test stops at its watchdog.
//!
//! Every step waits for an observable state (the OS threads' system calls
//! in `/proc`). One test per binary: it counts on being the process's
//! first registration.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use weft_bench_support::watchdog::Watchdog;

const LIMIT: Duration = Duration::from_secs(60);
/// Bound of each step's wait (well inside the watchdog's `LIMIT`).
const STEP: Duration = Duration::from_secs(20);

#[test]
fn the_first_registration_wakes_a_carrier_to_wait_for_its_events() {
    let _dog = Watchdog::new("first registration", LIMIT, || {
        "a readiness event reached no one: carriers slept on their futex".into()
    });
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .build()
        .unwrap();
    // SAFETY: gettid has no preconditions.
    let carrier = rt.spawn(|| unsafe { libc::gettid() }).join().unwrap();
    common::wait_until("the carrier asleep on its futex", STEP, || {
        common::syscall_of(carrier) == Some(libc::SYS_futex)
    });

    // The poller thread, started by a registration the kernel refuses
    // (epoll takes no regular file): it kicks the sleepers as it steps
    // aside for the carriers, so it must be done before the test's own
    // registration, which alone must kick them now.
    let file = std::fs::File::open("/dev/null").unwrap();
    let not_a_socket = std::os::unix::net::UnixListener::from(std::os::fd::OwnedFd::from(file));
    let refused = weft::net::UnixListener::from_std(not_a_socket).map(drop);
    assert_eq!(
        refused.map_err(|e| e.raw_os_error()),
        Err(Some(libc::EPERM)),
        "epoll takes no regular file"
    );
    common::wait_until("the poller thread stepped aside", STEP, || {
        common::tid_named("weft-poller").and_then(common::syscall_of) == Some(libc::SYS_futex)
    });
    common::wait_until("the carrier asleep on its futex again", STEP, || {
        common::syscall_of(carrier) == Some(libc::SYS_futex)
    });

    // An OS thread registers a socket and waits on it.
    let (mut a, b) = weft::net::UnixStream::pair().unwrap();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() }).unwrap();
        let mut buf = [0u8; 1];
        let n = (&b).read(&mut buf).unwrap();
        (n, buf[0])
    });
    let tid = tid_rx.recv().unwrap();
    common::wait_until("the reader waiting", STEP, || {
        common::syscall_of(tid) == Some(libc::SYS_futex)
    });
    // The carrier took the role when the registration kicked it.
    common::wait_until("the carrier asleep in the source", STEP, || {
        matches!(
            common::syscall_of(carrier),
            Some(libc::SYS_epoll_pwait | libc::SYS_epoll_pwait2 | libc::SYS_epoll_wait)
        )
    });
    a.write_all(&[7]).unwrap();
    assert_eq!(reader.join().unwrap(), (1, 7));
    drop(rt);
}
