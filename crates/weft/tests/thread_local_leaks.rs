//! Thread-local destructors run at the end of every virtual thread: a
//! hundred thousand threads that each fill thread-locals (a heap value of
//! their own, std's `thread::current()` handle) leave no heap behind.
//! Counted by a global allocator, in a binary of its own so that no other
//! test allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::RefCell;
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

std::thread_local! {
    static BUF: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(256));
}

fn batch(rt: &weft::Runtime, n: usize) {
    let hs: Vec<_> = (0..n)
        .map(|i| {
            rt.spawn(move || {
                BUF.with(|b| b.borrow_mut().push(i as u8));
                let _ = std::thread::current().id();
                weft::yield_now();
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn a_hundred_thousand_threads_with_thread_locals_leave_no_heap_behind() {
    if !cfg!(all(
        target_os = "linux",
        target_arch = "x86_64",
        target_env = "gnu"
    )) || std::env::var_os("WEFT_THREAD_LOCALS").is_some()
    {
        return;
    }
    let rt = weft::Runtime::builder().parallelism(2).build().unwrap();
    // Warm up at the same concurrency: stack caches, the registry's slabs.
    for _ in 0..5 {
        batch(&rt, 1000);
    }
    let base = LIVE.load(Ordering::SeqCst);
    for _ in 0..100 {
        batch(&rt, 1000);
    }
    let grown = LIVE.load(Ordering::SeqCst) - base;
    // Each thread's buffer alone is 256 bytes: a leak would be 25+ MB.
    assert!(
        grown < 1 << 20,
        "the heap grew by {grown} bytes over 100,000 threads"
    );
}
