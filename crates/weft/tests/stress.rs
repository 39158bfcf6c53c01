//! Heavy tests: scale (100,000 sleepers, 200,000 parked threads in one
//! stack arena) and lost-wake-up hunting (millions of park/unpark races
//! across carriers, OS threads and virtual threads waking each other,
//! interrupt and timer storms).
//!
//! A lost wake-up shows up as a hang, so every test runs under a watchdog
//! that aborts the process with a message when no round of the test has
//! completed for [`WATCHDOG`]. Progress, not total time, tells a hang from
//! a slow run: on two cores shared with other busy processes a
//! cross-carrier hand-off costs about a hundred times what it costs on a
//! quiet machine (docs/bench.md, "Hand-offs on shared cores"), and these
//! tests make millions of them.
//! The tests take turns (a global lock) so that their timings and memory
//! peaks do not add up on a small CI machine.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, mpsc};
use std::time::{Duration, Instant};

use weft::{Builder, Runtime, State, Thread};
use weft_bench_support::watchdog::{Progress, Watchdog};

/// How long a test may go without completing a round.
const WATCHDOG: Duration = Duration::from_secs(120);

/// Aborts the whole process if `what` completes no round (reports no
/// progress) for [`WATCHDOG`]: a hang must fail loudly instead of stalling
/// CI, and a slow run must not fail.
fn watchdog(what: &'static str) -> Watchdog {
    Watchdog::new(what, WATCHDOG, || {
        "no round completed: lost wake-up or deadlock in weft".into()
    })
}

/// Serialises the heavy tests of this file.
fn heavy() -> MutexGuard<'static, ()> {
    static HEAVY: Mutex<()> = Mutex::new(());
    HEAVY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits until `count()` reaches `target`, reporting each change to
/// `progress`; a count that stops short is the watchdog's to catch.
fn wait_for(progress: &Progress, target: usize, mut count: impl FnMut() -> usize) {
    let mut last = count();
    while last < target {
        std::thread::sleep(Duration::from_millis(1));
        let now = count();
        if now != last {
            progress.tick();
            last = now;
        }
    }
}

fn proc_maps_lines() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .expect("read /proc/self/maps")
        .lines()
        .count()
}

fn vm_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

// ------------------------------------------------------------------ scale

#[test]
fn hundred_thousand_sleepers_all_complete() {
    const N: usize = 100_000;
    let d = Duration::from_secs(1);
    let _turn = heavy();
    let dog = watchdog("hundred_thousand_sleepers_all_complete");
    let progress = dog.progress();
    let done = Arc::new(AtomicUsize::new(0));
    let early = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let (done, early, failed) = (done.clone(), early.clone(), failed.clone());
            let progress = progress.clone();
            Builder::new()
                .spawn(move || {
                    let t = Instant::now();
                    if weft::sleep(d).is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    if t.elapsed() < d {
                        early.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                    progress.tick();
                })
                .unwrap_or_else(|e| panic!("spawn #{i} of {N} failed: {e}"))
        })
        .collect();
    let spawned = t0.elapsed();
    for h in handles {
        h.join().expect("sleeper panicked");
    }
    let elapsed = t0.elapsed();
    eprintln!("{N} × sleep(1 s): spawned in {spawned:?}, all done after {elapsed:?}");
    assert_eq!(done.load(Ordering::SeqCst), N);
    assert_eq!(failed.load(Ordering::SeqCst), 0, "sleep returned Err");
    assert_eq!(early.load(Ordering::SeqCst), 0, "sleep woke early");
    assert!(elapsed >= d);
}

