//! A virtual thread is a thread: its own `thread_local!` values, its own
//! `std::thread::current()`, its thread-local destructors at its end, and
//! libraries that mark "I am inside X" on the current thread (Tokio's
//! runtime context) see only their own thread's mark.
//!
//! Every test runs on a runtime with fewer carriers than threads, and
//! proves the threads interleaved on one carrier with a barrier that fills
//! only when all of them are in flight at once.

mod common;

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{areas_supported, join_within};

const LIMIT: Duration = Duration::from_secs(60);

fn runtime(carriers: usize) -> weft::Runtime {
    weft::Runtime::builder()
        .parallelism(carriers)
        .max_pool_size(carriers)
        .build()
        .unwrap()
}

std::thread_local! {
    static MINE: Cell<u64> = const { Cell::new(0) };
    /// Lazily initialised, with a heap buffer from the start: the case
    /// where a copied block would share one buffer between threads.
    static LAZY: RefCell<Vec<u64>> = RefCell::new(Vec::with_capacity(4));
}

#[test]
fn each_virtual_thread_keeps_its_own_thread_local_values_across_parks() {
    if !areas_supported() {
        return;
    }
    let rt = runtime(2);
    const N: usize = 200;
    let all_in = Arc::new(weft::sync::Barrier::new(N));
    let handles: Vec<_> = (0..N as u64)
        .map(|i| {
            let all_in = all_in.clone();
            rt.spawn(move || {
                MINE.with(|m| m.set(i + 1));
                LAZY.with(|l| l.borrow_mut().push(i));
                // All 200 set their values before any reads: 100 per
                // carrier, each parked in between.
                all_in.wait();
                weft::sleep(Duration::from_millis(1)).unwrap();
                let mine = MINE.with(Cell::get);
                let lazy = LAZY.with(|l| l.borrow().clone());
                (mine == i + 1, lazy == vec![i])
            })
        })
        .collect();
    let wrong = handles
        .into_iter()
        .map(|h| join_within("thread", LIMIT, h).unwrap())
        .filter(|&(a, b)| !(a && b))
        .count();
    assert_eq!(wrong, 0, "threads that read another thread's value");
    // The carrier's own value was never touched by any of them.
    assert_eq!(MINE.with(Cell::get), 0);
}

#[test]
fn std_thread_current_is_a_distinct_thread_per_virtual_thread() {
    if !areas_supported() {
        return;
    }
    let rt = runtime(2);
    const N: usize = 200;
    let all_in = Arc::new(weft::sync::Barrier::new(N));
    let handles: Vec<_> = (0..N)
        .map(|_| {
            let all_in = all_in.clone();
            rt.spawn(move || {
                let before = std::thread::current().id();
                all_in.wait();
                let after = std::thread::current().id();
                assert_eq!(before, after, "a thread's id changed across a park");
                before
            })
        })
        .collect();
    let ids: HashSet<_> = handles
        .into_iter()
        .map(|h| join_within("thread", LIMIT, h).unwrap())
        .collect();
    assert_eq!(ids.len(), N, "distinct std ThreadIds");
    assert!(!ids.contains(&std::thread::current().id()));
}

