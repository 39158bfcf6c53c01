//! How many carriers a runtime starts by default: the CPUs this process may
//! run on, lowered to its cgroup's CPU limit rounded *up*.
//!
//! A container or a systemd slice often caps a process's CPU time with a
//! quota — `cpu.max` in cgroup v2, `cpu.cfs_quota_us` / `cpu.cfs_period_us`
//! in v1: so many microseconds of CPU per period, across all its threads.
//! A process that starts a carrier per core of the host under a quota of
//! 1.5 CPUs spends the quota early in each period and is then throttled,
//! every thread at once, for the rest of it. So the default follows the
//! limit, as Java's `availableProcessors` and Go 1.25's `GOMAXPROCS` do.
//!
//! The limit is rounded up, as Java and Go round it: a quota of 1.5 CPUs
//! gets 2 carriers, whose extra half the kernel's throttling takes back,
//! where 1 carrier would leave half a CPU unused. (`std::thread::
//! available_parallelism` rounds down: 1.) The most restrictive limit on
//! the path from the process's cgroup up to the root counts, since a
//! parent's quota binds its children.
//!
//! Read once per runtime, when it is built: a limit changed later does not
//! change the carrier count (`WEFT_PARALLELISM` or
//! `RuntimeBuilder::parallelism` set it explicitly).

use std::path::{Path, PathBuf};

/// The default parallelism: the CPUs of this thread's affinity mask,
/// lowered to the cgroup CPU limit rounded up; at least 1.
pub(crate) fn default_parallelism() -> usize {
    // Not `available_parallelism` first: it reads the cgroup files too and
    // rounds the quota down; it is only the fallback.
    let cpus = affinity_cpus()
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    match cgroup_limit() {
        Some(limit) => cpus.min(limit).max(1),
        None => cpus,
    }
}

/// CPUs in this thread's affinity mask.
fn affinity_cpus() -> Option<usize> {
    // SAFETY: `cpu_set_t` is plain data; zeroed is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return None;
    }
    // SAFETY: `set` was filled in by `sched_getaffinity` above.
    let n = unsafe { libc::CPU_COUNT(&set) };
    usize::try_from(n).ok().filter(|&n| n > 0)
}

/// The CPU limit of this process's cgroups, rounded up, or `None` if there
/// is none (or it cannot be read).
fn cgroup_limit() -> Option<usize> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<usize> = None;
    for dir in limit_dirs(&cgroups, &mountinfo) {
        if let Some(n) = dir_limit(&dir) {
            best = Some(best.map_or(n, |b| b.min(n)));
        }
    }
    best
}

/// The limit set in one cgroup directory (v2 `cpu.max`, else v1's pair).
fn dir_limit(dir: &Path) -> Option<usize> {
    if let Ok(s) = std::fs::read_to_string(dir.join("cpu.max")) {
        return parse_cpu_max(&s);
    }
    let quota = std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).ok()?;
    let period = std::fs::read_to_string(dir.join("cpu.cfs_period_us")).ok()?;
    let quota: i64 = quota.trim().parse().ok()?;
    let period: u64 = period.trim().parse().ok()?;
    // -1: no quota.
    cpus_of(u64::try_from(quota).ok()?, period)
}

/// v2's `cpu.max`: `"$MAX $PERIOD"`, `$MAX` being `max` for no limit.
fn parse_cpu_max(s: &str) -> Option<usize> {
    let mut words = s.split_whitespace();
    let max = words.next()?;
    let period: u64 = words.next().map_or(Some(100_000), |p| p.parse().ok())?;
    cpus_of(max.parse().ok()?, period)
}

/// A quota of `quota` µs per `period` µs, in CPUs rounded up.
fn cpus_of(quota: u64, period: u64) -> Option<usize> {
    if quota == 0 || period == 0 {
        return None;
    }
    usize::try_from(quota.div_ceil(period)).ok()
}

/// Every directory on the path from this process's cgroups up to their
/// roots that may hold a CPU limit: the v2 (unified) hierarchy and v1's
/// `cpu` controller, wherever they are mounted.
fn limit_dirs(cgroups: &str, mountinfo: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for line in cgroups.lines() {
        // "hierarchy-ID:controller-list:path"
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let v2 = controllers.is_empty();
        if !v2 && !controllers.split(',').any(|c| c == "cpu") {
            continue;
        }
        let Some((root, mount)) = mount_of(mountinfo, v2) else {
            continue;
        };
        // The cgroup path as seen from the mount: inside a cgroup
        // namespace the mount's root is the namespace's root.
        let rel = path.strip_prefix(root.as_str()).unwrap_or(path);
        let mut dir = PathBuf::from(&mount);
        dirs.push(dir.clone());
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            dir.push(part);
            dirs.push(dir.clone());
        }
    }
    dirs
}

/// The (root, mount point) of the v2 hierarchy, or of v1's `cpu`
/// controller, from `/proc/self/mountinfo`.
fn mount_of(mountinfo: &str, v2: bool) -> Option<(String, String)> {
    for line in mountinfo.lines() {
        // "id parent major:minor root mount-point options ... - fstype source super-options"
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        if fields.len() < 5 || right.len() < 3 {
            continue;
        }
        let ok = if v2 {
            right[0] == "cgroup2"
        } else {
            right[0] == "cgroup" && right[2].split(',').any(|o| o == "cpu")
        };
        if ok {
            return Some((fields[3].to_string(), unescape(fields[4])));
        }
    }
    None
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 4]).unwrap_or("x"), 8)
        {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_rounds_up() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("150000 100000\n"), Some(2));
        assert_eq!(parse_cpu_max("50000 100000"), Some(1));
        assert_eq!(parse_cpu_max("200000 100000"), Some(2));
        assert_eq!(parse_cpu_max("200001 100000"), Some(3));
        assert_eq!(parse_cpu_max("0 100000"), None);
        assert_eq!(parse_cpu_max("garbage"), None);
        assert_eq!(parse_cpu_max(""), None);
    }

    #[test]
    fn finds_v1_and_v2_directories() {
        let mountinfo = "\
25 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
27 25 0:24 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
28 25 0:25 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        let cgroups = "\
4:memory:/a
1:cpu:/svc/web
0::/u/v
";
        let dirs = limit_dirs(cgroups, mountinfo);
        let dirs: Vec<_> = dirs.iter().map(|d| d.to_str().unwrap()).collect();
        assert_eq!(
            dirs,
            [
                "/sys/fs/cgroup/cpu",
                "/sys/fs/cgroup/cpu/svc",
                "/sys/fs/cgroup/cpu/svc/web",
                "/sys/fs/cgroup/unified",
                "/sys/fs/cgroup/unified/u",
                "/sys/fs/cgroup/unified/u/v",
            ]
        );
    }

    #[test]
    fn a_namespaced_mount_strips_its_root() {
        let mountinfo = "26 25 0:23 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let dirs = limit_dirs("0::/kubepods/pod1/c\n", mountinfo);
        let dirs: Vec<_> = dirs.iter().map(|d| d.to_str().unwrap()).collect();
        assert_eq!(dirs, ["/sys/fs/cgroup", "/sys/fs/cgroup/c"]);
    }

    #[test]
    fn mount_points_unescape() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }

    #[test]
    fn the_default_is_at_least_one_and_at_most_the_cpus() {
        let n = default_parallelism();
        assert!(n >= 1);
        assert!(n <= affinity_cpus().unwrap_or(n));
    }
}