#[test]
fn two_hundred_thousand_parked_threads_in_few_mappings() {
    const N: usize = 200_000;
    let _turn = heavy();
    let dog = watchdog("two_hundred_thousand_parked_threads_in_few_mappings");
    let progress = dog.progress();
    let go = Arc::new(AtomicBool::new(false));
    let arrived = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let maps_before = proc_maps_lines();
    let t0 = Instant::now();
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let (go, arrived, finished) = (go.clone(), arrived.clone(), finished.clone());
            Builder::new()
                .spawn(move || {
                    arrived.fetch_add(1, Ordering::SeqCst);
                    while !go.load(Ordering::SeqCst) {
                        weft::park();
                    }
                    finished.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap_or_else(|e| panic!("spawn #{i} of {N} failed: {e}"))
        })
        .collect();
    // All threads started.
    wait_for(&progress, N, || arrived.load(Ordering::SeqCst));
    // Every one of them really parked (cursor: O(N) state reads in total).
    let mut next = 0;
    wait_for(&progress, N, || {
        while next < N && handles[next].thread().state() == State::Parked {
            next += 1;
        }
        next
    });
    let parked_after = t0.elapsed();
    let maps = proc_maps_lines();
    eprintln!(
        "{N} parked after {parked_after:?}; /proc/self/maps: {maps_before} lines before, \
         {maps} with all parked; VmRSS {:?} KiB",
        vm_rss_kib()
    );
    assert!(
        maps < 10_000,
        "{maps} mappings for {N} parked threads: stacks are not in one arena"
    );
    assert_eq!(finished.load(Ordering::SeqCst), 0, "woke without unpark");

    go.store(true, Ordering::SeqCst);
    for h in &handles {
        h.thread().unpark();
    }
    for h in handles {
        h.join().expect("parked thread panicked");
        progress.tick();
    }
    assert_eq!(finished.load(Ordering::SeqCst), N);
    eprintln!("all {N} finished after {:?}", t0.elapsed());
}

// ------------------------------------------------- park/unpark ping-pong

#[derive(Clone, Copy, Debug)]
enum Side {
    /// On the default runtime.
    Virtual,
    /// On the explicit runtime passed to `ping_pong`.
    OnRuntime,
    /// A plain OS thread using weft::park.
    Os,
}

/// Runs `pairs` pairs that pass a token back and forth `handoffs` times
/// each: side `s` may move when `token % 2 == s`, increments it and unparks
/// its partner. Waiting is a pure `park` loop (or `park_timeout` with tiny
/// timeouts when `timeouts`), so one lost wake-up hangs the pair.
/// `Side::OnRuntime` threads of side `s` run on `rts[s]`. Every moved
/// token is reported to `progress`.
fn ping_pong(
    progress: &Progress,
    rts: [Option<&Runtime>; 2],
    sides: [Side; 2],
    pairs: usize,
    handoffs: u64,
    timeouts: bool,
) -> Duration {
    struct Pair {
        token: AtomicU64,
        slots: [OnceLock<Thread>; 2],
        done: [AtomicBool; 2],
    }
    let t0 = Instant::now();
    let finished = Arc::new(AtomicUsize::new(0));
    let mut all = Vec::new();
    let mut joins: Vec<Box<dyn FnOnce() -> u64>> = Vec::new();
    for pair in 0..pairs {
        let shared = Arc::new(Pair {
            token: AtomicU64::new(0),
            slots: [OnceLock::new(), OnceLock::new()],
            done: [AtomicBool::new(false), AtomicBool::new(false)],
        });
        all.push(shared.clone());
        for (s, side) in sides.into_iter().enumerate() {
            let (p, finished) = (shared.clone(), finished.clone());
            // Odd pairs spin a random while (log-uniform, 0..256 rounds)
            // before parking, so the partner's unpark lands in every phase
            // of the park transition.
            let spinning = pair % 2 == 1;
            let body = move || {
                p.slots[s].set(weft::current()).expect("slot set twice");
                let partner = loop {
                    if let Some(t) = p.slots[1 - s].get() {
                        break t.clone();
                    }
                    weft::yield_now();
                };
                let mut moves = 0u64;
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (pair * 2 + s) as u64;
                let mut n = 0u64;
                loop {
                    let mut spins = 0;
                    let spin = if spinning {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        rng % (1 << ((rng >> 58) % 9))
                    } else {
                        0
                    };
                    let v = loop {
                        let v = p.token.load(Ordering::Acquire);
                        if v >= handoffs || v % 2 == s as u64 {
                            break v;
                        }
                        if spins < spin {
                            spins += 1;
                            std::hint::spin_loop();
                        } else if timeouts {
                            n += 1;
                            weft::park_timeout(Duration::from_micros(n % 50));
                        } else {
                            weft::park();
                        }
                    };
                    if v >= handoffs {
                        break;
                    }
                    p.token.store(v + 1, Ordering::Release);
                    moves += 1;
                    partner.unpark();
                }
                p.done[s].store(true, Ordering::SeqCst);
                finished.fetch_add(1, Ordering::SeqCst);
                moves
            };
            let join: Box<dyn FnOnce() -> u64> = match side {
                Side::Virtual => {
                    let h = weft::spawn(body);
                    Box::new(move || h.join().expect("virtual side panicked"))
                }
                Side::OnRuntime => {
                    let h = rts[s].expect("ping_pong needs a runtime").spawn(body);
                    Box::new(move || h.join().expect("runtime side panicked"))
                }
                Side::Os => {
                    let h = std::thread::spawn(body);
                    Box::new(move || h.join().expect("OS side panicked"))
                }
            };
            joins.push(join);
        }
    }
    // Watch for a pair whose token stops moving (a lost wake-up: both sides
    // parked, each waiting for the other) and describe it precisely, before
    // the watchdog's limit; a pair whose token moves is progress.
    const STALL: Duration = Duration::from_secs(60);
    let mut last: Vec<(u64, Instant)> = all
        .iter()
        .map(|p| (p.token.load(Ordering::SeqCst), Instant::now()))
        .collect();
    while finished.load(Ordering::SeqCst) < 2 * pairs {
        std::thread::sleep(Duration::from_millis(5));
        let now = Instant::now();
        let mut report = String::new();
        for (i, p) in all.iter().enumerate() {
            let token = p.token.load(Ordering::SeqCst);
            let done = p.done.iter().all(|d| d.load(Ordering::SeqCst));
            if token != last[i].0 || done {
                if token != last[i].0 {
                    progress.tick();
                }
                last[i] = (token, now);
                continue;
            }
            if now - last[i].1 < STALL {
                continue;
            }
            report += &format!(
                "\n  pair {i}: token stuck at {token} of {handoffs} for {STALL:?} \
                 (side {} to move)",
                token % 2
            );
            for (s, side) in sides.iter().enumerate() {
                let state = p.slots[s].get().map(|t| (t.state(), t.is_virtual()));
                report += &format!(
                    "\n    side {s} ({side:?}): done {}, (state, virtual) {state:?}",
                    p.done[s].load(Ordering::SeqCst)
                );
            }
        }
        assert!(
            report.is_empty(),
            "ping-pong {sides:?} stalled (lost wake-up?):{report}"
        );
    }
    let total: u64 = joins.into_iter().map(|j| j()).sum();
    assert_eq!(
        total,
        pairs as u64 * handoffs,
        "handoffs lost or duplicated"
    );
    t0.elapsed()
}

