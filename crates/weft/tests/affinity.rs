//! Affinity: a virtual thread that has started runs on its home carrier
//! (one OS thread), whatever it blocks on, as long as that carrier is not
//! held — unless its runtime was built with the `unsafe` opt-in
//! `allow_migration`.
//!
//! A carrier held past the stall threshold hands its threads off to others
//! (`tests/handoff.rs`), and on a loaded machine the OS can keep a carrier
//! off the CPU for longer than the default 20 ms while one of its threads
//! is mounted, which looks like a hold. So the tests that assert "never
//! moves" run with a stall threshold of an hour ([`NO_HANDOFF`]): no
//! handoff happens, and what they check is that nothing else (a wake-up,
//! a steal, a timer, a placement) moves a started thread.
//!
//! Every check reads the kernel thread id (`gettid`), not a thread-local.

mod common;

use std::cell::{Cell, RefCell};
use std::io::{Read, Write};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{gettid, join_within};
use weft::Runtime;

const LIMIT: Duration = Duration::from_secs(120);

/// A stall threshold no test reaches: no carrier is ever found held, so no
/// started thread is handed off (see the module docs). The runtimes also
/// keep every carrier on duty (`rest_carriers(false)`) and never cover for
/// one another (`cover_carriers(false)`): on a machine with fewer cores
/// than carriers, or a loaded one, a resting carrier's threads move too,
/// and so do those a covering carrier takes (`tests/rest.rs`).
const NO_HANDOFF: Duration = Duration::from_secs(3600);

/// One blocking call of each kind weft has, in turn; returns how many of
/// them came back on another OS thread.
fn every_kind_of_wait(
    i: usize,
    lock: &weft::sync::Mutex<u64>,
    tx: &weft::channel::Sender<usize>,
    rx: &weft::channel::Receiver<usize>,
) -> usize {
    let mut moves = 0;
    let mut check = |before: i32| {
        if gettid() != before {
            moves += 1;
        }
    };
    for round in 0..6 {
        let t = gettid();
        weft::sleep(Duration::from_micros(((i * 7 + round) % 500) as u64)).unwrap();
        check(t);

        let t = gettid();
        weft::yield_now();
        check(t);

        // A short CPU burst, unevenly spread.
        if (i + round).is_multiple_of(5) {
            let mut x = i as u64;
            for k in 0..20_000u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(k);
            }
            std::hint::black_box(x);
        }

        let t = gettid();
        {
            let mut g = lock.lock().unwrap();
            *g += 1;
            weft::yield_now(); // contend while holding it
        }
        check(t);

        let t = gettid();
        tx.send(i).unwrap();
        rx.recv().unwrap();
        check(t);

        let t = gettid();
        weft::park_timeout(Duration::from_micros(50));
        check(t);

        let t = gettid();
        let child = weft::spawn(move || {
            weft::sleep(Duration::from_micros(100)).unwrap();
            i
        });
        assert_eq!(child.join().unwrap(), i);
        check(t);

        let t = gettid();
        let (mut a, mut b) = weft::net::UnixStream::pair().unwrap();
        let writer = weft::spawn(move || {
            weft::sleep(Duration::from_micros(200)).unwrap();
            a.write_all(b"x").unwrap();
        });
        let mut buf = [0u8; 1];
        b.read_exact(&mut buf).unwrap();
        check(t);
        writer.join().unwrap();

        let t = gettid();
        let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let woken = weft::block_on(std::future::poll_fn(|cx| {
            if fired.load(Ordering::SeqCst) {
                return std::task::Poll::Ready(true);
            }
            let (w, fired) = (cx.waker().clone(), fired.clone());
            std::thread::spawn(move || {
                fired.store(true, Ordering::SeqCst);
                w.wake();
            });
            std::task::Poll::Pending
        }));
        assert!(woken);
        check(t);

        let t = gettid();
        let here = weft::blocking(gettid);
        assert_ne!(here, t, "the closure ran on an offload thread");
        check(t);
    }
    moves
}

