//! `WEFT_TRANSPARENT=0`: every call passes through (read once per process,
//! so this is its own test binary with a single test).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[test]
fn weft_transparent_0_turns_the_hooks_off() {
    // SAFETY: set before any other thread of this process reads the
    // environment (the runtime starts below).
    unsafe { std::env::set_var("WEFT_TRANSPARENT", "0") };
    let rt = weft_transparent_tests::strict_runtime(1);
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let a = rt.spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        d.store(true, Ordering::SeqCst);
    });
    // With the hooks off the sleep holds the only carrier: this thread runs
    // after it.
    let after = rt
        .spawn(move || done.load(Ordering::SeqCst))
        .join()
        .unwrap();
    a.join().unwrap();
    assert!(after);
    assert!(!weft::transparent::is_enabled());
    assert!(weft::transparent::parks().iter().all(|(_, n)| *n == 0));
}