#[test]
fn ping_pong_two_million_handoffs_on_two_carriers() {
    let _turn = heavy();
    let dog = watchdog("ping_pong_two_million_handoffs_on_two_carriers");
    let rt = Runtime::builder().parallelism(2).build().expect("runtime");
    let pairs = 8;
    let per_pair = 2_000_000 / pairs as u64;
    let took = ping_pong(
        &dog.progress(),
        [Some(&rt), Some(&rt)],
        [Side::OnRuntime, Side::OnRuntime],
        pairs,
        per_pair,
        false,
    );
    eprintln!("2,000,000 handoffs in {pairs} pairs on 2 carriers: {took:?}");
}

/// Each pair spans two single-carrier runtimes, so every handoff is a
/// cross-carrier race between one side parking and the other unparking.
#[test]
fn ping_pong_cross_carrier_handoffs() {
    let _turn = heavy();
    let dog = watchdog("ping_pong_cross_carrier_handoffs");
    let rt1 = Runtime::builder()
        .parallelism(1)
        .build()
        .expect("runtime 1");
    let rt2 = Runtime::builder()
        .parallelism(1)
        .build()
        .expect("runtime 2");
    let pairs = 4;
    let took = ping_pong(
        &dog.progress(),
        [Some(&rt1), Some(&rt2)],
        [Side::OnRuntime, Side::OnRuntime],
        pairs,
        100_000,
        false,
    );
    eprintln!("{pairs} × 100,000 cross-carrier handoffs: {took:?}");
}

