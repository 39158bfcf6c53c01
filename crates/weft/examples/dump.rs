//! Prints a thread dump of a small program, then times a dump of N parked
//! threads — first with every carrier free, then with every carrier held by
//! a stalled handler (plain `std::thread::sleep` in a loop), the case a
//! server under a blocking bug is in:
//! `cargo run --release -p weft --example dump -- 10000`.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[inline(never)]
fn handle_request(m: &weft::sync::Mutex<u64>) {
    let _g = m.lock().unwrap();
    weft::sleep(Duration::from_secs(60)).ok();
}

/// Blocks its carrier (std sleep, not weft's) until released.
#[inline(never)]
fn stalled_handler(release: &AtomicBool) {
    while !release.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Takes `rounds` dumps and prints each one's time and the median.
fn time_dumps(what: &str, rounds: usize) {
    let mut times = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let d = weft::dump();
        let took = t.elapsed();
        times.push(took);
        let with_stack = d.threads.iter().filter(|t| !t.stack.is_empty()).count();
        println!(
            "{what}: dump of {} threads ({} with stacks): {:?} (to_json {} bytes)",
            d.threads.len(),
            with_stack,
            took,
            d.to_json().len()
        );
    }
    times.sort();
    println!("{what}: median {:?} over {rounds} dumps", times[rounds / 2]);
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(100_000, |s| s.parse().unwrap());
    let m = Arc::new(weft::sync::Mutex::new(0));
    for i in 0..3 {
        let m = m.clone();
        weft::Builder::new()
            .name(format!("request-{i}"))
            .spawn(move || handle_request(&m))
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    println!("{}", weft::dump());
    let latch = Arc::new(weft::sync::CountDownLatch::new(1));
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let l = latch.clone();
            weft::spawn(move || l.wait().unwrap())
        })
        .collect();
    while hs.iter().any(|h| h.thread().state() != weft::State::Parked) {
        std::thread::sleep(Duration::from_millis(10));
    }
    time_dumps("carriers free", 3);

    // Every carrier held by a handler that blocks it with std calls.
    let release = Arc::new(AtomicBool::new(false));
    let carriers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stalls: Vec<_> = (0..carriers)
        .map(|i| {
            let r = release.clone();
            weft::Builder::new()
                .name(format!("stalled-{i}"))
                .spawn(move || stalled_handler(&r))
                .unwrap()
        })
        .collect();
    while stalls
        .iter()
        .any(|h| h.thread().state() != weft::State::Running)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Past the stall threshold, so the monitor has seen them.
    std::thread::sleep(weft::DEFAULT_STALL_THRESHOLD * 3);
    let d = weft::dump();
    for t in d.threads.iter().filter(|t| t.state == weft::State::Running) {
        let at = t.stack.iter().find(|f| !f.is_runtime());
        println!(
            "  {:?} running, first user frame: {}",
            t.name.as_deref().unwrap_or(""),
            at.map_or("<no stack>".to_string(), |f| format!(
                "{} ({}:{})",
                f.function,
                f.file.as_deref().unwrap_or("?"),
                f.line.unwrap_or(0)
            ))
        );
    }
    time_dumps("every carrier stalled", 5);
    release.store(true, Ordering::SeqCst);
    for h in stalls {
        h.join().unwrap();
    }
    latch.count_down();
    for h in hs {
        h.join().unwrap();
    }
}
