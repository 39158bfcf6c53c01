//! A static TLS larger than the default stack keeps room for (a 160 KiB
//! `thread_local!` beside 128 KiB stacks) still gives every virtual
//! thread thread-locals of its own: its area goes to the top of a slot of
//! a larger pool (`stack::with_room_for`). Before (issue 53), the area
//! did not fit, and the thread silently used its carrier's thread-locals:
//! 100 threads saw 2 `std::thread` ids and read each other's values.
//! A runtime whose threads share their carriers' thread-locals says so in
//! its metrics (and once on stderr).

use std::cell::RefCell;
use std::collections::HashSet;
use std::time::Duration;

const BIG: usize = 160 * 1024;

std::thread_local! {
    static SCRATCH: RefCell<[u8; BIG]> = const { RefCell::new([0; BIG]) };
}

/// The strict runtime: 2 carriers, no spares, default stack size.
fn strict() -> weft::Runtime {
    weft::Runtime::builder()
        .name("big-tls")
        .parallelism(2)
        .max_pool_size(2)
        .build()
        .unwrap()
}

#[test]
fn a_large_thread_local_is_each_virtual_threads_own() {
    const THREADS: usize = 100;
    let rt = strict();
    assert!(
        rt.stack_size() < BIG,
        "the stack must be smaller than the TLS"
    );
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            rt.spawn(move || {
                let id = std::thread::current().id();
                let mut wrong = 0;
                for round in 0..10u8 {
                    let mark = (i as u8).wrapping_mul(31).wrapping_add(round);
                    SCRATCH.with_borrow_mut(|s| {
                        s[0] = mark;
                        s[BIG - 1] = mark;
                    });
                    // Other threads run on this carrier meanwhile.
                    if round % 2 == 0 {
                        weft::yield_now();
                    } else {
                        weft::sleep(Duration::from_micros(100)).unwrap();
                    }
                    SCRATCH.with_borrow(|s| {
                        if s[0] != mark || s[BIG - 1] != mark {
                            wrong += 1;
                        }
                    });
                    assert_eq!(std::thread::current().id(), id);
                }
                (id, wrong)
            })
        })
        .collect();
    let mut ids = HashSet::new();
    let mut wrong = 0;
    for h in handles {
        let (id, w) = h.join().unwrap();
        ids.insert(id);
        wrong += w;
    }
    assert_eq!(wrong, 0, "reads of another thread's thread-local");
    assert_eq!(ids.len(), THREADS, "std::thread ids");
    let m = weft::metrics::snapshot();
    let mine: Vec<_> = m
        .runtimes
        .iter()
        .filter(|r| r.runtime.starts_with("big-tls"))
        .collect();
    assert!(!mine.is_empty());
    assert!(
        mine.iter().all(|r| r.shared_thread_locals.is_none()),
        "{mine:?}"
    );
}

/// Threads given a small stack explicitly get the same: areas of their
/// own, and the stack each asked for below its area.
#[test]
fn small_explicit_stacks_get_areas_too() {
    let rt = strict();
    let handles: Vec<_> = (0..20u8)
        .map(|i| {
            weft::Builder::new()
                .stack_size(16 * 1024)
                .spawn_on(&rt, move || {
                    SCRATCH.with_borrow_mut(|s| s[7] = i);
                    weft::yield_now();
                    (
                        SCRATCH.with_borrow(|s| s[7]) == i,
                        weft_native_tests::own_stack().1,
                    )
                })
                .unwrap()
        })
        .collect();
    for h in handles {
        let (own, stack) = h.join().unwrap();
        assert!(own, "a read of another thread's thread-local");
        assert!(stack >= 16 * 1024, "stack of {stack} bytes");
    }
}

/// Sharing the carriers' thread-locals, when asked for, is in the
/// metrics with its reason.
#[test]
fn sharing_carrier_thread_locals_is_reported() {
    let rt = weft::Runtime::builder()
        .name("shares-tls")
        .parallelism(1)
        .carrier_thread_locals()
        .build()
        .unwrap();
    rt.spawn(|| ()).join().unwrap();
    let m = weft::metrics::snapshot();
    let r = m
        .runtimes
        .iter()
        .find(|r| r.runtime.starts_with("shares-tls"))
        .expect("the runtime in the metrics");
    assert!(
        r.shared_thread_locals
            .is_some_and(|why| why.contains("carrier_thread_locals")),
        "{r:?}"
    );
}

/// In a child process only (`WEFT_SHARES_TLS_CHILD`): a runtime that
/// shares its carriers' thread-locals, with two carriers and threads.
#[test]
fn shares_tls_child() {
    if std::env::var_os("WEFT_SHARES_TLS_CHILD").is_none() {
        return;
    }
    let rt = weft::Runtime::builder()
        .name("child-shares")
        .parallelism(2)
        .carrier_thread_locals()
        .build()
        .unwrap();
    for _ in 0..10 {
        rt.spawn(|| ()).join().unwrap();
    }
}

/// ... and it says so on stderr, once, with the reason.
#[test]
fn sharing_carrier_thread_locals_is_said_once_on_stderr() {
    if std::env::var_os("WEFT_SHARES_TLS_CHILD").is_some() {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "shares_tls_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WEFT_SHARES_TLS_CHILD", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let said: Vec<_> = err
        .lines()
        .filter(|l| l.contains("child-shares") && l.contains("share their carriers' thread-locals"))
        .collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].contains("carrier_thread_locals"), "{err}");
}
