//! The public thread API of weft, tested against the spec: spawn/join,
//! `Builder` (name, stack size, `spawn_on`), names, ids, `current()`,
//! `is_virtual()`, `JoinHandle::is_finished`, panics and `State`.
//!
//! Timeouts in this file are failure detectors only: a correct runtime passes
//! every test long before any of them expires.

use std::any::Any;
use std::collections::HashSet;
use std::hint::black_box;
use std::panic::resume_unwind;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Once, mpsc};
use std::time::{Duration, Instant};

use weft::{Builder, JoinHandle, Runtime, State, Thread, ThreadId};

/// Upper bound for anything that should take milliseconds.
const LIMIT: Duration = Duration::from_secs(30);

/// Panics whose message contains this marker are expected; the panic hook
/// installed by [`quiet_intentional_panics`] keeps them off stderr.
const MARKER: &str = "weft-intentional-test-panic";

fn quiet_intentional_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            if p.is::<Custom>() || payload_text(p).is_some_and(|m| m.contains(MARKER)) {
                return;
            }
            previous(info);
        }));
    });
}

/// A non-string panic payload (also kept quiet by the hook).
#[derive(Debug, PartialEq)]
struct Custom(u64);

fn payload_text(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// Joins `h` from a helper OS thread so that a virtual thread that never
/// finishes fails the test instead of hanging it.
fn join_timeout<T: Send + 'static>(h: JoinHandle<T>) -> std::thread::Result<T> {
    let what = format!("{:?} ({:?})", h.thread().name(), h.thread().id());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(h.join());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(result) => result,
        Err(_) => panic!("virtual thread {what} did not finish within {LIMIT:?}"),
    }
}

/// Joins and re-raises a panic of the virtual thread in the test thread.
fn join_ok<T: Send + 'static>(h: JoinHandle<T>) -> T {
    join_timeout(h).unwrap_or_else(|payload| resume_unwind(payload))
}

/// Polls `cond` until it holds; fails the test after [`LIMIT`].
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + LIMIT;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {LIMIT:?} waiting for: {what}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn wait_for_state(t: &Thread, want: State) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let now = t.state();
        if now == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "thread {:?} never reached {want:?} within {LIMIT:?}; last state {now:?}",
            t.id()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Uses roughly `bytes` of stack (4 KiB frames) and returns a checksum.
#[inline(never)]
fn use_stack(bytes: usize) -> usize {
    let mut pad = [0u8; 4096];
    black_box(&mut pad);
    let below = if bytes <= pad.len() {
        0
    } else {
        use_stack(bytes - pad.len())
    };
    black_box(&pad);
    below + 1
}

// ---------------------------------------------------------------- spawn/join

#[test]
fn spawn_join_returns_value() {
    assert_eq!(join_ok(weft::spawn(|| 6 * 7)), 42);

    let data: Vec<u64> = (1..=1000).collect();
    assert_eq!(
        join_ok(weft::spawn(move || data.iter().sum::<u64>())),
        500_500
    );

    let h = weft::spawn(|| vec![String::from("a"), String::from("b")]);
    assert_eq!(join_ok(h), ["a", "b"]);

    assert_eq!(join_ok(weft::spawn(|| ())), ());
}

#[test]
fn builder_spawn_returns_value() {
    let h = Builder::new().spawn(|| "built").expect("Builder::spawn");
    assert_eq!(join_ok(h), "built");
}

#[test]
fn handle_types_have_the_promised_traits() {
    fn thread_like<T: Clone + Send + Sync + 'static>() {}
    fn id_like<T: Copy + Eq + std::hash::Hash + std::fmt::Debug + Send + Sync>() {}
    fn send<T: Send>() {}
    thread_like::<Thread>();
    id_like::<ThreadId>();
    send::<JoinHandle<u32>>();
    send::<JoinHandle<String>>();
}

#[test]
fn dropped_handle_detaches_and_thread_still_runs() {
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    drop(weft::spawn(move || {
        weft::yield_now();
        r.store(true, SeqCst);
    }));
    wait_until("detached virtual thread to run", || ran.load(SeqCst));
}

#[test]
fn virtual_thread_spawns_and_joins_nested_children() {
    let h = weft::spawn(|| {
        let kids: Vec<_> = (0..100u64)
            .map(|i| {
                weft::spawn(move || {
                    weft::yield_now();
                    i
                })
            })
            .collect();
        kids.into_iter()
            .map(|k| k.join().expect("child panicked"))
            .sum::<u64>()
    });
    assert_eq!(join_ok(h), 4950);
}

