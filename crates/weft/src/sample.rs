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
//! Weft's requests are queued with `rt_tgsigqueueinfo`, tagged
//! (`SI_QUEUE` and a value of Weft's), so its handler tells them from the
//! program's own `SIGURG`s. With the `transparent` feature, the hooked
//! `sigaction` keeps Weft's handler installed and records the program's,
//! which Weft's handler calls for every `SIGURG` that is not a request;
//! a program's handler installed before Weft's first sample is kept the
//! same way. Without it, if `SIGURG` already has a handler when Weft
//! first samples, Weft leaves it alone and takes no samples, and if the
//! program replaces Weft's handler later Weft notices (each sample reads
//! the disposition first) and stops sending. `WEFT_SAMPLE_STACKS=0`
//! turns sampling off.
//!
//! Every wait of the sampler is bounded: [`SAMPLE_TIMEOUT`] for the
//! handler to start, `CLAIMED_TIMEOUT` more for it to finish; a handler
//! stuck past that (under a handler of the program's that interrupted it,
//! say) is abandoned without touching the slot it may still write (see
//! [`sample`]).

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

/// How much longer it waits once the handler has claimed the request
/// (the unwind itself): past this the request is abandoned (see
/// [`sample`]).
const CLAIMED_TIMEOUT: Duration = Duration::from_millis(100);

const SIGNAL: libc::c_int = libc::SIGURG;

// Slot states. The sampler owns the slot (under `sampler()`) from IDLE to
// REQUESTED and from DONE back to IDLE; the handler owns it from REQUESTED
// (which it claims with a compare-exchange, so a late signal after the
// sampler withdrew finds IDLE and does nothing) through WRITING to DONE.
// A request the handler claimed but did not finish in time is abandoned
// in WRITING: the slot stays the handler's until it stores DONE, and the
// next sampler resets it then (until then samples answer `None`).
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

/// One sampler at a time (the slot is single). Per process copy: a `fork`
/// child must not wait on a lock the parent's monitor held at the fork
/// (up to 200 ms a sample), and holding its own it resets the slot a
/// handler of the parent's may have left mid-write ([`sample`]).
fn sampler() -> &'static Mutex<()> {
    static SAMPLER: crate::fork::PerProcess<Mutex<()>> = crate::fork::PerProcess::new();
    SAMPLER.get_or_init(|| Mutex::new(()))
}

/// The process copy (`fork.rs`) that last used [`SLOT`].
static SLOT_GENERATION: AtomicU32 = AtomicU32::new(0);

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

/// `sigaction(2)` itself, not the `transparent` feature's hook of it.
///
/// # Safety
///
/// As `sigaction(2)`: `new` null or valid, `old` null or writable.
unsafe fn os_sigaction(
    sig: libc::c_int,
    new: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> libc::c_int {
    match crate::sigchain::hooks() {
        // SAFETY: the caller's contract (the real sigaction).
        Some(h) => unsafe { (h.real_sigaction)(sig, new, old) },
        // SAFETY: the caller's contract.
        None => unsafe { libc::sigaction(sig, new, old) },
    }
}

/// Whether a handler found installed for `SIGURG` may be replaced by
/// Weft's: the default or ignored disposition, or (with `transparent`) a
/// handler the program installed through the hooked `sigaction`, which
/// Weft's handler then calls for the program's own signals.
fn replaceable(h: libc::sighandler_t) -> bool {
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        return true;
    }
    crate::sigchain::hooks().is_some_and(|hooks| (hooks.is_wrapper)(h))
}

/// Installs the handler unless someone else handles the signal.
fn install() -> bool {
    // SAFETY: plain sigaction calls with zeroed, then filled, structs; we
    // read the old disposition first and only replace one `replaceable`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if os_sigaction(SIGNAL, std::ptr::null(), &mut old) != 0 {
            return false;
        }
        if !replaceable(old.sa_sigaction) {
            return false;
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        // SA_RESTART: calls the kernel can restart are restarted.
        // SA_ONSTACK: a deep stack close to its guard page unwinds from the
        // alternate stack, where the thread has one.
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        // The `transparent` hook of `sigaction` keeps it there from now on
        // and records the program's handler, which ours calls for every
        // `SIGURG` that is not a sampling request.
        crate::sigchain::set_sampler(true);
        let ok = os_sigaction(SIGNAL, &sa, std::ptr::null_mut()) == 0;
        if !ok {
            crate::sigchain::set_sampler(false);
        }
        ok
    }
}

