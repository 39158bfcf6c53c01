//! Where OS threads started on a lowered carrier come from (`demote.rs`):
//! Weft's `pthread_create`, in place of libc's, and the *starter* thread
//! behind it.
//!
//! A new thread inherits its creator's nice value, and an unprivileged
//! process cannot lower it again. So a spare carrier started by a lowered
//! carrier, a core slot's new OS thread started by the lowered one that
//! left it, or a `std::thread::spawn` in the computation that was lowered
//! would run lowered for good. On an OS thread the monitor lowered
//! ([`lowered`], until [`exited`]) `pthread_create` hands the start to the
//! starter, an OS thread at the runtime's priority that the monitor starts
//! before it lowers anything ([`ready`]). The starter takes on the
//! caller's signal mask and CPU affinity for the call, what a new thread
//! inherits besides its priority; the caller waits for the result.
//!
//! A virtual thread that stays on its carrier (`thread/stay.rs`) starts its
//! OS threads itself, lowered: it may have changed other state the kernel
//! keeps per OS thread (capabilities, namespaces), which the starter does
//! not have. Anywhere else `pthread_create` is libc's, after one relaxed
//! load (no carrier is lowered) or a `gettid` and a look at a short list.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};

use crate::libc_next;
use crate::unpoison::Unpoison;

/// The arguments of one `pthread_create` carried out by the starter, and
/// where its result goes.
struct Request {
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
    mask: libc::sigset_t,
    affinity: Option<libc::cpu_set_t>,
    reply: mpsc::SyncSender<c_int>,
}

// SAFETY: the pointers are the caller's arguments to `pthread_create`,
// valid until it returns; the caller waits for the reply before
// returning, and the starter touches them only before it replies.
unsafe impl Send for Request {}

/// The starter thread's queue.
struct Starter(mpsc::Sender<Request>);

static STARTER: crate::fork::PerProcess<Option<Starter>> = crate::fork::PerProcess::new();

/// The OS threads lowered now (kernel thread ids): few, and looked at only
/// by a `pthread_create` while [`LOWERED_COUNT`] is not zero.
static LOWERED: Mutex<Vec<i32>> = Mutex::new(Vec::new());
static LOWERED_COUNT: AtomicUsize = AtomicUsize::new(0);

/// The monitor is about to lower OS thread `tid`.
pub(super) fn lowered(tid: i32) {
    let mut l = LOWERED.lock().unpoison();
    if !l.contains(&tid) {
        l.push(tid);
        LOWERED_COUNT.fetch_add(1, Ordering::SeqCst);
    }
}

/// Carrier OS thread `tid`, lowered or not, is done starting threads (it
/// is about to exit). One load unless some OS thread is lowered.
pub(super) fn exited(tid: i32) {
    if LOWERED_COUNT.load(Ordering::SeqCst) == 0 {
        return;
    }
    let mut l = LOWERED.lock().unpoison();
    if let Some(p) = l.iter().position(|&t| t == tid) {
        l.swap_remove(p);
        LOWERED_COUNT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Starts the starter if it is not running; false if it could not be
/// started (then nothing may be lowered).
pub(super) fn ready() -> bool {
    starter().is_some()
}

/// The starter of this process copy, started by the first call (the
/// monitor's, before it lowers a carrier); `None` if it could not be
/// started.
fn starter() -> Option<&'static Starter> {
    STARTER
        .get_or_init(|| {
            let (queue, requests) = mpsc::channel::<Request>();
            let started = std::thread::Builder::new()
                .name("weft-starter".into())
                .spawn(move || {
                    // Until the process ends: the sender is never dropped.
                    for req in requests {
                        let _ = req.reply.send(start_as_caller(&req));
                    }
                });
            started.ok().map(|_| Starter(queue))
        })
        .as_ref()
}

/// Starts the requested thread from this one (the starter, at the
/// runtime's own priority) with the caller's signal mask and affinity.
fn start_as_caller(req: &Request) -> c_int {
    let Some(create) = libc_next::PTHREAD_CREATE.resolve() else {
        return libc::EAGAIN;
    };
    // SAFETY: an empty set to fill, then masks and sets of this thread,
    // with valid pointers and sizes.
    unsafe {
        let mut own_mask: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, &req.mask, &mut own_mask);
        let mut own_set: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let moved = req.affinity.is_some_and(|set| {
            libc::sched_getaffinity(0, size, &mut own_set) == 0
                && libc::sched_setaffinity(0, size, &set) == 0
        });
        // SAFETY: libc's own call with the caller's arguments, which stay
        // valid until the caller returns (it waits for us).
        let r = create(req.thread, req.attr, req.start, req.arg);
        if moved {
            libc::sched_setaffinity(0, size, &own_set);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &own_mask, std::ptr::null_mut());
        r
    }
}

/// Whether a thread started here now must be started by the starter: the
/// monitor lowered this OS thread, and the code running on it is not a
/// virtual thread that stays.
fn lowered_here() -> bool {
    if LOWERED_COUNT.load(Ordering::Relaxed) == 0 {
        return false;
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    if !LOWERED.lock().unpoison().contains(&tid) {
        return false;
    }
    crate::thread::current_virtual().is_none_or(|t| !t.stays.load(Ordering::Relaxed))
}

/// libc's `pthread_create`, except on an OS thread the monitor lowered:
/// there the starter starts the thread, so that it does not inherit the
/// lowered priority (the module docs). Inside a simulation it is refused
/// (`sched/sim.rs`, with the `transparent` feature).
///
/// # Safety
/// libc's `pthread_create(3)` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> c_int {
    #[cfg(all(
        feature = "transparent",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    if super::sim::refuse_os_thread() {
        return libc::EPERM;
    }
    if lowered_here()
        && let Some(Some(s)) = STARTER.get()
    {
        // SAFETY: an empty set for the mask and one for the affinity,
        // filled by the calls with valid pointers and sizes.
        let (mask, affinity) = unsafe {
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut mask);
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            let ok = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
            (mask, (ok == 0).then_some(set))
        };
        let (reply, answer) = mpsc::sync_channel(1);
        let req = Request {
            thread,
            attr,
            start,
            arg,
            mask,
            affinity,
            reply,
        };
        // The starter never ends (its loop holds the only receiver), so the
        // send fails only in a process copy that lost it: there libc's own.
        if s.0.send(req).is_ok() {
            return answer.recv().unwrap_or(libc::EAGAIN);
        }
    }
    match libc_next::PTHREAD_CREATE.resolve() {
        // SAFETY: libc's own call, with the caller's arguments.
        Some(f) => unsafe { f(thread, attr, start, arg) },
        None => libc::EAGAIN,
    }
}
