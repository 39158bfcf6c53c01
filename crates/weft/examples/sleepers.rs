//! N virtual threads that each sleep, spawned from `main`: when spawning
//! ended, when the last was joined, and the page faults and CPU time on
//! the way (the phases behind weft-bench's `sleep-*-main` rows).
//!
//! ```text
//! cargo run --release -p weft --example sleepers -- 1000000 1000 [main|virtual]
//! ```
//!
//! `virtual` spawns and joins them from a virtual thread instead (the
//! `sleep-*` rows without `-main`).

use std::time::{Duration, Instant};

fn usage() -> (f64, f64, i64) {
    // SAFETY: getrusage writes the struct it is given.
    let r = unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut r);
        r
    };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(r.ru_utime), s(r.ru_stime), r.ru_minflt)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: u64| {
        args.get(i)
            .map_or(d, |a| a.parse::<u64>().expect("a number"))
    };
    let (n, ms) = (num(0, 100_000), num(1, 1000));
    let from = args.get(2).map_or("main", String::as_str).to_owned();
    if from != "main" && from != "virtual" {
        eprintln!("usage: sleepers [N] [MS] [main|virtual], got {from:?}");
        std::process::exit(2);
    }
    let on_main = from == "main";
    let d = Duration::from_millis(ms);
    weft::spawn(|| ()).join().unwrap();
    let run = move || {
        let (u0, s0, f0) = usage();
        let t0 = Instant::now();
        let handles: Vec<_> = (0..n)
            .map(|_| weft::spawn(move || weft::sleep(d).unwrap()))
            .collect();
        let spawned = t0.elapsed();
        let (u1, s1, f1) = usage();
        for h in handles {
            h.join().unwrap();
        }
        let joined = t0.elapsed();
        let (u2, s2, f2) = usage();
        println!(
            "{n} x sleep({ms} ms) from {from}: spawned in {:.0} ms (cpu user {:.2} s sys {:.2} s, {} faults), \
             all joined at {:.0} ms (cpu user {:.2} s sys {:.2} s, {} faults)",
            spawned.as_secs_f64() * 1e3,
            u1 - u0,
            s1 - s0,
            f1 - f0,
            joined.as_secs_f64() * 1e3,
            u2 - u1,
            s2 - s1,
            f2 - f1
        );
    };
    if on_main {
        run();
    } else {
        weft::spawn(run).join().unwrap();
    }
}
