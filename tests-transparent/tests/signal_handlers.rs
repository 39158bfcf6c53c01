//! Hooked calls made inside a signal handler go straight to the kernel:
//! they never park the virtual thread the handler interrupted (its
//! carrier would run other threads with the handler half done and the
//! signal blocked), nor take the hooks' registrations lock (the
//! interrupted code may hold it), nor allocate.
//!
//! Its own test binary, its tests one at a time: they count parks and
//! install process-wide handlers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::time::Duration;
use weft_transparent_tests::{Watchdog, one_at_a_time, raise_fd_limit, strict_runtime};

const LIMIT: Duration = Duration::from_secs(60);

/// Aborts the test if it runs past [`LIMIT`]. Not the crate's `watchdog`:
/// its report is a thread dump, which cannot borrow a thread stuck inside
/// a handler.
fn watchdog(what: &'static str) -> Watchdog {
    Watchdog::new(what, LIMIT, || {
        "a hooked call inside a signal handler parked or waited for a lock".to_string()
    })
}

fn parks_in(call: &str) -> u64 {
    weft::transparent::parks()
        .into_iter()
        .find(|(c, _)| *c == call)
        .map_or(0, |(_, n)| n)
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Sends `sig` to thread `tid` of this process.
fn tgkill(tid: i32, sig: i32) {
    // SAFETY: tgkill to a thread of our own process, with a signal that
    // has a handler.
    unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, sig) };
}

static SLEPT_IN_HANDLER: AtomicUsize = AtomicUsize::new(0);

extern "C" fn sleeps(_sig: libc::c_int) {
    // SAFETY: usleep has no preconditions (and is async-signal-safe).
    unsafe { libc::usleep(2_000) };
    // SAFETY: as above; a nanosleep of 1 ms into locals.
    unsafe {
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        libc::nanosleep(&ts, std::ptr::null_mut());
    }
    SLEPT_IN_HANDLER.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn a_sleep_in_a_signal_handler_does_not_park() {
    let _one = one_at_a_time();
    let _w = watchdog("a_sleep_in_a_signal_handler_does_not_park");
    // SAFETY: installs a handler that only sleeps and bumps an atomic.
    let prev = unsafe { libc::signal(libc::SIGUSR1, sleeps as *const () as libc::sighandler_t) };
    assert_ne!(prev, libc::SIG_ERR);
    let rt = strict_runtime(1);
    let before = parks_in("usleep");
    let nano_before = parks_in("nanosleep");
    rt.spawn(|| {
        // Delivered to this very thread before tgkill returns.
        tgkill(gettid(), libc::SIGUSR1);
        // A sleep outside the handler still parks.
        // SAFETY: usleep has no preconditions.
        unsafe { libc::usleep(1_000) };
    })
    .join()
    .unwrap();
    assert_eq!(SLEPT_IN_HANDLER.load(Ordering::SeqCst), 1, "handler ran");
    assert_eq!(
        parks_in("usleep"),
        before + 1,
        "only the usleep outside the handler parked"
    );
    assert_eq!(
        parks_in("nanosleep"),
        nano_before,
        "the nanosleep inside the handler did not park"
    );
    // The handler reported back as installed (not Weft's wrapper).
    // SAFETY: a query into a zeroed struct.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, std::ptr::null(), &mut old),
            0
        );
        assert_eq!(old.sa_sigaction, sleeps as *const () as libc::sighandler_t);
        assert_eq!(old.sa_flags & libc::SA_SIGINFO, 0);
        libc::signal(libc::SIGUSR1, libc::SIG_DFL);
    }
}

// glibc's (hooked by Weft).
unsafe extern "C" {
    fn close_range(first: libc::c_uint, last: libc::c_uint, flags: libc::c_int) -> libc::c_int;
}

