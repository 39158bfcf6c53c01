//! What the re-checks of an emulated futex wait's word cost
//! (`transparent/queue.rs`, `WEFT_FUTEX_RECHECK_MS`): the same two loads
//! with the re-checks on (the default, 1,000 ms at most between looks) and
//! off (`0`), each in a process of its own, alternated `runs` times:
//!
//! - *parked*: 10,000 virtual threads parked in `std::sync::Condvar::wait`
//!   for 5 s; the process's CPU time (user + system) over those 5 s;
//! - *ping-pong*: two virtual threads handing a token back and forth
//!   through a `Mutex` and `Condvar` 100,000 times; ns per round trip.
//!
//! `cargo run --release --example futex_recheck -- [runs]` in
//! `tests-transparent/` (default 3).

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

fn cpu() -> Duration {
    // SAFETY: getrusage into a local.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn futex_parks() -> u64 {
    weft::transparent::parks()
        .iter()
        .find(|(c, _)| *c == "futex")
        .map_or(0, |(_, n)| *n)
}

fn parked(rt: &weft::Runtime) -> Duration {
    let base = futex_parks();
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let hs: Vec<_> = (0..10_000)
        .map(|_| {
            let gate = gate.clone();
            rt.spawn(move || {
                let (m, c) = &*gate;
                let mut open = m.lock().unwrap();
                while !*open {
                    open = c.wait(open).unwrap();
                }
            })
        })
        .collect();
    while futex_parks() < base + 10_000 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let c0 = cpu();
    std::thread::sleep(Duration::from_secs(5));
    let used = cpu() - c0;
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    for h in hs {
        h.join().unwrap();
    }
    used
}

fn ping_pong(rt: &weft::Runtime) -> f64 {
    const ROUNDS: u32 = 100_000;
    let s = Arc::new((Mutex::new(0u32), Condvar::new()));
    let t0 = Instant::now();
    let hs: Vec<_> = (0..2u32)
        .map(|me| {
            let s = s.clone();
            rt.spawn(move || {
                let (m, c) = &*s;
                for _ in 0..ROUNDS {
                    let mut turn = m.lock().unwrap();
                    while *turn % 2 != me {
                        turn = c.wait(turn).unwrap();
                    }
                    *turn += 1;
                    c.notify_one();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    t0.elapsed().as_nanos() as f64 / f64::from(ROUNDS)
}

fn main() {
    if std::env::var_os("FUTEX_RECHECK_CHILD").is_some() {
        let rt = weft::Runtime::builder()
            .parallelism(2)
            .max_pool_size(2)
            .build()
            .unwrap();
        let pp = ping_pong(&rt);
        let cpu = parked(&rt);
        println!("{pp:.0} {}", cpu.as_millis());
        return;
    }
    let runs: usize = std::env::args()
        .nth(1)
        .map_or(3, |s| s.parse().expect("a count"));
    println!("| re-checks | ping-pong ns/round trip | CPU ms over 5 s, 10,000 parked |");
    println!("|---|---|---|");
    for _ in 0..runs {
        for ms in ["0", "1000"] {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .env("FUTEX_RECHECK_CHILD", "1")
                .env("WEFT_FUTEX_RECHECK_MS", ms)
                .output()
                .expect("run the child");
            let line = String::from_utf8_lossy(&out.stdout);
            let mut f = line.split_whitespace();
            let (pp, cpu) = (f.next().unwrap_or("?"), f.next().unwrap_or("?"));
            let name = if ms == "0" { "off" } else { "on (1,000 ms)" };
            println!("| {name} | {pp} | {cpu} |");
        }
    }
}
