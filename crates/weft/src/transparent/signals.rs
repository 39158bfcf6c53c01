//! Signal handlers: hooked calls made inside one pass straight through.
//!
//! A handler runs on top of whatever the thread was doing — maybe inside
//! a hook that holds the registrations lock, maybe between the halves of
//! a context switch — and with its signal blocked in the *OS thread's*
//! mask. A hooked call there must not park (the carrier would run other
//! virtual threads with the handler's frame half done and the signal
//! blocked), allocate or take a lock (the interrupted code may hold it).
//!
//! So `sigaction`, `signal`, `bsd_signal` and `sysv_signal` are hooked: a
//! program's handler is installed as a small wrapper that records, per
//! thread, the frame of the innermost handler running, and calls the
//! program's function. [`in_handler`] is true while the caller's stack
//! pointer is below that frame; the hooks then go to the kernel as on an
//! OS thread. The check costs one thread-local read, made only on the
//! virtual-thread path (an OS thread's calls never look at it), and where
//! a lock would be taken. A handler that leaves by `siglongjmp` leaves
//! the frame recorded, but a call made from above it (any caller after
//! the jump, on the same stack) is not below it, so it parks again.
//!
//! `sigaction` reports the program's own handler, never the wrapper.
//! `SIGURG` is Weft's stack-sampling signal (`sample.rs`): once Weft's
//! handler is installed, a program's `sigaction(SIGURG, …)` only records
//! the program's handler, which Weft's calls for every `SIGURG` that is
//! not a sampling request ([`chain_signal`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};

use libc::{c_int, c_void, sighandler_t, siginfo_t};

use super::sys::raw;

/// The program's disposition of one signal, as it asked for it.
struct Entry {
    handler: AtomicUsize,
    flags: AtomicI32,
    /// Signals 1 to 64 of its `sa_mask`.
    mask: AtomicU64,
}

static TABLE: [Entry; 65] = [const {
    Entry {
        handler: AtomicUsize::new(libc::SIG_DFL),
        flags: AtomicI32::new(0),
        mask: AtomicU64::new(0),
    }
}; 65];

std::thread_local! {
    /// The address of the innermost running handler wrapper's frame on
    /// this thread, 0 if none.
    static FRAME: Cell<usize> = const { Cell::new(0) };
}

/// Whether the caller runs inside a signal handler the program installed
/// (through the hooked `sigaction`/`signal`).
#[inline]
pub(crate) fn in_handler() -> bool {
    let f = FRAME.with(Cell::get);
    if f == 0 {
        return false;
    }
    let here = 0u8;
    (&here as *const u8 as usize) < f
}

fn entry(sig: c_int) -> Option<&'static Entry> {
    if sig == libc::SIGKILL || sig == libc::SIGSTOP {
        return None;
    }
    usize::try_from(sig)
        .ok()
        .filter(|&s| s >= 1)
        .and_then(|s| TABLE.get(s))
}