/// A socket kept registered with the poller, so that every `dup`/`close`
/// looks at the registrations.
static KEPT: AtomicI32 = AtomicI32::new(-1);
static DUPS_IN_HANDLER: AtomicUsize = AtomicUsize::new(0);

extern "C" fn dups(_sig: libc::c_int) {
    let fd = KEPT.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    // SAFETY: dup/close are async-signal-safe; `d` is our own copy.
    unsafe {
        let d = libc::dup(fd);
        if d >= 0 {
            libc::close(d);
        }
    }
    DUPS_IN_HANDLER.fetch_add(1, Ordering::Relaxed);
}

/// A handler that `dup`s and `close`s while the interrupted virtual
/// thread looks at its registrations, holding the registrations lock
/// (`close_range`). Before, the handler's `close` took that
/// lock: when the signal landed while the thread held it, the handler's
/// lock wait parked the thread on a lock it held itself, for good (the
/// watchdog ended the test).
#[test]
fn descriptor_calls_in_a_signal_handler_take_no_lock() {
    let _one = one_at_a_time();
    let _w = watchdog("descriptor_calls_in_a_signal_handler_take_no_lock");
    // SAFETY: installs a handler that dups and closes a descriptor.
    let prev = unsafe { libc::signal(libc::SIGUSR2, dups as *const () as libc::sighandler_t) };
    assert_ne!(prev, libc::SIG_ERR);
    raise_fd_limit(8192);
    let rt = strict_runtime(1);
    let tid = Arc::new(AtomicI32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (tid, stop) = (tid.clone(), stop.clone());
        rt.spawn(move || {
            let mut kept = [0i32; 2];
            // SAFETY: socketpair into a 2-int array.
            assert_eq!(
                unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, kept.as_mut_ptr()) },
                0
            );
            let mut pfd = libc::pollfd {
                fd: kept[0],
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd: registers kept[0] with the poller.
            unsafe { libc::poll(&mut pfd, 1, 1) };
            KEPT.store(kept[0], Ordering::SeqCst);
            // Many registrations: `close_range` looks at all of them
            // under the registrations lock, which the loop below then
            // holds most of the time.
            let mut many = Vec::new();
            for _ in 0..2000 {
                let mut sv = [0i32; 2];
                // SAFETY: as above.
                if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) }
                    != 0
                {
                    break;
                }
                let mut p = libc::pollfd {
                    fd: sv[0],
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd (ready at once: registered,
                // no wait).
                unsafe { libc::poll(&mut p, 1, 1) };
                many.push(sv);
            }
            tid.store(gettid(), Ordering::SeqCst);
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: closes nothing (no descriptor that high).
                unsafe { close_range(1 << 19, (1 << 19) + 1, 0) };
                rounds += 1;
            }
            for sv in many {
                // SAFETY: our own descriptors.
                unsafe {
                    libc::close(sv[0]);
                    libc::close(sv[1]);
                }
            }
            KEPT.store(-1, Ordering::SeqCst);
            // SAFETY: our own descriptors.
            unsafe {
                libc::close(kept[0]);
                libc::close(kept[1]);
            }
            rounds
        })
    };
    while tid.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let carrier = tid.load(Ordering::SeqCst);
    let spam_stop = Arc::new(AtomicBool::new(false));
    let spammer = {
        let spam_stop = spam_stop.clone();
        std::thread::spawn(move || {
            while !spam_stop.load(Ordering::Relaxed) {
                tgkill(carrier, libc::SIGUSR2);
                std::thread::yield_now();
            }
        })
    };
    while DUPS_IN_HANDLER.load(Ordering::Relaxed) < 20_000 {
        std::thread::sleep(Duration::from_millis(5));
    }
    spam_stop.store(true, Ordering::SeqCst);
    spammer.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    let rounds = worker.join().unwrap();
    assert!(rounds > 0);
    // SAFETY: ignored from now on (a late signal must not kill the test).
    unsafe { libc::signal(libc::SIGUSR2, libc::SIG_IGN) };
}
