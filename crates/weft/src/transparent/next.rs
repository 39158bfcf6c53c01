//! libc's own functions of the hooked names: what a hook calls when Weft
//! has nothing to wait for, so that the call is exactly libc's.
//!
//! # Cancellation points
//!
//! POSIX makes the blocking calls (`read`, `recv`, `connect`, `accept`,
//! `poll`, `select`, `nanosleep`, `waitpid`, `close`, …) *cancellation
//! points*: an OS thread blocked in one, or entering one, with a
//! `pthread_cancel` pending is cancelled there (glibc unwinds it from its
//! wrapper). A raw system call is no cancellation point, so a hook that
//! issued one would leave a cancelled C thread blocked for ever. Every call
//! a hook does not wait for itself — on an OS thread, a descriptor Weft does
//! not manage, a sleep, a `poll`, a `waitpid` — therefore goes to libc's
//! wrapper, found here with `dlsym(RTLD_NEXT)`, and an OS thread's wait on a
//! socket Weft made non-blocking waits in libc's `ppoll`. Those hooks are
//! `extern "C-unwind"` and hold nothing with a destructor across the call
//! (glibc's forced unwind passes through their frames). Virtual threads are
//! not cancellation targets: `pthread_cancel` is for OS threads.
//!
//! The addresses are resolved by an `.init_array` constructor before
//! `main`: a hook may first run inside a signal handler, where `dlsym` (it
//! takes the loader's lock and may allocate) must not be called. Until then,
//! or if one is missing, the hooks use raw system calls as before.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{
    c_int, c_uint, c_void, clockid_t, epoll_event, fd_set, iovec, msghdr, nfds_t, pid_t, pollfd,
    sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec, timeval, useconds_t,
};

/// One libc function of C type `F` (an `unsafe extern "C-unwind" fn`
/// pointer): its name and, once resolved, its address.
pub(super) struct Next<F> {
    addr: AtomicUsize,
    name: &'static CStr,
    ty: PhantomData<F>,
}

impl<F: Copy> Next<F> {
    /// # Safety
    ///
    /// `F` is a function pointer type matching the C signature of libc's
    /// function `name`.
    pub(super) const unsafe fn new(name: &'static CStr) -> Self {
        assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>());
        Self {
            addr: AtomicUsize::new(0),
            name,
            ty: PhantomData,
        }
    }

    /// The function, `None` while it is not (yet) known.
    pub(super) fn get(&self) -> Option<F> {
        let p = self.addr.load(Ordering::Relaxed);
        // SAFETY: a non-zero address is libc's function `name`, whose C
        // signature `F` is (`new`'s contract); `F` is pointer-sized.
        (p != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&p) })
    }

    /// The function, looked up now if it is not known yet. Not in a signal
    /// handler (`dlsym`).
    pub(super) fn resolve(&self) -> Option<F> {
        if self.addr.load(Ordering::Relaxed) == 0 {
            // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
            let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
            self.addr.store(p, Ordering::Relaxed);
        }
        self.get()
    }
}

macro_rules! functions {
    ($($s:ident = $n:literal: fn($($t:ty),* $(,)?) -> $r:ty;)*) => {
        $(
            pub(super) static $s: Next<unsafe extern "C-unwind" fn($($t),*) -> $r> =
                // SAFETY: the signature is libc's for the function of this
                // name (as the `libc` crate declares it).
                unsafe { Next::new($n) };
        )*
        extern "C" fn resolve_all() {
            $($s.resolve();)*
        }
    };
}

functions! {
    READ = c"read": fn(c_int, *mut c_void, size_t) -> ssize_t;
    WRITE = c"write": fn(c_int, *const c_void, size_t) -> ssize_t;
    READV = c"readv": fn(c_int, *const iovec, c_int) -> ssize_t;
    WRITEV = c"writev": fn(c_int, *const iovec, c_int) -> ssize_t;
    RECV = c"recv": fn(c_int, *mut c_void, size_t, c_int) -> ssize_t;
    RECVFROM = c"recvfrom":
        fn(c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t;
    RECVMSG = c"recvmsg": fn(c_int, *mut msghdr, c_int) -> ssize_t;
    SEND = c"send": fn(c_int, *const c_void, size_t, c_int) -> ssize_t;
    SENDTO = c"sendto":
        fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t;
    SENDMSG = c"sendmsg": fn(c_int, *const msghdr, c_int) -> ssize_t;
    CONNECT = c"connect": fn(c_int, *const sockaddr, socklen_t) -> c_int;
    ACCEPT = c"accept": fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
    ACCEPT4 = c"accept4": fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
    POLL = c"poll": fn(*mut pollfd, nfds_t, c_int) -> c_int;
    PPOLL = c"ppoll": fn(*mut pollfd, nfds_t, *const timespec, *const sigset_t) -> c_int;
    SELECT = c"select": fn(c_int, *mut fd_set, *mut fd_set, *mut fd_set, *mut timeval) -> c_int;
    EPOLL_WAIT = c"epoll_wait": fn(c_int, *mut epoll_event, c_int, c_int) -> c_int;
    EPOLL_PWAIT = c"epoll_pwait":
        fn(c_int, *mut epoll_event, c_int, c_int, *const sigset_t) -> c_int;
    NANOSLEEP = c"nanosleep": fn(*const timespec, *mut timespec) -> c_int;
    CLOCK_NANOSLEEP = c"clock_nanosleep":
        fn(clockid_t, c_int, *const timespec, *mut timespec) -> c_int;
    USLEEP = c"usleep": fn(useconds_t) -> c_int;
    SLEEP = c"sleep": fn(c_uint) -> c_uint;
    CLOSE = c"close": fn(c_int) -> c_int;
    WAITPID = c"waitpid": fn(pid_t, *mut c_int, c_int) -> pid_t;
    CLOCK_GETTIME = c"clock_gettime": fn(clockid_t, *mut timespec) -> c_int;
    GETRANDOM = c"getrandom": fn(*mut c_void, size_t, c_uint) -> ssize_t;
    GETTIMEOFDAY = c"gettimeofday": fn(*mut timeval, *mut c_void) -> c_int;
    TIME = c"time": fn(*mut libc::time_t) -> libc::time_t;
    PTHREAD_CREATE = c"pthread_create": fn(
        *mut libc::pthread_t,
        *const libc::pthread_attr_t,
        extern "C" fn(*mut c_void) -> *mut c_void,
        *mut c_void,
    ) -> c_int;
}

#[used]
#[unsafe(link_section = ".init_array")]
static RESOLVE_ALL: extern "C" fn() = resolve_all;
