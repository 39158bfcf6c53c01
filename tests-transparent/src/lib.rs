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
    weft_bench_support::child::os_threads("self").unwrap_or(0) as usize
}

/// What one run of [`scenario`] measured.
#[derive(Debug)]
pub struct ScenarioResult {
    /// Clients that completed their round trip.
    pub ok: usize,
    /// Wall time of the whole run.
    pub wall: Duration,
    /// Most OS threads seen in the process during the run (sampled every
    /// 5 ms).
    pub peak_os_threads: usize,
}

/// Raises the soft descriptor limit to at least `want` (to the hard limit,
/// or beyond it when allowed); returns the soft limit now in force.
pub fn raise_fd_limit(want: u64) -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        if r.rlim_cur < want {
            let hard = r.rlim_max.max(want);
            let mut n = libc::rlimit {
                rlim_cur: want,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &n) != 0 {
                n.rlim_cur = r.rlim_max.min(want);
                n.rlim_max = r.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &n);
            }
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        }
    }
    r.rlim_cur
}

/// The scenario: `n` virtual threads each call
/// `std::thread::sleep(200 ms)` and then make one round trip over a
/// `std::net::TcpStream` to a `weft::net` server in the same process that
/// answers after 200 ms. Ideal wall time ≈ 0.4 s.
pub fn scenario(rt: &weft::Runtime, n: usize) -> ScenarioResult {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let listener = weft::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    // A backlog for a burst of `n` connects (std and weft use 128).
    // SAFETY: listen on our own listening socket.
    unsafe { libc::listen(listener.as_raw_fd(), 65535) };
    let addr = listener.local_addr().expect("addr");
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicUsize::new(os_threads()));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(os_threads(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let t0 = std::time::Instant::now();
    let server = rt.spawn(move || {
        for _ in 0..n {
            let Ok((mut s, _)) = listener.accept() else {
                break;
            };
            weft::spawn(move || {
                let mut b = [0u8; 4];
                if s.read_exact(&mut b).is_ok() {
                    let _ = weft::sleep(Duration::from_millis(200));
                    let _ = s.write_all(&b);
                }
            });
        }
    });
    let clients: Vec<_> = (0..n)
        .map(|i| {
            rt.spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                let mut c = std::net::TcpStream::connect(addr).ok()?;
                let msg = (i as u32).to_le_bytes();
                c.write_all(&msg).ok()?;
                let mut back = [0u8; 4];
                c.read_exact(&mut back).ok()?;
                (back == msg).then_some(())
            })
        })
        .collect();
    let ok = clients
        .into_iter()
        .map(|h| h.join().ok().flatten().is_some())
        .filter(|&b| b)
        .count();
    let wall = t0.elapsed();
    let _ = server.join();
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    ScenarioResult {
        ok,
        wall,
        peak_os_threads: peak.load(Ordering::Relaxed),
    }
}

pub use weft_bench_support::watchdog::Watchdog;

/// A [`Watchdog`] that aborts the process, with Weft's thread dump, if
/// the test `what` is still running after `limit`: a hang (the symptom of
/// a call that held its carrier) fails loudly instead of stalling CI.
pub fn watchdog(what: &'static str, limit: Duration) -> Watchdog {
    Watchdog::new(what, limit, || {
        format!(
            "a blocking call held its carrier (deadlock); Weft's threads:\n{}",
            weft::dump()
        )
    })
}

/// A connected `AF_UNIX` stream socket pair (raw descriptors).
pub fn socketpair() -> [i32; 2] {
    let mut sv = [0i32; 2];
    // SAFETY: socketpair into a 2-int array.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) };
    assert_eq!(r, 0);
    sv
}

/// Serialises the tests of one binary that count descriptors or reuse
/// descriptor numbers (the harness runs tests in parallel).
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits until `h`'s thread is parked in the hooked `call` (or has
/// finished: then the test's assertion on its result tells what went
/// wrong).
pub fn parked_in<T>(h: &weft::JoinHandle<T>, call: &str) {
    let t = h.thread();
    while !matches!(t.blocker(), weft::Blocker::Call { call: c, .. } if c == call)
        && !h.is_finished()
    {
        std::thread::sleep(Duration::from_millis(1));
    }
}
