//! Metrics counts match a known workload. One test in its own binary, so
//! no other test's threads are counted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weft::sync::CountDownLatch;

fn reason(m: &weft::metrics::Metrics, r: &str) -> usize {
    m.parked_by_reason
        .iter()
        .find(|(k, _)| *k == r)
        .map_or(0, |(_, n)| *n)
}

#[test]
fn metrics_match_a_known_workload() {
    let rt = weft::Runtime::builder().parallelism(2).build().unwrap();
    let latch = Arc::new(CountDownLatch::new(1));
    let (tx, rx) = weft::channel::unbounded::<u32>();
    let mut hs = Vec::new();
    for _ in 0..50 {
        let l = latch.clone();
        hs.push(rt.spawn(move || {
            l.wait().unwrap();
        }));
    }
    for _ in 0..30 {
        hs.push(rt.spawn(|| {
            let _ = weft::sleep(Duration::from_secs(60));
        }));
    }
    for _ in 0..20 {
        let rx = rx.clone();
        hs.push(rt.spawn(move || {
            let _ = rx.recv();
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let m = loop {
        let m = weft::metrics::snapshot();
        // A sleeper shows its blocker a moment before its timer is in the
        // heap: settled means both.
        if reason(&m, "sleep") == 30
            && reason(&m, "channel") == 20
            && reason(&m, "sync") == 50
            && m.timers_pending >= 30
        {
            break m;
        }
        assert!(Instant::now() < deadline, "never settled: {m:#?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(m.threads_live, 100);
    assert!(m.threads_started >= 100);
    assert_eq!(m.carriers_total, 2);
    assert!(m.timers_pending >= 30, "{m:#?}");
    let text = weft::metrics::prometheus();
    assert!(text.contains("weft_virtual_threads_live 100"), "{text}");
    assert!(
        text.contains("weft_virtual_threads_parked{reason=\"sleep\"} 30"),
        "{text}"
    );
    assert!(text.contains("# TYPE weft_carrier_hold_seconds histogram"));

    latch.count_down();
    drop(tx);
    for h in &hs {
        h.thread().interrupt();
    }
    for h in hs {
        let _ = h.join();
    }
    let m = weft::metrics::snapshot();
    assert_eq!(m.threads_live, 0, "{m:#?}");
    assert!(m.threads_finished >= 100);
}