/// Whether Weft's handler is still the one installed: a program that
/// replaced it behind Weft's back (a raw `rt_sigaction`, or any
/// `sigaction` without the `transparent` hooks) gets no more sampling
/// signals, and sampling stops.
fn still_installed() -> bool {
    // SAFETY: a query into a zeroed struct.
    unsafe {
        let mut cur: libc::sigaction = std::mem::zeroed();
        os_sigaction(SIGNAL, std::ptr::null(), &mut cur) == 0
            && cur.sa_sigaction == on_signal as *const () as libc::sighandler_t
    }
}

/// `si_value` of Weft's requests: tells them from the program's `SIGURG`s
/// (out-of-band data, `pthread_kill`), which go to the program's handler.
fn request_tag() -> usize {
    &SLOT as *const Slot as usize
}

/// A `siginfo_t` as `rt_tgsigqueueinfo` takes it (the `_rt` layout).
#[repr(C)]
struct QueueInfo {
    signo: libc::c_int,
    errno: libc::c_int,
    code: libc::c_int,
    _pad: libc::c_int,
    pid: libc::pid_t,
    uid: libc::uid_t,
    value: usize,
    _rest: [u64; 12],
}

/// Sends Weft's request to thread `tid` of this process: `SIGURG` queued
/// with `SI_QUEUE` and [`request_tag`] as its value.
fn send_request(tid: i32) -> bool {
    // SAFETY: getpid/getuid have no preconditions.
    let (pid, uid) = unsafe { (libc::getpid(), libc::getuid()) };
    let info = QueueInfo {
        signo: SIGNAL,
        errno: 0,
        code: libc::SI_QUEUE,
        _pad: 0,
        pid,
        uid,
        value: request_tag(),
        _rest: [0; 12],
    };
    let p = &info as *const QueueInfo as usize;
    // SAFETY: rt_tgsigqueueinfo to a thread of our own process (any code
    // is allowed to oneself) with a signal whose handler is installed; the
    // kernel only reads `info`.
    let r = unsafe {
        raw_syscall4(
            libc::SYS_rt_tgsigqueueinfo,
            pid as usize,
            tid as usize,
            SIGNAL as usize,
            p,
        )
    };
    r == 0
}

