//! Sampling the stack of another OS thread of this process: how a stall
//! event and a thread dump show the frames of a virtual thread that is
//! *running* (or blocked in the kernel) on its carrier.
//!
//! A parked virtual thread can record its own stack (the dump borrows it,
//! see `dump.rs`). A running one cannot be asked: its carrier is busy with
//! it — that is what a stall is. Nothing outside can unwind it either: a
//! release build has no frame pointers, and copying another thread's live
//! stack from Rust would be a data race. So the sampler asks the *carrier's
//! OS thread itself*, by a signal. The handler runs on that thread, on top
//! of the interrupted frame, and walks its own stack with the system
//! unwinder into a preallocated slot; the sampler waits for the slot, with
//! a timeout, and resolves symbols afterwards on its own thread.
//!
//! # Why this is sound
//!
//! The handler touches only the slot's atomics and calls
//! `_Unwind_Backtrace` (through `backtrace::trace_unsynchronized`), which
//! allocates nothing. Its one lock, on the loaded-object list, is gone on
//! the platforms Weft supports: glibc 2.35 added `_dl_find_object`, a
//! lock-free lookup that libgcc 12's unwinder uses to find a frame's
//! unwind tables (older pairs take a recursive loader lock, which the
//! interrupted thread can re-enter; only a thread stuck inside `dlopen`
//! forever could make the handler wait, and the sampler gives up after
//! [`SAMPLE_TIMEOUT`]). Rust code carries unwind tables for every
//! instruction, corosensei's `unwind` feature lets a backtrace cross from a
//! virtual thread's stack into its carrier's, and the unwinder stops,
//! rather than guesses, at an address it has no table for. The handler
//! saves and restores `errno`.
//!
//! The one place the tables do not describe the machine is the context
//! switch itself: inside corosensei's switch the stack pointer already
//! points at the other stack while the frame being left still looks
//! current, and an unwind started there follows garbage (a dump test hit
//! `SIGSEGV` in `_Unwind_Backtrace` this way). So every switch is bracketed
//! by a per-OS-thread flag (`switching.rs`), and a signal that lands while
//! the flag is up answers "no sample" at once.
//!
//! # What the sampled thread sees
//!
//! The signal is `SIGURG` (ignored by default, so a stray one is harmless;
//! Go uses it for the same purpose, asynchronous preemption). A thread
//! sampled while blocked in a system call that the kernel does not restart
//! after a handler (`nanosleep`, `poll`, `epoll_wait`, a socket read with
//! `SO_RCVTIMEO`, …) sees `EINTR` once; `std` retries it in `thread::sleep`,
//! `read_exact`, `write_all` and its locks, and a single `read` returns
//! [`std::io::ErrorKind::Interrupted`], which Rust code is expected to
//! retry. (A blocking socket call that the `transparent` hooks emulate
//! with `poll` on an OS thread is restarted, as the kernel's own would be:
//! the handler has `SA_RESTART`.) Only stalled carriers (once per stall)
//! and dumps are sampled.
//! If `SIGURG` already has a handler when Weft first samples, Weft leaves
//! it alone and takes no samples; `WEFT_SAMPLE_STACKS=0` turns sampling
//! off.

use crate::unpoison::Unpoison;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Frames recorded per sample.
pub(crate) const MAX_FRAMES: usize = 64;

/// How long a sampler waits for the sampled thread to run its handler (a
/// thread with the signal blocked, or stopped, never does).
pub(crate) const SAMPLE_TIMEOUT: Duration = Duration::from_millis(100);

const SIGNAL: libc::c_int = libc::SIGURG;

// Slot states. The sampler owns the slot (under `SAMPLER`) from IDLE to
// REQUESTED and from DONE back to IDLE; the handler owns it from REQUESTED
// (which it claims with a compare-exchange, so a late signal after the
// sampler withdrew finds IDLE and does nothing) through WRITING to DONE.
const IDLE: u32 = 0;
const REQUESTED: u32 = 1;
const WRITING: u32 = 2;
const DONE: u32 = 3;

/// The one sample in flight. Only atomics: the handler may not take locks.
struct Slot {
    state: AtomicU32,
    /// Kernel thread id the request is for.
    target: AtomicI32,
    /// The interrupted instruction (from the signal context).
    pc: AtomicUsize,
    len: AtomicUsize,
    ips: [AtomicUsize; MAX_FRAMES],
}

static SLOT: Slot = Slot {
    state: AtomicU32::new(IDLE),
    target: AtomicI32::new(0),
    pc: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    ips: [const { AtomicUsize::new(0) }; MAX_FRAMES],
};

/// One sampler at a time (the slot is single).
static SAMPLER: Mutex<()> = Mutex::new(());

/// Whether sampling is on (handler installed), decided once.
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        if std::env::var("WEFT_SAMPLE_STACKS").is_ok_and(|v| v == "0" || v == "off") {
            return false;
        }
        install()
    })
}

/// Installs the handler unless someone else handles the signal.
fn install() -> bool {
    // SAFETY: plain sigaction calls with zeroed, then filled, structs; we
    // read the old disposition first and only replace the default one.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(SIGNAL, std::ptr::null(), &mut old) != 0 {
            return false;
        }
        if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
            return false;
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        // SA_RESTART: calls the kernel can restart are restarted.
        // SA_ONSTACK: a deep stack close to its guard page unwinds from the
        // alternate stack, where the thread has one.
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(SIGNAL, &sa, std::ptr::null_mut()) == 0
    }
}

