//! Virtual-thread stacks: a stack overflow is caught by the guard page and
//! reported by name (checked in a child process, since it aborts), and deep
//! but legal recursion works with the requested and the default stack sizes,
//! also across reschedules.
//!
//! The child process is this test binary re-executed with
//! `WEFT_TEST_OVERFLOW_CHILD=<mode>`; the `overflow_child` test is a no-op
//! unless that variable is set.

use std::hint::black_box;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use weft::{Builder, JoinHandle};

const LIMIT: Duration = Duration::from_secs(30);
const CHILD_VAR: &str = "WEFT_TEST_OVERFLOW_CHILD";
const FRAME: usize = 4096;

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

/// Recurses `frames` times with a ≥ 4 KiB frame each; yields every
/// `yield_every` frames (0: never). Returns the lowest stack address reached.
#[inline(never)]
fn dig(frames: usize, yield_every: usize) -> usize {
    let mut pad = [0u8; FRAME];
    black_box(&mut pad);
    if yield_every != 0 && frames.is_multiple_of(yield_every) {
        weft::yield_now();
    }
    let low = if frames == 0 {
        pad.as_ptr() as usize
    } else {
        dig(frames - 1, yield_every)
    };
    black_box(&pad); // keeps the frame alive: no tail call
    low
}

/// Uses at least `bytes` of stack; returns how many bytes it really used.
#[inline(never)]
fn use_stack(bytes: usize, yield_every: usize) -> usize {
    let top = 0u8;
    let top = black_box(&top) as *const u8 as usize;
    let low = dig(bytes / FRAME, yield_every);
    top - low
}

/// Recurses until the stack runs out.
#[inline(never)]
fn dig_forever(depth: usize) -> usize {
    let mut pad = [0u8; FRAME];
    black_box(&mut pad);
    if black_box(depth) == usize::MAX {
        return 0;
    }
    let r = dig_forever(depth + 1);
    black_box(&pad);
    r + 1
}

// ---------------------------------------------------------- deep but fine

#[test]
fn stack_size_8mib_allows_4mib_recursion() {
    let h = Builder::new()
        .name("deep-but-fine")
        .stack_size(8 << 20)
        .spawn(|| use_stack(4 << 20, 0))
        .expect("spawn");
    let used = join_timeout(h);
    assert!(used >= 4 << 20, "test bug: only used {used} bytes");
    assert!(used < 8 << 20, "test bug: used {used} bytes");
}

#[test]
fn default_stack_allows_96kib_recursion() {
    // The default stack is 128 KiB (DEFAULT_STACK_SIZE); the thread-local
    // area and the switch take a few KiB of its top.
    assert_eq!(weft::DEFAULT_STACK_SIZE, 128 << 10);
    let h = weft::spawn(|| use_stack(96 << 10, 0));
    assert!(join_timeout(h) >= 96 << 10);
}

#[test]
fn deep_stack_survives_reschedules_and_migration() {
    let handles: Vec<_> = (0..4)
        .map(|i| {
            Builder::new()
                .name(format!("deep-yielder-{i}"))
                .stack_size(8 << 20)
                .spawn(|| use_stack(3 << 20, 16))
                .expect("spawn")
        })
        .collect();
    for h in handles {
        assert!(join_timeout(h) >= 3 << 20);
    }
}

#[test]
fn deep_stacks_are_reusable() {
    // Pooled stacks that once grew deep must come back usable (and, if
    // trimmed with MADV_DONTNEED, still mapped and zero-filled).
    for round in 0..20 {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                Builder::new()
                    .stack_size(8 << 20)
                    .spawn(|| use_stack(4 << 20, 0))
                    .expect("spawn")
            })
            .collect();
        for h in handles {
            assert!(join_timeout(h) >= 4 << 20, "round {round}");
        }
        // Interleave small threads that may receive the recycled stacks.
        let small: Vec<_> = (0..64).map(|i| weft::spawn(move || i)).collect();
        for (i, h) in small.into_iter().enumerate() {
            assert_eq!(join_timeout(h), i);
        }
    }
}

// ------------------------------------------------------- overflow (child)

/// Entry point of the child process; does nothing in a normal test run.
#[test]
fn overflow_child() {
    let Ok(mode) = std::env::var(CHILD_VAR) else {
        return;
    };
    if mode == "exhaust" {
        exhaust_address_space();
        return;
    }
    let builder = match mode.as_str() {
        "named" => Builder::new().name("deep"),
        "named-small" => Builder::new().name("deep").stack_size(64 << 10),
        "unnamed" => Builder::new(),
        "after-yields" => Builder::new().name("deep").stack_size(256 << 10),
        other => panic!("unknown child mode {other}"),
    };
    let yields = mode == "after-yields";
    let h = builder
        .spawn(move || {
            if yields {
                use_stack(64 << 10, 4);
            }
            dig_forever(0)
        })
        .expect("spawn");
    let r = h.join();
    println!("CHILD-SURVIVED-OVERFLOW {:?}", r.map_err(|_| "panic"));
}