/// glibc's `sigaction` (the next definition after this executable's).
///
/// # Safety
///
/// As `sigaction(2)`: `new` null or valid, `old` null or writable.
pub(crate) unsafe fn real_sigaction(
    sig: c_int,
    new: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let Some(next) = crate::libc_next::SIGACTION.resolve() else {
        super::sys::set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: forwarded (the caller's contract).
    unsafe { next(sig, new, old) }
}

/// Whether `h` is the wrapper the hook installs for a program's handler.
pub(crate) fn is_signal_wrapper(h: sighandler_t) -> bool {
    h == wrapper as *const () as sighandler_t
}

/// Calls the program's handler `h` for `sig` with the frame recorded.
///
/// # Safety
///
/// `h` is a handler the program installed with `flags`; the arguments
/// are the kernel's.
unsafe fn call_program(h: usize, flags: c_int, sig: c_int, info: *mut siginfo_t, ctx: *mut c_void) {
    let here = 0u8;
    let prev = FRAME.with(|f| f.replace(&here as *const u8 as usize));
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: installed with SA_SIGINFO: a three-argument handler.
        let f = unsafe {
            std::mem::transmute::<usize, extern "C" fn(c_int, *mut siginfo_t, *mut c_void)>(h)
        };
        f(sig, info, ctx);
    } else {
        // SAFETY: installed without SA_SIGINFO: a one-argument handler.
        let f = unsafe { std::mem::transmute::<usize, extern "C" fn(c_int)>(h) };
        f(sig);
    }
    FRAME.with(|f| f.set(prev));
    // Keep `here` (and so the recorded frame) alive across the call.
    std::hint::black_box(&here);
}

/// The handler installed in the kernel for every handler the program
/// installs: calls the program's.
extern "C" fn wrapper(sig: c_int, info: *mut siginfo_t, ctx: *mut c_void) {
    let Some(e) = entry(sig) else { return };
    let h = e.handler.load(Ordering::Acquire);
    let flags = e.flags.load(Ordering::Relaxed);
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        return; // replaced meanwhile
    }
    if flags & libc::SA_RESETHAND != 0 {
        // The kernel reset its own disposition on delivery.
        e.handler.store(libc::SIG_DFL, Ordering::Release);
    }
    // SAFETY: the program installed `h` with `flags`; the kernel's args.
    unsafe { call_program(h, flags, sig, info, ctx) };
}

/// For Weft's `SIGURG` handler: runs the program's handler of `sig` (if
/// it installed one) for a signal that is not Weft's, with the program's
/// `sa_mask` blocked as the kernel would have.
///
/// # Safety
///
/// Called from the signal handler of `sig`, with the kernel's arguments.
pub(crate) unsafe fn chain_signal(sig: c_int, info: *mut siginfo_t, ctx: *mut c_void) {
    let Some(e) = entry(sig) else { return };
    let h = e.handler.load(Ordering::Acquire);
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        return; // SIGURG's default is to ignore it
    }
    let flags = e.flags.load(Ordering::Relaxed);
    if flags & libc::SA_RESETHAND != 0 {
        e.handler.store(libc::SIG_DFL, Ordering::Release);
    }
    let mask = e.mask.load(Ordering::Relaxed);
    let mut old = 0u64;
    if mask != 0 {
        raw!(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            &mask as *const u64,
            &mut old as *mut u64,
            8usize
        );
    }
    // SAFETY: the program installed `h` with `flags`; the kernel's args.
    unsafe { call_program(h, flags, sig, info, ctx) };
    if mask != 0 {
        raw!(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &old as *const u64,
            0usize,
            8usize
        );
    }
}

fn record(e: &Entry, a: &libc::sigaction) {
    // SAFETY: a sigset_t is at least 8 bytes; its first word holds
    // signals 1 to 64.
    let mask = unsafe { std::ptr::read_unaligned(&a.sa_mask as *const _ as *const u64) };
    e.flags.store(a.sa_flags, Ordering::Relaxed);
    e.mask.store(mask, Ordering::Relaxed);
    e.handler.store(a.sa_sigaction, Ordering::Release);
}

/// What `e` says, as a `sigaction` (for `old`).
fn recorded(e: &Entry, out: &mut libc::sigaction) {
    out.sa_sigaction = e.handler.load(Ordering::Acquire);
    out.sa_flags = e.flags.load(Ordering::Relaxed);
    let mask = e.mask.load(Ordering::Relaxed);
    // SAFETY: as in `record`.
    unsafe { std::ptr::write_unaligned(&mut out.sa_mask as *mut _ as *mut u64, mask) };
}

