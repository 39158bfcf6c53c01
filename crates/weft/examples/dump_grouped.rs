//! Times a grouped thread dump end to end — `weft::dump().groups()` — of N
//! parked virtual threads in four distinct stacks (a latch, a sleep, a
//! channel, a lock), `--runs` times, and prints the median (issue #30's
//! goal: 100,000 threads in at most 200 ms on 2 cores).
//!
//! `cargo run --release -p weft --example dump_grouped -- 100000 --runs 7`
//!
//! Each line also splits the time into the dump (`Dump::took`: reading
//! states, taking every stack, symbolizing, building the entries) and the
//! grouping (`ThreadGroups::took`), gives the CPU time of the calling
//! thread (called from an OS thread, a dump does all its work there: a
//! figure that other processes on the machine disturb less than the
//! clock), and checks that every thread was listed with a stack in one of
//! the four expected groups.
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

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// CPU time of the calling thread.
fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the calling thread's CPU clock into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn run(n: usize, runs: usize) {
    let latch = Arc::new(CountDownLatch::new(1));
    let (tx, rx) = weft::channel::unbounded::<()>();
    let lock = Arc::new(Mutex::new(()));
    let held = lock.lock().unwrap();
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
    let (mut total, mut dumps, mut groupings) = (Vec::new(), Vec::new(), Vec::new());
    let mut cpu = Vec::new();
    for _ in 0..runs {
        let (t, c) = (Instant::now(), cpu_time());
        let dump = weft::dump();
        let groups = dump.groups();
        let took = t.elapsed();
        cpu.push(cpu_time() - c);
        total.push(took);
        dumps.push(dump.took);
        groupings.push(groups.took);
        let with_stack = dump.threads.iter().filter(|t| !t.stack.is_empty()).count();
        let big: Vec<usize> = groups.groups.iter().take(4).map(|g| g.count).collect();
        println!(
            "  {} (dump {}, grouping {}; CPU {}): {} threads, {with_stack} with a stack, {} groups, largest {big:?}",
            ms(took),
            ms(dump.took),
            ms(groups.took),
            ms(*cpu.last().unwrap()),
            dump.threads.len(),
            groups.groups.len(),
        );
        if with_stack < n || big.iter().take(4).sum::<usize>() < n {
            println!("  WARNING: not every thread had a stack in one of the four groups");
        }
    }
    println!(
        "{n:>7} threads: dump().groups() median {} (min {}, max {}; dump {}, grouping {}; CPU {}; {runs} runs)",
        ms(median(&mut total)),
        ms(*total.iter().min().unwrap()),
        ms(*total.iter().max().unwrap()),
        ms(median(&mut dumps)),
        ms(median(&mut groupings)),
        ms(median(&mut cpu)),
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
            eprintln!("usage: dump_grouped [N ...] [--runs R]");
            std::process::exit(2);
        }
    }
    if sizes.is_empty() {
        sizes = vec![100_000];
    }
    for n in sizes {
        run(n, runs);
    }
}
