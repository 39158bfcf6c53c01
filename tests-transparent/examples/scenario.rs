//! The scenario as a benchmark: N virtual threads each
//! `std::thread::sleep(200 ms)` and make one round trip over a
//! `std::net::TcpStream` to a `weft::net` server (answering after 200 ms) in
//! the same process; ideal wall time 0.4 s. Prints wall time and peak OS
//! threads per N.
//!
//! `cargo run --release --example scenario -- [N...]` (default 200 1000 5000)
//! in `tests-transparent/`. `WEFT_TRANSPARENT=0` turns the hooks off (then
//! large N hang, as in the issue; use a small N).

use weft_transparent_tests::{raise_fd_limit, scenario};

fn main() {
    let ns: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("N must be a number"))
        .collect();
    let ns = if ns.is_empty() {
        vec![200, 1000, 5000]
    } else {
        ns
    };
    let max = ns.iter().copied().max().unwrap_or(0) as u64;
    let limit = raise_fd_limit(2 * max + 512);
    let rt = weft::default_runtime().expect("runtime");
    println!(
        "transparent: {} (WEFT_TRANSPARENT), parallelism {}, RLIMIT_NOFILE {limit}",
        weft::transparent::is_enabled(),
        rt.parallelism()
    );
    println!(
        "{:>6} {:>9} {:>8} {:>10} {:>6}",
        "N", "wall s", "ideal s", "peak OS th", "ok"
    );
    for n in ns {
        let r = scenario(&rt, n);
        println!(
            "{n:>6} {:>9.3} {:>8.1} {:>10} {:>6}",
            r.wall.as_secs_f64(),
            0.4,
            r.peak_os_threads,
            r.ok
        );
    }
}