/// With one carrier and no spare, a join inside a virtual thread must park
/// that virtual thread, never the carrier: otherwise the children it waits
/// for can never run.
#[test]
fn join_inside_virtual_thread_parks_not_blocks_single_carrier() {
    let rt = Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .build()
        .expect("runtime");
    let kids: Vec<JoinHandle<u64>> = (0..50u64)
        .map(|i| {
            rt.spawn(move || {
                weft::yield_now();
                i * 2
            })
        })
        .collect();
    // Join in reverse spawn order, so the parent certainly waits for a
    // child that has not run yet.
    let parent = rt.spawn(move || {
        kids.into_iter()
            .rev()
            .map(|k| k.join().expect("child panicked"))
            .sum::<u64>()
    });
    assert_eq!(join_ok(parent), 2450);
}

// ------------------------------------------------------------------- Builder

#[test]
fn builder_name_is_visible_inside_and_on_the_handle() {
    let h = Builder::new()
        .name("weft-worker-7")
        .spawn(|| weft::current().name().map(str::to_owned))
        .expect("spawn");
    assert_eq!(h.thread().name(), Some("weft-worker-7"));
    assert_eq!(join_ok(h).as_deref(), Some("weft-worker-7"));

    // impl Into<String>: an owned, formatted name.
    let name = format!("dyn-{}", 12);
    let h = Builder::new()
        .name(name.clone())
        .spawn(|| {
            weft::yield_now(); // still named after a reschedule
            weft::current().name().map(str::to_owned)
        })
        .expect("spawn");
    assert_eq!(join_ok(h), Some(name));
}

#[test]
fn unnamed_virtual_thread_has_no_name() {
    let h = weft::spawn(|| weft::current().name().map(str::to_owned));
    assert_eq!(h.thread().name(), None);
    assert_eq!(join_ok(h), None);
}

#[test]
fn builder_stack_size_is_usable() {
    for size in [64usize << 10, 256 << 10, 1 << 20, 8 << 20] {
        let h = Builder::new()
            .name(format!("stack-{size}"))
            .stack_size(size)
            .spawn(move || use_stack(size / 4))
            .unwrap_or_else(|e| panic!("spawn with stack_size({size}) failed: {e}"));
        assert!(join_ok(h) >= 1);
    }
}

#[test]
fn builder_spawn_on_uses_given_runtime_and_keeps_name() {
    let rt = Runtime::builder().parallelism(1).build().expect("runtime");
    let h = Builder::new()
        .name("on-rt")
        .spawn_on(&rt, || {
            let me = weft::current();
            (me.name().map(str::to_owned), me.is_virtual())
        })
        .expect("spawn_on");
    assert_eq!(join_ok(h), (Some("on-rt".to_owned()), true));
}

// ------------------------------------------------------- ids and is_virtual

#[test]
fn ids_are_unique_and_match_handles() {
    let handles: Vec<_> = (0..1000)
        .map(|_| weft::spawn(|| weft::current().id()))
        .collect();
    let mut seen = HashSet::new();
    for h in handles {
        let outside = h.thread().id();
        let inside = join_ok(h);
        assert_eq!(inside, outside, "id inside differs from handle's id");
        assert!(seen.insert(inside), "duplicate ThreadId {inside:?}");
    }
    let raw: HashSet<u64> = seen.iter().map(|id| id.as_u64().get()).collect();
    assert_eq!(raw.len(), seen.len(), "as_u64 not injective");

    // OS threads have ids too, stable and distinct from every virtual one.
    let me = weft::current().id();
    assert_eq!(
        me,
        weft::current().id(),
        "current() id unstable on OS thread"
    );
    assert!(!seen.contains(&me));
    let other = std::thread::spawn(|| weft::current().id()).join().unwrap();
    assert_ne!(me, other);
    assert!(!seen.contains(&other));
}

#[test]
fn id_and_identity_are_stable_across_reschedules() {
    let h = weft::spawn(|| {
        let first = weft::current().id();
        for _ in 0..100 {
            weft::yield_now();
            assert_eq!(weft::current().id(), first, "id changed after yield");
        }
        weft::sleep(Duration::from_millis(1)).unwrap();
        assert_eq!(weft::current().id(), first, "id changed after sleep");
        first
    });
    let id = h.thread().id();
    assert_eq!(join_ok(h), id);
}

#[test]
fn is_virtual_inside_but_not_on_os_threads() {
    assert!(join_ok(weft::spawn(|| weft::current().is_virtual())));
    let h = weft::spawn(|| ());
    assert!(h.thread().is_virtual(), "handle's Thread must be virtual");
    join_ok(h);

    assert!(
        !weft::current().is_virtual(),
        "the test harness thread is an OS thread"
    );
    let os = std::thread::spawn(|| weft::current().is_virtual())
        .join()
        .unwrap();
    assert!(!os, "std::thread must not be virtual");

    // A Thread for an OS thread, handed to a virtual thread, still says so.
    let main = weft::current();
    assert!(!join_ok(weft::spawn(move || main.is_virtual())));
}

