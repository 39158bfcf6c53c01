//! A computation that holds a carrier while other virtual threads wait
//! gets its OS thread lowered in priority (`sched/demote.rs`,
//! ARCHITECTURE.md "Sharing the cores"), and that OS thread leaves the
//! runtime when the computation suspends: nothing stays lowered.
//!
//! Every wait here is for progress (a flag, a nice value, an OS thread
//! gone), with a generous limit that fails the test instead of hanging;
//! nothing asserts how long anything took.

mod common;

use common::{gettid, wait_until};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

/// The calling OS thread's nice value (on a virtual thread: its
/// carrier's).
fn nice() -> i32 {
    // SAFETY: clearing errno, then getpriority of the calling thread.
    unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, 0)
    }
}

/// The nice value of this process's thread `tid`, from its `stat` (field
/// 19), or `None` once the thread has exited.
fn nice_of(tid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    after_name.split_whitespace().nth(16)?.parse().ok()
}

/// The live OS threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let Ok(e) = e else { continue };
        let name = e.file_name();
        let Some(tid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.starts_with(prefix) {
            out.push(tid);
        }
    }
    out
}

/// Computes, checking `done` every few microseconds of work, until it
/// holds; fails the test after [`LIMIT`].
fn compute_until(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while !done() {
        for _ in 0..2_000 {
            x = std::hint::black_box(x.wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ (x >> 31));
        }
        assert!(
            t0.elapsed() < LIMIT,
            "computed for {LIMIT:?} without {what}"
        );
    }
}

fn runtime(name: &str, nice: Option<u8>) -> weft::Runtime {
    let mut b = weft::Runtime::builder()
        .name(name)
        .parallelism(1)
        .stall_threshold(Duration::from_millis(20));
    if let Some(n) = nice {
        b = b.held_carrier_nice(n);
    }
    b.build().expect("runtime")
}

/// Two virtual threads that yield to each other until `stop`: threads
/// that run briefly, as a server's do. Sets `ran` once they have run.
fn chatter(stop: &Arc<AtomicBool>, ran: &Arc<AtomicBool>) -> Vec<weft::JoinHandle<()>> {
    (0..2)
        .map(|_| {
            let (stop, ran) = (stop.clone(), ran.clone());
            weft::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    ran.store(true, Ordering::SeqCst);
                    weft::yield_now();
                }
            })
        })
        .collect()
}

/// One carrier; a thread computes on it and starts two that yield to each
/// other, which queue behind it. The monitor hands them to a spare and,
/// seeing them run there, lowers the computing carrier (the default nice value, 5);
/// an OS thread started during the lowered hold starts at nice 0; when
/// the computation ends the lowered OS thread exits and a new one serves
/// the slot at nice 0.
#[test]
fn a_computation_beside_short_threads_is_lowered_and_its_carrier_leaves() {
    let rt = runtime("held-lowered", None);
    let (stop, ran) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, r) = (stop.clone(), ran.clone());
    let (held_tid, child_nice, chat) = rt
        .spawn(move || {
            let tid = gettid();
            let chat = chatter(&s, &r);
            compute_until("the queued threads running elsewhere", || {
                r.load(Ordering::SeqCst)
            });
            compute_until("the carrier lowered to the default nice value", || {
                nice() == i32::from(weft::DEFAULT_HELD_CARRIER_NICE)
            });
            // An OS thread started here inherits nothing of the lowering.
            let child = std::thread::spawn(nice).join().expect("OS thread");
            assert_eq!(gettid(), tid, "a computing thread never moves");
            s.store(true, Ordering::SeqCst);
            (tid, child, chat)
        })
        .join()
        .expect("the computation");
    for h in chat {
        h.join().expect("a yielding thread");
    }
    assert_eq!(child_nice, 0, "an OS thread started on a lowered carrier");
    assert_eq!(rt.carriers_lowered(), 1);
    // The lowered OS thread leaves once the computation is over.
    wait_until("the lowered carrier's exit", LIMIT, || {
        nice_of(held_tid).is_none()
    });
    // The slot has a new OS thread at the runtime's own priority, and no
    // carrier of this runtime is lowered.
    let (t, n) = rt.spawn(|| (gettid(), nice())).join().expect("after");
    assert_ne!(t, held_tid);
    assert_eq!(n, 0, "a carrier after the lowered one left");
    for t in threads_named("held-lowered") {
        assert_eq!(
            nice_of(t).unwrap_or(0),
            0,
            "carrier thread {t} still lowered"
        );
    }
}

