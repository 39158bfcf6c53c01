//! A process's first emulated futex waits, made at once on two carriers.
//!
//! The first wait to park reads `WEFT_FUTEX_RECHECK_MS` (`transparent::queue`),
//! once per process. A second wait that came meanwhile used to wait for
//! that read on a once-cell's futex, through the very emulation it was
//! in, which read the cell again: unbounded recursion, and the process
//! aborted with a stack overflow (3 times in about 4,200 runs of
//! `crates.rs`). Now every futex wait made inside the emulation goes to
//! the kernel, and the read does not wait at all.
//!
//! The cell is per process, so each round is a fresh child (this test run
//! again), with 40,000 variables in its environment so that the read
//! takes long enough for the other carrier's first wait to arrive.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft_transparent_tests::{parked_in, strict_runtime, watchdog};

const CHILD: &str = "WEFT_TEST_FIRST_FUTEX_WAITS_CHILD";
const ROUNDS: usize = 8;
const THREADS: usize = 64;
/// Variables added to each child's environment.
const PADDING: usize = 40_000;

#[test]
fn first_futex_waits_at_once_on_two_carriers() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    let _dog = watchdog("first_futex_waits_at_once", Duration::from_secs(120));
    for round in 0..ROUNDS {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "first_futex_waits_at_once_on_two_carriers",
            "--test-threads=1",
        ])
        .env(CHILD, "1");
        // Names sharing the variable's prefix: glibc's `getenv` compares
        // each one that far (about 0.5 ms for the lot).
        for i in 0..PADDING {
            cmd.env(format!("WEFT_FUTEX_RECHECK_MS_PADDING_{i}"), "x");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "round {round}: the child failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Many virtual threads on two carriers wait for a lock the main thread
/// holds: the process's first emulated futex waits.
fn child() {
    let rt = strict_runtime(2);
    let lock = Arc::new(Mutex::new(0usize));
    let held = lock.lock().unwrap();
    let waiters: Vec<_> = (0..THREADS)
        .map(|_| {
            let l = lock.clone();
            rt.spawn(move || *l.lock().unwrap() += 1)
        })
        .collect();
    for w in &waiters {
        parked_in(w, "futex");
    }
    drop(held);
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(*lock.lock().unwrap(), THREADS);
}
