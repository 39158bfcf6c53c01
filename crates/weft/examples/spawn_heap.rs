//! Heap bytes a parked virtual thread keeps, per allocation size.
//!
//! Counts every live allocation by requested size with a counting global
//! allocator, spawns N threads that park until released, and prints the
//! growth per thread: requested bytes and glibc malloc's chunk bytes (the
//! request plus its 8-byte size word, rounded up to 16, at least 32).
//!
//! ```text
//! cargo run --profile ci -p weft --example spawn_heap -- 100000
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};

/// Sizes counted one by one (8-byte steps); larger ones share the last bucket.
const BUCKETS: usize = 512;

struct Counting;

static LIVE: [AtomicIsize; BUCKETS + 1] = [const { AtomicIsize::new(0) }; BUCKETS + 1];
static LIVE_BIG_BYTES: AtomicIsize = AtomicIsize::new(0);

fn bucket(size: usize) -> usize {
    (size.div_ceil(8)).min(BUCKETS)
}

/// glibc's chunk for a request of `size` bytes.
fn chunk(size: usize) -> usize {
    (size + 8).next_multiple_of(16).max(32)
}

// SAFETY: forwards to the system allocator unchanged; the counters are
// atomics touched without allocating.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE[bucket(l.size())].fetch_add(1, Ordering::Relaxed);
        if bucket(l.size()) == BUCKETS {
            LIVE_BIG_BYTES.fetch_add(l.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE[bucket(l.size())].fetch_sub(1, Ordering::Relaxed);
        if bucket(l.size()) == BUCKETS {
            LIVE_BIG_BYTES.fetch_sub(l.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE[bucket(l.size())].fetch_sub(1, Ordering::Relaxed);
        LIVE[bucket(new)].fetch_add(1, Ordering::Relaxed);
        if bucket(l.size()) == BUCKETS {
            LIVE_BIG_BYTES.fetch_sub(l.size() as isize, Ordering::Relaxed);
        }
        if bucket(new) == BUCKETS {
            LIVE_BIG_BYTES.fetch_add(new as isize, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn snapshot() -> Vec<isize> {
    let mut v: Vec<isize> = LIVE.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    v.push(LIVE_BIG_BYTES.load(Ordering::Relaxed));
    v
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("N must be a number"))
        .unwrap_or(100_000);
    let rt = weft::default_runtime().expect("runtime");
    rt.spawn(|| {}).join().unwrap();
    let parked = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::with_capacity(n);
    let before = snapshot();
    for _ in 0..n {
        let (parked, release) = (parked.clone(), release.clone());
        handles.push(rt.spawn(move || {
            parked.fetch_add(1, Ordering::SeqCst);
            while !release.load(Ordering::SeqCst) {
                weft::park();
            }
        }));
    }
    while parked.load(Ordering::SeqCst) < n {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let after = snapshot();
    println!("per parked thread, by requested size (handles' Vec reserved before):");
    println!(
        "{:>8} {:>10} {:>12} {:>12}",
        "size", "count/th", "bytes/th", "chunk B/th"
    );
    let (mut req, mut chk) = (0.0, 0.0);
    for b in 0..BUCKETS {
        let d = (after[b] - before[b]) as f64 / n as f64;
        if d.abs() >= 0.01 {
            let size = b * 8;
            println!(
                "{:>8} {:>10.3} {:>12.1} {:>12.1}",
                size,
                d,
                d * size as f64,
                d * chunk(size) as f64
            );
            req += d * size as f64;
            chk += d * chunk(size) as f64;
        }
    }
    let big = (after[BUCKETS + 1] - before[BUCKETS + 1]) as f64 / n as f64;
    println!(
        "{:>8} {:>10.3} {:>12.1}",
        ">4096",
        (after[BUCKETS] - before[BUCKETS]) as f64 / n as f64,
        big
    );
    println!(
        "total: {:.1} B requested, {:.1} B in chunks (+ {:.1} B large)",
        req, chk, big
    );
    release.store(true, Ordering::SeqCst);
    for h in &handles {
        h.thread().unpark();
    }
    for h in handles {
        h.join().unwrap();
    }
}
