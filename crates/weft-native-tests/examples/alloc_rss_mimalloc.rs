#[global_allocator]
static A: mimalloc::MiMalloc = mimalloc::MiMalloc;

use weft_native_tests::churn::{Threads, churn, rss, strict_runtime};

fn main() {
    let which = std::env::args().nth(1).unwrap_or("weft".into());
    let n: usize = std::env::args()
        .nth(2)
        .map_or(20_000, |s| s.parse().unwrap());
    let rt = strict_runtime();
    let t = if which == "std" {
        Threads::Std
    } else {
        Threads::Weft
    };
    let t0 = std::time::Instant::now();
    churn(t, Some(&rt), n, 100, |done| {
        if done % 5000 == 0 {
            println!(
                "{which} {done}: rss {} MiB, {:?}",
                rss() >> 20,
                t0.elapsed()
            );
        }
    });
}