#[test]
fn ping_pong_with_racing_timeouts() {
    let _turn = heavy();
    let dog = watchdog("ping_pong_with_racing_timeouts");
    let rt = Runtime::builder().parallelism(2).build().expect("runtime");
    let rt2 = Runtime::builder().parallelism(1).build().expect("runtime");
    let took = ping_pong(
        &dog.progress(),
        [Some(&rt), Some(&rt2)],
        [Side::OnRuntime, Side::OnRuntime],
        4,
        50_000,
        true,
    );
    eprintln!("4 × 50,000 handoffs with park_timeout(0..50 µs): {took:?}");
}

#[test]
fn ping_pong_between_os_and_virtual_threads() {
    let _turn = heavy();
    let dog = watchdog("ping_pong_between_os_and_virtual_threads");
    let rt = Runtime::builder().parallelism(2).build().expect("runtime");
    // OS thread <-> virtual thread, both directions of every wake-up.
    let a = ping_pong(
        &dog.progress(),
        [None, Some(&rt)],
        [Side::Os, Side::OnRuntime],
        2,
        100_000,
        false,
    );
    let b = ping_pong(
        &dog.progress(),
        [None, None],
        [Side::Virtual, Side::Os],
        2,
        100_000,
        false,
    );
    // OS <-> OS through weft::park.
    let c = ping_pong(
        &dog.progress(),
        [None, None],
        [Side::Os, Side::Os],
        1,
        50_000,
        false,
    );
    // Default runtime <-> explicit runtime.
    let d = ping_pong(
        &dog.progress(),
        [None, Some(&rt)],
        [Side::Virtual, Side::OnRuntime],
        4,
        100_000,
        false,
    );
    eprintln!("os<->rt {a:?}, virtual<->os {b:?}, os<->os {c:?}, default<->rt {d:?}");
}

/// Many wakers, one sleeper: every producer hands over a value and waits
/// until the consumer took it, so each of the consumer's wake-ups matters.
#[test]
fn many_mixed_wakers_one_parker() {
    const PER_PRODUCER: u64 = 20_000;
    let _turn = heavy();
    let dog = watchdog("many_mixed_wakers_one_parker");
    let progress = dog.progress();
    let rt = Runtime::builder().parallelism(2).build().expect("runtime");
    let producers = 6;
    // mailbox: 0 = empty, else the value; taken: count of consumed values.
    let mailbox = Arc::new(AtomicU64::new(0));
    let taken = Arc::new(AtomicU64::new(0));
    let total = producers as u64 * PER_PRODUCER;
    let waiting: Arc<Mutex<Vec<Thread>>> = Arc::new(Mutex::new(Vec::new()));
    let consumer = {
        let (mailbox, taken, waiting) = (mailbox.clone(), taken.clone(), waiting.clone());
        rt.spawn(move || {
            let mut sum = 0u64;
            while taken.load(Ordering::SeqCst) < total {
                let v = mailbox.swap(0, Ordering::SeqCst);
                if v == 0 {
                    weft::park();
                    continue;
                }
                sum += v;
                taken.fetch_add(1, Ordering::SeqCst);
                progress.tick();
                // Wake every producer waiting for the mailbox to empty.
                for t in waiting.lock().unwrap().iter() {
                    t.unpark();
                }
            }
            sum
        })
    };
    let consumer_thread = consumer.thread().clone();
    let producer_body = move |mailbox: Arc<AtomicU64>, waiting: Arc<Mutex<Vec<Thread>>>| {
        let consumer_thread = consumer_thread.clone();
        move || {
            waiting.lock().unwrap().push(weft::current());
            for _ in 0..PER_PRODUCER {
                while mailbox
                    .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err()
                {
                    consumer_thread.unpark();
                    weft::park();
                }
                consumer_thread.unpark();
            }
        }
    };
    let mut joins: Vec<Box<dyn FnOnce()>> = Vec::new();
    for p in 0..producers {
        let body = producer_body(mailbox.clone(), waiting.clone());
        joins.push(match p % 3 {
            0 => {
                let h = std::thread::spawn(body);
                Box::new(move || h.join().expect("OS producer panicked"))
            }
            1 => {
                let h = weft::spawn(body);
                Box::new(move || h.join().expect("virtual producer panicked"))
            }
            _ => {
                let h = rt.spawn(body);
                Box::new(move || h.join().expect("runtime producer panicked"))
            }
        });
    }
    for j in joins {
        j();
    }
    assert_eq!(consumer.join().expect("consumer panicked"), total);
    assert_eq!(taken.load(Ordering::SeqCst), total);
}

