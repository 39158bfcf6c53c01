//! `scripts/pg-test-cluster.sh`: a cluster started for a holder process
//! (`WEFT_PG_HOLDER`, as the tests and the lab start theirs) is stopped
//! once that process has ended, so a test run leaves no server behind.
//!
//! Needs PostgreSQL's binaries; without them the test is skipped with one
//! line, unless `CI=true`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/pg-test-cluster.sh")
}

fn run(cmd: &str, dir: &Path, holder: Option<u32>) -> Output {
    let mut c = Command::new("bash");
    c.arg(script())
        .arg(cmd)
        .arg(dir)
        .env_remove("WEFT_PG_HOLDER");
    if let Some(pid) = holder {
        c.env("WEFT_PG_HOLDER", pid.to_string());
    }
    c.output().expect("run pg-test-cluster.sh")
}

/// Whether the cluster in `dir` runs (`env` succeeds only then).
fn running(dir: &Path) -> bool {
    run("env", dir, None).status.success()
}

/// Removes the cluster's directory and lock file, stopping it first.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = run("stop", &self.0, None);
        let _ = std::fs::remove_dir_all(&self.0);
        let mut lock = self.0.clone().into_os_string();
        lock.push(".lock");
        let _ = std::fs::remove_file(lock);
    }
}

#[test]
fn a_held_cluster_stops_when_its_last_holder_ends() {
    let dir = std::env::temp_dir().join(format!("weft-pg-holder-test-{}", std::process::id()));
    let _cleanup = Cleanup(dir.clone());
    // Two holders, as two test processes sharing the cluster.
    let mut first = Command::new("sleep").arg("3600").spawn().expect("sleep");
    let mut second = Command::new("sleep").arg("3600").spawn().expect("sleep");
    let out = run("start", &dir, Some(first.id()));
    if out.status.code() == Some(3) {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(!ci, "CI=true but no PostgreSQL binaries");
        eprintln!("no PostgreSQL binaries: skipping the holder test");
        let _ = (first.kill(), second.kill(), first.wait(), second.wait());
        return;
    }
    assert!(
        out.status.success(),
        "start failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(run("start", &dir, Some(second.id())).status.success());
    assert!(running(&dir));

    // The first holder ends: the second still holds it. The reaper looks
    // once a second, so this waits for it to have looked twice: its pid
    // file for the first holder is gone.
    first.kill().expect("kill the first holder");
    first.wait().expect("reap the first holder");
    let first_entry = dir.join("holders").join(first.id().to_string());
    wait_for("the reaper to drop the first holder", || {
        !first_entry.exists()
    });
    assert!(running(&dir), "stopped while a holder was alive");

    // The last holder ends: the server stops.
    second.kill().expect("kill the second holder");
    second.wait().expect("reap the second holder");
    wait_for("the server to stop", || !running(&dir));
}

/// Polls `cond` until it holds; fails after a minute (a reaper that never
/// acts, not a slow one: it looks once a second).
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "gave up waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
