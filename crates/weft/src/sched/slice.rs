//! The time slice a carrier asks the kernel for (ARCHITECTURE.md, "Sharing
//! the cores").
//!
//! # Why
//!
//! Linux's fair scheduler (EEVDF, since 6.6) gives each runnable thread a
//! *virtual deadline*: its eligible time plus its slice divided by its
//! weight. It runs the eligible thread with the earliest deadline, and a
//! thread that wakes preempts the running one if its own deadline is
//! earlier. The default slice, 0.75 ms times one plus the log2 of the
//! CPUs (1.4 ms on two), suits a thread that computes. A carrier does not
//! compute for long: it runs a virtual thread until it parks, hands work
//! to another carrier, sleeps, and is woken again microseconds later.
//! Beside a CPU-bound process a woken carrier with the default slice often
//! waited for the rest of that process's slice before it ran.
//!
//! Since Linux 6.12 a thread may ask for its own slice: the
//! `sched_runtime` field of `sched_setattr(2)` for a fair policy, clamped
//! by the kernel to 0.1–100 ms. A shorter slice means an earlier deadline,
//! so the woken carrier preempts the neighbour at once. The share of the
//! CPU each thread gets is its weight's (the nice value) and does not
//! change; only *when* the carrier runs does. Kernels before 6.12 accept
//! the field and ignore it.
//!
//! Measured beside two `yes` processes on two CPUs (docs/bench.md, "A
//! carrier's time slice"): a cross-carrier ping-pong took 6.6–7.9 µs per
//! round trip at the median with the default slice, 4.4–4.6 µs with
//! 0.1 ms, where `std` threads took 3.4–3.9 µs.
//!
//! # Rules
//!
//! 1. **The request keeps everything else.** [`request`] reads the
//!    thread's attributes (`sched_getattr`) and writes them back with the
//!    slice, so the policy and the nice value stay as they were. Only a
//!    `SCHED_OTHER` or `SCHED_BATCH` thread at a nice value of 0 or more
//!    asks: a real-time or deadline policy set on the process is not ours
//!    to touch, `SCHED_IDLE` has no deadline to gain, and rule 3 would
//!    change what a negative nice value passes on.
//! 2. **A carrier asks once, when it starts**, before it runs any thread
//!    (`run_carrier`). A failure is printed once per process and the
//!    carriers run with the kernel's default slice.
//! 3. **Nothing started on a carrier keeps its slice.** A new thread or
//!    process inherits its creator's slice: a `std::thread::spawn` or a
//!    `Command` in a virtual thread would run with the carrier's, and so
//!    would everything that process runs after `exec`. The request sets
//!    `SCHED_FLAG_RESET_ON_FORK`, with which the kernel gives a child the
//!    default slice (measured: 1.4 ms in a thread and in an exec'd child,
//!    where without the flag both had 0.1 ms). The flag also resets a
//!    negative nice value to 0 and a real-time policy to `SCHED_OTHER` in
//!    the child; neither applies to a carrier that asks (rule 1), and a
//!    positive nice value is inherited as before. What remains visible is
//!    the flag itself: `sched_getscheduler(0)` on a carrier (from a
//!    virtual thread) returns `SCHED_OTHER | SCHED_RESET_ON_FORK`.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The time slice a carrier asks for by default
/// (`RuntimeBuilder::carrier_time_slice`): the shortest the kernel grants.
pub(crate) const DEFAULT: Duration = Duration::from_micros(100);

/// The range the kernel grants (shorter or longer requests are clamped by
/// it; `RuntimeBuilder::build` refuses them instead).
pub(crate) const MIN: Duration = Duration::from_micros(100);
pub(crate) const MAX: Duration = Duration::from_millis(100);

/// `struct sched_attr` (`SCHED_ATTR_SIZE_VER1`, Linux 5.3).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// The one flag the request sets (rule 3). The others ask for something
/// and are left clear: keeping the parameters would drop the slice, and
/// the clamp flags would rewrite the thread's utilisation clamps.
const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// Asks the kernel for `slice` (not zero) as the calling thread's time
/// slice, for its children to start with the default (rule 3). Ok(false)
/// without a change if rule 1 says the thread does not ask.
pub(crate) fn request(slice: Duration) -> io::Result<bool> {
    let mut attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        ..SchedAttr::default()
    };
    // SAFETY: `attr` is a writable `sched_attr` of the size passed; the
    // kernel writes at most that many bytes. Raw system calls: glibc has
    // no wrappers before 2.41, and Weft's own hooks are not wanted here.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            attr.size,
            0u32,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let fair = attr.sched_policy == libc::SCHED_OTHER as u32
        || attr.sched_policy == libc::SCHED_BATCH as u32;
    if !fair || attr.sched_nice < 0 {
        return Ok(false);
    }
    attr.size = std::mem::size_of::<SchedAttr>() as u32;
    attr.sched_flags = SCHED_FLAG_RESET_ON_FORK;
    attr.sched_runtime = slice.as_nanos().min(u64::MAX as u128) as u64;
    attr.sched_deadline = 0;
    attr.sched_period = 0;
    // SAFETY: a complete `sched_attr` read from this thread, with the slice
    // and the flag changed; the kernel reads `size` bytes of it.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0u32) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(true)
}

/// Carries out rule 2 for a starting carrier: asks for `slice` (zero:
/// nothing to ask) and prints the first failure in the process.
pub(crate) fn request_for_carrier(slice: Duration) {
    if slice.is_zero() {
        return;
    }
    if let Err(e) = request(slice) {
        static TOLD: AtomicBool = AtomicBool::new(false);
        if !TOLD.swap(true, Ordering::Relaxed) {
            eprintln!(
                "weft: carriers cannot ask for a time slice of {} µs ({e}); they run with \
                 the kernel's default (WEFT_CARRIER_TIME_SLICE=0 silences this)",
                slice.as_micros()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attribute_struct_has_the_kernels_size() {
        // SCHED_ATTR_SIZE_VER1
        assert_eq!(std::mem::size_of::<SchedAttr>(), 56);
    }
}
