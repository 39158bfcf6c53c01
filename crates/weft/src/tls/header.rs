//! The area's header and the thread-local that finds it: what a virtual
//! thread registered to run when it ends, the carrier it runs on, its stack.

use std::cell::Cell;

std::thread_local! {
    /// The header of the area the thread pointer points into; null on an OS
    /// thread (and on a virtual thread without an area). `const`, no
    /// destructor: one `%fs`-relative load, safe in a signal handler.
    pub(super) static AREA: Cell<*mut Header> = const { Cell::new(std::ptr::null_mut()) };
}

/// Whether the calling code runs on a thread-local area of its own (a
/// virtual thread with isolated thread-locals).
#[inline]
pub(crate) fn isolated() -> bool {
    !AREA.with(Cell::get).is_null()
}

/// Per-area bookkeeping, above the TCB copy.
#[repr(C)]
pub(crate) struct Header {
    /// `__cxa_thread_atexit_impl` registrations, newest first.
    pub(super) dtors: *mut Dtor,
    /// pthread key values set on this thread (`pthread_setspecific`).
    pub(super) keys: *mut Vec<(libc::pthread_key_t, *mut libc::c_void)>,
    /// The thread pointer of the carrier the area was made on (the OS
    /// thread that runs it: SIGSETXID's relay, `pthread_getattr_np`).
    pub(super) carrier_tp: usize,
    /// The thread's stack, `[stack_lo, stack_hi)` (`pthread_getattr_np`).
    pub(super) stack_lo: usize,
    pub(super) stack_hi: usize,
}

/// One `__cxa_thread_atexit_impl` registration.
pub(super) struct Dtor {
    pub(super) func: unsafe extern "C" fn(*mut libc::c_void),
    pub(super) obj: *mut libc::c_void,
    pub(super) next: *mut Dtor,
}

/// Bytes the header takes at the top of a stack slot.
pub(super) const HEADER: usize = 64;
const _: () = assert!(size_of::<Header>() <= HEADER);
