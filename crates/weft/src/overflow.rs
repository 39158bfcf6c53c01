//! Stack-overflow reporting for virtual threads.
//!
//! A virtual thread that runs off the end of its stack touches the guard
//! page at the bottom of its slot (see `stack.rs`). Our SIGSEGV/SIGBUS
//! handler runs on the carrier's alternate signal stack, recognises a
//! guard-page address, prints
//! `virtual thread '<name>' (#id) has overflowed its stack (<size>)` with
//! the two ways to a bigger stack, and aborts, like std does for OS threads. Any other fault is handed to the
//! handler that was installed before ours (std's own, or the default).

use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};

static PREV_SEGV: AtomicUsize = AtomicUsize::new(0);
static PREV_BUS: AtomicUsize = AtomicUsize::new(0);
static INSTALL: Once = Once::new();

/// Installs the handlers once per process.
pub(crate) fn install() {
    INSTALL.call_once(|| {
        for (sig, prev) in [(libc::SIGSEGV, &PREV_SEGV), (libc::SIGBUS, &PREV_BUS)] {
            // SAFETY: sigaction with a zeroed, then filled, struct; the old
            // action is stored in a static that lives forever.
            unsafe {
                let mut new: libc::sigaction = std::mem::zeroed();
                let mut old: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = handler as *const () as usize;
                new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut new.sa_mask);
                if libc::sigaction(sig, &new, &mut old) == 0 {
                    let boxed = Box::into_raw(Box::new(old));
                    prev.store(boxed as usize, Ordering::Release);
                }
            }
        }
    });
}

fn write_stderr(bytes: &[u8]) {
    // SAFETY: write(2) is async-signal-safe; the buffer is valid for its length.
    unsafe {
        libc::write(2, bytes.as_ptr().cast(), bytes.len());
    }
}

/// Formats `n` in decimal into `buf`, returning the digits (no allocation).
fn fmt_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    if let Some(size) = crate::stack::guard_hit(addr) {
        report_overflow(size);
        // SAFETY: abort is async-signal-safe.
        unsafe { libc::abort() };
    }
    chain(sig, info, ctx);
}

fn report_overflow(size: usize) {
    write_stderr(b"\nvirtual thread '");
    let mut id = 0u64;
    // The mounted thread's record is kept alive by its carrier while it
    // runs, and the faulting thread is that one.
    if let Some(inner) = crate::thread::current_virtual() {
        let t = crate::thread::Thread::peek_name_id(inner);
        write_stderr(t.0.unwrap_or("<unnamed>").as_bytes());
        id = t.1;
    } else {
        write_stderr(b"<unknown>");
    }
    let mut buf = [0u8; 20];
    write_stderr(b"' (#");
    write_stderr(fmt_u64(id, &mut buf));
    write_stderr(b") has overflowed its stack (");
    let (n, unit): (u64, &[u8]) = if size.is_multiple_of(1 << 20) {
        ((size >> 20) as u64, b" MiB")
    } else {
        ((size >> 10) as u64, b" KiB")
    };
    write_stderr(fmt_u64(n, &mut buf));
    write_stderr(unit);
    write_stderr(
        b"); give it more with WEFT_STACK_SIZE or weft::Builder::stack_size\n\
          fatal runtime error: stack overflow, aborting\n",
    );
}

fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = if sig == libc::SIGSEGV {
        &PREV_SEGV
    } else {
        &PREV_BUS
    };
    let p = prev.load(Ordering::Acquire) as *const libc::sigaction;
    // SAFETY: `p` is null or a leaked sigaction stored by `install`.
    let Some(old) = (unsafe { p.as_ref() }) else {
        reset_default(sig);
        return;
    };
    let h = old.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // Returning re-executes the faulting instruction, which then gets
        // the default action (core dump / termination).
        reset_default(sig);
    } else if old.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed as an SA_SIGINFO handler.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: the previous handler was installed as a plain handler.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

fn reset_default(sig: libc::c_int) {
    // SAFETY: restoring the default disposition of a signal.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &act, std::ptr::null_mut());
    }
}
