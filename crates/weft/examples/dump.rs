//! Prints a thread dump of a small program, then times a dump of N parked
//! threads: `cargo run --release -p weft --example dump -- 100000`.
use std::sync::Arc;
use std::time::{Duration, Instant};

#[inline(never)]
fn handle_request(m: &weft::sync::Mutex<u64>) {
    let _g = m.lock().unwrap();
    weft::sleep(Duration::from_secs(60)).ok();
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
    for _ in 0..3 {
        let t = Instant::now();
        let d = weft::dump();
        let with_stack = d.threads.iter().filter(|t| !t.stack.is_empty()).count();
        println!(
            "dump of {} threads ({} with stacks): {:?} (to_json {} bytes)",
            d.threads.len(),
            with_stack,
            t.elapsed(),
            d.to_json().len()
        );
    }
    latch.count_down();
    for h in hs {
        h.join().unwrap();
    }
}
