//! Every futex operation that can wake or move a waiter reaches the
//! waiters the hooks emulate (`transparent/futex.rs`): a virtual thread
//! that waits through `syscall(SYS_futex)` is woken by `FUTEX_CMP_REQUEUE`,
//! `FUTEX_REQUEUE` and `FUTEX_WAKE_OP` issued from an OS thread, as an OS
//! thread would be. Before: those operations went to the kernel, which
//! knew no such waiter, and the wait without a timeout never ended.
//! Also: a timeout too large for the clock neither aborts the process nor
//! times out.
//!
//! A waker cannot know when the waiter has queued itself, so it repeats
//! its operation until the waiter reports back; the watchdog only fails a
//! test that has made no progress for two minutes (stuck, not slow).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

const FUTEX_WAIT_PRIVATE: libc::c_int = libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG;
const FUTEX_WAKE_PRIVATE: libc::c_int = libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG;
const STUCK: Duration = Duration::from_secs(120);

fn futex(word: &AtomicU32, op: libc::c_int, val: u32, val2: usize, word2: usize, val3: u32) -> i64 {
    // SAFETY: futex(2) on live, aligned words; `val2` is a count or a
    // timespec pointer as `op` requires.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const AtomicU32,
            op,
            val,
            val2,
            word2,
            val3,
        )
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A virtual thread waits on `a` (value 0) without a timeout; `waker` is
/// called on this OS thread until the waiter's wait returns 0.
fn woken_by(a: Arc<AtomicU32>, what: &str, mut waker: impl FnMut()) {
    let done = Arc::new(AtomicBool::new(false));
    let (a2, d2) = (a.clone(), done.clone());
    let waiter = weft::spawn(move || {
        let r = futex(&a2, FUTEX_WAIT_PRIVATE, 0, 0, 0, 0);
        d2.store(true, Ordering::Release);
        r
    });
    let t0 = Instant::now();
    while !done.load(Ordering::Acquire) {
        assert!(t0.elapsed() < STUCK, "{what}: the waiter was never woken");
        waker();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(waiter.join().unwrap(), 0, "{what}");
}

#[test]
fn cmp_requeue_moves_an_emulated_waiter() {
    let a = Arc::new(AtomicU32::new(0));
    let b = Arc::new(AtomicU32::new(0));
    // A mismatched value: EAGAIN, nothing moved.
    assert_eq!(
        futex(
            &a,
            libc::FUTEX_CMP_REQUEUE | libc::FUTEX_PRIVATE_FLAG,
            0,
            1,
            b.as_ptr() as usize,
            7
        ),
        -1
    );
    assert_eq!(errno(), libc::EAGAIN);
    let (a1, b1) = (a.clone(), b.clone());
    woken_by(a, "FUTEX_CMP_REQUEUE then FUTEX_WAKE", move || {
        // Wake none, move one to `b`, then wake `b`'s waiters.
        let r = futex(
            &a1,
            libc::FUTEX_CMP_REQUEUE | libc::FUTEX_PRIVATE_FLAG,
            0,
            1,
            b1.as_ptr() as usize,
            0,
        );
        assert!(r >= 0, "cmp_requeue: errno {}", errno());
        futex(&b1, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
    });
}

#[test]
fn requeue_can_wake_an_emulated_waiter() {
    let a = Arc::new(AtomicU32::new(0));
    let b = Arc::new(AtomicU32::new(0));
    let (a1, b1) = (a.clone(), b.clone());
    woken_by(a, "FUTEX_REQUEUE waking one", move || {
        let r = futex(
            &a1,
            libc::FUTEX_REQUEUE | libc::FUTEX_PRIVATE_FLAG,
            1,
            0,
            b1.as_ptr() as usize,
            0,
        );
        assert!(r >= 0, "requeue: errno {}", errno());
    });
}

/// `FUTEX_OP(op, oparg, cmp, cmparg)` of futex(2).
fn futex_op(op: u32, oparg: u32, cmp: u32, cmparg: u32) -> u32 {
    ((op & 0xf) << 28) | ((cmp & 0xf) << 24) | ((oparg & 0xfff) << 12) | (cmparg & 0xfff)
}

#[test]
fn wake_op_does_its_operation_and_wakes_an_emulated_waiter() {
    const FUTEX_OP_ADD: u32 = 1;
    const FUTEX_OP_CMP_GE: u32 = 5;
    let a = Arc::new(AtomicU32::new(0));
    let b = Arc::new(AtomicU32::new(0));
    let (a1, b1) = (a.clone(), b.clone());
    let mut calls = 0u32;
    // The waiter waits on `b`, the first word. Each call adds 1 to `a`,
    // the second word, wakes one waiter of `b` unconditionally and, as
    // the comparison (old >= 0) holds, one of `a` (there is none).
    woken_by(b.clone(), "FUTEX_WAKE_OP", move || {
        calls += 1;
        let r = futex(
            &b1,
            libc::FUTEX_WAKE_OP | libc::FUTEX_PRIVATE_FLAG,
            1,
            1,
            a1.as_ptr() as usize,
            futex_op(FUTEX_OP_ADD, 1, FUTEX_OP_CMP_GE, 0),
        );
        assert!(r >= 0, "wake_op: errno {}", errno());
        assert_eq!(
            a1.load(Ordering::SeqCst),
            calls,
            "the operation ran once per call"
        );
    });
    assert!(a.load(Ordering::SeqCst) >= 1);
}

#[test]
fn a_huge_futex_timeout_neither_aborts_nor_expires() {
    let huge = libc::timespec {
        tv_sec: libc::time_t::MAX,
        tv_nsec: 0,
    };
    let ts = &huge as *const libc::timespec as usize;
    // The word differs: EAGAIN at once (before: an overflow panic in the
    // hook, which aborts the process).
    let r = weft::spawn(move || {
        let w = AtomicU32::new(1);
        (futex(&w, FUTEX_WAIT_PRIVATE, 0, ts, 0, 0), errno())
    })
    .join()
    .unwrap();
    assert_eq!(r, (-1, libc::EAGAIN));
    // The word matches: waits until woken, not timed out.
    let a = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let (a2, d2) = (a.clone(), done.clone());
    let waiter = weft::spawn(move || {
        let r = futex(&a2, FUTEX_WAIT_PRIVATE, 0, ts, 0, 0);
        d2.store(true, Ordering::Release);
        r
    });
    let t0 = Instant::now();
    while !done.load(Ordering::Acquire) {
        assert!(t0.elapsed() < STUCK, "never woken");
        futex(&a, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(waiter.join().unwrap(), 0);
}
