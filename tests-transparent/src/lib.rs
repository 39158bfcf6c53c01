//! Helpers shared by the hooked tests and the `scenario` benchmark.

use std::time::Duration;

/// A runtime of `carriers` carriers that never adds a spare: a thread that
/// blocked its carrier would stop every other thread of it (the tests rely
/// on that to show that hooked calls unmount).
pub fn strict_runtime(carriers: usize) -> weft::Runtime {
    weft::Runtime::builder()
        .parallelism(carriers)
        .max_pool_size(carriers)
        .stall_threshold(Duration::from_secs(3600))
        .build()
        .expect("runtime")
}

/// The process's current OS thread count (`Threads:` in /proc/self/status).
pub fn os_threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}
