//! The default carrier count follows a cgroup CPU quota, rounded up
//! (`cpu_limit.rs`): this test binary runs itself again inside a cgroup
//! with a quota, and the child reports the parallelism of a runtime built
//! with the defaults.
//!
//! Needs root and a cgroup `cpu` controller (v1's `/sys/fs/cgroup/cpu`,
//! or v2); elsewhere it says so on stderr and checks nothing.

mod common;

use common::cgroup::{Cgroup, reported};

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

/// The parallelism a child reports, run inside `cg`.
fn child_parallelism(cg: &Cgroup) -> u64 {
    reported(
        &cg.run_test("child_reports_parallelism", CHILD),
        "PARALLELISM",
    )
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
    assert_eq!(child_parallelism(&half), 1, "0.5 CPUs: one carrier");
    drop(half);
    let one_and_half = Cgroup::make(150_000).expect("a second cgroup");
    // std's `available_parallelism` rounds 1.5 down to 1; Java and Go, and
    // Weft, round it up.
    assert_eq!(
        child_parallelism(&one_and_half),
        cpus.min(2) as u64,
        "1.5 CPUs: two carriers (at most the CPUs)"
    );
}
