//! Kernel state kept per OS thread: a virtual thread that changes it stays
//! on its carrier.
//!
//! # Why
//!
//! A virtual thread with a thread-local area of its own may move to
//! another carrier when its home is stalled (ARCHITECTURE.md, "Affinity and
//! handoff"): its thread-locals, `pthread_self()`, C `__thread` variables
//! and errno are in the area, and the carrier refreshes glibc's view (the
//! kernel thread id in the area's TCB) at each mount. What the kernel keeps in
//! the OS thread's `task_struct` cannot be carried: a signal mask, an
//! alternate signal stack, CPU affinity, a name, namespaces, credentials
//! and capabilities, a scheduling policy, priority or nice value, and the
//! per-thread `prctl` attributes. A thread that set one and then moved
//! would leave it behind on the old OS thread — where the virtual threads
//! that run there next would inherit it — and run on without it: a signal
//! it blocked delivered to it, a seccomp filter no longer applied to its
//! system calls, a name shown on another thread.
//!
//! So Weft defines these libc functions (glibc on x86-64, always, as
//! `native.rs` does for C locks): `pthread_sigmask`, `sigprocmask`,
//! `sigaltstack`, `sched_setaffinity`, `pthread_setaffinity_np`,
//! `pthread_setname_np`, `sched_setscheduler`, `sched_setparam`,
//! `pthread_setschedparam`, `setpriority`, `setns`, `unshare`, `capset`
//! and `prctl`. Each one, called on a virtual thread
//! with arguments that *change* the calling OS thread's state, marks the
//! thread as staying ([`stay_on_carrier`]: from then on it runs only on
//! the carrier it is on), then calls glibc's. The mark comes first and no
//! suspension can come between the two, so the thread never runs on
//! another OS thread after the change.
//!
//! # What is seen, and what is not
//!
//! - Seen: the calls a program or a library makes through the dynamic
//!   linker, and a Rust program's own calls through the `libc` crate.
//!   Which calls count as a change is listed with each function below; a
//!   query (a null new value, another thread as target) does not count.
//!   A change made and undone (block a signal, then restore the mask)
//!   still counts: the masks are not compared.
//! - Not seen: a raw `syscall(SYS_rt_sigprocmask, …)`, a library linked
//!   with `-Bsymbolic` or calling through glibc's internal aliases (glibc
//!   itself, for the masks it sets and restores inside one call), and
//!   per-thread state without a libc function here (`arch_prctl`,
//!   `setfsuid`, `personality`). A program that changes such state calls
//!   [`stay_on_carrier`] itself.
//! - Not affected: calls on an OS thread, Weft's carriers included (a
//!   carrier runs its own code with no virtual thread mounted): they see
//!   no virtual thread and go straight to glibc's. On a runtime with
//!   carrier thread-locals every thread stays anyway; the mark changes
//!   nothing there.
//!
//! # Cost
//!
//! One load (the mounted record, as in `native.rs`) on top of glibc's
//! function; on a virtual thread, the argument test, and a `gettid` for
//! the calls that name their target by thread id and did not pass 0.
//!
//! # Finding glibc's
//!
//! `dlsym(RTLD_NEXT)` before `main` (an `.init_array` constructor), as
//! for every interposed function (`libc_next.rs`, whose table has a row
//! for each of these): `pthread_sigmask` and `sigprocmask` are
//! async-signal-safe, so the first call may come from a signal handler or
//! a `fork` child, where `dlsym` (the loader's lock, `malloc`) must not
//! run. A call before the constructor (another library's constructor)
//! looks its function up then.

#![cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]

use libc::{
    c_char, c_int, c_ulong, c_void, cpu_set_t, id_t, pid_t, pthread_t, sched_param, sigset_t,
    size_t, stack_t,
};

use super::current::current_virtual_no_switch;
use super::stay::stay_on_carrier;

/// Marks the calling thread as staying if it is virtual and `changes`
/// (the call changes its OS thread's state) holds. Called before glibc's
/// function; an OS thread pays the one load.
#[inline(always)]
fn stay_if(changes: impl FnOnce() -> bool) {
    if current_virtual_no_switch().is_some() && changes() {
        stay_on_carrier();
    }
}

/// Whether the thread id `id` (0: the caller) names the calling OS thread.
#[inline]
fn own_tid(id: pid_t) -> bool {
    // SAFETY: gettid has no preconditions.
    id == 0 || id == unsafe { libc::gettid() }
}

/// Whether `thread` is the calling thread (on a virtual thread with an area
/// of its own, glibc acts on the OS thread it runs on: the tid in the
/// area's TCB is the carrier's).
#[inline]
fn own_thread(thread: pthread_t) -> bool {
    // SAFETY: pthread_self has no preconditions.
    thread == unsafe { libc::pthread_self() }
}

