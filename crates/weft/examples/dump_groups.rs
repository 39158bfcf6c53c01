//! Times grouping a thread dump ([`weft::Dump::groups`]) of N parked
//! virtual threads in four distinct stacks (a latch, a sleep, a channel, a
//! lock): the dump once, then the grouping `--runs` times, reporting the
//! median.
//!
//! `cargo run --release -p weft --example dump_groups -- 10000 100000`
//! (`--runs 7` by default).
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft::sync::{CountDownLatch, Mutex};

#[inline(never)]
fn waits_on_latch(l: &CountDownLatch) {
    let _ = l.wait();
}

#[inline(never)]
fn sleeps() {
    let _ = weft::sleep(Duration::from_secs(3600));
}

#[inline(never)]
fn receives(rx: &weft::channel::Receiver<()>) {
    let _ = rx.recv();
}

#[inline(never)]
fn locks(m: &Mutex<()>) {
    drop(m.lock());
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn run(n: usize, runs: usize) {
    let latch = Arc::new(CountDownLatch::new(1));
    let (tx, rx) = weft::channel::unbounded::<()>();
    let lock = Arc::new(Mutex::new(()));
    let held = lock.lock().unwrap();
    let t0 = Instant::now();
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let (l, rx, m) = (latch.clone(), rx.clone(), lock.clone());
        handles.push(weft::spawn(move || match i % 4 {
            0 => waits_on_latch(&l),
            1 => sleeps(),
            2 => receives(&rx),
            _ => locks(&m),
        }));
    }
    while weft::state_counts().parked < n {
        std::thread::sleep(Duration::from_millis(10));
    }
    let spawned = t0.elapsed();
    let t = Instant::now();
    let dump = weft::dump();
    let dumped = t.elapsed();
    let mut times = Vec::with_capacity(runs);
    let mut groups = dump.groups();
    for _ in 0..runs {
        let t = Instant::now();
        groups = dump.groups();
        times.push(t.elapsed());
    }
    let (min, max) = (
        *times.iter().min().unwrap_or(&Duration::ZERO),
        *times.iter().max().unwrap_or(&Duration::ZERO),
    );
    let big: Vec<String> = groups
        .groups
        .iter()
        .take(4)
        .map(|g| g.count.to_string())
        .collect();
    println!(
        "{n:>7} threads: dump {} ({} listed), grouping median {} (min {}, max {}, {runs} runs) \
         into {} groups, largest {}; spawned and parked in {}",
        ms(dumped),
        dump.threads.len(),
        ms(median(&mut times)),
        ms(min),
        ms(max),
        groups.groups.len(),
        big.join(", "),
        ms(spawned),
    );
    latch.count_down();
    drop(tx);
    drop(held);
    for h in handles.iter().skip(1).step_by(4) {
        h.thread().interrupt();
    }
    for h in handles {
        let _ = h.join();
    }
}

fn main() {
    let mut sizes = Vec::new();
    let mut runs = 7;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--runs" {
            runs = args
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(runs)
                .max(1);
        } else if let Ok(n) = a.parse::<usize>() {
            sizes.push(n);
        } else {
            eprintln!("usage: dump_groups [N ...] [--runs R]");
            std::process::exit(2);
        }
    }
    if sizes.is_empty() {
        sizes = vec![10_000, 100_000];
    }
    for n in sizes {
        run(n, runs);
    }
}
