//! Quick smoke run: spawn/join, ping-pong, many sleepers.
use std::time::{Duration, Instant};

fn main() {
    if std::env::var("INNER").is_ok() {
        inner_spawn_bench();
        return;
    }
    let h = weft::spawn(|| 40 + 2);
    assert_eq!(h.join().unwrap(), 42);
    let h = weft::spawn(|| panic!("boom"));
    assert!(h.join().is_err());
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(100_000);
    let t = Instant::now();
    let hs: Vec<_> = (0..n)
        .map(|_| weft::spawn(|| weft::sleep(Duration::from_secs(1)).unwrap()))
        .collect();
    let spawned = t.elapsed();
    for h in hs {
        h.join().unwrap();
    }
    println!(
        "{n} sleepers: spawned in {:?}, done in {:?}",
        spawned,
        t.elapsed()
    );
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    for l in status
        .lines()
        .filter(|l| l.starts_with("VmHWM") || l.starts_with("VmRSS"))
    {
        println!("{l}");
    }
    let t = Instant::now();
    let n = 200_000;
    let hs: Vec<_> = (0..n).map(|_| weft::spawn(|| {})).collect();
    for h in hs {
        h.join().unwrap();
    }
    println!("spawn+join: {:?}/thread", t.elapsed() / n);
}

#[allow(dead_code)]
fn inner_spawn_bench() {
    weft::spawn(|| {
        for round in 0..5 {
            let n = 100_000u32;
            let t = Instant::now();
            let hs: Vec<_> = (0..n).map(|_| weft::spawn(|| {})).collect();
            for h in hs {
                h.join().unwrap();
            }
            println!(
                "round {round}: in-vthread spawn+join: {:?}/thread",
                t.elapsed() / n
            );
        }
        let t = Instant::now();
        let n = 100_000u32;
        for _ in 0..n {
            weft::spawn(|| {}).join().unwrap();
        }
        println!("sequential spawn+join: {:?}/thread", t.elapsed() / n);
    })
    .join()
    .unwrap();
}
