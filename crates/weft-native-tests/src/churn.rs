//! Short threads that each return a heap value their joiner frees: what
//! an allocator keeps per thread ever run (`tests/alloc_*.rs`,
//! `examples/alloc_rss_*.rs`).

/// The process's resident set, in bytes (`/proc/self/statm`).
pub fn rss() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = s
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("statm's resident field");
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

/// The body of every churned thread: allocates a little in two size
/// classes, frees one, and returns the other for its joiner to free.
pub fn body(i: usize) -> Vec<u64> {
    let scratch: Vec<u8> = vec![i as u8; 200];
    let mut v = Vec::with_capacity(8);
    v.extend((0..8).map(|k| k as u64 + scratch[k] as u64));
    v
}

/// Where the threads run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// `std::thread::spawn`.
    Std,
    /// Virtual threads of a strict runtime: 2 carriers, no spares.
    Weft,
}

/// Runs `n` short threads in batches of `batch` (spawned, then joined,
/// each joiner freeing what its thread returned), calling `at(done)` after
/// every batch. Returns the sum of the values, checked by callers so that
/// no work is optimised away.
pub fn churn(
    threads: Threads,
    rt: Option<&weft::Runtime>,
    n: usize,
    batch: usize,
    mut at: impl FnMut(usize),
) -> u64 {
    let mut sum = 0u64;
    let mut done = 0;
    while done < n {
        let k = batch.min(n - done);
        match threads {
            Threads::Std => {
                let hs: Vec<_> = (0..k)
                    .map(|j| std::thread::spawn(move || body(done + j)))
                    .collect();
                for h in hs {
                    sum += h.join().unwrap().iter().sum::<u64>();
                }
            }
            Threads::Weft => {
                let rt = rt.expect("a runtime for virtual threads");
                let hs: Vec<_> = (0..k).map(|j| rt.spawn(move || body(done + j))).collect();
                for h in hs {
                    sum += h.join().unwrap().iter().sum::<u64>();
                }
            }
        }
        done += k;
        at(done);
    }
    sum
}

/// The strict runtime of the allocator tests: 2 carriers, no spares.
pub fn strict_runtime() -> weft::Runtime {
    weft::Runtime::builder()
        .parallelism(2)
        .max_pool_size(2)
        .build()
        .expect("a runtime")
}

/// The environment variable that makes a test binary's [`child_main`]
/// churn threads and print its RSS, instead of testing.
const CHILD: &str = "WEFT_CHURN_CHILD";

/// Runs [`churn`] of `n` threads in a fresh process (this test binary
/// again, test `child_test` with [`CHILD`] set, which must call
/// [`child_main`]), so that one kind of thread's memory does not hide in
/// the other's; returns the child's RSS in bytes after the churn.
pub fn rss_in_child(child_test: &str, threads: Threads, n: usize) -> usize {
    let out = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args([child_test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, format!("{threads:?} {n}"))
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child {threads:?} {n} failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split("rss-after ").nth(1))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no rss-after line from the child: {stdout}"))
}

/// The child's side of [`rss_in_child`]: nothing unless [`CHILD`] is
/// set; then churns and prints `rss-after BYTES`.
pub fn child_main() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let (kind, n) = spec.split_once(' ').expect("kind and count");
    let threads = if kind == "Std" {
        Threads::Std
    } else {
        Threads::Weft
    };
    let n: usize = n.parse().expect("a count");
    let rt = strict_runtime();
    let sum = churn(threads, Some(&rt), n, 100, |_| {});
    assert!(sum > 0);
    println!("rss-after {}", rss());
}
