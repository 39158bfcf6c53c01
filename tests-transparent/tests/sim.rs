//! `weft::sim` under `transparent`: std's clock, sleep and entropy inside a
//! simulation are the simulation's.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `std::thread::sleep` and `Instant::now` in virtual time: an hour of
/// sleeping is an hour on `Instant`, and the same as `weft::sim::now`.
#[test]
fn std_sleep_and_instant_are_virtual() {
    let real = Instant::now();
    let r = weft::sim::run(1, || {
        let t0 = Instant::now();
        let w0 = weft::sim::now();
        assert_eq!(t0, w0, "std and weft read one clock");
        std::thread::sleep(Duration::from_secs(3600));
        (Instant::now() - t0, weft::sim::now() - w0)
    })
    .unwrap();
    assert_eq!(r.value.0, Duration::from_secs(3600));
    assert_eq!(r.value.1, Duration::from_secs(3600));
    assert_eq!(r.elapsed, Duration::from_secs(3600));
    // No real hour passed (not a timing: a statement that nothing slept).
    assert!(real.elapsed() < Duration::from_secs(600));
    // Outside, the real clock again.
    assert!(Instant::now() >= real);
}

/// `SystemTime::now` starts at the same instant in every run and moves
/// with virtual time.
#[test]
fn system_time_is_the_same_in_every_run() {
    let f = || {
        let a = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        let b = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        (a, b)
    };
    let x = weft::sim::run(2, f).unwrap().value;
    let y = weft::sim::run(3, f).unwrap().value;
    assert_eq!(x, y);
    assert_eq!(x.1 - x.0, Duration::from_millis(1500));
    // 2025-01-01T00:00:00Z.
    assert_eq!(x.0, Duration::from_secs(1_735_689_600));
}

/// `getrandom` (and with it `HashMap`'s keys) is drawn from the seed: one
/// seed, one iteration order; another seed, other keys.
#[test]
fn entropy_comes_from_the_seed() {
    let f = || {
        let mut buf = [0u8; 16];
        // SAFETY: 16 writable bytes.
        let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
        assert_eq!(n, 16);
        let m: HashMap<u32, u32> = (0..64).map(|i| (i, i)).collect();
        (buf, m.keys().copied().collect::<Vec<_>>())
    };
    let a = weft::sim::run(4, f).unwrap().value;
    let b = weft::sim::run(4, f).unwrap().value;
    let c = weft::sim::run(5, f).unwrap().value;
    assert_eq!(a, b);
    assert_ne!(a.0, c.0);
    // Outside a simulation, real entropy: two reads differ.
    let mut x = [0u8; 16];
    let mut y = [0u8; 16];
    // SAFETY: 16 writable bytes each.
    unsafe {
        libc::getrandom(x.as_mut_ptr().cast(), 16, 0);
        libc::getrandom(y.as_mut_ptr().cast(), 16, 0);
    }
    assert_ne!(x, y);
}

/// A std `Mutex` held across a sleep by one thread and wanted by another:
/// the futex wait parks (no carrier is blocked), in virtual time.
#[test]
fn std_mutex_waits_are_simulated() {
    let r = weft::sim::run(6, || {
        let m = std::sync::Arc::new(std::sync::Mutex::new(0u32));
        let m2 = m.clone();
        let h = weft::spawn(move || {
            let mut g = m2.lock().unwrap();
            std::thread::sleep(Duration::from_secs(10));
            *g += 1;
        });
        weft::yield_now();
        *m.lock().unwrap() += 1;
        h.join().unwrap();
        *m.lock().unwrap()
    })
    .unwrap();
    assert_eq!(r.value, 2);
}

/// C's `gettimeofday` and `time` agree with `SystemTime` inside a simulation.
#[test]
fn gettimeofday_reads_the_simulated_clock() {
    let r = weft::sim::run(7, || {
        std::thread::sleep(Duration::from_millis(2500));
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        // SAFETY: one writable timeval; tz null.
        assert_eq!(
            unsafe { libc::gettimeofday(&mut tv, std::ptr::null_mut()) },
            0
        );
        let st = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        // SAFETY: a null argument is allowed.
        let t = unsafe { libc::time(std::ptr::null_mut()) };
        assert_eq!(t, tv.tv_sec);
        (tv.tv_sec, tv.tv_usec, st)
    })
    .unwrap();
    assert_eq!((r.value.0, r.value.1), (1_735_689_602, 500_000));
    assert_eq!(r.value.2, Duration::new(1_735_689_602, 500_000_000));
}

/// An OS thread started inside a simulation would escape it: refused,
/// loudly; outside, threads start as ever.
#[test]
fn an_os_thread_started_inside_a_simulation_is_refused() {
    let r = weft::sim::run(8, || {
        std::thread::Builder::new()
            .spawn(|| ())
            .map(|_| ())
            .map_err(|e| e.kind())
    })
    .unwrap();
    assert_eq!(r.value, Err(std::io::ErrorKind::PermissionDenied));
    std::thread::spawn(|| ()).join().unwrap();
}

/// `std::net` inside a simulation would use the real network, which the
/// simulation neither sees nor replays: the socket it needs is refused
/// (`PermissionDenied`, and the first one says why on stderr) instead of
/// connecting for real. Outside, sockets work as ever.
#[test]
fn std_net_inside_a_simulation_is_refused() {
    use std::io::ErrorKind::PermissionDenied;
    let outside = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = outside.local_addr().unwrap();
    let r = weft::sim::run(9, move || {
        let kind = |r: std::io::Result<()>| r.map_err(|e| e.kind());
        (
            kind(std::net::TcpStream::connect(addr).map(drop)),
            kind(std::net::TcpListener::bind("127.0.0.1:0").map(drop)),
            kind(std::net::UdpSocket::bind("[::1]:0").map(drop)),
        )
    })
    .unwrap();
    assert_eq!(
        r.value,
        (
            Err(PermissionDenied),
            Err(PermissionDenied),
            Err(PermissionDenied)
        )
    );
    // Nothing reached the real listener.
    outside.set_nonblocking(true).unwrap();
    assert_eq!(
        outside.accept().map(drop).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::WouldBlock)
    );
    std::net::TcpStream::connect(addr).unwrap();
}

/// A real socket made outside and waited on inside a simulation: the
/// simulation has no poller and starts none (Weft's own poller thread
/// used to be refused there, with a line blaming the program for starting
/// an OS thread), so the wait holds the one carrier and the watchdog
/// reports the step stuck in a system call, with its stack.
#[test]
fn a_real_socket_waited_on_inside_a_simulation_is_reported_stuck() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let err = weft::sim::Sim::new()
        .seed(10)
        .watchdog(Duration::from_secs(2))
        .run(move || {
            let _ = listener.accept();
        })
        .unwrap_err();
    // Lets the accept return: its thread ends and its carrier leaves.
    let _ = std::net::TcpStream::connect(addr);
    match &err.outcome {
        weft::sim::Outcome::Stuck {
            in_system_call,
            thread,
            ..
        } => {
            assert_ne!(*in_system_call, Some(false), "{err}");
            assert!(thread.contains("accept"), "{err}");
        }
        other => panic!("not stuck: {other:?}"),
    }
}
