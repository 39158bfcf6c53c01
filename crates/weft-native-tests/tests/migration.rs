//! A virtual thread that moves between carriers (issue #39, handoff)
//! keeps what C and C++ code and the kernel tie to a thread; a thread that
//! changed state the kernel keeps per OS thread never moves.
//!
//! How a move is forced, without sleeps: a runtime of one core carrier
//! and a stall threshold of 2 ms; a *hog* spawned by the thread starts on
//! the thread's carrier (a new thread goes to its spawner's queue) and
//! spins there, so that carrier is held, and the thread, waiting
//! (yielding, sleeping or parked), is moved to another carrier — a spare
//! that comes in, or the core carrier once it is free. `gettid()` tells
//! where a thread runs. Every wait for a condition fails the test after
//! minutes ([`STUCK`]); none asserts a time.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libc::c_int;
use weft::{JoinHandle, Runtime};
use weft_native_tests::*;

/// One core carrier, spares up to four, and a short stall threshold, so
/// that a spinning thread holds its carrier within milliseconds.
fn runtime() -> Runtime {
    runtime_named("weft-carrier")
}

/// [`runtime`], its carriers named `name`.
fn runtime_named(name: &str) -> Runtime {
    Runtime::builder()
        .name(name)
        .parallelism(1)
        .max_pool_size(4)
        .stall_threshold(Duration::from_millis(2))
        .build()
        .unwrap()
}

