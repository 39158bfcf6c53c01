//! A sampled thread whose handler is stuck does not hang the sampler.
//!
//! Weft samples a running virtual thread's stack by a signal (`SIGURG`)
//! whose handler, on the carrier, writes the stack into a slot the
//! sampler waits for. Here a handler of the program's (`SIGUSR2`) lands
//! inside Weft's and does not return until told: Weft's handler has
//! claimed the request and cannot finish. The sampler used to wait for it
//! without bound, so `weft::dump()` (and the stall monitor) hung for good
//! (the watchdog ended the test). Now it gives up after a bounded wait,
//! and sampling works again once the stuck handler has finished.
//!
//! Its own test binary: it installs process-wide handlers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::time::Duration;

use weft_transparent_tests::{Watchdog, strict_runtime};

/// How many times the program's handler landed inside Weft's.
static INSIDE_SAMPLER: AtomicUsize = AtomicUsize::new(0);
/// The landings told to return so far.
static RELEASED: AtomicUsize = AtomicUsize::new(0);
/// Landings to provoke: the handler may land after Weft's has finished
/// its answer (then nothing is stuck), so several.
const HITS: usize = 30;

/// Sticks (until released) when it interrupted Weft's sampling handler:
/// the one place where `SIGURG` is blocked on this thread.
extern "C" fn sticks(_sig: libc::c_int) {
    // SAFETY: a query of this thread's mask into a zeroed set.
    let in_sampler = unsafe {
        let mut cur: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur);
        libc::sigismember(&cur, libc::SIGURG) == 1
    };
    if in_sampler {
        let n = INSIDE_SAMPLER.fetch_add(1, Ordering::SeqCst) + 1;
        while RELEASED.load(Ordering::SeqCst) < n {
            std::hint::spin_loop();
        }
    }
}

/// Spins `depth` frames deep: a long stack makes the handler's unwind
/// (the window in which the program's handler must land) longer.
#[inline(never)]
fn spin(stop: &AtomicBool, depth: usize) -> usize {
    if depth > 0 {
        return std::hint::black_box(spin(stop, depth - 1)) + 1;
    }
    while !stop.load(Ordering::Relaxed) {
        std::hint::spin_loop();
    }
    0
}

/// Pins the calling OS thread to `cpu` (if there is one): the carrier and
/// the signal sender then run at the same time, so a signal can land in
/// the middle of the carrier's handler (best effort).
fn pin_to_cpu(cpu: usize) {
    // SAFETY: a cpu_set_t filled by the libc macros, for this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Drops the resident pages of every loaded object's read-only segments
/// (code, unwind tables): the sampled thread's handler then takes page
/// faults while it unwinds, and a pending signal is delivered on the
/// return from each, inside the handler — the landing this test needs.
/// Harmless: the pages come back from the page cache on the next touch
/// (writable segments are left alone).
fn evict_read_only_pages() {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        _data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info with `dlpi_phnum`
        // program headers.
        unsafe {
            let info = &*info;
            for i in 0..info.dlpi_phnum as usize {
                let ph = &*info.dlpi_phdr.add(i);
                if ph.p_type != libc::PT_LOAD || ph.p_flags & libc::PF_W != 0 {
                    continue;
                }
                let start = (info.dlpi_addr as usize + ph.p_vaddr as usize) & !4095;
                let end = info.dlpi_addr as usize + (ph.p_vaddr + ph.p_memsz) as usize;
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
        0
    }
    // SAFETY: a callback that only reads the headers and madvises
    // read-only file mappings.
    unsafe { libc::dl_iterate_phdr(Some(each), std::ptr::null_mut()) };
}

fn sampled(id: weft::ThreadId) -> bool {
    weft::dump().thread(id).is_some_and(|t| !t.stack.is_empty())
}

#[test]
fn a_stuck_sampling_handler_does_not_hang_the_sampler() {
    // Not `watchdog`: its report is a thread dump, which would hang on the
    // stuck sample as well.
    let _w = Watchdog::new(
        "a_stuck_sampling_handler_does_not_hang_the_sampler",
        Duration::from_secs(60),
        || "the sampler waited for a stuck handler (weft::dump hung)".to_string(),
    );
    // SAFETY: installs a handler that reads its mask and spins on atomics.
    let prev = unsafe { libc::signal(libc::SIGUSR2, sticks as *const () as libc::sighandler_t) };
    assert_ne!(prev, libc::SIG_ERR);
    let rt = strict_runtime(1);
    let stop = Arc::new(AtomicBool::new(false));
    let tid = Arc::new(AtomicI32::new(0));
    let spinner = {
        let (stop, tid) = (stop.clone(), tid.clone());
        rt.spawn(move || {
            pin_to_cpu(0);
            // SAFETY: gettid has no preconditions.
            tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
            spin(&stop, 200);
        })
    };
    while tid.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let id = spinner.thread().id();
    assert!(sampled(id), "the running thread is sampled at all");
    let carrier = tid.load(Ordering::SeqCst);
    let spam_stop = Arc::new(AtomicBool::new(false));
    let spammer = {
        let spam_stop = spam_stop.clone();
        std::thread::spawn(move || {
            pin_to_cpu(1);
            while !spam_stop.load(Ordering::Relaxed) {
                // SAFETY: tgkill to a thread of this process, whose
                // SIGUSR2 has a handler.
                unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), carrier, libc::SIGUSR2) };
            }
        })
    };
    for hit in 1..=HITS {
        // Sample until one of the program's handlers lands inside Weft's.
        let mut tries = 0;
        while INSIDE_SAMPLER.load(Ordering::SeqCst) < hit && tries < 20_000 {
            evict_read_only_pages();
            let _ = weft::dump();
            tries += 1;
        }
        assert!(
            INSIDE_SAMPLER.load(Ordering::SeqCst) >= hit,
            "no handler landed inside a sample in {tries} dumps"
        );
        // The dump that ran into the stuck handler returned (above); one
        // more, while it is still stuck, returns too (without its stack).
        let _ = weft::dump();
        RELEASED.store(hit, Ordering::SeqCst);
    }
    spam_stop.store(true, Ordering::SeqCst);
    spammer.join().unwrap();
    RELEASED.store(usize::MAX, Ordering::SeqCst);
    // Sampling works again once the stuck handler has finished.
    let mut ok = false;
    for _ in 0..100 {
        if sampled(id) {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ok, "sampling resumed");
    stop.store(true, Ordering::SeqCst);
    spinner.join().unwrap();
    // SAFETY: ignored from now on (a late signal must not kill the test).
    unsafe { libc::signal(libc::SIGUSR2, libc::SIG_IGN) };
}