/// Whether `prctl(option, arg2, …)` changes an attribute the kernel keeps
/// per thread (in the `task_struct` or the thread's credentials) on
/// x86-64, after prctl(2) and the kernel's `sys_prctl`:
///
/// - `PR_SET_NAME` (the thread's name), `PR_SET_PDEATHSIG`,
///   `PR_SET_KEEPCAPS`, `PR_SET_SECUREBITS`, `PR_CAPBSET_DROP`,
///   `PR_CAP_AMBIENT` (but `PR_CAP_AMBIENT_IS_SET`), `PR_SET_NO_NEW_PRIVS`,
///   `PR_SET_SECCOMP`, `PR_SET_TIMERSLACK`, `PR_SET_TSC`, `PR_MCE_KILL`,
///   `PR_SET_SPECULATION_CTRL`, `PR_SET_IO_FLUSHER`,
///   `PR_SET_SYSCALL_USER_DISPATCH`, `PR_TASK_PERF_EVENTS_DISABLE` and
///   `_ENABLE` (the counters this OS thread created), `PR_SCHED_CORE`'s
///   `CREATE` and `SHARE_FROM`.
/// - Not counted, kept per process (the memory map or the thread group):
///   `PR_SET_DUMPABLE`, `PR_SET_CHILD_SUBREAPER`, `PR_SET_THP_DISABLE`,
///   `PR_SET_MM`, `PR_SET_VMA`, `PR_SET_PTRACER`; every `PR_GET_*`; and
///   the options of other architectures (`EINVAL` here).
fn prctl_changes_thread(option: c_int, arg2: c_ulong) -> bool {
    // Not in the `libc` crate (linux/prctl.h).
    const PR_SET_IO_FLUSHER: c_int = 57;
    const PR_SET_SYSCALL_USER_DISPATCH: c_int = 59;
    const PR_SCHED_CORE: c_int = 62;
    const PR_SCHED_CORE_CREATE: c_ulong = 1;
    const PR_SCHED_CORE_SHARE_FROM: c_ulong = 3;
    match option {
        libc::PR_SET_NAME
        | libc::PR_SET_PDEATHSIG
        | libc::PR_SET_KEEPCAPS
        | libc::PR_SET_SECUREBITS
        | libc::PR_CAPBSET_DROP
        | libc::PR_SET_NO_NEW_PRIVS
        | libc::PR_SET_SECCOMP
        | libc::PR_SET_TIMERSLACK
        | libc::PR_SET_TSC
        | libc::PR_MCE_KILL
        | libc::PR_SET_SPECULATION_CTRL
        | PR_SET_IO_FLUSHER
        | PR_SET_SYSCALL_USER_DISPATCH
        | libc::PR_TASK_PERF_EVENTS_DISABLE
        | libc::PR_TASK_PERF_EVENTS_ENABLE => true,
        libc::PR_CAP_AMBIENT => arg2 != libc::PR_CAP_AMBIENT_IS_SET as c_ulong,
        PR_SCHED_CORE => arg2 == PR_SCHED_CORE_CREATE || arg2 == PR_SCHED_CORE_SHARE_FROM,
        _ => false,
    }
}

/// Defines each function: mark the thread as staying when `if` holds (the
/// expression names the arguments), then call glibc's (`libc_next::$next`).
/// `plain fn`: glibc's has the same prototype; `variadic fn`: glibc's is
/// C-variadic after the first argument (called as such: `%al` is set, see
/// `prctl`).
macro_rules! stay_hooks {
    ($(
        $(#[doc = $doc:literal])*
        $kind:ident fn $name:ident($($arg:ident: $ty:ty),*) = $next:ident if $changes:expr;
    )*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: glibc's; a virtual thread that changes")]
            #[doc = "its own state with it stays on its carrier (see the module docs)."]
            #[doc = ""]
            $(#[doc = $doc])*
            ///
            /// # Safety
            ///
            /// As glibc's.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                stay_if(|| $changes);
                let p = crate::libc_next::$next.get_or_abort();
                stay_hooks!(@call $kind p ($($arg: $ty),*))
            }
        )*
    };
    (@call plain $p:ident ($($arg:ident: $ty:ty),*)) => {{
        // SAFETY: forwarded unchanged; the caller keeps glibc's contract.
        unsafe { $p($($arg),*) }
    }};
    (@call variadic $p:ident ($first:ident: $fty:ty, $($arg:ident: $ty:ty),*)) => {{
        // SAFETY: glibc's function of this name is C-variadic after its
        // first argument, which has this type (its row in the table of
        // `libc_next` names the fixed arguments only).
        let real: unsafe extern "C" fn($fty, ...) -> c_int = unsafe { std::mem::transmute($p) };
        // SAFETY: forwarded unchanged (as glibc reads them: see `prctl`).
        unsafe { real($first, $($arg),*) }
    }};
}

