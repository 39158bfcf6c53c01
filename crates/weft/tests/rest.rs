//! Resting carriers (ARCHITECTURE.md, "Sharing the cores"): core carriers
//! that take turns on fewer CPUs than there are of them rest, and their
//! threads go on running elsewhere; a held carrier, or carriers on duty
//! that never sleep, bring them back.
//!
//! The tests make the shared cores themselves: the test thread binds
//! itself to one CPU before it builds a runtime, and the carriers inherit
//! that mask. Each waits for what it checks by progress — a ping-pong
//! that goes on until the runtime says a carrier rests, a computation
//! that goes on until it says none does — under a watchdog, never by
//! time. Its own test binary: the CPU masks are per OS thread, and the
//! other tests must not share the one CPU.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weft::Runtime;

/// How long a test may take before it is a failure (a rest that never
/// comes, a lost wake-up).
const LIMIT: Duration = Duration::from_secs(120);

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Binds OS thread `tid` (0: the calling one) to `cpus`.
fn bind(tid: i32, cpus: &[usize]) {
    // SAFETY: as above; the set is filled before the call reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        assert_eq!(
            libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The OS threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> Vec<i32> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| {
            let tid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let name = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok()?;
            name.starts_with(prefix).then_some(tid)
        })
        .collect()
}

/// A runtime of `carriers` carriers named `name`, built by an OS thread
/// bound to one CPU, so that its carriers share that CPU.
fn on_one_cpu(name: &str, carriers: usize, stall: Duration) -> Runtime {
    let cpu = allowed_cpus()[0];
    let name = name.to_string();
    std::thread::spawn(move || {
        bind(0, &[cpu]);
        Runtime::builder()
            .parallelism(carriers)
            .stall_threshold(stall)
            .name(name)
            .build()
            .unwrap()
    })
    .join()
    .unwrap()
}

/// Threads in the ring of [`ring`]: enough that placement spreads them
/// over the carriers (a carrier home to 16 or more hands new threads on).
const RING: usize = 64;

/// [`RING`] virtual threads, spawned from one virtual thread, that pass a
/// token around until `stop`, counting laps; returns the spawner's
/// handle, which joins them all. Most hops cross carriers.
fn ring(rt: &Runtime, stop: &Arc<AtomicBool>, laps: &Arc<AtomicU64>) -> weft::JoinHandle<()> {
    let (stop, laps, rt2) = (stop.clone(), laps.clone(), rt.clone());
    rt.spawn(move || {
        let (txs, rxs): (Vec<_>, Vec<_>) =
            (0..RING).map(|_| weft::channel::bounded::<bool>(1)).unzip();
        let mut hs = Vec::new();
        for (i, rx) in rxs.into_iter().enumerate() {
            let next = txs[(i + 1) % RING].clone();
            let (stop, laps) = (stop.clone(), laps.clone());
            hs.push(rt2.spawn(move || {
                while let Ok(go_on) = rx.recv() {
                    if i == 0 {
                        // Thread 0 ends the ring: it sends `false` round
                        // once, and ends when it comes back.
                        if !go_on {
                            return;
                        }
                        laps.fetch_add(1, Ordering::Relaxed);
                        next.send(!stop.load(Ordering::Relaxed)).unwrap();
                        continue;
                    }
                    next.send(go_on).unwrap();
                    if !go_on {
                        return;
                    }
                }
            }));
        }
        txs[0].send(true).unwrap();
        drop(txs);
        for h in hs {
            h.join().unwrap();
        }
    })
}

