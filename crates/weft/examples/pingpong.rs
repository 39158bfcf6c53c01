//! Park/unpark ping-pong on one carrier, for profiling.
//!
//! `cargo run --profile ci -p weft --example pingpong [ROUND_TRIPS]`
//! (default 5,000,000; a small count such as 100,000 suits
//! `valgrind --tool=callgrind`, which counts instructions whatever the
//! machine's load).
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

fn main() {
    let rt = weft::Runtime::builder().parallelism(1).build().unwrap();
    let n: u64 = match std::env::args().nth(1) {
        None => 5_000_000,
        Some(a) => match a.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("usage: pingpong [ROUND_TRIPS > 0], got {a:?}");
                std::process::exit(2);
            }
        },
    };
    let turn = Arc::new(AtomicU64::new(0));
    let pinger: Arc<OnceLock<weft::Thread>> = Arc::new(OnceLock::new());
    let (t2, p2) = (turn.clone(), pinger.clone());
    let ponger = rt.spawn(move || {
        for i in 0..n {
            while t2.load(Ordering::Acquire) != 2 * i + 1 {
                weft::park();
            }
            t2.store(2 * i + 2, Ordering::Release);
            p2.get().unwrap().unpark();
        }
    });
    let pt = ponger.thread().clone();
    let h = rt.spawn(move || {
        pinger.set(weft::current()).ok();
        let s = Instant::now();
        for i in 0..n {
            turn.store(2 * i + 1, Ordering::Release);
            pt.unpark();
            while turn.load(Ordering::Acquire) != 2 * i + 2 {
                weft::park();
            }
        }
        s.elapsed()
    });
    ponger.join().unwrap();
    let d = h.join().unwrap();
    println!("{:.1} ns/round trip", d.as_nanos() as f64 / n as f64);
}