/// Spins until `cond` holds (never parks: the caller may hold its carrier
/// on purpose, or a C lock); false after [`STUCK`].
fn spin_until(mut cond: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while !cond() {
        if t0.elapsed() > STUCK {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

// ------------------------------------------------------------------ hogs

const STARTING: u8 = 0;
const HOLDING: u8 = 1;
const MISSED: u8 = 2;

/// What a hog and the thread that spawned it share.
struct HogState {
    /// [`STARTING`], then [`HOLDING`] (it runs on the target OS thread)
    /// or [`MISSED`] (another carrier took it first: it returned).
    state: AtomicU8,
    release: AtomicBool,
    /// A closure to run on the held carrier ([`Hog::run`]).
    task: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    has_task: AtomicBool,
}

/// A virtual thread that holds the carrier it was spawned on until it is
/// dropped.
struct Hog {
    state: Arc<HogState>,
    handle: Option<JoinHandle<()>>,
}

impl Hog {
    /// Spawns a hog meant for the carrier whose OS thread is `target` (the
    /// caller's). `waiter`, if any, is unparked once the hog has run.
    fn spawn(target: i32, waiter: Option<weft::Thread>) -> Hog {
        let state = Arc::new(HogState {
            state: AtomicU8::new(STARTING),
            release: AtomicBool::new(false),
            task: Mutex::new(None),
            has_task: AtomicBool::new(false),
        });
        let s = state.clone();
        let handle = weft::spawn(move || {
            let holding = gettid() == target;
            s.state
                .store(if holding { HOLDING } else { MISSED }, Ordering::Release);
            if let Some(w) = waiter {
                w.unpark();
            }
            if !holding {
                return;
            }
            let t0 = Instant::now();
            while !s.release.load(Ordering::Acquire) {
                if s.has_task.load(Ordering::Acquire) {
                    let task = s.task.lock().unwrap().take();
                    if let Some(task) = task {
                        task();
                    }
                    s.has_task.store(false, Ordering::Release);
                }
                assert!(t0.elapsed() < STUCK, "a hog was never released");
                std::hint::spin_loop();
            }
        });
        Hog {
            state,
            handle: Some(handle),
        }
    }

    fn missed(&self) -> bool {
        self.state.state.load(Ordering::Acquire) == MISSED
    }

    /// Waits until the hog has run; whether it holds its target carrier.
    fn holds(&self) -> bool {
        assert!(
            spin_until(|| self.state.state.load(Ordering::Acquire) != STARTING),
            "a hog never ran"
        );
        self.state.state.load(Ordering::Acquire) == HOLDING
    }

    /// Runs `f` on the hog, on the carrier it holds, and returns its result.
    fn run<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> R {
        let out = Arc::new(Mutex::new(None));
        let o = out.clone();
        *self.state.task.lock().unwrap() = Some(Box::new(move || {
            *o.lock().unwrap() = Some(f());
        }));
        self.state.has_task.store(true, Ordering::Release);
        assert!(
            spin_until(|| !self.state.has_task.load(Ordering::Acquire)),
            "a hog did not run its task"
        );
        out.lock().unwrap().take().expect("the task's result")
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.state.release.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let r = h.join();
            if !std::thread::panicking() {
                r.expect("the hog panicked");
            }
        }
    }
}

/// How a thread waits for its carrier to be taken from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// `yield_now` (runnable in its carrier's queue).
    Yield,
    /// `sleep` (its timer fires while the carrier is held).
    Sleep,
    /// `park`, unparked by the hog (woken while the carrier is held).
    Park,
}

impl Wait {
    fn wait(self) {
        match self {
            Wait::Yield => weft::yield_now(),
            Wait::Sleep => weft::sleep(Duration::from_millis(1)).unwrap(),
            // Unparked by the hog; the timeout only bounds a lost test.
            Wait::Park => weft::park_timeout(Duration::from_secs(1)),
        }
    }
}

/// Makes the calling virtual thread move to another carrier: spawns hogs
/// on its carrier until one holds it (another carrier may take a hog
/// first) and waits (`how`) until the thread runs on another OS thread.
/// `errno` is set to `tag` before each wait. Returns the OS thread it left
/// and the last hog (holding that carrier if [`Hog::holds`]); an error
/// after [`STUCK`].
fn move_off(how: Wait, tag: i32) -> Result<(i32, Hog), String> {
    let before = gettid();
    let waiter = || (how == Wait::Park).then(weft::current);
    let t0 = Instant::now();
    let mut hog = Hog::spawn(before, waiter());
    loop {
        set_errno(tag);
        how.wait();
        if gettid() != before {
            return Ok((before, hog));
        }
        if t0.elapsed() > STUCK {
            return Err(format!("never moved off {before} ({how:?})"));
        }
        if hog.missed() {
            hog = Hog::spawn(before, waiter());
        }
    }
}

// --------------------------------------------------------------- signals

static HANDLED: AtomicUsize = AtomicUsize::new(0);
static HANDLER_TID: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_usr1(_: c_int) {
    HANDLER_TID.store(gettid(), Ordering::Relaxed);
    HANDLED.fetch_add(1, Ordering::Release);
}

fn install_usr1_handler() {
    // SAFETY: a handler that only stores atomics (async-signal-safe).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
}

/// Sends SIGUSR1 with `send` and waits for the handler; the OS thread it
/// ran on.
fn signal_lands_on(send: impl FnOnce() -> c_int) -> Result<i32, String> {
    let n = HANDLED.load(Ordering::Acquire);
    let r = send();
    if r != 0 {
        return Err(format!("sending failed: {r}"));
    }
    if !spin_until(|| HANDLED.load(Ordering::Acquire) > n) {
        return Err("the handler never ran".into());
    }
    Ok(HANDLER_TID.load(Ordering::Relaxed))
}

// ------------------------------------------------------------ many moves

const ROUNDS: usize = 12;

/// One virtual thread moved `ROUNDS` times, waiting each time in turn by
/// yielding, sleeping and parking; after each move it checks what it
/// keeps, and what glibc must see refreshed:
///
/// - a C library's `__thread` counter (value and address), a C++
///   `thread_local` vector, `pthread_self()`, errno (set just before the
///   wait);
/// - an error-checking and a recursive pthread mutex, locked and unlocked
///   after the move: `EDEADLK` on a second lock of the first, the count of
///   the second, `EPERM` on one unlock too many; and, run on the hog that
///   still holds the carrier the thread left, a `trylock` of the recursive
///   mutex (`EBUSY`: with the tid of the carrier it left in the thread's
///   TCB, the hog would be taken for the owner and get it) and an unlock
///   of the error-checking one (`EPERM`);
/// - `raise(SIGUSR1)` and `pthread_kill(pthread_self(), SIGUSR1)` run the
///   handler on the OS thread it now runs on (not on the one it left);
/// - `pthread_getattr_np(pthread_self())` describes its own stack.
#[test]
fn a_thread_moved_many_times_keeps_its_c_identity() {
    install_usr1_handler();
    let rt = runtime();
    let moved_before = rt.threads_moved();
    let mover = rt.spawn(|| {
        let mut failures: Vec<String> = Vec::new();
        macro_rules! check {
            ($round:expr, $cond:expr, $($msg:tt)*) => {
                if !$cond {
                    failures.push(format!("round {}: {}", $round, format!($($msg)*)));
                }
            };
        }
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        // SAFETY: the C test library's function.
        let c_addr = unsafe { weft_c_counter_addr() } as usize;
        let rec = CMutex::new(libc::PTHREAD_MUTEX_RECURSIVE);
        let chk = CMutex::new(libc::PTHREAD_MUTEX_ERRORCHECK);
        let mut probed = 0;
        let mut tids = vec![gettid()];
        for round in 1..=ROUNDS {
            let how = [Wait::Yield, Wait::Sleep, Wait::Park][round % 3];
            let tag = 1000 + round as i32;
            let (before, hog) = match move_off(how, tag) {
                Ok(moved) => moved,
                Err(e) => {
                    check!(round, false, "{e}");
                    break;
                }
            };
            let now = gettid();
            tids.push(now);
            check!(round, errno() == tag, "errno {} after the move ({how:?})", errno());
            // SAFETY: as above.
            unsafe {
                check!(round, libc::pthread_self() == me, "pthread_self() changed");
                check!(
                    round,
                    weft_c_counter_addr() as usize == c_addr,
                    "the C thread-local moved"
                );
                let c = weft_c_counter_inc();
                check!(round, c == round as i64, "C __thread counter {c}");
                let n = weft_cxx_push(round as i64);
                check!(round, n == round as i64, "C++ thread_local length {n}");
            }

            check!(round, rec.lock() == 0, "recursive lock");
            check!(round, rec.lock() == 0, "recursive lock, again");
            check!(round, chk.lock() == 0, "error-checking lock");
            let r = chk.lock();
            check!(round, r == libc::EDEADLK, "second error-checking lock: {r}");
            if hog.holds() {
                probed += 1;
                let (r2, c2) = (rec.clone(), chk.clone());
                let (busy, perm) = hog.run(move || {
                    let busy = r2.trylock();
                    if busy == 0 {
                        r2.unlock();
                    }
                    (busy, c2.unlock())
                });
                check!(
                    round,
                    busy == libc::EBUSY,
                    "a thread on the carrier it left ({before}) got its recursive mutex: {busy}"
                );
                check!(
                    round,
                    perm == libc::EPERM,
                    "a thread on the carrier it left ({before}) unlocked its error-checking mutex: {perm}"
                );
            }
            let r = chk.unlock();
            check!(round, r == 0, "error-checking unlock: {r}");
            check!(round, rec.unlock() == 0, "recursive unlock");
            check!(round, rec.unlock() == 0, "recursive unlock, second");
            let r = rec.unlock();
            check!(round, r == libc::EPERM, "recursive unlock, third: {r}");

            // SAFETY: raise and pthread_kill of the calling thread, with a
            // handler installed.
            let raised = signal_lands_on(|| unsafe { libc::raise(libc::SIGUSR1) });
            check!(
                round,
                raised == Ok(now),
                "raise ran the handler on {raised:?}; runs on {now}, left {before}"
            );
            // SAFETY: as above.
            let killed = signal_lands_on(|| unsafe {
                libc::pthread_kill(libc::pthread_self(), libc::SIGUSR1)
            });
            check!(
                round,
                killed == Ok(now),
                "pthread_kill(self) ran the handler on {killed:?}; runs on {now}, left {before}"
            );

            let local = 0u8;
            let at = std::hint::black_box(&local) as *const u8 as usize;
            let (lo, size) = own_stack();
            check!(
                round,
                (lo..lo + size).contains(&at) && size <= weft::DEFAULT_STACK_SIZE,
                "a local at {at:#x}, the reported stack {lo:#x}+{size:#x}"
            );
            drop(hog);
        }
        // SAFETY: the test library's function.
        let sum = unsafe { weft_cxx_sum() };
        let want = (1..=ROUNDS as i64).sum::<i64>();
        check!(ROUNDS, sum == want, "C++ thread_local sum {sum}, want {want}");
        (failures, probed, tids)
    });
    let (failures, probed, tids) = mover.join().unwrap();
    assert!(failures.is_empty(), "{failures:#?}\nOS threads: {tids:?}");
    assert!(probed >= 1, "no hog held the carrier its thread left");
    let moved = rt.threads_moved() - moved_before;
    assert!(moved >= ROUNDS, "threads_moved grew by {moved}");
}

// ----------------------------------------------------------------- setuid

/// `setuid` in a threaded process signals every thread and waits until
/// each has changed its credentials (glibc's SIGSETXID, relayed by Weft to
/// the carrier a virtual thread runs on). A thread that moved computes
/// until `setuid` has returned, while a hog keeps the carrier it left
/// busy: the relay must reach the carrier it runs on now.
#[test]
fn setuid_returns_while_a_moved_thread_computes() {
    let rt = runtime();
    let computing = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (c1, s1) = (computing.clone(), stop.clone());
    let mover = rt.spawn(move || {
        let (before, hog) = move_off(Wait::Yield, 0).unwrap();
        c1.store(true, Ordering::Release);
        let returned = spin_until(|| s1.load(Ordering::Acquire));
        drop(hog);
        (returned, before, gettid())
    });
    assert!(
        spin_until(|| computing.load(Ordering::Acquire)),
        "the thread never moved"
    );
    let r = within_watchdog("setuid beside a moved thread", || {
        // SAFETY: setting the user id to the one the process has.
        unsafe { libc::setuid(libc::getuid()) }
    });
    stop.store(true, Ordering::Release);
    assert_eq!(r, 0);
    let (returned, before, now) = mover.join().unwrap();
    assert!(
        returned,
        "setuid did not return while the thread computed on {now} (left {before})"
    );
}

// ------------------------------------------------------------ staying

/// Capability sets (`capget`/`capset`, not in the `libc` crate).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
const CAP_VERSION_3: u32 = 0x2008_0522;
unsafe extern "C" {
    fn capget(header: *mut CapHeader, data: *mut CapData) -> c_int;
    fn capset(header: *mut CapHeader, data: *const CapData) -> c_int;
}

/// The calls that change the calling OS thread's state, each with the
/// value it has (so nothing changes for the rest of the test binary): the
/// thread must stay. `Err` if a call failed for another reason than a
/// missing privilege.
const STAYS: &[&str] = &[
    "pthread_sigmask",
    "sigprocmask",
    "sigaltstack",
    "sched_setaffinity(0)",
    "sched_setaffinity(gettid)",
    "pthread_setaffinity_np",
    "pthread_setname_np",
    "prctl(PR_SET_NAME)",
    "prctl(PR_SET_TIMERSLACK)",
    "setns",
    "unshare",
    "capset",
    "sched_setscheduler",
    "sched_setparam",
    "pthread_setschedparam",
    "setpriority(0)",
    "setpriority(gettid)",
];

/// Calls that only read, or change another thread: the thread may move.
const MOVES: &[&str] = &[
    "nothing",
    "pthread_sigmask(query)",
    "sigprocmask(query)",
    "sigaltstack(query)",
    "prctl(PR_GET_NAME)",
    "sched_setaffinity(other)",
    "setpriority(other)",
];

/// Makes the call `name`; `other` is an OS thread of the test (not a
/// carrier).
fn call(name: &str, other: i32) -> Result<(), String> {
    fn ok(what: &str, r: c_int) -> Result<(), String> {
        if r == 0 {
            Ok(())
        } else {
            Err(format!("{what}: {r}, errno {}", errno()))
        }
    }
    let own = |pid: libc::pid_t| if pid == 0 { gettid() } else { pid };
    // SAFETY: each call gets valid pointers to locals, and sets a value
    // the calling thread already has.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        let null_set = std::ptr::null::<libc::sigset_t>();
        let affinity = |pid: libc::pid_t| {
            let mut cpus: libc::cpu_set_t = std::mem::zeroed();
            let size = size_of::<libc::cpu_set_t>();
            ok(
                "sched_getaffinity",
                libc::sched_getaffinity(own(pid), size, &mut cpus),
            )?;
            ok(
                "sched_setaffinity",
                libc::sched_setaffinity(pid, size, &cpus),
            )
        };
        let nice = |who: libc::id_t| {
            set_errno(0);
            let n = libc::getpriority(libc::PRIO_PROCESS, own(who as i32) as libc::id_t);
            if n == -1 && errno() != 0 {
                return ok("getpriority", -1);
            }
            ok("setpriority", libc::setpriority(libc::PRIO_PROCESS, who, n))
        };
        match name {
            "nothing" => Ok(()),
            "pthread_sigmask" => ok(
                name,
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()),
            ),
            "pthread_sigmask(query)" => ok(
                name,
                libc::pthread_sigmask(libc::SIG_BLOCK, null_set, &mut set),
            ),
            "sigprocmask" => ok(
                name,
                libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()),
            ),
            "sigprocmask(query)" => {
                ok(name, libc::sigprocmask(libc::SIG_BLOCK, null_set, &mut set))
            }
            "sigaltstack" | "sigaltstack(query)" => {
                let mut cur: libc::stack_t = std::mem::zeroed();
                ok(
                    "sigaltstack(query)",
                    libc::sigaltstack(std::ptr::null(), &mut cur),
                )?;
                if name == "sigaltstack" {
                    if cur.ss_flags & libc::SS_DISABLE == 0 {
                        cur.ss_flags = 0;
                    }
                    ok(name, libc::sigaltstack(&cur, std::ptr::null_mut()))?;
                }
                Ok(())
            }
            "sched_setaffinity(0)" => affinity(0),
            "sched_setaffinity(gettid)" => affinity(gettid()),
            "sched_setaffinity(other)" => affinity(other),
            "pthread_setaffinity_np" => {
                let mut cpus: libc::cpu_set_t = std::mem::zeroed();
                let size = size_of::<libc::cpu_set_t>();
                let me = libc::pthread_self();
                ok(
                    "pthread_getaffinity_np",
                    libc::pthread_getaffinity_np(me, size, &mut cpus),
                )?;
                ok(name, libc::pthread_setaffinity_np(me, size, &cpus))
            }
            "pthread_setname_np" => {
                let mut buf = [0 as libc::c_char; 16];
                let me = libc::pthread_self();
                ok(
                    "pthread_getname_np",
                    libc::pthread_getname_np(me, buf.as_mut_ptr(), 16),
                )?;
                ok(name, libc::pthread_setname_np(me, buf.as_ptr()))
            }
            "prctl(PR_SET_NAME)" | "prctl(PR_GET_NAME)" => {
                let mut buf = [0 as libc::c_char; 16];
                ok(
                    "prctl(PR_GET_NAME)",
                    libc::prctl(libc::PR_GET_NAME, buf.as_mut_ptr()),
                )?;
                if name == "prctl(PR_SET_NAME)" {
                    ok(name, libc::prctl(libc::PR_SET_NAME, buf.as_ptr()))?;
                }
                Ok(())
            }
            "prctl(PR_SET_TIMERSLACK)" => {
                let slack = libc::prctl(libc::PR_GET_TIMERSLACK);
                if slack < 0 {
                    return ok("prctl(PR_GET_TIMERSLACK)", slack);
                }
                ok(
                    name,
                    libc::prctl(libc::PR_SET_TIMERSLACK, slack as libc::c_ulong),
                )
            }
            "setns" => {
                let fd = libc::open(
                    c"/proc/thread-self/ns/uts".as_ptr(),
                    libc::O_RDONLY | libc::O_CLOEXEC,
                );
                if fd < 0 {
                    return ok("open /proc/thread-self/ns/uts", fd);
                }
                // Joins the namespace it is in; without CAP_SYS_ADMIN the
                // kernel refuses (the call is still made: it stays).
                let r = libc::setns(fd, libc::CLONE_NEWUTS);
                let e = errno();
                libc::close(fd);
                if r != 0 && e != libc::EPERM {
                    return Err(format!("setns: errno {e}"));
                }
                Ok(())
            }
            // Its own System V semaphore undo list (it has none).
            "unshare" => ok(name, libc::unshare(libc::CLONE_SYSVSEM)),
            "capset" => {
                let mut h = CapHeader {
                    version: CAP_VERSION_3,
                    pid: 0,
                };
                let mut d = [CapData::default(); 2];
                ok("capget", capget(&mut h, d.as_mut_ptr()))?;
                ok(name, capset(&mut h, d.as_ptr()))
            }
            "sched_setscheduler" | "sched_setparam" => {
                let policy = libc::sched_getscheduler(0);
                let mut param: libc::sched_param = std::mem::zeroed();
                ok("sched_getparam", libc::sched_getparam(0, &mut param))?;
                if name == "sched_setscheduler" {
                    ok(name, libc::sched_setscheduler(0, policy, &param))
                } else {
                    ok(name, libc::sched_setparam(0, &param))
                }
            }
            "pthread_setschedparam" => {
                let me = libc::pthread_self();
                let mut policy = 0;
                let mut param: libc::sched_param = std::mem::zeroed();
                ok(
                    "pthread_getschedparam",
                    libc::pthread_getschedparam(me, &mut policy, &mut param),
                )?;
                ok(name, libc::pthread_setschedparam(me, policy, &param))
            }
            "setpriority(0)" => nice(0),
            "setpriority(gettid)" => nice(gettid() as libc::id_t),
            "setpriority(other)" => nice(other as libc::id_t),
            _ => Err(format!("unknown call {name}")),
        }
    }
}

