//! A carrier the kernel keeps off the CPU is not a stalled carrier
//! (`sched/schedstat.rs`, ARCHITECTURE.md "Sharing the cores").
//!
//! The test binary runs itself again in a cgroup with a CPU quota of
//! 10 ms per 100 ms period: every period the kernel throttles the whole
//! process for about 90 ms, in the middle of whatever a carrier runs. The
//! child's virtual threads compute in bursts of tens of microseconds and
//! yield, so no thread ever holds a carrier for long; the monitor, which
//! used to take a carrier seen on one switch for 20 ms as held, reported
//! those throttled carriers as stalled, brought in spare carriers and
//! handed threads off. Now it subtracts the carrier's run-queue wait and
//! must report nothing, start no spare and move no thread. A thread that
//! does compute for 60 ms of CPU time in the same cgroup must still be
//! reported as a stall: the check is not simply switched off.
//!
//! Needs root and a cgroup `cpu` controller; elsewhere it says so on
//! stderr and checks nothing.

mod common;

use common::cgroup::{Cgroup, reported};
use std::time::Duration;

const CHILD: &str = "WEFT_THROTTLED_CHILD";

/// Work units of about 20 µs each (a multiply-xorshift hash).
fn burst(units: u32) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..units * 4_000 {
        x = std::hint::black_box(x.wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ (x >> 31));
    }
    x
}

/// CPU time of the calling OS thread (on a virtual thread: its carrier's).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(r, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// In the child: short holds only, then one long computation; prints
/// what the monitor made of each.
#[test]
fn child_runs_throttled() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    // Covering off: throttled carriers wait for a CPU longer than they
    // run, and would cover for each other, which moves threads too; the
    // test is about handoff, which must not take throttling for a hold.
    let rt = weft::Runtime::builder()
        .parallelism(2)
        .stall_threshold(Duration::from_millis(20))
        .cover_carriers(false)
        .build()
        .expect("runtime");
    // About 150 ms of CPU in bursts of 20-60 µs: at 10 % of a CPU, well
    // over a second of throttled periods.
    let workers: Vec<_> = (0..4)
        .map(|i| {
            rt.spawn(move || {
                let mut acc = 0u64;
                for round in 0..600u32 {
                    acc ^= burst(1 + (round + i) % 3);
                    weft::yield_now();
                }
                acc
            })
        })
        .collect();
    for h in workers {
        h.join().expect("a worker");
    }
    let m = weft::metrics::snapshot();
    let stalls = weft::events::counters().stalls;
    println!("SHORT_STALLS={stalls}");
    println!("SHORT_SPARES={}", m.spares_started);
    println!("SHORT_MOVED={}", m.threads_moved);
    // The control: one thread computing for 60 ms of its carrier's CPU
    // time, past the threshold however the quota spreads it.
    rt.spawn(|| {
        let t0 = thread_cpu();
        while thread_cpu() - t0 < Duration::from_millis(60) {
            burst(10);
        }
    })
    .join()
    .expect("the long computation");
    common::wait_until(
        "the long computation's stall",
        Duration::from_secs(60),
        || weft::events::counters().stalls > stalls,
    );
    println!("LONG_STALLS={}", weft::events::counters().stalls - stalls);
}

#[test]
fn a_throttled_carrier_is_not_a_stalled_one() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let Some(cg) = Cgroup::make(10_000) else {
        eprintln!(
            "skipped: making a cgroup with a CPU quota needs root and a cgroup cpu controller"
        );
        return;
    };
    let out = cg.run_test("child_runs_throttled", CHILD);
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        reported(&out, "SHORT_STALLS"),
        0,
        "stalls reported for short holds"
    );
    assert_eq!(
        reported(&out, "SHORT_SPARES"),
        0,
        "spares started for short holds"
    );
    assert_eq!(
        reported(&out, "SHORT_MOVED"),
        0,
        "threads moved for short holds"
    );
    assert!(reported(&out, "LONG_STALLS") >= 1);
}