extern "C" fn on_signal(_sig: libc::c_int, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: __errno_location is the calling thread's errno; async-signal-safe.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    if SLOT.target.load(Ordering::Acquire) == me
        && SLOT
            .state
            .compare_exchange(REQUESTED, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    {
        SLOT.pc.store(interrupted_pc(ctx), Ordering::Relaxed);
        let mut n = 0usize;
        // Mid-switch: answer with no frames rather than unwind.
        let skip = crate::switching::switching();
        if !skip {
            // SAFETY: `trace_unsynchronized` is unsafe because callers must
            // not run it concurrently on platforms whose unwinder is not
            // thread-safe (Windows' dbghelp); libgcc's is. The closure only
            // stores to atomics. Not mid-switch: the stack is described.
            unsafe {
                backtrace::trace_unsynchronized(|f| {
                    SLOT.ips[n].store(f.ip() as usize, Ordering::Relaxed);
                    n += 1;
                    n < MAX_FRAMES
                });
            }
        }
        SLOT.len.store(n, Ordering::Relaxed);
        // Release: the sampler's Acquire load of DONE sees every store above.
        SLOT.state.store(DONE, Ordering::Release);
        // SAFETY: FUTEX_WAKE on a live, aligned u32; async-signal-safe.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                SLOT.state.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
    }
    // SAFETY: as above; restores the interrupted code's errno.
    unsafe { *libc::__errno_location() = errno };
}

/// The instruction the signal interrupted, from the handler's context.
fn interrupted_pc(ctx: *mut libc::c_void) -> usize {
    if ctx.is_null() {
        return 0;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: with SA_SIGINFO the kernel passes a valid ucontext_t.
        unsafe {
            (*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RIP as usize] as usize
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: with SA_SIGINFO the kernel passes a valid ucontext_t.
        unsafe { (*(ctx as *const libc::ucontext_t)).uc_mcontext.pc as usize }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        0
    }
}

/// The return addresses on the stack of kernel thread `tid` of this
/// process, innermost first, starting at the interrupted instruction.
/// `None` when sampling is off, `tid` is the caller itself or is gone, or
/// it did not answer within [`SAMPLE_TIMEOUT`].
pub(crate) fn sample(tid: i32) -> Option<Vec<usize>> {
    // SAFETY: gettid has no preconditions.
    if tid <= 0 || tid == unsafe { libc::gettid() } || !enabled() {
        return None;
    }
    let _one = SAMPLER.lock().unpoison();
    SLOT.target.store(tid, Ordering::Relaxed);
    SLOT.len.store(0, Ordering::Relaxed);
    // Release: the handler's Acquire claim sees the target.
    SLOT.state.store(REQUESTED, Ordering::Release);
    // SAFETY: tgkill to a thread of our own process with a signal whose
    // handler is installed (checked by `enabled`).
    let sent = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, SIGNAL) } == 0;
    let deadline = Instant::now() + SAMPLE_TIMEOUT;
    if sent {
        loop {
            let s = SLOT.state.load(Ordering::Acquire);
            if s == DONE {
                break;
            }
            let now = Instant::now();
            if s == REQUESTED && now >= deadline {
                break;
            }
            // WRITING: the handler is running; it ends in bounded time.
            let wait = if s == WRITING {
                Duration::from_millis(1)
            } else {
                deadline - now
            };
            futex_wait(&SLOT.state, s, wait);
        }
    }
    // Withdraw an unanswered request; if the handler claimed it meanwhile,
    // let it finish (it never blocks).
    if SLOT
        .state
        .compare_exchange(REQUESTED, IDLE, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        return None;
    }
    while SLOT.state.load(Ordering::Acquire) != DONE {
        std::hint::spin_loop();
    }
    let n = SLOT.len.load(Ordering::Relaxed);
    let pc = SLOT.pc.load(Ordering::Relaxed);
    let ips: Vec<usize> = (0..n)
        .map(|i| SLOT.ips[i].load(Ordering::Relaxed))
        .collect();
    SLOT.state.store(IDLE, Ordering::Release);
    if n == 0 {
        return None; // caught mid-switch (or nothing to unwind)
    }
    // Drop the handler's own frames and the signal trampoline: the sample
    // starts at the interrupted instruction.
    let start = ips.iter().position(|&ip| ip == pc).unwrap_or(0);
    Some(ips[start..].to_vec())
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT on a live, aligned u32 with a valid timeout; the
    // kernel only reads both.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    #[inline(never)]
    fn spin_here(stop: &AtomicBool, tid: &AtomicI32) {
        // SAFETY: gettid has no preconditions.
        tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
        while !stop.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn samples_a_busy_os_thread_at_its_own_function() {
        let stop = Arc::new(AtomicBool::new(false));
        let tid = Arc::new(AtomicI32::new(0));
        let (s, t) = (stop.clone(), tid.clone());
        let h = std::thread::spawn(move || spin_here(&s, &t));
        while tid.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        let ips = sample(tid.load(Ordering::SeqCst)).expect("a sample");
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        let mut names = Vec::new();
        for ip in ips {
            backtrace::resolve(ip as *mut _, |s| {
                names.push(s.name().map(|n| format!("{n:#}")).unwrap_or_default())
            });
        }
        assert!(
            names.iter().any(|n| n.contains("spin_here")),
            "sampled stack lacks spin_here: {names:?}"
        );
    }

    #[test]
    fn own_thread_and_bad_tids_are_refused() {
        // SAFETY: gettid has no preconditions.
        assert!(sample(unsafe { libc::gettid() }).is_none());
        assert!(sample(0).is_none());
    }
}
