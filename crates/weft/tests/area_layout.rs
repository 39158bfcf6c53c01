//! The thread-local area and the top of the stack share a page
//! (ARCHITECTURE.md, "Thread-local areas"; issue #40): the stack starts
//! right below the lowest static block the area holds. These tests check
//! what that must not change: a recycled stack slot starts its next thread
//! from the templates, with nothing of the thread before it visible, and a
//! stack used down to its limit never reaches the thread-locals above it.

mod common;

use std::cell::{Cell, RefCell};
use std::hint::black_box;
use std::time::Duration;

use common::{areas_supported, join_within, own_stack};

const LIMIT: Duration = Duration::from_secs(60);

std::thread_local! {
    /// `.tdata`: starts at 7 in every thread.
    static FRESH: Cell<u64> = const { Cell::new(7) };
    /// Lazily made, with a heap value: `None` until a thread sets it.
    static LAZY: RefCell<Option<String>> = const { RefCell::new(None) };
    /// A pattern a thread writes and checks after using its whole stack.
    static SENTINEL: Cell<[u64; 8]> = const { Cell::new([0; 8]) };
}

/// What one thread saw of its own identity when it started, and where.
#[derive(Debug, PartialEq)]
struct Start {
    fresh: u64,
    lazy: Option<String>,
    key: usize,
    errno: i32,
}

/// A slot that one thread used, wrote its thread-locals, pthread key and
/// errno on, and left, is taken by the next thread of the carrier (the
/// carrier's stack cache hands it back): that thread starts from the
/// templates — nothing of the thread before it is visible. Checked over
/// rounds until the slot was seen reused (the thread-local's address, which
/// is the slot's, is the same).
#[test]
fn a_reused_slot_starts_its_next_thread_with_fresh_thread_locals() {
    if !areas_supported() {
        return;
    }
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .build()
        .unwrap();
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: creates a key without a destructor.
    assert_eq!(unsafe { libc::pthread_key_create(&mut key, None) }, 0);
    let mut prev: Option<usize> = None;
    let mut reused = 0;
    for round in 0..64u64 {
        let h = rt.spawn(move || {
            let start = Start {
                fresh: FRESH.get(),
                lazy: LAZY.with_borrow(Clone::clone),
                // SAFETY: a key of this process.
                key: unsafe { libc::pthread_getspecific(key) } as usize,
                // SAFETY: __errno_location has no preconditions.
                errno: unsafe { *libc::__errno_location() },
            };
            FRESH.set(1000 + round);
            LAZY.set(Some(format!("thread {round}")));
            // SAFETY: a key of this process; the value is never
            // dereferenced.
            unsafe {
                libc::pthread_setspecific(key, (round + 1) as *const libc::c_void);
                *libc::__errno_location() = 1000;
            }
            weft::yield_now();
            (start, FRESH.with(|c| c as *const Cell<u64> as usize))
        });
        let (start, addr) = join_within("a round's thread", LIMIT, h).unwrap();
        assert_eq!(
            start,
            Start {
                fresh: 7,
                lazy: None,
                key: 0,
                errno: 0
            },
            "round {round}: the thread started with what a thread before it left"
        );
        if prev == Some(addr) {
            reused += 1;
        }
        prev = Some(addr);
    }
    assert!(
        reused > 0,
        "no slot was reused in 64 rounds: nothing checked"
    );
}

/// Recurses until less than `margin` bytes of the stack are left below
/// the frame; returns the depth.
#[inline(never)]
fn recurse(lo: usize, margin: usize, depth: usize) -> usize {
    let frame = black_box([depth as u8; 512]);
    let sp = frame.as_ptr() as usize;
    let d = if sp - lo > margin {
        recurse(lo, margin, depth + 1)
    } else {
        depth
    };
    // Keeps the frame alive across the call (no tail call).
    black_box(&frame);
    d
}

/// The stack starts right below the area's lowest static block — within a
/// page of the thread pointer, not below glibc's static-TLS surplus (a
/// page and more below it before) — and a thread that uses its stack down
/// to a few KiB above the guard page finds its thread-locals (the
/// executable's block, libc's errno) as it left them.
#[test]
fn deep_recursion_below_the_area_leaves_thread_locals_alone() {
    if !areas_supported() {
        return;
    }
    let rt = weft::Runtime::builder().parallelism(1).build().unwrap();
    let h = rt.spawn(|| {
        let pattern = [
            0x5eed_0000_0000_0000u64 | 0xa5a5,
            1,
            2,
            3,
            4,
            5,
            6,
            u64::MAX,
        ];
        SENTINEL.set(pattern);
        FRESH.set(42);
        // SAFETY: __errno_location has no preconditions.
        unsafe { *libc::__errno_location() = 77 };
        let (lo, hi) = own_stack();
        // SAFETY: pthread_self has no preconditions (on an area: the
        // area's thread pointer).
        let tp = unsafe { libc::pthread_self() } as usize;
        let sentinel = SENTINEL.with(|c| c as *const _ as usize);
        // SAFETY: as above.
        let errno = unsafe { libc::__errno_location() } as usize;
        assert!(
            hi <= sentinel && hi <= errno && hi < tp,
            "the stack [{lo:#x}, {hi:#x}) reaches the area (tp {tp:#x})"
        );
        assert!(
            tp - hi <= 2048,
            "the stack starts {} bytes below the thread pointer: below the surplus?",
            tp - hi
        );
        let depth = recurse(lo, 8 * 1024, 0);
        // SAFETY: as above.
        let errno_after = unsafe { *libc::__errno_location() };
        (depth, SENTINEL.get() == pattern, FRESH.get(), errno_after)
    });
    let (depth, sentinel_ok, fresh, errno) = join_within("the recursing thread", LIMIT, h).unwrap();
    assert!(depth > 100, "recursed only {depth} frames");
    assert!(sentinel_ok, "the sentinel changed");
    assert_eq!((fresh, errno), (42, 77));
}
