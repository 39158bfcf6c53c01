//! A futex wait that goes to the kernel on a virtual thread (inside
//! `weft::pinned`, so the emulation leaves it alone) hands the carrier's
//! other threads off when it begins (`thread::hold_carrier`), not when
//! the monitor finds the carrier held: one carrier, a stall threshold of
//! an hour, and a started thread bound to that carrier must answer a ping
//! while its carrier waits for a `std::sync::Mutex` an OS thread holds.
//! Before, it waited behind the carrier until the mutex was released:
//! the test stopped at its watchdog. No time is asserted.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const STUCK: Duration = Duration::from_secs(120);

/// The kernel's state letter and system call number of thread `tid`.
fn kernel_wait(tid: i32) -> Option<(char, i64)> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let state = stat[stat.rfind(')')? + 1..].trim_start().chars().next()?;
    let call = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    Some((state, call.split_whitespace().next()?.parse().ok()?))
}

#[test]
fn a_pinned_futex_wait_hands_the_carrier_off() {
    if std::env::var_os("WEFT_THREAD_LOCALS").is_some() {
        eprintln!("skipped: threads without areas of their own never move");
        return;
    }
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .stall_threshold(Duration::from_secs(3600))
        .build()
        .unwrap();
    let (ping, pings) = weft::channel::unbounded::<u32>();
    let (pong, pongs) = std::sync::mpsc::channel::<u32>();
    let echo = rt.spawn(move || {
        for n in pings {
            pong.send(n).unwrap();
        }
    });
    ping.send(1).unwrap();
    assert_eq!(pongs.recv_timeout(STUCK), Ok(1), "first ping");
    let lock = Arc::new(Mutex::new(0u32));
    let held = lock.lock().unwrap();
    let (l2, (tid_tx, tid_rx)) = (lock.clone(), std::sync::mpsc::channel());
    let waiter = rt.spawn(move || {
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() }).unwrap();
        weft::pinned(|| *l2.lock().unwrap() += 1);
    });
    let tid = tid_rx.recv_timeout(STUCK).unwrap();
    let t0 = Instant::now();
    while kernel_wait(tid) != Some(('S', libc::SYS_futex)) {
        assert!(t0.elapsed() < STUCK, "the carrier never waited");
        std::thread::sleep(Duration::from_millis(1));
    }
    ping.send(2).unwrap();
    let answer = pongs.recv_timeout(STUCK);
    drop(held);
    assert_eq!(
        answer,
        Ok(2),
        "the bound thread did not run while its carrier waited"
    );
    waiter.join().unwrap();
    assert_eq!(*lock.lock().unwrap(), 1);
    drop(ping);
    echo.join().unwrap();
}