fn stress(rt: &Runtime, threads: usize) -> usize {
    let lock = Arc::new(weft::sync::Mutex::new(0u64));
    let (tx, rx) = weft::channel::bounded::<usize>(16);
    let moves = Arc::new(AtomicUsize::new(0));
    // Spawned from one virtual thread, so they all start queued on one
    // carrier and the others must steal them: unbalanced on purpose.
    let spawner = {
        let (lock, moves, rt2) = (lock.clone(), moves.clone(), rt.clone());
        rt.spawn(move || {
            let hs: Vec<_> = (0..threads)
                .map(|i| {
                    let (lock, tx, rx, moves) =
                        (lock.clone(), tx.clone(), rx.clone(), moves.clone());
                    rt2.spawn(move || {
                        let m = every_kind_of_wait(i, &lock, &tx, &rx);
                        moves.fetch_add(m, Ordering::Relaxed);
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        })
    };
    join_within("the stress threads", LIMIT, spawner).unwrap();
    assert_eq!(*lock.lock().unwrap(), (threads * 6) as u64);
    moves.load(Ordering::Relaxed)
}

#[test]
fn started_threads_never_change_os_thread() {
    let rt = Runtime::builder()
        .parallelism(3)
        .stall_threshold(NO_HANDOFF)
        .rest_carriers(false)
        .cover_carriers(false)
        .build()
        .unwrap();
    assert!(!rt.allows_migration());
    let moves = stress(&rt, 1000);
    assert_eq!(
        moves, 0,
        "{moves} resumptions came back on another OS thread"
    );
}

#[test]
fn the_unsafe_opt_in_lets_threads_move() {
    // SAFETY: the stress threads keep nothing tied to an OS thread across a
    // blocking call (no thread-locals, no std lock guards, all values Send).
    let rt = unsafe { Runtime::builder().parallelism(3).allow_migration() }
        .build()
        .unwrap();
    assert!(rt.allows_migration());
    let moves = stress(&rt, 1000);
    assert!(moves > 0, "no thread moved with migration allowed");
}

/// The calling OS thread's errno slot, through a call the optimiser can
/// neither merge with another nor move across a suspension (as Weft's own
/// `errno.rs`): the test's own reads must not be the stale ones.
fn errno_slot() -> *mut libc::c_int {
    let location: unsafe extern "C" fn() -> *mut libc::c_int =
        std::hint::black_box(libc::__errno_location as unsafe extern "C" fn() -> *mut libc::c_int);
    // SAFETY: `__errno_location` has no preconditions.
    unsafe { location() }
}

/// errno is each virtual thread's own across suspensions that move it
/// (POSIX: errno is per thread), and a thread that moves leaves the errno
/// of the carrier it left alone: 300 threads on 3 carriers that allow
/// migration set errno to values of their own, suspend, and must find
/// their value again wherever they resume. A thread that wrote its saved
/// errno back into the slot of the carrier it left (an address kept across
/// the switch, `errno.rs`) fails here, and so does the thread whose slot
/// it hit.
#[test]
fn errno_follows_a_thread_that_moves() {
    // SAFETY: the threads keep nothing tied to an OS thread across a
    // suspension; errno is the runtime's to carry.
    let rt = unsafe { Runtime::builder().parallelism(3).allow_migration() }
        .build()
        .unwrap();
    let (bad, moves) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let hs: Vec<_> = (0..300)
        .map(|i| {
            let (bad, moves) = (bad.clone(), moves.clone());
            rt.spawn(move || {
                for round in 0..40 {
                    let v = (i * 100 + round + 1) as libc::c_int;
                    // SAFETY: the calling OS thread's errno slot.
                    unsafe { *errno_slot() = v };
                    let t = gettid();
                    match round % 3 {
                        0 => weft::yield_now(),
                        1 => weft::sleep(Duration::from_micros(30)).unwrap(),
                        _ => weft::park_timeout(Duration::from_micros(20)),
                    }
                    if gettid() != t {
                        moves.fetch_add(1, Ordering::Relaxed);
                    }
                    // SAFETY: as above, on the OS thread running us now.
                    if unsafe { *errno_slot() } != v {
                        bad.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        join_within("the errno threads", LIMIT, h).unwrap();
    }
    assert!(moves.load(Ordering::Relaxed) > 0, "no thread moved");
    assert_eq!(
        bad.load(Ordering::Relaxed),
        0,
        "errno lost or changed across a suspension"
    );
}

std::thread_local! {
    static COUNTER: Cell<u64> = const { Cell::new(0) };
    static LOG: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    static SHARED: Rc<Cell<u64>> = Rc::new(Cell::new(0));
}

/// The three patterns that raced before affinity, each checking its values
/// and its OS thread, 400 threads on 2 carriers (no handoff: what moves
/// with a handed-off thread is `tests/handoff.rs`'s subject).
#[test]
fn thread_locals_held_across_blocking_calls_stay_with_their_os_thread() {
    let rt = Runtime::builder()
        .parallelism(2)
        .stall_threshold(NO_HANDOFF)
        .rest_carriers(false)
        .cover_carriers(false)
        .build()
        .unwrap();
    let bad = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..400u64)
        .map(|i| {
            let bad = bad.clone();
            rt.spawn(move || {
                for round in 0..20u64 {
                    // `with` across a sleep: the Cell is this OS thread's
                    // before and after.
                    COUNTER.with(|c| {
                        let (addr, tid) = (c as *const Cell<u64> as usize, gettid());
                        weft::sleep(Duration::from_micros(100 + (i % 7) * 30)).unwrap();
                        c.set(c.get() + 1);
                        if addr != COUNTER.with(|c2| c2 as *const Cell<u64> as usize)
                            || tid != gettid()
                        {
                            bad.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    // A RefCell borrowed across a park: nobody else on this
                    // OS thread can borrow it meanwhile, and our entry is
                    // still the last one when we come back.
                    LOG.with(|l| {
                        if let Ok(mut g) = l.try_borrow_mut() {
                            g.push(i * 1000 + round);
                            weft::park_timeout(Duration::from_micros(50));
                            if g.last() != Some(&(i * 1000 + round)) {
                                bad.fetch_add(1, Ordering::Relaxed);
                            }
                            g.clear();
                        }
                    });
                    // An Rc from a thread-local held across a yield: still
                    // the same OS thread's Rc (its non-atomic count is only
                    // ever touched by one OS thread).
                    let rc = SHARED.with(Rc::clone);
                    weft::yield_now();
                    rc.set(rc.get() + 1);
                    if !SHARED.with(|s| Rc::ptr_eq(s, &rc)) {
                        bad.fetch_add(1, Ordering::Relaxed);
                    }
                    drop(rc);
                }
            })
        })
        .collect();
    for h in hs {
        join_within("thread-local users", LIMIT, h).unwrap();
    }
    assert_eq!(bad.load(Ordering::Relaxed), 0);
}

/// `weft::blocking` hands the closure to an offload thread: on a
/// one-carrier runtime, 50 started threads finish ten sleeps each while a
/// blocking call is still running (the closure waits for them, bounded).
#[test]
fn offloaded_blocking_keeps_the_carrier() {
    // No stall reports: on a busy machine a descheduled carrier could look
    // stalled and bring in a spare, which is not what this test is about.
    let rt = Runtime::builder()
        .parallelism(1)
        .stall_threshold(NO_HANDOFF)
        .rest_carriers(false)
        .cover_carriers(false)
        .build()
        .unwrap();
    let started = Arc::new(weft::sync::CountDownLatch::new(50));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let workers: Vec<_> = (0..50)
        .map(|_| {
            let (started, done_tx) = (started.clone(), done_tx.clone());
            rt.spawn(move || {
                started.count_down();
                for _ in 0..10 {
                    weft::sleep(Duration::from_millis(10)).unwrap();
                }
                done_tx.send(()).unwrap();
            })
        })
        .collect();
    let blocker = {
        let started = started.clone();
        rt.spawn(move || {
            started.wait().unwrap();
            // Blocks its OS thread until all 50 are done (or 30 s): if it
            // held the carrier, none of them could run.
            weft::blocking(move || {
                (0..50).all(|_| done_rx.recv_timeout(Duration::from_secs(30)).is_ok())
            })
        })
    };
    assert!(
        join_within("the blocking call", LIMIT, blocker).unwrap(),
        "the other threads did not finish while the blocking call ran"
    );
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(rt.active_carriers(), 1, "no spare carrier was needed");
}

/// Placement: an accept-loop-shaped spawner — it starts one thread, waits
/// until that thread runs, starts the next — ends up with its 1,000
/// long-lived threads spread over both carriers. Each new thread is queued
/// on the spawner's carrier, which runs it as soon as the spawner waits;
/// started threads move only off a held carrier, so before placement one
/// carrier served nearly all of them for their whole life. (No handoff
/// here: each thread checks it stayed where it started.)
#[test]
fn new_threads_are_placed_across_carriers() {
    const N: usize = 1000;
    let rt = Runtime::builder()
        .parallelism(2)
        .max_pool_size(2)
        .stall_threshold(NO_HANDOFF)
        .rest_carriers(false)
        .cover_carriers(false)
        .build()
        .unwrap();
    let placed_before = weft::metrics::snapshot().placed;
    let rt2 = rt.clone();
    let spawner = rt.spawn(move || {
        let all_alive = Arc::new(weft::sync::Barrier::new(N + 1));
        let (started_tx, started_rx) = weft::channel::bounded::<i32>(1);
        let mut per_tid = std::collections::HashMap::<i32, usize>::new();
        let mut hs = Vec::with_capacity(N);
        for _ in 0..N {
            let (all_alive, started_tx) = (all_alive.clone(), started_tx.clone());
            hs.push(rt2.spawn(move || {
                let t = gettid();
                started_tx.send(t).unwrap();
                all_alive.wait();
                assert_eq!(gettid(), t);
            }));
            *per_tid.entry(started_rx.recv().unwrap()).or_default() += 1;
        }
        all_alive.wait();
        for h in hs {
            h.join().unwrap();
        }
        per_tid.into_values().collect::<Vec<usize>>()
    });
    let per_carrier = join_within("the spawner", LIMIT, spawner).unwrap();
    assert_eq!(per_carrier.iter().sum::<usize>(), N);
    assert_eq!(per_carrier.len(), 2, "{per_carrier:?}");
    assert!(
        per_carrier.iter().all(|&n| n >= N * 2 / 5),
        "unbalanced: {per_carrier:?} threads per carrier"
    );
    assert!(weft::metrics::snapshot().placed > placed_before);
}
