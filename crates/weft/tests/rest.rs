//! Resting and covering carriers (ARCHITECTURE.md, "Sharing the cores"):
//! threads go on running while core carriers rest and come back, a held
//! carrier calls the resting ones back, and carriers on duty that never
//! sleep get one back; while carriers cover for each other, a held
//! carrier's threads run on another, and threads go on running as they
//! are taken and handed back.
//!
//! When the monitor rests a carrier, or has them cover, depends on what
//! else runs on the machine, so the tests do it themselves
//! (`Runtime::set_resting_for_tests`, `set_covering_for_tests`: the
//! monitor's own moves), and the rules are unit-tested in
//! `sched/rest.rs` with measured windows. Each test waits for what it
//! checks by progress — laps of rings of threads, a computation that goes
//! on until the runtime says a carrier came back — under a watchdog,
//! never by time. Its own test binary, its tests one at a time: one binds
//! a runtime to one CPU.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weft::Runtime;

/// How long a test may take before it is a failure (a rest that never
/// comes, a lost wake-up).
const LIMIT: Duration = Duration::from_secs(120);

/// A runtime of `carriers` carriers, stall threshold `stall`, resting on
/// or off.
fn runtime(carriers: usize, stall: Duration, rest: bool) -> Runtime {
    Runtime::builder()
        .parallelism(carriers)
        .stall_threshold(stall)
        .rest_carriers(rest)
        .build()
        .unwrap()
}

/// Serialises this file's tests (see the module docs).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

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

/// Rings of [`ring`], each with its token: as many tokens as carriers, so
/// that most carriers have a thread to run at once, as a server's do.
const RINGS: usize = 4;
/// Threads per ring; with [`RINGS`] of them, enough that placement spreads
/// them over the carriers (a carrier home to 16 or more hands new threads
/// on).
const RING: usize = 16;

