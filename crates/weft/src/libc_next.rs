//! libc's next definition of a symbol Weft defines in place of libc's, and
//! the one table of every such symbol.
//!
//! Weft interposes libc functions in three places: the thread-local area's
//! per-thread entry points and `dlopen` guard (`tls/`), the C locks and
//! the calls that change an OS thread's kernel state (`thread/native.rs`,
//! `thread/os_state.rs`), and, with the `transparent` feature, the
//! blocking calls (`transparent/`). Each of those functions, when it hands
//! the call on, calls libc's own function of its name: the *next*
//! definition after Weft's (`dlsym(RTLD_NEXT)`), kept here as a
//! [`Next`] static. The table at the end of this file (`hooks!`) has a row
//! per interposed function, under the file that defines it (relative to
//! `src/`); it makes the statics ([`Next`], named as the row says), the
//! list [`HOOKED`] that `tests-transparent/tests/hook_table.rs` checks
//! against the definitions, the docs and the dynamic symbol table, and the
//! transparent hooks' park counters (`CALLS`, `parks`). Adding an
//! interposed function is a row here, the function in its file, and a
//! test.
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
//! # Finding them
//!
//! The addresses are resolved by an `.init_array` constructor before
//! `main`: a hook may first run inside a signal handler or a `fork` child,
//! where `dlsym` (it takes the loader's lock and may allocate) must not be
//! called. A transparent hook called before that (or whose function libc
//! lacks) makes its call as a raw system call ([`Next::get`], or
//! [`Next::resolve`] where it may call `dlsym`); the others look their
//! function up then, and abort if libc has none ([`Next::get_or_abort`]):
//! they cannot do the call without it, and an `extern "C"` function must
//! not unwind.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_char, c_int, c_ulong, c_void, pid_t, pthread_t, sigset_t, size_t, timespec};
// The types only the transparent hooks' rows name.
#[cfg(all(
    feature = "transparent",
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
use libc::{
    c_uint, clockid_t, epoll_event, fd_set, iovec, msghdr, nfds_t, pollfd, sockaddr, socklen_t,
    ssize_t, timeval, useconds_t,
};

/// One libc function of C type `F` (an `unsafe extern "C-unwind" fn`
/// pointer): its name and, once resolved, its address.
pub(crate) struct Next<F> {
    addr: AtomicUsize,
    name: &'static CStr,
    ty: PhantomData<F>,
}

impl<F: Copy> Next<F> {
    /// # Safety
    ///
    /// `F` is a function pointer type matching the C signature of libc's
    /// function `name`.
    pub(crate) const unsafe fn new(name: &'static CStr) -> Self {
        assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>());
        Self {
            addr: AtomicUsize::new(0),
            name,
            ty: PhantomData,
        }
    }

    /// The function, `None` while it is not (yet) known.
    pub(crate) fn get(&self) -> Option<F> {
        let p = self.addr.load(Ordering::Relaxed);
        // SAFETY: a non-zero address is libc's function `name`, whose C
        // signature `F` is (`new`'s contract); `F` is pointer-sized.
        (p != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&p) })
    }

    /// The function, looked up now if it is not known yet. Not in a signal
    /// handler (`dlsym`).
    pub(crate) fn resolve(&self) -> Option<F> {
        if self.addr.load(Ordering::Relaxed) == 0 {
            // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
            let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
            self.addr.store(p, Ordering::Relaxed);
        }
        self.get()
    }

    /// The function, looked up now if it is not known yet (before `main`
    /// it is: see "Finding them"); aborts if libc has none. Relaxed loads
    /// suffice: the address is the only thing published, and the code it
    /// points at was mapped before `dlsym` returned it.
    #[inline]
    pub(crate) fn get_or_abort(&self) -> F {
        match self.get() {
            Some(f) => f,
            None => self.resolve_or_abort(),
        }
    }

    #[cold]
    fn resolve_or_abort(&self) -> F {
        match self.resolve() {
            Some(f) => f,
            None => {
                // Cannot forward. Abort as glibc would on a missing symbol
                // (an `extern "C"` function must not unwind).
                eprintln!("weft: libc has no {:?}; aborting", self.name);
                std::process::abort();
            }
        }
    }
}

