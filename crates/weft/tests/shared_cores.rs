//! A carrier that runs out of work sleeps; it never hands its core to a
//! neighbour with `sched_yield` (ARCHITECTURE.md, "Sharing the cores").
//!
//! Beside CPU-bound threads a yield leaves the carrier runnable but
//! waiting in the run queue for a neighbour's time slice (milliseconds),
//! where a carrier asleep on its futex word waits in no queue and is woken
//! as any parked OS thread is. So this test runs the same cross-thread
//! ping-pong twice beside two spinning threads — between two `std` threads
//! (`thread::park`) and between the carriers of two runtimes — and compares
//! the time the kernel says those OS threads spent runnable but not running
//! (`/proc/self/task/<tid>/schedstat`, its second field). Both runs share
//! the machine, whatever else loads it, so the control sets the scale. The
//! idle path that yielded between its search rounds and while watching its
//! inbox made the carriers wait 82.8 s over this test's 6,000 round trips,
//! where the `std` threads waited 0.09 s; sleeping at once, 0.08–0.36 s
//! against 0.05–0.21 s (a loaded machine, with and without two `yes`
//! processes beside).
//!
//! Its own test binary: the spinning threads must not slow other tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

const ROUND_TRIPS: u32 = 2_000;

/// Nanoseconds thread `tid` of this process has spent runnable but not
/// running, so far.
fn run_queue_wait(tid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .expect("read a thread's schedstat");
    stat.split_whitespace()
        .nth(1)
        .expect("schedstat's second field")
        .parse()
        .unwrap()
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// The OS thread id of `rt`'s one carrier (a virtual thread runs on its
/// carrier's OS thread).
fn carrier_tid(rt: &weft::Runtime) -> i32 {
    rt.spawn(gettid).join().expect("tid")
}

/// Run-queue wait of two `std` threads handing a turn back and forth
/// `ROUND_TRIPS` times with `thread::park`.
fn std_pingpong_wait() -> u64 {
    let turn = Arc::new(AtomicU8::new(0));
    let (tx, rx) = std::sync::mpsc::channel::<std::thread::Thread>();
    let t = turn.clone();
    let pong = std::thread::spawn(move || {
        let ping = rx.recv().unwrap();
        let me = gettid();
        let before = run_queue_wait(me);
        for _ in 0..ROUND_TRIPS {
            while t.load(Ordering::Acquire) != 1 {
                std::thread::park();
            }
            t.store(0, Ordering::Release);
            ping.unpark();
        }
        run_queue_wait(me) - before
    });
    tx.send(std::thread::current()).unwrap();
    let me = gettid();
    let before = run_queue_wait(me);
    for _ in 0..ROUND_TRIPS {
        turn.store(1, Ordering::Release);
        pong.thread().unpark();
        while turn.load(Ordering::Acquire) != 0 {
            std::thread::park();
        }
    }
    let mine = run_queue_wait(me) - before;
    mine + pong.join().unwrap()
}

/// Run-queue wait of two carriers (of two runtimes of one carrier each)
/// whose virtual threads hand a turn back and forth `ROUND_TRIPS` times.
fn carrier_pingpong_wait() -> u64 {
    let one = || weft::Runtime::builder().parallelism(1).build().unwrap();
    let (ping_rt, pong_rt) = (one(), one());
    let tids = [carrier_tid(&ping_rt), carrier_tid(&pong_rt)];
    let before: u64 = tids.iter().map(|&t| run_queue_wait(t)).sum();
    // Whose turn it is (0 = ping, 1 = pong), and the ping thread.
    let shared = Arc::new((AtomicU8::new(0), std::sync::OnceLock::<weft::Thread>::new()));
    let s = shared.clone();
    let pong = pong_rt.spawn(move || {
        for _ in 0..ROUND_TRIPS {
            while s.0.load(Ordering::Acquire) != 1 {
                weft::park();
            }
            s.0.store(0, Ordering::Release);
            s.1.get().expect("ping is set first").unpark();
        }
    });
    let pong_thread = pong.thread().clone();
    let ping = ping_rt.spawn(move || {
        let _ = shared.1.set(weft::current());
        for _ in 0..ROUND_TRIPS {
            shared.0.store(1, Ordering::Release);
            pong_thread.unpark();
            while shared.0.load(Ordering::Acquire) != 0 {
                weft::park();
            }
        }
    });
    ping.join().unwrap();
    pong.join().unwrap();
    tids.iter().map(|&t| run_queue_wait(t)).sum::<u64>() - before
}

#[test]
fn an_idle_carrier_sleeps_instead_of_yielding_beside_busy_threads() {
    // Two CPU-bound neighbours, as many as this machine has cores.
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1_000 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    }
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    // Alternated, so that a noisy stretch of the machine hits both alike.
    let (mut std_wait, mut carrier_wait) = (0, 0);
    for _ in 0..3 {
        std_wait += std_pingpong_wait();
        carrier_wait += carrier_pingpong_wait();
    }
    stop.store(true, Ordering::Relaxed);
    for b in busy {
        b.join().unwrap();
    }
    eprintln!(
        "run-queue wait over {} round trips: carriers {} µs, std threads {} µs",
        3 * ROUND_TRIPS,
        carrier_wait / 1_000,
        std_wait / 1_000
    );
    // A floor of 1 µs per round trip, so that a control that hardly waited
    // does not make the bound impossibly tight.
    let scale = std_wait.max(3 * u64::from(ROUND_TRIPS) * 1_000);
    assert!(
        carrier_wait < 25 * scale,
        "beside two busy threads the carriers waited runnable {} ms in the run queue over \
         {} round trips, std threads {} ms: an idle carrier yields its core instead of sleeping",
        carrier_wait / 1_000_000,
        3 * ROUND_TRIPS,
        std_wait / 1_000_000,
    );
}