stay_hooks! {
    /// A change: a new mask (`set` not null).
    plain fn pthread_sigmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) = PTHREAD_SIGMASK
        if !set.is_null();
    /// A change: a new mask (`set` not null). glibc's `sigprocmask` sets
    /// the calling thread's mask, as `pthread_sigmask` does.
    plain fn sigprocmask(how: c_int, set: *const sigset_t, old: *mut sigset_t) = SIGPROCMASK
        if !set.is_null();
    /// A change: an alternate stack set or disabled (`ss` not null).
    plain fn sigaltstack(ss: *const stack_t, old: *mut stack_t) = SIGALTSTACK if !ss.is_null();
    /// A change: the affinity of the calling thread (`pid` 0 or its tid;
    /// the process id names the main thread only).
    plain fn sched_setaffinity(pid: pid_t, size: size_t, mask: *const cpu_set_t) = SCHED_SETAFFINITY
        if own_tid(pid);
    /// A change: on `pthread_self()`.
    plain fn pthread_setaffinity_np(thread: pthread_t, size: size_t, set: *const cpu_set_t) = PTHREAD_SETAFFINITY_NP
        if own_thread(thread);
    /// A change: on `pthread_self()`.
    plain fn pthread_setname_np(thread: pthread_t, name: *const c_char) = PTHREAD_SETNAME_NP if own_thread(thread);
    /// A change: on the calling thread (`pid` 0 or its tid).
    plain fn sched_setscheduler(pid: pid_t, policy: c_int, param: *const sched_param) = SCHED_SETSCHEDULER
        if own_tid(pid);
    /// A change: on the calling thread (`pid` 0 or its tid).
    plain fn sched_setparam(pid: pid_t, param: *const sched_param) = SCHED_SETPARAM if own_tid(pid);
    /// A change: on `pthread_self()`.
    plain fn pthread_setschedparam(thread: pthread_t, policy: c_int, param: *const sched_param) = PTHREAD_SETSCHEDPARAM
        if own_thread(thread);
    /// A change: the nice value of the calling thread (`PRIO_PROCESS`
    /// names one thread on Linux: `who` 0 or its tid). A process group's
    /// or a user's (`PRIO_PGRP`, `PRIO_USER`) reaches every carrier alike.
    plain fn setpriority(which: c_int, who: id_t, prio: c_int) = SETPRIORITY
        if which == libc::PRIO_PROCESS as c_int && own_tid(who as pid_t);
    /// A change: always (it joins the calling thread to a namespace).
    plain fn setns(fd: c_int, nstype: c_int) = SETNS if true;
    /// A change: any flag (each unshares something of the calling thread:
    /// its descriptor table, its file-system root, a namespace).
    plain fn unshare(flags: c_int) = UNSHARE if flags != 0;
    /// A change: always (the kernel lets a thread set only its own
    /// capabilities, so every call that succeeds sets the caller's; the
    /// header is not read, a bad pointer fails in the kernel as before).
    plain fn capset(header: *mut c_void, data: *mut c_void) = CAPSET if true;
    /// A change: an option listed at `prctl_changes_thread`.
    ///
    /// C declares `int prctl(int option, ...)`; Rust cannot define a
    /// C-variadic function, so this one takes `option` and four `unsigned
    /// long`s. That is ABI-compatible on x86-64 (System V), the one target
    /// this is built for: a variadic call passes its integer arguments in
    /// the same registers as a fixed one (`rdi`, `rsi`, `rdx`, `rcx`,
    /// `r8`), and the only extra, the count of vector registers in `al`,
    /// is for the callee's `va_start` and ignored by a fixed callee. A
    /// caller passing fewer than five arguments leaves unspecified values
    /// in the remaining registers; glibc's `prctl` reads all four with
    /// `va_arg(…, unsigned long)` and hands them to the kernel, which
    /// ignores the ones an option does not use, and this function forwards
    /// the same registers unchanged, through a C-variadic pointer (so `al`
    /// is set for glibc's `va_start`). An `int` passed where the kernel
    /// reads a long has unspecified upper bits for glibc too.
    variadic fn prctl(option: c_int, arg2: c_ulong, arg3: c_ulong, arg4: c_ulong, arg5: c_ulong) = PRCTL
        if prctl_changes_thread(option, arg2);
}
