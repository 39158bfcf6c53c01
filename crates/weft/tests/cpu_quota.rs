//! The default carrier count follows a cgroup CPU quota, rounded up
//! (`cpu_limit.rs`): this test binary runs itself again inside a cgroup
//! with a quota, and the child reports the parallelism of a runtime built
//! with the defaults.
//!
//! Needs root and a cgroup `cpu` controller (v1's `/sys/fs/cgroup/cpu`,
//! or v2); elsewhere it says so on stderr and checks nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

const CHILD: &str = "WEFT_CPU_QUOTA_CHILD";

/// In the child: prints the default parallelism.
#[test]
fn child_reports_parallelism() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let rt = weft::Runtime::builder().build().expect("runtime");
    println!("PARALLELISM={}", rt.parallelism());
}

/// A cgroup with a quota, removed on drop.
struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// `quota_us` per 100 ms period; `None` where no cgroup can be made.
    fn make(quota_us: u64) -> Option<Cgroup> {
        let name = format!("weft-test-{}-{quota_us}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let v2 = Path::new("/sys/fs/cgroup");
        if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(name);
            std::fs::create_dir(&dir).ok()?;
            let cg = Cgroup { dir };
            std::fs::write(cg.dir.join("cpu.cfs_period_us"), "100000").ok()?;
            std::fs::write(cg.dir.join("cpu.cfs_quota_us"), quota_us.to_string()).ok()?;
            Some(cg)
        } else if v2.join("cgroup.controllers").exists() {
            let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+cpu");
            let dir = v2.join(name);
            std::fs::create_dir(&dir).ok()?;
            let cg = Cgroup { dir };
            std::fs::write(cg.dir.join("cpu.max"), format!("{quota_us} 100000")).ok()?;
            Some(cg)
        } else {
            None
        }
    }

    /// The child's parallelism, run inside this cgroup.
    fn child_parallelism(&self) -> usize {
        let exe = std::env::current_exe().unwrap();
        let procs = self.dir.join("cgroup.procs");
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > '{}' && exec \"$0\" \"$@\"",
                procs.display()
            ))
            .arg(exe)
            .args(["--exact", "child_reports_parallelism", "--nocapture"])
            .env(CHILD, "1")
            .env_remove("WEFT_PARALLELISM")
            .output()
            .expect("run the child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The harness may print the test's name on the same line.
        let after = stdout
            .split("PARALLELISM=")
            .nth(1)
            .unwrap_or_else(|| panic!("no PARALLELISM= in {stdout:?}"));
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().unwrap()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[test]
fn the_default_carrier_count_follows_the_quota_rounded_up() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let cpus = std::thread::available_parallelism().unwrap().get();
    let Some(half) = Cgroup::make(50_000) else {
        eprintln!(
            "skipped: making a cgroup with a CPU quota needs root and a cgroup cpu controller"
        );
        return;
    };
    assert_eq!(half.child_parallelism(), 1, "0.5 CPUs: one carrier");
    drop(half);
    let one_and_half = Cgroup::make(150_000).expect("a second cgroup");
    // std's `available_parallelism` rounds 1.5 down to 1; Java and Go, and
    // Weft, round it up.
    assert_eq!(
        one_and_half.child_parallelism(),
        cpus.min(2),
        "1.5 CPUs: two carriers (at most the CPUs)"
    );
}
