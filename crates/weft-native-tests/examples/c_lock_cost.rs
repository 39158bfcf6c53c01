//! What counting C locks costs (`thread/native.rs`): an uncontended
//! `pthread_mutex_lock` + `pthread_mutex_unlock` pair through Weft's
//! definitions against glibc's own (found with `dlsym(RTLD_NEXT)`), in
//! the same run, on an OS thread and on a virtual thread. Target: at most
//! +5 ns per lock/unlock.
//!
//! `cargo run --release -p weft-native-tests --example c_lock_cost [rounds]`
//! (default 7 rounds of 2,000,000 pairs; prints the median of each).

use std::cell::UnsafeCell;
use std::time::Instant;

type LockFn = unsafe extern "C" fn(*mut libc::pthread_mutex_t) -> libc::c_int;

struct Fns {
    lock: LockFn,
    unlock: LockFn,
}

fn glibc() -> Fns {
    // SAFETY: dlsym with NUL-terminated names; glibc's functions have
    // this signature.
    unsafe {
        let lock = libc::dlsym(libc::RTLD_NEXT, c"pthread_mutex_lock".as_ptr());
        let unlock = libc::dlsym(libc::RTLD_NEXT, c"pthread_mutex_unlock".as_ptr());
        assert!(!lock.is_null() && !unlock.is_null());
        Fns {
            lock: std::mem::transmute::<*mut libc::c_void, LockFn>(lock),
            unlock: std::mem::transmute::<*mut libc::c_void, LockFn>(unlock),
        }
    }
}

fn weft() -> Fns {
    Fns {
        lock: libc::pthread_mutex_lock,
        unlock: libc::pthread_mutex_unlock,
    }
}

/// Nanoseconds per lock/unlock pair.
fn time(f: &Fns, pairs: u32) -> f64 {
    let m = UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER);
    let t0 = Instant::now();
    for _ in 0..pairs {
        // SAFETY: an initialised, uncontended mutex locked and unlocked by
        // this thread.
        unsafe {
            (f.lock)(std::hint::black_box(m.get()));
            (f.unlock)(std::hint::black_box(m.get()));
        }
    }
    t0.elapsed().as_nanos() as f64 / f64::from(pairs)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn rows(rounds: usize) -> [(f64, f64); 1] {
    const PAIRS: u32 = 2_000_000;
    let (g, w) = (glibc(), weft());
    let mut gs = Vec::new();
    let mut ws = Vec::new();
    for _ in 0..rounds {
        gs.push(time(&g, PAIRS));
        ws.push(time(&w, PAIRS));
    }
    [(median(gs), median(ws))]
}

fn main() {
    let rounds = std::env::args()
        .nth(1)
        .map_or(7, |s| s.parse().expect("rounds: a number"));
    let os = rows(rounds);
    let virt = weft::spawn(move || rows(rounds)).join().unwrap();
    println!("lock+unlock pair, median of {rounds} rounds of 2,000,000");
    println!(
        "{:<16} {:>10} {:>10} {:>8}",
        "thread", "glibc ns", "weft ns", "+ns"
    );
    for (name, [(g, w)]) in [("OS thread", os), ("virtual thread", virt)] {
        println!("{name:<16} {g:>10.2} {w:>10.2} {:>8.2}", w - g);
    }
}
