//! What a static TLS larger than the default stack's room costs
//! (`stack::with_room_for`): spawn + join of short threads in a program
//! with a 160 KiB `thread_local!`, on virtual threads (each area at the
//! top of a slot of a larger pool) and on std threads (glibc puts the
//! static TLS in each thread's stack mapping), and the RSS of 10,000 such
//! virtual threads parked at once.
//!
//! `cargo run --release -p weft-native-tests --example big_tls_cost [threads]`

use std::cell::RefCell;
use std::time::Instant;

const BIG: usize = 160 * 1024;

std::thread_local! {
    static SCRATCH: RefCell<[u8; BIG]> = const { RefCell::new([0; BIG]) };
}

fn touch(i: usize) -> u8 {
    SCRATCH.with_borrow_mut(|s| {
        s[0] = i as u8;
        s[0]
    })
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(20_000, |s| s.parse().expect("a count"));
    let rt = weft_native_tests::churn::strict_runtime();
    for round in 0..3 {
        let t0 = Instant::now();
        for chunk in 0..n / 100 {
            let hs: Vec<_> = (0..100)
                .map(|j| rt.spawn(move || touch(chunk * 100 + j)))
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        }
        let weft = t0.elapsed().as_nanos() as f64 / n as f64;
        let t0 = Instant::now();
        for chunk in 0..n / 100 {
            let hs: Vec<_> = (0..100)
                .map(|j| std::thread::spawn(move || touch(chunk * 100 + j)))
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        }
        let std = t0.elapsed().as_nanos() as f64 / n as f64;
        println!("round {round}: spawn+join, 160 KiB TLS: weft {weft:.0} ns, std {std:.0} ns");
    }
    let before = weft_native_tests::churn::rss();
    let (tx, rx) = weft::channel::unbounded::<()>();
    let hs: Vec<_> = (0..10_000)
        .map(|i| {
            let rx = rx.clone();
            rt.spawn(move || {
                touch(i);
                let _ = rx.recv();
            })
        })
        .collect();
    while rt.live_threads() < 10_000
        || weft::metrics::snapshot()
            .parked_by_reason
            .iter()
            .map(|r| r.1)
            .sum::<usize>()
            < 10_000
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let per = (weft_native_tests::churn::rss() - before) as f64 / 10_000.0 / 1024.0;
    println!("10,000 parked virtual threads with 160 KiB TLS: {per:.1} KiB each");
    drop(tx);
    for h in hs {
        h.join().unwrap();
    }
}