/// Polls `done` every millisecond until it holds, failing after [`LIMIT`].
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Four carriers on one CPU with a ring of threads passing a token: the carriers
/// take turns, and all but one rest. The token keeps going meanwhile, every
/// hand-over of a thread to another carrier included (a lost wake-up
/// stops it, and the watchdog fails the test).
#[test]
fn carriers_that_take_turns_on_one_cpu_rest_and_their_threads_go_on() {
    let rt = on_one_cpu("rest-turns", 4, Duration::from_secs(3600));
    let stop = Arc::new(AtomicBool::new(false));
    let laps = Arc::new(AtomicU64::new(0));
    let h = ring(&rt, &stop, &laps);
    until("three of four carriers resting", || {
        rt.carriers_resting() == 3
    });
    assert!(rt.carrier_rests() >= 3);
    // Still going on the one carrier left.
    let before = laps.load(Ordering::Relaxed);
    until("laps on the carrier left", || {
        laps.load(Ordering::Relaxed) > before + 1_000
    });
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

/// A computation holding the carrier left on duty brings every resting
/// carrier back: the threads behind the hold need them.
#[test]
fn a_held_carrier_calls_the_resting_ones_back() {
    let rt = on_one_cpu("rest-held", 2, Duration::from_millis(50));
    let stop = Arc::new(AtomicBool::new(false));
    let laps = Arc::new(AtomicU64::new(0));
    let h = ring(&rt, &stop, &laps);
    until("a carrier resting", || rt.carriers_resting() == 1);
    // Holds its carrier (no suspension) until the other is back.
    let rt2 = rt.clone();
    let hog = rt.spawn(move || {
        let start = Instant::now();
        while rt2.carriers_resting() != 0 {
            assert!(
                start.elapsed() < LIMIT,
                "the resting carrier never came back"
            );
            std::hint::spin_loop();
        }
    });
    hog.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

/// Carriers on duty that never sleep get a resting one back once more CPU
/// is there: rested on one CPU, then given two with a computation on every
/// carrier (each suspending every millisecond, so no carrier is held).
/// Skipped on a machine with one CPU.
#[test]
fn carriers_that_never_sleep_get_a_resting_one_back() {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("skipped: one CPU");
        return;
    }
    let rt = on_one_cpu("rest-back", 2, Duration::from_secs(3600));
    let stop = Arc::new(AtomicBool::new(false));
    let laps = Arc::new(AtomicU64::new(0));
    let h = ring(&rt, &stop, &laps);
    until("a carrier resting", || rt.carriers_resting() == 1);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    for tid in threads_named("rest-back") {
        bind(tid, &cpus[..2]);
    }
    let back = Arc::new(AtomicBool::new(false));
    let computations: Vec<_> = (0..2)
        .map(|_| {
            let (rt2, back) = (rt.clone(), back.clone());
            rt.spawn(move || {
                let start = Instant::now();
                while !back.load(Ordering::Relaxed) {
                    assert!(start.elapsed() < LIMIT, "no carrier came back");
                    let slice = Instant::now();
                    while slice.elapsed() < Duration::from_millis(1) {
                        std::hint::spin_loop();
                    }
                    if rt2.carriers_resting() == 0 {
                        back.store(true, Ordering::Relaxed);
                    }
                    weft::yield_now();
                }
            })
        })
        .collect();
    for h in computations {
        h.join().unwrap();
    }
}

/// With resting off, carriers on one CPU stay on duty, whatever they do.
#[test]
fn rest_carriers_false_keeps_every_carrier_on_duty() {
    let cpu = allowed_cpus()[0];
    let rt = std::thread::spawn(move || {
        bind(0, &[cpu]);
        Runtime::builder()
            .parallelism(4)
            .rest_carriers(false)
            .build()
            .unwrap()
    })
    .join()
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let laps = Arc::new(AtomicU64::new(0));
    let h = ring(&rt, &stop, &laps);
    // Long enough for the monitor to have rested carriers several times
    // over were it on (a window is 200 ms): 5,000 laps of the ring.
    until("laps", || laps.load(Ordering::Relaxed) > 5_000);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    assert_eq!(rt.carrier_rests(), 0);
    assert_eq!(rt.carriers_resting(), 0);
}
