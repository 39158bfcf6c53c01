//! Helpers shared by the integration tests (each test file includes this
//! module with `mod common;`; not every file uses every helper).
#![allow(dead_code)]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The kernel id of the calling OS thread (not a thread-local: a virtual
/// thread that moved would read its new carrier's value, which is what the
/// affinity tests look for).
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Polls `cond` until it holds, failing the test after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Joins `h` from an OS thread, failing the test (instead of hanging) if
/// the thread has not finished within `limit`.
pub fn join_within<T: Send + 'static>(
    what: &str,
    limit: Duration,
    h: weft::JoinHandle<T>,
) -> std::thread::Result<T> {
    wait_until(what, limit, || h.is_finished());
    h.join()
}

/// Set in a child process started by [`run_child`] to the test it runs.
pub const CHILD_VAR: &str = "WEFT_TEST_CHILD";

/// Whether this process is the child that runs test `name`.
pub fn is_child(name: &str) -> bool {
    std::env::var(CHILD_VAR).as_deref() == Ok(name)
}

/// Runs test `name` of this test binary in a fresh process (for tests that
/// change process-wide state or are expected to abort), with `env` set.
pub fn run_child(name: &str, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, name)
        .env_remove("WEFT_PARALLELISM");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the test binary as a child")
}
