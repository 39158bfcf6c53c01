//! Spawn + join, for profiling the spawn path: the `spawn` rows of
//! `benches/core.rs` (spawn N threads, then join them in order).
//!
//! `cargo run --profile ci -p weft --example spawn_join [N] [main|virtual]`
//! spawns and joins N threads (default 100,000) from `main` or from a
//! virtual thread. Under `valgrind --tool=callgrind` run it with two
//! counts: the difference of the two totals divided by the difference of
//! the counts is the instructions per spawn + join, without start-up.

use std::time::Instant;

/// Spawns and joins `n` threads; returns how long the spawning took (the
/// rest is joining: waiting for the carriers to run them all).
fn spawn_join(n: u64) -> std::time::Duration {
    let s = Instant::now();
    let handles: Vec<_> = (0..n).map(|i| weft::spawn(move || i)).collect();
    let spawned = s.elapsed();
    for (i, h) in (0..n).zip(handles) {
        assert_eq!(h.join().unwrap(), i);
    }
    spawned
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .map_or(100_000, |a| a.parse().expect("N must be a number"));
    let from = args.next().unwrap_or_else(|| "main".into());
    let rt = weft::default_runtime().expect("runtime");
    rt.spawn(|| {}).join().unwrap();
    let s = Instant::now();
    let spawned = match from.as_str() {
        "main" => spawn_join(n),
        "virtual" => rt.spawn(move || spawn_join(n)).join().unwrap(),
        other => {
            eprintln!("usage: spawn_join [N] [main|virtual], got {other:?}");
            std::process::exit(2);
        }
    };
    let d = s.elapsed();
    let per = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
    println!(
        "{from}: {:.1} ns per spawn + join (spawning {:.1} ns of it)",
        per(d),
        per(spawned)
    );
}
