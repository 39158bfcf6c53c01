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
    c_char, c_int, c_uint, c_void, clockid_t, epoll_event, fd_set, iovec, msghdr, nfds_t, pid_t,
    pollfd, sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec, timeval, useconds_t,
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

macro_rules! hooks {
    (
        counted: [$($counted:ident),* $(,)?];
        $($file:literal {
            $($name:ident $(: $s:ident = fn($($t:ty),* $(,)?) -> $r:ty)? $(, parks $c:ident)?;)*
        })*
    ) => {
        $($($(
            pub(super) static $s: Next<unsafe extern "C-unwind" fn($($t),*) -> $r> =
                // SAFETY: the signature is libc's for the function of this
                // name (as the `libc` crate declares it).
                unsafe { Next::new(cstr(concat!(stringify!($name), "\0"))) };
        )?)*)*

        extern "C" fn resolve_all() {
            $($($($s.resolve();)?)*)*
        }

        /// Every function Weft defines in place of libc's, with the file
        /// that defines it.
        pub(super) const HOOKED: &[(&str, &str)] = &[$($((stringify!($name), $file),)*)*];

        /// Names of the calls counted in [`parks`](super::parks), in its
        /// order.
        pub const CALLS: [&str; [$(stringify!($counted)),*].len()] = [$(stringify!($counted)),*];

        /// The index in [`CALLS`] that a park in `call` counts in: a
        /// hook's name (its row's `parks`), or a name of `CALLS` itself.
        pub(super) fn counter(call: &str) -> Option<usize> {
            let base = match call {
                $($($(stringify!($name) => stringify!($c),)?)*)*
                c => c,
            };
            CALLS.iter().position(|c| *c == base)
        }

        // Every row's counter is one of `CALLS` (a compile error if not).
        $($($(const _: () = assert!(position(&CALLS, stringify!($c)).is_some());)?)*)*
    };
}

/// `s` (NUL-terminated, no other NUL) as a `CStr`, at compile time.
const fn cstr(s: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(s.as_bytes()) {
        Ok(c) => c,
        Err(_) => panic!("a hook's name has a NUL"),
    }
}

/// The index of `s` in `list`, at compile time.
const fn position(list: &[&str], s: &str) -> Option<usize> {
    let mut i = 0;
    while i < list.len() {
        let (a, b) = (list[i].as_bytes(), s.as_bytes());
        if a.len() == b.len() {
            let mut k = 0;
            while k < a.len() && a[k] == b[k] {
                k += 1;
            }
            if k == a.len() {
                return Some(i);
            }
        }
        i += 1;
    }
    None
}

