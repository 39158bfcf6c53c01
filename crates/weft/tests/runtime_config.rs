//! `weft::Runtime` configuration: the builder (`parallelism`,
//! `max_pool_size`, `stack_size`), explicit runtimes side by side with the
//! default one, and the environment variables `WEFT_PARALLELISM`,
//! `WEFT_MAX_POOL_SIZE` and `WEFT_STACK_SIZE` of the default runtime.
//!
//! The default runtime is global and started once per process, so the
//! environment is tested in child processes: this test binary re-executed
//! with `WEFT_TEST_RUNTIME_CHILD=<mode>`, running only `runtime_child`
//! (a no-op in a normal run).

use std::collections::HashSet;
use std::hint::black_box;
use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use weft::{Builder, JoinHandle, Runtime};

mod common;

const LIMIT: Duration = Duration::from_secs(30);
const CHILD_VAR: &str = "WEFT_TEST_RUNTIME_CHILD";
const ENV_VARS: [&str; 3] = ["WEFT_PARALLELISM", "WEFT_MAX_POOL_SIZE", "WEFT_STACK_SIZE"];

fn join_timeout<T: Send + 'static>(h: JoinHandle<T>) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(h.join());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("virtual thread did not finish within {LIMIT:?}"),
    }
}

/// The OS thread (carrier) the calling virtual thread runs on right now:
/// its kernel thread id (`std::thread::current()` is the virtual thread's
/// own thread, not its carrier's).
#[inline(never)]
fn carrier() -> i32 {
    // SAFETY: gettid has no preconditions.
    black_box(unsafe { libc::gettid() })
}

/// Spawns `threads` virtual threads on `rt` that each record their carrier
/// `rounds` times (yielding in between, optionally busy for `busy` first).
fn carriers_seen(rt: &Runtime, threads: usize, rounds: usize, busy: Duration) -> usize {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            rt.spawn(move || {
                let mut seen = Vec::with_capacity(rounds);
                for _ in 0..rounds {
                    let t0 = Instant::now();
                    while t0.elapsed() < busy {
                        std::hint::spin_loop();
                    }
                    seen.push(carrier());
                    weft::yield_now();
                }
                seen
            })
        })
        .collect();
    let mut all = HashSet::new();
    for h in handles {
        all.extend(join_timeout(h));
    }
    assert!(
        // SAFETY: gettid has no preconditions.
        !all.contains(&unsafe { libc::gettid() }),
        "a virtual thread ran on the test thread itself"
    );
    all.len()
}

#[inline(never)]
fn dig(frames: usize) -> usize {
    let mut pad = [0u8; 4096];
    black_box(&mut pad);
    let low = if frames == 0 {
        pad.as_ptr() as usize
    } else {
        dig(frames - 1)
    };
    black_box(&pad);
    low
}

/// Uses at least `bytes` of stack; returns the bytes really used.
#[inline(never)]
fn use_stack(bytes: usize) -> usize {
    let top = 0u8;
    let top = black_box(&top) as *const u8 as usize;
    top - dig(bytes / 4096)
}

// ------------------------------------------------------------ the builder

#[test]
fn builder_builds_and_spawns() {
    let rt = Runtime::builder().parallelism(1).build().expect("build");
    let h = rt.spawn(|| (weft::current().is_virtual(), 40 + 2));
    assert_eq!(join_timeout(h), (true, 42));

    let rt2 = Runtime::builder()
        .parallelism(2)
        .max_pool_size(16)
        .stack_size(256 << 10)
        .build()
        .expect("build with all options");
    let handles: Vec<_> = (0..1000u64).map(|i| rt2.spawn(move || i)).collect();
    let sum: u64 = handles.into_iter().map(join_timeout).sum();
    assert_eq!(sum, 999 * 1000 / 2);
}

#[test]
fn parallelism_zero_is_an_error() {
    let err = match Runtime::builder().parallelism(0).build() {
        Ok(_) => panic!("parallelism(0) must be rejected"),
        Err(e) => e,
    };
    assert!(
        err.to_string().to_lowercase().contains("parallelism"),
        "error should name the bad setting: {err}"
    );
}

#[test]
fn one_carrier_means_one_carrier() {
    let rt = Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .build()
        .expect("build");
    assert_eq!(carriers_seen(&rt, 100, 10, Duration::ZERO), 1);
}

#[test]
fn parallelism_two_uses_both_carriers_and_no_more() {
    let rt = Runtime::builder()
        .parallelism(2)
        .max_pool_size(2)
        .build()
        .expect("build");
    // CPU-bound work for long enough that an idle second carrier must be
    // woken to share it.
    let n = carriers_seen(&rt, 64, 20, Duration::from_micros(200));
    assert_eq!(n, 2, "expected exactly 2 carriers to run CPU-bound work");
}