/// Each call of [`STAYS`] makes the virtual thread stay (`weft::
/// stay_on_carrier`, through Weft's definition of the libc function):
/// while a hog holds the carrier, it never changes OS thread, whether it
/// yields or sleeps; the threads that made one of the [`MOVES`] calls
/// beside it all move, and `threads_moved` counts them. The hog lets go
/// once every one of those has moved: by then each staying thread, queued
/// or sleeping beside them, was passed over too.
#[test]
fn a_thread_that_changes_per_os_thread_state_stays() {
    let other = gettid();
    let rt = runtime_named("stays");
    let moved_before = rt.threads_moved();
    let kinds: Vec<(&str, bool, Wait)> = [Wait::Yield, Wait::Sleep]
        .into_iter()
        .flat_map(|how| {
            let stay = STAYS.iter().map(move |&n| (n, true, how));
            stay.chain(MOVES.iter().map(move |&n| (n, false, how)))
        })
        .collect();
    let ready = Arc::new(AtomicUsize::new(0));
    let over = Arc::new(AtomicBool::new(false));
    // The OS thread each thread ran on when it last looked (0: not yet).
    let on: Arc<Vec<AtomicI32>> = Arc::new(kinds.iter().map(|_| AtomicI32::new(0)).collect());
    let threads: Vec<_> = kinds
        .iter()
        .enumerate()
        .map(|(i, &(name, _, how))| {
            let (ready, over, on) = (ready.clone(), over.clone(), on.clone());
            rt.spawn(move || {
                call(name, other)?;
                let mut seen = vec![gettid()];
                on[i].store(seen[0], Ordering::Release);
                ready.fetch_add(1, Ordering::Release);
                let t0 = Instant::now();
                while !over.load(Ordering::Acquire) {
                    how.wait();
                    let now = gettid();
                    on[i].store(now, Ordering::Release);
                    if now != *seen.last().unwrap() {
                        seen.push(now);
                    }
                    // Past the hog's own deadline, so that it reports.
                    if t0.elapsed() > 3 * STUCK {
                        return Err("the hog never let go".to_string());
                    }
                }
                Ok(seen)
            })
        })
        .collect();
    assert!(
        spin_until(|| ready.load(Ordering::Acquire) == kinds.len()),
        "the threads never all started"
    );
    // The hog holds a carrier home to threads of both kinds (in a quiet
    // run, all of them are on the one core carrier); while it runs there
    // none of them runs there. It lets go once every thread that may move
    // and was there has left: by then each staying thread, queued or
    // sleeping beside them, was passed over as well.
    let stays: Arc<Vec<bool>> = Arc::new(kinds.iter().map(|k| k.1).collect());
    let t0 = Instant::now();
    let (all_left, here) = loop {
        let (over, on, stays) = (over.clone(), on.clone(), stays.clone());
        let hog = rt.spawn(move || {
            let me = gettid();
            let here: Vec<usize> = (0..on.len())
                .filter(|&i| on[i].load(Ordering::Acquire) == me)
                .collect();
            let movers: Vec<usize> = here.iter().copied().filter(|&i| !stays[i]).collect();
            if movers.is_empty() || movers.len() == here.len() {
                return None;
            }
            let all_left =
                spin_until(|| movers.iter().all(|&i| on[i].load(Ordering::Acquire) != me));
            over.store(true, Ordering::Release);
            Some((all_left, here))
        });
        match hog.join().unwrap() {
            Some(r) => break r,
            None => assert!(t0.elapsed() < STUCK, "no hog ran where the threads are"),
        }
    };
    over.store(true, Ordering::Release);
    let mut failures = Vec::new();
    for (&(name, stays, how), h) in kinds.iter().zip(threads) {
        match h.join().unwrap() {
            Err(e) => failures.push(format!("{name} ({how:?}): {e}")),
            Ok(seen) if stays && seen.len() > 1 => {
                failures.push(format!("{name} ({how:?}) moved: OS threads {seen:?}"))
            }
            Ok(_) => {}
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    let movers = here.iter().filter(|&&i| !kinds[i].1).count();
    assert!(
        all_left,
        "only some of the {movers} threads that may move left the held carrier"
    );
    // Each of those was counted; a thread that stays never is, but a
    // count can also come from a carrier that only looked held (descheduled
    // past the threshold on a busy machine: its threads are handed off and
    // may run on it again), so the count has no upper bound here.
    let moved = rt.threads_moved() - moved_before;
    assert!(
        moved >= movers,
        "threads_moved grew by {moved}; {movers} threads left the held carrier"
    );
}

/// Weft's definitions are the ones the dynamic linker binds: each name
/// resolves first to a definition that is not libc's.
#[test]
fn the_per_os_thread_calls_are_interposed() {
    for name in [
        c"pthread_sigmask",
        c"sigprocmask",
        c"sched_setaffinity",
        c"pthread_setaffinity_np",
        c"pthread_setname_np",
        c"prctl",
        c"setns",
        c"unshare",
        c"capset",
        c"sched_setscheduler",
        c"sched_setparam",
        c"pthread_setschedparam",
        c"setpriority",
        c"sigaltstack",
    ] {
        // SAFETY: dlsym with NUL-terminated names and the pseudo-handles.
        let (first, libc_own) = unsafe {
            (
                libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()),
                libc::dlsym(libc::RTLD_NEXT, name.as_ptr()),
            )
        };
        assert!(!first.is_null() && !libc_own.is_null(), "{name:?}: missing");
        assert_ne!(first, libc_own, "{name:?}: the first definition is libc's");
    }
}