/// The waker never parks: it spins until the target announces round `i`,
/// then releases and unparks it at once, so the unpark lands while the
/// target is on its way into `park` (the window a suspend protocol must
/// get right). Waker and target run on different carriers.
/// Each round is reported to `progress`.
fn unpark_storm(
    progress: &Progress,
    target_rt: Option<&Runtime>,
    waker_rt: Option<&Runtime>,
    rounds: u64,
) {
    let progress = progress.clone();
    let announced = Arc::new(AtomicU64::new(u64::MAX));
    let released = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel();
    let (a, r) = (announced.clone(), released.clone());
    let target_body = move || {
        tx.send(weft::current()).unwrap();
        for i in 0..rounds {
            a.store(i, Ordering::SeqCst);
            while r.load(Ordering::SeqCst) <= i {
                weft::park();
            }
        }
    };
    let target_join: Box<dyn FnOnce()> = match target_rt {
        Some(rt) => {
            let h = rt.spawn(target_body);
            Box::new(move || h.join().expect("target panicked"))
        }
        None => {
            let h = std::thread::spawn(target_body);
            Box::new(move || h.join().expect("target panicked"))
        }
    };
    let target = rx.recv().expect("target did not start");
    let waker_body = move || {
        for i in 0..rounds {
            let mut spins = 0u32;
            while announced.load(Ordering::SeqCst) != i {
                // Spin to react at once; past that, give the CPU away (on a
                // loaded 2-core machine the target may need this core).
                spins += 1;
                if spins < 200 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            released.store(i + 1, Ordering::SeqCst);
            target.unpark();
            progress.tick();
        }
    };
    match waker_rt {
        Some(rt) => rt.spawn(waker_body).join().expect("waker panicked"),
        None => std::thread::spawn(waker_body)
            .join()
            .expect("waker panicked"),
    }
    target_join();
}

#[test]
fn unpark_storm_never_loses_a_wakeup() {
    let _turn = heavy();
    let dog = watchdog("unpark_storm_never_loses_a_wakeup");
    // Each runtime has one carrier, so a spinning waker never starves the
    // target of its carrier.
    let rt1 = Runtime::builder()
        .parallelism(1)
        .build()
        .expect("runtime 1");
    let rt2 = Runtime::builder()
        .parallelism(1)
        .build()
        .expect("runtime 2");
    let t0 = Instant::now();
    unpark_storm(&dog.progress(), Some(&rt1), Some(&rt2), 100_000);
    unpark_storm(&dog.progress(), Some(&rt1), None, 100_000);
    unpark_storm(&dog.progress(), None, Some(&rt2), 20_000);
    eprintln!("unpark storms: {:?}", t0.elapsed());
}

// ----------------------------------------------------- interrupts, timers

#[derive(Clone, Copy, Debug)]
enum Kind {
    Virtual,
    Os,
}

/// One thread sleeps "forever" `rounds` times; another interrupts it once
/// per round. Each interrupt must end exactly one sleep; each round is
/// reported to `ticks`.
fn interrupt_storm(ticks: &Progress, sleeper: Kind, interrupter: Kind, rounds: u64) {
    let ticks = ticks.clone();
    let progress = Arc::new(AtomicU64::new(u64::MAX));
    let (tx, rx) = mpsc::channel();
    let p = progress.clone();
    let sleep_body = move || {
        tx.send(weft::current()).unwrap();
        for i in 0..rounds {
            p.store(i, Ordering::SeqCst);
            match weft::sleep(Duration::from_secs(3600)) {
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                other => panic!("round {i}: sleep returned {other:?}"),
            }
            assert!(!weft::current().is_interrupted(), "flag not cleared");
        }
    };
    let sleeper_join: Box<dyn FnOnce()> = match sleeper {
        Kind::Virtual => {
            let h = weft::spawn(sleep_body);
            Box::new(move || h.join().expect("sleeper panicked"))
        }
        Kind::Os => {
            let h = std::thread::spawn(sleep_body);
            Box::new(move || h.join().expect("sleeper panicked"))
        }
    };
    let target = rx.recv().expect("sleeper did not start");
    let interrupt_body = move || {
        for i in 0..rounds {
            while progress.load(Ordering::SeqCst) != i {
                weft::yield_now();
            }
            target.interrupt();
            ticks.tick();
        }
    };
    match interrupter {
        Kind::Virtual => weft::spawn(interrupt_body).join().expect("interrupter"),
        Kind::Os => std::thread::spawn(interrupt_body)
            .join()
            .expect("interrupter"),
    }
    sleeper_join();
}

#[test]
fn interrupt_storm_never_loses_an_interrupt() {
    let _turn = heavy();
    let dog = watchdog("interrupt_storm_never_loses_an_interrupt");
    let t0 = Instant::now();
    interrupt_storm(&dog.progress(), Kind::Virtual, Kind::Virtual, 20_000);
    interrupt_storm(&dog.progress(), Kind::Virtual, Kind::Os, 20_000);
    interrupt_storm(&dog.progress(), Kind::Os, Kind::Virtual, 5_000);
    interrupt_storm(&dog.progress(), Kind::Os, Kind::Os, 5_000);
    eprintln!("interrupt storms: {:?}", t0.elapsed());
}

#[test]
fn timer_storm_sleeps_are_never_short() {
    const THREADS: usize = 10_000;
    const ROUNDS: u64 = 10;
    let _turn = heavy();
    let dog = watchdog("timer_storm_sleeps_are_never_short");
    let early = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let (early, progress) = (early.clone(), dog.progress());
            weft::spawn(move || {
                let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                for _ in 0..ROUNDS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let d = Duration::from_micros(x % 5_000);
                    let t = Instant::now();
                    weft::sleep(d).expect("sleep");
                    if t.elapsed() < d {
                        early.fetch_add(1, Ordering::Relaxed);
                    }
                    progress.tick();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("sleeper panicked");
    }
    eprintln!(
        "{THREADS} threads × {ROUNDS} random sleeps: {:?}",
        t0.elapsed()
    );
    assert_eq!(early.load(Ordering::SeqCst), 0, "sleeps returned early");
}

// ------------------------------------------------------------------ joins

/// Thread `i`'s draw in [`os_thread_joins_never_miss_a_finish`], below
/// 1,024: its case is the draw mod 8 (0–4: works a while, 5–6: yields once,
/// 7: sleeps as many microseconds as the draw).
fn join_draw(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54
}

/// What thread `i` returns: never the closure's capture `i` itself, which a
/// read of the result before it is stored would find.
fn join_result(i: u64) -> u64 {
    let x = join_draw(i);
    match x % 8 {
        0..=4 => (0..x * 16).fold(!i, |a, k| a ^ std::hint::black_box(k)),
        _ => !i,
    }
}

/// OS threads join virtual threads that finish at every distance from the
/// join: long done, finishing while the joiner watches (`join`'s short
/// spin), or long after it parked (a sleep). Each joiner joins its threads
/// in spawn order, some in reverse; every join must return its thread's
/// value. A finish that fell between the spin and the park (no wake-up for
/// a registered joiner) hangs a joiner: the watchdog's to catch.
#[test]
fn os_thread_joins_never_miss_a_finish() {
    const JOINERS: u64 = 4;
    const PER: u64 = 5_000;
    let _turn = heavy();
    let dog = watchdog("os_thread_joins_never_miss_a_finish");
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for j in 0..JOINERS {
            let progress = dog.progress();
            s.spawn(move || {
                let mut handles: Vec<_> = (0..PER)
                    .map(|i| {
                        weft::spawn(move || {
                            match join_draw(i) % 8 {
                                // Back of the queue once.
                                5 | 6 => weft::yield_now(),
                                // Long after the joiner parked.
                                7 => weft::sleep(Duration::from_micros(join_draw(i))).unwrap(),
                                // Some work, so the joiner may still be watching.
                                _ => {}
                            }
                            join_result(i)
                        })
                    })
                    .enumerate()
                    .collect();
                if j % 2 == 1 {
                    handles.reverse();
                }
                for (i, h) in handles {
                    let i = i as u64;
                    assert_eq!(h.join().unwrap(), join_result(i), "joiner {j}, thread {i}");
                    progress.tick();
                }
            });
        }
    });
    eprintln!("{JOINERS} OS threads × {PER} joins: {:?}", t0.elapsed());
}