/// # Safety
/// libc's `sigaction(2)` contract.
///
/// A program's handler is installed as [`wrapper`], which calls it (module
/// docs); the old disposition reported is the program's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let Some(e) = entry(sig) else {
        // SAFETY: forwarded.
        return unsafe { real_sigaction(sig, act, old) };
    };
    if sig == libc::SIGURG && crate::sigchain::sampler_installed() {
        // Weft's sampling handler stays; the program's is recorded and
        // called for the program's own SIGURGs.
        if !old.is_null() {
            // SAFETY: a non-null `old` is writable (sigaction's contract).
            let o = unsafe { &mut *old };
            // SAFETY: an all-zero sigaction is valid.
            *o = unsafe { std::mem::zeroed() };
            recorded(e, o);
        }
        if !act.is_null() {
            // SAFETY: a non-null `act` is valid.
            record(e, unsafe { &*act });
        }
        return 0;
    }
    // SAFETY: an all-zero sigaction is valid.
    let mut prev: libc::sigaction = unsafe { std::mem::zeroed() };
    recorded(e, &mut prev);
    let r = if act.is_null() {
        // SAFETY: forwarded.
        unsafe { real_sigaction(sig, act, old) }
    } else {
        // SAFETY: a non-null `act` is valid.
        let a = unsafe { *act };
        record(e, &a);
        let r = if a.sa_sigaction == libc::SIG_DFL || a.sa_sigaction == libc::SIG_IGN {
            // SAFETY: forwarded.
            unsafe { real_sigaction(sig, act, old) }
        } else {
            let mut w = a;
            w.sa_sigaction = wrapper as *const () as sighandler_t;
            w.sa_flags |= libc::SA_SIGINFO;
            // SAFETY: forwarded, with the wrapper as the handler.
            unsafe { real_sigaction(sig, &w, old) }
        };
        if r != 0 {
            record(e, &prev);
        }
        r
    };
    if r == 0 && !old.is_null() {
        // SAFETY: filled by the kernel (sigaction's contract).
        let o = unsafe { &mut *old };
        if is_signal_wrapper(o.sa_sigaction) {
            o.sa_sigaction = prev.sa_sigaction;
            o.sa_flags = prev.sa_flags;
            o.sa_mask = prev.sa_mask;
        }
    }
    r
}

/// `signal` with the given flags and the signal itself masked or not.
fn set_handler(sig: c_int, h: sighandler_t, flags: c_int, mask_self: bool) -> sighandler_t {
    // SAFETY: an all-zero sigaction is valid; sigemptyset/sigaddset on it.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = h;
    sa.sa_flags = flags;
    // SAFETY: as above.
    unsafe {
        libc::sigemptyset(&mut sa.sa_mask);
        if mask_self && libc::sigaddset(&mut sa.sa_mask, sig) < 0 {
            return libc::SIG_ERR;
        }
    }
    // SAFETY: an all-zero sigaction is valid.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both structs are ours.
    if unsafe { sigaction(sig, &sa, &mut old) } < 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

/// # Safety
/// libc's `signal(2)` contract (glibc's BSD semantics: `SA_RESTART`, the
/// signal masked while its handler runs).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn signal(sig: c_int, h: sighandler_t) -> sighandler_t {
    set_handler(sig, h, libc::SA_RESTART, true)
}

/// # Safety
/// glibc's `bsd_signal(3)` contract: `signal`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsd_signal(sig: c_int, h: sighandler_t) -> sighandler_t {
    set_handler(sig, h, libc::SA_RESTART, true)
}

/// # Safety
/// glibc's `sysv_signal(3)` contract (`SA_RESETHAND | SA_NODEFER`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sysv_signal(sig: c_int, h: sighandler_t) -> sighandler_t {
    set_handler(sig, h, libc::SA_RESETHAND | libc::SA_NODEFER, false)
}

/// What the stack sampler borrows from these hooks (`sigchain`).
static SIGCHAIN: crate::sigchain::Hooks = crate::sigchain::Hooks {
    real_sigaction,
    is_wrapper: is_signal_wrapper,
    chain: chain_signal,
};

extern "C" fn register_sigchain() {
    crate::sigchain::register(&SIGCHAIN);
}

/// Registered before `main` (an `.init_array` constructor), before any
/// runtime can install the sampler.
#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_SIGCHAIN: extern "C" fn() = register_sigchain;