/// A computation alone on its runtime (nothing queued behind it) keeps its
/// priority: it competes with nothing of its own process.
#[test]
fn a_computation_alone_is_not_lowered() {
    let rt = runtime("held-alone", None);
    let rt2 = rt.clone();
    let n = rt
        .spawn(move || {
            // Past the threshold and judged by the monitor (it counts the
            // carrier blocked at the look that would lower it).
            compute_until("the monitor's stall", || rt2.blocked_carriers() > 0);
            nice()
        })
        .join()
        .expect("the computation");
    assert_eq!(n, 0);
    assert_eq!(rt.carriers_lowered(), 0);
}

/// `held_carrier_nice(0)` never lowers, even beside short threads; nor
/// does a computation beside other computations only. Each waits until
/// the monitor has judged the hold and the other threads have run since:
/// the looks that would have lowered it.
#[test]
fn nice_zero_and_a_batch_of_computations_are_never_lowered() {
    let rt = runtime("held-never", Some(0));
    let (stop, ran) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, r) = (stop.clone(), ran.clone());
    let rt2 = rt.clone();
    let (n, chat) = rt
        .spawn(move || {
            let chat = chatter(&s, &r);
            compute_until("the monitor's stall", || rt2.blocked_carriers() > 0);
            r.store(false, Ordering::SeqCst);
            compute_until("the queued threads running elsewhere", || {
                r.load(Ordering::SeqCst)
            });
            s.store(true, Ordering::SeqCst);
            (nice(), chat)
        })
        .join()
        .expect("the computation");
    for h in chat {
        h.join().expect("a yielding thread");
    }
    assert_eq!(n, 0);
    assert_eq!(rt.carriers_lowered(), 0);

    // Two computations on one carrier: the second runs on a spare once the
    // first is judged. Each computes until both holds were reported: every
    // look at either hold since could have lowered it. This thread watches
    // for the reports, not the computations: a computation that polled
    // `events::recent` would be inside Weft's own diagnostics whenever the
    // monitor sampled its stack there, and such a stall is not recorded
    // (polling from the computations, 1 run in 20 waited for a report
    // that never came).
    let rt = runtime("held-batch", None);
    let stop = Arc::new(AtomicBool::new(false));
    let batch: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            rt.spawn(move || {
                compute_until("both holds reported", || stop.load(Ordering::SeqCst));
                nice()
            })
        })
        .collect();
    let ids: Vec<u64> = batch
        .iter()
        .map(|h| h.thread().id().as_u64().get())
        .collect();
    wait_until("both holds reported", LIMIT, || {
        let events = weft::events::recent();
        ids.iter().all(|&id| {
            events
                .iter()
                .any(|e| e.thread_id == id && e.kind == weft::events::EventKind::StallCpu)
        })
    });
    stop.store(true, Ordering::SeqCst);
    for h in batch {
        assert_eq!(h.join().expect("a computation"), 0);
    }
    assert_eq!(rt.carriers_lowered(), 0);
}

#[test]
fn a_nice_value_above_19_is_an_error() {
    let e = weft::Runtime::builder()
        .held_carrier_nice(20)
        .build()
        .expect_err("nice 20");
    assert!(e.to_string().contains("held_carrier_nice"), "{e}");
}
