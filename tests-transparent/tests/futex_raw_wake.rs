//! A futex wake made by a raw `syscall` instruction (rustix's `linux_raw`
//! backend, another language's runtime) goes straight to the kernel and
//! past the emulated queue of a virtual thread waiting on that word
//! (`transparent/futex.rs`). The waiter's re-checks of its word bound the
//! loss (`WEFT_FUTEX_RECHECK_MS`): before them, it waited for ever
//! (issue 53).
#![cfg(target_arch = "x86_64")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use weft_transparent_tests::{strict_runtime, watchdog};

const LIMIT: Duration = Duration::from_secs(120);
const FUTEX_WAIT_PRIVATE: i32 = 128;
const FUTEX_WAKE_PRIVATE: i32 = 129;

/// `FUTEX_WAKE_PRIVATE` of `n` waiters of `word`, by the `syscall`
/// instruction itself (no libc, so no hook sees it).
fn raw_wake(word: &AtomicU32, n: i32) -> isize {
    let ret: isize;
    // SAFETY: futex(2) on a live, aligned word; the instruction clobbers
    // rcx and r11 only.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_futex as isize => ret,
            in("rdi") word.as_ptr(),
            in("rsi") FUTEX_WAKE_PRIVATE,
            in("rdx") n,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

fn futex_parks() -> u64 {
    weft::transparent::parks()
        .into_iter()
        .find(|(c, _)| *c == "futex")
        .map_or(0, |(_, n)| n)
}

#[test]
fn a_wake_behind_the_emulations_back_ends_the_wait() {
    if std::env::var_os("WEFT_THREAD_LOCALS").is_some()
        || std::env::var_os("WEFT_FUTEX_RECHECK_MS").is_some_and(|v| v == "0")
    {
        return;
    }
    let _dog = watchdog("a raw futex wake", LIMIT);
    let rt = strict_runtime(2);
    let word = Arc::new(AtomicU32::new(0));
    let found = weft::transparent::futex_rechecks_found();
    let parks = futex_parks();
    let w = word.clone();
    let waiter = rt.spawn(move || {
        while w.load(Ordering::SeqCst) == 0 {
            // SAFETY: futex(2) on a live, aligned word, no timeout.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    w.as_ptr(),
                    FUTEX_WAIT_PRIVATE,
                    0u32,
                    std::ptr::null::<libc::timespec>(),
                )
            };
        }
    });
    // Queued on the emulated queue (counted after the enqueue, with the
    // word seen at 0): from here the raw wake cannot reach it.
    let t0 = Instant::now();
    while futex_parks() == parks {
        assert!(t0.elapsed() < LIMIT, "the waiter never waited");
        std::thread::sleep(Duration::from_millis(1));
    }
    word.store(1, Ordering::SeqCst);
    assert_eq!(raw_wake(&word, 1), 0, "no OS thread waits in the kernel");
    waiter.join().unwrap();
    assert!(weft::transparent::futex_rechecks_found() > found);
}