struct CountsDrops(Arc<AtomicUsize>);
impl Drop for CountsDrops {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

std::thread_local! {
    static DROPS: RefCell<Option<CountsDrops>> = const { RefCell::new(None) };
}

#[test]
fn thread_local_destructors_run_when_each_virtual_thread_ends_before_join_returns() {
    if !areas_supported() {
        return;
    }
    let rt = runtime(2);
    let dropped = Arc::new(AtomicUsize::new(0));
    for round in 0..20 {
        let handles: Vec<_> = (0..500)
            .map(|_| {
                let d = dropped.clone();
                rt.spawn(move || {
                    DROPS.with(|s| *s.borrow_mut() = Some(CountsDrops(d)));
                    // std's own per-thread state too: its handle is freed by
                    // a pthread key destructor.
                    let _ = std::thread::current();
                    weft::yield_now();
                })
            })
            .collect();
        for h in handles {
            join_within("thread", LIMIT, h).unwrap();
        }
        // `join` returned only after the thread's destructors ran.
        assert_eq!(dropped.load(Ordering::SeqCst), 500 * (round + 1));
    }
}

std::thread_local! {
    static SHARED_CELL: AtomicUsize = const { AtomicUsize::new(0) };
}

/// The reason copying values in and out of the carrier at each switch is
/// not how this works: a `Sync` thread-local lent to another OS thread
/// across a park must stay the lender's own memory.
#[test]
fn a_thread_local_lent_to_an_os_thread_across_a_park_stays_the_lenders() {
    if !areas_supported() {
        return;
    }
    let rt = runtime(1);
    const N: usize = 20;
    let all_in = Arc::new(weft::sync::Barrier::new(N));
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let all_in = all_in.clone();
            rt.spawn(move || {
                SHARED_CELL.with(|x| {
                    x.store(i * 1000, Ordering::SeqCst);
                    let addr = x as *const AtomicUsize as usize;
                    let (tx, rx) = weft::channel::bounded::<usize>(1);
                    std::thread::scope(|s| {
                        let lent: &AtomicUsize = x;
                        let h = s.spawn(move || {
                            // Runs while the lender is parked below.
                            let seen = lent.load(Ordering::SeqCst);
                            lent.fetch_add(1, Ordering::SeqCst);
                            tx.send(seen).unwrap();
                        });
                        // Every lender parks here at once, on one carrier.
                        all_in.wait();
                        let seen = rx.recv().unwrap();
                        h.join().unwrap();
                        assert_eq!(seen, i * 1000, "the OS thread saw another thread's value");
                    });
                    let again = SHARED_CELL.with(|y| y as *const AtomicUsize as usize);
                    assert_eq!(addr, again, "the thread-local moved");
                    x.load(Ordering::SeqCst)
                })
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(join_within("thread", LIMIT, h).unwrap(), i * 1000 + 1);
    }
}

/// The sync `postgres` client's shape: a current-thread Tokio runtime
/// driven with `block_on` on each virtual thread. With thread-locals per
/// carrier, the second thread to enter `block_on` on a carrier while the
/// first was parked inside it panicked with "Cannot start a runtime from
/// within a runtime".
#[test]
fn tokio_block_on_inside_many_virtual_threads_of_one_carrier() {
    if !areas_supported() {
        return;
    }
    let rt = runtime(1);
    const N: usize = 50;
    let all_in = Arc::new(weft::sync::Barrier::new(N));
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let all_in = all_in.clone();
            rt.spawn(move || {
                let tokio_rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                tokio_rt.block_on(async {
                    assert!(tokio::runtime::Handle::try_current().is_ok());
                    // A blocking wait inside the runtime: every thread is
                    // inside its own block_on at once.
                    all_in.wait();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    i
                })
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(join_within("thread", LIMIT, h).unwrap(), i);
    }
}

#[test]
fn a_panic_on_one_virtual_thread_is_not_another_ones() {
    if !areas_supported() {
        return;
    }
    let rt = runtime(1);
    let all_in = Arc::new(weft::sync::Barrier::new(2));
    struct ParksWhileUnwinding(Arc<weft::sync::Barrier>);
    impl Drop for ParksWhileUnwinding {
        fn drop(&mut self) {
            assert!(std::thread::panicking());
            self.0.wait();
        }
    }
    let a = {
        let all_in = all_in.clone();
        rt.spawn(move || {
            let _g = ParksWhileUnwinding(all_in);
            panic!("expected");
        })
    };
    let b = rt.spawn(move || {
        all_in.wait();
        (std::thread::panicking(), weft::panicking())
    });
    assert_eq!(join_within("b", LIMIT, b).unwrap(), (false, false));
    assert!(join_within("a", LIMIT, a).is_err());
}

#[test]
fn carrier_thread_locals_is_the_opt_out() {
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .carrier_thread_locals()
        .build()
        .unwrap();
    let ids: HashSet<_> = (0..10)
        .map(|_| rt.spawn(|| std::thread::current().id()))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| join_within("thread", LIMIT, h).unwrap())
        .collect();
    assert_eq!(ids.len(), 1, "threads of one carrier share its std thread");
}

static KEY_DTOR_RUNS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_key_dtor(_: *mut libc::c_void) {
    KEY_DTOR_RUNS.fetch_add(1, Ordering::SeqCst);
}

/// pthread keys are per virtual thread too: each thread sees only its own
/// value, the key's destructor runs at each thread's end — and not for a
/// key deleted meanwhile, as glibc does.
#[test]
fn pthread_key_values_are_per_virtual_thread_and_destroyed_at_its_end() {
    if !areas_supported() {
        return;
    }
    let rt = runtime(1);
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: a valid out pointer and destructor.
    let created = unsafe { libc::pthread_key_create(&mut key, Some(count_key_dtor)) };
    assert_eq!(created, 0);
    const N: usize = 20;
    let all_in = Arc::new(weft::sync::Barrier::new(N));
    let hs: Vec<_> = (0..N)
        .map(|i| {
            let all_in = all_in.clone();
            rt.spawn(move || {
                // SAFETY: a key of this process; the value is a plain number.
                unsafe { libc::pthread_setspecific(key, (i + 1) as *const libc::c_void) };
                all_in.wait();
                // SAFETY: as above.
                unsafe { libc::pthread_getspecific(key) as usize }
            })
        })
        .collect();
    for (i, h) in hs.into_iter().enumerate() {
        assert_eq!(join_within("thread", LIMIT, h).unwrap(), i + 1);
    }
    assert_eq!(KEY_DTOR_RUNS.load(Ordering::SeqCst), N);
    // A key deleted while a thread holds a value: no destructor at its end.
    let (tx, rx) = weft::channel::bounded::<()>(1);
    let h = rt.spawn(move || {
        // SAFETY: as above.
        unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<libc::c_void>()) };
        rx.recv().unwrap();
    });
    while h.thread().state() != weft::State::Parked {
        std::thread::yield_now();
    }
    // SAFETY: the key exists.
    assert_eq!(unsafe { libc::pthread_key_delete(key) }, 0);
    tx.send(()).unwrap();
    join_within("thread", LIMIT, h).unwrap();
    assert_eq!(KEY_DTOR_RUNS.load(Ordering::SeqCst), N);
}