// The hook table: one row per function Weft defines in place of libc's,
// under the file that defines it. A row with a signature also makes
// `next::NAME`, libc's own function (resolved before `main`); `parks x`
// counts the row's parks as `x` of `CALLS`. Adding a hook: one row here,
// the function in its file, a test (`tests-transparent/tests/hook_table.rs`
// checks the rows against the definitions and the module docs' list).
hooks! {
    counted: [
        read, write, recv, send, connect, accept, poll, select, epoll_wait, nanosleep,
        clock_nanosleep, usleep, sleep, getaddrinfo, readv, writev, waitpid, futex,
    ];
    "hooks/io.rs" {
        read: READ = fn(c_int, *mut c_void, size_t) -> ssize_t, parks read;
        write: WRITE = fn(c_int, *const c_void, size_t) -> ssize_t, parks write;
        readv: READV = fn(c_int, *const iovec, c_int) -> ssize_t, parks readv;
        writev: WRITEV = fn(c_int, *const iovec, c_int) -> ssize_t, parks writev;
        recv: RECV = fn(c_int, *mut c_void, size_t, c_int) -> ssize_t, parks recv;
        recvfrom: RECVFROM =
            fn(c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t,
            parks recv;
        recvmsg: RECVMSG = fn(c_int, *mut msghdr, c_int) -> ssize_t, parks recv;
        send: SEND = fn(c_int, *const c_void, size_t, c_int) -> ssize_t, parks send;
        sendto: SENDTO =
            fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t,
            parks send;
        sendmsg: SENDMSG = fn(c_int, *const msghdr, c_int) -> ssize_t, parks send;
    }
    "hooks/connect.rs" {
        connect: CONNECT = fn(c_int, *const sockaddr, socklen_t) -> c_int, parks connect;
        accept: ACCEPT = fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int, parks accept;
        accept4: ACCEPT4 = fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int,
            parks accept;
    }
    "hooks/poll.rs" {
        poll: POLL = fn(*mut pollfd, nfds_t, c_int) -> c_int, parks poll;
        ppoll: PPOLL = fn(*mut pollfd, nfds_t, *const timespec, *const sigset_t) -> c_int,
            parks poll;
        select: SELECT = fn(c_int, *mut fd_set, *mut fd_set, *mut fd_set, *mut timeval) -> c_int,
            parks select;
        epoll_wait: EPOLL_WAIT = fn(c_int, *mut epoll_event, c_int, c_int) -> c_int,
            parks epoll_wait;
        epoll_pwait: EPOLL_PWAIT =
            fn(c_int, *mut epoll_event, c_int, c_int, *const sigset_t) -> c_int,
            parks epoll_wait;
    }
    "hooks/sleep.rs" {
        nanosleep: NANOSLEEP = fn(*const timespec, *mut timespec) -> c_int, parks nanosleep;
        clock_nanosleep: CLOCK_NANOSLEEP =
            fn(clockid_t, c_int, *const timespec, *mut timespec) -> c_int,
            parks clock_nanosleep;
        usleep: USLEEP = fn(useconds_t) -> c_int, parks usleep;
        sleep: SLEEP = fn(c_uint) -> c_uint, parks sleep;
    }
    "hooks/descriptors.rs" {
        close: CLOSE = fn(c_int) -> c_int;
        close_range;
        closefrom: CLOSEFROM = fn(c_int) -> ();
        fclose: FCLOSE = fn(*mut libc::FILE) -> c_int;
        dup;
        dup2;
        dup3;
        fcntl;
        ioctl;
        socket;
        socketpair;
    }
    "hooks/process.rs" {
        waitpid: WAITPID = fn(pid_t, *mut c_int, c_int) -> pid_t, parks waitpid;
        posix_spawn_file_actions_adddup2: POSIX_SPAWN_FILE_ACTIONS_ADDDUP2 =
            fn(*mut libc::posix_spawn_file_actions_t, c_int, c_int) -> c_int;
    }
    "hooks/getaddrinfo.rs" {
        getaddrinfo: GETADDRINFO = fn(
            *const c_char,
            *const c_char,
            *const libc::addrinfo,
            *mut *mut libc::addrinfo,
        ) -> c_int,
            parks getaddrinfo;
    }
    "signals.rs" {
        sigaction: SIGACTION = fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
        signal;
        bsd_signal;
        sysv_signal;
    }
    "futex.rs" {
        syscall, parks futex;
    }
    "sim.rs" {
        clock_gettime: CLOCK_GETTIME = fn(clockid_t, *mut timespec) -> c_int;
        gettimeofday: GETTIMEOFDAY = fn(*mut timeval, *mut c_void) -> c_int;
        time: TIME = fn(*mut libc::time_t) -> libc::time_t;
        getrandom: GETRANDOM = fn(*mut c_void, size_t, c_uint) -> ssize_t;
        pthread_create: PTHREAD_CREATE = fn(
            *mut libc::pthread_t,
            *const libc::pthread_attr_t,
            extern "C" fn(*mut c_void) -> *mut c_void,
            *mut c_void,
        ) -> c_int;
    }
}

/// Returns from a hook with libc's own function of its name (`next::$s`),
/// called with the hook's arguments, when `$when` holds and the function
/// is known: the pass-through opening of a hook. With `else`, a hook whose
/// `$when` holds returns `$raw` (the call as a raw system call) while
/// libc's function is not known yet; with `then`, the result goes through
/// `$map` first.
macro_rules! libc_own {
    ($s:ident($($a:expr),* $(,)?)) => {
        $crate::transparent::next::libc_own!($s($($a),*) if true)
    };
    ($s:ident($($a:expr),* $(,)?) if $when:expr) => {
        if $when && let Some(f) = $crate::transparent::next::$s.get() {
            // SAFETY: libc's own function of the hook's name and C
            // signature, called with the hook's own arguments: the hook's
            // caller keeps libc's contract for it.
            return unsafe { f($($a),*) };
        }
    };
    ($s:ident($($a:expr),* $(,)?) if $when:expr, else $raw:expr) => {
        if $when {
            $crate::transparent::next::libc_own!($s($($a),*) if true);
            return $raw;
        }
    };
    ($s:ident($($a:expr),* $(,)?) if $when:expr, then $map:expr) => {
        if $when && let Some(f) = $crate::transparent::next::$s.get() {
            // SAFETY: as in the first form.
            return ($map)(unsafe { f($($a),*) });
        }
    };
}
pub(super) use libc_own;

#[used]
#[unsafe(link_section = ".init_array")]
static RESOLVE_ALL: extern "C" fn() = resolve_all;