#[test]
fn runtime_stack_size_is_the_default_for_its_threads() {
    let rt = Runtime::builder()
        .parallelism(1)
        .stack_size(8 << 20)
        .build()
        .expect("build");
    let used = join_timeout(rt.spawn(|| use_stack(4 << 20)));
    assert!(used >= 4 << 20);
    // Builder::stack_size still overrides it per thread.
    let h = Builder::new()
        .stack_size(8 << 20)
        .spawn_on(&rt, || use_stack(4 << 20))
        .expect("spawn_on");
    assert!(join_timeout(h) >= 4 << 20);
}

#[test]
fn runtimes_coexist_and_wake_each_other() {
    let rt1 = Runtime::builder().parallelism(1).build().expect("rt1");
    let rt2 = Runtime::builder().parallelism(1).build().expect("rt2");
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let parker = rt1.spawn(move || {
        while !f.load(SeqCst) {
            weft::park();
        }
        carrier()
    });
    let target = parker.thread().clone();
    let waker = rt2.spawn(move || {
        flag.store(true, SeqCst);
        target.unpark();
        carrier()
    });
    let (on1, on2) = (join_timeout(parker), join_timeout(waker));
    assert_ne!(on1, on2, "two runtimes shared a carrier");
    // The default runtime works alongside them.
    assert_eq!(join_timeout(weft::spawn(|| 5)), 5);
}

#[test]
fn spawns_from_a_virtual_thread_stay_in_its_runtime() {
    // A private runtime whose carriers have a name of their own: a thread
    // it spawns with `weft::spawn`, `Builder::spawn`, `weft::scope` or an
    // executor without a runtime runs on those carriers, not the default
    // runtime's.
    let rt = Runtime::builder()
        .name("own-rt")
        .parallelism(1)
        .build()
        .expect("build");
    let inner = rt.spawn(|| {
        let by_spawn = join_timeout(weft::spawn(carrier_name));
        let by_builder = join_timeout(Builder::new().spawn(carrier_name).expect("spawn"));
        let by_scope = weft::scope(|s| s.spawn(carrier_name).join().expect("scoped"));
        let ex = weft::Executor::virtual_per_task();
        let by_executor = ex.submit(carrier_name).join().expect("task");
        [by_spawn, by_builder, by_scope, by_executor]
    });
    for (how, name) in ["weft::spawn", "Builder::spawn", "scope", "executor"]
        .into_iter()
        .zip(join_timeout(inner))
    {
        // (A spare carrier, `own-rt-1`, may run it: the parent blocks.)
        assert!(
            name.starts_with("own-rt-"),
            "{how} from own-rt's thread ran on {name:?}"
        );
    }
    // From an OS thread: the default runtime.
    let name = join_timeout(weft::spawn(carrier_name));
    assert!(!name.starts_with("own-rt-"), "ran on {name:?}");
}

/// The name of the OS thread (carrier) running the caller.
/// The name of the OS thread (carrier) the caller runs on.
fn carrier_name() -> String {
    std::fs::read_to_string("/proc/thread-self/comm")
        .expect("/proc/thread-self/comm")
        .trim_end()
        .to_string()
}

#[test]
fn dropping_an_idle_runtime_is_fine() {
    for _ in 0..10 {
        let rt = Runtime::builder().parallelism(2).build().expect("build");
        assert_eq!(join_timeout(rt.spawn(|| 1)), 1);
        drop(rt);
    }
    assert_eq!(join_timeout(weft::spawn(|| 2)), 2);
}

// ------------------------------------------------- environment (children)

/// Entry point of the child process; does nothing in a normal test run.
#[test]
fn runtime_child() {
    let Ok(mode) = std::env::var(CHILD_VAR) else {
        return;
    };
    match mode.as_str() {
        "builder-spawn" => match Builder::new().spawn(|| 1) {
            Ok(h) => println!("CHILD-SPAWNED-OK {:?}", h.join().is_ok()),
            Err(e) => panic!("CHILD-SPAWN-ERR: {e}"),
        },
        "weft-spawn" => {
            let r = weft::spawn(|| 1).join();
            println!("CHILD-SPAWNED-OK {:?}", r.is_ok());
        }
        "deep-default-stack" => {
            let used = join_timeout(weft::spawn(|| use_stack(4 << 20)));
            println!("CHILD-DEEP-OK {used}");
        }
        "count-carriers" => {
            let handles: Vec<_> = (0..100)
                .map(|_| {
                    weft::spawn(|| {
                        let mut seen = Vec::new();
                        for _ in 0..10 {
                            seen.push(carrier());
                            weft::yield_now();
                        }
                        seen
                    })
                })
                .collect();
            let all: HashSet<_> = handles.into_iter().flat_map(join_timeout).collect();
            println!("CHILD-CARRIERS {}", all.len());
        }
        other => panic!("unknown child mode {other}"),
    }
}

struct ChildOutput {
    status: ExitStatus,
    /// stdout and stderr, concatenated.
    text: String,
}

