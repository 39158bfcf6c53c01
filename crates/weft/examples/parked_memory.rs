//! Resident memory per parked virtual thread, page tables included.
//!
//! Starts N virtual threads that each park until released, waits until all
//! have parked, and reports the growth of `VmRSS` and `VmPTE` (from
//! `/proc/self/status`) per thread — and of that, the bytes of malloc's
//! heap in use — then releases and joins them.
//!
//! ```text
//! cargo run --release -p weft --example parked_memory -- 100000 1000000
//! WEFT_STACK_SIZE=262144 cargo run --release -p weft --example parked_memory -- 100000
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// `VmRSS` and `VmPTE` in KiB.
fn rss_pte() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmPTE:"))
}

/// Bytes of glibc's heap in use (`mallinfo2().uordblks`: allocated
/// chunks, malloc's headers included), all arenas.
fn heap_in_use() -> u64 {
    // SAFETY: mallinfo2 has no preconditions.
    unsafe { libc::mallinfo2() }.uordblks as u64
}

/// The calling thread's thread pointer (`pthread_self()`) and the stack
/// glibc reports for it (Weft answers for a virtual thread).
fn own_geometry() -> (usize, usize, usize) {
    // SAFETY: attr is initialised by pthread_getattr_np before use and
    // destroyed after; pthread_self has no preconditions.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
        let (mut addr, mut size) = (std::ptr::null_mut(), 0usize);
        assert_eq!(libc::pthread_attr_getstack(&attr, &mut addr, &mut size), 0);
        libc::pthread_attr_destroy(&mut attr);
        let lo = addr as usize;
        (libc::pthread_self() as usize, lo, lo + size)
    }
}

fn main() {
    let ns: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("N must be a number"))
        .collect();
    let ns = if ns.is_empty() { vec![100_000] } else { ns };
    let rt = weft::default_runtime().expect("runtime");
    println!(
        "parallelism {}, stack size {} KiB",
        rt.parallelism(),
        rt.stack_size() / 1024
    );
    println!(
        "{:>9} {:>12} {:>12} {:>12} {:>14} {:>12}",
        "N", "RSS KiB/th", "PTE KiB/th", "sum KiB/th", "spawn+park ms", "heap B/th"
    );
    // Where a virtual thread's thread-local area and its stack lie: with
    // an area (x86_64 glibc) the thread pointer is `pthread_self()`, and
    // the stack's top is right below the area's static blocks, in the
    // slot's top page.
    let (tp, lo, hi) = rt.spawn(own_geometry).join().unwrap();
    let page = 4096;
    println!(
        "thread pointer at page offset {} (slot top {:#x}); stack [{lo:#x}, {hi:#x}): \
         its top {} bytes below the thread pointer, {} pages below the slot top",
        tp % page,
        tp.next_multiple_of(page),
        tp.saturating_sub(hi),
        (tp.next_multiple_of(page) - hi) / page,
    );
    for n in ns {
        // Warm the runtime (carriers, pools) so the baseline includes them.
        rt.spawn(|| {}).join().unwrap();
        let (rss0, pte0) = rss_pte();
        let heap0 = heap_in_use();
        let parked = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(AtomicBool::new(false));
        let t0 = std::time::Instant::now();
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (parked, release) = (parked.clone(), release.clone());
                rt.spawn(move || {
                    parked.fetch_add(1, Ordering::SeqCst);
                    while !release.load(Ordering::SeqCst) {
                        weft::park();
                    }
                })
            })
            .collect();
        while parked.load(Ordering::SeqCst) < n {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // Every thread has counted itself; let the last ones reach `park`.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let (rss1, pte1) = rss_pte();
        let heap = heap_in_use().saturating_sub(heap0) as f64 / n as f64;
        let per = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / n as f64;
        let (r, p) = (per(rss0, rss1), per(pte0, pte1));
        println!(
            "{n:>9} {r:>12.2} {p:>12.2} {:>12.2} {ms:>14.0} {heap:>12.0}",
            r + p
        );
        release.store(true, Ordering::SeqCst);
        for h in &handles {
            h.thread().unpark();
        }
        for h in handles {
            h.join().unwrap();
        }
    }
}
