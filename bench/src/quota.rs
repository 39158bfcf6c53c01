//! `--cpu-quota CPUS`: every worker (the servers and the measured
//! programs, not the load generator) runs in a cgroup of its own with a CPU
//! quota, as a container with a CPU limit does.
//!
//! Needs root and a cgroup `cpu` controller: cgroup v1's
//! (`/sys/fs/cgroup/cpu/`, `cpu.cfs_quota_us` per `cpu.cfs_period_us`) or
//! v2's (`cpu.max`, in a child of the root whose `cgroup.subtree_control`
//! has `+cpu`). A worker joins the cgroup before it `exec`s (a shell
//! writes its own pid to `cgroup.procs`), so its runtime sees the quota
//! from its first instruction — Weft's and Go's default carrier counts
//! follow it. The cgroup is removed when the run ends.

use std::path::PathBuf;

use crate::proc::Launcher;

/// The quota's period: 100 ms, the kernel's default.
const PERIOD_US: u64 = 100_000;

/// A cgroup with a CPU quota, removed when dropped.
pub struct CpuQuota {
    dir: PathBuf,
    /// Its `cgroup.procs`.
    procs: PathBuf,
    /// The quota in CPUs, for the report.
    pub cpus: f64,
}

impl CpuQuota {
    /// Makes `weft-bench-<pid>` with a quota of `cpus` CPUs.
    pub fn create(cpus: f64) -> Result<CpuQuota, String> {
        if !(cpus.is_finite() && cpus >= 0.01) {
            return Err(format!(
                "--cpu-quota {cpus}: give a number of CPUs, at least 0.01"
            ));
        }
        let quota_us = (cpus * PERIOD_US as f64).round() as u64;
        let name = format!("weft-bench-{}", std::process::id());
        let v1 = PathBuf::from("/sys/fs/cgroup/cpu");
        let v2 = PathBuf::from("/sys/fs/cgroup");
        let (dir, files) = if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(&name);
            (
                dir.clone(),
                vec![
                    (dir.join("cpu.cfs_period_us"), PERIOD_US.to_string()),
                    (dir.join("cpu.cfs_quota_us"), quota_us.to_string()),
                ],
            )
        } else if v2.join("cgroup.controllers").exists() {
            // The cpu controller must be enabled for the root's children.
            let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+cpu");
            let dir = v2.join(&name);
            (
                dir.clone(),
                vec![(dir.join("cpu.max"), format!("{quota_us} {PERIOD_US}"))],
            )
        } else {
            return Err("--cpu-quota: no cgroup cpu controller at /sys/fs/cgroup/cpu (v1) or /sys/fs/cgroup (v2)".into());
        };
        std::fs::create_dir(&dir).map_err(|e| {
            format!(
                "--cpu-quota: cannot create {} (needs root): {e}",
                dir.display()
            )
        })?;
        let made = CpuQuota {
            procs: dir.join("cgroup.procs"),
            dir,
            cpus,
        };
        for (file, value) in files {
            std::fs::write(&file, &value).map_err(|e| {
                format!(
                    "--cpu-quota: cannot write {value} to {}: {e}",
                    file.display()
                )
            })?;
        }
        Ok(made)
    }

    /// `launcher`, started inside the cgroup: `sh -c 'echo $$ > procs &&
    /// exec "$0" "$@"' program prefix…` (the same process, so its pid and
    /// peak RSS are the worker's).
    pub fn wrap(&self, launcher: &Launcher) -> Launcher {
        let mut prefix = vec![
            "-c".to_string(),
            format!("echo $$ > '{}' && exec \"$0\" \"$@\"", self.procs.display()),
            launcher.program.display().to_string(),
        ];
        prefix.extend(launcher.prefix.iter().cloned());
        Launcher {
            program: PathBuf::from("/bin/sh"),
            prefix,
        }
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        // Empty by now: every worker has been waited for.
        let _ = std::fs::remove_dir(&self.dir);
    }
}