fn vm_size_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmSize:"))
        .expect("VmSize in /proc/self/status");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Child mode "exhaust": with the address space limited, spawning parked
/// threads must eventually fail with an error from `Builder::spawn` (never
/// an abort), and the runtime must recover once they are gone.
fn exhaust_address_space() {
    const MAX: usize = 200_000; // 25 GiB of 128 KiB stacks: must hit the 3 GiB limit
    weft::spawn(|| ()).join().expect("warm-up"); // carriers exist now
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a properly initialised struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_AS, &mut lim), 0);
        lim.rlim_cur = vm_size_bytes() + (3 << 30);
        assert_eq!(libc::setrlimit(libc::RLIMIT_AS, &lim), 0, "setrlimit");
    }
    let go = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut handles = Vec::with_capacity(MAX);
    let mut error = None;
    while handles.len() < MAX {
        let go = go.clone();
        match Builder::new().spawn(move || {
            while !go.load(std::sync::atomic::Ordering::SeqCst) {
                weft::park();
            }
        }) {
            Ok(h) => handles.push(h),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    match error {
        Some(e) => println!("SPAWN-ERR after {}: {e}", handles.len()),
        None => println!("NO-ERROR after {MAX} spawns"),
    }
    go.store(true, std::sync::atomic::Ordering::SeqCst);
    for h in &handles {
        h.thread().unpark();
    }
    for h in handles {
        h.join().expect("parked thread panicked");
    }
    // Stacks are back in the pool: spawning works again.
    for i in 0..100 {
        let h = Builder::new()
            .spawn(move || i)
            .unwrap_or_else(|e| panic!("spawn after recovery failed: {e}"));
        assert_eq!(h.join().expect("join after recovery"), i);
    }
    println!("RECOVERED");
}

struct ChildOutput {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn run_child(mode: &str) -> ChildOutput {
    let mut child = Command::new(std::env::current_exe().expect("current_exe"))
        .args([
            "--exact",
            "overflow_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, mode)
        .env_remove("WEFT_STACK_SIZE")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child");
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
            panic!("child '{mode}' still running after 60 s (hung on stack overflow?)");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    ChildOutput {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

fn assert_overflow_reported(mode: &str, name: Option<&str>) {
    let out = run_child(mode);
    let report = format!(
        "child mode {mode}: status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status, out.stdout, out.stderr
    );
    assert!(
        !out.status.success(),
        "child survived an overflow\n{report}"
    );
    assert!(
        !out.stdout.contains("CHILD-SURVIVED-OVERFLOW"),
        "join returned after an overflow\n{report}"
    );
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "expected death by SIGABRT (like std's overflow handler)\n{report}"
    );
    assert!(
        out.stderr.contains("has overflowed its stack"),
        "no overflow message\n{report}"
    );
    assert!(
        out.stderr.contains("WEFT_STACK_SIZE"),
        "the message does not say how to get a bigger stack\n{report}"
    );
    if let Some(name) = name {
        let want = format!("virtual thread '{name}'");
        assert!(out.stderr.contains(&want), "missing {want:?}\n{report}");
    } else {
        assert!(
            out.stderr.contains("virtual thread"),
            "message should say it was a virtual thread\n{report}"
        );
    }
}

#[test]
fn exhausted_address_space_is_a_spawn_error_not_an_abort() {
    let out = run_child("exhaust");
    let report = format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status, out.stdout, out.stderr
    );
    assert!(
        out.stdout.contains("SPAWN-ERR after"),
        "Builder::spawn never returned an error under RLIMIT_AS\n{report}"
    );
    assert!(
        out.stdout.contains("RECOVERED"),
        "runtime did not recover\n{report}"
    );
    assert!(out.status.success(), "{report}");
}

#[test]
fn stack_overflow_is_reported_with_thread_name() {
    assert_overflow_reported("named", Some("deep"));
}

#[test]
fn stack_overflow_is_caught_with_small_custom_stack() {
    assert_overflow_reported("named-small", Some("deep"));
}

#[test]
fn stack_overflow_of_unnamed_thread_is_reported() {
    assert_overflow_reported("unnamed", None);
}

#[test]
fn stack_overflow_after_reschedules_is_reported() {
    assert_overflow_reported("after-yields", Some("deep"));
}
