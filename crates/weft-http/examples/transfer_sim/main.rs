//! `weft::sim` finds a double debit that ordinary tests pass, replays it
//! from its seed, and passes the fix over many seeds.
//!
//! ```text
//! cargo run --release -p weft-http --example transfer_sim -- [SEEDS]
//! ```
//!
//! With `TRANSFER_COUNT=1` it also counts how many of the SEEDS fail.
//!
//! The service and the bug are in `service.rs`; the same scenario runs in
//! `tests/transfer_sim.rs`.

mod service;

use std::time::{Duration, Instant};

use service::Variant;

mod scenario;

fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .map_or(10_000, |s| s.parse().expect("SEEDS: a number"));
    // Quiet: each failing run's panic would print its message.
    std::panic::set_hook(Box::new(|_| {}));

    let t0 = Instant::now();
    let found = (0..seeds).find_map(|seed| {
        weft::sim::run(seed, || scenario::run(Variant::Buggy))
            .err()
            .map(|e| (seed, e))
    });
    let search_took = t0.elapsed();
    let Some((seed, failure)) = found else {
        println!("buggy variant: no failure in {seeds} seeds (unexpected)");
        std::process::exit(1);
    };
    println!(
        "buggy variant: seed {seed} fails ({} seeds tried, {:.2?} real time):\n  {}",
        seed + 1,
        search_took,
        failure.to_string().lines().next().unwrap_or_default()
    );
    let again = weft::sim::run(seed, || scenario::run(Variant::Buggy)).unwrap_err();
    println!(
        "replayed seed {seed}: trace {:016x} (first run {:016x}), {} steps, virtual time {:?}",
        again.trace, failure.trace, again.steps, again.elapsed
    );
    assert_eq!(again.trace, failure.trace, "the replay diverged");

    if std::env::var_os("TRANSFER_COUNT").is_some() {
        let failing = (0..seeds)
            .filter(|&s| weft::sim::run(s, || scenario::run(Variant::Buggy)).is_err())
            .count();
        println!("buggy variant: {failing} of {seeds} seeds fail");
    }
    let t0 = Instant::now();
    let mut steps = 0;
    let mut virtual_time = Duration::ZERO;
    for seed in 0..seeds {
        match weft::sim::run(seed, || scenario::run(Variant::Fixed)) {
            Ok(r) => {
                steps += r.steps;
                virtual_time += r.elapsed;
            }
            Err(e) => {
                println!("fixed variant: seed {seed} failed:\n{e}");
                std::process::exit(1);
            }
        }
    }
    let real = t0.elapsed();
    println!(
        "fixed variant: {seeds} seeds pass in {real:.2?} real time ({:.2?} per seed; {steps} steps, {virtual_time:.2?} of virtual time)",
        real / seeds as u32
    );
}
