//! Helpers shared by the integration tests (each test file includes this
//! module with `mod common;`; not every file uses every helper).
#![allow(dead_code)]

pub mod cgroup;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The kernel id of the calling OS thread (not a thread-local: a virtual
/// thread that moved would read its new carrier's value, which is what the
/// affinity tests look for).
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Whether virtual threads get thread-local areas of their own (x86_64
/// with glibc, unless `WEFT_THREAD_LOCALS` turns them off for the whole
/// process); elsewhere they share their carrier's thread-locals, as
/// documented, and never move off a held carrier.
pub fn areas_supported() -> bool {
    cfg!(all(
        target_os = "linux",
        target_arch = "x86_64",
        target_env = "gnu"
    )) && std::env::var_os("WEFT_THREAD_LOCALS").is_none()
}

/// The calling thread's stack as glibc reports it: `(low end, high end)`.
/// On a virtual thread with an area, its own stack (Weft answers
/// `pthread_getattr_np(pthread_self())`).
pub fn own_stack() -> (usize, usize) {
    // SAFETY: attr is initialised by pthread_getattr_np before use and
    // destroyed after.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
        let (mut addr, mut size) = (std::ptr::null_mut(), 0usize);
        assert_eq!(libc::pthread_attr_getstack(&attr, &mut addr, &mut size), 0);
        libc::pthread_attr_destroy(&mut attr);
        (addr as usize, addr as usize + size)
    }
}

/// Polls `cond` until it holds, failing the test after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Joins `h` from an OS thread, failing the test (instead of hanging) if
/// the thread has not finished within `limit`.
pub fn join_within<T: Send + 'static>(
    what: &str,
    limit: Duration,
    h: weft::JoinHandle<T>,
) -> std::thread::Result<T> {
    wait_until(what, limit, || h.is_finished());
    h.join()
}

/// Set in a child process started by [`run_child`] to the test it runs.
pub const CHILD_VAR: &str = "WEFT_TEST_CHILD";

/// Whether this process is the child that runs test `name`.
pub fn is_child(name: &str) -> bool {
    std::env::var(CHILD_VAR).as_deref() == Ok(name)
}

/// Runs test `name` of this test binary in a fresh process (for tests that
/// change process-wide state or are expected to abort), with `env` set.
pub fn run_child(name: &str, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, name)
        .env_remove("WEFT_PARALLELISM");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the test binary as a child")
}

/// A known stall: long past any test's stall threshold, and not a tail
/// call (`black_box`), so this frame is on the stack in every build.
#[inline(never)]
pub fn marker_stall() {
    std::thread::sleep(Duration::from_millis(60));
    std::hint::black_box(());
}

/// Takes the process's first thread dump on a virtual thread of a
/// one-carrier runtime (stall threshold `threshold`) holding 32 parked
/// sleepers, then runs [`marker_stall`] there and waits for its stall
/// event: once it is in, the monitor (one thread, events in order) has
/// reported whatever it saw of the dump. Returns the dumping thread's id.
pub fn first_dump_then_marker(name: &str, threshold: Duration) -> u64 {
    use weft::events::EventKind;
    let rt = weft::Runtime::builder()
        .parallelism(1)
        .stall_threshold(threshold)
        .name(name)
        .build()
        .unwrap();
    // Parked threads with stacks for the dump to symbolize.
    let sleepers: Vec<_> = (0..32)
        .map(|_| rt.spawn(|| weft::sleep(Duration::from_secs(60))))
        .collect();
    wait_until("the sleepers park", Duration::from_secs(20), || {
        sleepers
            .iter()
            .all(|h| h.thread().state() == weft::State::Parked)
    });
    let dumper = rt.spawn(|| weft::dump().to_string().len());
    let dumper_id = dumper.thread().id().as_u64().get();
    assert!(join_within("the dump", Duration::from_secs(60), dumper).unwrap() > 0);
    let marker = rt.spawn(marker_stall);
    let marker_id = marker.thread().id().as_u64().get();
    join_within("the marker stall", Duration::from_secs(20), marker).unwrap();
    // By thread, not by frame name: a build without link-time
    // optimisation may name the call site after a closure.
    wait_until("the marker stall's event", Duration::from_secs(20), || {
        weft::events::recent().iter().any(|e| {
            e.thread_id == marker_id
                && matches!(e.kind, EventKind::StallBlocked | EventKind::StallCpu)
        })
    });
    for h in sleepers {
        h.thread().interrupt();
        let _ = join_within("a sleeper", Duration::from_secs(20), h);
    }
    dumper_id
}

/// The recorded events of thread `id` of one kind.
pub fn events_of(id: u64, kind: weft::events::EventKind) -> Vec<weft::events::Event> {
    weft::events::recent()
        .into_iter()
        .filter(|e| e.thread_id == id && e.kind == kind)
        .collect()
}

/// A virtual thread of `rt` that holds its carrier in an OS-level wait (a
/// `std::sync::mpsc` receive) until the test sends on the returned sender;
/// it answers how long its own wait lasted. Returns once the stall has
/// been reported: the handle, the sender and the thread's id.
pub fn held_thread(
    rt: &weft::Runtime,
) -> (weft::JoinHandle<Duration>, std::sync::mpsc::Sender<()>, u64) {
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let h = rt.spawn(move || {
        let t0 = Instant::now();
        wait.recv().unwrap();
        t0.elapsed()
    });
    let id = h.thread().id().as_u64().get();
    wait_until("the stall event", Duration::from_secs(60), || {
        !events_of(id, weft::events::EventKind::StallBlocked).is_empty()
    });
    (h, release, id)
}

/// The kernel id of this process's OS thread named `name`.
pub fn tid_named(name: &str) -> Option<i32> {
    std::fs::read_dir("/proc/self/task").ok()?.find_map(|t| {
        let t = t.ok()?;
        let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
        (comm.trim_end() == name)
            .then(|| t.file_name().to_str()?.parse().ok())
            .flatten()
    })
}

/// The system call this process's OS thread `tid` is blocked in (`None`:
/// running, or gone).
pub fn syscall_of(tid: i32) -> Option<i64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}
