//! A cgroup with a CPU quota for tests that run a child in it (root and a
//! cgroup `cpu` controller: v1's `/sys/fs/cgroup/cpu`, or v2).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A cgroup with a quota, removed on drop.
pub struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// `quota_us` per 100 ms period; `None` where no cgroup can be made.
    pub fn make(quota_us: u64) -> Option<Cgroup> {
        let name = format!(
            "weft-test-{}-{quota_us}-{}",
            std::process::id(),
            std::thread::current()
                .name()
                .unwrap_or("t")
                .replace("::", "-")
        );
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

    /// Runs test `name` of this test binary inside this cgroup, with
    /// `child_var` set (the child tells itself apart by it).
    pub fn run_test(&self, name: &str, child_var: &str) -> Output {
        let exe = std::env::current_exe().unwrap();
        let procs = self.dir.join("cgroup.procs");
        Command::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > '{}' && exec \"$0\" \"$@\"",
                procs.display()
            ))
            .arg(exe)
            .args(["--exact", name, "--nocapture"])
            .env(child_var, "1")
            .env_remove("WEFT_PARALLELISM")
            .output()
            .expect("run the child")
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The number after `key=` in a child's output (the harness may print the
/// test's name on the same line).
pub fn reported(out: &Output, key: &str) -> u64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = stdout
        .split(&format!("{key}="))
        .nth(1)
        .unwrap_or_else(|| panic!("no {key}= in {stdout:?}"));
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}