#[test]
fn current_works_on_os_threads() {
    let (name, is_virtual, state, stable) = std::thread::Builder::new()
        .name("plain-os-thread".into())
        .spawn(|| {
            let t = weft::current();
            (
                t.name().map(str::to_owned),
                t.is_virtual(),
                t.state(),
                t.id() == weft::current().id(),
            )
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(
        name.as_deref(),
        Some("plain-os-thread"),
        "current().name() on an OS thread should be the std thread's name"
    );
    assert!(!is_virtual);
    assert_eq!(state, State::Running);
    assert!(stable);
}

// ----------------------------------------------------------- is_finished

#[test]
fn is_finished_tracks_completion() {
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let h = weft::spawn(move || {
        while !r.load(SeqCst) {
            weft::park();
        }
        7
    });
    wait_for_state(h.thread(), State::Parked);
    assert!(!h.is_finished(), "parked thread reported finished");

    release.store(true, SeqCst);
    h.thread().unpark();
    wait_until("is_finished() after release", || h.is_finished());
    let t = h.thread().clone();
    assert_eq!(join_ok(h), 7);
    assert_eq!(t.state(), State::Terminated);
}

#[test]
fn is_finished_true_for_panicked_thread() {
    quiet_intentional_panics();
    let h = weft::spawn(|| -> u8 { panic!("weft-intentional-test-panic: is_finished") });
    wait_until("is_finished() of a panicked thread", || h.is_finished());
    assert!(join_timeout(h).is_err());
}

// ------------------------------------------------------------------- panics

#[test]
fn panic_is_returned_by_join_with_its_payload() {
    quiet_intentional_panics();

    // panic!("literal") carries a &'static str.
    let h = weft::spawn(|| -> u32 { panic!("weft-intentional-test-panic: str payload") });
    let err = join_timeout(h).expect_err("join must return Err for a panicking thread");
    assert_eq!(
        err.downcast_ref::<&str>().copied(),
        Some("weft-intentional-test-panic: str payload")
    );

    // A formatted panic carries a String.
    let n = 17;
    let h = weft::spawn(move || -> u32 { panic!("{MARKER}: formatted {n}") });
    let err = join_timeout(h).expect_err("join must return Err");
    assert_eq!(
        err.downcast_ref::<String>().map(String::as_str),
        Some(format!("{MARKER}: formatted {n}").as_str())
    );

    // An arbitrary payload survives too.
    let h = weft::spawn(|| -> u32 { std::panic::panic_any(Custom(0xdead)) });
    let err = join_timeout(h).expect_err("join must return Err");
    assert_eq!(err.downcast_ref::<Custom>(), Some(&Custom(0xdead)));

    // The runtime keeps working.
    assert_eq!(join_ok(weft::spawn(|| 1 + 1)), 2);
}

#[test]
fn panic_after_park_and_migration_is_returned() {
    quiet_intentional_panics();
    let h = weft::spawn(|| -> u32 {
        for _ in 0..10 {
            weft::yield_now();
        }
        weft::sleep(Duration::from_millis(2)).unwrap();
        let _guard = vec![1u8; 1024]; // something to drop during unwinding
        panic!("weft-intentional-test-panic: after suspension")
    });
    let err = join_timeout(h).expect_err("join must return Err");
    assert_eq!(
        payload_text(&*err),
        Some("weft-intentional-test-panic: after suspension")
    );
}

#[test]
fn panic_unwinds_destructors_of_the_virtual_thread() {
    quiet_intentional_panics();
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }
    let dropped = Arc::new(AtomicBool::new(false));
    let d = dropped.clone();
    let h = weft::spawn(move || {
        let _g = SetOnDrop(d);
        weft::yield_now();
        panic!("weft-intentional-test-panic: unwind")
    });
    assert!(join_timeout(h).is_err());
    assert!(
        dropped.load(SeqCst),
        "destructor did not run during unwinding"
    );
}

#[test]
fn thousand_panics_do_not_take_down_carriers() {
    quiet_intentional_panics();
    // A single carrier with no spare: if a panic killed it, nothing would run.
    let rt = Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .build()
        .expect("runtime");
    let handles: Vec<JoinHandle<usize>> = (0..1000)
        .map(|i| {
            rt.spawn(move || {
                if i % 3 == 0 {
                    weft::yield_now();
                }
                panic!("weft-intentional-test-panic #{i}")
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let err = join_timeout(h).expect_err("panicking thread joined Ok");
        assert_eq!(
            payload_text(&*err),
            Some(format!("weft-intentional-test-panic #{i}").as_str())
        );
    }
    let handles: Vec<_> = (0..1000usize).map(|i| rt.spawn(move || i)).collect();
    let sum: usize = handles.into_iter().map(join_ok).sum();
    assert_eq!(sum, 999 * 1000 / 2);

    // Same on the default runtime.
    let handles: Vec<JoinHandle<()>> = (0..1000)
        .map(|i| weft::spawn(move || panic!("weft-intentional-test-panic d{i}")))
        .collect();
    for h in handles {
        assert!(join_timeout(h).is_err());
    }
    let handles: Vec<_> = (0..1000usize).map(|i| weft::spawn(move || i)).collect();
    assert_eq!(handles.into_iter().map(join_ok).sum::<usize>(), 499_500);
}

// -------------------------------------------------------------------- State

#[test]
fn running_thread_sees_itself_running() {
    assert_eq!(
        join_ok(weft::spawn(|| weft::current().state())),
        State::Running
    );
    // after a reschedule as well
    let h = weft::spawn(|| {
        weft::yield_now();
        weft::sleep(Duration::from_millis(1)).unwrap();
        weft::current().state()
    });
    assert_eq!(join_ok(h), State::Running);
    assert_eq!(weft::current().state(), State::Running, "OS thread state");
}

#[test]
fn parked_thread_is_observed_parked_then_terminated() {
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let h = weft::spawn(move || {
        while !r.load(SeqCst) {
            weft::park();
        }
    });
    let t = h.thread().clone();
    wait_for_state(&t, State::Parked);
    // It stays parked while nobody unparks it.
    for _ in 0..100 {
        assert_eq!(t.state(), State::Parked);
    }
    release.store(true, SeqCst);
    t.unpark();
    join_ok(h);
    assert_eq!(t.state(), State::Terminated);
    // Unparking or interrupting a terminated thread is harmless.
    t.unpark();
    t.interrupt();
    assert_eq!(t.state(), State::Terminated);
}

#[test]
fn sleeping_thread_is_observed_parked() {
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let h = weft::spawn(move || {
        while !r.load(SeqCst) {
            let _ = weft::sleep(Duration::from_secs(60));
        }
    });
    let t = h.thread().clone();
    wait_for_state(&t, State::Parked);
    release.store(true, SeqCst);
    t.interrupt();
    join_ok(h);
    assert_eq!(t.state(), State::Terminated);
}

#[test]
fn os_thread_parked_in_weft_park_is_observed_parked() {
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let (tx, rx) = mpsc::channel();
    let os = std::thread::spawn(move || {
        tx.send(weft::current()).unwrap();
        while !r.load(SeqCst) {
            weft::park();
        }
        weft::current().state()
    });
    let t = rx.recv_timeout(LIMIT).expect("OS thread did not start");
    assert!(!t.is_virtual());
    wait_for_state(&t, State::Parked);
    release.store(true, SeqCst);
    t.unpark();
    assert_eq!(os.join().unwrap(), State::Running);
}

/// On one carrier, while A runs, B (runnable, already started once) must
/// not be reported Running, Parked or Terminated.
#[test]
fn runnable_thread_is_not_reported_running_on_busy_single_carrier() {
    let rt = Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .build()
        .expect("runtime");
    let b_ran = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (br, bs) = (b_ran.clone(), stop.clone());
    let b = rt.spawn(move || {
        while !bs.load(SeqCst) {
            br.store(true, SeqCst);
            weft::yield_now();
        }
    });
    let b_thread = b.thread().clone();
    let a = rt.spawn(move || {
        while !b_ran.load(SeqCst) {
            weft::yield_now();
        }
        let mut seen = Vec::new();
        for _ in 0..50 {
            // B cannot be running: A holds the only carrier right now.
            seen.push(b_thread.state());
            weft::yield_now();
        }
        stop.store(true, SeqCst);
        seen
    });
    let seen = join_ok(a);
    join_ok(b);
    for s in seen {
        assert!(
            matches!(s, State::Runnable | State::Yielding | State::Started),
            "B observed as {s:?} while A occupied the only carrier"
        );
    }
}

/// Order is not specified, but every spawned thread must run exactly once.
#[test]
fn every_thread_on_one_carrier_runs_exactly_once() {
    let rt = Runtime::builder().parallelism(1).build().expect("runtime");
    let order = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..200)
        .map(|i| {
            let (o, c) = (order.clone(), count.clone());
            rt.spawn(move || {
                o.lock().unwrap().push(i);
                c.fetch_add(1, SeqCst);
            })
        })
        .collect();
    for h in handles {
        join_ok(h);
    }
    assert_eq!(count.load(SeqCst), 200);
    let mut got = order.lock().unwrap().clone();
    got.sort_unstable();
    assert_eq!(got, (0..200).collect::<Vec<_>>());
}