fn run_child(mode: &str, env: &[(&str, &str)]) -> ChildOutput {
    let mut cmd = Command::new(std::env::current_exe().expect("current_exe"));
    cmd.args([
        "--exact",
        "runtime_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_VAR, mode)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for var in ENV_VARS {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn child");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child '{mode}' with {env:?} still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = out_reader.join().unwrap() + &err_reader.join().unwrap();
    ChildOutput { status, text }
}

fn assert_env_rejected(var: &str, value: &str) {
    for mode in ["builder-spawn", "weft-spawn"] {
        let out = run_child(mode, &[(var, value)]);
        let report = format!(
            "{var}={value:?}, child mode {mode}: status {:?}\n{}",
            out.status, out.text
        );
        assert!(
            !out.text.contains("CHILD-SPAWNED-OK"),
            "bad value was accepted\n{report}"
        );
        assert!(!out.status.success(), "child succeeded\n{report}");
        // The child output also echoes the test's own `--exact` filter and
        // the mode name, none of which contains the variable's name.
        assert!(
            out.text.contains(var),
            "error does not name the variable {var}\n{report}"
        );
    }
}

#[test]
fn env_parallelism_garbage_is_an_error_naming_it() {
    assert_env_rejected("WEFT_PARALLELISM", "abc");
}

#[test]
fn env_parallelism_zero_is_an_error_naming_it() {
    assert_env_rejected("WEFT_PARALLELISM", "0");
}

#[test]
fn env_parallelism_negative_is_an_error_naming_it() {
    assert_env_rejected("WEFT_PARALLELISM", "-3");
}

#[test]
fn env_max_pool_size_garbage_is_an_error_naming_it() {
    assert_env_rejected("WEFT_MAX_POOL_SIZE", "lots");
}

#[test]
fn env_stack_size_garbage_is_an_error_naming_it() {
    assert_env_rejected("WEFT_STACK_SIZE", "huge");
}

#[test]
fn env_valid_values_are_accepted() {
    let out = run_child(
        "weft-spawn",
        &[
            ("WEFT_PARALLELISM", "2"),
            ("WEFT_MAX_POOL_SIZE", "8"),
            ("WEFT_STACK_SIZE", "1048576"),
        ],
    );
    assert!(
        out.status.success() && out.text.contains("CHILD-SPAWNED-OK true"),
        "valid environment rejected: {:?}\n{}",
        out.status,
        out.text
    );
}

#[test]
fn env_parallelism_one_gives_one_carrier() {
    let out = run_child(
        "count-carriers",
        &[("WEFT_PARALLELISM", "1"), ("WEFT_MAX_POOL_SIZE", "1")],
    );
    assert!(
        out.status.success() && out.text.contains("CHILD-CARRIERS 1\n"),
        "WEFT_PARALLELISM=1 WEFT_MAX_POOL_SIZE=1 not honoured: {:?}\n{}",
        out.status,
        out.text
    );
}

#[test]
fn env_stack_size_is_honoured() {
    // 4 MiB of recursion needs more than the 256 KiB default.
    let out = run_child("deep-default-stack", &[("WEFT_STACK_SIZE", "8388608")]);
    assert!(
        out.status.success() && out.text.contains("CHILD-DEEP-OK"),
        "WEFT_STACK_SIZE=8388608 not honoured: {:?}\n{}",
        out.status,
        out.text
    );
}

/// A runtime asked for 96 KiB stacks gives its threads 96 KiB (pools come
/// in two sizes per octave), and says so. Before, sizes went up to a power
/// of two: the threads got 128 KiB while `stack_size()` said 96.
#[test]
fn a_96_kib_stack_is_96_kib() {
    let rt = Runtime::builder()
        .parallelism(1)
        .stack_size(96 << 10)
        .build()
        .expect("build");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    assert_eq!(rt.stack_size(), (96usize << 10).div_ceil(page) * page);
    let rt2 = Runtime::builder()
        .parallelism(1)
        .stack_size(100 << 10)
        .build()
        .expect("build");
    assert_eq!(
        rt2.stack_size(),
        (128usize << 10).div_ceil(page) * page,
        "rounded up, and reported"
    );
    // The stack the thread runs on, as glibc is told it (Weft answers for
    // a virtual thread with a thread-local area of its own).
    if common::areas_supported() {
        let size = join_timeout(rt.spawn(|| {
            let probe = 0u8;
            let here = black_box(&probe) as *const u8 as usize;
            let (lo, hi) = common::own_stack();
            // No area of its own: glibc's answer is the carrier's.
            (weft::current().is_virtual() && (lo..hi).contains(&here)).then_some(hi - lo)
        }));
        if let (Some(size), 4096) = (size, page) {
            assert!(
                size <= 96 << 10 && size > 88 << 10,
                "a 96 KiB stack reports {size} bytes"
            );
        }
    }
}