macro_rules! hooks {
    (
        counted: [$($counted:ident),* $(,)?];
        $(#[cfg($when:meta)] $file:literal {
            $($name:ident $(: $s:ident = fn($($t:ty),* $(,)?) -> $r:ty)? $(, parks $c:ident)?;)*
        })*
    ) => {
        $($($(
            #[cfg($when)]
            pub(crate) static $s: Next<unsafe extern "C-unwind" fn($($t),*) -> $r> =
                // SAFETY: the signature is libc's for the function of this
                // name (as the `libc` crate declares it).
                unsafe { Next::new(cstr(concat!(stringify!($name), "\0"))) };
        )?)*)*

        extern "C" fn resolve_all() {
            $($($(
                #[cfg($when)]
                $s.resolve();
            )?)*)*
        }

        /// Every function Weft defines in place of libc's, with the file
        /// under `src/` that defines it (`transparent::hook_table`).
        #[cfg_attr(not(feature = "transparent"), allow(dead_code))]
        pub(crate) const HOOKED: &[(&str, &str)] = &[$($(#[cfg($when)] (stringify!($name), $file),)*)*];

        /// Names of the calls counted in `transparent::parks`, in its
        /// order.
        #[cfg_attr(not(feature = "transparent"), allow(dead_code))]
        pub const CALLS: [&str; [$(stringify!($counted)),*].len()] = [$(stringify!($counted)),*];

        /// The index in [`CALLS`] that a park in `call` counts in: a
        /// hook's name (its row's `parks`), or a name of `CALLS` itself.
        #[cfg_attr(not(feature = "transparent"), allow(dead_code))]
        pub(crate) fn counter(call: &str) -> Option<usize> {
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
// under the file (below `src/`) that defines it; a group's `#[cfg]` (one,
// required) says which builds define its rows. A row with a signature
// also makes `libc_next::NAME`, libc's own function (resolved before
// `main`); `parks x` counts the row's parks as `x` of `CALLS`. Adding a
// hook: one row here, the function in its file, a test
// (`tests-transparent/tests/hook_table.rs` checks the rows against the
// definitions, their files' docs and the dynamic symbol table).
hooks! {
    counted: [
        read, write, recv, send, connect, accept, poll, select, epoll_wait, nanosleep,
        clock_nanosleep, usleep, sleep, getaddrinfo, readv, writev, waitpid, futex,
        pthread_cond,
    ];
    #[cfg(all(feature = "transparent", target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    "transparent/hooks/io.rs" {
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
    #[cfg(all(feature = "transparent", target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    "transparent/hooks/connect.rs" {
        connect: CONNECT = fn(c_int, *const sockaddr, socklen_t) -> c_int, parks connect;
        accept: ACCEPT = fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int, parks accept;
        accept4: ACCEPT4 = fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int,
            parks accept;
    }
    #[cfg(all(feature = "transparent", target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    "transparent/hooks/poll.rs" {
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
    #[cfg(all(feature = "transparent", target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    "transparent/hooks/sleep.rs" {
        nanosleep: NANOSLEEP = fn(*const timespec, *mut timespec) -> c_int, parks nanosleep;
        clock_nanosleep: CLOCK_NANOSLEEP =
            fn(clockid_t, c_int, *const timespec, *mut timespec) -> c_int,
            parks clock_nanosleep;
        usleep: USLEEP = fn(useconds_t) -> c_int, parks usleep;
        sleep: SLEEP = fn(c_uint) -> c_uint, parks sleep;
    }
    #[cfg(all(feature = "transparent", target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    "transparent/hooks/descriptors.rs" {
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
    #[cfg(all(feature = "transparent", target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    "transparent/hooks/process.rs" {
        waitpid: WAITPID = fn(pid_t, *mut c_int, c_int) -> pid_t, parks waitpid;
        posix_spawn_file_actions_adddup2: POSIX_SPAWN_FILE_ACTIONS_ADDDUP2 =
            fn(*mut libc::posix_spawn_file_actions_t, c_int, c_int) -> c_int;
    }
    #[cfg(all(feature = "transparent", target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    "transparent/hooks/getaddrinfo.rs" {
        getaddrinfo: GETADDRINFO = fn(
            *const c_char,
            *const c_char,
            *const libc::addrinfo,
            *mut *mut libc::addrinfo,
        ) -> c_int,
            parks getaddrinfo;
    }
    #[cfg(all(feature = "transparent", target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    "transparent/signals.rs" {
        sigaction: SIGACTION = fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
        signal;
        bsd_signal;
        sysv_signal;
    }
    #[cfg(all(feature = "transparent", target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    "transparent/futex.rs" {
        syscall, parks futex;
    }
    #[cfg(all(feature = "transparent", target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    "transparent/hooks/cond.rs" {
        pthread_cond_wait: PTHREAD_COND_WAIT =
            fn(*mut libc::pthread_cond_t, *mut libc::pthread_mutex_t) -> c_int,
            parks pthread_cond;
        pthread_cond_timedwait: PTHREAD_COND_TIMEDWAIT = fn(
            *mut libc::pthread_cond_t,
            *mut libc::pthread_mutex_t,
            *const timespec,
        ) -> c_int,
            parks pthread_cond;
        pthread_cond_clockwait: PTHREAD_COND_CLOCKWAIT = fn(
            *mut libc::pthread_cond_t,
            *mut libc::pthread_mutex_t,
            clockid_t,
            *const timespec,
        ) -> c_int,
            parks pthread_cond;
        pthread_cond_signal: PTHREAD_COND_SIGNAL = fn(*mut libc::pthread_cond_t) -> c_int;
        pthread_cond_broadcast: PTHREAD_COND_BROADCAST = fn(*mut libc::pthread_cond_t) -> c_int;
    }
    #[cfg(all(feature = "transparent", target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    "transparent/sim.rs" {
        clock_gettime: CLOCK_GETTIME = fn(clockid_t, *mut timespec) -> c_int;
        gettimeofday: GETTIMEOFDAY = fn(*mut timeval, *mut c_void) -> c_int;
        time: TIME = fn(*mut libc::time_t) -> libc::time_t;
        getrandom: GETRANDOM = fn(*mut c_void, size_t, c_uint) -> ssize_t;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    "sched/starter.rs" {
        pthread_create: PTHREAD_CREATE = fn(
            *mut libc::pthread_t,
            *const libc::pthread_attr_t,
            extern "C" fn(*mut c_void) -> *mut c_void,
            *mut c_void,
        ) -> c_int;
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    "tls/dtors.rs" {
        __cxa_thread_atexit_impl: CXA_THREAD_ATEXIT_IMPL =
            fn(unsafe extern "C" fn(*mut c_void), *mut c_void, *mut c_void) -> c_int;
        pthread_getspecific: PTHREAD_GETSPECIFIC = fn(libc::pthread_key_t) -> *mut c_void;
        pthread_setspecific: PTHREAD_SETSPECIFIC =
            fn(libc::pthread_key_t, *const c_void) -> c_int;
        pthread_key_delete: PTHREAD_KEY_DELETE = fn(libc::pthread_key_t) -> c_int;
        pthread_key_create: PTHREAD_KEY_CREATE =
            fn(*mut libc::pthread_key_t, Option<unsafe extern "C" fn(*mut c_void)>) -> c_int;
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    "tls/getattr.rs" {
        pthread_getattr_np: PTHREAD_GETATTR_NP = fn(pthread_t, *mut libc::pthread_attr_t) -> c_int;
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    "tls/dlopen.rs" {
        dlopen: DLOPEN = fn(*const c_char, c_int) -> *mut c_void;
        dlmopen: DLMOPEN = fn(libc::Lmid_t, *const c_char, c_int) -> *mut c_void;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    "thread/native.rs" {
        pthread_mutex_lock: PTHREAD_MUTEX_LOCK = fn(*mut libc::pthread_mutex_t) -> c_int;
        pthread_mutex_trylock: PTHREAD_MUTEX_TRYLOCK = fn(*mut libc::pthread_mutex_t) -> c_int;
        pthread_mutex_timedlock: PTHREAD_MUTEX_TIMEDLOCK =
            fn(*mut libc::pthread_mutex_t, *const timespec) -> c_int;
        pthread_mutex_clocklock: PTHREAD_MUTEX_CLOCKLOCK =
            fn(*mut libc::pthread_mutex_t, libc::clockid_t, *const timespec) -> c_int;
        pthread_mutex_unlock: PTHREAD_MUTEX_UNLOCK = fn(*mut libc::pthread_mutex_t) -> c_int;
        pthread_rwlock_rdlock: PTHREAD_RWLOCK_RDLOCK = fn(*mut libc::pthread_rwlock_t) -> c_int;
        pthread_rwlock_tryrdlock: PTHREAD_RWLOCK_TRYRDLOCK =
            fn(*mut libc::pthread_rwlock_t) -> c_int;
        pthread_rwlock_timedrdlock: PTHREAD_RWLOCK_TIMEDRDLOCK =
            fn(*mut libc::pthread_rwlock_t, *const timespec) -> c_int;
        pthread_rwlock_clockrdlock: PTHREAD_RWLOCK_CLOCKRDLOCK =
            fn(*mut libc::pthread_rwlock_t, libc::clockid_t, *const timespec) -> c_int;
        pthread_rwlock_wrlock: PTHREAD_RWLOCK_WRLOCK = fn(*mut libc::pthread_rwlock_t) -> c_int;
        pthread_rwlock_trywrlock: PTHREAD_RWLOCK_TRYWRLOCK =
            fn(*mut libc::pthread_rwlock_t) -> c_int;
        pthread_rwlock_timedwrlock: PTHREAD_RWLOCK_TIMEDWRLOCK =
            fn(*mut libc::pthread_rwlock_t, *const timespec) -> c_int;
        pthread_rwlock_clockwrlock: PTHREAD_RWLOCK_CLOCKWRLOCK =
            fn(*mut libc::pthread_rwlock_t, libc::clockid_t, *const timespec) -> c_int;
        pthread_rwlock_unlock: PTHREAD_RWLOCK_UNLOCK = fn(*mut libc::pthread_rwlock_t) -> c_int;
        pthread_spin_lock: PTHREAD_SPIN_LOCK = fn(*mut libc::pthread_spinlock_t) -> c_int;
        pthread_spin_trylock: PTHREAD_SPIN_TRYLOCK = fn(*mut libc::pthread_spinlock_t) -> c_int;
        pthread_spin_unlock: PTHREAD_SPIN_UNLOCK = fn(*mut libc::pthread_spinlock_t) -> c_int;
        flockfile: FLOCKFILE = fn(*mut libc::FILE) -> ();
        ftrylockfile: FTRYLOCKFILE = fn(*mut libc::FILE) -> c_int;
        funlockfile: FUNLOCKFILE = fn(*mut libc::FILE) -> ();
    }
    #[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
    "thread/os_state.rs" {
        pthread_sigmask: PTHREAD_SIGMASK = fn(c_int, *const sigset_t, *mut sigset_t) -> c_int;
        sigprocmask: SIGPROCMASK = fn(c_int, *const sigset_t, *mut sigset_t) -> c_int;
        sigaltstack: SIGALTSTACK = fn(*const libc::stack_t, *mut libc::stack_t) -> c_int;
        sched_setaffinity: SCHED_SETAFFINITY =
            fn(pid_t, size_t, *const libc::cpu_set_t) -> c_int;
        pthread_setaffinity_np: PTHREAD_SETAFFINITY_NP =
            fn(pthread_t, size_t, *const libc::cpu_set_t) -> c_int;
        pthread_setname_np: PTHREAD_SETNAME_NP = fn(pthread_t, *const c_char) -> c_int;
        sched_setscheduler: SCHED_SETSCHEDULER =
            fn(pid_t, c_int, *const libc::sched_param) -> c_int;
        sched_setparam: SCHED_SETPARAM = fn(pid_t, *const libc::sched_param) -> c_int;
        pthread_setschedparam: PTHREAD_SETSCHEDPARAM =
            fn(pthread_t, c_int, *const libc::sched_param) -> c_int;
        setpriority: SETPRIORITY = fn(c_int, libc::id_t, c_int) -> c_int;
        setns: SETNS = fn(c_int, c_int) -> c_int;
        unshare: UNSHARE = fn(c_int) -> c_int;
        capset: CAPSET = fn(*mut c_void, *mut c_void) -> c_int;
        // C-variadic in glibc: `thread/os_state.rs` calls it as such.
        prctl: PRCTL = fn(c_int, c_ulong, c_ulong, c_ulong, c_ulong) -> c_int;
    }
}

/// Returns from a hook with libc's own function of its name (`next::$s`),
/// called with the hook's arguments, when `$when` holds and the function
/// is known: the pass-through opening of a hook. With `else`, a hook whose
/// `$when` holds returns `$raw` (the call as a raw system call) while
/// libc's function is not known yet; with `then`, the result goes through
/// `$map` first.
#[cfg(all(
    feature = "transparent",
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
macro_rules! libc_own {
    ($s:ident($($a:expr),* $(,)?)) => {
        $crate::libc_next::libc_own!($s($($a),*) if true)
    };
    ($s:ident($($a:expr),* $(,)?) if $when:expr) => {
        if $when && let Some(f) = $crate::libc_next::$s.get() {
            // SAFETY: libc's own function of the hook's name and C
            // signature, called with the hook's own arguments: the hook's
            // caller keeps libc's contract for it.
            return unsafe { f($($a),*) };
        }
    };
    ($s:ident($($a:expr),* $(,)?) if $when:expr, else $raw:expr) => {
        if $when {
            $crate::libc_next::libc_own!($s($($a),*) if true);
            return $raw;
        }
    };
    ($s:ident($($a:expr),* $(,)?) if $when:expr, then $map:expr) => {
        if $when && let Some(f) = $crate::libc_next::$s.get() {
            // SAFETY: as in the first form.
            return ($map)(unsafe { f($($a),*) });
        }
    };
}
#[cfg(all(
    feature = "transparent",
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub(crate) use libc_own;

#[used]
#[unsafe(link_section = ".init_array")]
static RESOLVE_ALL: extern "C" fn() = resolve_all;