/// [`RINGS`] rings of [`RING`] virtual threads, all spawned from one
/// virtual thread, each passing its token around until `stop`, counting
/// laps; returns the spawner's handle, which joins them all. Most hops
/// cross carriers.
fn ring(
    rt: &Runtime,
    stop: &Arc<AtomicBool>,
    laps: &Arc<AtomicU64>,
    tids: &Arc<Vec<AtomicI32>>,
) -> weft::JoinHandle<()> {
    let (stop, laps, tids, rt2) = (stop.clone(), laps.clone(), tids.clone(), rt.clone());
    rt.spawn(move || {
        let mut hs = Vec::new();
        let mut starts = Vec::new();
        for r in 0..RINGS {
            let (txs, rxs): (Vec<_>, Vec<_>) =
                (0..RING).map(|_| weft::channel::bounded::<bool>(1)).unzip();
            for (i, rx) in rxs.into_iter().enumerate() {
                let next = txs[(i + 1) % RING].clone();
                let (stop, laps, tids) = (stop.clone(), laps.clone(), tids.clone());
                hs.push(rt2.spawn(move || {
                    while let Ok(go_on) = rx.recv() {
                        // SAFETY: gettid has no preconditions.
                        tids[r * RING + i].store(unsafe { libc::gettid() }, Ordering::Relaxed);
                        if i == 0 {
                            // Thread 0 ends the ring: it sends `false`
                            // round once, and ends when it comes back.
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
            starts.push(txs[0].clone());
        }
        for tx in starts {
            tx.send(true).unwrap();
        }
        for h in hs {
            h.join().unwrap();
        }
    })
}

/// Runs [`ring`]s on `rt` for `n` laps, then ends them.
fn rings_for(rt: &Runtime, n: u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let laps = Arc::new(AtomicU64::new(0));
    let h = ring(rt, &stop, &laps, &tids());
    until("laps", || laps.load(Ordering::Relaxed) > n);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

/// Polls `done` every millisecond until it holds, failing after [`LIMIT`].
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Each ring thread's OS thread at its last turn (0: not since cleared).
fn tids() -> Arc<Vec<AtomicI32>> {
    Arc::new((0..RINGS * RING).map(|_| AtomicI32::new(0)).collect())
}

/// Distinct OS threads the ring threads ran on since `tids` was cleared,
/// once every one of them has had a turn.
fn os_threads_since_cleared(tids: &[AtomicI32], laps: &AtomicU64) -> usize {
    for t in tids {
        t.store(0, Ordering::Relaxed);
    }
    let at = laps.load(Ordering::Relaxed);
    until("two laps", || {
        laps.load(Ordering::Relaxed) >= at + 2 * RINGS as u64
    });
    until("every ring thread's turn", || {
        tids.iter().all(|t| t.load(Ordering::Relaxed) != 0)
    });
    let mut seen: Vec<i32> = tids.iter().map(|t| t.load(Ordering::Relaxed)).collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

/// Rings of threads pass their tokens while carriers rest and come back,
/// 200 times over: every move of a thread to another carrier keeps it
/// going (a lost wake-up stops a ring, and the watchdog fails the test).
/// With three of four carriers resting the threads run on one OS thread;
/// with all four back, on more than one again (a carrier back from rest
/// takes woken threads from the others).
#[test]
fn threads_go_on_while_carriers_rest_and_come_back() {
    let _one = one_at_a_time();
    let rt = runtime(4, Duration::from_secs(3600), false);
    let stop = Arc::new(AtomicBool::new(false));
    let laps = Arc::new(AtomicU64::new(0));
    let tids = tids();
    let h = ring(&rt, &stop, &laps, &tids);
    for round in 0..200usize {
        let n = [3, 0, 2, 1][round % 4];
        rt.set_resting_for_tests(n);
        assert_eq!(rt.carriers_resting(), n);
        let at = laps.load(Ordering::Relaxed);
        until("laps", || laps.load(Ordering::Relaxed) > at + RINGS as u64);
    }
    rt.set_resting_for_tests(3);
    let m = weft::metrics::snapshot();
    assert!(m.carriers_resting >= 3, "{m:?}");
    assert!(m.carrier_rests >= 150, "{m:?}");
    // Threads woken before the carriers saw the request ran there once.
    os_threads_since_cleared(&tids, &laps);
    assert_eq!(os_threads_since_cleared(&tids, &laps), 1);
    rt.set_resting_for_tests(0);
    until("the ring threads spread again", || {
        os_threads_since_cleared(&tids, &laps) > 1
    });
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

/// A computation holding a carrier on duty brings every resting carrier
/// back: the threads behind the hold need them.
#[test]
fn a_held_carrier_calls_the_resting_ones_back() {
    let _one = one_at_a_time();
    let rt = runtime(4, Duration::from_millis(50), true);
    rt.set_resting_for_tests(3);
    // Holds its carrier (no suspension) until the others are back.
    let rt2 = rt.clone();
    let hog = rt.spawn(move || {
        let start = Instant::now();
        while rt2.carriers_resting() != 0 {
            assert!(
                start.elapsed() < LIMIT,
                "the resting carriers never came back"
            );
            std::hint::spin_loop();
        }
    });
    hog.join().unwrap();
}

/// Carriers on duty that never sleep get a resting one back: a
/// computation on every carrier, each suspending every millisecond (so no
/// carrier is held), on a runtime with one carrier resting.
#[test]
fn carriers_that_never_sleep_get_a_resting_one_back() {
    let _one = one_at_a_time();
    let rt = runtime(2, Duration::from_secs(3600), true);
    rt.set_resting_for_tests(1);
    let back = Arc::new(AtomicBool::new(false));
    let computations: Vec<_> = (0..4)
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

/// With resting off, carriers bound to one CPU, where they take turns,
/// stay on duty.
#[test]
fn rest_carriers_false_keeps_every_carrier_on_duty() {
    let _one = one_at_a_time();
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
    // Many of the monitor's 200 ms windows.
    rings_for(&rt, 20_000);
    assert_eq!(rt.carrier_rests(), 0);
    assert_eq!(rt.carriers_resting(), 0);
}

/// What a worker of [`covering_runs_a_held_carriers_threads_elsewhere`]
/// is told.
enum Cmd {
    /// Say which OS thread you run on.
    Ping,
    /// Raise the flag, hold your carrier (no suspension) until
    /// `answered` reaches the count, then say which OS thread you ran on.
    Hold(Arc<AtomicBool>, Arc<AtomicU64>, u64),
}

/// Covering (`sched/rest.rs`, rule 4): while a carrier is held — as one
/// waiting for a CPU behind a busy process is — a carrier with nothing to
/// do runs the threads queued for it. Workers bound to the held carrier
/// are woken while it is held, so none of them can run there; the holder
/// waits for all of their answers, so without covering the test would
/// wait for the watchdog (the stall threshold, which would move them
/// too, is an hour).
#[test]
fn covering_runs_a_held_carriers_threads_elsewhere() {
    let _one = one_at_a_time();
    let rt = runtime(2, Duration::from_secs(3600), false);
    rt.set_covering_for_tests(false);
    const WORKERS: usize = 16;
    let (answers_tx, answers) = weft::channel::unbounded::<(usize, i32)>();
    let mut cmds = Vec::new();
    let mut hs = Vec::new();
    for i in 0..WORKERS {
        let (tx, rx) = weft::channel::unbounded::<Cmd>();
        let answers = answers_tx.clone();
        cmds.push(tx);
        hs.push(rt.spawn(move || {
            while let Ok(cmd) = rx.recv() {
                if let Cmd::Hold(holding, answered, until) = &cmd {
                    holding.store(true, Ordering::Relaxed);
                    let start = Instant::now();
                    while answered.load(Ordering::Relaxed) < *until {
                        assert!(
                            start.elapsed() < LIMIT,
                            "the held carrier's threads never ran"
                        );
                        std::hint::spin_loop();
                    }
                }
                // SAFETY: gettid has no preconditions.
                answers.send((i, unsafe { libc::gettid() })).unwrap();
            }
        }));
    }
    // Where each worker lives (bound where it first ran; nothing moves
    // them: no covering, no resting, no handoff within the hour).
    let mut home = vec![0; WORKERS];
    for tx in &cmds {
        tx.send(Cmd::Ping).unwrap();
    }
    for _ in 0..WORKERS {
        let (i, tid) = answers.recv().unwrap();
        home[i] = tid;
    }
    let held = (0..WORKERS)
        .map(|i| home[i])
        .max_by_key(|&t| home.iter().filter(|&&h| h == t).count())
        .unwrap();
    let mut on_held: Vec<usize> = (0..WORKERS).filter(|&i| home[i] == held).collect();
    let holder = on_held.pop().unwrap();
    assert!(
        !on_held.is_empty(),
        "placement left one worker per carrier: {home:?}"
    );
    let answered = Arc::new(AtomicU64::new(0));
    let holding = Arc::new(AtomicBool::new(false));
    cmds[holder]
        .send(Cmd::Hold(
            holding.clone(),
            answered.clone(),
            on_held.len() as u64,
        ))
        .unwrap();
    until("the holder holds", || holding.load(Ordering::Relaxed));
    // Only now: covering earlier could run the holder elsewhere.
    rt.set_covering_for_tests(true);
    assert!(rt.carriers_covering());
    for &i in &on_held {
        cmds[i].send(Cmd::Ping).unwrap();
    }
    // The other carrier may be asleep: a thread spawned from here wakes
    // it, and it looks at the held carrier's inbox when it runs out of
    // work. Nudged until every answer is in.
    let mut got = Vec::new();
    until("the held carrier's threads ran elsewhere", || {
        while let Ok(a) = answers.try_recv() {
            if a.0 != holder {
                answered.fetch_add(1, Ordering::Relaxed);
            }
            got.push(a);
        }
        if got.len() < on_held.len() + 1 {
            rt.spawn(|| {});
        }
        got.len() == on_held.len() + 1
    });
    for &(i, tid) in &got {
        if i == holder {
            assert_eq!(tid, held, "the holder moved");
        } else {
            assert_ne!(
                tid,
                held,
                "worker {i} ran on the held carrier (homes {home:?}, answers {got:?}, holder {holder}, covers {})",
                rt.carrier_covers()
            );
        }
    }
    assert!(rt.carrier_covers() >= 1);
    drop(cmds);
    for h in hs {
        h.join().unwrap();
    }
}

/// Rings of threads pass their tokens while the carriers cover for each
/// other and computations hold one carrier and then another: threads
/// taken from one carrier's inbox, and handed back to level the
/// populations, keep going (a lost wake-up stops a ring, and the
/// watchdog fails the test).
#[test]
fn threads_go_on_while_carriers_cover_for_each_other() {
    let _one = one_at_a_time();
    let rt = runtime(4, Duration::from_secs(3600), false);
    rt.set_covering_for_tests(true);
    let stop = Arc::new(AtomicBool::new(false));
    let laps = Arc::new(AtomicU64::new(0));
    let h = ring(&rt, &stop, &laps, &tids());
    // Two computations that hold their carrier for a while at a time (a
    // bounded spin: covering is an idle carrier's help, not a promise
    // that it looks in time), then let it go.
    let hogs: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            rt.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..200_000 {
                        std::hint::spin_loop();
                    }
                    weft::yield_now();
                }
            })
        })
        .collect();
    until("laps", || laps.load(Ordering::Relaxed) > 20_000);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    for h in hogs {
        h.join().unwrap();
    }
    assert!(rt.carrier_covers() > 0);
    let m = weft::metrics::snapshot();
    assert!(m.carrier_covers >= rt.carrier_covers(), "{m:?}");
}

/// With covering off the carriers never take from each other's inboxes,
/// whatever the monitor sees.
#[test]
fn cover_carriers_false_never_covers() {
    let _one = one_at_a_time();
    let rt = Runtime::builder()
        .parallelism(4)
        .stall_threshold(Duration::from_secs(3600))
        .cover_carriers(false)
        .build()
        .unwrap();
    rings_for(&rt, 20_000);
    assert!(!rt.carriers_covering());
    assert_eq!(rt.carrier_covers(), 0);
}
