//! `SIGURG` is shared by Weft's stack sampler and the program.
//!
//! Weft samples a running virtual thread by sending its carrier `SIGURG`.
//! A program may want the signal too (out-of-band socket data, or its own
//! `pthread_kill`). The behaviour kept: Weft's handler stays installed; a
//! handler the program installs — before Weft's first sample or after —
//! is recorded by the hooked `sigaction` and reported back by it, and
//! Weft's handler calls it for every `SIGURG` that is not one of Weft's
//! requests (those carry a tag of Weft's, `SI_QUEUE`), and never for a
//! request. Before, Weft refused to sample at all when the program had a
//! handler first, and a handler installed later replaced Weft's: it then
//! received every sampling request, and sampling timed out.
//!
//! Its own test binary: whether Weft's handler is installed is decided
//! once per process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::time::Duration;

use weft_transparent_tests::{strict_runtime, watchdog};

static FIRST: AtomicUsize = AtomicUsize::new(0);
static SECOND: AtomicUsize = AtomicUsize::new(0);

extern "C" fn first(_sig: libc::c_int) {
    FIRST.fetch_add(1, Ordering::SeqCst);
}

extern "C" fn second(_sig: libc::c_int, _info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    SECOND.fetch_add(1, Ordering::SeqCst);
}

/// Installs `h` for `SIGURG`; returns the handler it replaced.
fn install(h: usize, siginfo: bool) -> usize {
    // SAFETY: sigaction with zeroed, then filled, structs.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = h;
        sa.sa_flags = libc::SA_RESTART | if siginfo { libc::SA_SIGINFO } else { 0 };
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(libc::SIGURG, &sa, &mut old), 0);
        old.sa_sigaction
    }
}

/// The program's own `SIGURG`, to this OS thread (delivered before the
/// call returns).
fn raise_urg() {
    // SAFETY: tgkill to the calling thread.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            libc::gettid(),
            libc::SIGURG,
        )
    };
}

#[inline(never)]
fn spin(stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        std::hint::spin_loop();
    }
}

/// Whether a dump shows the running thread `id` with a sampled stack
/// (a few tries: a sample caught mid-switch has none).
fn sampled(id: weft::ThreadId) -> bool {
    (0..20).any(|_| weft::dump().thread(id).is_some_and(|t| !t.stack.is_empty()))
}

#[test]
fn weft_and_the_program_share_sigurg() {
    let _w = watchdog("weft_and_the_program_share_sigurg", Duration::from_secs(60));
    // The program's handler first, before Weft ever sampled.
    assert_eq!(install(first as *const () as usize, false), libc::SIG_DFL);
    let rt = strict_runtime(1);
    let stop = Arc::new(AtomicBool::new(false));
    let tid = Arc::new(AtomicI32::new(0));
    let spinner = {
        let (stop, tid) = (stop.clone(), tid.clone());
        rt.spawn(move || {
            // SAFETY: gettid has no preconditions.
            tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
            spin(&stop);
        })
    };
    while tid.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let id = spinner.thread().id();
    assert!(
        sampled(id),
        "Weft samples although the program handles SIGURG"
    );
    assert_eq!(
        FIRST.load(Ordering::SeqCst),
        0,
        "no request reached the program"
    );
    raise_urg();
    assert_eq!(
        FIRST.load(Ordering::SeqCst),
        1,
        "the program's own SIGURG reached it"
    );

    // A handler installed after Weft's: reported as replacing the first.
    assert_eq!(
        install(second as *const () as usize, true),
        first as *const () as usize
    );
    assert!(sampled(id), "Weft still samples");
    assert_eq!(
        SECOND.load(Ordering::SeqCst),
        0,
        "no request reached the program"
    );
    raise_urg();
    assert_eq!(SECOND.load(Ordering::SeqCst), 1);
    assert_eq!(FIRST.load(Ordering::SeqCst), 1);

    // Back to the default: nothing reaches the program, sampling goes on.
    assert_eq!(install(libc::SIG_DFL, false), second as *const () as usize);
    raise_urg();
    assert_eq!(SECOND.load(Ordering::SeqCst), 1);
    assert!(sampled(id));
    stop.store(true, Ordering::SeqCst);
    spinner.join().unwrap();
}
