//! Repro: cross-runtime ping-pong pairs with an aggressive stall threshold.
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn main() {
    let thr: u64 = std::env::args().nth(1).map_or(1, |s| s.parse().unwrap());
    let mk = || {
        weft::Runtime::builder()
            .parallelism(1)
            .stall_threshold(Duration::from_millis(thr))
            .build()
            .unwrap()
    };
    let (rt1, rt2) = (mk(), mk());
    let pairs = 4;
    let n = 200_000u64;
    let t0 = Instant::now();
    let mut hs = Vec::new();
    let mut all_slots = Vec::new();
    let tokens: Vec<Arc<AtomicU64>> = (0..pairs).map(|_| Arc::new(AtomicU64::new(0))).collect();
    for p in 0..pairs {
        let token = tokens[p].clone();
        let slots: Arc<[OnceLock<weft::Thread>; 2]> = Arc::new([OnceLock::new(), OnceLock::new()]);
        all_slots.push(slots.clone());
        for side in 0..2u64 {
            let (token, slots) = (token.clone(), slots.clone());
            let rt = if side == 0 { &rt1 } else { &rt2 };
            hs.push(rt.spawn(move || {
                slots[side as usize].set(weft::current()).unwrap();
                while slots[1 - side as usize].get().is_none() {
                    weft::yield_now();
                }
                let other = slots[1 - side as usize].get().unwrap().clone();
                loop {
                    let t = token.load(Ordering::Acquire);
                    if t >= 2 * n {
                        other.unpark();
                        return;
                    }
                    if t % 2 == side {
                        token.store(t + 1, Ordering::Release);
                        other.unpark();
                    } else {
                        weft::park();
                    }
                }
            }));
        }
    }
    let waiter = std::thread::spawn(move || {
        for h in hs {
            h.join().unwrap();
        }
    });
    while !waiter.is_finished() {
        if t0.elapsed() > Duration::from_secs(30) {
            let toks: Vec<u64> = tokens.iter().map(|t| t.load(Ordering::SeqCst)).collect();
            eprintln!(
                "HUNG: tokens {toks:?} carriers rt1 {} blocked {} rt2 {} blocked {}",
                rt1.active_carriers(),
                rt1.blocked_carriers(),
                rt2.active_carriers(),
                rt2.blocked_carriers()
            );
            eprintln!("rt1: {}\nrt2: {}", rt1.debug_sched(), rt2.debug_sched());
            for (p, sl) in all_slots.iter().enumerate() {
                let t0 = sl[0].get().unwrap();
                let t1 = sl[1].get().unwrap();
                eprintln!(
                    "pair {p}: token {} side0 {:?} parked={} side1 {:?} parked={}",
                    tokens[p].load(Ordering::SeqCst),
                    t0.state(),
                    t0.debug_parked(),
                    t1.state(),
                    t1.debug_parked()
                );
            }
            for sl in all_slots.iter() {
                sl[0].get().unwrap().unpark();
                sl[1].get().unwrap().unpark();
            }
            std::thread::sleep(Duration::from_millis(500));
            let toks: Vec<u64> = tokens.iter().map(|t| t.load(Ordering::SeqCst)).collect();
            eprintln!("after manual unpark: tokens {toks:?}");
            if std::env::var("XRT_GDB").is_ok() {
                let out = std::process::Command::new("gdb")
                    .args([
                        "-p",
                        &std::process::id().to_string(),
                        "-batch",
                        "-ex",
                        "thread apply all bt 12",
                    ])
                    .output()
                    .unwrap();
                eprintln!("{}", String::from_utf8_lossy(&out.stdout));
            }
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    println!(
        "ok in {:?}; events {:?}",
        t0.elapsed(),
        weft::events::counters()
    );
}
