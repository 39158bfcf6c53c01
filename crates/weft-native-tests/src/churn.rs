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

/// The strict runtime of the allocator tests: 2 carriers, no spares, and
/// no stall reports (a carrier preempted for long on a loaded machine
/// would be reported, and the report's first symbolization reads the
/// executable's debug info: some 50 MiB of heap that is Weft's
/// diagnostics, not the allocator's keep per thread).
pub fn strict_runtime() -> weft::Runtime {
    weft::Runtime::builder()
        .parallelism(2)
        .max_pool_size(2)
        .stall_threshold(std::time::Duration::from_secs(3600))
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
    let stdout = run_child(
        &[child_test, "--exact", "--nocapture", "--test-threads=1"],
        threads,
        n,
    );
    stdout
        .lines()
        .find_map(|l| l.split("rss-after ").nth(1))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no rss-after line from the child: {stdout}"))
}

/// Runs this executable again with `args` and [`CHILD`] set to churn `n`
/// threads of kind `threads`; its standard output.
fn run_child(args: &[&str], threads: Threads, n: usize) -> String {
    let out = std::process::Command::new(std::env::current_exe().expect("this executable"))
        .args(args)
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
    stdout.into_owned()
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
    let t0 = std::time::Instant::now();
    let sum = churn(threads, Some(&rt), n, 100, |done| {
        if CHECKPOINTS.contains(&done) {
            println!("rss-at {done} {} {}", rss(), t0.elapsed().as_millis());
        }
    });
    assert!(sum > 0);
    println!("rss-after {}", rss());
}

/// Where [`report`] reads the RSS.
const CHECKPOINTS: [usize; 3] = [20_000, 100_000, 200_000];

/// The allocator benchmark (`examples/alloc_rss_*.rs`): short threads
/// that each return a heap value their joiner frees, 200,000 of them, on
/// std threads and on a strict runtime's virtual threads, each kind in a
/// process of its own; prints the RSS (and the time taken) at 20,000,
/// 100,000 and 200,000 threads. `allocator` names the program's global
/// allocator in the table. In the child process (run by this function)
/// it churns instead.
pub fn report(allocator: &str) {
    if std::env::var_os(CHILD).is_some() {
        child_main();
        return;
    }
    println!("| allocator | threads | after 20k | after 100k | after 200k |");
    println!("|---|---|---|---|---|");
    for threads in [Threads::Std, Threads::Weft] {
        let out = run_child(&[], threads, CHECKPOINTS[2]);
        let cells: Vec<String> = out
            .lines()
            .filter_map(|l| {
                let mut f = l.strip_prefix("rss-at ")?.split_whitespace();
                let (_, rss, ms) = (f.next()?, f.next()?, f.next()?);
                let mib = rss.parse::<f64>().ok()? / f64::from(1 << 20);
                Some(format!(
                    "{mib:.1} MiB ({:.1} s)",
                    ms.parse::<f64>().ok()? / 1e3
                ))
            })
            .collect();
        println!("| {allocator} | {threads:?} | {} |", cells.join(" | "));
    }
}
