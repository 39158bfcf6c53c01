//! What a grouped dump says of each group: a mutex's waiters name its
//! owner, every `weft::sync` wait says what it waits for (a latch's too),
//! each group tells how long its threads have waited, and frames carry
//! their module path, the runtime's without their generic arguments.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::wait_until;
use weft::sync::{CountDownLatch, Mutex};
use weft::{JoinHandle, StackGroup, State};

const LIMIT: Duration = Duration::from_secs(60);

#[inline(never)]
fn details_lock_waiter(m: &Mutex<u32>) {
    let g = std::hint::black_box(m.lock());
    drop(g);
}

#[inline(never)]
fn details_latch_waiter(l: &CountDownLatch) {
    let _ = std::hint::black_box(l.wait());
}

fn parked(hs: &[JoinHandle<()>]) -> bool {
    hs.iter().all(|h| h.thread().state() == State::Parked)
}

fn group_of<'a>(groups: &'a [StackGroup], function: &str) -> &'a StackGroup {
    groups
        .iter()
        .find(|g| g.stack.iter().any(|f| f.function.contains(function)))
        .unwrap_or_else(|| panic!("no group runs {function}"))
}

#[test]
fn groups_name_owner_wait_and_module() {
    let m = Arc::new(Mutex::new(0u32));
    let latch = Arc::new(CountDownLatch::new(1));
    let (release, wait) = weft::channel::bounded::<()>(1);
    let owner = {
        let m = m.clone();
        weft::spawn(move || {
            let _g = m.lock();
            let _ = wait.recv();
        })
    };
    wait_until("the owner to park", LIMIT, || {
        owner.thread().state() == State::Parked && m.owner_id().is_some()
    });
    let lock_waiters: Vec<_> = (0..5)
        .map(|_| {
            let m = m.clone();
            weft::spawn(move || details_lock_waiter(&m))
        })
        .collect();
    let latch_waiters: Vec<_> = (0..4)
        .map(|_| {
            let l = latch.clone();
            weft::spawn(move || details_latch_waiter(&l))
        })
        .collect();
    wait_until("the waiters to park", LIMIT, || {
        parked(&lock_waiters) && parked(&latch_waiters)
    });

    let groups = weft::dump().groups();
    let owner_id = owner.thread().id().as_u64();
    let locks = group_of(&groups.groups, "details_lock_waiter");
    assert_eq!(locks.count, 5);
    let blocker = locks.blocker.as_deref().unwrap_or_default();
    assert!(
        blocker.starts_with("waiting for weft::sync::Mutex <0x")
            && blocker.ends_with(&format!("> owned by #{owner_id}")),
        "{blocker}"
    );
    let latches = group_of(&groups.groups, "details_latch_waiter");
    assert_eq!(latches.count, 4);
    let blocker = latches.blocker.as_deref().unwrap_or_default();
    assert!(
        blocker.starts_with("waiting for the count down of weft::sync::CountDownLatch <0x"),
        "{blocker}"
    );
    // How long they have waited: known for every waiting group, printed.
    assert!(locks.longest_wait.is_some() && latches.longest_wait.is_some());
    let text = groups.to_string();
    assert!(text.contains("owned by #"), "{text}");
    assert!(text.contains("(longest "), "{text}");
    // Every frame in a crate's sources names its module; the runtime's
    // frames have no generic arguments left.
    for g in [locks, latches] {
        for f in &g.stack {
            let in_src = f.file.as_deref().is_some_and(|p| {
                p.ends_with(".rs") && p.contains("/src/") && !p.contains("/tests/")
            });
            if in_src {
                assert!(f.function.contains("::"), "bare name {f:?}");
            }
            if f.is_runtime() {
                let b = f.function.as_bytes();
                for (i, &c) in b.iter().enumerate() {
                    if c == b'<' && i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
                    {
                        assert!(f.function[i..].starts_with("<…>"), "{}", f.function);
                    }
                }
            }
        }
    }
    // The full dump says how long each waiter has waited.
    let dump = weft::dump().to_string();
    assert!(dump.contains("owned by #"), "{dump}");
    assert!(dump.contains(" (for "), "{dump}");

    release.send(()).unwrap();
    latch.count_down();
    for h in lock_waiters.into_iter().chain(latch_waiters) {
        h.join().unwrap();
    }
    owner.join().unwrap();
}