/// Whether `info` is one of Weft's requests (see [`send_request`]).
///
/// # Safety
///
/// `info` is null or the handler's valid `siginfo_t`.
unsafe fn is_request(info: *const libc::siginfo_t) -> bool {
    if info.is_null() {
        return false;
    }
    // SAFETY: the kernel's siginfo for this signal.
    unsafe {
        (*info).si_code == libc::SI_QUEUE
            && (*info).si_pid() == libc::getpid()
            && (*info).si_value().sival_ptr as usize == request_tag()
    }
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: __errno_location is the calling thread's errno; async-signal-safe.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    // A request of the parent's left in the slot by a `fork` is not this
    // copy's to answer (its sampler is gone): only a request made since
    // this copy's first sample, which sets `SLOT_GENERATION`, is claimed.
    if SLOT_GENERATION.load(Ordering::Acquire) == crate::fork::generation()
        && SLOT.target.load(Ordering::Acquire) == me
        && SLOT
            .state
            .compare_exchange(REQUESTED, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    {
        if SLOT.target.load(Ordering::Acquire) == me {
            answer(ctx);
        } else {
            // The request we read the target of was withdrawn and a new
            // one made for another thread: give it back.
            SLOT.state.store(REQUESTED, Ordering::Release);
        }
    }
    // SAFETY: `info` is the kernel's (SA_SIGINFO).
    if !unsafe { is_request(info) } {
        // The program's own SIGURG (a standard signal: one that arrived
        // with a request pending merged with it, so the request is
        // answered above and the program's handler runs too).
        if let Some(h) = crate::sigchain::hooks() {
            // SAFETY: the kernel's arguments, forwarded.
            unsafe { (h.chain)(sig, info, ctx) };
        }
    }
    let _ = sig;
    // SAFETY: as above; restores the interrupted code's errno.
    unsafe { *libc::__errno_location() = errno };
}

/// The handler's work on a claimed request: the interrupted instruction
/// and the stack, into the slot, then DONE and a wake-up.
fn answer(ctx: *mut libc::c_void) {
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
    // A raw FUTEX_WAKE, not `libc::syscall`: with `transparent` that is
    // Weft's futex emulation, whose bucket spin lock the interrupted
    // thread may hold.
    // SAFETY: FUTEX_WAKE on a live, aligned u32; async-signal-safe.
    unsafe {
        raw_syscall4(
            libc::SYS_futex,
            SLOT.state.as_ptr() as usize,
            (libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG) as usize,
            i32::MAX as usize,
            0,
        );
    }
}

/// A system call with up to four arguments, issued inline where the
/// `transparent` feature may interpose `syscall(2)`: the kernel's result
/// (-errno on failure); `errno` is not touched.
///
/// # Safety
///
/// The arguments must be valid for system call `n`.
#[inline]
unsafe fn raw_syscall4(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> libc::c_long {
    #[cfg(target_arch = "x86_64")]
    {
        let r: libc::c_long;
        // SAFETY: the x86-64 Linux convention (number in rax, arguments in
        // rdi, rsi, rdx, r10; rcx and r11 clobbered); the caller's contract
        // for the arguments.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") n => r,
                in("rdi") a,
                in("rsi") b,
                in("rdx") c,
                in("r10") d,
                lateout("rcx") _,
                lateout("r11") _,
            );
        }
        r
    }
    #[cfg(target_arch = "aarch64")]
    {
        let r: libc::c_long;
        // SAFETY: the AArch64 Linux convention (number in x8, arguments
        // in x0..x3, result in x0); the caller's contract.
        unsafe {
            std::arch::asm!(
                "svc 0",
                in("x8") n,
                inlateout("x0") a as libc::c_long => r,
                in("x1") b,
                in("x2") c,
                in("x3") d,
            );
        }
        r
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // SAFETY: the caller's contract.
        let r = unsafe { libc::syscall(n, a, b, c, d) };
        // SAFETY: this thread's errno.
        if r < 0 {
            -(unsafe { *libc::__errno_location() }) as libc::c_long
        } else {
            r
        }
    }
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
/// `None` when sampling is off, `tid` is the caller itself or is gone, it
/// did not answer within [`SAMPLE_TIMEOUT`], or its handler did not
/// finish within [`CLAIMED_TIMEOUT`] more.
///
/// Every wait is bounded. A handler that claimed the request and then got
/// stuck (in the unwinder, or under a handler of the program's that
/// interrupted it) is abandoned: the slot is a static, so its late stores
/// land in memory that stays valid, and it stays the handler's (state
/// WRITING) until the handler stores DONE; meanwhile samples answer
/// `None` at once, and the first one after resets it.
pub(crate) fn sample(tid: i32) -> Option<Vec<usize>> {
    // SAFETY: gettid has no preconditions.
    if tid <= 0 || tid == unsafe { libc::gettid() } || !enabled() {
        return None;
    }
    let _one = sampler().lock().unpoison();
    let generation = crate::fork::generation();
    if SLOT_GENERATION.load(Ordering::Relaxed) != generation {
        // The first sample of a fork child: a request or a write of the
        // parent's left in the slot has no handler here to finish it, and
        // no handler of this copy runs before this sampler's request.
        SLOT.state.store(IDLE, Ordering::Relaxed);
        SLOT.target.store(0, Ordering::Relaxed);
        // Release: a handler that sees this generation (Acquire) sees the
        // slot reset.
        SLOT_GENERATION.store(generation, Ordering::Release);
    }
    match SLOT.state.load(Ordering::Acquire) {
        // An abandoned request whose handler has finished since.
        DONE => SLOT.state.store(IDLE, Ordering::Relaxed),
        // Still running: the slot is its own until it is done.
        WRITING => return None,
        _ => {}
    }
    if !still_installed() {
        return None;
    }
    SLOT.target.store(tid, Ordering::Relaxed);
    SLOT.len.store(0, Ordering::Relaxed);
    // Release: the handler's Acquire claim sees the target.
    SLOT.state.store(REQUESTED, Ordering::Release);
    let sent = send_request(tid);
    let start = Instant::now();
    if sent {
        loop {
            let s = SLOT.state.load(Ordering::Acquire);
            if s == DONE {
                break;
            }
            let waited = start.elapsed();
            if s == REQUESTED && waited >= SAMPLE_TIMEOUT {
                break;
            }
            if waited >= SAMPLE_TIMEOUT + CLAIMED_TIMEOUT {
                break; // claimed, and stuck
            }
            // WRITING: the handler is running; poll it every millisecond.
            let wait = if s == WRITING {
                Duration::from_millis(1)
            } else {
                SAMPLE_TIMEOUT - waited
            };
            futex_wait(&SLOT.state, s, wait);
        }
    }
    // Withdraw an unanswered request.
    if SLOT
        .state
        .compare_exchange(REQUESTED, IDLE, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        return None;
    }
    if SLOT.state.load(Ordering::Acquire) != DONE {
        return None; // claimed and not done in time: abandoned (above)
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

/// A raw `FUTEX_WAIT` (on a virtual thread too: the wait is short and
/// bounded, and the handler's wake is raw).
fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT on a live, aligned u32 with a valid timeout; the
    // kernel only reads both.
    unsafe {
        raw_syscall4(
            libc::SYS_futex,
            word.as_ptr() as usize,
            (libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG) as usize,
            expected as usize,
            &ts as *const libc::timespec as usize,
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
